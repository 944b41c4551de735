"""The analyzer as a scheduled job: read a window from the TSDB, analyse, write findings back.

``stormotel analyze --prometheus URL --job-id ID --since 1h [sinks…]`` is meant for cron (or a
Kubernetes CronJob), so this module owns what makes that safe:

* **windows without gaps or duplicates** — with ``--state-file`` each run starts where the last
  successful one ended (half-open windows ``[start, end)``), ends ``--settle`` before now so late
  samples are not missed, and catches up at most ``--max-window`` per run;
* **bounded run time** — ``--timeout`` is one budget for every request of the run;
* **one summary line per run** (logfmt) on stderr, and distinct exit codes: 0 healthy,
  1 findings, 3 source failure, 4 sink failure — in that precedence. A partial read (one of
  several endpoints down, some ranks' queries failed) is not a failure (docs/exit-codes.md): what
  was read is analysed, the warnings name the endpoint and ranks, the summary says
  ``partial=true`` and the missing ranks are reported;
* **idempotent sinks** — annotations keyed, finding series stamped with the window end,
  Pushgateway groups replaced; ``--dry-run`` prints what would be written and changes nothing.

:func:`add_job_arguments`, :func:`build_timeline_from_args`, :func:`write_sinks` and
:func:`run_job` are what ``analyzers/cli.py`` calls; each also works on its own.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from analyzers import http
from analyzers.report import Report
from analyzers.sinks import findings_series, grafana, perfetto, pushgateway, remote_write
from analyzers.sources.dcgm import DcgmOptions, GpuRankMap, MapError, load_dcgm
from analyzers.sources.prometheus import LoadOutcome, QueryWindow, SourceFailure, load_prometheus
from analyzers.sources.rank_info import with_rank_info
from analyzers.timeline import Timeline
from stormotel import exitcodes

STATE_SCHEMA = "stormotel.analyzer-state/v1"
SUMMARY_PREFIX = "stormotel-analyze"
#: Outcome label values (AN_RUNS); schema.AN_OUTCOMES_SUCCESS lists the successful ones.
OUTCOME_OK = "ok"
OUTCOME_FINDINGS = "findings"
OUTCOME_SOURCE_FAILURE = "source_failure"
OUTCOME_SINK_FAILURE = "sink_failure"

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


# --- argument parsing ------------------------------------------------------------------------

def parse_duration(text: str) -> float:
    """``90s``, ``15m``, ``1h30m``, ``2d`` → seconds (Prometheus duration syntax)."""
    s = text.strip()
    pos, total = 0, 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if s == "0":
        return 0.0
    if pos != len(s) or not s:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration (use e.g. 90s, 15m, 1h30m, 2d)")
    return total


def positive_duration(text: str) -> float:
    seconds = parse_duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be longer than zero")
    return seconds


def parse_time(text: str) -> int:
    """RFC 3339 (``2026-11-21T05:00:00Z``) or unix seconds → ns since the epoch."""
    s = text.strip()
    try:
        return round(float(s) * 1e9)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time (use RFC 3339 like 2026-11-21T05:00:00Z, or unix "
            "seconds)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return round(dt.timestamp() * 1e9)


def add_job_arguments(parser: argparse.ArgumentParser, *, include_job_id: bool = True) -> None:
    """Every flag of the TSDB job: source, window, sinks, TLS/auth, cron safety.

    ``include_job_id=False`` when the host parser already defines ``--job-id``.
    """
    src = parser.add_argument_group("TSDB source (Prometheus-compatible HTTP API)")
    src.add_argument("--prometheus", action="append", default=[], metavar="URL",
                     help="query API base URL (Prometheus, VictoriaMetrics, Thanos, Mimir…); "
                          "repeat for several clusters/regions, merged into one timeline")
    if include_job_id:
        src.add_argument("--job-id", metavar="ID",
                         help="the training job to analyse (job_id label)")
    src.add_argument("--step", type=positive_duration, metavar="DURATION",
                     help="query step (default: the stored samples' own spacing, coarsened so "
                          "a series stays under 200,000 points)")
    src.add_argument("--concurrency", type=int, default=4, metavar="N",
                     help="queries in flight at once (default 4)")
    dcgm = parser.add_argument_group("dcgm-exporter mode (device memory only)")
    dcgm.add_argument("--dcgm", action="store_true",
                      help="read DCGM_FI_DEV_FB_USED/FREE/RESERVED instead of stormotel series;"
                           " GPUs map to ranks by the trackers' stormotel_rank_info series "
                           "(GPU UUID) unless --gpu-rank-map or --rank-label is given")
    dcgm.add_argument("--gpu-rank-map", type=Path, metavar="FILE",
                      help="CSV (header: rank plus any of uuid,hostname,gpu,pod,namespace) or "
                           "JSON list mapping GPUs to ranks")
    dcgm.add_argument("--rank-label", metavar="LABEL",
                      help="dcgm series label whose value is, or ends in, the rank "
                           "(e.g. exported_pod=trainer-3)")
    dcgm.add_argument("--dcgm-selector", default="", metavar="MATCHERS",
                      help='extra PromQL matchers for the job\'s GPUs, e.g. namespace="train"')
    win = parser.add_argument_group("window and cron safety")
    win.add_argument("--since", type=positive_duration, metavar="DURATION",
                     help="analyse the last DURATION (default 1h; with --state-file only the "
                          "first run uses it)")
    win.add_argument("--start", type=parse_time, metavar="TIME",
                     help="window start (RFC 3339 or unix seconds); with --end, overrides "
                          "--since and the state file")
    win.add_argument("--end", type=parse_time, metavar="TIME", help="window end (default now)")
    win.add_argument("--state-file", type=Path, metavar="FILE",
                     help="records the last analysed window end per job, so consecutive runs "
                          "cover time without gaps or overlaps (locked while a run is active)")
    win.add_argument("--settle", type=parse_duration, default=60.0, metavar="DURATION",
                     help="leave this much of the most recent time for the next run, so late "
                          "scrapes/remote writes are not missed (default 60s)")
    win.add_argument("--max-window", type=positive_duration, default=86400.0, metavar="DURATION",
                     help="analyse at most this much per run when catching up (default 1d)")
    win.add_argument("--timeout", type=positive_duration, default=300.0, metavar="DURATION",
                     help="budget for the whole run: every request is cut short to fit "
                          "(default 5m)")
    win.add_argument("--dry-run", action="store_true",
                     help="print what would be written (annotations, series, dashboard, trace) "
                          "and change nothing, state file included")
    out = parser.add_argument_group("sinks: where findings are written")
    out.add_argument("--grafana-url", metavar="URL",
                     help="Grafana base URL: one region annotation per finding (idempotent)")
    out.add_argument("--grafana-token-file", type=Path, metavar="FILE",
                     help=f"Grafana service-account token (else ${grafana.ENV_GRAFANA_TOKEN}); "
                          "never logged")
    out.add_argument("--grafana-dashboard-uid", metavar="UID",
                     help="attach annotations to this dashboard (default: organisation-wide)")
    out.add_argument("--grafana-dashboard", action="store_true",
                     help="create/update the job's incident dashboard through Grafana's API")
    out.add_argument("--incident-dashboard", type=Path, metavar="FILE",
                     help="write the job's incident dashboard JSON to FILE")
    out.add_argument("--remote-write", action="append", default=[], metavar="URL",
                     help="Prometheus remote-write URL for the findings series (e.g. "
                          "http://prom:9090/api/v1/write, http://vm:8428/api/v1/write); "
                          "repeatable")
    out.add_argument("--pushgateway", metavar="URL",
                     help="Pushgateway base URL for the findings series (group job="
                          f"{pushgateway.PUSH_JOB}, job_id=ID, replaced each run)")
    out.add_argument("--perfetto", type=Path, metavar="FILE",
                     help="write the merged multi-rank timeline as Chrome trace JSON "
                          "(opens in ui.perfetto.dev)")
    http.add_http_arguments(parser)


def wants_tsdb(args: argparse.Namespace) -> bool:
    """True when the run reads from a TSDB (``--prometheus`` given)."""
    return bool(getattr(args, "prometheus", None))


def wants_sinks(args: argparse.Namespace) -> bool:
    """True when any write-back sink flag was given (also usable with file sources)."""
    return bool(getattr(args, "grafana_url", None) or getattr(args, "remote_write", None)
                or getattr(args, "pushgateway", None) or getattr(args, "perfetto", None)
                or getattr(args, "incident_dashboard", None))


def validate_args(args: argparse.Namespace) -> str | None:
    """A one-line usage error, or None."""
    if wants_tsdb(args):
        if not args.job_id and not args.dcgm:
            return "--prometheus needs --job-id"
        if args.dcgm and args.gpu_rank_map is not None and args.rank_label is not None:
            return "--dcgm takes --gpu-rank-map FILE or --rank-label LABEL, not both"
        if args.dcgm and not args.job_id:
            return "--dcgm needs --job-id (the name findings are reported under)"
        if args.end is not None and args.start is None:
            return "--end needs --start"
        if args.start is not None and args.since is not None:
            return "give --since or --start/--end, not both"
    elif args.dcgm or args.state_file:
        return "--dcgm and --state-file need --prometheus URL"
    if (args.grafana_dashboard or args.grafana_dashboard_uid) and not args.grafana_url:
        return "--grafana-dashboard/--grafana-dashboard-uid need --grafana-url"
    if args.concurrency < 1:
        return "--concurrency must be at least 1"
    return None


# --- window and state ------------------------------------------------------------------------

@dataclass
class Window:
    start_ns: int
    end_ns: int
    #: True when the state file / --since chose it (then the state advances after success).
    tracked: bool
    note: str = ""

    def iso(self) -> str:
        return f"{_iso(self.start_ns)}/{_iso(self.end_ns)}"


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StateError(Exception):
    pass


class StateFile:
    """``{"schema", "jobs": {job_id: {"last_end_ns", "runs": {outcome: n}, "updated"}}}``.

    Held under an exclusive ``flock`` for the whole run so overlapping cron runs cannot analyse
    the same window twice; written atomically (temp file + rename).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.doc: dict[str, Any] = {"schema": STATE_SCHEMA, "jobs": {}}
        self._lock: TextIO | None = None

    @contextlib.contextmanager
    def locked(self) -> Iterator[StateFile]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(self.path.with_name(self.path.name + ".lock"), "a+")  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise StateError(f"state file {self.path} is locked by another run") from None
        try:
            self._load()
            yield self
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()

    def read(self) -> StateFile:
        """Load without locking (``--dry-run`` only looks)."""
        self._load()
        return self

    def _load(self) -> None:
        if not self.path.exists():
            return
        try:
            doc = json.loads(self.path.read_text() or "{}")
        except json.JSONDecodeError as e:
            raise StateError(f"state file {self.path} line {e.lineno}: not valid JSON "
                             f"({e.msg}); fix or delete it") from None
        except OSError as e:
            raise StateError(f"cannot read state file {self.path}: {e.strerror}") from None
        if not isinstance(doc, dict) or doc.get("schema") != STATE_SCHEMA \
                or not isinstance(doc.get("jobs"), dict):
            raise StateError(f"state file {self.path} is not a {STATE_SCHEMA} file")
        self.doc = doc

    def job(self, job_id: str) -> dict[str, Any]:
        return self.doc["jobs"].setdefault(job_id, {"runs": {}})

    def last_end_ns(self, job_id: str) -> int | None:
        v = self.doc["jobs"].get(job_id, {}).get("last_end_ns")
        return int(v) if isinstance(v, int) else None

    def save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.doc, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.path)


def resolve_window(args: argparse.Namespace, now_ns: int, state: StateFile | None,
                   job_id: str) -> Window | None:
    """The half-open window ``[start, end)`` of this run; None when there is nothing new."""
    if args.start is not None:
        end = args.end if args.end is not None else now_ns
        if end <= args.start:
            raise StateError("--end must be after --start")
        return Window(args.start, end, tracked=False)
    end = now_ns - int(args.settle * 1e9)
    last = state.last_end_ns(job_id) if state else None
    since = args.since if args.since is not None else 3600.0
    start = last if last is not None else end - int(since * 1e9)
    if end <= start:
        return None
    note = ""
    max_ns = int(args.max_window * 1e9)
    if end - start > max_ns:
        end = start + max_ns
        note = f"catching up: analysed {args.max_window:g}s of a longer backlog"
    return Window(start, end, tracked=True, note=note)


# --- source ----------------------------------------------------------------------------------

def build_timeline_from_args(args: argparse.Namespace, window: Window,
                             deadline: http.Deadline | None = None,
                             progress: Callable[[str], None] | None = None
                             ) -> tuple[Timeline, LoadOutcome]:
    """Read the window from every ``--prometheus`` endpoint (stormotel or dcgm series).

    Raises SourceFailure (nothing readable), http.ConfigError / MapError (user-fixable input).
    """
    settings = http.settings_from_args(args)
    qw = QueryWindow(job_id=args.job_id, start_ns=window.start_ns,
                     end_ns=window.end_ns - 1_000_000, step_s=args.step)
    with http.make_client(settings) as client:
        if args.dcgm:
            options = DcgmOptions(
                rank_map=GpuRankMap.load(args.gpu_rank_map) if args.gpu_rank_map else None,
                rank_label=args.rank_label, selector=args.dcgm_selector)
            timeline, outcome = load_dcgm(args.prometheus, qw, options, settings=settings,
                                          client=client, deadline=deadline,
                                          concurrency=args.concurrency, progress=progress)
        else:
            timeline, outcome = load_prometheus(args.prometheus, qw, settings=settings,
                                                client=client, deadline=deadline,
                                                concurrency=args.concurrency,
                                                progress=progress)
            with_rank_info(timeline, args.prometheus, qw, settings, client, deadline)
    if not timeline.ranks:
        raise SourceFailure(f"no telemetry for job_id={args.job_id!r} in {window.iso()} at "
                            f"{', '.join(outcome.endpoints_ok)}")
    if window.note:
        timeline.notes.append(window.note)
    return timeline, outcome


# --- sinks -----------------------------------------------------------------------------------

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
                run_points: list[findings_series.SeriesPoint] | None = None,
                deadline: http.Deadline | None = None, out: TextIO | None = None
                ) -> SinkOutcome:
    """Write every sink asked for; a failing sink never stops the others."""
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
    if args.remote_write or args.pushgateway:
        # File/log analyses may have no time window: stamp their findings with "now".
        ts = None if report.window_end_ns is not None else time.time_ns() // 1_000_000
        points = findings_series.findings_samples(report, job_id=job_id, timestamp_ms=ts) \
            + (run_points or [])

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
                        f"stormotel analyze {job_id} {report.window_end_ns}")
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
    for i, url in enumerate(args.remote_write):
        def do_rw(url: str = url) -> str:
            if dry:
                print(f"# would remote-write {len(points)} sample(s) to {url}", file=out)
                print(findings_series.render_text(points), file=out)
                return ""
            with http.make_client(settings) as client:
                return _remote_write_tolerant(client, url, points, settings, deadline)
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
    if args.perfetto:
        def do_trace() -> str:
            if dry:
                n = len(perfetto.trace_events(timeline, report))
                print(f"# would write {n} trace event(s) to {args.perfetto}", file=out)
                return ""
            return f"events={perfetto.write_trace(args.perfetto, timeline, report)}"
        attempt("perfetto", do_trace)
    return result


_ALREADY_STORED = re.compile(r"duplicate sample|out of order|out of bounds|too old",
                             re.IGNORECASE)


def _remote_write_tolerant(client: Any, url: str, points: list[findings_series.SeriesPoint],
                           settings: http.HttpSettings, deadline: http.Deadline | None) -> str:
    """A re-run may re-send samples the TSDB already holds; Prometheus answers 400 for those
    while storing the rest. That is the idempotence we want, not a failure."""
    try:
        n = remote_write.write(client, url, points, settings=settings, deadline=deadline)
    except http.EndpointError as e:
        if e.status == 400 and _ALREADY_STORED.search(e.body):
            return f"samples={len(points)} (some already stored, kept)"
        raise
    return f"samples={n}"


def _atomic_write(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n")
    os.replace(tmp, path)


# --- the whole run ---------------------------------------------------------------------------

def _logfmt(fields: dict[str, object]) -> str:
    parts = []
    for k, v in fields.items():
        s = str(v).lower() if isinstance(v, bool) else str(v)
        if not s or re.search(r'[\s"=]', s):
            s = '"' + s.replace('"', '\\"') + '"'
        parts.append(f"{k}={s}")
    return " ".join(parts)


def _count_findings(report: Report) -> int:
    return (len(report.cross_rank.first_cause_suspects) + len(report.gap_findings)
            + len(report.collective_attributions) + len(report.stall_findings))


def run_job(args: argparse.Namespace, analyze_fn: Callable[[Timeline], Report], *,
            emit_report: Callable[[Report], None] | None = None,
            err: TextIO | None = None, out: TextIO | None = None,
            now_ns: int | None = None) -> int:
    """One cron run: window → TSDB → analysis → report → sinks → state, one summary line.

    ``analyze_fn`` is the analyzer facade with the user's options bound; ``emit_report`` writes
    the JSON/text report the way the rest of ``stormotel analyze`` does.
    """
    err = err or sys.stderr
    started = time.monotonic()
    now_ns = now_ns if now_ns is not None else time.time_ns()
    deadline = http.Deadline(args.timeout)
    problem = validate_args(args)
    if problem:
        print(f"stormotel analyze: {problem}", file=err)
        return exitcodes.USAGE
    job_id = args.job_id
    summary: dict[str, object] = {"job_id": job_id}

    def finish(code: int, outcome: str, **more: object) -> int:
        summary.update(more)
        summary["outcome"] = outcome
        summary["duration_s"] = round(time.monotonic() - started, 3)
        summary["exit"] = code
        print(f"{SUMMARY_PREFIX} {_logfmt(summary)}", file=err, flush=True)
        return code

    def progress(msg: str) -> None:
        if not getattr(args, "quiet", False):
            print(f"stormotel analyze: {msg}", file=err, flush=True)

    state = StateFile(args.state_file) if args.state_file and not args.dry_run else None
    try:
        with state.locked() if state else contextlib.nullcontext():
            if args.dry_run and args.state_file:  # read the state, never lock or write it
                window = resolve_window(args, now_ns, StateFile(args.state_file).read(),
                                        job_id)
            else:
                window = resolve_window(args, now_ns, state, job_id)
            if window is None:
                return finish(exitcodes.OK, OUTCOME_OK, note="no new time since the last run")
            summary["window"] = window.iso()
            try:
                timeline, src = build_timeline_from_args(args, window, deadline, progress)
            except SourceFailure as e:
                print(f"stormotel analyze: {e}", file=err)
                _count_run(state, job_id, OUTCOME_SOURCE_FAILURE)
                _save(state)
                return finish(exitcodes.SOURCE_FAILURE, OUTCOME_SOURCE_FAILURE)
            report = analyze_fn(timeline)
            _describe_run(report, timeline, src, window, job_id)
            _warn_partial(src, err)
            outcome = OUTCOME_FINDINGS if report.has_findings() else OUTCOME_OK
            runs = _count_run(state, job_id, outcome)
            run_points = findings_series.run_samples(
                job_id=job_id, duration_s=time.monotonic() - started,
                now_ms=now_ns // 1_000_000, runs_by_outcome=runs,
                success=True)
            sinks = write_sinks(report, timeline, args, run_points=run_points,
                                deadline=deadline, out=out)
            if emit_report is not None:
                try:
                    emit_report(report)
                except OSError as e:
                    sinks.status["report"] = str(e)
                    print(f"stormotel analyze: cannot write the report: {e}", file=err)
            for name, detail in sinks.details.items():
                progress(f"{name}: {detail}")
            summary.update(ranks=f"{len(timeline.ranks)}/{timeline.world_size or '?'}",
                           samples=timeline.total_samples(), findings=_count_findings(report),
                           first_cause=",".join(str(s.rank) for s in
                                                report.cross_rank.first_cause_suspects) or "-",
                           partial=src.partial, sinks=sinks.summary(),
                           step_s=src.step_s)
            if sinks.failed:
                _count_run(state, job_id, OUTCOME_SINK_FAILURE, replace=outcome)
                _save(state)
                return finish(exitcodes.SINK_FAILURE, OUTCOME_SINK_FAILURE)
            if state is not None and window.tracked:
                state.job(job_id)["last_end_ns"] = window.end_ns
                state.job(job_id)["updated"] = _iso(now_ns)
            _save(state)
            if report.has_findings():
                return finish(exitcodes.FINDINGS, OUTCOME_FINDINGS)
            return finish(exitcodes.OK, OUTCOME_OK)
    except (StateError, http.ConfigError, MapError) as e:
        print(f"stormotel analyze: {e}", file=err)
        return finish(exitcodes.USAGE, "usage_error")


def _describe_run(report: Report, timeline: Timeline, src: LoadOutcome, window: Window,
                  job_id: str) -> None:
    """What the report needs to say about the job run: window, endpoints, skipped analyses."""
    report.job_id = report.job_id or job_id
    report.window_start_ns, report.window_end_ns = window.start_ns, window.end_ns
    report.extra["window"] = {"start_ns": window.start_ns, "end_ns": window.end_ns,
                              "tracked": window.tracked}
    report.extra["source"] = timeline.meta.get("prometheus") or {
        "endpoints_ok": src.endpoints_ok, "endpoints_failed": src.endpoints_failed,
        "step_s": src.step_s}
    if "skipped_analyses" in timeline.meta:
        report.extra["skipped_analyses"] = timeline.meta["skipped_analyses"]
    for note in timeline.notes:
        if note not in report.notes:
            report.notes.append(note)


def _warn_partial(src: LoadOutcome, err: TextIO) -> None:
    for url, ranks in src.ranks_failed.items():
        print(f"stormotel analyze: warning: {url}: ranks {sorted(ranks)} only partly read",
              file=err)
    for url, why in src.endpoints_failed.items():
        print(f"stormotel analyze: warning: endpoint {url} failed: {why}", file=err)


def _count_run(state: StateFile | None, job_id: str, outcome: str,
               replace: str | None = None) -> dict[str, int]:
    """Bump the per-outcome run counter (AN_RUNS, kept in the state file); returns the
    counters, or an empty dict without a state file (a counter that restarts every run would
    mislead ``increase()``)."""
    if state is None:
        return {}
    runs: dict[str, int] = state.job(job_id).setdefault("runs", {})
    if replace and runs.get(replace):
        runs[replace] -= 1
    runs[outcome] = runs.get(outcome, 0) + 1
    return dict(runs)


def _save(state: StateFile | None) -> None:
    if state is not None:
        state.save()
