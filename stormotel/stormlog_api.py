"""The rest of Stormlog 0.4.3's public tracker API, so a script written for Stormlog runs with
only its import changed (``from stormlog.tracker import MemoryTracker, MemoryWatchdog`` →
``from stormotel.tracker import ...``).

:class:`StormlogTrackerAPI` is mixed into :class:`stormotel.tracker.MemoryTracker`:
``get_statistics``, ``get_memory_timeline``, ``enter_phase``/``phase``, ``handle_exception``,
``get_session_summary`` (the event API — ``add_alert_callback``, ``get_events``,
``export_events`` … — lives in :mod:`stormotel.stormlog_compat`). :class:`MemoryWatchdog` is
Stormlog's cleanup helper (``force_cleanup``, ``get_cleanup_stats``).

Semantics follow Stormlog's where they make sense; the differences (docs/tracker.md "Coming
from Stormlog") are: statistics add a ``stormotel`` entry (samples, drops, export failures) and
omit Stormlog's collector-health and sink-diagnostics keys; a phase is also a ``mark`` span (so
it reaches the archive, the collector and the analyzer, not only the event log);
``handle_exception`` writes stormotel's ring dump (one JSON-lines file, not Stormlog's bundle
directory) and honours ``enable_oom_flight_recorder`` as Stormlog does.
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stormotel.tracker import MemoryTracker

from stormotel.stormlog_compat import TrackingEvent

__all__ = ["MemoryWatchdog", "PhaseHandle", "PhaseProtocolError", "SessionSummary",
           "StormlogTrackerAPI"]

PHASE_ENTER_EVENT = "phase_enter"
PHASE_EXIT_EVENT = "phase_exit"


class PhaseProtocolError(RuntimeError):
    """A phase handle closed out of order or from another thread (as Stormlog raises)."""


@dataclass(frozen=True)
class SessionSummary:
    """Stormlog's ``SessionSummary``: identity and lifecycle of one tracking session."""

    session_id: str
    status: str  # running | completed
    started_at_ns: int
    ended_at_ns: int | None
    host: str
    pid: int
    job_id: str | None = None
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    source: str = "stormotel.session"


class PhaseHandle:
    """What ``enter_phase`` returns: close it (once) to end the phase."""

    def __init__(self, *, scope_id: str, name: str, path: tuple[str, ...],
                 close_callback: Callable[[], Any]) -> None:
        self.scope_id = scope_id
        self.name = name
        self.path = path
        self._close = close_callback
        self._closed = False

    @property
    def phase_path(self) -> str:
        return " / ".join(p for p in self.path if p)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> Any:
        if self._closed:
            return None
        result = self._close()
        self._closed = True
        return result


@dataclass
class _OpenPhase:
    handle: PhaseHandle
    span: contextlib.AbstractContextManager[Any]
    metadata: dict[str, Any]
    sequence: int


def _phase_scope(p: _OpenPhase, action: str, sequence: int) -> dict[str, Any]:
    thread = threading.current_thread()
    scope: dict[str, Any] = {
        "action": action, "name": p.handle.name, "path": list(p.handle.path),
        "depth": len(p.handle.path), "scope_id": p.handle.scope_id,
        "thread_id": int(thread.ident or 0), "thread_name": thread.name, "sequence": sequence}
    if p.metadata:
        scope["attributes"] = dict(p.metadata)
    return {"phase_scope": scope}


class StormlogTrackerAPI:
    """Stormlog's remaining tracker methods, on top of stormotel's tracker state."""

    def _phases(self) -> dict[int, list[_OpenPhase]]:
        tracker: Any = self
        if "_stormlog_phases" not in tracker.__dict__:
            tracker._stormlog_phases = {}
            tracker._stormlog_phase_seq = 0
            tracker._stormlog_phase_lock = threading.Lock()
        phases: dict[int, list[_OpenPhase]] = tracker._stormlog_phases
        return phases

    # -- statistics -----------------------------------------------------------------------
    def get_statistics(self) -> dict[str, Any]:
        """Stormlog's statistics dict (peaks, allocation counters, history, current memory,
        session, rates) plus ``stormotel``: the tracker's own counters (``stats``)."""
        t: MemoryTracker = self  # type: ignore[assignment]
        ev = t.stormlog
        events = ev.snapshot()
        now = time.time()
        sample = t.state.latest
        c = dict(ev.counters)
        total = sample.device_total if sample is not None else None
        started = ev.session_started_ns / 1e9 if ev.session_started_ns else None
        summary = self.get_session_summary()
        stats: dict[str, Any] = {
            "peak_memory": ev.peak_allocated, "peak_device_used": c["peak_device_used"],
            **{k: c[k] for k in ("total_allocations", "total_deallocations",
                                 "total_allocation_bytes", "total_deallocation_bytes",
                                 "alert_count")},
            "tracking_start_time": started,
            "last_memory_check": sample.timestamp_ns / 1e9 if sample is not None else 0,
            "total_events": len(events),
            "events_last_hour": sum(e.timestamp > now - 3600 for e in events),
            "history_window_limit_events": ev.max_events,
            "history_retained_events": len(events),
            "history_dropped_events": c["dropped_events"],
            "backend": t.sampler.name,
            "oom_flight_recorder_enabled": bool(t.enable_oom_flight_recorder),
            "last_oom_dump_path": t.last_oom_dump,
            "session_id": summary.session_id if summary else None,
            "session_status": summary.status if summary else None,
            "current_memory_allocated": None if sample is None else sample.allocated,
            "current_memory_reserved": None if sample is None else sample.reserved,
            "current_device_used": None if sample is None else sample.device_used,
            "current_device_free": None if sample is None else sample.device_free,
            "device_total": total,
            "memory_utilization_percent": (
                sample.device_used / total * 100 if sample is not None and total
                and sample.device_used is not None else None),
            "average_allocation_size": c["total_allocation_bytes"]
            / max(c["total_allocations"], 1),
            "average_deallocation_size": c["total_deallocation_bytes"]
            / max(c["total_deallocations"], 1),
        }
        if started is not None:
            duration = (ev.session_ended_ns / 1e9 if ev.session_ended_ns else now) - started
            stats.update(tracking_duration_seconds=duration,
                         allocations_per_second=c["total_allocations"] / max(duration, 1),
                         bytes_allocated_per_second=c["total_allocation_bytes"]
                         / max(duration, 1))
        stats["stormotel"] = t.stats
        return stats

    def get_memory_timeline(self, interval: float = 1.0) -> dict[str, list[Any]]:
        """The event log in ``interval``-second buckets, the last event of each (Stormlog's
        grouping): ``timestamps``, ``allocated``, ``reserved``, ``device_used``,
        ``device_free``, ``device_total``."""
        if not interval > 0:
            raise ValueError("interval must be > 0")
        t: MemoryTracker = self  # type: ignore[assignment]
        events = t.stormlog.snapshot()
        keys = ("timestamps", "allocated", "reserved", "device_used", "device_free",
                "device_total")
        out: dict[str, list[Any]] = {k: [] for k in keys}
        if not events:
            return out
        start = events[0].timestamp

        def emit(bucket: int, e: TrackingEvent) -> None:
            for key, value in zip(keys, (start + bucket * interval, e.memory_allocated,
                                         e.memory_reserved, e.device_used, e.device_free,
                                         e.device_total), strict=True):
                out[key].append(value)

        current, last = 0, events[0]
        for e in events[1:]:
            bucket = int((e.timestamp - start) // interval)
            if bucket != current:
                emit(current, last)
                current = bucket
            last = e
        emit(current, last)
        return out

    @property
    def oom_buffer_size(self) -> int:
        """Stormlog's name for the OOM ring's length (``ring_size``)."""
        t: MemoryTracker = self  # type: ignore[assignment]
        return t.ring.capacity

    def get_session_summary(self) -> SessionSummary | None:
        """The current or most recent tracking session (None before the first start)."""
        t: MemoryTracker = self  # type: ignore[assignment]
        ev = t.stormlog
        if ev.session_started_ns is None:
            return None
        ident = t.identity
        return SessionSummary(
            session_id=ev.session_id,
            status="running" if ev.session_ended_ns is None else "completed",
            started_at_ns=ev.session_started_ns, ended_at_ns=ev.session_ended_ns,
            host=socket.gethostname(), pid=os.getpid(), job_id=ident.job_id, rank=ident.rank,
            local_rank=ident.local_rank, world_size=ident.world_size)

    # -- phases ---------------------------------------------------------------------------
    def enter_phase(self, name: str, *, metadata: Mapping[str, Any] | None = None
                    ) -> PhaseHandle:
        """Open a (nestable, per-thread) phase: a ``phase_enter`` event and a mark span named
        like the phase; close the handle to end both. Tracking must be active (as Stormlog)."""
        t: MemoryTracker = self  # type: ignore[assignment]
        if not t.is_tracking:
            raise RuntimeError("Tracking must be active before entering a phase.")
        clean = str(name).strip()
        if not clean:
            raise ValueError("phase name must be a non-empty string")
        stack = self._phases().setdefault(threading.get_ident(), [])
        tracker: Any = self
        with tracker._stormlog_phase_lock:
            tracker._stormlog_phase_seq += 1
            seq = tracker._stormlog_phase_seq
        path = (*stack[-1].handle.path, clean) if stack else (clean,)
        span = t.mark(clean)
        span.__enter__()
        handle = PhaseHandle(scope_id=f"{t.stormlog.session_id}:{seq}", name=clean, path=path,
                             close_callback=lambda: self._exit_phase(handle))
        opened = _OpenPhase(handle, span, dict(metadata or {}), seq)
        stack.append(opened)
        t.stormlog.add(t.stormlog._event(PHASE_ENTER_EVENT, t.state.latest, 0,
                                         f"Phase entered: {handle.phase_path}",
                                         _phase_scope(opened, "enter", seq)))
        return handle

    @contextlib.contextmanager
    def phase(self, name: str, *, metadata: Mapping[str, Any] | None = None
              ) -> Iterator[PhaseHandle]:
        """``with tracker.phase("forward"):`` — :meth:`enter_phase` closed on exit."""
        handle = self.enter_phase(name, metadata=metadata)
        try:
            yield handle
        finally:
            handle.close()

    def _exit_phase(self, handle: PhaseHandle) -> None:
        t: MemoryTracker = self  # type: ignore[assignment]
        stack = self._phases().get(threading.get_ident()) or []
        if not stack or stack[-1].handle is not handle:
            if any(p.handle is handle for p in stack):
                raise PhaseProtocolError("Phase handles must be closed in strict LIFO order "
                                         "per thread.")
            raise PhaseProtocolError("Phase handle was closed from a different thread than "
                                     "it was opened, or is unknown.")
        opened = stack.pop()
        tracker: Any = self
        with tracker._stormlog_phase_lock:
            tracker._stormlog_phase_seq += 1
            seq = tracker._stormlog_phase_seq
        opened.span.__exit__(None, None, None)
        t.stormlog.add(t.stormlog._event(PHASE_EXIT_EVENT, t.state.latest, 0,
                                         f"Phase exited: {handle.phase_path}",
                                         _phase_scope(opened, "exit", seq)))

    # -- exceptions -----------------------------------------------------------------------
    def handle_exception(self, exc: BaseException, context: str | None = None,
                         metadata: Mapping[str, Any] | None = None) -> str | None:
        """For an out-of-memory exception: the OOM dump and event (as ``capture_oom`` does)
        and the dump's path; None for any other exception or with
        ``enable_oom_flight_recorder=False`` (Stormlog's contract)."""
        from stormotel.tracker import is_oom_error

        t: MemoryTracker = self  # type: ignore[assignment]
        if not is_oom_error(exc) or not t.enable_oom_flight_recorder:
            return None
        t._on_oom(exc, context or "")
        self._stormlog_oom_event(exc, context, metadata)
        return t.last_oom_dump

    def _stormlog_oom_event(self, exc: BaseException, context: str | None,
                            metadata: Mapping[str, Any] | None) -> None:
        """Stormlog's ``error`` event for an OOM (what its exports and our analyzer read)."""
        t: MemoryTracker = self  # type: ignore[assignment]
        reason = type(exc).__name__
        t.stormlog.add(t.stormlog._event(
            "error", t.state.latest, 0, f"OOM detected ({reason})",
            {"oom_reason": reason, "oom_dump_path": t.last_oom_dump, "context": context,
             **dict(metadata or {})}))


#: Stormlog constructor arguments with no stormotel counterpart, accepted so its scripts run.
IGNORED_ARGUMENTS = frozenset({"oom_max_dumps", "enable_native_cuda_history",
                               "native_history_max_entries", "telemetry_sink_config"})


def stormlog_arguments(options: Mapping[str, Any], ring_size: int, dump_max_bytes: int
                       ) -> tuple[int, int]:
    """Stormlog's extra ``MemoryTracker`` arguments → (ring size, dump size bound).

    ``oom_buffer_size`` is the ring's length; ``oom_max_total_mb`` bounds each dump (Stormlog
    bounds all dumps together); ``collector`` (a Stormlog device collector) has no meaning
    here: pass ``sampler=`` instead. The rest are accepted and unused (the archive plays
    Stormlog's telemetry sink). Anything else is the TypeError Python would raise."""
    unknown = set(options) - IGNORED_ARGUMENTS - {"oom_buffer_size", "oom_max_total_mb",
                                                  "collector"}
    if unknown:
        raise TypeError(f"MemoryTracker() got an unexpected keyword argument "
                        f"{sorted(unknown)[0]!r}")
    if options.get("collector") is not None:
        raise TypeError("collector= is Stormlog's device collector; pass sampler='cuda', "
                        "'nvml', 'simulated' or a stormotel Sampler instead")
    if options.get("oom_buffer_size") is not None:
        ring_size = int(options["oom_buffer_size"])
    if options.get("oom_max_total_mb") is not None:
        dump_max_bytes = min(dump_max_bytes, int(options["oom_max_total_mb"]) * 2**20)
    return ring_size, dump_max_bytes


class MemoryWatchdog:
    """Stormlog's watchdog: on a critical alert (or a warning above ``cleanup_threshold``)
    empty the allocator's cache, at most every 30 s; ``force_cleanup`` does it now."""

    def __init__(self, tracker: MemoryTracker, auto_cleanup: bool = True,
                 cleanup_threshold: float = 0.9,
                 aggressive_cleanup_threshold: float = 0.95) -> None:
        self.tracker = tracker
        self.auto_cleanup = auto_cleanup
        self.cleanup_threshold = cleanup_threshold
        self.aggressive_cleanup_threshold = aggressive_cleanup_threshold
        self.cleanup_count = 0
        self.last_cleanup_time = 0.0
        self.min_cleanup_interval = 30.0
        tracker.add_alert_callback(self._handle_alert)

    def _handle_alert(self, event: TrackingEvent) -> None:
        if not self.auto_cleanup:
            return
        now = time.time()
        if now - self.last_cleanup_time < self.min_cleanup_interval:
            return
        usage = (event.metadata or {}).get("usage_percent", 0)
        if event.event_type == "critical" or (
                event.event_type == "warning" and usage >= self.cleanup_threshold * 100):
            self._perform_cleanup(aggressive=event.event_type == "critical")
            self.last_cleanup_time = now

    def _perform_cleanup(self, aggressive: bool = False) -> None:
        self.cleanup_count += 1
        ev = self.tracker.stormlog
        try:
            if aggressive:
                gc.collect()
            if self.tracker.sampler.name == "cuda":
                import torch

                if aggressive:
                    torch.cuda.synchronize()
                torch.cuda.empty_cache()
            kind = "aggressive" if aggressive else "standard"
            ev.add(ev._event("cleanup", self.tracker.state.latest, 0,
                             f"Performed {kind} memory cleanup"))
        except Exception as e:
            ev.add(ev._event("error", self.tracker.state.latest, 0, f"Cleanup failed: {e}"))

    def force_cleanup(self, aggressive: bool = False) -> None:
        """Empty the allocator's cache now (``aggressive``: collect garbage and sync first)."""
        self._perform_cleanup(aggressive)

    def get_cleanup_stats(self) -> dict[str, Any]:
        return {"cleanup_count": self.cleanup_count,
                "last_cleanup_time": self.last_cleanup_time,
                "auto_cleanup_enabled": self.auto_cleanup,
                "cleanup_threshold": self.cleanup_threshold,
                "aggressive_cleanup_threshold": self.aggressive_cleanup_threshold}
