"""The estimate as data: the JSON contract and the human table.

This module does not import torch. The tracker reads an estimate file back with
``stormotel.tracker.load_estimate`` (``ThresholdConfig(estimate_bytes=path)``), which takes
``peak_bytes`` — the one key it relies on.

JSON contract (``stormotel.estimate/v1``; keys may be added, never renamed)::

    {"schema", "factory", "mode": "fake|real", "iterations", "round_to", "tracker", "device",
     "categories": {"parameters", "buffers", "gradients", "optimizer_state", "activations",
                    "temporaries", "inputs"}          # bytes on `device` at the peak
     "peak_bytes", "peak_during",
     "optimizer": {"class", "state_bytes", "step_tensor_bytes", "step_temporaries_bytes"},
     "modules": [{"module", "depth", "parameter_bytes", "buffer_bytes", "input_bytes",
                  "output_bytes", "peak_forward_bytes", "peak_backward_bytes"}],
     "per_iteration": [{"iteration", "after_forward", "after_backward", "after_step",
                        "peak_bytes_so_far"}],
     "tracker_categories": {MemTracker category: bytes at the peak},
     "per_device_peak_bytes", "accuracy": null | {"tracker_peak_bytes", "measured_peak_bytes",
     "ratio", "measured_with"}, "device_memory_bytes", "fits", "headroom_bytes", "notes"}
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from stormotel.units import format_bytes

ESTIMATE_SCHEMA = "stormotel.estimate/v1"

#: Report categories, in display order. The first six are the ones the issue names; ``inputs``
#: holds the batch (and anything else tracked from outside), so the categories sum to the peak.
CATEGORIES: tuple[str, ...] = ("parameters", "buffers", "gradients", "optimizer_state",
                               "activations", "temporaries", "inputs")


@dataclass
class ModuleRow:
    """One module's share, from the last iteration (stats are reset between iterations)."""

    module: str
    depth: int
    parameter_bytes: int | None
    buffer_bytes: int | None
    input_bytes: int | None
    output_bytes: int | None
    peak_forward_bytes: int | None
    peak_backward_bytes: int | None


@dataclass
class Accuracy:
    """Real mode only: the tracker's peak against the allocator's measured peak."""

    tracker_peak_bytes: int
    measured_peak_bytes: int
    measured_with: str

    @property
    def ratio(self) -> float | None:
        return (self.tracker_peak_bytes / self.measured_peak_bytes
                if self.measured_peak_bytes else None)


@dataclass
class OptimizerState:
    """Steady optimizer state after the last step, split so nothing is double-counted.

    ``step_tensor_bytes`` are Adam-style ``step`` counters (one scalar per parameter);
    ``step_temporaries_bytes`` is what a ``foreach`` step allocates on top of the state while it
    runs — MemTracker files those under optimizer state, the estimate moves them to temporaries.
    """

    name: str
    state_bytes: int
    step_tensor_bytes: int
    step_temporaries_bytes: int


@dataclass
class Estimate:
    factory: str
    mode: str
    iterations: int
    round_to: int
    tracker: str
    device: str
    categories: dict[str, int]
    peak_bytes: int
    peak_during: str
    optimizer: OptimizerState
    modules: list[ModuleRow] = field(default_factory=list)
    per_iteration: list[dict[str, Any]] = field(default_factory=list)
    tracker_categories: dict[str, int] = field(default_factory=dict)
    per_device_peak_bytes: dict[str, int] = field(default_factory=dict)
    accuracy: Accuracy | None = None
    device_memory_bytes: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool | None:
        if self.device_memory_bytes is None:
            return None
        return self.peak_bytes <= self.device_memory_bytes

    @property
    def headroom_bytes(self) -> int | None:
        if self.device_memory_bytes is None:
            return None
        return self.device_memory_bytes - self.peak_bytes

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["optimizer"] = {"class": self.optimizer.name,
                          "state_bytes": self.optimizer.state_bytes,
                          "step_tensor_bytes": self.optimizer.step_tensor_bytes,
                          "step_temporaries_bytes": self.optimizer.step_temporaries_bytes}
        if self.accuracy is not None:
            d["accuracy"]["ratio"] = self.accuracy.ratio
        d["fits"] = self.fits
        d["headroom_bytes"] = self.headroom_bytes
        return {"schema": ESTIMATE_SCHEMA, **d}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def render_table(est: Estimate) -> str:
    """The human view: categories at the peak, the module breakdown, and the verdict."""
    lines = [f"stormotel estimate  {est.factory}  ({est.mode} mode, {est.iterations} iterations, "
             f"{est.tracker}, device {est.device}, allocations rounded to {est.round_to} B)", ""]
    width = max(len(c) for c in CATEGORIES)
    lines.append(f"{'category at peak':<{width + 2}} {'bytes':>14}")
    for name in CATEGORIES:
        value = est.categories.get(name, 0)
        lines.append(f"{name:<{width + 2}} {value:>14,}  {format_bytes(value):>11}")
    lines.append(f"{'peak':<{width + 2}} {est.peak_bytes:>14,}  {format_bytes(est.peak_bytes):>11}"
                 f"   (during {est.peak_during})")
    opt = est.optimizer
    lines.append(f"optimizer {opt.name}: state {format_bytes(opt.state_bytes)}, step counters "
                 f"{format_bytes(opt.step_tensor_bytes)}, foreach step temporaries "
                 f"{format_bytes(opt.step_temporaries_bytes)}")
    if est.modules:
        lines += ["", _module_table(est.modules)]
    if est.accuracy is not None:
        acc = est.accuracy
        ratio = f"{acc.ratio:.4f}" if acc.ratio is not None else "n/a"
        lines += ["", f"tracker accuracy: tracker peak {format_bytes(acc.tracker_peak_bytes)} / "
                      f"measured peak {format_bytes(acc.measured_peak_bytes)} = {ratio} "
                      f"(measured with {acc.measured_with})"]
    lines.append("")
    if est.device_memory_bytes is None:
        lines.append("device memory not given (--device-memory): no fit check")
    else:
        verdict = "FITS" if est.fits else "DOES NOT FIT"
        lines.append(f"{verdict}: peak {format_bytes(est.peak_bytes)} of "
                     f"{format_bytes(est.device_memory_bytes)} device memory, headroom "
                     f"{format_bytes(est.headroom_bytes)}")
    lines += [f"note: {n}" for n in est.notes]
    return "\n".join(lines)


def _module_table(rows: list[ModuleRow]) -> str:
    name_w = max(len("module"), *(len("  " * (r.depth - 1) + r.module) for r in rows))
    cols = ("params", "buffers", "inputs", "outputs", "peak fw", "peak bw")
    out = [f"{'module':<{name_w}}  " + "  ".join(f"{c:>11}" for c in cols)]
    for r in rows:
        values = (r.parameter_bytes, r.buffer_bytes, r.input_bytes, r.output_bytes,
                  r.peak_forward_bytes, r.peak_backward_bytes)
        out.append(f"{'  ' * (r.depth - 1) + r.module:<{name_w}}  "
                   + "  ".join(f"{format_bytes(v):>11}" for v in values))
    return "\n".join(out)
