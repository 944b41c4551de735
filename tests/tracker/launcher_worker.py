"""A rank started by a real launcher (torchrun): builds a tracker and records its identity.

Usage: ``python -m tests.tracker.launcher_worker OUT_DIR [--init-pg]``. With ``--init-pg`` the
gloo process group is initialised first (the job id is then agreed through its store).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    if "--init-pg" in argv:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    from stormotel.tracker import MemoryTracker

    tracker = MemoryTracker(sampler="simulated", archive_dir=out / "archive")
    ident = tracker.identity
    record = {"job_id": ident.job_id, "job_source": ident.job_source, "rank": ident.rank,
              "world_size": ident.world_size, "slurm_job_id": ident.slurm_job_id,
              "run_id": os.environ.get("TORCHELASTIC_RUN_ID")}
    (out / f"rank-{ident.rank}.json").write_text(json.dumps(record), encoding="utf-8")
    if "--init-pg" in argv:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
