"""Analyzer benchmarks: (a) the three algorithms on an in-memory Timeline, (b) loading speed.

    .venv/bin/python benchmarks/bench_analyzer.py algorithms --ranks 1024 --samples 36000
    .venv/bin/python benchmarks/bench_analyzer.py algorithms-sweep     # 64x3600 .. 1024x36000
    .venv/bin/python benchmarks/bench_analyzer.py loading --ranks 16 --samples 3600

Each ``algorithms`` run is its own process so its peak RSS (``ru_maxrss``) is its own; it
reports the time to build the Timeline, the wall and CPU time of ``analyze()`` (alignment, first
cause, gap analysis, collective attribution; CPU time is the fair number on a shared machine) and
the peak memory of the whole process. The data is the
planted-fault mix of the tests: rank 2 rises first by one interval, rank 5 drifts, every rank
has a synchronised gap spike with a collective marker, and ranks are noisy.
Results and commands are recorded in docs/benchmarks.md ("Analyzer").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.timeline import Markers, RankIdentity, RankSeries, Timeline

MIB = 1024 * 1024
GIB = 1024 * MIB
T0 = 1_700_000_000_000_000_000
INTERVAL = 100_000_000


def make_timeline(ranks: int, samples: int, seed: int = 0) -> Timeline:
    """Build the Timeline directly (float64 columns, as sources produce), one rank at a time."""
    rng = np.random.default_rng(seed)
    t = T0 + np.arange(samples, dtype=np.int64) * INTERVAL
    spike_at = samples // 2
    rise_at = samples // 3
    out: dict[int, RankSeries] = {}
    for r in range(ranks):
        reserved = np.full(samples, 8.0 * GIB)
        reserved[rise_at + (0 if r == 2 else 1):] += 2 * GIB
        alloc = 0.75 * reserved + rng.normal(0, 4 * MIB, samples)
        used = reserved + 512 * MIB + rng.normal(0, 2 * MIB, samples)
        used[spike_at:spike_at + 3] += 768 * MIB
        if r == 5:
            used += np.linspace(0, 2 * GIB, samples)
        total = np.full(samples, 80.0 * GIB)
        ts = int(t[spike_at])
        markers = Markers(np.array([ts], np.int64), np.array([ts + 3 * INTERVAL], np.int64),
                          np.array(["nccl:all_reduce"], object), np.array(["collective"], object))
        out[r] = RankSeries(RankIdentity(rank=r, job_id="bench", world_size=ranks), t,
                            {"allocated": alloc, "reserved": reserved, "device_used": used,
                             "device_total": total}, markers)
    return Timeline(ranks=out, job_id="bench", world_size=ranks)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_algorithms(ranks: int, samples: int) -> dict:
    t0 = time.perf_counter()
    tl = make_timeline(ranks, samples)
    build_s = time.perf_counter() - t0
    rss_before = peak_rss_mb()
    t1, c1 = time.perf_counter(), time.process_time()
    report = analyze(tl)
    analyze_s, analyze_cpu_s = time.perf_counter() - t1, time.process_time() - c1
    top = report.cross_rank.first_cause_suspects[0] if report.cross_rank.first_cause_suspects \
        else None
    kinds = sorted({(f.rank, f.classification) for f in report.gap_findings
                    if f.classification != "transient_spike"})
    return {"bench": "algorithms", "ranks": ranks, "samples_per_rank": samples,
            "samples": ranks * samples, "build_s": round(build_s, 2),
            "analyze_s": round(analyze_s, 2), "analyze_cpu_s": round(analyze_cpu_s, 2),
            "peak_rss_mb": round(peak_rss_mb(), 0),
            "rss_after_build_mb": round(rss_before, 0),
            "top_suspect": None if top is None else [top.rank, top.confidence],
            "drift_and_frag_findings": kinds,
            "collective_attributions": len(report.collective_attributions)}


def bench_loading(ranks: int, samples: int, per_line: int) -> list[dict]:
    """Write an OTLP archive (real proto messages) and Stormlog JSON exports, time loading."""
    from stormotel.analyzers.sources import load_paths

    from tests.analyzers.otlp_fixtures import json_lines, metrics_requests
    from tests.analyzers.synth import healthy

    results = []
    data = healthy(ranks, samples, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        arch = Path(tmp) / "otlp"
        arch.mkdir()
        for d in data:
            (arch / f"rank-{d.rank}.metrics.jsonl").write_bytes(
                json_lines(metrics_requests(d, per_request=per_line)))
        sl = Path(tmp) / "stormlog"
        sl.mkdir()
        for d in data:
            recs = [{"schema_version": 4, "session_id": f"s{d.rank}", "timestamp_ns": int(t),
                     "event_type": "sample", "collector": "bench", "sampling_interval_ms": 100,
                     "pid": 1, "host": "h", "device_id": 0, "job_id": "bench", "rank": d.rank,
                     "local_rank": d.rank, "world_size": ranks,
                     "allocator_allocated_bytes": int(a), "allocator_reserved_bytes": int(r),
                     "allocator_active_bytes": int(a), "allocator_inactive_bytes": 0,
                     "allocator_change_bytes": 0, "device_used_bytes": int(u),
                     "device_free_bytes": int(tot - u), "device_total_bytes": int(tot),
                     "context": None, "metadata": {}}
                    for t, a, r, u, tot in zip(d.t_ns, d.allocated, d.reserved, d.device_used,
                                               d.device_total, strict=True)]
            (sl / f"events_rank{d.rank}.json").write_text(json.dumps(recs))
        # In-process (one core), so CPU time is this loader's alone.
        os.environ["STORMOTEL_LOAD_WORKERS"] = "1"
        for name, folder in (("otlp_jsonl", arch), ("stormlog_json", sl)):
            size = sum(p.stat().st_size for p in folder.iterdir())
            t0, c0 = time.perf_counter(), time.process_time()
            tl = load_paths([str(folder)])
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            n = tl.total_samples()
            results.append({"bench": "loading", "format": name, "ranks": ranks,
                            "samples": n, "samples_per_line": per_line if name == "otlp_jsonl"
                            else None, "mb": round(size / 1e6, 1), "wall_s": round(dt, 3),
                            "cpu_s": round(cpu, 3), "mb_per_cpu_s": round(size / 1e6 / cpu, 1),
                            "samples_per_cpu_s": round(n / cpu)})
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("algorithms", "algorithms-sweep", "loading"))
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--samples", type=int, default=3600)
    p.add_argument("--per-line", type=int, nargs="*", default=[1, 100],
                   help="loading: samples per OTLP line (1 = one export per sample)")
    args = p.parse_args(argv)
    if args.what == "algorithms":
        print(json.dumps(bench_algorithms(args.ranks, args.samples)), flush=True)
    elif args.what == "algorithms-sweep":
        for r, n in ((64, 3600), (256, 36000), (1024, 3600), (1024, 36000)):
            subprocess.run([sys.executable, __file__, "algorithms", "--ranks", str(r),
                            "--samples", str(n)], check=True)
    else:
        for per_line in args.per_line:
            for row in bench_loading(args.ranks, args.samples, per_line):
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
