"""REAL gloo jobs that hang or fail the way newcomers write them, round four (helper nh4): a
HELD-OUT set for every hang rule the stuck-job diagnosis has (rounds one to three wrote and
tuned their rules on their own jobs). ``python -m tests.stalls.newcomer_hang_jobs4 OUT [JOB...]``.

Unlike rounds two and three (ranks forked from one parent, ``file://`` rendezvous), each rank
here is a process of its own started the way users start them:

- ``torchrun``: the real ``python -m torch.distributed.run --nproc-per-node W`` (its
  rendezvous, its ``RANK``/``WORLD_SIZE``/``MASTER_*`` environment, its SIGTERM to the other
  workers after one fails); its own output in ``logs/launcher.log``;
- ``spawn``: a script calling ``torch.multiprocessing.spawn(main, nprocs=W)`` with ``env://``
  (``MASTER_ADDR``/``MASTER_PORT`` exported; spawn SIGTERMs the others when one fails);
- ``python``: one ``python train.py`` per rank, ``RANK``/``WORLD_SIZE``/``MASTER_*`` exported by
  hand (``env://``); nobody watches them (SIGTERM at the time limit, as a user's Ctrl-C);
- ``srun``: one task per rank with ``SLURM_PROCID``/``SLURM_NTASKS``/``SLURM_JOB_ID``, the
  script mapping them to ``env://`` (a failed task changes nothing; SIGTERM at the limit).

Every rank: torch CPU on gloo, ``MemoryTracker(sampler="simulated", archive_dir=...)`` with its
defaults (identity from the launcher's environment, the job id from ``STORMOTEL_JOB_ID``) except
the stall floor the earlier rounds lower (``STORMOTEL_STALL_FLOOR_S=2``); each rank's
stdout/stderr in ``OUT/<job>/logs/rank-R.log`` (torchrun's ``--log-dir``, srun's
``--output=rank-%t.log``); ``OUT/<job>/exits.json`` each rank's exit code as its launcher saw
it (negative: the signal; ``null``: the launcher does not say). Steps of ~50 ms; the bug
strikes at step :data:`H` (the tracker has seen its rhythm by then).

The labels (:data:`JOBS`) were written and committed BEFORE the analyzer first ran on any of
these jobs (the commit is in docs/stalls.md, "round four"). ``culprit``: the rank(s) whose
program deviates — the fix goes there. ``know``: what a careful engineer could know from the
evidence (the archive; the logs add what each rank printed).

The labels (world, launcher: label, culprit — what the evidence can show; in full in
:data:`JOBS`):

- ``clip_rank0_2`` (2, torchrun): failing, 0 — the grad-norm logger's all_reduce under ``if rank
  == 0`` every 12 steps; gloo's size check aborts rank 0, torchrun SIGTERMs rank 1
- ``wrong_peer3`` (3, python): hung, 2 — rank 2 receives from the wrong peer: 2 in recv, 1 in its
  isend's wait, 0 in step 13's all_reduce
- ``init_port2`` (2, python): hung, 1 — rank 1 given another MASTER_PORT: both in init, no step
- ``exit0_early3`` (3, srun): failing, 2 — rank 2 ``sys.exit(0)`` inside step 12 (exit 0); 0,1
  fail in all_reduce
- ``oom_torchrun3`` (3, torchrun): failing, 1 — rank 1 SIGKILLed; torchrun SIGTERMs 0,2
- ``input_wait2`` (2, python): hung, 0 — rank 0 in ``input()``; rank 1 in all_reduce
- ``lock_deadlock2`` (2, spawn): hung, 1 — rank 1 takes its logger's Lock twice; 0 in all_reduce
- ``nfs_retry3`` (3, srun): hung, 2 — rank 2 sleeps in a retry loop on a dead file server
- ``eval_rank0_2`` (2, torchrun): hung/failing, 0 — rank 0 all_reduces in an evaluation only it
  runs; rank 1 in the barrier after it
- ``uneven_shard4`` (4, spawn): hung/failing, none — uneven shards without Join
- ``healthy_catchup3`` (3, python): healthy — one 4 s step on rank 1, caught up
- ``healthy_final_ckpt2`` (2, torchrun): healthy — an 8 s final checkpoint on rank 0, then barrier

Checked once before the labels' commit (no analysis: exit codes and the ranks' own logs):
``wrong_peer3`` first used blocking ``send`` and deadlocked in three sends (round two's
``sendrecv2``), so it uses ``isend``; ``clip_rank0_2`` and ``uneven_shard4`` end in gloo's size
check (SIGABRT), so their labels say failing / no single rank.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.stalls.newcomer_hang_jobs import Job, Rank, allocate_activations, steps_then
from tests.stalls.newcomer_hang_jobs3 import load_labels

H = 12
STEPS = H + 1000
FLOOR_S = 2.0
#: the launcher lets a hanging job hang this long, and until every live rank left a snapshot,
#: at most :data:`MAX_HANG_S`
HANG_S = 12.0
MAX_HANG_S = 45.0
MAX_HEALTHY_S = 150.0
GRACE_S = 5.0
MODULE = "tests.stalls.newcomer_hang_jobs4"
#: jobs no rank of which ever steps (no snapshot can come): the user gives up after
#: :data:`HANG_S` (set after the first analysis run, the labels untouched: 45 s of a hang that
#: cannot change its evidence only lengthened the suite's fixture)
NO_STEP_JOBS = frozenset({"init_port2"})

#: the labels, as committed before the first analysis run (89e9de8, then a dict literal here;
#: moved unchanged to a data file so that twelve same-shaped entries are data, not code)
JOBS: dict[str, Job] = load_labels(Path(__file__).resolve().parent / "data" / "newcomer4"
                                   / "labels.json")


class Ctx(Rank):
    """What a job's body needs: round two's :class:`Rank` (rank, world, the job's folder, its
    ``coll`` and ``hang_started``), the tracker once started, and how this round starts."""

    jobs: dict[str, Job] = JOBS

    def __init__(self, name: str, rank: int, world: int, root: Path) -> None:
        self.name, self.job = name, self.jobs[name]
        super().__init__(rank, world, None, root, self.job.marks)

    def init(self, timeout_s: float = 300.0) -> None:
        """``init_process_group("gloo")`` from ``env://`` (what every launcher here exports)."""
        import torch.distributed as dist
        dist.init_process_group("gloo", timeout=timedelta(seconds=timeout_s))

    def track(self) -> Any:
        from stormotel import ExportConfig, MemoryTracker
        self.tracker = MemoryTracker(sampler="simulated",
                                     export=ExportConfig(archive_dir=self.root / "archive"))
        self.tracker.start_tracking()
        return self.tracker

    def start(self) -> Any:
        """The usual order: the process group, then the tracker (it reads the rank)."""
        self.init()
        return self.track()


# -- the jobs' bodies: what the newcomer wrote --------------------------------------------------
def _grads_all_reduce(model: Any, world: int) -> None:
    import torch.distributed as dist
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world


def global_grad_norm(model: Any) -> float:
    """The newcomer's grad-norm logger: the squared norm summed over every rank."""
    import torch
    import torch.distributed as dist
    total = torch.zeros(1)
    for p in model.parameters():
        total += p.grad.pow(2).sum()
    dist.all_reduce(total)
    return float(total.sqrt())


def _clip_rank0(c: Ctx) -> None:
    import torch
    t = c.start()
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(STEPS):
        with t.step(step):
            time.sleep(0.04)
            opt.zero_grad()
            model(torch.randn(4, 8)).pow(2).mean().backward()
            _grads_all_reduce(model, c.world)
            if c.rank == 0 and step > 0 and step % H == 0:  # log the norm on the main rank
                c.hang_started()
                print(f"step {step} grad norm {global_grad_norm(model):.3f}", flush=True)
            opt.step()


#: rank -> the rank it receives its halo from (a hand-written table; rank 2's entry is wrong)
RECV_FROM = {0: 2, 1: 0, 2: 0}


def _wrong_peer(c: Ctx) -> None:
    import torch
    import torch.distributed as dist
    t = c.start()
    x, halo, into = torch.ones(4), torch.ones(16), torch.zeros(16)
    for step in range(STEPS):
        with t.step(step):
            time.sleep(0.04)
            dist.all_reduce(x)
            if step > 0 and step % H == 0:  # exchange halos with the ring's neighbours
                if c.rank == 2:
                    c.hang_started()
                # isend, "so that the sends cannot deadlock"
                req = dist.isend(halo, dst=(c.rank + 1) % c.world)
                dist.recv(into, src=RECV_FROM[c.rank])
                req.wait()


def _init_port(c: Ctx) -> None:
    import torch
    import torch.distributed as dist
    t = c.track()  # the tracker at the top of the script, before the process group
    if c.rank == 0:
        c.hang_started()
    c.init()
    x = torch.ones(4)
    for step in range(30):
        with t.step(step):
            time.sleep(0.04)
            dist.all_reduce(x)
    dist.destroy_process_group()


def _exit0_early(c: Ctx) -> None:
    import torch
    import torch.distributed as dist
    t = c.start()
    x = torch.ones(4)
    shard_len = H if c.rank == 2 else STEPS  # rank 2's shard file is shorter
    for step in range(STEPS):
        with t.step(step):
            time.sleep(0.04)
            if step >= shard_len:
                c.hang_started()
                print(f"rank {c.rank}: shard exhausted at step {step}, done", flush=True)
                sys.exit(0)
            c.coll("all_reduce", lambda: dist.all_reduce(x))


def _oom_torchrun(c: Ctx) -> None:
    c.start()
    steps_then(c, 1, lambda: allocate_activations(c))  # the OOM killer: SIGKILL, no flush


def ask_overwrite(c: Ctx) -> None:
    """Rank 0's first checkpoint: the folder is already there, so it asks (nobody types)."""
    c.hang_started()
    answer = input("checkpoint dir exists, overwrite? [y/N] ")
    print(f"answer {answer!r}", flush=True)


def _input_wait(c: Ctx) -> None:
    c.start()
    steps_then(c, 0, lambda: ask_overwrite(c))


class MetricsLogger:
    """Rank-local metrics with a lock; ``log`` flushes when the buffer is full — and ``flush``
    takes the same (non-reentrant) lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.buf: list[float] = []

    def flush(self) -> None:
        with self.lock:
            self.buf.clear()

    def log(self, value: float, every: int) -> None:
        with self.lock:
            self.buf.append(value)
            if len(self.buf) >= every:
                self.flush()


def _lock_deadlock(c: Ctx) -> None:
    import torch
    import torch.distributed as dist
    t = c.start()
    x = torch.ones(4)
    metrics = MetricsLogger()
    for step in range(STEPS):
        with t.step(step):
            time.sleep(0.04)
            dist.all_reduce(x)
            if step == H and c.rank == 1:
                c.hang_started()
            # rank 1 buffers 13 values, the others 100: its first flush is at step 12
            metrics.log(float(x[0]), every=H + 1 if c.rank == 1 else 100)


def open_shard(path: str) -> bytes:
    """Read a shard from the file server, retrying while it does not answer."""
    while True:
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except OSError as e:
            print(f"open {path} failed ({e.strerror}), retrying in 2 s", flush=True)
            time.sleep(2.0)


def _nfs_retry(c: Ctx) -> None:
    import torch
    import torch.distributed as dist
    t = c.start()
    x = torch.ones(4)
    for step in range(STEPS):
        with t.step(step):
            time.sleep(0.04)
            if step == H and c.rank == 2:  # its next shard lives on the dead server
                c.hang_started()
                open_shard(f"/mnt/nfs-dead/shards/{c.rank:05d}-{step:05d}.bin")
            c.coll("all_reduce", lambda: dist.all_reduce(x))


def evaluate(model: Any) -> float:
    """The newcomer's evaluation (copied from a multi-rank script): the correct count summed
    over ranks."""
    import torch
    import torch.distributed as dist
    with torch.no_grad():
        correct = (model(torch.randn(16, 8)).argmax(1) == 0).sum().float().reshape(1)
        dist.all_reduce(correct)
    return float(correct)


def _eval_rank0(c: Ctx) -> None:
    import torch
    import torch.distributed as dist
    t = c.start()
    model = torch.nn.Linear(8, 4)
    x = torch.ones(4)
    step = 0
    for epoch in range(100):
        for _ in range(H):
            with t.step(step):
                time.sleep(0.04)
                dist.all_reduce(x)
            step += 1
        if c.rank == 0:  # only the main rank evaluates ...
            c.hang_started()
            print(f"epoch {epoch} correct {evaluate(model)}", flush=True)
        dist.barrier()  # ... and everyone waits for it


def _uneven_shard(c: Ctx) -> None:
    import torch
    import torch.distributed as dist
    t = c.start()
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    samples = list(range(50))
    shard = samples[c.rank::c.world]  # 13, 13, 12, 12
    for step, _sample in enumerate(shard):
        with t.step(step):
            time.sleep(0.04)
            if step == H - 1 and c.rank in (0, 1):
                c.hang_started()
            opt.zero_grad()
            model(torch.randn(4, 8)).pow(2).mean().backward()
            _grads_all_reduce(model, c.world)
            opt.step()
    val = torch.ones(1)
    dist.all_reduce(val)  # the validation loss over every rank
    dist.destroy_process_group()


def _healthy_catchup(c: Ctx) -> None:
    import torch
    import torch.distributed as dist
    t = c.start()
    x = torch.ones(4)
    for step in range(30):
        with t.step(step):
            time.sleep(4.0 if (step == 10 and c.rank == 1) else 0.04)
            c.coll("all_reduce", lambda: dist.all_reduce(x))
    dist.destroy_process_group()


def _healthy_final_ckpt(c: Ctx) -> None:
    import torch
    import torch.distributed as dist
    c.init(timeout_s=1800.0)
    t = c.track()
    x = torch.ones(4)
    for step in range(20):
        with t.step(step):
            time.sleep(0.05)
            dist.all_reduce(x)
    if c.rank == 0:  # the final checkpoint: large, slow storage
        with open(c.root / "final.bin", "wb") as fh:
            for _ in range(32):
                fh.write(os.urandom(64 * 1024))
                fh.flush()
                os.fsync(fh.fileno())
                time.sleep(0.25)
    dist.barrier()
    dist.destroy_process_group()


BODIES: dict[str, Callable[[Ctx], None]] = {
    "clip_rank0_2": _clip_rank0, "wrong_peer3": _wrong_peer, "init_port2": _init_port,
    "exit0_early3": _exit0_early, "oom_torchrun3": _oom_torchrun, "input_wait2": _input_wait,
    "lock_deadlock2": _lock_deadlock, "nfs_retry3": _nfs_retry, "eval_rank0_2": _eval_rank0,
    "uneven_shard4": _uneven_shard, "healthy_catchup3": _healthy_catchup,
    "healthy_final_ckpt2": _healthy_final_ckpt}


# -- one rank: what `python train.py` runs ------------------------------------------------------
def _rank_env() -> tuple[int, int]:
    """The rank and world from the launcher's environment; srun's mapped to env:// as users
    do."""
    if "SLURM_PROCID" in os.environ and "RANK" not in os.environ:
        os.environ["RANK"] = os.environ["SLURM_PROCID"]
        os.environ["WORLD_SIZE"] = os.environ["SLURM_NTASKS"]
        os.environ["LOCAL_RANK"] = os.environ["SLURM_LOCALID"]
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def _redirect(root: Path, rank: int) -> None:
    log = os.open(root / "logs" / f"rank-{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                  0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    (root / f"pid-{rank}").write_text(str(os.getpid()))


def rank_main(out: Path, name: str) -> None:
    """A script's main: rank from the environment, its output to its log, the body."""
    rank, world = _rank_env()
    root = out / name
    _redirect(root, rank)
    BODIES[name](Ctx(name, rank, world, root))


def spawned(local_rank: int, out: str, name: str, world: int) -> None:
    """``torch.multiprocessing.spawn``'s function: the rank is its index."""
    os.environ.update(RANK=str(local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(world))
    root = Path(out) / name
    _redirect(root, local_rank)
    BODIES[name](Ctx(name, local_rank, world, root))


def spawn_main(out: Path, name: str, fn: Callable[[int, str, str, int], None] | None = None,
               jobs: dict[str, Job] = JOBS) -> None:
    """The user's spawn script: ``mp.spawn`` then wait; each rank's exit code to exits.json.
    ``fn``: the spawned function (default :func:`spawned`; round five's its own)."""
    import torch.multiprocessing as mp
    world = jobs[name].world
    ctx = mp.spawn(fn or spawned, args=(str(out), name, world), nprocs=world, join=False)

    def stop(signum: int, frame: Any) -> None:  # the time limit: SIGTERM to the whole group
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, stop)
    try:
        while not ctx.join():
            pass
    finally:
        for p in ctx.processes:
            p.join(GRACE_S)
        (out / name / "exits.json").write_text(json.dumps(
            {str(r): p.exitcode for r, p in enumerate(ctx.processes)}))


# -- the launchers ------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


class Launch:
    """One job's launcher processes and how to stop them."""

    #: the round's labels and the module whose ``--rank``/``--spawn`` run a rank (round five
    #: subclasses with its own)
    jobs: dict[str, Job] = JOBS
    module: str = MODULE

    def __init__(self, out: Path, name: str) -> None:
        self.name, self.root, self.job = name, out / name, self.jobs[name]
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "STORMOTEL_STALL_FLOOR_S": str(FLOOR_S), "STORMOTEL_JOB_ID": name,
               "PYTHONUNBUFFERED": "1"}
        port, w, cmd = _free_port(), self.job.world, [sys.executable, "-m", self.module]
        launcher_log = open(self.root / "logs" / "launcher.log", "ab")  # noqa: SIM115
        self.procs: list[subprocess.Popen[bytes]] = []
        if self.job.launcher == "torchrun":
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
                 "--nproc-per-node", str(w), "--master-addr", "127.0.0.1", "--master-port",
                 str(port), "-m", self.module, "--rank", str(out), name],
                env=env, stdout=launcher_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True))
        elif self.job.launcher == "spawn":
            self.procs.append(subprocess.Popen(
                [*cmd, "--spawn", str(out), name], stdout=launcher_log, stderr=subprocess.STDOUT,
                env={**env, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)},
                stdin=subprocess.DEVNULL, start_new_session=True))
        else:
            for r in range(w):
                if self.job.launcher == "srun":
                    renv = {"SLURM_PROCID": str(r), "SLURM_NTASKS": str(w),
                            "SLURM_JOB_ID": "4242", **self.srun_node(r),
                            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
                else:
                    renv = {"RANK": str(r), "WORLD_SIZE": str(w), "LOCAL_RANK": str(r),
                            "MASTER_ADDR": "127.0.0.1",
                            # init_port2: rank 1's shell exported another port
                            "MASTER_PORT": str(port + 1 if name == "init_port2" and r == 1
                                               else port)}
                self.procs.append(subprocess.Popen(
                    [*cmd, "--rank", str(out), name], env={**env, **renv},
                    stdout=launcher_log, stderr=subprocess.STDOUT,
                    stdin=subprocess.PIPE, start_new_session=True))  # stdin: nobody types
        launcher_log.close()

    def srun_node(self, rank: int) -> dict[str, str]:
        """srun's per-task node variables: every task on one node here."""
        return {"SLURM_LOCALID": str(rank), "SLURM_NODEID": "0"}

    def done(self) -> bool:
        return all(p.poll() is not None for p in self.procs)

    def rank_pids(self) -> dict[int, int]:
        pids = {}
        for f in self.root.glob("pid-*"):
            try:
                pids[int(f.name[4:])] = int(f.read_text())
            except ValueError:
                continue
        return pids

    def every_live_rank_snapshotted(self) -> bool:
        stacks = self.root / "archive" / self.name / "stacks"
        names = [p.name for p in stacks.glob("rank-*.stack.*")] if stacks.is_dir() else []
        return all(any(n.startswith(f"rank-{r}-") and not n.endswith(".stack.pending")
                       for n in names) for r, pid in self.rank_pids().items() if _alive(pid))

    def signal(self, sig: int) -> None:
        """The user's Ctrl-C / srun's time limit: to the launcher's whole process group."""
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, sig)

    def kill_leftovers(self) -> None:
        """What the scheduler's node cleanup does: torchrun starts its workers in sessions of
        their own, and a worker blocked in C++ outlives a torchrun killed after its grace."""
        for pid in self.rank_pids().values():
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def write_exits(self) -> None:
        if self.job.launcher == "spawn" and (self.root / "exits.json").exists():
            return
        if self.job.launcher == "torchrun":
            codes = _torchrun_exits(self.root / "logs" / "launcher.log", self.job.world,
                                    self.procs[0].returncode)
        else:
            codes = {str(r): p.returncode for r, p in enumerate(self.procs)}
        (self.root / "exits.json").write_text(json.dumps(codes))


def _torchrun_exits(log: Path, world: int, code: int | None) -> dict[str, int | None]:
    """Each worker's exit code as torchrun's failure summary states it (``rank : R``, ``exitcode
    : C``); a worker it does not list ended 0 when torchrun did, else unknown (``None``)."""
    codes: dict[str, int | None] = {str(r): 0 if code == 0 else None for r in range(world)}
    rank: str | None = None
    for line in log.read_text(errors="replace").splitlines():
        key, _, value = line.strip().partition(":")
        if key.strip() == "rank" and value.split():
            rank = value.split()[0]
        elif key.strip() == "exitcode" and rank is not None:
            with contextlib.suppress(ValueError, IndexError):
                codes[rank] = int(value.split()[0])
            rank = None
    return codes


def generate(out: Path, names: list[str], launch: type[Launch] = Launch,
             no_step_jobs: frozenset[str] = NO_STEP_JOBS) -> None:
    """Start the named jobs at once, each by its launcher; stop the hung ones as a user would
    (SIGTERM to the launcher's group once every live rank left a snapshot, SIGKILL after a
    grace); write each job's exits.json."""
    launches = {name: launch(out, name) for name in names}
    started = time.monotonic()
    hang_seen: dict[str, float] = {}
    stopped: dict[str, float] = {}
    while any(not la.done() for la in launches.values()):
        now = time.monotonic()
        for name, la in launches.items():
            if la.done():
                continue
            if name in stopped:
                if now - stopped[name] > GRACE_S:
                    la.signal(signal.SIGKILL)
                continue
            if name not in hang_seen and (la.root / "hang_started").exists():
                hang_seen[name] = now
            since = now - hang_seen[name] if name in hang_seen else None
            limit = (now - started > MAX_HEALTHY_S) if la.job.label == "healthy" else (
                (since is not None and (since > MAX_HANG_S or (
                    since > HANG_S and (name in no_step_jobs
                                        or la.every_live_rank_snapshotted()))))
                or now - started > MAX_HANG_S + 120)
            if limit:
                (la.root / "sigterm_ns").write_text(str(time.time_ns()))
                la.signal(signal.SIGTERM)
                stopped[name] = now
        time.sleep(0.2)
    for la in launches.values():
        la.kill_leftovers()
        la.write_exits()


if __name__ == "__main__":
    if sys.argv[1] == "--rank":
        rank_main(Path(sys.argv[2]), sys.argv[3])
    elif sys.argv[1] == "--spawn":
        spawn_main(Path(sys.argv[2]), sys.argv[3])
    else:
        generate(Path(sys.argv[1]), sys.argv[2:] or list(JOBS))
