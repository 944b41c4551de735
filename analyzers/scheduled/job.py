"""One job's scheduled run: the window, the state file, one summary line and the exit code
around :func:`stormotel.analyzers.run.run_once`.

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

The window and state file are :mod:`stormotel.analyzers.scheduled.window` and
:mod:`stormotel.analyzers.scheduled.state`; the run over every discovered job is
:mod:`stormotel.analyzers.scheduled.run`.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from stormotel.analyzers import http, messages
from stormotel.analyzers.options import AnalyzeOptions, JobOptions
from stormotel.analyzers.report import Report
from stormotel.analyzers.run import RunOptions, RunResult, run_once
from stormotel.analyzers.scheduled.shard import job_state_file
from stormotel.analyzers.scheduled.state import StateError, StateFile, StateLocked
from stormotel.analyzers.scheduled.window import clock_ns, resolve_window
from stormotel.analyzers.sinks import findings_series
from stormotel.analyzers.sinks.findings_series import (
    OUTCOME_FINDINGS,
    OUTCOME_OK,
    OUTCOME_SINK_FAILURE,
    OUTCOME_SOURCE_FAILURE,
    RunSeries,
    outcome_of,
)
from stormotel.analyzers.sources.dcgm import MapError
from stormotel.analyzers.sources.protocol import Progress
from stormotel.analyzers.sources.tsdb import tsdb_source
from stormotel.analyzers.window import Window, iso_time

from stormotel import exitcodes
from stormotel.errors import NoTelemetryError, SourceFailureError
from stormotel.textsafe import one_line, printable, redact

if TYPE_CHECKING:  # the stall machinery (its compiled patterns) loads with stall evidence
    from stormotel.analyzers.stalls.cli_support import StallResult

SUMMARY_PREFIX = "stormotel-analyze"


def logfmt(fields: dict[str, object]) -> str:
    """``key=value`` pairs on one line; values from the input (a job id with a newline, quotes
    or escape sequences) are escaped so they cannot end the line or forge another field."""
    parts = []
    for k, v in fields.items():
        s = str(v).lower() if isinstance(v, bool) else str(v)
        quote = not s or re.search(r'[\s"=\\]', s) or not s.isprintable()
        s = printable(redact(s.replace("\\", "\\\\").replace('"', '\\"')), 500)
        parts.append(f'{k}="{s}"' if quote else f"{k}={s}")
    return " ".join(parts)


@dataclass
class JobRun:
    """How one job's run ended: its exit code, and the report when it got that far."""

    code: int
    report: Report | None = None


@dataclass
class Summary:
    """The run's one logfmt line, filled as the run goes."""

    job_id: str
    err: TextIO
    started: float = field(default_factory=time.monotonic)
    fields: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.fields["job_id"] = self.job_id

    def finish(self, code: int, outcome: str, report: Report | None = None,
               **more: object) -> JobRun:
        self.fields.update(more)
        self.fields["outcome"] = outcome
        self.fields["duration_s"] = round(time.monotonic() - self.started, 3)
        self.fields["exit"] = code
        print(f"{SUMMARY_PREFIX} {logfmt(self.fields)}", file=self.err, flush=True)
        return JobRun(code, report)


@dataclass
class JobContext:
    """One job's run as the steps below share it: the run it asks :func:`run_once` for (its
    window and series are added once known), its clock, its summary line and its state."""

    run: RunOptions
    now_ns: int
    summary: Summary
    state: StateFile | None

    @property
    def job(self) -> JobOptions:
        return self.run.opts.job

    @property
    def job_id(self) -> str:
        return self.summary.job_id

    @property
    def err(self) -> TextIO:
        return self.summary.err

    def save(self) -> None:
        if self.state is not None:
            self.state.save()


def run_job(opts: AnalyzeOptions, *, stalls: StallResult | None = None, several: bool = False,
            err: TextIO | None = None, out: TextIO | None = None,
            now_ns: int | None = None, skip_locked: bool = False) -> JobRun:
    """One cron run of ``opts.job.job_id``: window → :func:`run_once` → state, one summary
    line. ``several``: one of several jobs in this run (outputs at the job's own path).
    ``skip_locked``: a job whose state another run holds is that run's (the scheduled run over
    discovered jobs); otherwise it is an overlapping run, refused (exit 2)."""
    job = opts.job
    if job.job_id is None:  # the options' check and run_scheduled give every run its job id
        raise ValueError("run_job needs a job id")
    summary = Summary(job.job_id, err or sys.stderr)
    state_file = job.schedule.state_file
    state = job_state(state_file, job.job_id) if state_file and not job.sinks.dry_run \
        else None
    run = RunOptions(opts, stalls=stalls, deadline=http.Deadline(job.schedule.timeout),
                     job_id=job.job_id, several=several, out=out, err=summary.err)
    ctx = JobContext(run, now_ns if now_ns is not None else clock_ns(job.schedule), summary,
                     state)
    try:
        with state.locked() if state else contextlib.nullcontext():
            written = written_end_ns(ctx)
            window = job_window(ctx, written)
            if window is None:
                return summary.finish(exitcodes.OK, OUTCOME_OK,
                                      note="no new time since the last run")
            if window.deferred:
                return summary.finish(exitcodes.OK, OUTCOME_OK, window=window.iso(),
                                      note=window.note)
            summary.fields["window"] = window.iso()
            return run_window(ctx, window, written)
    except StateLocked as e:
        if skip_locked:  # another run (another shard, an unsharded run) holds this job now
            return summary.finish(exitcodes.OK, OUTCOME_OK,
                                  note="analysed by another run holding its state")
        messages.error(summary.err, one_line(e))
        return summary.finish(exitcodes.USAGE, "usage_error")
    except (StateError, http.ConfigError, MapError) as e:
        messages.error(summary.err, one_line(e))
        return summary.finish(exitcodes.USAGE, "usage_error")


def job_state(state_file: Path, job_id: str) -> StateFile:
    """The job's own state whatever the mode (scheduled/state.py): ``state.<hash>.json``
    beside ``state_file``, with ``state_file`` itself as the legacy combined file."""
    return StateFile(job_state_file(state_file, job_id), legacy=state_file)


def job_window(ctx: JobContext, written: int | None) -> Window | None:
    """This run's window (a dry run reads the state file, never locks or writes it)."""
    job = ctx.job
    state = ctx.state
    if job.sinks.dry_run and job.schedule.state_file:
        state = job_state(job.schedule.state_file, ctx.job_id).read()
    return resolve_window(job.schedule, ctx.now_ns, state, ctx.job_id, written, job.tsdb.step)


def written_end_ns(ctx: JobContext) -> int | None:
    """A scheduled run without state for the job reads the previous run's window end back from
    the TSDB it writes to (remote write into the queried TSDB)."""
    job = ctx.job
    if not job.schedule.scheduled or job.schedule.start is not None \
            or not job.sinks.remote_write:
        return None
    if ctx.state is not None and ctx.state.last_end_ns(ctx.job_id) is not None:
        return None
    from stormotel.analyzers.sources.written_window import last_window_end_ns

    with http.make_client(job.http) as client:
        return last_window_end_ns(client, job.tsdb.prometheus, ctx.job_id, now_ns=ctx.now_ns,
                                  lookback_s=int(job.schedule.max_window), settings=job.http,
                                  deadline=ctx.run.deadline)


def run_window(ctx: JobContext, window: Window, written: int | None) -> JobRun:
    """The window through :func:`run_once`; the state advances when every sink succeeded."""
    series = RunSeries(ctx.job_id, ctx.summary.started, ctx.now_ns,
                       ctx.state.runs(ctx.job_id) if ctx.state is not None else None)
    run = replace(ctx.run, window=window, series=series)
    try:
        result = run_once(tsdb_source(ctx.job, ctx.job_id), run)
    except SourceFailureError as e:
        return source_failed(ctx, e, window, written)
    return finish_window(ctx, result, window, run.progress)


def finish_window(ctx: JobContext, result: RunResult, window: Window,
                  progress: Progress) -> JobRun:
    """Counters, state and the summary line of a window that was analysed."""
    report, sinks, src = result.report, result.sinks, result.source
    outcome = outcome_of(report)
    if ctx.state is not None:
        ctx.state.count_run(ctx.job_id, outcome)
    for name, detail in sinks.details.items():
        progress.say(f"{name}: {detail}")
    timeline = result.timeline
    ctx.summary.fields.update(
        ranks=f"{len(timeline.ranks)}/{timeline.world_size or '?'}",
        samples=timeline.total_samples(), findings=count_findings(report),
        first_cause=",".join(str(s.rank) for s in report.cross_rank.first_cause_suspects) or "-",
        partial=src.partial if src else False, sinks=sinks.summary(),
        step_s=src.step_s if src else None)
    if sinks.failed:
        if ctx.state is not None:
            ctx.state.count_run(ctx.job_id, OUTCOME_SINK_FAILURE, replace=outcome)
        ctx.save()
        return ctx.summary.finish(exitcodes.SINK_FAILURE, OUTCOME_SINK_FAILURE, report)
    if ctx.state is not None and window.tracked:
        ctx.state.advance(ctx.job_id, window.end_ns, iso_time(ctx.now_ns))
    ctx.save()
    if report.has_findings():
        code = exitcodes.OK if ctx.job.schedule.scheduled else exitcodes.FINDINGS
        return ctx.summary.finish(code, OUTCOME_FINDINGS, report)
    return ctx.summary.finish(exitcodes.OK, OUTCOME_OK, report)


def source_failed(ctx: JobContext, e: SourceFailureError, window: Window,
                  written: int | None) -> JobRun:
    """Nothing readable: a scheduled job that ended (its final window analysed before) is a
    quiet success; otherwise exit SOURCE_FAILURE, counted and written to the series sinks."""
    state = ctx.state
    if ctx.job.schedule.scheduled and isinstance(e, NoTelemetryError) and (
            written is not None or (state and state.last_end_ns(ctx.job_id))):
        if state is not None:
            state.mark_finished(ctx.job_id, iso_time(ctx.now_ns))
            state.save()
        return ctx.summary.finish(exitcodes.OK, OUTCOME_OK, window=window.iso(),
                                  note="job ended; its final window was analysed before")
    messages.error(ctx.err, one_line(e))
    runs = state.count_run(ctx.job_id, OUTCOME_SOURCE_FAILURE) if state is not None else {}
    ctx.save()
    record_failure(ctx, runs)
    return ctx.summary.finish(exitcodes.SOURCE_FAILURE, OUTCOME_SOURCE_FAILURE)


def record_failure(ctx: JobContext, runs: dict[str, int]) -> None:
    """A failed run writes its failure (time and run counter) through the series sinks, so
    StormotelAnalyzerFailing sees it; best effort: the run already failed."""
    from stormotel.analyzers.sinks.base import RunContext
    from stormotel.analyzers.sinks.dispatch import empty_report, write_failed_run

    job = ctx.job
    points = findings_series.run_samples(
        job_id=ctx.job_id, duration_s=time.monotonic() - ctx.summary.started,
        now_ms=ctx.now_ns // 1_000_000, runs_by_outcome=runs or {OUTCOME_SOURCE_FAILURE: 1},
        success=False)
    report, timeline = empty_report(ctx.job_id)
    sinks = RunContext(report, timeline, job.sinks, ctx.run.opts.output, ctx.job_id, job.http,
                       ctx.run.deadline, job.tsdb.prometheus, scheduled=True, out=ctx.run.out,
                       err=ctx.err)
    write_failed_run(sinks, points)


def count_findings(report: Report) -> int:
    """Findings the run line counts (OOM forensics describe ranks the other families name)."""
    return sum(f.family != "oom" for f in report.findings())
