"""One analyzer run: a source read into a Timeline → stall evidence joined → analysis → the
run described → every sink written. :func:`run_once` is the whole of it, for the file run
(:func:`run_files`) and for each TSDB window of the scheduled job
(:mod:`stormotel.analyzers.scheduled.job`); nothing is handed down as a function.

What differs between the two is data, in :class:`RunOptions`: the source, the window (None for
files), the deadline, the run's own series (scheduled runs), and where outputs go when one run
covers several jobs. The stall evidence is read once by the caller (a bad dump is a usage error
before any telemetry is read) and joined here, in one spelling for both.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TextIO

from stormotel.analyzers import messages
from stormotel.analyzers.options import AnalyzeOptions
from stormotel.analyzers.sources.protocol import Progress, Source

from stormotel import exitcodes
from stormotel.errors import NoTelemetryError
from stormotel.textsafe import one_line

if TYPE_CHECKING:  # numpy and httpx load with the steps that need them
    from stormotel.analyzers.http import Deadline
    from stormotel.analyzers.report import Report
    from stormotel.analyzers.sinks.dispatch import SinkOutcome
    from stormotel.analyzers.sinks.findings_series import RunSeries
    from stormotel.analyzers.sources.protocol import LoadOutcome
    from stormotel.analyzers.stalls.cli_support import StallResult
    from stormotel.analyzers.timeline import Timeline
    from stormotel.analyzers.window import Window



@dataclass(frozen=True)
class RunOptions:
    """What one run is asked to do beyond the command's options."""

    opts: AnalyzeOptions
    #: The stall evidence, read once (None when there is none).
    stalls: StallResult | None = None
    #: The TSDB window (None: files, which hold what they hold).
    window: Window | None = None
    deadline: Deadline | None = None
    #: The job id this run is for (a scheduled run's discovered job; else ``--job-id``).
    job_id: str | None = None
    #: One of several jobs in this run: every output at the job's own path.
    several: bool = False
    #: The run's own series (scheduled runs), written with the findings' series.
    series: RunSeries | None = None
    out: TextIO | None = None
    err: TextIO | None = None

    @property
    def progress(self) -> Progress:
        return Progress(self.opts.output.quiet, self.err)


@dataclass
class RunResult:
    """What a run produced: the report, the Timeline it judged, what each sink did, and what
    a TSDB read reached (None for files)."""

    report: Report
    timeline: Timeline
    sinks: SinkOutcome
    source: LoadOutcome | None


def run_once(source: Source, run: RunOptions) -> RunResult:
    """Read → join → analyze → describe → write every sink.

    Raises what the source raises (SourceFailureError, usage errors) before anything is
    written, and SinkFailureError when a file run cannot write its report."""
    timeline = source.read(run.window, run.deadline, run.progress)
    timeline, report = analyze_with_stalls(source, timeline, run)
    if run.window is not None and source.outcome is not None:
        describe_run(report, timeline, source.outcome, run.window, run.job_id or "")
        warn_partial(source.outcome, run.err or sys.stderr)
    return RunResult(report, timeline, write_all(report, timeline, run), source.outcome)


# --- the run described (TSDB windows) ---------------------------------------------------------
def describe_run(report: Report, timeline: Timeline, src: LoadOutcome, window: Window,
                 job_id: str) -> None:
    """What the report needs to say about the job run: window, endpoints, skipped analyses."""
    report.job_id = report.job_id or job_id
    # The summary counts offsets from the job's first sample (what the analysis saw start),
    # never from the query window's start: "+3577.9 s" into `--since 1h` says nothing.
    if report.window_start_ns is not None:
        report.extra["first_sample_ns"] = report.window_start_ns
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


def warn_partial(src: LoadOutcome, err: TextIO) -> None:
    """One warning line per endpoint that failed and per endpoint with partly read ranks."""
    for url, ranks in src.ranks_failed.items():
        messages.warn(err, f"{one_line(url)}: ranks {sorted(ranks)[:20]} only partly read")
    for url, why in src.endpoints_failed.items():
        messages.warn(err, f"endpoint {one_line(url)} failed: {one_line(why)}")


def analyze_with_stalls(source: Source, timeline: Timeline, run: RunOptions
                        ) -> tuple[Timeline, Report]:
    """The analysis of ``timeline`` joined with the stall evidence: the evidence's collective
    markers attached, its findings judged again with what this telemetry shows (a rank whose
    memory ran out), and added to the report. Stall evidence alone is its own report."""
    from stormotel.analyzers.analyze import analyze

    stalls, analysis = run.stalls, run.opts.analysis
    if stalls is not None and not source.telemetry:
        return timeline, stalls.empty_report(run.opts.job.job_id)
    if stalls is not None:  # the stall machinery (its compiled patterns) only when there is
        from stormotel.analyzers.stalls.cli_support import attach_markers  # evidence

        timeline = attach_markers(timeline, stalls.markers_by_rank)
        judged = stalls.judged(timeline)
    report = analyze(timeline, ranks=analysis.ranks, align=analysis.align,
                     settings=analysis.settings)
    if stalls is not None:
        stalls.apply(report, judged)
    if run.window is None:  # files read whole: a tracker that never stopped is no healthy end
        from stormotel.analyzers.stalls.unstopped_end import unstopped_ends

        report.stall_findings.extend(unstopped_ends(timeline, report.stall_findings,
                                                    report.notes))
    return timeline, report


def write_all(report: Report, timeline: Timeline, run: RunOptions) -> SinkOutcome:
    """Every sink the options ask for (:mod:`stormotel.analyzers.sinks.dispatch`)."""
    from stormotel.analyzers.sinks.base import RunContext
    from stormotel.analyzers.sinks.dispatch import write_sinks

    job = run.opts.job
    ctx = RunContext(report, timeline, job.sinks, run.opts.output,
                     run.job_id or job.job_id or report.job_id or "unknown", job.http,
                     run.deadline, job.tsdb.prometheus, several=run.several,
                     scheduled=run.window is not None, series=run.series, out=run.out,
                     err=run.err)
    return write_sinks(ctx)


def read_stalls(opts: AnalyzeOptions, progress: Progress) -> StallResult | None:
    """The stall evidence the flags name (and stack snapshots found beside the telemetry), read
    and judged; None when there is none."""
    from stormotel.analyzers.stalls.stacks import find_snapshot_files

    if not opts.stalls.wanted and not find_snapshot_files(opts.stalls.stacks_in):
        return None
    from stormotel.analyzers.stalls.cli_support import read_stall_evidence

    return read_stall_evidence(opts.stalls, progress, beside_telemetry=bool(opts.source.paths))


def run_files(opts: AnalyzeOptions, *, out: TextIO | None = None,
              err: TextIO | None = None) -> int:
    """The file run: stall evidence and/or telemetry files → one report → every sink; the exit
    code (sink failure, findings, no evidence, OK). Raises StormotelError for the CLI to
    print. ``out``/``err``: where its report and lines go (the process's streams when None)."""
    from stormotel.analyzers.sources.files import FileSource

    run = RunOptions(opts, out=out or sys.stdout, err=err or sys.stderr)
    stalls = read_stalls(opts, run.progress)
    source: Source = FileSource(opts.source, opts.job.job_id)
    if stalls is not None and not opts.source.paths:  # stall evidence alone
        from stormotel.analyzers.stalls.cli_support import StallMarkerSource

        source = StallMarkerSource(stalls, opts.job.job_id)
    try:
        result = run_once(source, replace(run, stalls=stalls))
    except NoTelemetryError:
        from stormotel.analyzers.stalls.stacks import find_snapshot_files

        if stalls is None or not find_snapshot_files(opts.stalls.stacks_in):
            raise
        # The tracker's snapshots and no telemetry file: ranks that died before the archive's
        # first write (a forked worker's exception, an abort). Their snapshots are evidence;
        # "no telemetry" (exit 3) would drop it. Judged alone, as with --stacks.
        from stormotel.analyzers.stalls.cli_support import StallMarkerSource

        stalls.notes.append("no telemetry file under the PATH(s): judged from the tracker's "
                            "stack snapshots there alone")
        result = run_once(StallMarkerSource(stalls, opts.job.job_id),
                          replace(run, stalls=stalls))
    if result.sinks.failed:
        return exitcodes.SINK_FAILURE
    if result.report.has_findings():
        return exitcodes.FINDINGS
    return no_evidence(result, opts, run.err or sys.stderr) or exitcodes.OK


def no_evidence(result: RunResult, opts: AnalyzeOptions, err: TextIO) -> int:
    """SOURCE_FAILURE (3) with one line when the input held nothing to judge by — a file of
    prose given as --logs, --ranks naming no rank the input has — so cron and CI never read
    "no evidence" as healthy (it used to exit 0). The report is still written."""
    from stormotel.analyzers.rankspec import format_rank_list
    from stormotel.analyzers.summary import has_evidence, rankless_log_evidence

    if has_evidence(result.report):
        return 0
    have = sorted(result.timeline.ranks)
    wanted = opts.analysis.ranks
    if wanted is not None and have and not set(wanted) & set(have):
        why = (f"--ranks {format_rank_list(sorted(set(wanted)))} selects none of the ranks in "
               f"the input ({format_rank_list(have)})")
    elif rankless_log_evidence(result.report):
        why = "the log lines name no rank and no rule read them as a finding"
    else:
        why = "no memory samples, watchdog lines or Flight Recorder entries in the input"
    messages.say(err, f"no evidence: {why}; nothing was judged, this is not a healthy "
                 "verdict (exit 3)")
    return exitcodes.SOURCE_FAILURE
