"""Where numbers come from: one sampler per backend, all returning :class:`Sample`.

``make_sampler("cuda" | "nvml" | "simulated", ...)`` builds one by name; torch and NVML are
imported only by the backend that needs them.
"""

from __future__ import annotations

from typing import Any

from stormotel.samplers.base import SAMPLE_FIELDS, Sample, Sampler, SamplerUnavailable

__all__ = ["SAMPLERS", "SAMPLE_FIELDS", "Sample", "Sampler", "SamplerUnavailable",
           "make_sampler"]

SAMPLERS = ("cuda", "nvml", "simulated")


def make_sampler(name: str, device: Any = None, *, rank: int = 0,
                 faults: Any = None, **kwargs: Any) -> Sampler:
    """Build a sampler by name. Raises :class:`SamplerUnavailable` with a user-facing reason."""
    if name == "cuda":
        from stormotel.samplers.cuda import CudaSampler

        return CudaSampler(device)
    if name == "nvml":
        from stormotel.samplers.nvml import NvmlSampler

        return NvmlSampler(device)
    if name == "simulated":
        from stormotel.samplers.simulated import SimulatedSampler

        try:
            index = 0 if device is None else int(str(device).rsplit(":", 1)[-1])
        except ValueError:
            raise SamplerUnavailable(f"device {device!r} is not a device index "
                                     "(N or cuda:N)") from None
        return SimulatedSampler(rank=rank, faults=faults, device_index=index, **kwargs)
    raise SamplerUnavailable(f"unknown sampler {name!r} (one of {', '.join(SAMPLERS)})")
