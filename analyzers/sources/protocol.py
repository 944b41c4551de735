"""The one interface every telemetry source of a run has: ``read(window, deadline, progress)``
gives the Timeline :func:`stormotel.analyzers.run.run_once` analyses.

A file source ignores the window (the files are what they are); a TSDB source reads exactly the
window. Both wrap the loader functions of their modules (:mod:`stormotel.analyzers.sources`,
:mod:`~stormotel.analyzers.sources.prometheus`, :mod:`~stormotel.analyzers.sources.dcgm`), so a
loader's internals can change without the run noticing. What a TSDB read covers
(:class:`QueryWindow`) and what it reached (:class:`LoadOutcome`) are defined here, so the run
names them without loading any source. Adding a TSDB source is one module with
a :class:`TsdbSource` subclass (its own flags in ``flags``, their values in
``job.tsdb.extra``) and one line in :data:`stormotel.analyzers.sources.tsdb.TSDB_SOURCES`.

Progress is an object, not a function handed down: :class:`Progress` says whether and where
lines go; the adapters give the loaders its bound ``say`` (None when quiet, as before).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol, TextIO

from stormotel.analyzers import messages

from stormotel.textsafe import one_line

if TYPE_CHECKING:  # httpx and numpy load with the sources that need them
    import httpx
    from stormotel.analyzers.http import Deadline
    from stormotel.analyzers.options import JobOptions, PluginFlag
    from stormotel.analyzers.sources.base import ProgressFn
    from stormotel.analyzers.timeline import Timeline
    from stormotel.analyzers.window import Window



# --- what a TSDB source reads, and what it reached -------------------------------------------
@dataclass
class QueryWindow:
    """What to read: one job over ``[start_ns, end_ns]``."""

    job_id: str
    start_ns: int
    end_ns: int
    #: Query step in seconds; ``None`` derives it from the series' own sample density.
    step_s: float | None = None
    #: Extra PromQL label matchers, e.g. ``namespace="train"`` (added to every selector).
    extra_matchers: str = ""

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


@dataclass
class LoadOutcome:
    """What happened per endpoint, for exit codes and the summary line."""

    endpoints_ok: list[str] = field(default_factory=list)
    #: endpoint → reason it gave nothing at all.
    endpoints_failed: dict[str, str] = field(default_factory=dict)
    #: endpoint → ranks for which at least one query failed.
    ranks_failed: dict[str, set[int]] = field(default_factory=dict)
    #: endpoint → why its first failed query failed (what "every query failed" names).
    first_failure: dict[str, str] = field(default_factory=dict)
    queries: int = 0
    step_s: float | None = None

    @property
    def partial(self) -> bool:
        return bool(self.endpoints_failed or self.ranks_failed)


@dataclass(frozen=True)
class Progress:
    """Where a run's progress lines go: ``stormotel analyze: …`` on ``stream`` (stderr when
    None), nothing when ``quiet``."""

    quiet: bool = False
    stream: TextIO | None = None

    def say(self, msg: str) -> None:
        if not self.quiet:
            messages.say(self.stream or sys.stderr, one_line(msg, 2000), flush=True)

    @property
    def fn(self) -> ProgressFn | None:
        """For the wrapped loaders: None when quiet (they skip building the messages)."""
        return None if self.quiet else self.say


class Source(Protocol):
    """Telemetry for one run.

    ``telemetry`` is False for a source that holds only stall evidence's markers (the report is
    then the evidence's own, not an analysis of memory); ``outcome`` is what a TSDB read reached
    (endpoints, partial ranks, step), None for files.
    """

    telemetry: ClassVar[bool]

    @property
    def outcome(self) -> LoadOutcome | None: ...

    def read(self, window: Window | None, deadline: Deadline | None,
             progress: Progress) -> Timeline: ...


@dataclass
class TsdbSource:
    """A Prometheus-compatible endpoint set read for one job and window: the shared part (one
    HTTP client, the query window, "no telemetry" as a source failure, the window's note);
    subclasses say which series and how (:meth:`load`) and when the flags select them."""

    job: JobOptions
    job_id: str
    telemetry: ClassVar[bool] = True
    #: Flags of its own (``--help`` lists them in the TSDB source group); each value is
    #: ``job.tsdb.extra[flag.dest]``, which :meth:`selected` and :meth:`load` read.
    flags: ClassVar[tuple[PluginFlag, ...]] = ()
    _outcome: LoadOutcome | None = field(default=None, init=False)

    @classmethod
    def selected(cls, job: JobOptions) -> bool:
        """Whether the run's flags ask for this source."""
        raise NotImplementedError

    @property
    def outcome(self) -> LoadOutcome | None:
        return self._outcome

    def load(self, client: httpx.Client, qw: QueryWindow, deadline: Deadline | None,
             progress: Progress) -> tuple[Timeline, LoadOutcome]:
        raise NotImplementedError

    def read(self, window: Window | None, deadline: Deadline | None,
             progress: Progress) -> Timeline:
        """Raises SourceFailureError (nothing readable), http.ConfigError / MapError (input the
        user can fix)."""
        from stormotel.analyzers import http

        from stormotel.errors import NoTelemetryError

        if window is None:
            raise ValueError("a TSDB source reads a window")
        qw = QueryWindow(job_id=self.job_id, start_ns=window.start_ns,
                         end_ns=window.end_ns - 1_000_000, step_s=self.job.tsdb.step)
        with http.make_client(self.job.http) as client:
            timeline, self._outcome = self.load(client, qw, deadline, progress)
        if not timeline.ranks:
            raise NoTelemetryError(f"no telemetry for job_id={self.job_id!r} in "
                                   f"{describe_window(window)} "
                                   f"at {', '.join(self._outcome.endpoints_ok)}")
        if window.note:
            timeline.notes.append(window.note)
        return timeline


def describe_window(window: Window) -> str:
    """The window a run read, as a person checks it against their job: its ISO bounds, how
    long it is and how long before now it ended (a window ending before the job's first scrape
    finds nothing, and the user should see that, not guess)."""
    import time

    length = (window.end_ns - window.start_ns) / 1e9
    ago = (time.time_ns() - window.end_ns) / 1e9
    ended = "ending now" if abs(ago) < 2 else (
        f"ending {ago:.0f}s before now" if ago > 0 else f"ending {-ago:.0f}s from now")
    return f"{window.iso()} ({length:.0f}s, {ended})"
