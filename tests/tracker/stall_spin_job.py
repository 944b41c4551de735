"""A rank for the stall watch's boundary tests, run as its own process:
``python -m tests.tracker.stall_spin_job ARCHIVE MODE``.

``spin``: the training thread spins in pure Python (calls in a tight loop, no sleep, no
collective: frames pushed and popped all the time) past several deadlines, in
:data:`EPISODES` stall episodes of a few snapshots each, then steps again and ends (exit 0).
Reading those frames without the GIL (faulthandler's C watchdog) crashed such a rank
(``tokenizer_spin3``); the sampling thread's snapshot, with the GIL, must not.
``regex``: the training thread holds the GIL in C (a catastrophic regex) for ever: only the C
watchdog can write the snapshot; the test kills the process once it has.
``format``: no tracker — :data:`PARKED` threads wait at different depths (one deeper than
faulthandler's 100 frames, one in a function with a non-ASCII name, one in a file and function
with names past 500 characters), more threads than faulthandler's 100; the same moment is
written by faulthandler (``faulthandler.txt``) and by the Python writer (``python.txt``).
"""

from __future__ import annotations

import faulthandler
import re
import sys
import threading
import time
from pathlib import Path

from stormotel import ExportConfig, MemoryTracker, StallConfig
from stormotel.stall_watch import format_threads

#: the deadline, whatever rhythm a loaded machine gives the 10 ms steps (multiple 1: the floor)
FLOOR_S = 0.3
#: stall episodes of the spinning rank (each one long enough for MAX_PER_EPISODE snapshots)
EPISODES = 6
#: the spin of one episode: the snapshots come by 0.6, 1.2 and 2.4 s with a 0.3 s deadline
#: (a slow machine polls late: the margin keeps the last one inside the spin)
SPIN_S = 3.2


#: nesting of the recursive-descent parse: deep enough that CPython 3.11's frames outgrow a
#: data-stack chunk and the chunk is freed on the way back (what a reader without the GIL trips on)
DEPTH = 400


def _parse(text: str, at: int, depth: int) -> int:
    """A recursive-descent parser of nested brackets: a call per level."""
    if depth == 0 or at >= len(text):
        return at
    return _parse(text, at + 1, depth - 1) + 1


def spin_in_the_tokenizer(seconds: float) -> int:
    """Pure-Python work, calls deep and back in a tight loop; ends after ``seconds``."""
    end = time.monotonic() + seconds
    text = "(" * DEPTH
    n = 0
    while time.monotonic() < end:
        n += _parse(text, 0, DEPTH)
    return n


def catastrophic_match() -> object:
    return re.match(r"(a+)+b", "a" * 40)  # holds the GIL in C for ever


#: threads parked for the format comparison (faulthandler dumps 100 at most)
PARKED = 104
LONG = "x" * 600

_ODD = compile(f"def ünïcode_wait_{LONG}(ev):\n    ev.wait()\n", f"/tmp/{LONG}ü.py", "exec")


def _deep(ev: threading.Event, n: int) -> None:
    if n:
        _deep(ev, n - 1)
    else:
        ev.wait()


def both_writers(out: Path) -> int:
    """The same parked threads written by faulthandler and by the Python writer."""
    names: dict[str, object] = {}
    exec(_ODD, names)  # a function whose names are odd on purpose
    odd = next(v for k, v in names.items() if k.startswith("ünïcode"))
    ev = threading.Event()
    # started last: the newest threads come first in both dumps, within the 100
    threads = [threading.Thread(target=_deep, args=(ev, i % 7)) for i in range(PARKED - 2)]
    threads += [threading.Thread(target=_deep, args=(ev, 150)),
                threading.Thread(target=odd, args=(ev,))]
    for t in threads:
        t.start()
    time.sleep(0.5)  # every thread in ev.wait (C, frames still)
    with open(out / "faulthandler.txt", "w") as fh:
        faulthandler.dump_traceback(fh, all_threads=True)
    (out / "python.txt").write_text(format_threads(sys._current_frames(), threading.get_ident()))
    ev.set()
    for t in threads:
        t.join()
    return 0


def main(archive: Path, mode: str) -> int:
    if mode == "format":
        return both_writers(archive)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 2 * DEPTH))
    with MemoryTracker(sampler="simulated", export=ExportConfig(archive_dir=archive),
                       job_id="j", rank=1, world_size=2, sampling_interval=0.05,
                       stall=StallConfig(floor_s=FLOOR_S, multiple=1.0)) as t:
        for _ in range(EPISODES if mode == "spin" else 1):
            for _ in range(5):
                with t.step():
                    time.sleep(0.01)
            with t.step():
                if mode == "spin":
                    spin_in_the_tokenizer(SPIN_S)
                else:
                    print("in the regex", flush=True)
                    catastrophic_match()
        print(f"snapshots {t.state.stall_snapshots}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2]))
