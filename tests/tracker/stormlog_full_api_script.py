"""A script written against stormlog 0.4.3's tracker API — every public method of its
``MemoryTracker`` and ``MemoryWatchdog`` — with only the import line changed. Run by
test_stormlog_api with ``STORMOTEL_SAMPLER=simulated`` (no GPU here; on a GPU nothing is set).

Usage: ``python -m tests.tracker.stormlog_full_api_script OUT_DIR``; prints one JSON line.
"""

import json
import sys
import time
from pathlib import Path

# was: from stormlog.tracker import MemoryTracker, MemoryWatchdog
from stormotel.tracker import MemoryTracker, MemoryWatchdog

out = Path(sys.argv[1])
tracker = MemoryTracker(
    device="cuda:0", sampling_interval=0.05, max_events=5000, enable_alerts=True,
    enable_oom_flight_recorder=True, oom_dump_dir=str(out / "oom"), oom_buffer_size=2000,
    oom_max_dumps=3, oom_max_total_mb=64, job_id="stormlog-api", rank=0, local_rank=0,
    world_size=1)
alerts = []


def on_alert(event):
    alerts.append(event.event_type)


tracker.add_alert_callback(on_alert)
watchdog = MemoryWatchdog(tracker, auto_cleanup=True, cleanup_threshold=0.5)
tracker.set_threshold("memory_warning_percent", 5.0)
tracker.set_threshold("memory_critical_percent", 95.0)
before = tracker.get_session_summary()
tracker.start_tracking()
running = tracker.get_session_summary()
with tracker.phase("train", metadata={"epoch": 0}):
    handle = tracker.enter_phase("forward")
    time.sleep(0.2)
    handle.close()
    with tracker.phase("backward") as backward:
        time.sleep(0.2)
try:
    with tracker.capture_oom(context="step", metadata={"batch": 7}):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
except RuntimeError:
    pass
dump = tracker.handle_exception(RuntimeError("CUDA out of memory. Tried to allocate 1 GiB"),
                                context="manual", metadata={"k": 1})
not_oom = tracker.handle_exception(ValueError("shape mismatch"))
watchdog.force_cleanup()
watchdog.force_cleanup(aggressive=True)
time.sleep(0.3)
stats = tracker.get_statistics()
timeline = tracker.get_memory_timeline(interval=0.1)
events = tracker.get_events()
phases = [e.context for e in tracker.get_events(event_type="phase_enter")]
last_alerts = tracker.get_alerts(last_n=2)
tracker.stop_tracking()
done = tracker.get_session_summary()
tracker.export_events(str(out / "events.json"), format="json")
tracker.remove_alert_callback(on_alert)
tracker.clear_events()
print(json.dumps({
    "before": before, "running": running.status, "done": done.status,
    "same_session": running.session_id == done.session_id, "ended": done.ended_at_ns,
    "phases": phases, "backward_path": backward.phase_path, "closed": handle.closed,
    "dump": dump, "not_oom": not_oom, "stats": stats, "timeline_keys": sorted(timeline),
    "timeline_len": len(timeline["timestamps"]), "n_events": len(events),
    "event_types": sorted({e.event_type for e in events}), "alerts": sorted(set(alerts)),
    "last_alerts": len(last_alerts), "cleanup": watchdog.get_cleanup_stats(),
    "oom_buffer_size": tracker.oom_buffer_size, "after_clear": len(tracker.get_events()),
}, default=str))
