"""Tracker cost: per-sample cost of each sampler and of a full tracker tick, and the overhead of
a 10 Hz tracker on a small CPU training loop.

    .venv/bin/python benchmarks/bench_tracker.py [--samples 2000] [--steps 300] [--json out.json]

Results and the exact command are recorded in docs/benchmarks.md ("Tracker"). The CUDA and NVML
rows appear only where a GPU is present (otherwise they say why they were skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.samplers import SamplerUnavailable, make_sampler
from stormotel.tracker import MemoryTracker


def _per_call_us(fn: Callable[[], Any], n: int) -> dict[str, float]:
    for _ in range(min(50, n)):
        fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    times.sort()
    return {"median_us": times[len(times) // 2] / 1e3,
            "p99_us": times[int(len(times) * 0.99)] / 1e3}


def sampler_costs(n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("simulated", "cuda", "nvml"):
        try:
            sampler = make_sampler(name, 0)
        except SamplerUnavailable as e:
            out[name] = {"skipped": str(e)}
            continue
        out[name] = _per_call_us(sampler.sample, n)
        sampler.close()
    return out


def tick_costs(n: int, workdir: Path) -> dict[str, Any]:
    """A full sample as the sampling thread does it: read, ring, detectors, per-sample export."""
    out: dict[str, Any] = {}
    setups: dict[str, dict[str, Any]] = {
        "tick, prometheus only (no per-sample export)": {"prometheus_port": 0,
                                                          "prometheus_addr": "127.0.0.1"},
        "tick, archive (one OTLP JSON line per sample)": {"archive_dir": workdir / "a"},
    }
    for label, kwargs in setups.items():
        tracker = MemoryTracker(sampler="simulated", sampling_interval=3600, job_id="bench",
                                env={}, **kwargs)
        tracker.start_tracking()  # the thread sleeps an hour; we drive ticks ourselves
        out[label] = _per_call_us(tracker._tick, n)
        tracker.stop_tracking()
        if tracker.archive_files:
            lines = tracker.archive_files[0].read_text().splitlines()
            out[label]["archive_bytes_per_line"] = round(sum(map(len, lines)) / len(lines))
    return out


def _train(steps: int, tracker: MemoryTracker | None) -> float:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 256))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256)
    t0 = time.perf_counter()
    for i in range(steps):
        if tracker is None:
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        else:
            with tracker.step(i):
                loss = model(x).pow(2).mean()
                loss.backward()
                with tracker.mark("optimizer"):
                    opt.step()
                opt.zero_grad()
    return (time.perf_counter() - t0) / steps


def training_overhead(steps: int, repeats: int, workdir: Path) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    base, tracked = [], []
    for r in range(repeats):  # alternate, so machine noise hits both alike
        base.append(_train(steps, None))
        tracker = MemoryTracker(sampler="simulated", sampling_interval=0.1, job_id=f"ovh{r}",
                                archive_dir=workdir / "ovh", env={})
        with tracker:
            tracked.append(_train(steps, tracker))
    b, t = statistics.median(base), statistics.median(tracked)
    return {"step_ms_untracked": b * 1e3, "step_ms_tracked_10hz": t * 1e3,
            "overhead_percent": (t - b) / b * 100, "steps": steps, "repeats": repeats}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=2000)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        result = {"samplers": sampler_costs(args.samples),
                  "ticks": tick_costs(args.samples, Path(tmp)),
                  "training": training_overhead(args.steps, args.repeats, Path(tmp)),
                  "python": sys.version.split()[0], "cpus": os.cpu_count()}
    for group in ("samplers", "ticks"):
        for name, row in result[group].items():
            if "skipped" in row:
                print(f"{name:<50} skipped: {row['skipped']}")
            else:
                extra = (f"  {row['archive_bytes_per_line']} B/line"
                         if "archive_bytes_per_line" in row else "")
                print(f"{name:<50} median {row['median_us']:8.1f} us  p99 "
                      f"{row['p99_us']:8.1f} us{extra}")
    tr = result["training"]
    print(f"training step untracked {tr['step_ms_untracked']:.3f} ms, tracked at 10 Hz "
          f"{tr['step_ms_tracked_10hz']:.3f} ms: overhead {tr['overhead_percent']:+.1f} %")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
