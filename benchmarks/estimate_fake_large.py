"""Benchmark: fake mode estimates a model larger than this machine's memory, in little time.

Runs ``stormotel estimate examples.estimate_models:transformer_stack_adamw`` in a child process
for a few model sizes and records wall time, the child's peak RSS and the estimated peak, so
the claim "fake tensors allocate nothing" is measured rather than asserted. Results and the exact
command are recorded in docs/benchmarks.md.

    .venv/bin/python benchmarks/estimate_fake_large.py [--sizes 8x1024,24x2048]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_one(layers: int, d_model: int, batch: int, seq: int) -> dict[str, float | int]:
    env = {**os.environ, "EST_LAYERS": str(layers), "EST_D_MODEL": str(d_model),
           "EST_BATCH": str(batch), "EST_SEQ": str(seq)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "stormotel", "estimate",
                           "examples.estimate_models:transformer_stack_adamw", "--format", "json",
                           "-q"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"estimate failed: {proc.stderr.strip()}")
    data = json.loads(proc.stdout)
    # ru_maxrss of children is the largest child so far (KiB on Linux): valid while sizes grow.
    rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"layers": layers, "d_model": d_model, "batch": batch, "seq": seq,
            "parameters_bytes": data["categories"]["parameters"],
            "peak_bytes": data["peak_bytes"], "wall_s": round(wall, 2),
            "child_max_rss_bytes": max(rss_kib, before) * 1024}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="2x256,8x1024,24x2048",
                   help="comma-separated LAYERSxD_MODEL, smallest first (default: %(default)s)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=2048)
    args = p.parse_args()
    for size in args.sizes.split(","):
        layers, d_model = (int(x) for x in size.lower().split("x"))
        row = run_one(layers, d_model, args.batch, args.seq)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
