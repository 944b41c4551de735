"""Stormlog 0.4.3's whole public tracker API on stormotel's tracker: a script written for
Stormlog (every method of its MemoryTracker and MemoryWatchdog) runs with only the import
changed, and every public name and parameter of the real package exists here.

The signatures below were read from stormlog 0.4.3 installed from PyPI (with the CPU torch
2.13.0) by ``inspect``; stormlog is not a dependency of this project."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stormotel import exitcodes
from stormotel.stormlog_api import PhaseProtocolError
from stormotel.tracker import MemoryTracker, MemoryWatchdog
from tests.cli import REPO, run_stormotel

#: stormlog.tracker.MemoryTracker's public methods → parameter names (stormlog 0.4.3).
STORMLOG_TRACKER = {
    "add_alert_callback": ["callback"],
    "capture_oom": ["context", "metadata"],
    "clear_events": [],
    "enter_phase": ["name", "metadata"],
    "export_events": ["filename", "format"],
    "get_alerts": ["last_n"],
    "get_events": ["event_type", "last_n", "since"],
    "get_memory_timeline": ["interval"],
    "get_session_summary": [],
    "get_statistics": [],
    "handle_exception": ["exc", "context", "metadata"],
    "phase": ["name", "metadata"],
    "remove_alert_callback": ["callback"],
    "set_threshold": ["threshold_name", "value"],
    "start_tracking": [],
    "stop_tracking": [],
}
STORMLOG_CONSTRUCTOR = [
    "device", "sampling_interval", "max_events", "enable_alerts", "enable_oom_flight_recorder",
    "oom_dump_dir", "oom_buffer_size", "oom_max_dumps", "oom_max_total_mb", "job_id", "rank",
    "local_rank", "world_size", "enable_native_cuda_history", "native_history_max_entries",
    "telemetry_sink_config", "collector"]
STORMLOG_WATCHDOG = {"force_cleanup": ["aggressive"], "get_cleanup_stats": []}
#: get_statistics() keys of stormlog 0.4.3 (without its collector-health and sink keys).
STORMLOG_STAT_KEYS = {
    "peak_memory", "peak_device_used", "total_allocations", "total_deallocations",
    "total_allocation_bytes", "total_deallocation_bytes", "alert_count", "tracking_start_time",
    "last_memory_check", "total_events", "events_last_hour", "history_window_limit_events",
    "history_retained_events", "history_dropped_events", "backend",
    "oom_flight_recorder_enabled", "last_oom_dump_path", "session_id", "session_status",
    "current_memory_allocated", "current_memory_reserved", "current_device_used",
    "current_device_free", "device_total", "memory_utilization_percent",
    "average_allocation_size", "average_deallocation_size", "tracking_duration_seconds",
    "allocations_per_second", "bytes_allocated_per_second"}


def _params(fn: object) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(STORMLOG_TRACKER))
def test_every_stormlog_tracker_method_exists_with_its_parameters(name: str) -> None:
    ours = _params(getattr(MemoryTracker, name))
    for i, param in enumerate(STORMLOG_TRACKER[name]):
        assert param in ours, f"{name}({param}=...) missing: {ours}"
        if name != "set_threshold":  # positional order too (set_threshold: (name, value))
            assert ours.index(param) == i, (name, ours)


def test_stormlog_constructor_and_watchdog_arguments_are_accepted(tmp_path: Path) -> None:
    sig = inspect.signature(MemoryTracker.__init__)
    assert any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    for name, params in STORMLOG_WATCHDOG.items():
        assert _params(getattr(MemoryWatchdog, name)) == params
    # Stormlog's positional order is (device, sampling_interval, max_events, ...).
    tracker = MemoryTracker("cuda:0", 0.05, 777, env={"STORMOTEL_SAMPLER": "simulated"},
                            job_id="ctor", rank=0, world_size=1, oom_buffer_size=123,
                            oom_max_dumps=2, oom_max_total_mb=1,
                            enable_native_cuda_history=False, native_history_max_entries=10,
                            telemetry_sink_config=None, collector=None, archive_dir=tmp_path)
    assert tracker.sampling_interval == 0.05 and tracker.stormlog.max_events == 777
    assert tracker.oom_buffer_size == 123 and tracker.dump_max_bytes == 2**20
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such'"):
        MemoryTracker(sampler="simulated", job_id="x", rank=0, world_size=1, no_such=1,
                      archive_dir=tmp_path)
    with pytest.raises(TypeError, match="pass sampler="):
        MemoryTracker(sampler="simulated", job_id="x", rank=0, world_size=1, collector=object(),
                      archive_dir=tmp_path)


def test_phases_refuse_what_stormlog_refuses(tmp_path: Path) -> None:
    tracker = MemoryTracker(sampler="simulated", job_id="ph", rank=0, world_size=1,
                            sampling_interval=0.05, archive_dir=tmp_path)
    with pytest.raises(RuntimeError, match="Tracking must be active"):
        tracker.enter_phase("early")


@pytest.mark.slow  # a fresh interpreter running a tracker for a second
def test_a_stormlog_script_runs_with_only_the_import_changed(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "tests.tracker.stormlog_full_api_script",
                          str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "STORMOTEL_SAMPLER": "simulated",
                                           "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["before"] is None and got["running"] == "running" and got["done"] == "completed"
    assert got["same_session"] and got["ended"]
    assert got["phases"] == ["Phase entered: train", "Phase entered: train / forward",
                             "Phase entered: train / backward"]
    assert got["backward_path"] == "train / backward" and got["closed"]
    assert got["dump"] and Path(got["dump"]).is_file() and got["not_oom"] is None
    stats = got["stats"]
    assert set(stats) >= STORMLOG_STAT_KEYS, STORMLOG_STAT_KEYS - set(stats)
    assert stats["last_oom_dump_path"] == got["dump"] and stats["peak_memory"] > 0
    assert stats["stormotel"]["caught_ooms"] == 2  # capture_oom and handle_exception
    assert got["timeline_keys"] == ["allocated", "device_free", "device_total", "device_used",
                                    "reserved", "timestamps"] and got["timeline_len"] >= 3
    assert {"phase_enter", "phase_exit", "error", "cleanup", "start"} <= set(got["event_types"])
    assert got["alerts"] and got["last_alerts"] == 2
    assert got["cleanup"]["cleanup_count"] == 2 and got["oom_buffer_size"] == 2000
    assert got["after_clear"] == 0
    # What it exported is Stormlog v4 telemetry the analyzer reads, OOMs included.
    records = json.loads((tmp_path / "events.json").read_text())
    ooms = [r for r in records if r["event_type"] == "error"]
    assert len(ooms) == 2 and ooms[0]["metadata"]["batch"] == 7
    report = run_stormotel("analyze", str(tmp_path / "events.json"), "--format", "json")
    assert report.returncode in (exitcodes.OK, exitcodes.FINDINGS), report.stderr


def test_phase_handles_close_in_order(tmp_path: Path) -> None:
    tracker = MemoryTracker(sampler="simulated", job_id="ph2", rank=0, world_size=1,
                            sampling_interval=0.05, archive_dir=tmp_path)
    with tracker:
        outer = tracker.enter_phase("outer")
        inner = tracker.enter_phase("inner")
        with pytest.raises(PhaseProtocolError, match="LIFO"):
            outer.close()
        inner.close()
        outer.close()
        assert outer.closed and inner.phase_path == "outer / inner"
