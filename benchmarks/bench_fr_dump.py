"""What a Flight Recorder dump asked in the middle of a hang costs the rank: with the recorder's
stack traces (torch's default) and without (what the tracker asks, stormotel/fr_dump.py).

    .venv/bin/python benchmarks/bench_fr_dump.py [--jobs 8] [--entries 40] [--json OUT]

``--jobs`` two-rank gloo jobs run at once (each process forked from one torch import, the
recorder on with ``TORCH_FR_BUFFER_SIZE``). In each, both ranks run ``--entries`` all_reduces,
then rank 1 stops joining and rank 0 waits in the next one — a hang. One second into it a thread
of rank 0 asks for four dumps in a row (the first, then three more as later stalls would), while
another Python thread beats every 50 ms. Reported per mode, over the jobs: the first dump's
time, the later ones', the longest pause between beats (how long the rest of the rank's Python
was held back), and whether the dump imported ``torch._dynamo`` / ``torch._inductor``. Results:
docs/benchmarks.md ("Flight Recorder dump at a stall").
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

DUMPS = 4
WATCH_S = 12.0


def _rank(rank: int, init: str, entries: int, stacks: bool, out: mp.Queue) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=2,
                            timeout=timedelta(seconds=120))
    x = torch.ones(4)
    for _ in range(entries):
        dist.all_reduce(x)
    if rank == 1:
        time.sleep(WATCH_S + 10)  # never joins the next collective
        os._exit(0)
    beats: list[float] = []
    took: list[float] = []

    def beat() -> None:
        while True:
            beats.append(time.perf_counter())
            time.sleep(0.05)

    def dumps() -> None:
        c10d: Any = torch._C._distributed_c10d  # private: not in the stubs
        dump = c10d._dump_fr_trace
        for _ in range(DUMPS):
            t = time.perf_counter()
            dump(True, stacks, False)
            took.append(time.perf_counter() - t)

    def watch() -> None:
        time.sleep(1.0)
        t0 = time.perf_counter()
        threading.Thread(target=dumps, daemon=True).start()
        time.sleep(WATCH_S)
        after = [b for b in beats if b > t0]
        pauses = [b - a for a, b in itertools.pairwise(after)]
        out.put({"took": took, "max_pause_s": max(pauses, default=WATCH_S),
                 "compiler_imported": "torch._inductor" in sys.modules
                 or "torch._dynamo" in sys.modules})
        out.close()
        out.join_thread()  # the message is sent before the rank exits
        os._exit(0)

    threading.Thread(target=beat, daemon=True).start()
    threading.Thread(target=watch, daemon=True).start()
    dist.all_reduce(x)  # the hang


def _mode(jobs: int, entries: int, stacks: bool) -> dict[str, object]:
    ctx = mp.get_context("fork")
    out: mp.Queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        procs = [ctx.Process(target=_rank, args=(r, f"{d}/init{j}", entries, stacks, out))
                 for j in range(jobs) for r in range(2)]
        for p in procs:
            p.start()
        results = [out.get(timeout=WATCH_S + 120) for _ in range(jobs)]
        for p in procs:
            p.kill()
            p.join(5)
    first = [r["took"][0] for r in results if r["took"]]
    later = [t for r in results for t in r["took"][1:]]
    return {"stack_traces": stacks, "jobs": jobs, "entries": entries,
            "dumps_finished": sum(len(r["took"]) for r in results),
            "dumps_asked": DUMPS * jobs,
            "first_dump_median_s": statistics.median(first) if first else None,
            "later_dump_median_s": statistics.median(later) if later else None,
            "max_pause_s": max(r["max_pause_s"] for r in results),
            "compiler_imported_in": sum(bool(r["compiler_imported"]) for r in results)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=8, help="two-rank jobs at once (default 8)")
    ap.add_argument("--entries", type=int, default=40,
                    help="collectives each rank records before the hang (default 40)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    a = ap.parse_args()
    os.environ["TORCH_FR_BUFFER_SIZE"] = "2000"
    import torch  # noqa: F401  (imported once, before the fork)

    rows = [_mode(a.jobs, a.entries, stacks) for stacks in (True, False)]
    for r in rows:
        print(json.dumps(r))
    if a.json:
        a.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
