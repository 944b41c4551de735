"""Writing one run to every sink it asked for, in one order: the report (text/JSON, HTML),
then the destinations (Grafana, the incident dashboard file, the Perfetto trace), then the
series (remote write, Pushgateway). A failing sink never stops the others; the series go last
so they record whether the run failed; ``--dry-run`` prints what each would do.

:data:`SINKS` is the whole list: name → where the class lives, which option asks for it and
the flags of its own, in write order. Adding a sink is its module and one line there (the
command line declares the line's flags and fills ``SinkOptions.extra`` from them); a sink's
module is imported only when its option is set, so a run over files loads no server client. A
failed run (no report) writes its run series through the same series sinks
(:func:`write_failed_run`).
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from stormotel.analyzers import messages
from stormotel.analyzers.options import PluginFlag
from stormotel.analyzers.sinks.base import RunContext, Sink, SinkClass, option_value

from stormotel.errors import SinkFailureError
from stormotel.textsafe import one_line

if TYPE_CHECKING:
    from stormotel.analyzers.report import Report
    from stormotel.analyzers.sinks.findings_series import SeriesPoint
    from stormotel.analyzers.timeline import Timeline


@dataclass(frozen=True)
class SinkEntry:
    #: ``module:Class`` of the sink (a :class:`~stormotel.analyzers.sinks.base.SinkClass`).
    where: str
    #: The :class:`RunContext` option that asks for it (``sinks.grafana_url``); None: its own
    #: flags (any of them set), else always.
    wanted_by: str | None = None
    #: Flags of its own, declared here so ``--help`` needs no sink module; each value is
    #: ``ctx.sinks.extra[flag.dest]`` (the class's ``option``: ``"sinks.extra.<dest>"``).
    flags: tuple[PluginFlag, ...] = ()

    def load(self) -> type[SinkClass]:
        module, name = self.where.split(":")
        return cast("type[SinkClass]", getattr(importlib.import_module(module), name))

    def wanted(self, ctx: RunContext) -> bool:
        if self.wanted_by is not None:
            return bool(option_value(ctx, self.wanted_by))
        return not self.flags or any(ctx.sinks.extra.get(f.dest) for f in self.flags)


_S = "stormotel.analyzers.sinks"
#: Every sink, in the order a run writes them.
SINKS: dict[str, SinkEntry] = {
    "report": SinkEntry("stormotel.analyzers.sinks.report_sink:ReportSink"),
    "html": SinkEntry(f"{_S}.html_sink:HtmlSink", "output.html"),
    "grafana": SinkEntry(f"{_S}.grafana_sink:GrafanaSink", "sinks.grafana_url"),
    "incident_dashboard": SinkEntry(f"{_S}.incident_dashboard:IncidentDashboardFileSink",
                                    "sinks.incident_dashboard"),
    "perfetto": SinkEntry(f"{_S}.perfetto_sink:PerfettoSink", "sinks.perfetto"),
    "remote_write": SinkEntry(f"{_S}.remote_write_sink:RemoteWriteSink", "sinks.remote_write"),
    "pushgateway": SinkEntry(f"{_S}.pushgateway_sink:PushgatewaySink", "sinks.pushgateway"),
}


def sink_flags() -> tuple[PluginFlag, ...]:
    """Every flag the sinks' lines declare, in write order (the command line adds them)."""
    return tuple(flag for entry in SINKS.values() for flag in entry.flags)


@dataclass
class SinkOutcome:
    #: sink name → "ok", "dry-run" or the error message (the report's own only when it failed).
    status: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(v not in ("ok", "dry-run") for v in self.status.values())

    def summary(self) -> str:
        return ",".join(f"{k}:{'ok' if v in ('ok', 'dry-run') else 'failed'}"
                        for k, v in self.status.items()) or "none"


def sink_classes(ctx: RunContext) -> list[type[SinkClass]]:
    """The classes of the sinks ``ctx``'s options ask for, in write order."""
    return [entry.load() for entry in SINKS.values() if entry.wanted(ctx)]


def write_sinks(ctx: RunContext) -> SinkOutcome:
    """Write every sink ``ctx`` asks for (``plan`` the destinations and series under
    ``--dry-run``); a failing sink never stops the others.

    Raises SinkFailureError when a file run cannot write its report (nothing else is written
    then); a scheduled run goes on, and its series record the run as a sink failure."""
    result = SinkOutcome()
    report_error = ""
    for cls in sink_classes(ctx):
        if cls.kind == "output":
            report_error = report_error or _write_outputs(cls.for_run(ctx), ctx)
            continue
        sinks = cls.for_run(ctx)
        if sinks and cls.kind == "series" and ctx.points is None:
            ctx.points = _series_points(ctx, not result.failed and not report_error)
        for sink in sinks:
            _attempt(sink, ctx, result)
    if report_error:
        result.status["report"] = report_error
    return result


def _write_outputs(sinks: list[Sink], ctx: RunContext) -> str:
    """The report's own files, in order, up to the first that fails ("" when none did)."""
    for sink in sinks:
        try:
            sink.write()
        except OSError as e:
            if not ctx.scheduled:
                raise SinkFailureError(f"cannot write output: {one_line(e)}") from e
            messages.say(ctx.stderr, f"cannot write the report: {one_line(e)}")
            return str(e)
    return ""


def _attempt(sink: Sink, ctx: RunContext, result: SinkOutcome) -> None:
    from stormotel.analyzers import http  # loaded with the first server sink

    dry = ctx.sinks.dry_run
    try:
        detail = sink.plan(ctx.stdout) if dry else sink.write()
        result.status[sink.name] = "dry-run" if dry else "ok"
        if detail:
            result.details[sink.name] = detail
    except (http.EndpointError, http.ConfigError, OSError, ValueError) as e:
        result.status[sink.name] = str(e)
        messages.say(ctx.stderr, f"{sink.name} sink failed: {one_line(e)}")


def _series_points(ctx: RunContext, success: bool) -> list[SeriesPoint]:
    """The findings' series (a file run without a window is stamped "now") and, in a scheduled
    run, the run's own."""
    from stormotel.analyzers.sinks import findings_series

    report = ctx.report
    ts = None if report.window_end_ns is not None else time.time_ns() // 1_000_000
    points = findings_series.findings_samples(report, job_id=ctx.job_id, timestamp_ms=ts)
    if ctx.series is not None:
        points += ctx.series.points(findings_series.outcome_of(report), success)
    return points


def write_failed_run(ctx: RunContext, points: list[SeriesPoint]) -> None:
    """A failed run's series (time and run counter) through the series sinks, so
    StormotelAnalyzerFailing sees it; best effort (the run already failed), nothing in a dry
    run. ``ctx`` holds no report (:func:`empty_report`)."""
    from stormotel.analyzers import http

    if ctx.sinks.dry_run:
        return
    ctx.points = points
    try:
        for cls in sink_classes(ctx):
            if cls.kind == "series":
                for sink in cls.for_run(ctx):
                    sink.write()
    except (http.EndpointError, http.ConfigError, OSError) as e:
        messages.say(ctx.stderr, f"could not record the failed run: {e}")


def empty_report(job_id: str) -> tuple[Report, Timeline]:
    """What a failed run's sink context holds in place of a report and its Timeline."""
    from stormotel.analyzers.report import Report
    from stormotel.analyzers.timeline import Timeline

    return Report(job_id=job_id, world_size=None, participating_ranks=[],
                  missing_ranks=[]), Timeline(ranks={})
