"""Write ``stormlog_oom_rank{0..3}.json`` (+ ``stormlog_oom_rank3.csv``) with the real Stormlog.

Four ``stormlog.MemoryTracker`` instances (0.4.3, ``enable_oom_flight_recorder=True``) sample a
scripted collector; ranks 1 and 3 fill their device and their training code's
``tracker.capture_oom(...)`` sees a CUDA out-of-memory error, rank 1 at +1.0 s, rank 3 at +1.4 s.
Stormlog records no allocator OOM counter; what it writes for an OOM is the ``error`` event of
its ``handle_exception`` (``OOM detected (...)``, ``metadata.oom_reason``), which the analyzer
must report as the OOM. Run with the Stormlog venv (see README.md); dumps go to a temp dir.
"""

from __future__ import annotations

import sys
import tempfile
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
OOM_AT = {1: 1.0, 3: 1.4}


class FillingCollector(DeviceMemoryCollector):
    """2 GiB reserved; an OOM rank's reservation climbs to the device's size by its OOM."""

    def __init__(self, rank: int, start: float) -> None:
        self.rank, self.start = rank, start

    def name(self) -> str:
        return "cuda"

    def is_available(self) -> bool:
        return True

    def sample(self) -> DeviceMemorySample:
        el = time.time() - self.start
        reserved = 2 * GIB
        if self.rank in OOM_AT:
            rise_from = OOM_AT[self.rank] - 0.6
            share = min(1.0, max(0.0, (el - rise_from) / 0.6))
            reserved += int(share * (TOTAL - 2 * GIB - 512 * MIB))
        allocated = int(reserved * 0.9)
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


def _train(tracker: MemoryTracker, rank: int, start: float) -> None:
    while time.time() - start < OOM_AT[rank]:
        time.sleep(0.01)
    try:
        with tracker.capture_oom(context="train-step"):
            raise RuntimeError(f"CUDA out of memory. Tried to allocate 2.00 GiB (rank {rank})")
    except RuntimeError:
        pass  # the rank dies here in a real job


def main() -> int:
    start = time.time() + 0.2
    dumps = tempfile.mkdtemp(prefix="stormlog-oom-")
    trackers = [MemoryTracker(collector=FillingCollector(rank, start), sampling_interval=0.05,
                              job_id="sl-oom", rank=rank, local_rank=rank, world_size=4,
                              enable_oom_flight_recorder=True,
                              oom_dump_dir=f"{dumps}/rank{rank}")
                for rank in range(4)]
    for t in trackers:
        t.start_tracking()
    workers = [threading.Thread(target=_train, args=(trackers[r], r, start)) for r in OOM_AT]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    time.sleep(2.0 - (time.time() - start))
    for t in trackers:
        t.stop_tracking()
    for rank, t in enumerate(trackers):
        t.export_events(str(OUT / f"stormlog_oom_rank{rank}.json"), format="json")
    trackers[3].export_events(str(OUT / "stormlog_oom_rank3.csv"), format="csv")
    print("wrote", sorted(p.name for p in OUT.glob("stormlog_oom_*")), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
