"""stormotel: GPU memory of every rank as OpenTelemetry metrics and spans.

Public API (imported lazily, so ``stormotel --help`` and the analyzer never pay for the OTel SDK)::

    from stormotel import MemoryTracker
    with MemoryTracker(device="cuda:0", sampler="cuda", archive_dir="telemetry") as tracker:
        with tracker.capture_oom(context="train"):
            for step, batch in enumerate(loader):
                with tracker.step(step):
                    ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stormotel.lazy_exports import lazy_getattr

__all__ = ["ExportConfig", "Identity", "IdentityConfig", "IdentityError", "MemoryTracker",
           "MemoryWatchdog", "Sample", "Sampler", "SamplerUnavailable", "SamplingConfig",
           "SimulatedSampler", "StallConfig", "ThresholdConfig", "make_sampler", "parse_faults",
           "resolve_identity"]

_EXPORTS = {
    "MemoryTracker": "stormotel.tracker",
    "IdentityConfig": "stormotel.config",
    "SamplingConfig": "stormotel.config",
    "ExportConfig": "stormotel.config",
    "ThresholdConfig": "stormotel.config",
    "StallConfig": "stormotel.config",
    "MemoryWatchdog": "stormotel.stormlog_api",
    "Identity": "stormotel.identity",
    "IdentityError": "stormotel.identity",
    "resolve_identity": "stormotel.identity",
    "Sample": "stormotel.samplers.base",
    "Sampler": "stormotel.samplers.base",
    "SamplerUnavailable": "stormotel.samplers.base",
    "make_sampler": "stormotel.samplers",
    "SimulatedSampler": "stormotel.samplers.simulated",
    "parse_faults": "stormotel.samplers.faults",
}

if TYPE_CHECKING:
    from stormotel.config import (
        ExportConfig,
        IdentityConfig,
        SamplingConfig,
        StallConfig,
        ThresholdConfig,
    )
    from stormotel.identity import Identity, IdentityError, resolve_identity
    from stormotel.samplers import make_sampler
    from stormotel.samplers.base import Sample, Sampler, SamplerUnavailable
    from stormotel.samplers.faults import parse_faults
    from stormotel.samplers.simulated import SimulatedSampler
    from stormotel.stormlog_api import MemoryWatchdog
    from stormotel.tracker import MemoryTracker


__getattr__ = lazy_getattr(globals(), __name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
