"""The stall detector's cost on the training thread: its own work per step/mark, and
``tracker.step()`` with stack snapshots on and off, against a 10 ms step.

    .venv/bin/python benchmarks/bench_stall_watch.py [--steps 20000] [--repeats 5] [--json OUT]

``StallWatch.progress()`` (all the detector adds to a step or mark; the C timer is re-armed at
most once per deadline) is timed alone over 200,000 calls. Each repeat then times ``--steps``
empty ``with tracker.step(): pass`` blocks (the span and memory bookkeeping included) with
the detector on, then off, in the same process, and reports the median per-step time of each
and their difference (noisy on a loaded machine: the span dominates). A second measurement
runs real 10 ms steps (``time.sleep(0.01)`` inside each) on and off and compares the loop's wall
time. Results are in docs/benchmarks.md ("Stall detector").

The sampling thread's side: ``StallWatch.poll()`` when no snapshot is due (every sample: a clock
read and a comparison), timed over 200,000 calls; and the Python writer's snapshot when one is
due (``poll()`` end to end: the traceback of every thread from ``sys._current_frames()``, the
trailer, the rename, the next arming), for the threads of a real gloo rank (4 threads, ~33
frames: tests/stalls/data/newcomer3) and for faulthandler's bound (100 threads x 100 frames).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.config import ExportConfig, IdentityConfig, StallConfig
from stormotel.stall_watch import StallWatch
from stormotel.tracker import MemoryTracker


def _progress_us(calls: int) -> float:
    """The detector's own work per step/mark: ``StallWatch.progress()`` alone, armed."""
    with tempfile.TemporaryDirectory() as d:
        w = StallWatch(Path(d), {"rank": 0})
        for _ in range(10):
            w.progress()
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            w.progress()
        took = time.perf_counter_ns() - t0
        w.close()
    return took / calls / 1e3


def _armed(d: str) -> StallWatch:
    w = StallWatch(Path(d), {"rank": 0})
    for _ in range(10):
        w.progress()
    return w


def _poll_idle_ns(calls: int) -> float:
    """``poll()`` from the sampling thread when no snapshot is due."""
    with tempfile.TemporaryDirectory() as d:
        w = _armed(d)
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            w.poll()
        took = time.perf_counter_ns() - t0
        w.close()
    return took / calls


def _park(ev: threading.Event, depth: int) -> None:
    if depth:
        _park(ev, depth - 1)
    else:
        ev.wait()


def _snapshot_ms(threads: int, depth: int, repeats: int) -> float:
    """The Python writer's snapshot, ``poll()`` end to end, with ``threads`` threads (this one
    included) parked ``depth`` calls deep; the median of ``repeats``."""
    ev = threading.Event()
    parked = [threading.Thread(target=_park, args=(ev, depth)) for _ in range(threads - 1)]
    for t in parked:
        t.start()
    took = []
    try:
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as d:
                w = _armed(d)
                w._due_at = time.monotonic()  # due now, as the clock would make it
                t0 = time.perf_counter_ns()
                snap = w.poll()
                took.append((time.perf_counter_ns() - t0) / 1e6)
                w.close()
                assert snap is not None and snap.writer == "python"
    finally:
        ev.set()
        for t in parked:
            t.join()
    return statistics.median(took)


def _per_step_us(on: bool, steps: int, work_s: float = 0.0) -> float:
    with tempfile.TemporaryDirectory() as d:
        t = MemoryTracker(sampler="simulated", export=ExportConfig(archive_dir=d),
                          identity=IdentityConfig(job_id="bench", rank=0, world_size=1),
                          stall=StallConfig(enabled=on))
        with t:
            for _ in range(50):
                with t.step():
                    pass
            t0 = time.perf_counter_ns()
            for _ in range(steps):
                with t.step():
                    if work_s:
                        time.sleep(work_s)
            took = time.perf_counter_ns() - t0
            snapshots = t.state.stall_snapshots
    assert snapshots == 0, "a benchmark of steady steps must take no snapshot"
    return took / steps / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    on, off = [], []
    for _ in range(args.repeats):
        on.append(_per_step_us(True, args.steps))
        off.append(_per_step_us(False, args.steps))
    real_on, real_off = [], []
    for _ in range(args.repeats):
        real_on.append(_per_step_us(True, 300, 0.01))
        real_off.append(_per_step_us(False, 300, 0.01))
    progress = [_progress_us(200_000) for _ in range(args.repeats)]
    res_poll = {"poll_idle_ns": statistics.median(_poll_idle_ns(200_000)
                                                  for _ in range(args.repeats)),
                "snapshot_ms_rank_threads": _snapshot_ms(4, 8, 20),
                "snapshot_ms_100x100": _snapshot_ms(100, 100, 10)}
    res = {"progress_us": statistics.median(progress), "progress_all": progress,
           "empty_step_us": {"on": statistics.median(on), "off": statistics.median(off),
                             "on_all": on, "off_all": off},
           "step_10ms_us": {"on": statistics.median(real_on), "off": statistics.median(real_off),
                            "on_all": real_on, "off_all": real_off}, **res_poll}
    cost = res["empty_step_us"]["on"] - res["empty_step_us"]["off"]
    res["detector_us_per_step"] = cost
    res["share_of_10ms_step"] = cost / 10_000
    print(f"StallWatch.progress(): {res['progress_us']:.2f} us per step/mark "
          f"({res['progress_us'] / 10_000:.4%} of a 10 ms step)")
    print(f"empty step: {res['empty_step_us']['on']:.2f} us with the detector, "
          f"{res['empty_step_us']['off']:.2f} us without -> {cost:+.2f} us per step "
          f"({cost / 10_000:+.4%} of a 10 ms step)")
    print(f"10 ms steps: {res['step_10ms_us']['on']:.1f} us vs {res['step_10ms_us']['off']:.1f} "
          "us per step (on / off; sleep jitter dominates)")
    print(f"poll() not due: {res['poll_idle_ns']:.0f} ns per sample; a due snapshot written by "
          f"the sampling thread: {res['snapshot_ms_rank_threads']:.2f} ms (4 threads, a gloo "
          f"rank's), {res['snapshot_ms_100x100']:.1f} ms (100 threads x 100 frames)")
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
