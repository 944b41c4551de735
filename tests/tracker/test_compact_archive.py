"""The compact archive (the default format): every sample, many per OTLP line, zstd, rotated.

Checked at the boundaries users touch: the files on disk (official protobuf classes, the zstd
CLI), the analyzer reading them back, and a tracker process killed with SIGKILL.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import zstandard
from google.protobuf import json_format
from stormotel.analyzers.sources import load_paths

from stormotel import schema
from stormotel.archive_writer import ArchiveLimits, CompactArchiveWriter
from stormotel.samplers.base import Sample
from stormotel.samplers.simulated import SimulatedSampler
from stormotel.tracker import MemoryTracker
from tests.tracker.otlp_util import MetricsRequest, attrs, points

SPIKE = "rank=1:first_spike@t=2.5s,delta=1GiB,lead=1ms"


def _lines(path: Path) -> list[bytes]:
    z = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
    return z.decompress(path.read_bytes()).splitlines()


def _requests(folder: Path) -> list[MetricsRequest]:
    files = sorted(folder.rglob(f"*{schema.ARCHIVE_METRICS_SUFFIX}.zst"))
    return [json_format.Parse(line, MetricsRequest()) for f in files for line in _lines(f)]


def test_round_trip_keeps_every_sample_peak_and_edge(make_tracker: Callable[..., MemoryTracker],
                                                     tmp_path: Path) -> None:
    sampler = SimulatedSampler(rank=1, faults=SPIKE)
    tracker = make_tracker(sampler=sampler, archive_interval=0.25,  # the default format
                           warmup_samples=5)
    # Epoch 0.7 s ago: the simulated cache warm-up (first 0.6 s) is over; the step comes 1.8 s in.
    sampler.epoch_ns = time.time_ns() - 700_000_000
    tracker.start_tracking()
    while sampler.elapsed_s() < 2.8:
        time.sleep(0.05)
    tracker.stop_tracking()
    ring = tracker.ring.snapshot()
    assert tracker.stats["samples"] == len(ring) >= 20

    requests = _requests(tmp_path / "archive")
    assert 3 <= len(requests) < len(ring) / 3  # batches, not one line per sample
    used = [(p.time_unix_nano, p.as_int) for res, name, p in points(requests)
            if name == schema.DEVICE_USED.name]
    assert [t for t, _ in used] == [int(t) for t in ring["timestamp_ns"]]
    assert [v for _, v in used] == [int(v) for v in ring["device_used"]]
    for req in requests:  # identity once, in the resource; no attributes on per-sample points
        res = attrs(req.resource_metrics[0].resource.attributes)
        assert res[schema.ATTR_RANK] == "1" and res[schema.ATTR_JOB_ID] == "t-job"
    assert all(not p.attributes for _res, name, p in points(requests)
               if name == schema.DEVICE_USED.name)
    identity = {schema.ATTR_RANK, schema.ATTR_JOB_ID}  # nor on the SDK-collected context points
    assert not [(name, p) for _r, name, p in points(requests)
                if identity & set(attrs(p.attributes))]
    durations = [(p.time_unix_nano, name) for _r, name, p in points(requests)
                 if name == schema.SAMPLE_DURATION.name]  # once per sample, as a gauge
    assert sorted(t for t, _ in durations) == [int(t) for t in ring["timestamp_ns"]]
    peaks = [p.as_int for _r, name, p in points(requests) if name == schema.DEVICE_USED_PEAK.name]
    assert max(peaks) == int(ring["device_used"].max())  # the SDK peak window, exact

    timeline = load_paths([str(tmp_path / "archive")])
    series = timeline.ranks[1]
    assert len(series) == len(ring)
    np.testing.assert_array_equal(series.t_ns, ring["timestamp_ns"].astype(np.int64))
    np.testing.assert_array_equal(series.field("device_used"), ring["device_used"])
    np.testing.assert_array_equal(series.field("allocated"), ring["allocated"])
    assert series.field("device_used").max() - series.field("device_used").min() >= 2**30
    fired = tracker.stats["first_rise_ns"]
    assert fired is not None, (tracker.stats, ring["timestamp_ns"][:6])
    rises = series.markers.start_ns[series.markers.kind == "first_rise"]
    assert list(rises) == [fired]
    assert not timeline.skipped


def test_zstd_cli_reads_the_archive(make_tracker: Callable[..., MemoryTracker],
                                    tmp_path: Path) -> None:
    if shutil.which("zstd") is None:
        pytest.skip("zstd CLI not installed")
    tracker = make_tracker(archive_format="compact", archive_interval=0.2)
    tracker.start_tracking()
    time.sleep(0.5)
    tracker.stop_tracking()
    path = tracker.archive_files[0] if tracker.archive_files else None
    assert path is not None and path.name == "rank-1.00000.metrics.jsonl.zst"
    out = subprocess.run(["zstd", "-dc", str(path)], capture_output=True, check=True).stdout
    lines = out.splitlines()
    assert lines and all(json_format.Parse(x, MetricsRequest()).resource_metrics for x in lines)


def test_sigkilled_tracker_leaves_an_archive_read_to_its_last_batch(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "from stormotel.tracker import MemoryTracker\n"
        f"t = MemoryTracker(sampler='simulated', sampling_interval=0.02, job_id='k', rank=0, "
        f"env={{}}, archive_dir={str(tmp_path)!r}, "
        "archive_interval=0.2)\n"
        "t.start_tracking()\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"started"
        time.sleep(1.5)
        killed_at = time.time_ns()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    timeline = load_paths([str(tmp_path)])
    series = timeline.ranks[0]
    assert len(series) >= 30  # ~1.5 s at 50 Hz, minus at most the batch being built
    assert killed_at - int(series.t_ns[-1]) < 1.0e9  # lost no more than about one batch
    # Read at once, the open frame looks like a live job's; a minute later, like a dead one's.
    assert any("a running job's current batch" in n for n in timeline.notes), timeline.notes
    assert not timeline.skipped  # block flushes end on line boundaries: nothing half-decoded
    old = time.time() - 120
    for f in tmp_path.rglob("*.zst"):
        os.utime(f, (old, old))
    later = load_paths([str(tmp_path)])
    assert any("stops mid-frame" in n and "did not close it" in n
               for n in later.notes), later.notes


def _sample(i: int) -> Sample:
    return Sample(timestamp_ns=1_700_000_000_000_000_000 + i * 10**8, allocated=i * 1000,
                  reserved=i * 2000, device_used=i * 3000, device_total=10**10)


def test_rotation_bounds_files_and_queue_bounds_memory(tmp_path: Path) -> None:
    failures: list[str] = []
    drops: list[tuple[str, int]] = []
    limits = ArchiveLimits(batch_s=3600, file_max_bytes=1, max_files=3, queue_max=50)
    writer = CompactArchiveWriter(tmp_path, 4, {"service.name": "x"}, {"rank": "4"},
                                  collect=None, on_failure=failures.append,
                                  on_drop=lambda r, n: drops.append((r, n)), limits=limits)
    for batch in range(6):
        for i in range(10):
            writer.put(_sample(batch * 10 + i), batch, None)
        writer.flush()
    for i in range(60):  # nobody drains: the queue holds 50, the rest are counted
        writer.put(_sample(100 + i), None, None)
    writer.close()
    assert failures == []
    assert drops == [(schema.REASON_ARCHIVE_QUEUE_FULL, 1)] * 10
    files = writer.files
    assert len(files) == 3  # every batch rotated (1-byte limit); the oldest were deleted
    assert [f.name for f in files] == [f"rank-4.{n:05d}.metrics.jsonl.zst" for n in (4, 5, 6)]
    requests = _requests(tmp_path)
    steps = [p.as_int for _r, name, p in points(requests) if name == schema.STEP.name]
    assert steps == [4] * 10 + [5] * 10
    assert len([1 for _r, name, _p in points(requests) if name == schema.DEVICE_USED.name]) == 70


def test_unwritable_archive_is_counted_never_raised(make_tracker: Callable[..., MemoryTracker],
                                                    tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the archive folder should be")
    tracker = make_tracker(archive_dir=blocker, archive_format="compact", archive_interval=0.1)
    tracker.start_tracking()
    time.sleep(0.4)
    tracker.stop_tracking()
    stats = tracker.stats
    assert stats["samples"] >= 10
    failures = stats["export_failures"]
    assert failures.get(f"{schema.DEST_ARCHIVE}/enotdir", 0) >= 2, failures


def test_track_cli_compact_archive_then_analyze(tmp_path: Path) -> None:
    """The user path: `stormotel track --archive-format compact`, then `stormotel analyze`."""
    cmd = [sys.executable, "-m", "stormotel"]
    out = subprocess.run([*cmd, "track", "--sampler", "simulated", "--duration", "1",
                          "--interval", "0.05", "--archive", str(tmp_path), "--job-id", "cz",
                          "--archive-format", "compact", "--archive-interval", "0.3"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    files = sorted((tmp_path / "cz").glob("*.zst"))
    assert [f.name for f in files] == ["rank-0.00000.metrics.cols.zst",  # the companion
                                       "rank-0.00000.metrics.jsonl.zst",
                                       "rank-0.traces.jsonl.zst"]  # spans, compressed too
    files = files[1:2]
    lines = _lines(files[0])
    assert 3 <= len(lines) <= 6  # ~20 samples in batches of 0.3 s (+ the final one)
    report = subprocess.run([*cmd, "analyze", str(tmp_path / "cz"), "--format", "json"],
                            capture_output=True, text=True, timeout=120)
    assert report.returncode in (0, 1), report.stderr
    doc = json.loads(report.stdout)
    assert doc["job_id"] == "cz" and doc["participating_ranks"] == [0]
    assert str(files[0]) in doc["sources"] and not doc["skipped"]
