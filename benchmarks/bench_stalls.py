"""Stuck-job benchmarks: Flight Recorder dumps and worker logs at cluster scale.

    .venv/bin/python benchmarks/bench_stalls.py fr --ranks 256 --entries 2000 --form pickle
    .venv/bin/python benchmarks/bench_stalls.py logs --ranks 128 --lines 20000

``fr`` writes one dump per rank (a full 2000-entry ring buffer of the default group, rank 7 a
straggler one collective behind), then times reading (restricted unpickler / JSON) and the
cross-rank analysis separately; ``logs`` writes one log per rank (training lines with one
watchdog block at the end, rank 5 idle) and times parsing + triage. Each prints one JSON line;
peak RSS is the whole process. Results are recorded in docs/benchmarks.md ("Stuck jobs").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import resource
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.analyzers.stalls import analyze_dumps, fr_loader, load_dump_dir
from stormotel.analyzers.stalls.log_analysis import analyze_logs
from stormotel.analyzers.stalls.logs_parser import parse_logs


def _entry(seq: int) -> dict[str, object]:
    return {"record_id": seq, "pg_id": 0, "process_group": ("0", "default_pg"),
            "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
            "profiling_name": "nccl:all_reduce", "time_created_ns": 10**18 + seq * 10**6,
            "input_sizes": [[1024, 1024]], "input_dtypes": ["BFloat16"],
            "output_sizes": [[1024, 1024]], "output_dtypes": ["BFloat16"], "state": "completed",
            "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
            "retired": True, "timeout_ms": 600000, "is_p2p": False,
            "frames": [{"name": "train_step", "filename": "train.py", "line": 88}]}


def bench_fr(ranks: int, entries: int, form: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for r in range(ranks):
            last = entries + 100 - (1 if r == 7 else 0)
            dump = {"version": "2.10", "pg_config": {}, "pg_status": {"0": {
                "last_enqueued_collective": last, "last_started_collective": -1,
                "last_completed_collective": last - 1}},
                "entries": [_entry(s) for s in range(last - entries + 1, last + 1)]}
            if form == "json":
                for e in dump["entries"]:
                    e.pop("frames")
                (folder / f"fr_rank{r}.json").write_text(json.dumps(dump))
            else:
                (folder / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(dump))
        size = sum(p.stat().st_size for p in folder.iterdir())
        with mock.patch.object(fr_loader, "gc_paused", contextlib.nullcontext):
            t0 = time.perf_counter()
            load_dump_dir(folder)  # the previous implementation: GC running during the parse
            load_gc_on = time.perf_counter() - t0
        load_avg = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), time.process_time()
        ds = load_dump_dir(folder)
        t1, c1 = time.perf_counter(), time.process_time()
        result = analyze_dumps(ds)
        t2, c2 = time.perf_counter(), time.process_time()
    culprit = [(f.kind, f.ranks) for f in result.findings][:1]
    return {"bench": "fr", "form": form, "ranks": ranks, "entries_per_rank": entries,
            "input_mb": round(size / 1e6, 1), "load_s": round(t1 - t0, 3),
            "load_cpu_s": round(c1 - c0, 3), "load_gc_running_s": round(load_gc_on, 3),
            "analyze_s": round(t2 - t1, 3), "analyze_cpu_s": round(c2 - c1, 3),
            "load_average_1min": round(load_avg, 2), "finding": culprit,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def bench_logs(ranks: int, lines: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for r in range(ranks):
            body = [f"[rank{r}]:2026-11-21 05:{i // 600 % 60:02d}:{i // 10 % 60:02d},000 INFO "
                    f"train.py:88 step {i} loss 2.31 lr 3e-4 tokens/s 51234" for i in range(lines)]
            tag = f"[PG ID 0 PG GUID 0(default_pg) Rank {r}]"
            pre = f"[rank{r}]:[E1121 05:28:12.415871201 ProcessGroupNCCL.cpp:632] {tag}"
            if r == 5:
                body.append(f"{pre} Observed flight recorder dump signal from another rank.")
                body.append(f"{pre} Received a dump signal. Last enqueued NCCL work: 99, "
                            "last completed NCCL work: 99.")
            else:
                body.append(f"{pre} Watchdog caught collective operation timeout: WorkNCCL("
                            "SeqNum=100, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, "
                            "Timeout(ms)=600000) ran for 600010 milliseconds before timing out.")
                body.append(f"{pre}  failure detected by watchdog at work sequence id: 100 PG "
                            "status: last enqueued work: 100, last completed work: 99")
            (folder / f"rank{r}.log").write_text("\n".join(body) + "\n")
        size = sum(p.stat().st_size for p in folder.iterdir())
        t0 = time.perf_counter()
        parsed = parse_logs([str(folder)])
        t1 = time.perf_counter()
        result = analyze_logs(parsed)
        t2 = time.perf_counter()
    return {"bench": "logs", "ranks": ranks, "lines_per_rank": lines,
            "input_mb": round(size / 1e6, 1), "parse_s": round(t1 - t0, 3),
            "lines_per_s": int(parsed.lines / (t1 - t0)), "triage_s": round(t2 - t1, 3),
            "finding": [(f.kind, f.ranks) for f in result.findings],
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    fr = sub.add_parser("fr")
    fr.add_argument("--ranks", type=int, default=256)
    fr.add_argument("--entries", type=int, default=2000)
    fr.add_argument("--form", choices=("pickle", "json"), default="pickle")
    lg = sub.add_parser("logs")
    lg.add_argument("--ranks", type=int, default=128)
    lg.add_argument("--lines", type=int, default=20000)
    a = p.parse_args()
    out = bench_fr(a.ranks, a.entries, a.form) if a.what == "fr" else bench_logs(a.ranks, a.lines)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
