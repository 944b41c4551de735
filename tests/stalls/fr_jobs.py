"""Produce REAL Flight Recorder dumps from 4-rank gloo jobs (run as a script by the test fixture).

``python -m tests.stalls.fr_jobs OUT`` runs every scenario at once and writes, per scenario,
``OUT/<scenario>/pickle/nccl_trace_rank_<r>`` (``_dump_fr_trace``) and
``OUT/<scenario>/json/fr_<host>_rank<r>.json`` (``_dump_fr_trace_json``: the hostname-and-rank
naming some launchers use). The parent imports torch once and *forks* the ranks, so a scenario
costs the gloo timeout (``TIMEOUT_S``) rather than four torch imports.

Scenarios (world size 4, default group plus two ``tp`` pairs):
- ``healthy``: all_reduce, broadcast, all_gather_into_tensor, tp all_reduce, barrier — no hang;
- ``straggler``: rank 2 stalls outside the collective library (sleeps past the timeout) and
  never issues the 5th default-group all_reduce the others wait in;
- ``size_mismatch``: rank 1 all-reduces 6 elements where the others reduce 4; gloo does not fail
  fast, so the ranks drift and hang one collective later (the secondary symptom);
- ``size_mismatch_rank0``: the same with rank 0 as the culprit (torch's analyzer assumes the
  first rank innocent; stormotel does not);
- ``op_mismatch``: rank 3 broadcasts where the others all-reduce;
- ``tp_straggler``: rank 3 stalls before a ``tp`` all_reduce; rank 2 waits for it there, and
  ranks 0 and 1 then wait for both in the default group (a hang that crosses groups).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path

WORLD = 4
TIMEOUT_S = 2
#: scenario -> the rank that misbehaves (None: nobody)
SCENARIOS: dict[str, int | None] = {"healthy": None, "straggler": 2, "size_mismatch": 1,
                                    "size_mismatch_rank0": 0, "op_mismatch": 3,
                                    "tp_straggler": 3}


def _rank_main(rank: int, scenario: str, out: Path, init_file: str) -> None:
    import warnings

    import torch
    import torch.distributed as dist

    warnings.filterwarnings("ignore", category=FutureWarning)  # all_gather_into_tensor rename

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=WORLD, timeout=timedelta(seconds=TIMEOUT_S))
    tp_groups = [dist.new_group([0, 1], group_desc="tp"), dist.new_group([2, 3], group_desc="tp")]
    tp = tp_groups[rank // 2]
    x = torch.ones(4)
    error = None
    try:
        for _ in range(2):
            dist.all_reduce(x)
        dist.broadcast(x, src=0)
        dist.all_reduce(x, group=tp)
        gathered = torch.zeros(4 * WORLD)
        dist.all_gather_into_tensor(gathered, x)
        bad = rank == SCENARIOS[scenario]
        if scenario == "tp_straggler":
            # rank 3 stalls before a tensor-parallel all_reduce: its tp partner (2) waits in
            # the tp collective, so 0 and 1 then wait for BOTH 2 and 3 in the default group
            if bad:
                time.sleep(TIMEOUT_S + 1.0)
                _dump(rank, scenario, out, "stalled")
            dist.all_reduce(x, group=tp)
        if scenario == "straggler" and bad:
            # A stall outside the collective library (e.g. a data loader): this rank never
            # issues the next all_reduce; it is dumped while the others time out waiting.
            time.sleep(TIMEOUT_S + 1.0)
            _dump(rank, scenario, out, "stalled")
        if scenario.startswith("size_mismatch") and bad:
            dist.all_reduce(torch.ones(6))
        elif scenario == "op_mismatch" and bad:
            dist.broadcast(x, src=0)
        else:
            dist.all_reduce(x)
        dist.all_reduce(x)
        dist.barrier()
    except Exception as exc:  # the gloo timeout is the point of the scenario
        error = f"{type(exc).__name__}: {str(exc)[:160]}"
    _dump(rank, scenario, out, error or "ok")


def _dump(rank: int, scenario: str, out: Path, status: str) -> None:
    import torch

    c10d = torch._C._distributed_c10d
    pdir, jdir = out / scenario / "pickle", out / scenario / "json"
    (pdir / f"nccl_trace_rank_{rank}").write_bytes(c10d._dump_fr_trace())
    host = socket.gethostname().replace("_", "-")
    (jdir / f"fr_{host}_rank{rank}.json").write_bytes(c10d._dump_fr_trace_json())
    (out / scenario / f"rank{rank}.status").write_text(status)
    sys.stdout.flush()
    os._exit(0)  # skip gloo teardown, which can block on a peer that already left


def generate(out: Path) -> dict[str, float]:
    """Run all scenarios concurrently; return wall seconds per scenario."""
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    import multiprocessing as mp

    from tests.stalls.fork_parent import import_torch_before_fork

    import_torch_before_fork()  # once, before the fork: shared by every rank

    ctx = mp.get_context("fork")
    procs: dict[str, list[mp.process.BaseProcess]] = {}
    started = time.monotonic()
    for scenario in SCENARIOS:
        for sub in ("pickle", "json"):
            (out / scenario / sub).mkdir(parents=True, exist_ok=True)
        init_file = str(out / scenario / "init")
        procs[scenario] = [ctx.Process(target=_rank_main, args=(r, scenario, out, init_file))
                           for r in range(WORLD)]
        for p in procs[scenario]:
            p.start()
    took: dict[str, float] = {}
    # One deadline for all: the jobs take seconds alone, but all of them fork at once, and a
    # busy machine (make test's other workers, load 15 and more) once left a healthy rank
    # unfinished after a minute.
    deadline = started + 150
    for scenario, ps in procs.items():
        for p in ps:
            p.join(timeout=max(1.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                raise RuntimeError(f"{scenario}: rank process {p.pid} did not finish")
        took[scenario] = time.monotonic() - started
    return took


if __name__ == "__main__":
    for name, seconds in generate(Path(sys.argv[1])).items():
        print(f"{name} {seconds:.2f}s")
