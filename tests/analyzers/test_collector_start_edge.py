"""A collector's file that began after its trackers did, read at the CLI (``stormotel analyze
FOLDER``): the trackers' start gauge (``stormotel.tracker.start.timestamp``, in every export's
context) says the ranks were running long before the file's first record.

Four trackers start together and run 10 minutes before an OpenTelemetry Collector's ``file``
exporter begins writing (a collector deployed, or restarted, after the job). Rank 3 rises 4 GiB
1.5 s into the file, ranks 0 and 1 follow 25 and 30 s in, rank 2 34 s in. The file alone looks
like a job that started with it: rank 3's rise "climbs from the very start" and was set aside
as its warm-up, and rank 0, the first follower, was named the first cause at **high** (the
wrong rank). With the start gauge read, the file is a window cut into running ranks: no
warm-up at their first samples, and rank 3 leads. The trackers' own archives (every sample from
their start) name rank 3 with or without it.

The archives are written by the tracker's real archive writer (``Telemetry`` of a real
``MemoryTracker`` configuration, its SDK-collected context lines with the start gauge) from
samples on a past clock — the tracker's start set to that clock's start — and re-batched as
the collector's exporter writes them (``benchmarks/bench_collector_file.py``: many ranks'
resources per request, zstd records behind 4-byte lengths, the form every released version
writes), keeping only the batches from the collector's start on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stormotel.analyzers.sources import load_paths
from stormotel.analyzers.timeline import KIND_TRACKER_START

from tests.bench_modules import load_benchmark
from tests.cli import run_stormotel_here
from tests.named import named_above_low

GIB = 1 << 30
JOB = "collector-late"
RESTART_JOB = "archive-restart"
HZ = 2.0
#: The trackers' start, the collector's first batch, and the end of the data (ns, a past clock).
START_NS = 1_790_000_000_000_000_000
COLLECTOR_NS = START_NS + 600 * 10**9
END_NS = COLLECTOR_NS + 120 * 10**9
#: Seconds after the collector's start at which each rank rises 4 GiB (rank 3 first).
RISES = {0: 25.0, 1: 30.0, 2: 34.0, 3: 1.5}


def _write_process(folder: Path, job: str, rank: int, world: int, started_ns: int,
                   t: np.ndarray, used: np.ndarray) -> None:
    """One tracker process's compact archive of ``rank`` (samples at ``t``, device memory
    ``used``) through the tracker's Telemetry and writer, started at ``started_ns``; a later
    process of the same rank appends its files after the earlier one's, as a restarted
    tracker's writer does."""
    from stormotel.archive_writer import ArchiveLimits
    from stormotel.config import ExportConfig, IdentityConfig, StallConfig
    from stormotel.samplers.base import Sample
    from stormotel.telemetry import Telemetry
    from stormotel.tracker import MemoryTracker

    tracker = MemoryTracker(
        sampler="simulated", sampling_interval=1 / HZ, env={},
        identity=IdentityConfig(job_id=job, rank=rank, world_size=world, local_rank=rank,
                                host="node-0"),
        export=ExportConfig(archive_dir=folder, archive_format="compact", archive_interval_s=1e9),
        stall=StallConfig(enabled=False))
    tracker.state.started_ns = started_ns  # what start_tracking stamps, on the samples' clock
    telemetry = Telemetry(tracker.resource(), tracker.attributes, tracker.state,
                          tracker.export_config, job, rank, env={})
    writer = next(d.archive for d in telemetry.destinations if d.archive is not None)
    writer.limits = ArchiveLimits(batch_s=1e9, context_s=1e9)
    for j, (ts, u) in enumerate(zip(t.tolist(), used.tolist(), strict=True)):
        writer.put(Sample(ts, allocated=u - GIB, reserved=u - GIB // 2, active=u - GIB,
                          device_used=u, device_total=80 * GIB, device_free=80 * GIB - u,
                          process_used=u), j, 0.0002)
        if (j + 1) % 2 == 0:  # a batch a second, the context every 10 s of data
            writer.flush(context=(j + 1) % 20 == 0)
    writer.close()
    telemetry.tracer_provider.shutdown()


def _used(rank: int, t: np.ndarray, started_ns: int) -> np.ndarray:
    """A 3 s warm-up from 2 to 30 GiB after ``started_ns``, flat after it (8 MiB noise)."""
    since = (t - started_ns) / 1e9
    used = 2 * GIB + np.clip(since / 3.0, 0.0, 1.0) * 28 * GIB
    return used + np.random.default_rng(rank).normal(0, 8 << 20, len(t))


def _write_rank(folder: Path, rank: int) -> None:
    """The late collector's job: one process per rank from ``START_NS``, its planted rise."""
    t = np.arange(START_NS, END_NS, int(1e9 / HZ), dtype=np.int64) + 7_000_000 * rank
    used = _used(rank, t, START_NS) + np.where(t >= COLLECTOR_NS + RISES[rank] * 1e9, 4 * GIB, 0)
    _write_process(folder, JOB, rank, len(RISES), START_NS, t, used.astype(np.int64))


def _write_restart_job(folder: Path) -> None:
    """Three ranks from ``START_NS`` for 180 s; rank 1's process dies 60 s in and a new one
    starts at 72 s, warming up again (nothing else rises)."""
    for rank in range(3):
        t = np.arange(START_NS, START_NS + 180 * 10**9, int(1e9 / HZ), dtype=np.int64) \
            + 7_000_000 * rank
        if rank != 1:
            _write_process(folder, RESTART_JOB, rank, 3, START_NS, t,
                           _used(rank, t, START_NS).astype(np.int64))
            continue
        again = START_NS + 72 * 10**9
        for began, part in ((START_NS, t < START_NS + 60 * 10**9), (again, t >= again)):
            _write_process(folder, RESTART_JOB, rank, 3, began, t[part],
                           _used(rank, t[part], began).astype(np.int64))


def _first_time(rm: bytes) -> int:
    """The first point's time in one request's ``ResourceMetrics`` text."""
    at = rm.find(b'"timeUnixNano":"')
    return int(rm[at + 16:rm.index(b'"', at + 16)])


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    work = tmp_path_factory.mktemp("collector-start")
    archive = work / "archive"
    for rank in RISES:
        _write_rank(archive, rank)
    archive = archive / JOB
    bench = load_benchmark("bench_collector_file")
    otelcol = work / "otelcol"
    otelcol.mkdir()
    exporter = bench.FileExporter(otelcol / "metrics.jsonl", "zstd", 1 << 30)
    kept = 0
    for rms, t_ns in bench.batches(archive):
        # The collector was not running before: only the requests it received are written.
        rms = [rm for rm in rms if _first_time(rm) >= COLLECTOR_NS]
        if rms:
            exporter.export(bench._PREFIX + b",".join(rms) + bench._SUFFIX, t_ns)
            kept += len(rms)
    exporter.close()
    assert kept > 100
    _write_restart_job(work / "archive")
    out: dict[str, Any] = {"folder": otelcol}
    for name, folder in (("collector", otelcol), ("archive", archive),
                         ("restart", work / "archive" / RESTART_JOB)):
        path = work / f"{name}.json"
        r = run_stormotel_here("analyze", str(folder), "--format", "json", "-o", str(path))
        assert path.exists(), (name, r.returncode, r.stderr[-2000:])
        out[name] = json.loads(path.read_text())
    return out


def test_a_collector_file_begun_after_its_trackers_names_the_leader_not_a_follower(
        reports: dict[str, dict[str, Any]]) -> None:
    cross = reports["collector"]["cross_rank"]
    assert named_above_low(cross) == {(3, "high")}, cross
    # Rank 3's rise 1.5 s into the file is not its warm-up (its tracker ran 10 min before).
    assert not any("warm-up of ranks" in n for n in cross["notes"]), cross["notes"]


def test_the_file_holds_every_trackers_start_but_none_of_their_first_minutes(
        reports: dict[str, Any]) -> None:
    timeline = load_paths([str(reports["folder"])])
    assert min(int(s.t_ns[0]) for s in timeline.ranks.values()) > COLLECTOR_NS - 10**9
    for series in timeline.ranks.values():
        m = series.markers
        assert m.start_ns[m.kind == KIND_TRACKER_START].tolist() == [START_NS]


def test_the_trackers_own_archives_name_the_leader(reports: dict[str, dict[str, Any]]) -> None:
    cross = reports["archive"]["cross_rank"]
    assert named_above_low(cross) == {(3, "high")}, cross
    # Their warm-ups at the trackers' start, in the archive, are set aside.
    assert any("warm-up of ranks [0, 1, 2, 3]" in n for n in cross["notes"]), cross["notes"]


def test_a_restarted_ranks_warm_up_in_its_archive_is_not_an_incident(
        reports: dict[str, dict[str, Any]]) -> None:
    # Rank 1's archive holds both processes' files and both starts: the second warm-up, 72 s
    # in, is the new process loading, not a rank leading (main: a one-rank incident at high).
    cross = reports["restart"]["cross_rank"]
    assert not named_above_low(cross), cross
    assert not cross["incidents"], cross["incidents"]
