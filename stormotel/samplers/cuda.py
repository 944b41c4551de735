"""CUDA sampler: the PyTorch caching allocator's view plus the driver's used/total.

``torch`` is imported only when this sampler is built, so a CPU-only install never pays for it.
"""

from __future__ import annotations

import time
from typing import Any

from stormotel.samplers.base import Sample, SamplerUnavailable

__all__ = ["CudaSampler", "cuda_device_index", "sample_from_stats"]


def cuda_device_index(device: Any, torch: Any) -> int:
    """``None``/``"cuda"``/``"cuda:1"``/``1``/``torch.device`` → a device index."""
    if device is None:
        return int(torch.cuda.current_device())
    if isinstance(device, int):
        return device
    dev = torch.device(device) if isinstance(device, str) else device
    if getattr(dev, "type", None) != "cuda":
        raise SamplerUnavailable(f"device {device!r} is not a CUDA device (use 'cuda' or "
                                 "'cuda:N', or --sampler simulated on a machine without a GPU)")
    return int(dev.index) if dev.index is not None else int(torch.cuda.current_device())


def sample_from_stats(stats: dict[str, Any], free: int, total: int, timestamp_ns: int) -> Sample:
    """One :class:`Sample` from ``torch.cuda.memory_stats_as_nested_dict`` and ``mem_get_info``
    (the values ``memory_stats()["allocated_bytes.all.current"]`` etc. would give; an
    uninitialised allocator's empty dict reads as zeros, as there)."""
    def current(name: str) -> int:
        try:  # indexing, not three .get() calls: this runs four times per sample
            return int(stats[name]["all"]["current"])
        except KeyError:
            return 0

    return Sample(
        timestamp_ns=timestamp_ns, allocated=current("allocated_bytes"),
        reserved=current("reserved_bytes"), active=current("active_bytes"),
        inactive_split=current("inactive_split_bytes"),
        device_used=total - free, device_total=total, device_free=free,
        alloc_retries=int(stats.get("num_alloc_retries", 0)),
        num_ooms=int(stats.get("num_ooms", 0)))


class CudaSampler:
    """Reads ``torch.cuda.memory_stats`` and ``torch.cuda.mem_get_info`` for one device."""

    name = "cuda"

    def __init__(self, device: Any = None) -> None:
        try:
            import torch
        except ImportError:
            raise SamplerUnavailable("the cuda sampler needs PyTorch; install it with "
                                     "pip install 'stormotel[torch]'") from None
        if not torch.cuda.is_available():
            raise SamplerUnavailable("no CUDA GPU is visible to PyTorch "
                                     "(torch.cuda.is_available() is False); use --sampler nvml "
                                     "on a GPU host, or --sampler simulated without one")
        self._torch = torch
        # ``torch.cuda.mem_get_info`` resolves the device in Python and then calls this binding
        # (it takes the index and sets the device itself); bound once, that is ~4 us less per
        # sample on an H100 host. Where a torch lacks it, the public function.
        try:
            self._mem_get_info: Any = torch.cuda.cudart().cudaMemGetInfo
        except (AttributeError, RuntimeError):
            self._mem_get_info = torch.cuda.mem_get_info
        index = cuda_device_index(device, torch)
        count = torch.cuda.device_count()
        if not 0 <= index < count:
            raise SamplerUnavailable(f"CUDA device {index} does not exist "
                                     f"({count} visible device(s))")
        self.device_index = index
        props = torch.cuda.get_device_properties(index)
        self.gpu_name: str | None = str(props.name)
        uuid = str(getattr(props, "uuid", "") or "")
        self.gpu_uuid: str | None = (uuid if uuid.startswith("GPU-") else f"GPU-{uuid}") \
            if uuid else None

    def sample(self) -> Sample:
        torch = self._torch
        # The nested form is the allocator's own C call; ``memory_stats`` flattens and sorts its
        # ~150 entries in Python on every call, the larger part of a sample's cost.
        stats = torch.cuda.memory_stats_as_nested_dict(self.device_index)
        free, total = self._mem_get_info(self.device_index)
        return sample_from_stats(stats, int(free), int(total), time.time_ns())

    def close(self) -> None:
        """Nothing to release: torch owns the CUDA context."""
