"""Hostile telemetry files at the CLI boundary: each case asserts the exit code, one error line,
no traceback, bounded time and memory, and for the wrong-answer classes the right report."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pytest

from stormotel import exitcodes
from tests.hostile.corpus import GIB, T0, events, healthy_folder, write
from tests.hostile.harness import assert_clean, run_bounded

FOUND = (exitcodes.OK, exitcodes.FINDINGS)


def analyze_json(*args: str, **kw) -> tuple:
    """``stormotel analyze ARGS --format json -q`` (forked, :func:`run_bounded`), its report."""
    run = run_bounded("analyze", *args, "--format", "json", "-q", **kw)
    return run, (run.json() if run.stdout.strip() else None)


def test_json_nested_100k_deep_in_a_folder_is_a_skip_and_keeps_every_valid_rank(tmp_path):
    folder = healthy_folder(tmp_path / "job")
    (folder / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    run, rep = analyze_json(str(folder), fresh=True)  # exit 0/1 from a fresh interpreter
    assert_clean(run, FOUND)
    assert rep["skipped"].get("unreadable_file") == 1
    assert rep["participating_ranks"] == [0, 1, 2, 3]


def test_json_nested_100k_deep_named_is_a_usage_error(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"events": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert_clean(run_bounded("analyze", str(deep), fresh=True),  # exit 2, a fresh interpreter
                 exitcodes.USAGE, message="deep.json")


@pytest.mark.parametrize("where", ["rank", "world_size", "timestamp_ns"])
@pytest.mark.parametrize("value", ["Infinity", '"inf"', "9" * 401, str(2**70), "1e400"])
def test_numbers_out_of_range_are_counted_not_crashes(tmp_path, where, value):
    folder = healthy_folder(tmp_path / "job")
    text = json.dumps(events(1, 10))
    old = f'"{where}": '
    text = re.sub(re.escape(old) + r"\d+", lambda _: old + value, text)
    (folder / "rank1.json").write_text(text)
    run, rep = analyze_json(str(folder))
    assert_clean(run, FOUND)
    if where == "world_size":  # an unusable world size is ignored; the others' is kept
        assert rep["world_size"] == 4
    else:
        assert sum(rep["skipped"].values()) >= 10
    if where == "rank":
        assert rep["participating_ranks"] == [0, 2, 3]


def test_absurd_world_size_and_rank_do_not_allocate_per_rank(tmp_path):
    folder = healthy_folder(tmp_path / "job")
    write(folder / "rank9.json", events(10**12, 20, world_size=10**12))
    run, rep = analyze_json(str(folder), memory=2 * GIB)
    assert_clean(run, FOUND)
    assert rep["participating_ranks"] == [0, 1, 2, 3]
    assert rep["skipped"]["rank_outside_world"] >= 1


def test_type_confusion_is_counted_not_a_crash(tmp_path):
    folder = healthy_folder(tmp_path / "job")
    ev = events(1, 50)
    ev[3]["schema_version"] = [4]
    for e in ev[5:]:
        e["session_id"] = {"a": 1}
        e["context"] = ["x", {"y": 2}]
    write(folder / "rank1.json", ev)
    run, rep = analyze_json(str(folder))
    assert_clean(run, FOUND)
    assert rep["skipped"]["unsupported_schema"] == 1
    assert 1 in rep["participating_ranks"]


def test_csv_field_over_128k(tmp_path):
    header = "schema_version,timestamp_ns,rank,allocator_allocated_bytes," \
             "allocator_reserved_bytes,device_used_bytes,device_total_bytes,context\n"
    row = f"4,{T0},0,1,2,3,{80 * GIB}," + '"' + "x" * 200_000 + '"\n'
    csv = tmp_path / "rank0.csv"
    csv.write_text(header + row)
    assert_clean(run_bounded("analyze", str(csv)), exitcodes.USAGE, message="not valid CSV")
    folder = healthy_folder(tmp_path / "job")
    (folder / "rank9.csv").write_text(header + row)
    run, rep = analyze_json(str(folder))
    assert_clean(run, FOUND)
    assert rep["skipped"]["unreadable_file"] == 1


def _zst_bomb(path: Path, gib: int = 6) -> Path:
    """One zstd frame of ``gib`` GiB of zeros (about 200 KB on disk): the frame a compressor
    writes for zeros (``ZstdCompressor(level=1)`` emits RLE blocks of 128 KiB, 4 bytes each, under
    a 512 KiB window and a declared content size), written directly instead of compressing
    ``gib`` GiB (0.3 s of CPU per GiB). RFC 8878: magic, frame header descriptor 0xC0 (8-byte
    content size, not single-segment), window descriptor 0x48 (2**19), then block headers of
    3 bytes (last-block bit, type 1 = RLE, size) each followed by the one repeated byte."""
    path.write_bytes(_zst_bomb_bytes(gib * 1024**3))
    return path


def _zst_bomb_bytes(size: int) -> bytes:
    """The frame of ``size`` bytes of zeros (a multiple of the 128 KiB block)."""
    rle = (_RLE_BLOCK << 3 | 1 << 1).to_bytes(3, "little") + b"\0"
    last = (_RLE_BLOCK << 3 | 1 << 1 | 1).to_bytes(3, "little") + b"\0"
    return (b"\x28\xb5\x2f\xfd\xc0\x48" + size.to_bytes(8, "little")
            + rle * (size // _RLE_BLOCK - 1) + last)


_RLE_BLOCK = 128 * 1024


def test_the_zstd_bomb_is_a_valid_frame_of_zeros() -> None:
    """The hand-written frame is what it claims: libzstd reads it as that many zeros and an
    end (checked at 64 MiB, 512 blocks: the bombs are the same frame with more blocks)."""
    import zstandard

    size = 64 * 1024**2
    raw = _zst_bomb_bytes(size)
    assert zstandard.frame_content_size(raw) == size
    out = zstandard.ZstdDecompressor().decompress(raw)
    assert len(out) == size and out.count(0) == size


@pytest.mark.slow  # decompresses gigabytes under RLIMIT_AS
def test_zstd_decompression_bomb_is_refused_within_memory(tmp_path):
    bomb = _zst_bomb(tmp_path / "rank0.jsonl.zst")
    assert bomb.stat().st_size < 1024**2
    run = run_bounded("analyze", str(bomb), memory=3 * GIB)
    assert_clean(run, exitcodes.USAGE, message="decompressed")


@pytest.mark.slow  # decompresses a gigabyte under RLIMIT_AS
def test_zstd_bomb_as_a_columnar_companion_falls_back_to_the_json(tmp_path):
    """A compact archive file whose companion (``.metrics.cols.zst``) is a bomb: the companion
    is refused within a frame's bound and the JSON file beside it is read."""
    from stormotel.archive_writer import ArchiveLimits, CompactArchiveWriter
    from stormotel.samplers.base import Sample

    folder = tmp_path / "job"
    ident = {"job_id": "j", "rank": "0", "world_size": "1"}
    w = CompactArchiveWriter(folder, 0, {}, ident, collect=None, on_failure=lambda r: None,
                             on_drop=lambda r, n: None,
                             limits=ArchiveLimits(batch_s=3600, columns=False))
    for i in range(50):
        w.put(Sample(1_700_000_000_000_000_000 + i * 10**8, allocated=GIB, reserved=2 * GIB,
                     device_used=3 * GIB, device_total=80 * GIB), i, None)
    w.close()
    _zst_bomb(folder / "rank-0.00000.metrics.cols.zst", gib=2)
    run, rep = analyze_json(str(folder), memory=3 * GIB)
    assert rep["skipped"] == {"unusable_columns": 1}, rep["skipped"]
    assert rep["participating_ranks"] == [0]
    assert_clean(run, FOUND)


@pytest.mark.slow  # decompresses gigabytes under RLIMIT_AS
def test_gzip_bomb_in_a_folder_is_a_counted_skip(tmp_path):
    folder = healthy_folder(tmp_path / "job")
    member = gzip.compress(b"\0" * (64 * 1024**2))
    with (folder / "bomb.json.gz").open("wb") as f:
        for _ in range(40):
            f.write(member)
    run, rep = analyze_json(str(folder), memory=3 * GIB)
    assert_clean(run, FOUND)
    assert rep["skipped"]["unreadable_file"] == 1 and len(rep["participating_ranks"]) == 4


def test_named_pipe_and_dev_zero_symlink_in_a_folder_are_skipped(tmp_path):
    folder = healthy_folder(tmp_path / "job")
    os.mkfifo(folder / "stuck.jsonl")
    os.symlink("/dev/zero", folder / "zero.json")
    run, rep = analyze_json(str(folder), timeout=60)
    assert_clean(run, FOUND, within_s=60)
    assert rep["skipped"]["not_regular_file"] == 2
    assert rep["participating_ranks"] == [0, 1, 2, 3]


def test_a_process_substitution_is_read_once(tmp_path):
    """``stormotel analyze <(cat rank0.json)``: the pipe was opened twice, once to peek at its
    first bytes (is it compressed?) and closed, which killed its writer (SIGPIPE), then to read
    it, waiting for a writer that was gone: the run hung. Now a pipe is opened once."""
    import subprocess
    import sys

    folder = healthy_folder(tmp_path / "job", ranks=2)
    run = subprocess.run(["bash", "-c", f'"{sys.executable}" -m stormotel analyze '
                          f'<(cat "{folder}/rank1.json") --format json -q'],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == exitcodes.OK, run.stderr
    assert json.loads(run.stdout)["participating_ranks"] == [1]


def test_named_dev_zero_is_bounded(tmp_path):
    run = run_bounded("analyze", "/dev/zero", env={"STORMOTEL_MAX_FILE_BYTES": str(64 * 1024**2)})
    assert_clean(run, exitcodes.USAGE, message="larger than")


def test_rank_outside_the_world_is_a_counted_skip_with_a_note(tmp_path):
    folder = healthy_folder(tmp_path / "job")
    write(folder / "rank7.json", events(7, 200, grow_at=100))
    run, rep = analyze_json(str(folder))
    assert_clean(run, FOUND)
    assert rep["participating_ranks"] == [0, 1, 2, 3]
    assert rep["skipped"]["rank_outside_world"] == 200
    assert any("outside world size 4" in n for n in rep["notes"])
    assert not rep["cross_rank"]["first_cause_suspects"]


def test_one_sample_of_1e300_bytes_is_not_evidence(tmp_path):
    folder = healthy_folder(tmp_path / "job")
    ev = events(2, 200)
    ev[120]["allocator_allocated_bytes"] = 1e300
    ev[120]["device_used_bytes"] = 1e300
    write(folder / "rank2.json", ev)
    run, rep = analyze_json(str(folder))
    assert_clean(run, FOUND)
    assert rep["skipped"]["impossible_bytes"] >= 1
    assert not rep["cross_rank"]["first_cause_suspects"]


def test_bytes_above_the_device_total_are_not_evidence(tmp_path):
    folder = healthy_folder(tmp_path / "job")
    ev = events(2, 200)
    for e in ev[120:125]:
        e["allocator_allocated_bytes"] = e["allocator_reserved_bytes"] = 500 * GIB
    write(folder / "rank2.json", ev)
    run, rep = analyze_json(str(folder))
    assert_clean(run, FOUND)
    assert rep["skipped"]["above_device_total"] >= 5
    assert not rep["cross_rank"]["first_cause_suspects"]


def test_samples_75_years_ahead_are_skipped(tmp_path):
    folder = healthy_folder(tmp_path / "job")
    ev = events(3, 200)
    for e in ev[150:]:
        e["timestamp_ns"] += 75 * 365 * 86400 * 10**9
    write(folder / "rank3.json", ev)
    run, rep = analyze_json(str(folder))
    assert_clean(run, FOUND)
    assert rep["skipped"]["future_timestamp"] == 50


def test_two_jobs_without_job_id_are_refused_with_the_ids(tmp_path):
    folder = healthy_folder(tmp_path / "job")
    for r in range(4):
        write(folder / f"other{r}.json", events(r, 50, job_id="job-b", t0=T0 + 10**12))
    run = run_bounded("analyze", str(folder))
    assert_clean(run, exitcodes.USAGE, message="--job-id")
    assert "'job-a'" in run.stderr and "'job-b'" in run.stderr
    run, rep = analyze_json(str(folder), "--job-id", "job-b")
    assert_clean(run, FOUND)
    assert rep["job_id"] == "job-b" and rep["skipped"]["other_job"] > 0
