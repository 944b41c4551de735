"""One job's scheduled run: read a window from the TSDB, analyse, write findings back.

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

:func:`run_job` is what ``analyzers/cli.py`` calls, with the run's
:class:`~analyzers.options.JobOptions`; :func:`read_window` reads one window on its own. The flags
live in :mod:`analyzers.scheduled.options` (typed by :mod:`analyzers.cli_options`), the window and
state file in :mod:`analyzers.scheduled.window` and :mod:`analyzers.scheduled.state`, writing the
sinks in :mod:`analyzers.sinks.dispatch`; the run over every discovered job in
:mod:`analyzers.scheduled.run`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import sys
import time
from collections.abc import Callable
from typing import TextIO

from stormotel.analyzers import http
from stormotel.analyzers.options import JobOptions
from stormotel.analyzers.report import Report
from stormotel.analyzers.scheduled.options import (
    add_job_arguments,
    parse_duration,
    parse_time,
    positive_duration,
)
from stormotel.analyzers.scheduled.state import (
    STATE_SCHEMA,
    StateError,
    StateFile,
    _count_run,
    _save,
)
from stormotel.analyzers.scheduled.window import Window, _iso, resolve_window
from stormotel.analyzers.sinks import findings_series, pushgateway, remote_write
from stormotel.analyzers.sinks.dispatch import SinkOutcome, write_sinks
from stormotel.analyzers.sources.dcgm import DcgmOptions, GpuRankMap, MapError, load_dcgm
from stormotel.analyzers.sources.prometheus import (
    LoadOutcome,
    QueryWindow,
    load_prometheus,
)
from stormotel.analyzers.sources.rank_info import with_rank_info
from stormotel.analyzers.timeline import Timeline

from stormotel import exitcodes
from stormotel.errors import NoTelemetryError, SourceFailureError
from stormotel.textsafe import one_line, printable, redact

#: Names other modules and tests reach through this module (moved to their own modules).
__all__ = ["STATE_SCHEMA", "SinkOutcome", "StateError", "StateFile", "Window",
           "add_job_arguments", "parse_duration", "parse_time", "positive_duration",
           "read_window", "resolve_window", "run_job", "write_sinks"]

SUMMARY_PREFIX = "stormotel-analyze"
#: Outcome label values (AN_RUNS); schema.AN_OUTCOMES_SUCCESS lists the successful ones.
OUTCOME_OK = "ok"
OUTCOME_FINDINGS = "findings"
OUTCOME_SOURCE_FAILURE = "source_failure"
OUTCOME_SINK_FAILURE = "sink_failure"


# --- source ----------------------------------------------------------------------------------

def read_window(job: JobOptions, job_id: str, window: Window,
                deadline: http.Deadline | None = None,
                progress: Callable[[str], None] | None = None) -> tuple[Timeline, LoadOutcome]:
    """Read the window from every ``--prometheus`` endpoint (stormotel or dcgm series).

    Raises SourceFailureError (nothing readable), http.ConfigError / MapError (user-fixable input).
    """
    settings, tsdb = job.http, job.tsdb
    qw = QueryWindow(job_id=job_id, start_ns=window.start_ns,
                     end_ns=window.end_ns - 1_000_000, step_s=tsdb.step)
    with http.make_client(settings) as client:
        if tsdb.dcgm:
            options = DcgmOptions(
                rank_map=GpuRankMap.load(tsdb.gpu_rank_map) if tsdb.gpu_rank_map else None,
                rank_label=tsdb.rank_label, selector=tsdb.dcgm_selector)
            timeline, outcome = load_dcgm(tsdb.prometheus, qw, options, settings=settings,
                                          client=client, deadline=deadline,
                                          concurrency=tsdb.concurrency, progress=progress)
            timeline.notes.append(
                f"dcgm-exporter collects every {tsdb.dcgm_collect_interval_s:g} s "
                "(--dcgm-collect-interval): a scraped value may be that old, so no lead "
                "shorter than that is claimed")
        else:
            timeline, outcome = load_prometheus(tsdb.prometheus, qw, settings=settings,
                                                client=client, deadline=deadline,
                                                concurrency=tsdb.concurrency,
                                                progress=progress)
            with_rank_info(timeline, list(tsdb.prometheus), qw, settings, client, deadline)
    if not timeline.ranks:
        raise NoTelemetryError(f"no telemetry for job_id={job_id!r} in {window.iso()} at "
                                 f"{', '.join(outcome.endpoints_ok)}")
    if window.note:
        timeline.notes.append(window.note)
    return timeline, outcome


# --- the whole run ---------------------------------------------------------------------------

def _logfmt(fields: dict[str, object]) -> str:
    """``key=value`` pairs on one line; values from the input (a job id with a newline, quotes
    or escape sequences) are escaped so they cannot end the line or forge another field."""
    parts = []
    for k, v in fields.items():
        s = str(v).lower() if isinstance(v, bool) else str(v)
        quote = not s or re.search(r'[\s"=\\]', s) or not s.isprintable()
        s = printable(redact(s.replace("\\", "\\\\").replace('"', '\\"')), 500)
        parts.append(f'{k}="{s}"' if quote else f"{k}={s}")
    return " ".join(parts)


def _count_findings(report: Report) -> int:
    """Findings the run line counts (OOM forensics describe ranks the other families name)."""
    return sum(f.family != "oom" for f in report.findings())


def run_job(job: JobOptions, analyze_fn: Callable[[Timeline], Report], *,
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
    deadline = http.Deadline(job.schedule.timeout)
    job_id = job.job_id
    if "{job}" in f"{job.sinks.perfetto}{job.sinks.incident_dashboard}":
        from stormotel.analyzers.scheduled.outputs import job_sinks

        job = dataclasses.replace(job, sinks=job_sinks(job.sinks, job_id, several=False))
    if job_id is None:  # the options' check and run_scheduled give every run its job id
        raise ValueError("run_job needs a job id")
    dry_run, state_file = job.sinks.dry_run, job.schedule.state_file
    summary: dict[str, object] = {"job_id": job_id}

    def finish(code: int, outcome: str, **more: object) -> int:
        summary.update(more)
        summary["outcome"] = outcome
        summary["duration_s"] = round(time.monotonic() - started, 3)
        summary["exit"] = code
        print(f"{SUMMARY_PREFIX} {_logfmt(summary)}", file=err, flush=True)
        return code

    def progress(msg: str) -> None:
        if not job.quiet:
            print(f"stormotel analyze: {one_line(msg, 2000)}", file=err, flush=True)

    state = StateFile(state_file) if state_file and not dry_run else None
    try:
        with state.locked() if state else contextlib.nullcontext():
            written = _written_end(job, state, job_id, now_ns, deadline)
            if dry_run and state_file:  # read the state, never lock or write it
                window = resolve_window(job.schedule, now_ns, StateFile(state_file).read(),
                                        job_id, written, job.tsdb.step)
            else:
                window = resolve_window(job.schedule, now_ns, state, job_id, written,
                                        job.tsdb.step)
            if window is None:
                return finish(exitcodes.OK, OUTCOME_OK, note="no new time since the last run")
            if window.deferred:
                return finish(exitcodes.OK, OUTCOME_OK, window=window.iso(), note=window.note)
            summary["window"] = window.iso()
            try:
                timeline, src = read_window(job, job_id, window, deadline, progress)
            except SourceFailureError as e:
                if job.schedule.scheduled and isinstance(e, NoTelemetryError) and (
                        written is not None or (state and state.last_end_ns(job_id))):
                    # The job ended: its final window was analysed by an earlier run.
                    if state is not None:
                        state.job(job_id)["finished"] = _iso(now_ns)
                        _save(state)
                    return finish(exitcodes.OK, OUTCOME_OK, window=window.iso(),
                                  note="job ended; its final window was analysed before")
                print(f"stormotel analyze: error: {one_line(e)}", file=err)
                runs = _count_run(state, job_id, OUTCOME_SOURCE_FAILURE)
                _save(state)
                _record_failure(job, job_id, runs, started, now_ns, deadline, err)
                return finish(exitcodes.SOURCE_FAILURE, OUTCOME_SOURCE_FAILURE)
            report = analyze_fn(timeline)
            _describe_run(report, timeline, src, window, job_id)
            _warn_partial(src, err)
            outcome = OUTCOME_FINDINGS if report.has_findings() else OUTCOME_OK
            runs = _count_run(state, job_id, outcome)

            # The report first: a run that cannot write it is a sink failure, and the series
            # sinks below must record it as one (never as a success).
            report_error = ""
            if emit_report is not None:
                try:
                    emit_report(report)
                except OSError as e:
                    report_error = str(e)
                    print(f"stormotel analyze: cannot write the report: {one_line(e)}",
                          file=err)

            def run_points(success: bool) -> list[findings_series.SeriesPoint]:
                success = success and not report_error
                counts = dict(runs)
                if not success and counts:  # this run is a sink failure, not a success
                    counts[outcome] -= 1
                    counts[OUTCOME_SINK_FAILURE] = counts.get(OUTCOME_SINK_FAILURE, 0) + 1
                return findings_series.run_samples(
                    job_id=job_id, duration_s=time.monotonic() - started,
                    now_ms=now_ns // 1_000_000, runs_by_outcome=counts, success=success)

            sinks = write_sinks(report, timeline, job, run_points=run_points,
                                deadline=deadline, out=out)
            if report_error:
                sinks.status["report"] = report_error
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
                code = exitcodes.OK if job.schedule.scheduled else exitcodes.FINDINGS
                return finish(code, OUTCOME_FINDINGS)
            return finish(exitcodes.OK, OUTCOME_OK)
    except (StateError, http.ConfigError, MapError) as e:
        print(f"stormotel analyze: error: {one_line(e)}", file=err)
        return finish(exitcodes.USAGE, "usage_error")


def _written_end(job: JobOptions, state: StateFile | None, job_id: str, now_ns: int,
                 deadline: http.Deadline) -> int | None:
    """A scheduled run without state for the job reads the previous run's window end back from
    the TSDB it writes to (remote write into the queried TSDB)."""
    if not job.schedule.scheduled or job.schedule.start is not None \
            or not job.sinks.remote_write:
        return None
    if state is not None and state.last_end_ns(job_id) is not None:
        return None
    from stormotel.analyzers.scheduled.tsdb_state import last_window_end_ns

    with http.make_client(job.http) as client:
        return last_window_end_ns(client, job.tsdb.prometheus, job_id, now_ns=now_ns,
                                  lookback_s=int(job.schedule.max_window), settings=job.http,
                                  deadline=deadline)


def _record_failure(job: JobOptions, job_id: str, runs: dict[str, int], started: float,
                    now_ns: int, deadline: http.Deadline, err: TextIO) -> None:
    """A failed run writes its failure (time and run counter) to the series sinks, so
    StormotelAnalyzerFailing sees it; best effort: the run already failed."""
    sinks = job.sinks
    if sinks.dry_run or not (sinks.remote_write or sinks.pushgateway):
        return
    points = findings_series.run_samples(
        job_id=job_id, duration_s=time.monotonic() - started, now_ms=now_ns // 1_000_000,
        runs_by_outcome=runs or {OUTCOME_SOURCE_FAILURE: 1}, success=False)
    settings = job.http
    try:
        with http.make_client(settings) as client:
            for url in sinks.remote_write:
                remote_write.write(client, url, points, settings=settings, deadline=deadline)
            if sinks.pushgateway:
                pushgateway.push(client, sinks.pushgateway, job_id, points, settings=settings,
                                 deadline=deadline)
    except (http.EndpointError, http.ConfigError, OSError) as e:
        print(f"stormotel analyze: could not record the failed run: {e}", file=err)


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
        print(f"stormotel analyze: warning: {one_line(url)}: ranks {sorted(ranks)[:20]} only "
              "partly read",
              file=err)
    for url, why in src.endpoints_failed.items():
        print(f"stormotel analyze: warning: endpoint {one_line(url)} failed: {one_line(why)}",
              file=err)


