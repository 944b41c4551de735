"""One rank of the demo job: a small model trained with real gloo all-reduce, tracked throughout.

Started by :func:`stormotel.demo.run_job` through ``torch.multiprocessing``. All ranks
share one simulated-clock origin (rank 0 broadcasts it), so a fault planted at ``t=4s`` happens at
the same wall-clock instant on every rank and a one-rank lead is real, not an artefact of start-up
order. The origin is agreed after the first training step (a loaded machine can make that step
take seconds: an incident planted at t=4s must not fall before it). Steps are paced to that clock
and their number fixed up front, so every rank runs the same number of collectives and none
waits for a peer that already left.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import timedelta

from stormotel.config import ExportConfig, IdentityConfig, ThresholdConfig
from stormotel.samplers.simulated import SimulatedSampler
from stormotel.tracker import MemoryTracker

__all__ = ["WorkerConfig", "worker"]


@dataclass(frozen=True)
class WorkerConfig:
    world_size: int
    init_method: str  # torch.distributed rendezvous, e.g. file:///tmp/x/store
    archive_dir: str
    job_id: str
    faults: str
    steps: int = 32
    step_period_s: float = 0.25
    sampling_interval: float = 0.1
    prometheus_ports: tuple[int, ...] | None = None
    estimate_bytes: int | None = None
    start_delay_s: float = 0.3  # epoch margin so every tracker has started before t=0


def worker(rank: int, cfg: WorkerConfig) -> None:
    """Entry point for ``torch.multiprocessing`` (the first argument is the process index)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.manual_seed(rank)
    dist.init_process_group("gloo", init_method=cfg.init_method,
                            rank=rank, world_size=cfg.world_size,
                            timeout=timedelta(seconds=60))
    try:
        # Trackers start first (imports paid, warm-up under way); then all ranks agree on the
        # simulated clock's origin, so faults are simultaneous across ranks to the nanosecond.
        sampler = SimulatedSampler(rank=rank, faults=cfg.faults, device_index=rank,
                                   epoch_ns=time.time_ns() + 3_600_000_000_000)  # set below
        # Warm-up (the first forward pass filling the cache) happens from this process's own
        # start, as in a real rank, not at the shared origin agreed later.
        sampler.warmup_origin_s = sampler.elapsed_s()
        port = cfg.prometheus_ports[rank] if cfg.prometheus_ports else None
        tracker = MemoryTracker(
            sampler=sampler, sampling_interval=cfg.sampling_interval,
            identity=IdentityConfig(job_id=cfg.job_id, rank=rank, local_rank=rank,
                                    world_size=cfg.world_size),
            export=ExportConfig(archive_dir=cfg.archive_dir, prometheus_port=port,
                                prometheus_addr="127.0.0.1"),
            thresholds=ThresholdConfig(estimate_bytes=cfg.estimate_bytes))
        tracker.start_tracking()
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                    torch.nn.Linear(128, 8))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        epoch_ns = 0
        with tracker, tracker.capture_oom(context=f"rank-{rank}-training"):
            for step in range(cfg.steps):
                if step == 1:
                    # The shared clock starts after the first training step, so the planted
                    # incident falls inside training even when a loaded machine makes that
                    # step (first collective, lazy init) take seconds.
                    epoch = torch.tensor([time.time_ns() + int(cfg.start_delay_s * 1e9)],
                                         dtype=torch.int64)
                    dist.broadcast(epoch, src=0)
                    epoch_ns = int(epoch.item())
                    sampler.warmup_origin_s -= (epoch_ns - sampler.epoch_ns) / 1e9
                    sampler.epoch_ns = epoch_ns
                with tracker.step(step):
                    x = torch.randn(32, 64)
                    loss = model(x).pow(2).mean()
                    loss.backward()
                    with tracker.mark("nccl:all_reduce"):
                        for p in model.parameters():
                            assert p.grad is not None
                            dist.all_reduce(p.grad)
                            p.grad /= cfg.world_size
                    opt.step()
                    opt.zero_grad()
                sampler.raise_if_oom()  # a planted OOM surfaces in the loop like a real one
                if epoch_ns:
                    wake = epoch_ns + int(step * cfg.step_period_s * 1e9)
                    time.sleep(max(0.0, (wake - time.time_ns()) / 1e9))
        dist.barrier()
    finally:
        dist.destroy_process_group()
