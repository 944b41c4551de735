"""Writing one report to every sink a run asked for (Grafana annotations and incident dashboard,
dashboard file, Perfetto trace, remote write, Pushgateway): a failing sink never stops the
others, series sinks go last so they record whether the run failed, and ``--dry-run`` prints what
each would do."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import msgspec
from stormotel.analyzers import http
from stormotel.analyzers.findings import ranks_named
from stormotel.analyzers.options import JobOptions, SinkOptions
from stormotel.analyzers.report import Report
from stormotel.analyzers.scheduled.tsdb_state import sample_values
from stormotel.analyzers.sinks import findings_series, grafana, perfetto, pushgateway, remote_write
from stormotel.analyzers.sinks.base import Sink
from stormotel.analyzers.timeline import Timeline

from stormotel.atomic import write_atomic
from stormotel.textsafe import one_line, redact_tree


@dataclass
class SinkOutcome:
    #: sink name → "ok", "dry-run" or the error message.
    status: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(v not in ("ok", "dry-run") for v in self.status.values())

    def summary(self) -> str:
        return ",".join(f"{k}:{'ok' if v in ('ok', 'dry-run') else 'failed'}"
                        for k, v in self.status.items()) or "none"


def _grafana_auth(sinks: SinkOptions) -> http.BearerAuth | None:
    token = http.read_secret(sinks.grafana_token_file, grafana.ENV_GRAFANA_TOKEN,
                             "Grafana token")
    return http.BearerAuth(token) if token else None


#: The findings whose ranks the incident dashboard shows, first-cause suspects first.
BOARD_FAMILIES = ("first_cause", "gap", "stall")


def _incident_board(report: Report, job_id: str) -> dict[str, Any]:
    from stormotel.dashboards.common import to_json
    from stormotel.dashboards.incident import incident_dashboard

    suspects = ranks_named(f for f in report.findings() if f.family in BOARD_FAMILIES)
    start = end = None
    if report.window_start_ns is not None and report.window_end_ns is not None:
        start = datetime.fromtimestamp(report.window_start_ns / 1e9, UTC)
        end = datetime.fromtimestamp(report.window_end_ns / 1e9, UTC)
    doc: dict[str, Any] = json.loads(to_json(incident_dashboard(job_id, suspects, start=start,
                                                                end=end)))
    return doc


@dataclass
class RunContext:
    """What every sink of one run writes from."""

    report: Report
    timeline: Timeline
    sinks: SinkOptions
    job_id: str
    settings: http.HttpSettings
    deadline: http.Deadline | None
    #: The TSDB query endpoints, where a rejected remote write is checked against.
    query_urls: tuple[str, ...] = ()


@dataclass
class GrafanaSink:
    """Annotations (one per finding, keyed) and, with ``--grafana-dashboard``, the incident
    dashboard through Grafana's API."""

    ctx: RunContext
    url: str
    name: str = "grafana"

    def _annotations(self) -> list[grafana.Annotation]:
        return grafana.annotations_for(self.ctx.report, self.ctx.job_id)

    def plan(self, out: TextIO) -> str:
        a, anns = self.ctx.sinks, self._annotations()
        res = grafana.sync_annotations(None, anns, self.ctx.job_id,
                                       dashboard_uid=a.grafana_dashboard_uid, dry_run=True)
        print(f"# would sync {len(anns)} annotation(s) to {one_line(self.url)}", file=out)
        for body in res.planned:
            print(json.dumps(body, sort_keys=True), file=out)
        if a.grafana_dashboard:
            print(f"# would save incident dashboard "
                  f"{_incident_board(self.ctx.report, self.ctx.job_id)['uid']} to "
                  f"{one_line(self.url)}", file=out)
        return f"planned={len(anns)}"

    def write(self) -> str:
        a, ctx = self.ctx.sinks, self.ctx
        with http.make_client(ctx.settings, auth=_grafana_auth(a)) as client:
            api = grafana.GrafanaAPI(self.url, client, ctx.settings, ctx.deadline)
            res = grafana.sync_annotations(api, self._annotations(), ctx.job_id,
                                           dashboard_uid=a.grafana_dashboard_uid)
            detail = str(res)
            if a.grafana_dashboard:
                saved = grafana.save_dashboard_if_changed(
                    api, _incident_board(ctx.report, ctx.job_id),
                    f"stormotel analyze {ctx.job_id} {ctx.report.window_end_ns}",
                    folder_uid=a.grafana_folder)
                detail += f" dashboard={'saved' if saved else 'unchanged'}"
            return detail


@dataclass
class _FileSink:
    """A sink that writes one local file, named by its flag."""

    ctx: RunContext
    path: Path


@dataclass
class IncidentDashboardFileSink(_FileSink):
    """The incident dashboard JSON written to ``--incident-dashboard FILE``."""

    name: str = "incident_dashboard"

    def plan(self, out: TextIO) -> str:
        board = _incident_board(self.ctx.report, self.ctx.job_id)
        print(f"# would write incident dashboard {board['uid']} to {self.path}", file=out)
        return ""

    def write(self) -> str:
        board = _incident_board(self.ctx.report, self.ctx.job_id)
        _atomic_write(self.path, json.dumps(redact_tree(board), indent=2, sort_keys=True))
        return str(self.path)


@dataclass
class PerfettoSink(_FileSink):
    """The merged multi-rank timeline as Chrome trace JSON (``--perfetto FILE``)."""

    name: str = "perfetto"

    def plan(self, out: TextIO) -> str:
        n = len(perfetto.trace_events(self.ctx.timeline, self.ctx.report))
        print(f"# would write {n} trace event(s) to {self.path}", file=out)
        return ""

    def write(self) -> str:
        n = perfetto.write_trace(self.path, self.ctx.timeline, self.ctx.report)
        return f"events={n}"


@dataclass
class RemoteWriteSink:
    """Findings and run series to one remote-write URL; a rejected batch fails unless the TSDB
    verifiably holds it already."""

    ctx: RunContext
    url: str
    points: list[findings_series.SeriesPoint]
    name: str = "remote_write"

    def plan(self, out: TextIO) -> str:
        print(f"# would remote-write {len(self.points)} sample(s) to {one_line(self.url)}",
              file=out)
        print(findings_series.render_text(self.points), file=out)
        return ""

    def write(self) -> str:
        with http.make_client(self.ctx.settings) as client:
            return _remote_write_checked(client, self.url, self.points, self.ctx.settings,
                                         self.ctx.deadline, self.ctx.query_urls)


@dataclass
class PushgatewaySink:
    """Findings and run series as the job's Pushgateway group (replaced each run)."""

    ctx: RunContext
    url: str
    points: list[findings_series.SeriesPoint]
    name: str = "pushgateway"

    def plan(self, out: TextIO) -> str:
        print(f"# would push {len(self.points)} series to {one_line(self.url)} "
              f"(job={pushgateway.PUSH_JOB}, job_id={self.ctx.job_id})", file=out)
        return ""

    def write(self) -> str:
        with http.make_client(self.ctx.settings) as client:
            n = pushgateway.push(client, self.url, self.ctx.job_id,
                                 self.points, settings=self.ctx.settings,
                                 deadline=self.ctx.deadline)
        return f"series={n}"


def file_and_api_sinks(ctx: RunContext) -> list[Sink]:
    """The sinks that do not carry the run's own series, in the order they are written."""
    a = ctx.sinks
    sinks: list[Sink] = []
    if a.grafana_url:
        sinks.append(GrafanaSink(ctx, a.grafana_url))
    if a.incident_dashboard:
        sinks.append(IncidentDashboardFileSink(ctx, a.incident_dashboard))
    if a.perfetto:
        sinks.append(PerfettoSink(ctx, a.perfetto))
    return sinks


def series_sinks(ctx: RunContext, points: list[findings_series.SeriesPoint]) -> list[Sink]:
    """Remote write (one per URL) and Pushgateway, carrying ``points``."""
    urls = ctx.sinks.remote_write
    sinks: list[Sink] = [RemoteWriteSink(ctx, url, points,
                                         "remote_write" if len(urls) == 1
                                         else f"remote_write{i + 1}")
                         for i, url in enumerate(urls)]
    if ctx.sinks.pushgateway:
        sinks.append(PushgatewaySink(ctx, ctx.sinks.pushgateway, points))
    return sinks


def write_sinks(report: Report, timeline: Timeline, job: JobOptions, *,
                run_points: Callable[[bool], list[findings_series.SeriesPoint]] | None = None,
                deadline: http.Deadline | None = None, out: TextIO | None = None
                ) -> SinkOutcome:
    """Write every sink asked for (``plan`` them under ``--dry-run``); a failing sink never
    stops the others.

    The series sinks (remote write, Pushgateway) go last: ``run_points(success)`` gives the
    run-level series, and a run whose other sinks failed is recorded as a failure there, never
    as a success."""
    out = out or sys.stdout
    dry = job.sinks.dry_run
    ctx = RunContext(report, timeline, job.sinks, job.job_id or report.job_id or "unknown",
                     job.http, deadline, job.tsdb.prometheus)
    result = SinkOutcome()

    def attempt(sink: Sink) -> None:
        try:
            detail = sink.plan(out) if dry else sink.write()
            result.status[sink.name] = "dry-run" if dry else "ok"
            if detail:
                result.details[sink.name] = detail
        except (http.EndpointError, http.ConfigError, OSError, ValueError) as e:
            result.status[sink.name] = str(e)
            print(f"stormotel analyze: {sink.name} sink failed: {one_line(e)}", file=sys.stderr)

    for sink in file_and_api_sinks(ctx):
        attempt(sink)
    if job.sinks.remote_write or job.sinks.pushgateway:
        # File/log analyses may have no time window: stamp their findings with "now".
        ts = None if report.window_end_ns is not None else time.time_ns() // 1_000_000
        points = findings_series.findings_samples(report, job_id=ctx.job_id, timestamp_ms=ts) \
            + (run_points(not result.failed) if run_points else [])
        for sink in series_sinks(ctx, points):
            attempt(sink)
    return result


_ALREADY_STORED = re.compile(r"duplicate sample|out of order|out of bounds|too old",
                             re.IGNORECASE)


def _remote_write_checked(client: Any, url: str, points: list[findings_series.SeriesPoint],
                          settings: http.HttpSettings, deadline: http.Deadline | None,
                          query_urls: tuple[str, ...]) -> str:
    """Remote write, and a rejected batch is a failure unless the TSDB already holds it.

    A re-run may re-send samples the TSDB already holds; Prometheus answers 400 ("duplicate
    sample", "out of order", "too old") for those. That is idempotence only if every sample is
    really there: each one is looked up (``timestamp(series)`` at its own time) on the query
    endpoints; one missing sample, or no endpoint to ask, makes the sink fail."""
    try:
        n = remote_write.write(client, url, points, settings=settings, deadline=deadline)
    except http.EndpointError as e:
        if e.status == 400 and _ALREADY_STORED.search(e.body) and query_urls:
            missing = _not_stored(client, query_urls[0], points, settings, deadline)
            if not missing:
                return f"samples={len(points)} (already stored, verified)"
            raise http.EndpointError(url, f"rejected {missing} sample(s) that the TSDB does not"
                                          f" hold ({e.body.strip()[:200]})",
                                     status=e.status, body=e.body) from None
        raise
    return f"samples={n}"


def _not_stored(client: Any, query_url: str, points: list[findings_series.SeriesPoint],
                settings: http.HttpSettings, deadline: http.Deadline | None) -> int:
    """How many of ``points`` the TSDB behind ``query_url`` does not hold at their timestamp."""
    missing = 0
    for p in points:
        matchers = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(p.labels.items()))
        expr = f'timestamp({{__name__="{p.name}",{matchers}}})'
        resp = http.request(client, "GET", query_url.rstrip("/") + "/api/v1/query",
                            settings=settings, deadline=deadline,
                            params={"query": expr, "time": f"{p.timestamp_ms / 1000:.3f}"})
        try:  # the TSDB's answer is input: typed-decoded, a wrong shape holds nothing
            values = sample_values(resp.json())
        except (ValueError, msgspec.ValidationError):
            values = []
        held = any(abs(v * 1000 - p.timestamp_ms) < 1 for v in values)
        missing += not held
    return missing


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _atomic_write(path: Path, text: str) -> None:
    write_atomic(path, text + "\n")
