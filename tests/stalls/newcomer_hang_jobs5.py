"""REAL gloo jobs that hang or fail the way users write them, round five (helper nh5): a second
HELD-OUT set for every hang rule the stuck-job diagnosis has, of shapes rounds two to four did
not write. ``python -m tests.stalls.newcomer_hang_jobs5 OUT [JOB...]``.

Each rank a process of its own, started as in round four (``tests/stalls/newcomer_hang_jobs4.py``,
whose launchers, rank context and stop rules this module reuses): the real ``torchrun``,
``torch.multiprocessing.spawn`` with ``env://``, one ``python`` per rank with ``RANK`` and
``MASTER_PORT`` exported, srun-like tasks mapping ``SLURM_PROCID`` to ``env://`` — here also as
two nodes of two tasks (``SLURM_NODEID``, ``SLURM_LOCALID``; ``srun -o node-%n.log``: one log
per node, both tasks in it). Every rank: torch CPU on gloo, the tracker with its defaults except
``STORMOTEL_STALL_FLOOR_S=2``; an archive per job; the ranks' stdout/stderr in ``logs/``;
``exits.json``.

The labels (``tests/stalls/data/newcomer5/labels.json``, loaded into :data:`JOBS`) were
written and committed BEFORE the analyzer ran on any of these jobs (the commit is in
docs/stalls.md, "round five"); the jobs ran once before, without analysis (exit codes and the
ranks' own logs), to check each does what its label says. ``culprit``: the rank(s) whose
program deviates — the fix goes there (``null``: no single rank). ``know``: what a careful
engineer could know from the evidence.

The labels (world, launcher: label, culprit — what the evidence can show):

- ``async_uneven3`` (3, torchrun): hung, 1 — overlapped gradient all_reduces (``async_op=True``,
  then ``wait()``); rank 1's shard one batch shorter: 1 in ``barrier()`` after its loop, 0,2 in
  step 12's ``wait()`` (no Python frame: round four's blind spot)
- ``bcast_obj_rank0_2`` (2, python): hung, 0 — ``broadcast_object_list`` under ``if rank == 0``;
  rank 1 in step 13's all_reduce
- ``gather_obj_skip3`` (3, spawn): hung/failing, 2 — rank 2 (no metrics) skips
  ``all_gather_object``; 0,1 in it at step 12, 2 in step 13's all_reduce
- ``new_group_order4`` (4, srun): hung, 3 — rank 3 builds the tp groups before the dp groups;
  every rank inside step 12's group setup (the order is in the code)
- ``except_pass3`` (3, python): failing, 2 — ``except Exception: pass`` hides rank 2's metric
  error: one collective behind, rank 1 aborts in gloo's size check, 0 fails after it
- ``destroy_early3`` (3, srun): failing, 0 — rank 0 ``destroy_process_group()`` at step 12 (its
  own early stop), a clean tracker stop, exit 0; 1,2 fail in all_reduce
- ``subprocess_hang2`` (2, torchrun): hung, 0 — rank 0 waits on a child that prompts for a token
- ``loader_deadlock2`` (2, spawn): hung, 1 — rank 1's forked DataLoader workers inherit a held
  lock; rank 1 waits in the loader between steps, 0 in step 12's all_reduce
- ``monitored_queue3`` (3, python): failing, 1 — rank 1 in ``queue.get`` (its producer thread
  died); rank 0's ``monitored_barrier`` names rank 1
- ``gather_node_dst4`` (4, torchrun): hung, none — ``dist.gather`` to each node's leader on the
  default group: dst 0 on ranks 0,1 and 2 on ranks 2,3
- ``node_prefix4`` (4, srun 2 nodes x 2): failing, 3 — the log lines carry the LOCAL rank
  (``[rank1]``) in ``node-1.log``; global rank 3 raised; 0,1,2 fail after it
- ``healthy_monitored3`` (3, python): healthy — rank 2 6 s late to a ``monitored_barrier(60 s)``
- ``healthy_long_eval2`` (2, torchrun): healthy — a 7 s evaluation on every rank at step 10

Checked once before the labels' commit (no analysis: exit codes and the ranks' logs):
``subprocess_hang2`` first forgot the tracker (fixed); ``loader_deadlock2``'s workers could not
be pickled under spawn's start method (the dataset moved to module level, the loader forks, as
the deadlock needs); ``except_pass3`` ends in rank 1's SIGABRT (gloo's size check), not a hang,
so its label says failing with the rank that deviated (2), not the one that died.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.stalls import newcomer_hang_jobs4 as four
from tests.stalls.newcomer_hang_jobs import Job
from tests.stalls.newcomer_hang_jobs3 import load_labels

H = four.H
STEPS = four.STEPS
MODULE = "tests.stalls.newcomer_hang_jobs5"
JOBS: dict[str, Job] = load_labels(Path(__file__).resolve().parent / "data" / "newcomer5"
                                   / "labels.json")
#: labels the first analysis showed wrong, kept as committed (d5d6905) and scored
#: ``label-wrong`` by the benchmark: what the evidence showed instead
ERRATA: dict[str, str] = {
    "new_group_order4": "did not hang: the groups built in another order on rank 3 still "
                        "matched (every rank passed step 12 and reached step ~980 before the "
                        "launcher's 45 s limit SIGTERMed it); the check run looked only at "
                        "exit codes (-15) and logs (empty)"}
#: the srun job of two nodes with two tasks each
TWO_NODES = frozenset({"node_prefix4"})


class Ctx(four.Ctx):
    """Round four's rank context with this round's labels."""

    jobs = JOBS


# -- the jobs' bodies: what the user wrote ------------------------------------------------------
def train(c: Ctx, then: Callable[[int], bool | None], steps: int = STEPS) -> Any:
    """What most jobs here share: the tracker started, steps of ~40 ms with one all_reduce each,
    then ``then(step)`` inside the step; a true result leaves the loop. The tracker."""
    import torch
    import torch.distributed as dist
    t = c.start()
    x = torch.ones(4)
    for step in range(steps):
        with t.step(step):
            time.sleep(0.04)
            dist.all_reduce(x)
            if then(step):
                break
    return t


def _async_uneven(c: Ctx) -> None:
    """Gradient all_reduces overlapped with the next layer's work (``async_op=True``, then
    ``wait()`` on each); rank 1's shard is one batch shorter, and after the loop every rank
    meets in ``barrier()`` before saving."""
    import torch
    import torch.distributed as dist
    t = c.start()
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = H if c.rank == 1 else H + 1
    for step in range(batches):
        with t.step(step):
            time.sleep(0.04)
            opt.zero_grad()
            model(torch.randn(4, 8)).pow(2).mean().backward()
            works = [dist.all_reduce(p.grad, async_op=True) for p in model.parameters()]
            if step == H - 1 and c.rank == 1:
                c.hang_started()
            for w in works:
                w.wait()
            opt.step()
    dist.barrier()
    dist.destroy_process_group()


def _bcast_obj_rank0(c: Ctx) -> None:
    """Rank 0 re-reads the learning-rate schedule every 12 steps and shares it with
    ``broadcast_object_list`` — inside ``if rank == 0`` (the others never call it)."""
    import torch.distributed as dist

    def reload_schedule(step: int) -> None:
        if c.rank == 0 and step > 0 and step % H == 0:
            c.hang_started()
            sched = [{"lr": 0.01 * 0.5 ** (step // H)}]
            dist.broadcast_object_list(sched, src=0)
    train(c, reload_schedule)


def _gather_obj_skip(c: Ctx) -> None:
    """Every rank all-gathers its metrics dict for the log — except a rank with nothing to
    report this interval (rank 2: its validation subset is empty), which skips it."""
    import torch.distributed as dist

    def log_metrics(step: int) -> None:
        if step > 0 and step % H == 0:
            metrics = {} if c.rank == 2 else {"acc": 0.5, "rank": c.rank}
            if not metrics:
                c.hang_started()
                return
            out: list[Any] = [None] * c.world
            dist.all_gather_object(out, metrics)
    train(c, log_metrics)


def _new_group_order(c: Ctx) -> None:
    """2-D parallel groups (data parallel [0,1] [2,3], tensor parallel [0,2] [1,3]); rank 3's
    copy of the setup builds the tensor-parallel groups first."""
    import torch
    import torch.distributed as dist
    t = train(c, lambda step: None, H)
    x = torch.ones(4)
    dp = [[0, 1], [2, 3]]
    tp = [[0, 2], [1, 3]]
    order = (tp, dp) if c.rank == 3 else (dp, tp)
    if c.rank == 3:
        c.hang_started()
    with t.step(H):
        groups = {tuple(r): dist.new_group(r) for ranks in order for r in ranks}
        mine = [g for r, g in groups.items() if c.rank in r]
        for g in mine:
            dist.all_reduce(x, group=g)
    for step in range(H + 1, STEPS):
        with t.step(step):
            time.sleep(0.04)
            dist.all_reduce(x)


class MetricError(Exception):
    """The metric code's failure on one rank's batch."""


def _except_pass(c: Ctx) -> None:
    """The per-step metric: computed, then all-reduced — in a ``try`` whose ``except Exception:
    pass`` hides rank 2's failure at step 12 (a label it has never seen): rank 2 skips the
    metric's all_reduce and goes on one collective behind."""
    import torch
    import torch.distributed as dist
    t = c.start()
    grad, metric = torch.ones(16), torch.zeros(2)
    for step in range(STEPS):
        with t.step(step):
            time.sleep(0.04)
            dist.all_reduce(grad)
            try:
                if step == H and c.rank == 2:
                    c.hang_started()
                    raise MetricError("unknown label 7")
                metric.fill_(1.0)
                dist.all_reduce(metric)
            except Exception:  # the user's: "metrics must never stop training"
                pass


def _destroy_early(c: Ctx) -> None:
    """Early stopping decided on each rank's own validation loss: rank 0's plateaus at step
    12, so it ``destroy_process_group()``s and writes its final checkpoint (slow storage)."""
    import torch.distributed as dist

    def early_stop(step: int) -> bool:
        if c.rank == 0 and step == H:
            c.hang_started()
            print(f"rank {c.rank}: validation loss plateaued at step {step}, stopping",
                  flush=True)
            dist.destroy_process_group()
            return True
        return False
    train(c, early_stop).stop_tracking()
    with open(c.root / "final.bin", "wb") as fh:  # the final checkpoint, slowly
        for _ in range(80):
            fh.write(os.urandom(4096))
            time.sleep(0.25)


def _subprocess_hang(c: Ctx) -> None:
    """At step 12 rank 0 uploads the checkpoint with a tool that prompts for a token (its
    child waits on a terminal nobody types into); ``subprocess.run`` without a timeout."""
    def upload() -> None:
        c.hang_started()
        child = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                                  "print('token: ', end='', flush=True)\n"
                                  "while True: time.sleep(1)"])
        (c.root / f"child-{child.pid}").write_text(str(child.pid))
        child.wait()  # what subprocess.run does
    c.start()
    four.steps_then(c, 0, upload)


#: the dataset's index lock, shared with the index refresher thread
INDEX_LOCK = threading.Lock()


class Shard:
    """A map-style dataset reading through the index (under :data:`INDEX_LOCK`)."""

    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int) -> Any:
        import torch
        with INDEX_LOCK:
            return torch.ones(4)


def _loader_deadlock(c: Ctx) -> None:
    """A DataLoader with two forked workers whose dataset shares a lock with a background
    thread: on rank 1 the thread holds it when the workers fork, so each worker blocks forever."""
    import torch
    import torch.distributed as dist
    t = c.start()

    def refresh_index() -> None:  # rank 1's index refresher holds the lock for a while
        while True:
            with INDEX_LOCK:
                time.sleep(0.5)
            time.sleep(0.01)
    x = torch.ones(4)
    for step in range(H):
        with t.step(step):
            time.sleep(0.04)
            dist.all_reduce(x)
    if c.rank == 1:
        threading.Thread(target=refresh_index, daemon=True).start()
        time.sleep(0.1)
        c.hang_started()
    loader: Any = torch.utils.data.DataLoader(
        Shard(), batch_size=4, num_workers=2,  # type: ignore[arg-type]
        multiprocessing_context="fork")
    for step, batch in enumerate(loader, start=H):
        with t.step(step):
            time.sleep(0.04)
            dist.all_reduce(batch.sum(0))


def _monitored_queue(c: Ctx) -> None:
    """Every 12 steps ``monitored_barrier(timeout=5 s)`` to catch stragglers; rank 1 waits on
    its prefetch queue, whose producer thread died on a bad record."""
    import torch
    import torch.distributed as dist
    t = c.start()
    q: queue.Queue[int] = queue.Queue()

    def producer() -> None:
        for i in range(10_000):
            if c.rank == 1 and i == H:
                raise ValueError("bad record")
            q.put(i)
    threading.Thread(target=producer, daemon=True).start()
    x = torch.ones(4)
    for step in range(STEPS):
        with t.step(step):
            time.sleep(0.04)
            if c.rank == 1 and step == H:
                c.hang_started()
            q.get()
            if step > 0 and step % H == 0:
                dist.monitored_barrier(timeout=timedelta(seconds=5), wait_all_ranks=True)
            dist.all_reduce(x)


def _gather_node_dst(c: Ctx) -> None:
    """Each node gathers its ranks' losses to its node leader — with ``dist.gather`` on the
    default group (dst: rank 0 on node 0, rank 2 on node 1), which needs one dst for all."""
    import torch
    import torch.distributed as dist
    leader = c.rank - c.rank % 2

    def gather_losses(step: int) -> None:
        if step > 0 and step % H == 0:
            c.hang_started()
            loss = torch.ones(1) * c.rank
            bucket = [torch.zeros(1) for _ in range(c.world)] if c.rank == leader else None
            dist.gather(loss, bucket, dst=leader)
    train(c, gather_losses)


def _node_prefix(c: Ctx) -> None:
    """Two nodes, two tasks each; the log lines carry the LOCAL rank (``[rank1]``, the user's
    formatter); global rank 3 fails on a corrupt sample at step 12 and logs it before raising."""
    import torch
    import torch.distributed as dist
    local = int(os.environ["LOCAL_RANK"])
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format=f"%(asctime)s [rank{local}] %(levelname)s %(message)s")
    log = logging.getLogger("train")
    t = c.start()
    x = torch.ones(4)
    for step in range(STEPS):
        with t.step(step):
            time.sleep(0.04)
            if step % 4 == 0:
                log.info("step %d loss %.3f", step, 1.0 / (step + 1))
            try:
                if step == H and c.rank == 3:
                    c.hang_started()
                    raise ValueError(f"corrupt sample at offset {4096 * step}")
                dist.all_reduce(x)
            except ValueError:
                log.exception("step %d failed", step)
                raise


def _healthy_monitored(c: Ctx) -> None:
    """Rank 2 builds its token cache for 6 s at start; everyone meets in
    ``monitored_barrier(timeout=60 s)`` before training: a slow rank within bounds."""
    import torch
    import torch.distributed as dist
    t = c.start()
    with t.step(0):
        time.sleep(6.0 if c.rank == 2 else 0.1)
        dist.monitored_barrier(timeout=timedelta(seconds=60))
    x = torch.ones(4)
    for step in range(1, 25):
        with t.step(step):
            time.sleep(0.04)
            dist.all_reduce(x)
    dist.destroy_process_group()


def _healthy_long_eval(c: Ctx) -> None:
    """A 7 s evaluation on every rank at step 10 (no collective inside), then the metrics'
    all_reduce; training goes on and ends."""
    import torch
    import torch.distributed as dist

    def evaluate(step: int) -> None:
        if step == 10:
            deadline = time.monotonic() + 7.0
            while time.monotonic() < deadline:  # the evaluation loop
                time.sleep(0.05)
            dist.all_reduce(torch.ones(2))
    train(c, evaluate, 24)
    dist.destroy_process_group()


BODIES: dict[str, Callable[[Ctx], None]] = {
    "async_uneven3": _async_uneven, "bcast_obj_rank0_2": _bcast_obj_rank0,
    "gather_obj_skip3": _gather_obj_skip, "new_group_order4": _new_group_order,
    "except_pass3": _except_pass, "destroy_early3": _destroy_early,
    "subprocess_hang2": _subprocess_hang, "loader_deadlock2": _loader_deadlock,
    "monitored_queue3": _monitored_queue, "gather_node_dst4": _gather_node_dst,
    "node_prefix4": _node_prefix, "healthy_monitored3": _healthy_monitored,
    "healthy_long_eval2": _healthy_long_eval}


# -- one rank -----------------------------------------------------------------------------------
def _redirect(root: Path, name: str, rank: int) -> None:
    """The rank's output: ``logs/rank-R.log``, or its node's ``logs/node-N.log`` (both tasks
    appending) for the two-node job."""
    log_name = (f"node-{os.environ['SLURM_NODEID']}.log" if name in TWO_NODES
                else f"rank-{rank}.log")
    log = os.open(root / "logs" / log_name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    (root / f"pid-{rank}").write_text(str(os.getpid()))


def rank_main(out: Path, name: str) -> None:
    rank, world = four._rank_env()
    if "SLURM_LOCALID" in os.environ:
        os.environ["LOCAL_RANK"] = os.environ["SLURM_LOCALID"]
    root = out / name
    _redirect(root, name, rank)
    BODIES[name](Ctx(name, rank, world, root))


def spawned(local_rank: int, out: str, name: str, world: int) -> None:
    os.environ.update(RANK=str(local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(world))
    root = Path(out) / name
    _redirect(root, name, local_rank)
    BODIES[name](Ctx(name, local_rank, world, root))


class Launch(four.Launch):
    """Round four's launchers with this round's labels and module; srun's two-node job."""

    jobs = JOBS
    module = MODULE

    def srun_node(self, rank: int) -> dict[str, str]:
        if self.name in TWO_NODES:
            return {"SLURM_LOCALID": str(rank % 2), "SLURM_NODEID": str(rank // 2)}
        return super().srun_node(rank)

    def kill_leftovers(self) -> None:
        """Also the children a rank left (``subprocess_hang2``'s prompt)."""
        super().kill_leftovers()
        for f in self.root.glob("child-*"):
            with contextlib.suppress(ValueError, ProcessLookupError):
                os.kill(int(f.read_text()), signal.SIGKILL)


if __name__ == "__main__":
    if sys.argv[1] == "--rank":
        rank_main(Path(sys.argv[2]), sys.argv[3])
    elif sys.argv[1] == "--spawn":
        four.spawn_main(Path(sys.argv[2]), sys.argv[3], spawned, JOBS)
    else:
        four.generate(Path(sys.argv[1]), sys.argv[2:] or list(JOBS), Launch, frozenset())
