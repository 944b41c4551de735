"""REAL gloo jobs that hang the way users make them, at 2, 3, 4 and 8 ranks (run as a script by
the test fixture): ``python -m tests.stalls.user_hang_jobs OUT [SCENARIO...]``.

Every rank trains in steps of ~60 ms: ``tracker.step()``, then an ``all_reduce`` and the step's
second collective (``barrier`` or ``all_gather``), each inside ``tracker.mark("nccl:<op>")``
as docs/stalls.md shows. After :data:`STEPS_BEFORE` steps the culprit hangs:

- ``skip``: the culprit skips the step's ``all_reduce`` (an ``if`` that is false on one rank
  only) and waits in the step's next collective, while its peers wait in ``all_reduce``;
- ``sleep``: the culprit sleeps in its own code (``slow_user_code``) while its peers wait in
  ``all_reduce``;
- ``healthy``: no hang; the job ends on its own and must leave no snapshot.

:data:`SCENARIOS` names each job ``<kind><world>`` (``skip2``, ``sleep8``...). The parent plays
launcher: SIGTERM after :data:`HANG_S`, SIGKILL after a grace. The detector's floor is lowered
to :data:`FLOOR_S` (``STORMOTEL_STALL_FLOOR_S``) so the suite is quick; everything else is the
tracker's default. The Flight Recorder stays off (its default: what a new user has) except in
:data:`FLIGHT_RECORDER_ON`.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path

STEPS_BEFORE = 12
STEPS_HEALTHY = 30
FLOOR_S = 2.0
#: how long the parent lets a hanging job hang before SIGTERM: at least this, and until every
#: rank of every hanging job left a snapshot (a busy machine slows the rhythm, and the deadline
#: follows it), at most :data:`MAX_HANG_S`
HANG_S = 12.0
MAX_HANG_S = 90.0
#: name -> (kind, world size, culprit rank, the step's second collective)
SCENARIOS: dict[str, tuple[str, int, int, str]] = {
    "skip2": ("skip", 2, 1, "barrier"),
    "sleep2": ("sleep", 2, 1, "barrier"),
    "healthy2": ("healthy", 2, -1, "barrier"),
    "skip3": ("skip", 3, 0, "all_gather"),
    "sleep3": ("sleep", 3, 2, "all_gather"),
    "skip4": ("skip", 4, 2, "all_gather"),
    "sleep8": ("sleep", 8, 5, "all_gather"),
    "skip8": ("skip", 8, 3, "all_gather"),
    "skip2fr": ("skip", 2, 1, "barrier"),
}
#: jobs run with torch's Flight Recorder on (a dump at each snapshot): the dumps, when read,
#: must not hide what the snapshots show
FLIGHT_RECORDER_ON = frozenset({"skip2fr"})


def slow_user_code() -> None:
    """The culprit's own code that does not return (bounded: it must not outlive the test)."""
    time.sleep(120)


def _rank_main(rank: int, name: str, out: Path, init_file: str) -> None:
    import torch
    import torch.distributed as dist

    from stormotel import MemoryTracker

    kind, world, culprit, second = SCENARIOS[name]
    root = out / name
    if name in FLIGHT_RECORDER_ON:
        os.environ["TORCH_FR_BUFFER_SIZE"] = "2000"  # read when the process group is made
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=300))
    tracker = MemoryTracker(sampler="simulated", archive_dir=root / "archive", job_id=name,
                            rank=rank, world_size=world, local_rank=rank)
    tracker.start_tracking()
    x = torch.ones(4)
    parts = [torch.zeros(4) for _ in range(world)]
    steps = STEPS_HEALTHY if kind == "healthy" else STEPS_BEFORE + 1000
    for step in range(steps):
        hang = rank == culprit and step == STEPS_BEFORE
        if hang:
            (root / "hang_started").write_text(str(time.time_ns()))
        with tracker.step(step):
            time.sleep(0.04)
            if hang and kind == "sleep":
                slow_user_code()
            if not (hang and kind == "skip"):
                with tracker.mark("nccl:all_reduce"):
                    dist.all_reduce(x)
            with tracker.mark(f"nccl:{second}"):
                if second == "barrier":
                    dist.barrier()
                else:
                    dist.all_gather(parts, x)
    tracker.stop_tracking()
    (root / f"done{rank}").write_text("ok")
    os._exit(0)  # skip gloo teardown


def _every_rank_snapshotted(root: Path, world: int) -> bool:
    stacks = root / "archive" / root.name / "stacks"
    names = [p.name for p in stacks.glob("rank-*.stack.*")] if stacks.is_dir() else []
    return all(any(n.startswith(f"rank-{r}-") and not n.endswith(".stack.pending")
                   for n in names) for r in range(world))


def generate(out: Path, names: list[str]) -> None:
    """Run the named jobs at once (ranks forked from one torch import), then play launcher."""
    os.environ["STORMOTEL_STALL_FLOOR_S"] = str(FLOOR_S)
    import multiprocessing as mp

    import torch

    from tests.stalls.fork_parent import import_tracker_before_fork

    import_tracker_before_fork()  # once, before the fork: shared by every rank
    torch.set_num_threads(1)  # 8-rank jobs on 2 cores: one thread per rank
    ctx = mp.get_context("fork")
    procs: dict[str, list[mp.process.BaseProcess]] = {}
    for name in names:
        world = SCENARIOS[name][1]
        (out / name).mkdir(parents=True, exist_ok=True)
        init = str(out / name / "init")
        procs[name] = [ctx.Process(target=_rank_main, args=(r, name, out, init))
                       for r in range(world)]
        for p in procs[name]:
            p.start()
    started = time.monotonic()
    for name in procs:
        if SCENARIOS[name][0] == "healthy":
            continue
        marker = out / name / "hang_started"
        while not marker.exists() and time.monotonic() - started < 120:
            time.sleep(0.2)
    time.sleep(HANG_S)
    hung = time.monotonic()
    while time.monotonic() - hung < MAX_HANG_S - HANG_S and not all(
            _every_rank_snapshotted(out / name, SCENARIOS[name][1]) for name in procs
            if SCENARIOS[name][0] != "healthy"):
        time.sleep(0.5)
    for name, ps in procs.items():  # the launcher: SIGTERM, then SIGKILL after a grace
        (out / name / "sigterm_ns").write_text(str(time.time_ns()))
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
    generate(Path(sys.argv[1]), sys.argv[2:] or list(SCENARIOS))
