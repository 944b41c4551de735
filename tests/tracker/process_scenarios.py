"""Scenarios run as real processes by test_process_events.py (fork with the endpoint on, SIGTERM).

Usage: ``python -m tests.tracker.process_scenarios fork|sigterm|sigterm-chained OUT_DIR``.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path

from stormotel.tracker import MemoryTracker


def _tracker(out: Path, **kwargs: object) -> MemoryTracker:
    return MemoryTracker(sampler="simulated", sampling_interval=0.05, job_id="proc", rank=0,
                         world_size=1, archive_dir=out / "archive", env={}, **kwargs)


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def _child_work(n: int) -> None:
    sum(range(1000 * (n + 1)))


def fork(out: Path) -> int:
    tracker = _tracker(out, prometheus_port=0, prometheus_addr="127.0.0.1")
    tracker.start_tracking()
    port = tracker.prometheus_address[1]  # type: ignore[index]
    ctx = multiprocessing.get_context("fork")
    children = [ctx.Process(target=_child_work, args=(i,)) for i in range(8)]
    for child in children:
        child.start()
    for child in children:
        child.join(20)
        if child.is_alive() or child.exitcode != 0:
            print(f"FAIL multiprocessing child alive={child.is_alive()} "
                  f"exit={child.exitcode}", flush=True)
            return 1
    # A bare fork whose child leaves through the interpreter's normal exit (atexit runs).
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            with tracker.step(1):  # a disarmed copy: no span, no exception
                pass
            sys.exit(0)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            print("FAIL forked child hung at exit", flush=True)
            os.kill(pid, signal.SIGKILL)
            return 1
        if os.waitstatus_to_exitcode(status) != 0:
            print(f"FAIL forked child exit {os.waitstatus_to_exitcode(status)}", flush=True)
            return 1
    body = _scrape(port)  # the parent still serves after its children closed their copies
    tracker.stop_tracking()
    print("OK" if "hw_gpu_memory_usage_bytes" in body else "FAIL no series", flush=True)
    return 0


def sigterm(out: Path, chained: bool) -> int:
    if chained:
        def previous(signum: int, _frame: object) -> None:
            (out / "previous-handler-ran").write_text(str(signum))
            sys.exit(7)
        signal.signal(signal.SIGTERM, previous)
    tracker = _tracker(out)
    tracker.start_tracking()
    for i in range(3):
        with tracker.step(i), tracker.mark("phase:forward"):
            time.sleep(0.02)
    print("READY", flush=True)
    time.sleep(60)  # killed long before this
    return 3


if __name__ == "__main__":
    mode, out_dir = sys.argv[1], Path(sys.argv[2])
    if mode == "fork":
        sys.exit(fork(out_dir))
    sys.exit(sigterm(out_dir, chained=mode == "sigterm-chained"))
