"""REAL gloo jobs that hang or fail the way newcomers write them (round two of "hangs as users
make them", helper uh): ``python -m tests.stalls.newcomer_hang_jobs OUT [JOB...]``.

Unlike ``user_hang_jobs`` (one rank skips an ``all_reduce`` or sleeps), each job here is a bug
a newcomer really writes, 2-4 ranks, torch CPU on gloo, the tracker in every rank with its
defaults except the stall floor (:data:`FLOOR_S`, as ``user_hang_jobs``), an archive per job.
Every rank trains in steps of ~50 ms (``tracker.step()``); jobs with ``marks`` wrap their
collectives in ``tracker.mark("nccl:<op>")`` as docs/stalls.md advises, the others do not (what
a newcomer has). The bug strikes at step :data:`H`. Each rank's stdout/stderr goes to
``OUT/<job>/logs/rank-R.log`` (torchrun's ``--log-dir``/``--tee``); the parent plays launcher,
per job either like ``srun`` (a failed rank changes nothing; SIGTERM to every rank at the time
limit) or like ``torchrun`` (SIGTERM to the others :data:`MONITOR_S` after a rank fails, its
``--monitor-interval`` default). ``OUT/<job>/exits.json``: each rank's exit code (negative: the
signal), the launcher's view.

The labels (:data:`JOBS`) were written and committed BEFORE the analyzer first ran on any of
these jobs. ``culprit``: the rank(s) whose program deviates — the fix goes there; ``None``: no
single rank is the cause (a careful engineer can only say where each rank is). ``undecided_ok``:
whether "undecided" is an acceptable answer (it is never wrong, but a rank the evidence proves
should be named). ``know``: what a careful engineer could know from the archive.

The labels, one job a line: ``job`` (world, launcher): label, culprit — what the evidence can
show.

- ``ckpt_barrier2`` (2, srun): hung, culprit 0 — rank 0 in a barrier at step 12 inside `if rank ==
  0` (after torch.save) its earlier steps never entered; rank 1 went on to step 13's all_reduce
- ``uneven_ddp2`` (2, srun): hung, culprit 1 — rank 1 runs a 13th DDP step (backward waits on the
  gradient all_reduce); rank 0 left the loop and waits in the barrier after it
- ``order_swap2`` (2, srun): hung/failing, culprit 1 — at step 12 rank 1 entered broadcast before
  all_reduce (every earlier step: all_reduce, broadcast); rank 0 in all_reduce
- ``subset_group4`` (4, srun): hung, culprit 2,3 — ranks 0,1 in new_group (its store barrier waits
  for all 4 ranks); ranks 2,3 never called it and wait in step 13's all_reduce
- ``raise3`` (3, torchrun): failing, culprit 1 — rank 1's step 12 ended in ValueError (its log:
  the traceback); the launcher stopped ranks 0,2
- ``raise2`` (2, srun): failing, culprit 0 — rank 0 raised in step 12 (a bad batch); rank 1 waits
  or fails in all_reduce
- ``sigkill3`` (3, srun): failing, culprit 2 — rank 2 killed by SIGKILL (the OOM killer) mid-step:
  its telemetry stops with no stop; peers fail or wait in all_reduce
- ``busy2`` (2, srun): hung, culprit 1 — rank 1 in a CPU-busy loop in its own code; rank 0 in
  all_reduce
- ``loader2`` (2, srun): hung, culprit 1 — rank 1 waits for its DataLoader worker
  (torch/utils/data frames); rank 0 in all_reduce
- ``sendrecv2`` (2, srun): hung, culprit None — both ranks in send at the same line of the same
  step: a cyclic wait, no single culprit
- ``gather_shape2`` (2, srun): hung/failing, culprit 1 — rank 1's all_gather has a 3-element
  tensor, rank 0's 4 (the last, short batch)
- ``raise3x`` (3, torchrun): failing, culprit 1 — as raise3, but the rank runs its exit
  handlers (``python train.py`` under torchrun): the tracker stops at exit after the exception
- ``raise2x`` (2, srun): failing, culprit 0 — as raise2, exit handlers run on both ranks
- ``healthy_eval2`` (2, srun): healthy, culprit - — rank 0 runs a 5 s evaluation every 10 steps
  while rank 1 waits in barrier; both go on; the job ends
- ``healthy_uneven3`` (3, srun): healthy, culprit - — rank 2's steps take 3x longer; the others
  wait a little in each all_reduce; the job ends

"hung/failing": gloo may match two different collectives and raise (a size check) instead of
hanging; either way the job is not healthy and the culprit is the same.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

#: the step the bug strikes at (the tracker has seen its rhythm by then)
H = 12
STEPS = H + 1000
STEPS_HEALTHY = 30
FLOOR_S = 2.0
#: how long the launcher lets a hanging job hang before SIGTERM: at least this, and until every
#: live rank left a snapshot, at most :data:`MAX_HANG_S`
HANG_S = 12.0
MAX_HANG_S = 90.0
#: a healthy job not done by then is stopped (and then is no longer healthy)
MAX_HEALTHY_S = 150.0
#: torchrun's --monitor-interval default (torch 2.13): how soon it stops the others
MONITOR_S = 0.1
#: SIGTERM -> SIGKILL grace
GRACE_S = 5.0


@dataclass(frozen=True)
class Job:
    """One job and its label (written before any analysis; see the module docstring)."""

    world: int
    launcher: str  # "srun" or "torchrun"
    label: str  # "hung", "failing", "hung/failing" or "healthy"
    culprit: tuple[int, ...] | None  # None: no single rank; () for healthy
    undecided_ok: bool
    marks: bool
    know: str
    #: a rank's uncaught exception runs the interpreter's exit handlers, as ``python train.py``
    #: under torchrun or srun does (a forked ``multiprocessing`` worker leaves by ``os._exit``)
    exit_handlers: bool = False
    #: the process group's timeout (``init_process_group(timeout=...)``); round three's
    #: ``ckpt_slow3`` sets one shorter than rank 0's checkpoint write
    pg_timeout_s: float = 300.0


JOBS: dict[str, Job] = {
    "ckpt_barrier2": Job(2, "srun", "hung", (0,), True, True,
                         "rank 0 in an extra barrier (if rank == 0) its earlier steps never "
                         "entered; rank 1 in the next step's all_reduce"),
    "uneven_ddp2": Job(2, "srun", "hung", (1,), True, False,
                       "rank 1 in a 13th DDP backward; rank 0 after its loop in barrier"),
    "order_swap2": Job(2, "srun", "hung/failing", (1,), True, True,
                       "rank 1 entered broadcast before all_reduce at step 12"),
    "subset_group4": Job(4, "srun", "hung", (2, 3), True, True,
                         "ranks 0,1 in new_group's store barrier; 2,3 never called it"),
    "raise3": Job(3, "torchrun", "failing", (1,), True, False,
                  "rank 1's step ended in an exception; the launcher stopped the others"),
    "raise2": Job(2, "srun", "failing", (0,), True, False,
                  "rank 0's step ended in an exception; rank 1 waits or fails"),
    "sigkill3": Job(3, "srun", "failing", (2,), True, False,
                    "rank 2's telemetry stops without a stop (SIGKILL); peers wait or fail"),
    "busy2": Job(2, "srun", "hung", (1,), False, False,
                 "rank 1 in its own busy loop; rank 0 in all_reduce"),
    "loader2": Job(2, "srun", "hung", (1,), False, False,
                   "rank 1 waits for its DataLoader worker; rank 0 in all_reduce"),
    "sendrecv2": Job(2, "srun", "hung", None, True, False,
                     "both ranks in send at the same place: a cyclic wait"),
    "gather_shape2": Job(2, "srun", "hung/failing", (1,), True, True,
                         "rank 1's all_gather tensor is shorter (3 vs 4 elements)"),
    # added after the first analysis run (labels committed before these two ran): the raise
    # jobs above are forked workers (os._exit, no exit handler); a script under torchrun or
    # srun runs its exit handlers (the tracker's stop) after printing the traceback
    "raise3x": Job(3, "torchrun", "failing", (1,), True, False,
                   "rank 1's step ended in an exception and its exit handlers ran (the "
                   "tracker's stop); the launcher stopped the others", exit_handlers=True),
    "raise2x": Job(2, "srun", "failing", (0,), True, False,
                   "rank 0's step ended in an exception, its exit handlers ran; rank 1 fails "
                   "in all_reduce (its peer closed the connection), its handlers ran too",
                   exit_handlers=True),
    "healthy_eval2": Job(2, "srun", "healthy", (), False, True,
                         "a 5 s evaluation on rank 0 every 10 steps; rank 1 waits in "
                         "barrier; both go on and the job ends"),
    "healthy_uneven3": Job(3, "srun", "healthy", (), False, True,
                           "rank 2's steps 3x longer; the job ends"),
}


class Rank:
    """What a job's body needs: rank, world, the tracker, and a collective wrapped in a mark
    when the job marks its collectives."""

    def __init__(self, rank: int, world: int, tracker: Any, root: Path, marks: bool) -> None:
        self.rank, self.world, self.tracker, self.root, self.marks = (rank, world, tracker,
                                                                      root, marks)

    def coll(self, op: str, fn: Callable[[], object]) -> None:
        if self.marks:
            with self.tracker.mark(f"nccl:{op}"):
                fn()
        else:
            fn()

    def hang_started(self) -> None:
        (self.root / "hang_started").write_text(str(time.time_ns()))


# -- the jobs' bodies: what the newcomer wrote --------------------------------------------------
def _ckpt_barrier(r: Rank) -> None:
    import torch
    import torch.distributed as dist

    x = torch.ones(4)
    model = torch.nn.Linear(4, 4)
    for step in range(STEPS):
        with r.tracker.step(step):
            time.sleep(0.04)
            r.coll("all_reduce", lambda: dist.all_reduce(x))
            if step > 0 and step % H == 0 and r.rank == 0:  # only rank 0 saves ...
                r.hang_started()
                torch.save(model.state_dict(), r.root / "ckpt.pt")
                r.coll("barrier", dist.barrier)  # ... and "waits until it is written"


def _uneven_ddp(r: Rank) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [torch.randn(4, 8) for _ in range(H + (1 if r.rank == 1 else 0))]
    for step, batch in enumerate(batches):
        with r.tracker.step(step):
            if step == H:
                r.hang_started()
            time.sleep(0.04)
            opt.zero_grad()
            model(batch).sum().backward()
            opt.step()
    dist.barrier()  # everyone done before saving


def _order_swap(r: Rank) -> None:
    import torch
    import torch.distributed as dist

    x, flag = torch.ones(4), torch.zeros(1)
    for step in range(STEPS):
        with r.tracker.step(step):
            time.sleep(0.04)
            if step == H and r.rank == 1:  # "check for early stop first when the loss is odd"
                r.hang_started()
                r.coll("broadcast", lambda: dist.broadcast(flag, src=0))
                r.coll("all_reduce", lambda: dist.all_reduce(x))
            else:
                r.coll("all_reduce", lambda: dist.all_reduce(x))
                r.coll("broadcast", lambda: dist.broadcast(flag, src=0))


def _subset_group(r: Rank) -> None:
    import torch
    import torch.distributed as dist

    x, y = torch.ones(4), torch.ones(2)
    for step in range(STEPS):
        with r.tracker.step(step):
            time.sleep(0.04)
            r.coll("all_reduce", lambda: dist.all_reduce(x))
            if step == H and r.rank in (0, 1):  # a group for the first stage, made by it only
                r.hang_started()
                stage = dist.new_group([0, 1])
                r.coll("all_reduce", lambda g=stage: dist.all_reduce(y, group=g))


def load_batch(step: int, rank: int, bad: tuple[int, int]) -> list[float]:
    """The newcomer's data code: a corrupt sample raises."""
    if (step, rank) == bad:
        raise ValueError(f"corrupt sample in shard {rank} at step {step}")
    return [1.0, 2.0, 3.0, 4.0]


def _raise(bad_rank: int) -> Callable[[Rank], None]:
    def body(r: Rank) -> None:
        import torch
        import torch.distributed as dist

        for step in range(STEPS):
            with r.tracker.step(step):
                time.sleep(0.04)
                if step == H and r.rank == bad_rank:
                    r.hang_started()
                x = torch.tensor(load_batch(step, r.rank, (H, bad_rank)))
                dist.all_reduce(x)
    return body


def allocate_activations(r: Rank) -> None:
    """Where the OOM killer strikes rank 2 (a SIGKILL: no handler, no flush)."""
    r.hang_started()
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGKILL)


def steps_then(r: Rank, culprit: int, act: Callable[[], object]) -> None:
    """Steps of one all_reduce each; at step :data:`H` the culprit runs ``act`` before it."""
    import torch
    import torch.distributed as dist

    x = torch.ones(4)
    for step in range(STEPS):
        with r.tracker.step(step):
            time.sleep(0.04)
            if step == H and r.rank == culprit:
                act()
            dist.all_reduce(x)


def _sigkill(r: Rank) -> None:
    steps_then(r, 2, lambda: allocate_activations(r))


def count_tokens(until: float) -> int:
    """The newcomer's busy loop (a ``while`` whose exit condition never holds); bounded here so
    it cannot outlive the run."""
    total = 0
    while time.monotonic() < until:
        total += sum(range(200))
    return total


def _busy(r: Rank) -> None:
    def spin() -> None:
        r.hang_started()
        count_tokens(time.monotonic() + 120)
    steps_then(r, 1, spin)


class ShardDataset:
    """A dataset whose reads hang at one index on one rank (a stuck network file)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def __len__(self) -> int:
        return STEPS

    def __getitem__(self, i: int) -> Any:
        import torch
        if self.rank == 1 and i == H:
            time.sleep(120)  # the read never returns
        return torch.ones(4)


def loader_steps(r: Rank, dataset: Any, culprit: int) -> None:
    """Steps over a one-worker DataLoader of ``dataset``, an all_reduce of each batch; the
    launcher's clock starts on ``culprit`` one step before the bad index (round three's
    ``data_raise3`` shares it)."""
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=None, num_workers=1, prefetch_factor=1)
    for step, batch in enumerate(loader):
        with r.tracker.step(step):
            time.sleep(0.04)
            if step == H - 1 and r.rank == culprit:
                r.hang_started()
            dist.all_reduce(batch)


def _loader(r: Rank) -> None:
    loader_steps(r, ShardDataset(r.rank), 1)


def exchange_halo(r: Rank, out: Any, into: Any) -> None:
    """Both ranks send first, then receive: each send waits for the peer's receive."""
    import torch.distributed as dist

    peer = 1 - r.rank
    dist.send(out, dst=peer)
    dist.recv(into, src=peer)


def _sendrecv(r: Rank) -> None:
    import torch
    import torch.distributed as dist

    x = torch.ones(4)
    big, into = torch.ones(8 * 2**20), torch.zeros(8 * 2**20)  # 32 MiB each way
    for step in range(STEPS):
        with r.tracker.step(step):
            time.sleep(0.04)
            dist.all_reduce(x)
            if step == H:
                r.hang_started()
                exchange_halo(r, big, into)


def _gather_shape(r: Rank) -> None:
    import torch
    import torch.distributed as dist

    for step in range(STEPS):
        with r.tracker.step(step):
            time.sleep(0.04)
            n = 3 if (step == H and r.rank == 1) else 4  # rank 1's last batch is short
            if n == 3:
                r.hang_started()
            x = torch.ones(n)
            parts = [torch.zeros_like(x) for _ in range(r.world)]
            r.coll("all_gather", lambda p=parts, t=x: dist.all_gather(p, t))


def evaluate(seconds: float) -> None:
    """Rank 0's validation pass (slow, but it returns)."""
    time.sleep(seconds)


def _healthy_eval(r: Rank) -> None:
    import torch
    import torch.distributed as dist

    x = torch.ones(4)
    for step in range(STEPS_HEALTHY):
        with r.tracker.step(step):
            time.sleep(0.04)
            r.coll("all_reduce", lambda: dist.all_reduce(x))
            if step % 10 == 9:
                if r.rank == 0:
                    evaluate(5.0)
                r.coll("barrier", dist.barrier)


def _healthy_uneven(r: Rank) -> None:
    import torch
    import torch.distributed as dist

    x = torch.ones(4)
    for step in range(STEPS_HEALTHY):
        with r.tracker.step(step):
            time.sleep(0.15 if r.rank == 2 else 0.05)
            r.coll("all_reduce", lambda: dist.all_reduce(x))


BODIES: dict[str, Callable[[Rank], None]] = {
    "ckpt_barrier2": _ckpt_barrier, "uneven_ddp2": _uneven_ddp, "order_swap2": _order_swap,
    "subset_group4": _subset_group, "raise3": _raise(1), "raise2": _raise(0),
    "raise3x": _raise(1), "raise2x": _raise(0), "sigkill3": _sigkill, "busy2": _busy,
    "loader2": _loader, "sendrecv2": _sendrecv,
    "gather_shape2": _gather_shape, "healthy_eval2": _healthy_eval,
    "healthy_uneven3": _healthy_uneven}


def _rank_main(rank: int, name: str, out: Path, init_file: str,
               jobs: dict[str, Job] | None = None,
               bodies: dict[str, Callable[[Rank], None]] | None = None) -> None:
    jobs, bodies = jobs or JOBS, bodies or BODIES
    root = out / name
    log = os.open(root / "logs" / f"rank-{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                  0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    import torch.distributed as dist

    from stormotel import MemoryTracker

    job = jobs[name]
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=job.world, timeout=timedelta(seconds=job.pg_timeout_s))
    tracker = MemoryTracker(sampler="simulated", archive_dir=root / "archive", job_id=name,
                            rank=rank, world_size=job.world, local_rank=rank)
    tracker.start_tracking()
    try:
        bodies[name](Rank(rank, job.world, tracker, root, job.marks))
    except BaseException:
        if not job.exit_handlers:
            raise  # multiprocessing prints it and leaves by os._exit(1)
        # what the interpreter does with a script's uncaught exception: print, then the exit
        # handlers (sys.last_value says which exception ends the process)
        sys.last_type, sys.last_value, sys.last_traceback = sys.exc_info()
        traceback.print_exc()
        sys.stderr.flush()
        atexit._run_exitfuncs()
        os._exit(1)
    tracker.stop_tracking()
    (root / f"done{rank}").write_text("ok")
    os._exit(0)  # skip gloo teardown


def _every_live_rank_snapshotted(root: Path, procs: list[Any]) -> bool:
    stacks = root / "archive" / root.name / "stacks"
    names = [p.name for p in stacks.glob("rank-*.stack.*")] if stacks.is_dir() else []
    return all(any(n.startswith(f"rank-{r}-") and not n.endswith(".stack.pending")
                   for n in names) for r, p in enumerate(procs) if p.is_alive())


def _terminate(root: Path, procs: list[Any]) -> None:
    (root / "sigterm_ns").write_text(str(time.time_ns()))
    for p in procs:
        if p.is_alive() and p.pid is not None:
            os.kill(p.pid, signal.SIGTERM)


def generate(out: Path, names: list[str], jobs: dict[str, Job] | None = None,
             bodies: dict[str, Callable[[Rank], None]] | None = None) -> None:
    """Run the named jobs at once (ranks forked from one torch import), then play launcher.
    ``jobs``/``bodies``: another round's (``newcomer_hang_jobs3``); this module's by default."""
    jobs, bodies = jobs or JOBS, bodies or BODIES
    os.environ["STORMOTEL_STALL_FLOOR_S"] = str(FLOOR_S)
    import multiprocessing as mp

    import torch

    from tests.stalls.fork_parent import import_tracker_before_fork

    import_tracker_before_fork()  # once, before the fork: shared by every rank
    torch.set_num_threads(1)
    ctx = mp.get_context("fork")
    procs: dict[str, list[Any]] = {}
    for name in names:
        (out / name / "logs").mkdir(parents=True, exist_ok=True)
        init = str(out / name / "init")
        procs[name] = [ctx.Process(target=_rank_main, args=(r, name, out, init, jobs, bodies))
                       for r in range(jobs[name].world)]
        for p in procs[name]:
            p.start()
    started = time.monotonic()
    stopped: dict[str, float] = {}  # job -> when the launcher sent SIGTERM
    hang_seen: dict[str, float] = {}
    while len(stopped) < len(procs) or any(p.is_alive() for ps in procs.values() for p in ps):
        now = time.monotonic()
        for name, ps in procs.items():
            job, root = jobs[name], out / name
            if name in stopped:
                if now - stopped[name] > GRACE_S:
                    for p in ps:
                        if p.is_alive():
                            p.kill()
                continue
            codes = [p.exitcode for p in ps]
            if all(c is not None for c in codes):
                stopped[name] = now
                continue
            if job.launcher == "torchrun" and any(c not in (None, 0) for c in codes):
                time.sleep(MONITOR_S)
                _terminate(root, ps)
                stopped[name] = time.monotonic()
                continue
            if name not in hang_seen and (root / "hang_started").exists():
                hang_seen[name] = now
            since = now - hang_seen[name] if name in hang_seen else None
            if job.label == "healthy":
                if now - started > MAX_HEALTHY_S:
                    _terminate(root, ps)
                    stopped[name] = now
            elif (since is not None and (since > MAX_HANG_S or (
                    since > HANG_S and _every_live_rank_snapshotted(root, ps)))) or \
                    now - started > MAX_HANG_S + 120:
                _terminate(root, ps)
                stopped[name] = now
        time.sleep(0.2)
    for name, ps in procs.items():
        for p in ps:
            p.join(1)
        (out / name / "exits.json").write_text(json.dumps(
            {str(r): p.exitcode for r, p in enumerate(ps)}))


if __name__ == "__main__":
    generate(Path(sys.argv[1]), sys.argv[2:] or list(JOBS))
