"""NVML sampler: the driver's view of one GPU (used/total/free, UUID, name, this process).

``pynvml`` (from the ``nvidia-ml-py`` distribution) is imported only when this sampler is built.
The index is NVML's (``nvidia-smi``) numbering, which ignores ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from stormotel.samplers.base import Sample, SamplerUnavailable

__all__ = ["NvmlSampler"]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlSampler:
    """Reads ``nvmlDeviceGetMemoryInfo`` and this process's entry in the running-process list."""

    name = "nvml"

    def __init__(self, device: int | str | None = None) -> None:
        try:
            import pynvml
        except ImportError:
            raise SamplerUnavailable("the nvml sampler needs nvidia-ml-py; install it with "
                                     "pip install 'stormotel[nvml]'") from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as e:
            raise SamplerUnavailable(f"NVML could not start ({e}): no NVIDIA driver or GPU "
                                     "here; use --sampler simulated without one") from None
        self._nvml = pynvml
        self._closed = False
        try:
            index = 0 if device is None else int(str(device).removeprefix("cuda:"))
            count = pynvml.nvmlDeviceGetCount()
            if not 0 <= index < count:
                raise SamplerUnavailable(f"NVML device {index} does not exist "
                                         f"({count} device(s))")
            self.device_index = index
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self.gpu_uuid: str | None = _text(pynvml.nvmlDeviceGetUUID(self._handle))
            self.gpu_name: str | None = _text(pynvml.nvmlDeviceGetName(self._handle))
        except ValueError:
            self.close()
            raise SamplerUnavailable(f"device {device!r} is not an NVML device index") from None
        except BaseException:
            self.close()
            raise
        self._pid = os.getpid()

    def _process_used(self) -> int | None:
        nvml = self._nvml
        try:
            procs = nvml.nvmlDeviceGetComputeRunningProcesses(self._handle)
        except nvml.NVMLError:
            return None  # not supported (e.g. in some containers / MIG): unknown, not zero
        for proc in procs:
            if proc.pid == self._pid:
                used = getattr(proc, "usedGpuMemory", None)
                return int(used) if used is not None else None
        return 0

    def sample(self) -> Sample:
        mem = self._nvml.nvmlDeviceGetMemoryInfo(self._handle)
        return Sample(timestamp_ns=time.time_ns(), device_used=int(mem.used),
                      device_total=int(mem.total), device_free=int(mem.free),
                      process_used=self._process_used())

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
