"""A small real data-parallel training job with the stormotel tracker: steps, collective markers,
OOM capture. Runs on CPU (gloo, the simulated GPU) or on GPUs (nccl, the CUDA allocator).

    torchrun --nproc-per-node 2 examples/torchrun/train.py --steps 20 --archive telemetry
    stormotel analyze telemetry/<job_id>/

Identity (rank, local rank, world size, job id) comes from torchrun's (or SLURM's) environment;
give the job a stable id with ``torchrun --rdzv-id run-7`` or ``STORMOTEL_JOB_ID=run-7``.
Destinations follow the tracker's rules: ``--archive DIR`` for files, the standard
``OTEL_EXPORTER_OTLP_*`` variables for a collector, ``--prometheus-port-base`` for a scrape
endpoint per rank (base + local rank). Without a GPU, ``STORMOTEL_SIM_FAULTS`` plants a fault
on the simulated device, e.g. ``rank=1:leak@t=1s,rate=64MiB/s``.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist

from stormotel import ExportConfig, MemoryTracker


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--step-time", type=float, default=0.1, help="seconds per step (CPU pacing)")
    p.add_argument("--archive", default=os.environ.get("STORMOTEL_ARCHIVE_DIR"),
                   help="archive folder (default: $STORMOTEL_ARCHIVE_DIR; none when OTLP or "
                        "Prometheus is configured, else ./stormotel-archive)")
    p.add_argument("--prometheus-port-base", type=int, default=None,
                   help="serve /metrics on this port + local rank")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    torch.manual_seed(rank)
    port = None if args.prometheus_port_base is None else args.prometheus_port_base + local_rank
    tracker = MemoryTracker(device=local_rank, sampler="cuda" if cuda else "simulated",
                            sampling_interval=0.05,
                            export=ExportConfig(archive_dir=args.archive, prometheus_port=port))
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 8)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with tracker, tracker.capture_oom(context=f"rank-{rank}-train"):
        for step in range(args.steps):
            started = time.monotonic()
            with tracker.step(step):
                x = torch.randn(32, 64, device=device)
                loss = model(x).pow(2).mean()
                loss.backward()
                with tracker.mark("nccl:all_reduce"):
                    for p in model.parameters():
                        assert p.grad is not None
                        dist.all_reduce(p.grad)
                        p.grad /= world
                opt.step()
                opt.zero_grad(set_to_none=True)
            time.sleep(max(0.0, args.step_time - (time.monotonic() - started)))
        dist.barrier()
    if rank == 0:
        where = tracker.archive_files[0].parent if tracker.archive_files else "(no archive)"
        print(f"job {tracker.identity.job_id}: {world} ranks, {args.steps} steps; "
              f"archive {where}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
