"""Synthetic multi-rank telemetry with planted faults, as Timelines or as per-rank columns.

Every generator is deterministic (seeded) so tests assert exact ranks and kinds. Values model a
CUDA rank: allocator allocated/reserved, device used = reserved + gap (NCCL/cuDNN/context), total.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from stormotel.analyzers.timeline import Markers, RankIdentity, Timeline, TimelineBuilder

MIB = 1024 * 1024
GIB = 1024 * MIB
T0 = 1_700_000_000_000_000_000
INTERVAL = 100_000_000  # 100 ms


@dataclass
class RankData:
    rank: int
    t_ns: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray
    device_used: np.ndarray
    device_total: np.ndarray
    #: (start, end, name, kind) or (start, end, name, kind, attrs)
    markers: list[tuple[Any, ...]] = field(default_factory=list)


def healthy(ranks: int = 4, n: int = 600, *, seed: int = 0, noise: float = 2 * MIB,
            interval: int = INTERVAL, reserved_bytes: float = 8.0 * GIB,
            gap_bytes: float = 512 * MIB) -> list[RankData]:
    """Flat, noisy, healthy ranks: 75% of reserved allocated, a constant gap, 80 GiB total."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(ranks):
        t = T0 + np.arange(n, dtype=np.int64) * interval
        alloc = 0.75 * reserved_bytes + rng.normal(0, noise, n)
        reserved = np.full(n, float(reserved_bytes))
        gap = gap_bytes + rng.normal(0, noise, n)
        out.append(RankData(r, t, alloc, reserved, reserved + gap, np.full(n, 80.0 * GIB)))
    return out


def to_timeline(data: list[RankData], *, world_size: int | None = None,
                job_id: str = "job-synth") -> Timeline:
    b = TimelineBuilder()
    ws = world_size if world_size is not None else len(data)
    for d in data:
        b.set_identity(RankIdentity(rank=d.rank, job_id=job_id, world_size=ws))
        b.add_samples(d.rank, d.t_ns, allocated=d.allocated, reserved=d.reserved,
                      device_used=d.device_used, device_total=d.device_total)
        if d.markers:
            b.add_markers(d.rank, Markers(
                np.array([m[0] for m in d.markers], np.int64),
                np.array([m[1] for m in d.markers], np.int64),
                np.array([m[2] for m in d.markers], object),
                np.array([m[3] for m in d.markers], object),
                tuple(m[4] if len(m) > 4 else {} for m in d.markers)))
    return b.build()


def plant_rise(d: RankData, at_index: int, delta: float) -> None:
    """Device used (and reserved: a real allocation) jumps by ``delta`` from ``at_index`` on."""
    d.reserved[at_index:] += delta
    d.device_used[at_index:] += delta


def plant_gap_drift(d: RankData, total_growth: float) -> None:
    ramp = np.linspace(0, total_growth, d.t_ns.shape[0])
    d.device_used += ramp


def plant_gap_spike(d: RankData, at_index: int, width: int, size: float) -> None:
    d.device_used[at_index:at_index + width] += size


def plant_fragmentation(d: RankData, idle_fraction: float = 0.7) -> None:
    d.allocated[:] = d.reserved * (1 - idle_fraction)


def seed_example() -> list[RankData]:
    """The seed's worked example: 4 ranks, rank 2 rises 384 MB 100 ms before the others."""
    data = healthy(4, 60, seed=1, reserved_bytes=2 * GIB, gap_bytes=256 * MIB)
    for d in data:
        plant_rise(d, 20 if d.rank != 2 else 19, 384 * MIB)
    return data
