"""The compact archive's columnar companion (``rank-R.NNNNN.metrics.cols.zst``).

A real tracker writes it; the analyzer reading it must build exactly the Timeline it builds from
the JSON alone (and `stormotel analyze` print the same report), a SIGKILLed tracker's samples
must all be seen once, and a companion that is cut, corrupt, hostile or someone else's must fall
back to the JSON with a counted note (``unusable_columns``), never a traceback or a different
answer.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import zstandard
from stormotel.analyzers.sources import load_paths
from stormotel.analyzers.sources.otlp_cols import _frames, _plan
from stormotel.analyzers.timeline import Timeline

from stormotel import archive_writer, schema
from stormotel.archive_format import COLS_SUFFIX, MAGIC, cols_path_for
from stormotel.archive_writer import ArchiveLimits, CompactArchiveWriter
from stormotel.errors import NoTelemetryError
from stormotel.samplers.base import Sample
from stormotel.samplers.simulated import SimulatedSampler
from stormotel.tracker import MemoryTracker
from tests.cli import run_stormotel_here
from tests.tracker.test_compact_read import _assert_same

SPIKE = "rank=1:first_spike@t=1.2s,delta=1GiB,lead=1ms"
REPO = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000_000_000
GIB = 2**30


@pytest.fixture
def small_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """Companion frames every 40 samples (the default, 3,000, is minutes of a real run)."""
    monkeypatch.setattr(archive_writer, "ArchiveLimits",
                        functools.partial(ArchiveLimits, cols_frame_samples=40))


def _same(got: Timeline, expect: Timeline, got_dir: Path, expect_dir: Path) -> None:
    """The Timelines are equal, the folder's name in notes aside."""
    got.sources = expect.sources = []
    expect.notes = [n.replace(str(expect_dir), str(got_dir)) for n in expect.notes]
    _assert_same(got, expect)


def _json_only(folder: Path, dest: Path) -> Path:
    """A copy of the archive folder without companions: what an earlier writer left."""
    shutil.copytree(folder, dest)
    for p in dest.rglob(f"*{COLS_SUFFIX}"):
        p.unlink()
    return dest


def _metrics_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob(f"*{schema.ARCHIVE_METRICS_SUFFIX}.zst"))


@pytest.fixture
def tracked(small_frames: None, make_tracker: Callable[..., MemoryTracker],
            tmp_path: Path) -> Path:
    """A default tracker's archive (compact + traces), a planted spike for edges and markers."""
    sampler = SimulatedSampler(rank=1, faults=SPIKE)
    tracker = make_tracker(sampler=sampler, sampling_interval=0.01, archive_interval=0.1,
                           warmup_samples=5)
    sampler.epoch_ns = time.time_ns() - 700_000_000
    tracker.start_tracking()
    try:
        # past the spike (t = 1.2 s) AND 130 samples (four 40-sample frames' worth): a busy
        # machine samples less often than every 10 ms, so a wall-clock end alone left two
        # frames at load 24; the guard only stops a tracker that stopped sampling
        guard = time.monotonic() + 60
        while (sampler.elapsed_s() < 2.0 or tracker.stats["samples"] < 130) \
                and time.monotonic() < guard:
            time.sleep(0.05)
    finally:
        tracker.stop_tracking()
    return tmp_path / "archive"


def test_tracker_writes_a_companion_whose_timeline_is_the_jsons(tracked: Path,
                                                                 tmp_path: Path) -> None:
    [path] = _metrics_files(tracked)
    cols = cols_path_for(path)
    assert cols.is_file()
    plan = _plan(path, cols, 2**30, None)
    assert plan is not None
    frames, tail, _attrs = plan
    assert len(frames) >= 3 and tail == b""  # closed: every sample is in a frame
    assert sum(f.header.samples for f in frames) >= 100
    assert frames[-1].header.json_end == path.stat().st_size
    # `zstdcat` and python-zstandard read the JSON file of several frames to its end.
    if shutil.which("zstd"):
        text = subprocess.run(["zstd", "-dc", str(path)], capture_output=True,
                              check=True).stdout
        stamps = [dp["timeUnixNano"] for line in text.splitlines()
                  for m in json.loads(line)["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
                  if m["name"] == schema.DEVICE_USED.name for dp in m["gauge"]["dataPoints"]]
        assert [int(s) for s in stamps] == np.concatenate([f.t for f in frames]).tolist()

    with_cols = load_paths([str(tracked)])
    json_only = load_paths([str(_json_only(tracked, tmp_path / "json-only"))])
    assert with_cols.total_samples() == sum(f.header.samples for f in frames)
    assert len(with_cols.ranks[1].markers.kind)  # the spike's edges (from the traces file)
    _same(with_cols, json_only, tracked, tmp_path / "json-only")


def _analyze(folder: Path) -> tuple[int, dict[str, object]]:
    out = folder.parent / f"{folder.name}-report.json"
    # the command's entry point in this process: the report is under test, not a start-up
    run = run_stormotel_here("analyze", str(folder), "--format", "json", "-o", str(out), "-q")
    assert "Traceback" not in run.stderr, run.stderr
    report = json.loads(out.read_text()) if out.exists() else {}
    report.get("extra", {}).pop("analysis_seconds", None)
    return run.returncode, report


def test_analyze_cli_prints_the_same_report_with_and_without_companions(tracked: Path) -> None:
    code, report = _analyze(tracked)
    for p in tracked.rglob(f"*{COLS_SUFFIX}"):
        p.unlink()
    assert _analyze(tracked) == (code, report)
    assert report


# --- a SIGKILLed `stormotel track` ---------------------------------------------------------
def _killed_track(archive: Path) -> None:
    """`stormotel track --sampler simulated` (companion frames every 25 samples), SIGKILLed
    once two frames are on disk and JSON lines after them."""
    script = ("import functools, sys\n"
              "import stormotel.archive_writer as aw\n"
              "aw.ArchiveLimits = functools.partial(aw.ArchiveLimits, cols_frame_samples=25)\n"
              "from stormotel.cli import main\n"
              "sys.exit(main(sys.argv[1:]))\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", script, "track", "--sampler", "simulated",
                             "--duration", "60", "--interval", "0.02", "--archive",
                             str(archive), "--job-id", "kill", "--archive-interval", "0.1"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            cols = list(archive.rglob(f"*{COLS_SUFFIX}"))
            frames = _frames(cols[0].read_bytes(), 2**30) if cols else []
            if len(frames) >= 2:
                break
            time.sleep(0.05)
        time.sleep(0.25)  # a few batches into the next frame
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_sigkilled_track_every_sample_of_the_json_seen_once(tmp_path: Path) -> None:
    for attempt in range(3):  # a kill landing right on a frame's end leaves no tail: again
        archive = tmp_path / f"a{attempt}"
        _killed_track(archive)
        folder = archive / "kill"
        [path] = _metrics_files(folder)
        plan = _plan(path, cols_path_for(path), 2**30, None)
        assert plan is not None
        frames, _tail, _ = plan
        in_frames = sum(f.header.samples for f in frames)
        json_only = load_paths([str(_json_only(folder, tmp_path / f"json-only{attempt}"))])
        if len(frames) >= 2 and len(json_only.ranks[0]) > in_frames:
            break  # the case under test: frames, then samples only the JSON holds
    else:
        pytest.fail("no run was killed between two companion frames")
    with_cols = load_paths([str(folder)])
    a, b = with_cols.ranks[0], json_only.ranks[0]
    assert len(a) == len(b) > in_frames  # the tail's samples too
    np.testing.assert_array_equal(a.t_ns, b.t_ns)  # none lost, none twice
    assert set(a.values) == set(b.values)
    for name in a.values:
        np.testing.assert_array_equal(a.field(name), b.field(name))
    assert with_cols.skipped == json_only.skipped
    assert not with_cols.skipped.get("unusable_columns")


# --- hostile and broken companions -----------------------------------------------------------
def _write(folder: Path, rank: int = 3, n: int = 200, **limits: object) -> CompactArchiveWriter:
    ident = {schema.ATTR_JOB_ID: "j", schema.ATTR_RANK: str(rank), schema.ATTR_WORLD_SIZE: "8"}
    w = CompactArchiveWriter(folder, rank, {"service.name": "x"}, ident, collect=None,
                             on_failure=lambda r: None, on_drop=lambda r, n: None,
                             limits=ArchiveLimits(batch_s=3600, **limits))  # type: ignore[arg-type]
    for i in range(n):
        w.put(Sample(T0 + i * 10**8, allocated=4 * GIB + i, reserved=5 * GIB + 7 * i,
                     device_used=6 * GIB + 3 * i, device_total=80 * GIB), i // 10, 0.1)
        if i % 10 == 9:
            w.flush()
    w.close()
    return w


@pytest.fixture
def written(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    _write(folder, cols_frame_samples=50)
    return folder


def _contents(path: Path) -> list[bytes]:
    return _frames(path.read_bytes(), 2**30)


def _header_edit(content: bytes, **changes: object) -> bytes:
    (hlen,) = struct.unpack_from("<I", content, len(MAGIC))
    start = len(MAGIC) + 4
    header = json.loads(content[start:start + hlen])
    header.update(changes)
    head = json.dumps(header).encode()
    return MAGIC + struct.pack("<I", len(head)) + head + content[start + hlen:]


def _compress(contents: list[bytes]) -> bytes:
    c = zstandard.ZstdCompressor(write_checksum=True)
    return b"".join(c.compress(x) for x in contents)


def _hostile_cases(cols: Path, other: Path) -> Iterator[tuple[str, bytes, bool]]:
    """(name, companion bytes, noted): every one must read as the JSON does."""
    good = _contents(cols)
    raw = cols.read_bytes()
    yield "cut mid-frame", raw[: len(raw) - 40], False
    yield "empty", b"", False
    yield "zeros after the last frame (a crash's unwritten end)", raw + b"\0" * 5000, False
    yield "another version", _compress([_header_edit(good[0], version=99), *good[1:]]), False
    yield "not zstd", b"\x00garbage" * 50, True
    yield "bit flip", raw[:100] + bytes([raw[100] ^ 0xFF]) + raw[101:], True
    yield "bad header json", _compress([good[0][:14] + b"{{{" + good[0][17:]]), True
    yield "huge declared samples", _compress([_header_edit(good[0], samples=2**40)]), True
    yield "declared length past the bytes", \
        _compress([_header_edit(good[0], context_bytes=9)]), True
    yield "header length past the frame", _compress([MAGIC + struct.pack("<I", 2**31)]), True
    yield "wrong rank", _compress([_header_edit(x, rank=5) for x in good]), True
    yield "wrong file number", _compress([_header_edit(x, seq=7) for x in good]), True
    yield "JSON range beyond the file", _compress([_header_edit(good[0], json_end=10**12)]), True
    yield "frames out of order", _compress([good[1], good[0], *good[2:]]), True
    yield "unknown header field", _compress([_header_edit(good[0], exec="x")]), True
    yield "another file's companion", other.read_bytes(), True
    yield "negative count", _compress([_header_edit(good[0], samples=-1)]), True


def test_hostile_companions_fall_back_to_the_json_with_a_note(written: Path,
                                                              tmp_path: Path) -> None:
    [path] = _metrics_files(written)
    cols = cols_path_for(path)
    assert len(_contents(cols)) >= 4
    other = tmp_path / "other"
    _write(other, rank=3, n=120, cols_frame_samples=50)  # same rank, different samples
    [other_cols] = other.rglob(f"*{COLS_SUFFIX}")
    expect = load_paths([str(_json_only(written, tmp_path / "json-only"))])
    expect.sources = []
    expect.notes = [n.replace(str(tmp_path / "json-only"), str(written)) for n in expect.notes]
    good = cols.read_bytes()
    for name, data, noted in _hostile_cases(cols, other_cols):
        cols.write_bytes(data)
        got = load_paths([str(written)])
        assert got.total_samples() == expect.total_samples() == 200, name
        assert got.skipped.get("unusable_columns", 0) == (1 if noted else 0), \
            (name, got.skipped, got.notes)
        if noted:
            assert any("unusable_columns" in n and "the JSON file was read instead" in n
                       for n in got.notes), name
            got.skipped.pop("unusable_columns")
            got.notes = [n for n in got.notes if "unusable_columns" not in n]
        got.sources = []
        _assert_same(got, expect)
    cols.write_bytes(good)


def test_job_filter_reads_the_same_through_the_companion(written: Path, tmp_path: Path) -> None:
    json_only = _json_only(written, tmp_path / "json-only")
    _same(load_paths([str(written)], job_id="j"), load_paths([str(json_only)], job_id="j"),
          written, json_only)
    with pytest.raises(NoTelemetryError) as a:  # another job's files: the JSON path decides
        load_paths([str(written)], job_id="another-job")
    with pytest.raises(NoTelemetryError) as b:
        load_paths([str(json_only)], job_id="another-job")
    assert str(a.value).replace(str(written), "") == str(b.value).replace(str(json_only), "")


def test_hostile_companion_exit_code_and_report_stay_the_jsons(written: Path) -> None:
    [path] = _metrics_files(written)
    cols = cols_path_for(path)
    code, report = _analyze(written)
    cols.write_bytes(_compress([_header_edit(_contents(cols)[0], samples=2**40)]))
    bad_code, bad_report = _analyze(written)
    assert bad_code == code
    for r in (report, bad_report):
        r.pop("notes", None)
        r.pop("skipped", None)
    assert json.dumps(bad_report, sort_keys=True, default=str) == \
        json.dumps(report, sort_keys=True, default=str)


def test_values_the_companion_cannot_hold_exactly_stay_in_the_json(tmp_path: Path) -> None:
    """None, floats, an int beyond int64: masks and f8 columns, then the JSON from there on."""
    folder = tmp_path / "in"
    w = CompactArchiveWriter(folder, 2, {}, {schema.ATTR_RANK: "2", schema.ATTR_JOB_ID: "j"},
                             collect=None, on_failure=lambda r: None,
                             on_drop=lambda r, n: None,
                             limits=ArchiveLimits(batch_s=3600, cols_frame_samples=20))
    for i in range(100):
        w.put(Sample(T0 + i * 10**8, allocated=None if i % 3 else i * 1000,
                     reserved=float(i) * 1.5 + 0.25,
                     device_used=2**70 if i == 75 else 6 * GIB + i,
                     device_total=80 * GIB), None, None)
        if i % 10 == 9:
            w.flush()
    w.close()
    [path] = _metrics_files(folder)
    plan = _plan(path, cols_path_for(path), 2**30, None)
    assert plan is not None
    frames, tail, _ = plan
    assert len(frames) == 3 and tail  # the frame holding 2**70 was never written
    assert {c.name: (c.dtype, c.mask) for c in frames[0].header.columns}[
        schema.ALLOC_ALLOCATED.name] == ("<i8", True)
    got = load_paths([str(folder)])
    expect = load_paths([str(_json_only(folder, tmp_path / "json-only"))])
    _same(got, expect, folder, tmp_path / "json-only")


# --- rotation and the bound on disk ----------------------------------------------------------
def test_rotation_keeps_a_companion_per_file_and_deletes_it_with_its_file(
        tmp_path: Path) -> None:
    folder = tmp_path / "in"
    w = _write(folder, n=300, file_max_bytes=1, max_files=3, cols_frame_samples=1000)
    files = w.files
    assert [f.name for f in files] == [f"rank-3.{n:05d}.metrics.jsonl.zst" for n in (27, 28, 29)]
    companions = sorted(folder.glob(f"*{COLS_SUFFIX}"))
    assert companions == [cols_path_for(f) for f in files]  # none orphaned, none missing
    for f in files:  # each file's companion closed at rotation: one frame, nothing uncovered
        plan = _plan(f, cols_path_for(f), 2**30, None)
        assert plan is not None and len(plan[0]) == 1 and plan[1] == b""
    got = load_paths([str(folder)])
    expect = load_paths([str(_json_only(folder, tmp_path / "json-only"))])
    assert got.total_samples() == 30
    _same(got, expect, folder, tmp_path / "json-only")


def test_size_bound_counts_the_companion(tmp_path: Path) -> None:
    """Rotation at ``file_max_bytes`` of JSON and companion together."""
    sizes = {}
    for label, on in (("with", True), ("without", False)):
        w = _write(tmp_path / label, n=2000, file_max_bytes=20_000, max_files=1000,
                   cols_frame_samples=50, columns=on)
        sizes[label] = len(w.files)
        assert bool(list((tmp_path / label).glob(f"*{COLS_SUFFIX}"))) is on
    assert sizes["with"] > sizes["without"]


def test_json_without_companion_is_read_as_before(written: Path, tmp_path: Path) -> None:
    """An earlier writer's file (one zstd frame, no companion) reads as it always did."""
    [path] = _metrics_files(written)
    text = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(
        path.read_bytes())
    old = tmp_path / "old"
    old.mkdir()
    (old / path.name).write_bytes(zstandard.ZstdCompressor().compress(text))
    got = load_paths([str(old)])
    expect = load_paths([str(written)])
    _same(got, expect, old, written)
