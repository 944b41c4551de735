"""Produce the Stormlog fixtures in this folder with the REAL stormlog package (0.4.x).

Run with the separate venv that has stormlog installed (tests never need it)::

    benchmarks/out/stormlog-venv/bin/python tests/analyzers/data/make_stormlog_fixtures.py

Four ``stormlog.MemoryTracker`` instances (ranks 0-3, world size 4) sample concurrently through a
scripted ``DeviceMemoryCollector`` (there is no GPU here): every rank reserves 2 GiB; rank 2's
device memory rises 384 MiB at +0.6 s, the other ranks' at +0.9 s (the seed's worked example,
stretched so real sampling jitter cannot blur it). Each tracker then writes its own export with
``tracker.export_events(..., format="json"|"csv")`` exactly as Stormlog users do.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from stormlog import MemoryTracker
from stormlog.device_collectors import (
    DeviceMemoryCapabilities,
    DeviceMemoryCollector,
    DeviceMemorySample,
)

MIB = 1024 * 1024
GIB = 1024 * MIB
TOTAL = 16 * GIB
OUT = Path(__file__).resolve().parent


class ScriptedCollector(DeviceMemoryCollector):
    """Deterministic counters as a function of time since a shared start."""

    def __init__(self, rank: int, start: float, rise_at: float) -> None:
        self.rank, self.start, self.rise_at = rank, start, rise_at

    def name(self) -> str:
        return "cuda"

    def is_available(self) -> bool:
        return True

    def sample(self) -> DeviceMemorySample:
        el = time.time() - self.start
        reserved = 2 * GIB + (384 * MIB if el >= self.rise_at else 0)
        allocated = int(reserved * 0.75)
        used = reserved + 256 * MIB
        return DeviceMemorySample(allocated_bytes=allocated, reserved_bytes=reserved,
                                  used_bytes=used, free_bytes=TOTAL - used, total_bytes=TOTAL,
                                  active_bytes=allocated, inactive_bytes=reserved - allocated,
                                  device_id=self.rank)

    def capabilities(self) -> DeviceMemoryCapabilities:
        return DeviceMemoryCapabilities(
            backend="cuda", telemetry_collector="fixture.scripted", sampling_source="scripted",
            supports_allocator_allocated=True, supports_allocator_reserved=True,
            supports_allocator_active=True, supports_allocator_inactive=True,
            supports_device_used=True, supports_device_free=True, supports_device_total=True)


def main() -> int:
    start = time.time() + 0.2
    trackers = []
    for rank in range(4):
        coll = ScriptedCollector(rank, start, 0.6 if rank == 2 else 0.9)
        trackers.append(MemoryTracker(collector=coll, sampling_interval=0.05, job_id="sl-fixture",
                                      rank=rank, local_rank=rank, world_size=4))
    for t in trackers:
        t.start_tracking()
    time.sleep(1.8)
    for t in trackers:
        t.stop_tracking()
    for rank, t in enumerate(trackers):
        t.export_events(str(OUT / f"stormlog_events_rank{rank}.json"), format="json")
    trackers[1].export_events(str(OUT / "stormlog_events_rank1.csv"), format="csv")
    print("wrote", sorted(p.name for p in OUT.glob("stormlog_events_*")), file=sys.stderr)
    _ = threading  # trackers sample on their own threads
    return 0


if __name__ == "__main__":
    sys.exit(main())
