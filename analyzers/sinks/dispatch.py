"""Writing one report to every sink a run asked for (Grafana annotations and incident dashboard,
dashboard file, Perfetto trace, remote write, Pushgateway): a failing sink never stops the
others, series sinks go last so they record whether the run failed, and ``--dry-run`` prints what
each would do."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from analyzers import http
from analyzers.report import Report
from analyzers.sinks import findings_series, grafana, perfetto, pushgateway, remote_write
from analyzers.timeline import Timeline


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


def _grafana_auth(args: argparse.Namespace) -> http.BearerAuth | None:
    token = http.read_secret(args.grafana_token_file, grafana.ENV_GRAFANA_TOKEN,
                             "Grafana token")
    return http.BearerAuth(token) if token else None


def _incident_board(report: Report, job_id: str) -> dict[str, Any]:
    from dashboards.common import to_json
    from dashboards.incident import incident_dashboard

    suspects = [s.rank for s in report.cross_rank.first_cause_suspects]
    for r in [g.rank for g in report.gap_findings] + [r for st in report.stall_findings
                                                     for r in st.ranks]:
        if r not in suspects:
            suspects.append(r)
    start = end = None
    if report.window_start_ns is not None and report.window_end_ns is not None:
        start = datetime.fromtimestamp(report.window_start_ns / 1e9, UTC)
        end = datetime.fromtimestamp(report.window_end_ns / 1e9, UTC)
    doc: dict[str, Any] = json.loads(to_json(incident_dashboard(job_id, suspects, start=start,
                                                                end=end)))
    return doc


def write_sinks(report: Report, timeline: Timeline, args: argparse.Namespace, *,
                run_points: Callable[[bool], list[findings_series.SeriesPoint]] | None = None,
                deadline: http.Deadline | None = None, out: TextIO | None = None
                ) -> SinkOutcome:
    """Write every sink asked for; a failing sink never stops the others.

    The series sinks (remote write, Pushgateway) go last: ``run_points(success)`` gives the
    run-level series, and a run whose other sinks failed is recorded as a failure there, never
    as a success."""
    out = out or sys.stdout
    dry = bool(getattr(args, "dry_run", False))
    job_id = args.job_id or report.job_id or "unknown"
    result = SinkOutcome()
    settings = http.settings_from_args(args)

    def attempt(name: str, fn: Callable[[], str]) -> None:
        try:
            detail = fn()
            result.status[name] = "dry-run" if dry else "ok"
            if detail:
                result.details[name] = detail
        except (http.EndpointError, http.ConfigError, OSError, ValueError) as e:
            result.status[name] = str(e)
            print(f"stormotel analyze: {name} sink failed: {e}", file=sys.stderr)

    points: list[findings_series.SeriesPoint] = []

    if args.grafana_url:
        def do_grafana() -> str:
            anns = grafana.annotations_for(report, job_id)
            if dry:
                res = grafana.sync_annotations(None, anns, job_id,
                                               dashboard_uid=args.grafana_dashboard_uid,
                                               dry_run=True)
                print(f"# would sync {len(anns)} annotation(s) to {args.grafana_url}", file=out)
                for body in res.planned:
                    print(json.dumps(body, sort_keys=True), file=out)
                return f"planned={len(anns)}"
            with http.make_client(settings, auth=_grafana_auth(args)) as client:
                api = grafana.GrafanaAPI(args.grafana_url, client, settings, deadline)
                res = grafana.sync_annotations(api, anns, job_id,
                                               dashboard_uid=args.grafana_dashboard_uid)
                detail = str(res)
                if args.grafana_dashboard:
                    saved = grafana.save_dashboard_if_changed(
                        api, _incident_board(report, job_id),
                        f"stormotel analyze {job_id} {report.window_end_ns}",
                        folder_uid=args.grafana_folder)
                    detail += f" dashboard={'saved' if saved else 'unchanged'}"
                return detail
        attempt("grafana", do_grafana)
    if args.grafana_dashboard and dry:
        print(f"# would save incident dashboard "
              f"{_incident_board(report, job_id)['uid']} to {args.grafana_url}", file=out)
    if args.incident_dashboard:
        def do_board() -> str:
            board = _incident_board(report, job_id)
            if dry:
                print(f"# would write incident dashboard {board['uid']} to "
                      f"{args.incident_dashboard}", file=out)
                return ""
            _atomic_write(args.incident_dashboard, json.dumps(board, indent=2, sort_keys=True))
            return str(args.incident_dashboard)
        attempt("incident_dashboard", do_board)
    if args.perfetto:
        def do_trace() -> str:
            if dry:
                n = len(perfetto.trace_events(timeline, report))
                print(f"# would write {n} trace event(s) to {args.perfetto}", file=out)
                return ""
            return f"events={perfetto.write_trace(args.perfetto, timeline, report)}"
        attempt("perfetto", do_trace)
    if args.remote_write or args.pushgateway:
        # File/log analyses may have no time window: stamp their findings with "now".
        ts = None if report.window_end_ns is not None else time.time_ns() // 1_000_000
        points = findings_series.findings_samples(report, job_id=job_id, timestamp_ms=ts) \
            + (run_points(not result.failed) if run_points else [])
    for i, url in enumerate(args.remote_write):
        def do_rw(url: str = url) -> str:
            if dry:
                print(f"# would remote-write {len(points)} sample(s) to {url}", file=out)
                print(findings_series.render_text(points), file=out)
                return ""
            with http.make_client(settings) as client:
                return _remote_write_checked(client, url, points, settings, deadline,
                                             args.prometheus)
        attempt("remote_write" if len(args.remote_write) == 1 else f"remote_write{i + 1}",
                do_rw)
    if args.pushgateway:
        def do_push() -> str:
            if dry:
                print(f"# would push {len(points)} series to {args.pushgateway} "
                      f"(job={pushgateway.PUSH_JOB}, job_id={job_id})", file=out)
                return ""
            with http.make_client(settings) as client:
                n = pushgateway.push(client, args.pushgateway, job_id, points,
                                     settings=settings, deadline=deadline)
            return f"series={n}"
        attempt("pushgateway", do_push)
    return result


_ALREADY_STORED = re.compile(r"duplicate sample|out of order|out of bounds|too old",
                             re.IGNORECASE)


def _remote_write_checked(client: Any, url: str, points: list[findings_series.SeriesPoint],
                          settings: http.HttpSettings, deadline: http.Deadline | None,
                          query_urls: list[str]) -> str:
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
        result = resp.json().get("data", {}).get("result", [])
        held = any(abs(float(r["value"][1]) * 1000 - p.timestamp_ms) < 1 for r in result)
        missing += not held
    return missing


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _atomic_write(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n")
    os.replace(tmp, path)
