"""Stormlog vs stormotel on the same Stormlog-format data, side by side in one run.

    .venv/bin/python benchmarks/bench_stormlog_compare.py --sizes 64x3600 64x10800
    .venv/bin/python benchmarks/bench_stormlog_compare.py --sizes 64x3600 --only stormotel
    .venv/bin/python benchmarks/bench_stormlog_compare.py --sizes 64x3600 --layout bare real

For each size the script writes one Stormlog telemetry export per rank (schema v4, the JSON list
``MemoryTracker.export_events(format="json")`` writes) with planted faults:

- rank 2's device memory rises 2 GiB one sampling interval before every other rank (first cause);
- rank 5's gap (device used − allocator reserved) drifts upward by 2 GiB over the run;
- every rank's gap spikes by 768 MiB at the same instant, inside an ``nccl:all_reduce`` context
  (a collective).

Then it runs, each end to end as a fresh process (interpreter start, imports, loading, analysis):

- Stormlog 0.4.3's own loader and analyzer in a separate venv (created here on first use:
  ``benchmarks/out/stormlog-venv`` with CPU torch 2.13.0 and stormlog 0.4.3):
  ``load_telemetry_events`` per file, then ``MemoryAnalyzer().generate_optimization_report``
  (gap analysis, collective attribution, cross-rank analysis — what ``gpumemprof analyze`` does);
- ``stormotel analyze DIR --format json``.

It prints one JSON line per tool and size with wall time, CPU time (user+sys of the process and
its children — the fair measure on a shared machine) and which planted faults were found, and
the speed ratios. stormotel runs ``--repeats`` times (default 3) and its median-CPU run is the
one compared; every run's times are listed. Results and the command are recorded in
docs/benchmarks.md ("Analyzer").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
VENV = OUT / "stormlog-venv"
STORMLOG_VERSION = "0.4.3"
TORCH_VERSION = "2.13.0"
MIB = 1024 * 1024
GIB = 1024 * MIB
T0 = 1_700_000_000_000_000_000
INTERVAL = 100_000_000
FIRST_CAUSE_RANK, DRIFT_RANK = 2, 5

STORMLOG_DRIVER = r"""
import json, sys, time
t0 = time.perf_counter()
from stormlog import MemoryAnalyzer
from stormlog.telemetry import load_telemetry_events
files = sys.argv[1:]
events = []
for f in files:
    events.extend(load_telemetry_events(f))
t1 = time.perf_counter()
report = MemoryAnalyzer().generate_optimization_report(events=events)
t2 = time.perf_counter()
cross = report.get("cross_rank_analysis") or {}
suspects = cross.get("first_cause_suspects") or []
print(json.dumps({
    "load_s": t1 - t0, "analyze_s": t2 - t1, "events": len(events),
    "top_suspect": [suspects[0].get("rank"), suspects[0].get("confidence")] if suspects else None,
    "gap": [g.get("classification") for g in report.get("gap_analysis", [])],
    "collective": sorted({c.get("classification")
                          for c in report.get("collective_attribution", [])}),
    "collective_count": len(report.get("collective_attribution", [])),
}))
"""


def ensure_venv() -> Path:
    py = VENV / "bin" / "python"
    ok = py.exists() and subprocess.run(
        [str(py), "-c", "import stormlog, torch"], capture_output=True).returncode == 0
    if ok:
        return py
    print(f"creating {VENV} (CPU torch {TORCH_VERSION}, stormlog {STORMLOG_VERSION})",
          file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(py), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"torch=={TORCH_VERSION}"], check=True)  # CPU wheel first
    subprocess.run([*pip, f"stormlog=={STORMLOG_VERSION}"], check=True)
    return py


#: A real stormlog 0.4.x export: its per-event ``metadata`` (collector health, capabilities,
#: ~1.4 KB) is what the real exporter writes on every event.
REAL_EXPORT = ROOT / "tests" / "analyzers" / "data" / "stormlog_events_rank1.json"


def real_metadata() -> dict:
    real = json.loads(REAL_EXPORT.read_bytes())
    return next(e for e in real if e.get("allocator_allocated_bytes") is not None)["metadata"]


def write_exports(folder: Path, ranks: int, samples: int, seed: int = 0,
                  layout: str = "real") -> int:
    """One Stormlog v4 JSON export per rank; returns total bytes written. ``layout="real"``
    gives every event the real exporter's ``metadata``; ``"bare"`` an empty one (the layout
    earlier tables in docs/benchmarks.md were measured on)."""
    folder.mkdir(parents=True, exist_ok=True)
    metadata = real_metadata() if layout == "real" else {}
    rng = np.random.default_rng(seed)
    t = T0 + np.arange(samples, dtype=np.int64) * INTERVAL
    rise_at, spike_at = samples // 3, samples // 2
    total = 80 * GIB
    size = 0
    for r in range(ranks):
        reserved = np.full(samples, 8 * GIB, dtype=np.int64)
        reserved[rise_at + (0 if r == FIRST_CAUSE_RANK else 1):] += 2 * GIB
        alloc = (0.75 * reserved + rng.normal(0, 4 * MIB, samples)).astype(np.int64)
        gap = 512 * MIB + rng.normal(0, 2 * MIB, samples)
        gap[spike_at:spike_at + 3] += 768 * MIB
        if r == DRIFT_RANK:
            gap += np.linspace(0, 2 * GIB, samples)
        used = reserved + gap.astype(np.int64)
        context = np.full(samples, None, dtype=object)
        context[spike_at - 1:spike_at + 4] = "nccl:all_reduce"
        records = [
            {"schema_version": 4, "session_id": f"bench-rank-{r}", "timestamp_ns": int(t[i]),
             "event_type": "sample", "collector": "stormlog.cuda_tracker",
             "sampling_interval_ms": 100, "pid": 1000 + r, "host": f"node-{r // 8}",
             "job_id": "compare", "rank": r, "local_rank": r % 8, "world_size": ranks,
             "device_id": r % 8, "allocator_allocated_bytes": int(alloc[i]),
             "allocator_reserved_bytes": int(reserved[i]), "allocator_active_bytes": int(alloc[i]),
             "allocator_inactive_bytes": 0, "allocator_change_bytes": 0,
             "device_used_bytes": int(used[i]), "device_free_bytes": int(total - used[i]),
             "device_total_bytes": total, "context": context[i], "metadata": metadata}
            for i in range(samples)]
        path = folder / f"events_rank{r}.json"
        path.write_text(json.dumps(records))
        size += path.stat().st_size
    return size


def _timed(cmd: list[str], timeout: int, **kw: object) -> tuple[subprocess.CompletedProcess,
                                                                  float, float]:
    """Run a command; return it with its wall time and its CPU time (user+sys, all its
    descendants), the fair measure on a shared machine where wall time depends on neighbours."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return p, wall, cpu


def run_stormlog(py: Path, files: list[str], timeout: int) -> dict:
    p, wall, cpu = _timed([str(py), "-c", STORMLOG_DRIVER, *files], timeout)
    if p.returncode != 0:
        return {"tool": "stormlog", "error": p.stderr.strip().splitlines()[-1:], "wall_s": wall}
    out = json.loads(p.stdout.strip().splitlines()[-1])
    found = {
        "first_cause_rank2": bool(out["top_suspect"] and out["top_suspect"][0]
                                  == FIRST_CAUSE_RANK),
        # Stormlog pools every rank's events in gap analysis, so a drift cannot be tied to a rank.
        "drift_rank5": "persistent_drift" in out["gap"],
        "drift_rank_named": False,
        "collective": bool(out["collective_count"]),
    }
    return {"tool": "stormlog", "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "load_s": round(out["load_s"], 2),
            "analyze_s": round(out["analyze_s"], 2), "found": found, "raw": out}


def compile_stormotel() -> None:
    """Write stormotel's bytecode once, as ``pip install`` does (Stormlog's venv has its own):
    with ``PYTHONDONTWRITEBYTECODE`` set, every timed run would compile ~80 modules again."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "stormotel"),
                    str(ROOT / "analyzers")], check=True, capture_output=True)


def run_stormotel(folder: Path, timeout: int) -> dict:
    p, wall, cpu = _timed([sys.executable, "-m", "stormotel", "analyze", str(folder), "--format",
                           "json", "--quiet"], timeout, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if p.returncode not in (0, 1):
        return {"tool": "stormotel", "error": p.stderr.strip(), "wall_s": wall}
    rep = json.loads(p.stdout)
    sus = rep["cross_rank"]["first_cause_suspects"]
    drift = [g["rank"] for g in rep["gap_findings"] if g["classification"] == "persistent_drift"]
    found = {
        "first_cause_rank2": bool(sus and sus[0]["rank"] == FIRST_CAUSE_RANK),
        "drift_rank5": DRIFT_RANK in drift,
        "drift_rank_named": drift == [DRIFT_RANK],
        "collective": bool(rep["collective_attributions"]),
    }
    return {"tool": "stormotel", "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "analyze_s": rep["extra"]["analysis_seconds"], "found": found,
            "top_suspect": [sus[0]["rank"], sus[0]["confidence"]] if sus else None,
            "collective_ranks": len({a["rank"] for a in rep["collective_attributions"]})}


def median_run(runs: list[dict]) -> dict:
    """The run with the median CPU time, with every run's wall / CPU listed next to it (a
    one-second run on a shared machine varies by a fifth from one run to the next)."""
    ok = sorted((r for r in runs if "error" not in r), key=lambda r: r["cpu_s"])
    if not ok:
        return runs[0]
    return {**ok[len(ok) // 2], "runs_wall_cpu": [[r["wall_s"], r["cpu_s"]] for r in runs]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", nargs="+", default=["64x3600"], metavar="RANKSxSAMPLES")
    p.add_argument("--timeout", type=int, default=600, help="per tool run, seconds")
    p.add_argument("--repeats", type=int, default=3,
                   help="stormotel runs per size; the median CPU run is reported (Stormlog runs "
                        "once: minutes long, its time is already an average over the machine)")
    p.add_argument("--keep", action="store_true", help="keep the generated exports")
    p.add_argument("--layout", choices=("real", "bare"), nargs="+", default=["real"],
                   help="events with the real exporter's metadata (default) or an empty one; "
                        "several: each measured in this one run, side by side")
    p.add_argument("--only", choices=("stormotel",),
                   help="run only stormotel (Stormlog takes minutes per size)")
    args = p.parse_args(argv)
    py = ensure_venv() if args.only is None else None
    compile_stormotel()
    for size, layout in ((s, lay) for s in args.sizes for lay in args.layout):
        ranks, samples = (int(x) for x in size.lower().split("x"))
        folder = OUT / f"compare-{ranks}x{samples}-{layout}"
        mb = write_exports(folder, ranks, samples, layout=layout) / 1e6
        files = sorted(str(f) for f in folder.glob("events_rank*.json"))
        ours = median_run([run_stormotel(folder, args.timeout) for _ in range(args.repeats)])
        theirs = run_stormlog(py, files, args.timeout) if py is not None else None
        for row in (theirs, ours):
            if row is not None:
                print(json.dumps({"size": size, "layout": layout, "mb": round(mb, 1),
                                  **row}), flush=True)
        if theirs is not None and "error" not in ours and "error" not in theirs:
            print(json.dumps({"size": size, "layout": layout,
                              "speedup_wall": round(theirs["wall_s"] / ours["wall_s"], 1),
                              "speedup_cpu": round(theirs["cpu_s"] / ours["cpu_s"], 1)}),
                  flush=True)
        if not args.keep:
            for f in files:
                Path(f).unlink()
            folder.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
