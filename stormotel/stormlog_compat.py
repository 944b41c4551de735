"""What code written for Stormlog's ``MemoryTracker`` expects, on top of stormotel's tracker.

Users move from Stormlog with scripts that call ``set_threshold("memory_leak_threshold", ...)``,
register alert callbacks and write ``export_events(path, format="json"|"csv")`` bundles that
their analysis step reads. :class:`StormlogEvents` keeps a bounded in-memory event log in
Stormlog's v4 record layout (the layout ``analyzers/sources/stormlog.py`` reads, checked against
files written by stormlog 0.4.3), raises Stormlog's alerts on it and calls the callbacks.

It is fed by the tracker's sampling thread; the training thread never pays for it. Alerts are
edge-triggered (one event when a condition starts, re-armed when it ends) instead of Stormlog's
one event per sample while it lasts, so a long stretch above a threshold is one callback.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from stormotel import schema
from stormotel.samplers.base import Sample

__all__ = ["ALERT_TYPES", "CSV_COLUMNS", "StormlogEvents", "TrackingEvent"]

log = logging.getLogger("stormotel.stormlog_compat")

#: Stormlog's alert event types (``get_alerts``).
ALERT_TYPES = ("warning", "critical", "error")
#: Column order of Stormlog's CSV export (pandas writes the v4 record keys in this order).
CSV_COLUMNS = ("schema_version", "session_id", "timestamp_ns", "event_type", "collector",
               "sampling_interval_ms", "pid", "host", "job_id", "rank", "local_rank",
               "world_size", "device_id", "allocator_allocated_bytes", "allocator_reserved_bytes",
               "allocator_active_bytes", "allocator_inactive_bytes", "allocator_change_bytes",
               "device_used_bytes", "device_free_bytes", "device_total_bytes", "context",
               "metadata")


@dataclass
class TrackingEvent:
    """Stormlog's ``TrackingEvent``: what alert callbacks receive and ``get_events`` returns."""

    timestamp: float
    event_type: str
    memory_allocated: int | None
    memory_reserved: int | None
    memory_change: int | None
    device_id: int
    session_id: str | None = None
    context: str | None = None
    job_id: str | None = None
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    metadata: dict[str, Any] | None = field(default_factory=dict)
    active_memory: int | None = None
    inactive_memory: int | None = None
    device_used: int | None = None
    device_free: int | None = None
    device_total: int | None = None
    backend: str = "cuda"


AlertCallback = Callable[[TrackingEvent], None]


class _Identity(TypedDict):
    """The rank's identity, as every event of one tracker carries it."""

    job_id: str
    rank: int
    local_rank: int
    world_size: int


class StormlogEvents:
    """Bounded event log + Stormlog's alert thresholds and callbacks for one tracker."""

    def __init__(self, *, job_id: str, rank: int, local_rank: int, world_size: int,
                 device_id: int, collector: str, sampling_interval: float,
                 max_events: int = 10_000, enable_alerts: bool = True) -> None:
        if max_events < 1:
            raise ValueError(f"max_events={max_events!r} must be >= 1")
        #: Oldest first. A plain ``sample`` event is kept as ``(sample, change)`` and built into
        #: a TrackingEvent only when read: most trackers never read them, and building one per
        #: sample on the sampling thread was a tenth of the tracker's cost per sample.
        self._events: deque[TrackingEvent | tuple[Sample, int | None]] = deque(maxlen=max_events)
        self.enable_alerts = enable_alerts
        self.alert_callbacks: list[AlertCallback] = []
        self.thresholds: dict[str, float] = dict(schema.STORMLOG_DEFAULTS)
        self._ident = _Identity(job_id=job_id, rank=rank, local_rank=local_rank,
                                world_size=world_size)
        self._device_id = device_id
        self._collector = collector
        self._interval_ms = round(sampling_interval * 1000)
        self._session_id = str(uuid.uuid4())
        self._lock = threading.Lock()
        self._last_allocated: int | None = None
        self._peak: int = 0
        self._fragmented = False
        self.max_events = max_events
        #: Stormlog's ``stats`` counters (allocations/deallocations from sample-to-sample
        #: changes of allocated memory, alerts, events pushed out of the bounded log).
        self.counters: dict[str, int] = dict.fromkeys(
            ("total_allocations", "total_deallocations", "total_allocation_bytes",
             "total_deallocation_bytes", "alert_count", "dropped_events", "peak_device_used"), 0)
        #: The tracking session (Stormlog's SessionSummary fields): set by start/stop.
        self.session_started_ns: int | None = None
        self.session_ended_ns: int | None = None

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def peak_allocated(self) -> int:
        return self._peak

    # -- configuration --------------------------------------------------------------------
    def set_threshold(self, name: str, value: float) -> None:
        if name not in self.thresholds:
            raise ValueError(f"unknown threshold {name!r}")
        number = float(value)
        if number < 0 or number != number:
            raise ValueError(f"threshold {name}={value!r} must be a number >= 0")
        self.thresholds[name] = number

    # -- recording (sampling thread) ------------------------------------------------------
    def _event(self, event_type: str, sample: Sample | None, change: int | None,
               context: str | None, metadata: dict[str, Any] | None = None) -> TrackingEvent:
        s = sample
        return TrackingEvent(
            timestamp=(s.timestamp_ns if s is not None else time.time_ns()) / 1e9,
            event_type=event_type,
            memory_allocated=None if s is None else s.allocated,
            memory_reserved=None if s is None else s.reserved, memory_change=change,
            device_id=self._device_id, session_id=self._session_id, context=context,
            metadata=dict(metadata or {}),
            active_memory=None if s is None else s.active,
            inactive_memory=None if s is None else s.inactive_split,
            device_used=None if s is None else s.device_used,
            device_free=None if s is None else s.device_free,
            device_total=None if s is None else s.device_total, **self._ident)

    def add(self, event: TrackingEvent) -> None:
        with self._lock:
            self._append(event)
            if event.event_type in ALERT_TYPES:
                self.counters["alert_count"] += 1
        if event.event_type in ALERT_TYPES:
            for callback in list(self.alert_callbacks):
                try:
                    callback(event)
                except Exception as e:  # a user callback must not stop sampling
                    log.debug("stormotel: alert callback failed: %s", e)

    def _append(self, item: TrackingEvent | tuple[Sample, int | None]) -> None:
        """Append under the lock, counting what the bounded log pushes out."""
        if len(self._events) == self._events.maxlen:
            self.counters["dropped_events"] += 1
        self._events.append(item)

    def lifecycle(self, event_type: str, sample: Sample | None, context: str) -> None:
        """``start`` / ``stop`` events; a start after a stop is a new session (as Stormlog's
        ``start_tracking`` opens one), with a new id and fresh counters."""
        now = time.time_ns()
        if event_type == "start":
            if self.session_ended_ns is not None:
                self._session_id = str(uuid.uuid4())
                self.counters = dict.fromkeys(self.counters, 0)
                self._peak = 0
            self.session_started_ns, self.session_ended_ns = now, None
        elif event_type == "stop":
            self.session_ended_ns = now
        self.add(self._event(event_type, sample, 0, context))

    def threshold_crossed(self, level: str, percent: float, sample: Sample) -> None:
        """A warning/critical crossing from the tracker's hysteresis monitor."""
        if self.enable_alerts:
            label = "CRITICAL" if level == "critical" else "WARNING"
            self.add(self._event(level, sample, None,
                                 f"{label}: Memory usage at {percent:.1f}%",
                                 {"usage_percent": percent}))

    def observe(self, sample: Sample) -> None:
        """One sample: a ``sample`` event, ``peak`` on a new high, Stormlog's other alerts."""
        allocated = sample.allocated
        change = None if allocated is None or self._last_allocated is None else \
            allocated - self._last_allocated
        self._last_allocated = allocated if allocated is not None else self._last_allocated
        with self._lock:
            self._append((sample, change))  # no callbacks: "sample" is not an alert
            c = self.counters
            if change is not None and change > 0:
                c["total_allocations"] += 1
                c["total_allocation_bytes"] += change
            elif change is not None and change < 0:
                c["total_deallocations"] += 1
                c["total_deallocation_bytes"] += -change
            if sample.device_used is not None and sample.device_used > c["peak_device_used"]:
                c["peak_device_used"] = sample.device_used
        if allocated is not None and allocated > self._peak:
            self._peak = allocated
            self.add(self._event("peak", sample, change, None, {"peak_memory": allocated}))
        if not self.enable_alerts:
            return
        if change is not None and change > self.thresholds[schema.STORMLOG_THRESHOLD_LEAK]:
            self.add(self._event("warning", sample, change,
                                 f"Large allocation detected: {change} bytes",
                                 {"large_allocation": True}))
        inactive, reserved = sample.inactive_split, sample.reserved
        if inactive is not None and reserved:
            fragmentation = inactive / reserved
            over = fragmentation > self.thresholds[schema.STORMLOG_THRESHOLD_FRAGMENTATION]
            if over and not self._fragmented:
                self.add(self._event("warning", sample, change,
                                     f"High fragmentation: {fragmentation:.1%}",
                                     {"fragmentation": fragmentation}))
            self._fragmented = over

    # -- reading --------------------------------------------------------------------------
    def snapshot(self) -> list[TrackingEvent]:
        with self._lock:
            held = list(self._events)
        return [e if isinstance(e, TrackingEvent) else self._event("sample", e[0], e[1], None)
                for e in held]

    def clear(self) -> None:
        with self._lock:
            self._events.clear()

    def record(self, event: TrackingEvent) -> dict[str, Any]:
        """One event as a Stormlog v4 telemetry record."""
        return {
            "schema_version": schema.STORMLOG_SCHEMA_VERSION, "session_id": event.session_id,
            "timestamp_ns": int(event.timestamp * 1_000_000_000),
            "event_type": event.event_type, "collector": self._collector,
            "sampling_interval_ms": self._interval_ms, "pid": os.getpid(),
            "host": socket.gethostname(), "job_id": event.job_id, "rank": event.rank,
            "local_rank": event.local_rank, "world_size": event.world_size,
            "device_id": event.device_id,
            "allocator_allocated_bytes": event.memory_allocated,
            "allocator_reserved_bytes": event.memory_reserved,
            "allocator_active_bytes": event.active_memory,
            "allocator_inactive_bytes": event.inactive_memory,
            "allocator_change_bytes": event.memory_change,
            "device_used_bytes": event.device_used, "device_free_bytes": event.device_free,
            "device_total_bytes": event.device_total, "context": event.context,
            "metadata": dict(event.metadata or {}, backend=event.backend,
                             telemetry_collector=self._collector),
        }

    def export(self, filename: str | os.PathLike[str], format: str = "csv") -> None:
        """Stormlog's ``export_events``: a JSON list (indent 2) or a CSV; nothing when empty."""
        if format not in ("csv", "json"):
            raise ValueError(f"Unsupported format: {format}")
        records = [self.record(e) for e in self.snapshot()]
        if not records:
            return
        path = Path(filename)
        if format == "json":
            path.write_text(json.dumps(records, indent=2, default=str), encoding="utf-8")
            return
        with path.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
            writer.writeheader()
            for rec in records:  # metadata as Stormlog (pandas) writes it: the dict's repr
                writer.writerow({k: ("" if rec[k] is None else
                                     repr(rec[k]) if k == "metadata" else rec[k])
                                 for k in CSV_COLUMNS})
