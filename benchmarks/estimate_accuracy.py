"""Benchmark: estimator accuracy on the example models — fake vs. real, tracker vs. allocator.

For each example factory and rounding, prints the fake-mode peak, the real-mode tracker peak,
the CPU allocator's measured peak (torch.profiler allocation events) and their ratio. The
numbers are recorded in docs/estimation.md ("Accuracy") and docs/benchmarks.md.

    .venv/bin/python benchmarks/estimate_accuracy.py
"""

from __future__ import annotations

import json
import sys

from stormotel.estimate.core import estimate

FACTORIES = ("mlp_sgd", "mlp_adam", "transformer_adamw", "fsdp_mlp_adam")


def main() -> int:
    for name in FACTORIES:
        spec = f"examples.estimate_models:{name}"
        for round_to in (1, 512):
            fake = estimate(spec, round_to=round_to)
            real = estimate(spec, mode="real", round_to=round_to)
            assert real.accuracy is not None
            print(json.dumps({
                "factory": name, "round_to": round_to, "fake_peak_bytes": fake.peak_bytes,
                "real_tracker_peak_bytes": real.peak_bytes,
                "measured_peak_bytes": real.accuracy.measured_peak_bytes,
                "tracker_accuracy": round(real.accuracy.ratio or 0.0, 4),
                "fake_vs_real": round(fake.peak_bytes / real.peak_bytes, 4)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
