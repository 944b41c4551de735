"""What a sampler returns and the small interface every sampler implements.

A :class:`Sample` is one reading of one GPU at one instant (DESIGN.md "Telemetry model"). Fields
a backend cannot measure are ``None`` rather than 0, so "unknown" never looks like "empty".
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Protocol, runtime_checkable

from stormotel.errors import UsageError

__all__ = ["SAMPLE_FIELDS", "Sample", "Sampler", "SamplerUnavailable", "span_memory"]


class SamplerUnavailable(UsageError, RuntimeError):
    """The requested backend cannot run here (no GPU, no driver, torch without CUDA).

    The message is a complete sentence for the user; callers print it and exit USAGE.
    """


@dataclass(frozen=True, slots=True)
class Sample:
    """One reading. Bytes are ints; counters (retries, OOMs) are cumulative since process start."""

    timestamp_ns: int
    allocated: int | None = None
    reserved: int | None = None
    active: int | None = None
    inactive_split: int | None = None
    device_used: int | None = None
    device_total: int | None = None
    device_free: int | None = None
    process_used: int | None = None
    alloc_retries: int | None = None
    num_ooms: int | None = None

    @property
    def gap(self) -> int | None:
        """device used - allocator reserved: memory outside the framework allocator."""
        if self.device_used is None or self.reserved is None:
            return None
        return self.device_used - self.reserved

    @property
    def utilization(self) -> float | None:
        if self.device_used is None or not self.device_total:
            return None
        return self.device_used / self.device_total


#: Field names in declaration order (ring-buffer columns, dump keys).
SAMPLE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Sample))


def span_memory(sample: Sample | None) -> int | None:
    """The one number a span or an edge reports: device used, else allocator reserved, else
    allocated (None without a sample or any of them)."""
    if sample is None:
        return None
    for value in (sample.device_used, sample.reserved, sample.allocated):
        if value is not None:
            return value
    return None


@runtime_checkable
class Sampler(Protocol):
    """A source of :class:`Sample` for one device. Must be safe to call from a background thread."""

    name: str  #: "cuda" | "nvml" | "simulated" | anything custom
    device_index: int
    gpu_uuid: str | None
    gpu_name: str | None

    def sample(self) -> Sample:
        """Read the device now. May raise; the tracker counts the failure as a dropped sample."""
        ...

    def close(self) -> None:
        """Release driver handles. Idempotent."""
        ...
