"""REAL Flight Recorder dumps (and worker logs) for the shapes large jobs leave behind.

``python -m tests.stalls.fr_scale_jobs OUT`` forks every scenario from one torch import (gloo,
``TIMEOUT_S`` collective timeout) and writes ``OUT/<scenario>/dumps/nccl_trace_rank_<r>`` plus
``OUT/<scenario>/logs/rank<r>.log`` (what each rank printed: timestamps, its own exception):

- ``tp_dp_stall`` (8 ranks, 2-D: tensor-parallel pairs {0,1} {2,3} {4,5} {6,7} inside
  data-parallel groups {0,2,4,6} {1,3,5,7}): rank 5 stalls before a tp all_reduce; its tp
  partner 4 waits there, the data-parallel groups then wait for 4 and 5, the default group for
  everyone. One rank explains every group's wait;
- ``dies_no_dump``: rank 1 dies before a collective and leaves no dump;
- ``dies_empty_dump``: rank 1 dies while dumping (an empty dump file);
- ``oom``: rank 2 runs out of (host) memory — a real allocator failure, its traceback in its
  log — while the others wait in the next all_reduce.

gloo's recorder in torch 2.13 records no point-to-point entries (send/recv leave nothing), so a
pipeline hang cannot be produced here; tests/stalls/test_fr_p2p.py uses NCCL-shaped dumps.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from datetime import UTC, datetime, timedelta
from pathlib import Path

TIMEOUT_S = 3
SCENARIOS: dict[str, int] = {"tp_dp_stall": 8, "dies_no_dump": 4, "dies_empty_dump": 4,
                             "oom": 4}


def _log(out: Path, scenario: str, rank: int, text: str) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    with (out / scenario / "logs" / f"rank{rank}.log").open("a") as f:
        for line in text.rstrip("\n").split("\n"):
            f.write(f"[rank{rank}]:{stamp} {line}\n")


def _rank_main(rank: int, scenario: str, out: Path) -> None:
    import torch
    import torch.distributed as dist

    world = SCENARIOS[scenario]
    dist.init_process_group("gloo", init_method=f"file://{out / scenario / 'init'}",
                            rank=rank, world_size=world, timeout=timedelta(seconds=TIMEOUT_S))
    _log(out, scenario, rank, f"world_size={world} rank={rank} backend=gloo")
    x = torch.ones(4)
    try:
        if scenario == "tp_dp_stall":
            tps = [dist.new_group([2 * i, 2 * i + 1], group_desc="tp") for i in range(4)]
            dps = [dist.new_group([i, i + 2, i + 4, i + 6], group_desc="dp") for i in range(2)]
            tp, dp = tps[rank // 2], dps[rank % 2]
            for _ in range(2):
                dist.all_reduce(x, group=tp)
                dist.all_reduce(x, group=dp)
            dist.all_reduce(x)
            if rank == 5:
                time.sleep(TIMEOUT_S + 1.5)
                _dump(rank, scenario, out)
            dist.all_reduce(x, group=tp)
            dist.all_reduce(x, group=dp)
            dist.all_reduce(x)
        else:
            for _ in range(3):
                dist.all_reduce(x)
            if scenario.startswith("dies") and rank == 1:
                _log(out, scenario, rank, "loading next shard")
                if scenario == "dies_empty_dump":
                    (out / scenario / "dumps" / f"nccl_trace_rank_{rank}").write_bytes(b"")
                os._exit(1)
            if scenario == "oom" and rank == 2:
                try:
                    torch.empty(1 << 58, dtype=torch.uint8)
                except RuntimeError:
                    _log(out, scenario, rank, traceback.format_exc())
                    _dump(rank, scenario, out)
            dist.all_reduce(x)
            dist.all_reduce(x)
    except Exception as exc:  # the gloo timeout is the point of the scenario
        _log(out, scenario, rank, f"RuntimeError: {str(exc)[:200]}")
    _dump(rank, scenario, out)


def _dump(rank: int, scenario: str, out: Path) -> None:
    import torch

    path = out / scenario / "dumps" / f"nccl_trace_rank_{rank}"
    path.write_bytes(torch._C._distributed_c10d._dump_fr_trace())
    sys.stdout.flush()
    os._exit(0)  # skip gloo teardown, which can block on a peer that already left


def generate(out: Path) -> dict[str, float]:
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    import multiprocessing as mp

    from tests.stalls.fork_parent import import_torch_before_fork

    import_torch_before_fork()  # once, before the fork: shared by every rank

    ctx = mp.get_context("fork")
    procs: dict[str, list[mp.process.BaseProcess]] = {}
    started = time.monotonic()
    for scenario, world in SCENARIOS.items():
        for sub in ("dumps", "logs"):
            (out / scenario / sub).mkdir(parents=True, exist_ok=True)
        procs[scenario] = [ctx.Process(target=_rank_main, args=(r, scenario, out))
                           for r in range(world)]
        for p in procs[scenario]:
            p.start()
    took: dict[str, float] = {}
    for scenario, ps in procs.items():
        for p in ps:
            p.join(timeout=150)
            if p.is_alive():
                p.kill()
                raise RuntimeError(f"{scenario}: rank process {p.pid} did not finish")
        took[scenario] = time.monotonic() - started
    return took


if __name__ == "__main__":
    for name, seconds in generate(Path(sys.argv[1])).items():
        print(f"{name} {seconds:.2f}s")
