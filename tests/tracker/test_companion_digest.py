"""The companion is bound to its JSON: a companion that disagrees with the JSON it was written
beside is never read as the truth.

Round three of the red team forged companions whose values, timestamps or sample count differ
from their JSON — doubled values, an erased spike, a 3 s shift, half the samples, NaNs — and the
reader took them: the first cause moved to another rank at high confidence. Each forgery here
keeps every header field a reader checks (rank, file number, JSON range, JSON tail, the digest
the writer recorded) and re-encodes the frame the way the writer does; `stormotel analyze` must
print exactly the report the JSON alone gives, plus one counted note.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import msgspec
import numpy as np
import pytest
import zstandard
from stormotel.analyzers.sources import load_paths
from stormotel.analyzers.sources.otlp_cols import _frames

from stormotel import archive_cols, archive_format, schema
from stormotel.archive_format import COLS_SUFFIX, Column, Frame, cols_path_for, parse_frame
from stormotel.archive_writer import ArchiveLimits, CompactArchiveWriter
from stormotel.samplers.base import Sample
from tests.cli import run_stormotel_here

T0 = 1_700_000_000_000_000_000
GIB = 2**30
STEP_NS = 10**8
N = 400
#: rank -> the sample where its 6 GiB rise begins: rank 2 leads by 3 s.
RISE_AT = {0: 250, 1: 250, 2: 220, 3: 250}


def _write(folder: Path, rank: int) -> None:
    ident = {schema.ATTR_JOB_ID: "bound", schema.ATTR_RANK: str(rank),
             schema.ATTR_WORLD_SIZE: "4"}
    w = CompactArchiveWriter(folder, rank, {"service.name": "x"}, ident, collect=None,
                             on_failure=lambda r: None, on_drop=lambda r, n: None,
                             limits=ArchiveLimits(batch_s=3600, cols_frame_samples=100))
    for i in range(N):
        grow = 6 * GIB if i >= RISE_AT[rank] else 0
        used = 6 * GIB + (i % 5) * 2**20 + grow
        w.put(Sample(T0 + i * STEP_NS, allocated=4 * GIB + grow, reserved=5 * GIB + grow,
                     device_used=used, device_total=80 * GIB), i // 10, 0.1)
        if i % 10 == 9:
            w.flush()
    w.close()


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bound") / "archive"
    for rank in RISE_AT:
        _write(folder, rank)
    return folder


def _analyze(folder: Path) -> tuple[int, dict[str, object]]:
    # the command's entry point in this process: the report is under test, not a start-up
    run = run_stormotel_here("analyze", str(folder), "--format", "json", "-q")
    assert "Traceback" not in run.stderr, run.stderr
    report = json.loads(run.stdout.replace(json.dumps(str(folder))[1:-1], "<archive>"))
    report.get("extra", {}).pop("analysis_seconds", None)
    return run.returncode, report


def _encode(frame: Frame, t: np.ndarray, columns: dict[str, list[object]]) -> bytes:
    """The frame re-encoded as the writer encodes it, with ``t`` and ``columns`` instead of
    its own, every other header field (digest included) kept."""
    arrays = [archive_format.plane(np.diff(t.astype(np.int64), prepend=np.int64(0))
                                  .astype("<i8"))]
    cols = []
    for name, values in columns.items():
        col = archive_cols._column(values)
        assert col is not None, name
        dtype, delta, bodies, count, mask = col
        cols.append(Column(name, dtype, delta, count, mask))  # type: ignore[arg-type]
        arrays.extend(bodies)
    h = frame.header
    header = msgspec.structs.replace(h, samples=len(t), t_first=int(t[0]), t_last=int(t[-1]),
                                     columns=cols)
    return archive_format.encode_frame(header, frame.resource, frame.context, arrays)


def _values(frame: Frame) -> dict[str, list[object]]:
    out: dict[str, list[object]] = {}
    for c in frame.header.columns:
        _t, v = frame.columns[c.name]
        out[c.name] = [int(x) for x in v] if c.dtype == "<i8" else [float(x) for x in v]
    return out


def _doubled(f: Frame) -> bytes:
    return _encode(f, f.t, {k: [2 * x for x in v] for k, v in _values(f).items()})  # type: ignore[operator]


def _spike_erased(f: Frame) -> bytes:
    return _encode(f, f.t, {k: [min(v) for _ in v] for k, v in _values(f).items()})  # type: ignore[type-var]


def _shifted_3s(f: Frame) -> bytes:
    return _encode(f, f.t + 3 * 10**9, _values(f))


def _half(f: Frame) -> bytes:
    return _encode(f, f.t[::2], {k: v[::2] for k, v in _values(f).items()})


def _nans(f: Frame) -> bytes:
    vals = {k: [float(x) for x in v] for k, v in _values(f).items()}  # type: ignore[arg-type]
    t = f.t
    # NaN is not a value the writer stores; the forger writes the f8 column by hand
    arrays = [archive_format.plane(np.diff(t, prepend=np.int64(0)).astype("<i8"))]
    cols = []
    for name, v in vals.items():
        a = np.array(v, dtype="<f8")
        a[::3] = np.nan
        cols.append(Column(name, "<f8", False, len(a), False))
        arrays.append(archive_format.plane(a))
    header = msgspec.structs.replace(f.header, columns=cols)
    return archive_format.encode_frame(header, f.resource, f.context, arrays)


def _format_1(f: Frame) -> bytes:
    """The same frame as a writer before the digest wrote it (its values are right)."""
    h = f.header
    head = json.loads(msgspec.json.encode(h))
    head.update(version=1)
    head.pop("digest")
    head.pop("digest_alg")
    raw = json.dumps(head).encode()
    return archive_format.MAGIC + len(raw).to_bytes(4, "little") + raw + f.payload


FORGERIES: dict[str, Callable[[Frame], bytes]] = {
    "doubled values": _doubled, "the spike erased": _spike_erased,
    "timestamps shifted 3 s": _shifted_3s, "half the samples": _half, "NaNs": _nans}


def _forge(cols: Path, forge: Callable[[Frame], bytes], frames: slice = slice(None)) -> None:
    contents = _frames(cols.read_bytes(), 2**30)
    c = zstandard.ZstdCompressor(write_checksum=True)
    out = []
    for i, content in enumerate(contents):
        chosen = i in range(len(contents))[frames]
        out.append(c.compress(forge(parse_frame(content)) if chosen else content))
    cols.write_bytes(b"".join(out))


def _without_note(report: dict[str, object], reason: str) -> dict[str, object]:
    report = json.loads(json.dumps(report))
    skipped = report.get("skipped") or {}
    assert isinstance(skipped, dict) and skipped.pop(reason, 0) == 1, skipped
    notes = report.get("notes") or []
    assert isinstance(notes, list)
    mine = [n for n in notes if reason in n]
    assert len(mine) == 1 and "the JSON file was read instead" in mine[0], notes
    report["notes"] = [n for n in notes if reason not in n]
    return report


@pytest.mark.slow
def test_a_forged_companion_gives_exactly_the_json_alone_report_plus_a_note(
        archive: Path, tmp_path: Path) -> None:
    import shutil

    json_alone = tmp_path / "json-alone"
    shutil.copytree(archive, json_alone)
    for p in json_alone.rglob(f"*{COLS_SUFFIX}"):
        p.unlink()
    expect_code, expect = _analyze(json_alone)
    suspects = expect["cross_rank"]["first_cause_suspects"]  # type: ignore[index]
    assert suspects and suspects[0]["rank"] == 2  # the planted leader, from the JSON
    assert _analyze(archive) == (expect_code, expect)  # the true companion: the same report

    for name, forge in {**FORGERIES, "format 1 (no digest)": _format_1}.items():
        folder = tmp_path / name.replace(" ", "-")
        shutil.copytree(archive, folder)
        [cols] = [p for p in folder.rglob(f"*{COLS_SUFFIX}") if p.name.startswith("rank-2.")]
        _forge(cols, forge, slice(1, 3))  # the frames around the spike
        code, got = _analyze(folder)
        reason = "unbound_columns" if "format 1" in name else "unusable_columns"
        assert code == expect_code, name
        assert _without_note(got, reason) == expect, name


def test_every_forgery_is_refused_at_the_timeline(archive: Path, tmp_path: Path) -> None:
    """The same at the reader (fast): the Timeline is the JSON's, one note, for each frame."""
    import shutil

    [path] = [p for p in archive.rglob(f"*{schema.ARCHIVE_METRICS_SUFFIX}.zst")
              if p.name.startswith("rank-2.")]
    expect = load_paths([str(path)])
    for name, forge in FORGERIES.items():
        for frames in (slice(0, 1), slice(3, 4), slice(None)):
            folder = tmp_path / f"{name.replace(' ', '-')}-{frames.start}"
            folder.mkdir()
            shutil.copy(path, folder / path.name)
            shutil.copy(cols_path_for(path), folder / cols_path_for(path).name)
            _forge(folder / cols_path_for(path).name, forge, frames)
            got = load_paths([str(folder / path.name)])
            assert got.skipped == {**expect.skipped, "unusable_columns": 1}, (name, got.skipped)
            assert len(got.ranks[2]) == len(expect.ranks[2]) == N
            for field in expect.ranks[2].values:
                np.testing.assert_array_equal(got.ranks[2].field(field),
                                              expect.ranks[2].field(field))
            np.testing.assert_array_equal(got.ranks[2].t_ns, expect.ranks[2].t_ns)
