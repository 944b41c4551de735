"""A training script written for Stormlog's MemoryTracker (its documented per-rank pattern), with
only the import changed and the simulated device instead of a GPU. Run by test_stormlog_compat.

Usage: ``python -m tests.tracker.stormlog_style_script OUT_DIR RANK WORLD_SIZE``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from stormotel import MemoryTracker

out, rank, world_size = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
local_rank = rank
(out / "artifacts").mkdir(parents=True, exist_ok=True)
alerts = []

tracker = MemoryTracker(
    sampler="simulated",
    sampling_interval=0.05,
    enable_alerts=True,
    enable_oom_flight_recorder=True,
    oom_dump_dir=str(out / f"artifacts/oom/rank_{rank}"),
    job_id="distributed-run-001",
    rank=rank,
    local_rank=local_rank,
    world_size=world_size,
    archive_dir=str(out / "archive"),
)
tracker.set_threshold("memory_warning_percent", 20.0)
tracker.set_threshold("memory_critical_percent", 90.0)
tracker.set_threshold("memory_leak_threshold", 1024 * 1024)
tracker.set_threshold("fragmentation_threshold", 0.3)
tracker.add_alert_callback(alerts.append)
tracker.start_tracking()
try:
    with tracker.capture_oom(context=f"rank-{rank}-training"):
        for _batch in range(6):
            time.sleep(0.1)
finally:
    tracker.stop_tracking()

tracker.export_events(str(out / f"artifacts/events_rank{rank}.json"), format="json")
tracker.export_events(str(out / f"artifacts/events_rank{rank}.csv"), format="csv")
kinds = sorted({a.event_type for a in alerts})
print("ALERTS", ",".join(kinds), len(tracker.get_alerts()), flush=True)
