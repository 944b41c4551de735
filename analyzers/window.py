"""The half-open window ``[start, end)`` one TSDB run analyses, as every stage names it (the
source reads it, the run describes it, the scheduled job chooses it:
:func:`stormotel.analyzers.scheduled.window.resolve_window`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass
class Window:
    start_ns: int
    end_ns: int
    #: True when the state file / --since chose it (then the state advances after success).
    tracked: bool
    note: str = ""
    #: Too short to analyse yet (see scheduled/window.py MIN_NEW_WINDOW_S): nothing is read,
    #: the state stays.
    deferred: bool = False

    def iso(self) -> str:
        return f"{iso_time(self.start_ns)}/{iso_time(self.end_ns)}"


def iso_time(ns: int) -> str:
    """``ns`` since the epoch as an ISO-8601 UTC second (or a note that it is no date)."""
    try:
        return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, ValueError, OSError):
        return f"{ns}ns (not a representable date)"
