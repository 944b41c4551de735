"""REAL gloo jobs that hang or fail the way newcomers write them, round three (helper nh): a
HELD-OUT set for round two's rules (``ended_unstopped``, ``later_step_unmarked``,
``exception_own_code``, ``exception_in_collective``). ``python -m tests.stalls.newcomer_hang_jobs3
OUT [JOB...]``.

The same harness as round two (:mod:`tests.stalls.newcomer_hang_jobs`: torch CPU on gloo, 2-4
ranks, the tracker in every rank with its defaults except the 2 s stall floor, an archive per
job, each rank's stdout/stderr in ``OUT/<job>/logs/rank-R.log``, the parent playing ``srun`` or
``torchrun``, ``exits.json``), with shapes round two did not write. Most jobs here run their exit
handlers after an uncaught exception (``python train.py`` under a launcher, the common case).

The labels (:data:`JOBS`, read from ``data/newcomer3/labels.json``) were written and committed
BEFORE the analyzer first ran on any of these jobs (the commit is in docs/stalls.md, "round
three"). The jobs themselves ran once before
(no analysis: exit codes and the ranks' own logs only) to check each behaves as written — round
two's ``subset_group4`` did not hang; here ``new_group4`` does (every rank SIGKILLed after the
launcher's SIGTERM) — and ``ckpt_slow3``'s write was shortened (64 -> 40 chunks) so that it ends
before the launcher's time limit. ``culprit``: the rank(s) whose
program deviates — the fix goes there; ``None``: no single rank is the cause ("undecided" is
the right answer). ``know``: what a careful engineer could know from the archive (the ranks'
logs add the tracebacks).

- ``victim_rethrow3`` (3, srun): failing, culprit 1 — rank 1 SIGKILLed (the OOM killer) at step
  12; ranks 0 and 2 catch their all_reduce's gloo error and raise a plain
  ``RuntimeError("training failed at step 12")`` from their own code: victims, never the culprit
- ``data_raise3`` (3, srun): failing, culprit 2 — rank 2's DataLoader worker raises KeyError (an
  unknown token in its shard) at batch 12; torch re-raises it in the main process in the
  ``for`` header, between two step spans; ranks 0, 2 fail in all_reduce
- ``loss_value2`` (2, torchrun): failing, culprit 1 — rank 1's last batch has squeezed labels:
  ``binary_cross_entropy`` raises ValueError (target size != input size) in its loss; torchrun
  stops rank 0
- ``monitored3`` (3, srun): failing, culprit 2 — rank 2 spends 12 s fetching a vocab (its cache
  missed) before ``monitored_barrier(timeout=5 s)``; rank 0 raises "Ranks 2 failed to pass
  monitoredBarrier"; rank 1 and then rank 2 fail in it too
- ``new_group4`` (4, srun): hung, culprit None — ranks 0,1 call ``new_group([0,1])`` under ``if``;
  then every rank calls ``new_group(all)``: the group counters differ (0,1: "2"; 2,3: "1"), ranks
  0,1 wait for store keys nobody writes. Every rank is in the same ``new_group`` line: only the
  code shows the earlier conditional call
- ``ddp_unused2`` (2, srun): failing (or hung), culprit 1 — DDP with
  ``find_unused_parameters=False``; at step 12 rank 1's batch has no aux labels and skips the
  aux head: its gradient bucket never becomes ready; rank 0 waits in backward's all_reduce
- ``wrong_src3`` (3, srun): hung/failing (or silently wrong), culprit 2 — at step 12 rank 2
  broadcasts with ``src=2`` (its own rank) while ranks 0,1 use ``src=0``
- ``tokenizer_spin3`` (3, srun): hung/failing, culprit 1 — rank 1's tokenizer loops for ever on
  a non-breaking space (``continue`` before ``i += 1``): pure-Python CPU, no sleep; ranks 0,2 in
  all_reduce. (In the check run rank 1 died by SIGSEGV while faulthandler's watchdog dumped its
  stack — a truncated ``.stack.pending`` — and ranks 0,2 then failed "Connection closed by
  peer": the job may end failing, the culprit is the same)
- ``early_stop2`` (2, srun): failing, culprit 1 — rank 1 decides on its LOCAL loss to stop early
  at step 12, calls ``destroy_process_group()`` and ends well (exit 0); rank 0's all_reduce
  fails (peer closed)
- ``ckpt_slow3`` (3, srun): failing, culprit 0 — rank 0 saves a checkpoint alone (~9 s of
  chunked, fsynced writes) before a barrier; the process group's timeout is 6 s, so ranks 1,2
  time out in the barrier; rank 0 was slow, never hung (it reaches the barrier and fails there)
- ``ddp_stuck_read2`` (2, srun): hung, culprit 1 — DDP; at step 12 rank 1 blocks for ever in a
  read of its shard (a pipe nobody writes: GIL released); rank 0 waits in backward's gradient
  all_reduce
- ``healthy_slow2`` (2, srun): healthy — 0.5 s steps, every 6th step 3.5 s on both ranks (a
  periodic write both make); the job ends
- ``healthy_join4`` (4, srun): healthy — DDP under ``Join``: rank 3 has 14 batches, the others
  20; the join context shadows rank 3's missing all_reduces; the job ends
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.stalls.newcomer_hang_jobs import (
    STEPS,
    H,
    Job,
    Rank,
    allocate_activations,
    generate,
    loader_steps,
)

#: steps of the healthy controls
STEPS_SLOW = 14
BATCHES_JOIN = 20

#: the labels, as committed before the first analysis run (09ac888, then a dict literal here;
#: moved unchanged to a data file so that thirteen same-shaped entries are data, not code)
LABELS = Path(__file__).resolve().parent / "data" / "newcomer3" / "labels.json"


def load_labels(path: Path = LABELS) -> dict[str, Job]:
    """A round's labels from its data file (round four's too)."""
    raw = json.loads(path.read_text())
    return {name: Job(**{**d, "culprit": None if d["culprit"] is None else tuple(d["culprit"])})
            for name, d in raw.items()}


JOBS: dict[str, Job] = load_labels()


# -- the jobs' bodies: what the newcomer wrote --------------------------------------------------
def _steps(r: Rank, then: Callable[[int], None]) -> None:
    """Steps of ~40 ms with one all_reduce each (in a mark when the job marks its collectives),
    then ``then(step)``: what most jobs here share; each job's bug is in its ``then``."""
    import torch
    import torch.distributed as dist

    x = torch.ones(4)
    for step in range(STEPS):
        with r.tracker.step(step):
            time.sleep(0.04)
            r.coll("all_reduce", lambda: dist.all_reduce(x))
            then(step)


def _victim_rethrow(r: Rank) -> None:
    import torch
    import torch.distributed as dist

    x = torch.ones(4)
    for step in range(STEPS):
        with r.tracker.step(step):
            time.sleep(0.04)
            if step == H and r.rank == 1:
                allocate_activations(r)  # the OOM killer: SIGKILL
            try:
                dist.all_reduce(x)
            except Exception:
                print(f"rank {r.rank}: all_reduce failed, giving up", flush=True)
                raise RuntimeError(f"training failed at step {step}")  # noqa: B904


class TokenShard:
    """Rank 2's shard holds a word its vocabulary lacks at index :data:`H`."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.vocab = {"the": 1, "cat": 2, "sat": 3, "mat": 4}

    def __len__(self) -> int:
        return STEPS

    def __getitem__(self, i: int) -> Any:
        import torch
        words = "the cat sat zebra" if (self.rank == 2 and i == H) else "the cat sat mat"
        return torch.tensor([float(self.vocab[w]) for w in words.split()])


def _data_raise(r: Rank) -> None:
    loader_steps(r, TokenShard(r.rank), 2)


def _loss_value(r: Rank) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(STEPS):
        with r.tracker.step(step):
            time.sleep(0.04)
            x, y = torch.randn(4, 8), torch.rand(4, 1)
            if step == H and r.rank == 1:
                r.hang_started()
                y = y.squeeze()  # the last batch's labels lost their dimension
            opt.zero_grad()
            loss = F.binary_cross_entropy(torch.sigmoid(model(x)), y)
            loss.backward()
            for p in model.parameters():
                assert p.grad is not None
                dist.all_reduce(p.grad)
            opt.step()


def fetch_vocab(seconds: float) -> None:
    """Rank 2's cache missed: it downloads the vocabulary (slow, but it returns)."""
    time.sleep(seconds)


def _monitored(r: Rank) -> None:
    import torch.distributed as dist

    def then(step: int) -> None:
        if step != H:
            return
        if r.rank == 2:
            fetch_vocab(12.0)
            # after the fetch (edited after the first analysis run, label untouched): the
            # launcher's 12 s limit from here cannot race the fetch at high load
            r.hang_started()
        dist.monitored_barrier(timeout=timedelta(seconds=5))
    _steps(r, then)


def _new_group(r: Rank) -> None:
    import torch
    import torch.distributed as dist

    y = torch.ones(2)

    def then(step: int) -> None:
        if step != H:
            return
        r.hang_started()
        if r.rank in (0, 1):  # the first stage's group, made by the first stage only
            stage = dist.new_group([0, 1])
            r.coll("all_reduce", lambda: dist.all_reduce(y, group=stage))
        metrics = dist.new_group(list(range(r.world)))  # every rank: a metrics group
        r.coll("all_reduce", lambda: dist.all_reduce(y, group=metrics))
    _steps(r, then)


def _ddp_unused(r: Rank) -> None:
    import torch
    from torch.nn.parallel import DistributedDataParallel

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = torch.nn.Linear(8, 8)
            self.head = torch.nn.Linear(8, 1)
            self.aux = torch.nn.Linear(8, 1)

        def forward(self, x: Any, with_aux: bool) -> Any:
            h = self.body(x)
            return self.head(h) + self.aux(h) if with_aux else self.head(h)

    model = DistributedDataParallel(Net(), find_unused_parameters=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(STEPS):
        with r.tracker.step(step):
            time.sleep(0.04)
            with_aux = not (step == H and r.rank == 1)  # this batch has no aux labels
            if not with_aux:
                r.hang_started()
            opt.zero_grad()
            model(torch.randn(4, 8), with_aux).sum().backward()
            opt.step()


def _wrong_src(r: Rank) -> None:
    import torch
    import torch.distributed as dist

    cfg = torch.zeros(8)

    def then(step: int) -> None:
        leader = 0
        if step == H and r.rank == 2:  # "the rank that changed the config sends it"
            r.hang_started()
            leader = r.rank
        r.coll("broadcast", lambda: dist.broadcast(cfg, src=leader))
    _steps(r, then)


def tokenize(text: str) -> list[int]:
    """The newcomer's tokenizer: a non-breaking space loops for ever (``continue`` before the
    index moves)."""
    out: list[int] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\u00a0":
            continue
        out.append(ord(ch))
        i += 1
    return out


def _tokenizer_spin(r: Rank) -> None:
    import torch
    import torch.distributed as dist

    for step in range(STEPS):
        with r.tracker.step(step):
            time.sleep(0.04)
            text = "the cat\u00a0sat" if (step == H and r.rank == 1) else "the cat sat"
            if "\u00a0" in text:
                r.hang_started()
            x = torch.tensor(tokenize(text), dtype=torch.float32)
            dist.all_reduce(x)


def local_loss(step: int, rank: int) -> float:
    """Rank 1's loss falls below the threshold at step :data:`H`; rank 0's never does."""
    return 0.05 if (rank == 1 and step >= H) else 1.0 / (1 + step * 0.01)


def _early_stop(r: Rank) -> None:
    import torch
    import torch.distributed as dist

    x = torch.ones(4)
    for step in range(STEPS):
        with r.tracker.step(step):
            time.sleep(0.04)
            if local_loss(step, r.rank) < 0.1:  # "converged": stop early (on this rank only)
                r.hang_started()
                break
            dist.all_reduce(x)
    dist.destroy_process_group()


def save_checkpoint(path: Path, chunks: int = 40) -> None:
    """Rank 0's checkpoint to slow storage: chunked, each chunk fsynced (~9 s)."""
    block = os.urandom(256 * 1024)
    with open(path, "wb") as fh:
        for _ in range(chunks):
            fh.write(block)
            fh.flush()
            os.fsync(fh.fileno())
            time.sleep(0.2)


def _ckpt_slow(r: Rank) -> None:
    import torch.distributed as dist

    def then(step: int) -> None:
        if step != H:
            return
        if r.rank == 0:
            r.hang_started()
            save_checkpoint(r.root / "ckpt.bin")
        r.coll("barrier", dist.barrier)
    _steps(r, then)


def read_shard(fd: int) -> bytes:
    """Rank 1's shard read from a remote file that never answers (blocks in C, GIL released)."""
    select.select([fd], [], [])
    return os.read(fd, 1)


def _ddp_stuck_read(r: Rank) -> None:
    import torch
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    never, _keep = os.pipe()
    for step in range(STEPS):
        with r.tracker.step(step):
            time.sleep(0.04)
            if step == H and r.rank == 1:
                r.hang_started()
                read_shard(never)
            opt.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            opt.step()


def _healthy_slow(r: Rank) -> None:
    import torch
    import torch.distributed as dist

    x = torch.ones(4)
    for step in range(STEPS_SLOW):
        with r.tracker.step(step):
            time.sleep(3.5 if step % 6 == 5 else 0.5)
            r.coll("all_reduce", lambda: dist.all_reduce(x))


def _healthy_join(r: Rank) -> None:
    import torch
    from torch.distributed.algorithms.join import Join
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = BATCHES_JOIN - (6 if r.rank == 3 else 0)
    with Join([model]):
        for step in range(batches):
            with r.tracker.step(step):
                time.sleep(0.05)
                opt.zero_grad()
                model(torch.randn(4, 8)).sum().backward()
                opt.step()


BODIES: dict[str, Callable[[Rank], None]] = {
    "victim_rethrow3": _victim_rethrow, "data_raise3": _data_raise,
    "loss_value2": _loss_value, "monitored3": _monitored, "new_group4": _new_group,
    "ddp_unused2": _ddp_unused, "wrong_src3": _wrong_src, "tokenizer_spin3": _tokenizer_spin,
    "early_stop2": _early_stop, "ckpt_slow3": _ckpt_slow, "ddp_stuck_read2": _ddp_stuck_read,
    "healthy_slow2": _healthy_slow, "healthy_join4": _healthy_join}


if __name__ == "__main__":
    generate(Path(sys.argv[1]), sys.argv[2:] or list(JOBS), JOBS, BODIES)
