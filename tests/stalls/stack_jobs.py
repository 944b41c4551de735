"""REAL 4-rank gloo jobs with the tracker in every rank, one of which hangs outside communication
(run as a script by the test fixture): ``python -m tests.stalls.stack_jobs OUT``.

Each rank trains in steps of ~50 ms (``tracker.step()`` and a ``tracker.mark()`` around an
``all_reduce``). After ``STEPS_BEFORE`` steps the culprit (rank :data:`CULPRIT`) hangs where a
real job hangs, while its peers wait for it in ``all_reduce``; the parent then does what a
launcher does — SIGTERM every rank, SIGKILL after a grace period. Scenarios:

- ``regex``: a catastrophic regex that holds the GIL for minutes (no Python thread runs: the
  tracker's own sampling thread included); a heartbeat thread proves the GIL was held;
- ``dataloader``: waits for a batch from a DataLoader worker process that sleeps;
- ``checkpoint``: ``torch.save`` into a file whose writes block (slow shared storage);
- ``callback``: a callback raises, the exception is swallowed, and the rank waits forever for
  the event the callback should have set — never reaching the next collective;
- ``healthy``: no hang; the job ends on its own and must leave no snapshot.

Torch's Flight Recorder is on (``TORCH_FR_BUFFER_SIZE``), so each snapshot comes with a dump of
the same moment in ``<archive>/<job>/flight-recorder/``. ``--defaults`` runs with the tracker's
own floor and a one-minute hang instead (what a user's job sees; about 80 s).

The detector's floor is lowered to :data:`FLOOR_S` (``STORMOTEL_STALL_FLOOR_S``) so the suite
is quick; everything else is the tracker's default.
"""

from __future__ import annotations

import io
import os
import re
import signal
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

WORLD = 4
CULPRIT = 2
STEPS_BEFORE = 15
STEPS_HEALTHY = 40
FLOOR_S = 2.0
#: how long the parent lets a hanging job hang before SIGTERM at most, and with the default
#: floor (≥ 2 floors + start-up); with the suite's floor it stops :data:`TAIL_S` after every
#: rank of every hanging job has its snapshot (:func:`_all_snapshotted`)
HANG_S = 14.0
#: the peers sample on for this long after the last snapshot (the tests read that rank 0 went
#: on sampling more than 5 s past its first one), and the dumps at the snapshots land
TAIL_S = 6.0
SCENARIOS = ("regex", "dataloader", "checkpoint", "callback", "healthy")
#: scenario -> the culprit's own function the report must name
USER_FRAMES = {"regex": "filter_records", "dataloader": "next_batch",
               "checkpoint": "save_checkpoint", "callback": "run_callbacks"}


def filter_records() -> None:
    """Holds the GIL: ``(a+)+$`` on 40 a's and a b backtracks for far longer than the test."""
    re.match(r"(a+)+$", "a" * 40 + "b")


class _SleepyDataset:
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> int:
        # The worker never delivers while its rank lives. Once the launcher has killed the rank
        # it stops too (as DataLoader's own watchdog would, were it not stuck here), bounded by
        # 90 s: an orphan that slept on kept the job's output pipe open and the test waiting
        # for it long after the job was over.
        rank_pid, deadline = os.getppid(), time.monotonic() + 90
        while os.getppid() == rank_pid and time.monotonic() < deadline:
            time.sleep(0.2)
        return i


def next_batch() -> object:
    from torch.utils.data import DataLoader

    loader = DataLoader(_SleepyDataset(), batch_size=1, num_workers=1)  # type: ignore[arg-type]
    return next(iter(loader))


class _BlockingFile(io.RawIOBase):
    """A file on storage that stopped answering: every write blocks."""

    def writable(self) -> bool:
        return True

    def write(self, b: object) -> int:
        time.sleep(600)
        return len(b)  # type: ignore[arg-type]


def save_checkpoint(model_state: dict[str, object]) -> None:
    import torch

    torch.save(model_state, _BlockingFile())


def _broken_callback(step: int) -> None:
    raise KeyError("metrics['loss']")


def run_callbacks(step: int, ready: threading.Event) -> None:
    try:
        _broken_callback(step)
        ready.set()
    except Exception:
        pass  # swallowed: the rank never learns that `ready` will not come
    ready.wait()


def _heartbeat(path: Path, stop: threading.Event) -> None:
    """A Python thread: it can only run while nobody holds the GIL."""
    with open(path, "a") as fh:
        while not stop.wait(0.1):
            fh.write(f"{time.time_ns()}\n")
            fh.flush()


def _rank_main(rank: int, scenario: str, out: Path, init_file: str) -> None:
    import torch
    import torch.distributed as dist

    from stormotel import MemoryTracker

    root = out / scenario
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=WORLD, timeout=timedelta(seconds=300))
    stop = threading.Event()
    threading.Thread(target=_heartbeat, args=(root / f"heartbeat{rank}", stop),
                     daemon=True).start()
    tracker = MemoryTracker(sampler="simulated", archive_dir=root / "archive", job_id=scenario,
                            rank=rank, world_size=WORLD, local_rank=rank)
    tracker.start_tracking()
    x = torch.ones(4)
    steps = STEPS_HEALTHY if scenario == "healthy" else STEPS_BEFORE + 1000
    for step in range(steps):
        with tracker.step(step):
            if rank == CULPRIT and step == STEPS_BEFORE and scenario != "healthy":
                (root / "hang_started").write_text(str(time.time_ns()))
                if scenario == "regex":
                    filter_records()
                elif scenario == "dataloader":
                    next_batch()
                elif scenario == "checkpoint":
                    save_checkpoint({"w": x})
                elif scenario == "callback":
                    run_callbacks(step, threading.Event())
            time.sleep(0.04)
            with tracker.mark("nccl:all_reduce"):
                dist.all_reduce(x)
    tracker.stop_tracking()
    (root / f"done{rank}").write_text("ok")
    os._exit(0)  # skip gloo teardown


def _all_snapshotted(root: Path) -> bool:
    """Every rank of the job at ``root`` has a stack snapshot with its frames (a finished one,
    or the pending file the C watchdog wrote into while the rank held the GIL), and every
    waiting peer its Flight Recorder dump asked at its snapshot."""
    from stormotel import schema

    files = [p for p in root.rglob(f"{schema.ARCHIVE_RANK_PREFIX}*")
             if p.name.endswith((schema.STACK_SUFFIX, schema.STACK_PENDING_SUFFIX))]
    for rank in range(WORLD):
        mine = [p for p in files if p.name.startswith(f"{schema.ARCHIVE_RANK_PREFIX}{rank}-")]
        if not any('File "' in p.read_text(errors="replace") for p in mine):
            return False
    dumps = {p.name for p in root.rglob("nccl_trace_rank_*")}
    return all(f"nccl_trace_rank_{r}" in dumps for r in range(WORLD) if r != CULPRIT)


def generate(out: Path, defaults: bool = False) -> None:
    """Run every scenario at once (ranks forked from one torch import), then play launcher.
    ``defaults``: the tracker's own floor (20 s) and a one-minute hang, as a user's job has."""
    if not defaults:
        os.environ["STORMOTEL_STALL_FLOOR_S"] = str(FLOOR_S)
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")  # a Flight Recorder dump per stall
    import multiprocessing as mp

    from tests.stalls.fork_parent import import_tracker_before_fork

    import_tracker_before_fork()  # once, before the fork: shared by every rank

    ctx = mp.get_context("fork")
    procs: dict[str, list[mp.process.BaseProcess]] = {}
    for scenario in SCENARIOS:
        (out / scenario).mkdir(parents=True, exist_ok=True)
        init = str(out / scenario / "init")
        procs[scenario] = [ctx.Process(target=_rank_main, args=(r, scenario, out, init))
                           for r in range(WORLD)]
        for p in procs[scenario]:
            p.start()
    started = time.monotonic()
    for scenario in procs:
        if scenario == "healthy":
            continue
        marker = out / scenario / "hang_started"
        while not marker.exists() and time.monotonic() - started < 120:
            time.sleep(0.2)
    if defaults:
        time.sleep(60.0)
    else:
        hung = time.monotonic()
        while time.monotonic() - hung < HANG_S - TAIL_S and not all(
                _all_snapshotted(out / s) for s in SCENARIOS if s != "healthy"):
            time.sleep(0.2)
        time.sleep(TAIL_S)
    for scenario, ps in procs.items():  # the launcher: SIGTERM, then SIGKILL after a grace
        (out / scenario / "sigterm_ns").write_text(str(time.time_ns()))
        for p in ps:
            if p.is_alive() and p.pid is not None:
                os.kill(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    for ps in procs.values():
        for p in ps:
            p.join(timeout=max(0.1, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(5)


if __name__ == "__main__":
    generate(Path(sys.argv[1]), defaults="--defaults" in sys.argv[2:])
