"""The one small interface every sink of a run has, and what they all write from.

A sink has a name, what it would do for a dry run (``plan``), and writing (``write``); its class
says which kind it is and builds its instances for a run (``for_run``: none when the flags do
not ask for it). :class:`BaseSink` is all of that but ``plan`` and ``write``: adding a sink is one
module with a subclass and one line in :data:`stormotel.analyzers.sinks.dispatch.SINKS` (the
line declares the sink's own flags, if any; their values reach it as ``sinks.extra.<dest>``).

This module, the dispatch table and the report sink import nothing heavy (the package's
``__init__`` neither): a run over files with no sink flag writes its report through them without
loading any server sink (or httpx).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TextIO

from stormotel.analyzers.options import OutputOptions, SinkOptions
from stormotel.analyzers.sinks.outputs import job_path

if TYPE_CHECKING:
    from stormotel.analyzers import http
    from stormotel.analyzers.report import Report
    from stormotel.analyzers.sinks.findings_series import RunSeries, SeriesPoint
    from stormotel.analyzers.timeline import Timeline

#: ``output``: the run's own report (text/JSON, HTML): written even in a dry run, first, and a
#: failure is the report's; ``destination``: files and APIs written from the findings;
#: ``series``: Prometheus samples (findings and the run's own), written last so they record
#: whether the others failed.
SinkKind = Literal["output", "destination", "series"]


@dataclass
class RunContext:
    """What every sink of one run writes from."""

    report: Report
    timeline: Timeline
    sinks: SinkOptions
    output: OutputOptions
    #: The job id the sinks label their writes with (the run's, else the report's).
    job_id: str
    settings: http.HttpSettings
    deadline: http.Deadline | None
    #: The TSDB query endpoints, where a rejected remote write is checked against.
    query_urls: tuple[str, ...] = ()
    #: Several jobs in this run: every file goes to the job's own path (sinks/outputs.py).
    several: bool = False
    #: A scheduled (TSDB) run: a report that cannot be written does not stop the other sinks,
    #: whose series record the failure; a file run stops there (exit SINK_FAILURE).
    scheduled: bool = False
    #: The run-level series (TSDB runs), beside the findings' series.
    series: RunSeries | None = None
    out: TextIO | None = None
    err: TextIO | None = None
    #: The samples the series sinks write, set once before the first of them.
    points: list[SeriesPoint] | None = None

    @property
    def stdout(self) -> TextIO:
        return self.out or sys.stdout

    @property
    def stderr(self) -> TextIO:
        return self.err or sys.stderr


class Sink(Protocol):
    """One destination for a run's findings.

    ``plan`` prints what ``write`` would do (``--dry-run``) and changes nothing; ``write`` does
    it. Both return a short detail for the progress line ("" for none) and raise
    ``http.EndpointError``, ``http.ConfigError``, ``OSError`` or ``ValueError`` on failure.
    """

    name: str

    def plan(self, out: TextIO) -> str: ...

    def write(self) -> str: ...


class SinkClass(Protocol):
    """A sink's class as the dispatch table holds it."""

    kind: ClassVar[SinkKind]

    @classmethod
    def for_run(cls, ctx: RunContext) -> list[Sink]:
        """The instances this run's flags ask for (often none, sometimes one per URL)."""
        ...


class BaseSink:
    """What every sink shares, so a sink's module writes only ``plan`` and ``write``.

    A subclass says its ``name``, its ``kind``, and the :class:`RunContext` option that asks for
    it (``option``, e.g. ``"sinks.perfetto"``, or ``"sinks.extra.my_sink"`` for a flag its
    ``SINKS`` line declares; None: every run writes it). :meth:`for_run` makes
    one instance per target the option holds — a path, a URL, or a list of URLs (then named
    ``name1``, ``name2``… when there are several) — with ``per_job`` paths moved to the job's
    own (:func:`~stormotel.analyzers.sinks.outputs.job_path`, a run over several jobs).
    """

    name: str = ""
    kind: ClassVar[SinkKind] = "destination"
    option: ClassVar[str | None] = None
    per_job: ClassVar[bool] = False

    def __init__(self, ctx: RunContext, target: Any = None, name: str | None = None) -> None:
        self.ctx = ctx
        #: The path or URL the option named (None for a sink without one).
        self.target = target
        self.name = name or type(self).name

    @classmethod
    def for_run(cls, ctx: RunContext) -> list[Sink]:
        if cls.option is None:
            return [cls(ctx)]
        value = option_value(ctx, cls.option)
        targets = list(value) if isinstance(value, list | tuple) else [value] if value else []
        if cls.per_job:
            targets = [job_path(t, ctx.report.job_id, several=ctx.several) for t in targets]
        if len(targets) == 1:
            return [cls(ctx, targets[0])]
        return [cls(ctx, t, f"{cls.name}{i + 1}") for i, t in enumerate(targets)]

    def plan(self, out: TextIO) -> str:
        raise NotImplementedError

    def write(self) -> str:
        raise NotImplementedError


def option_value(ctx: RunContext, path: str) -> Any:
    """The option at ``path`` (``sinks.perfetto`` → ``ctx.sinks.perfetto``); a mapping on the
    way is read by key, None where it lacks one (``sinks.extra.my_sink``: a declared flag)."""
    value: Any = ctx
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else getattr(value, part)
    return value
