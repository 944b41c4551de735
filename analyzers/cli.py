"""``stormotel analyze``: load telemetry, run the analyzer, write the report.

:func:`main` parses the flags (:mod:`analyzers.cli_flags`), turns them into typed options once
(:func:`analyzers.cli_options.options_from_args`), then runs the steps itself, in order:

1. stall evidence (Flight Recorder dumps, worker logs), when given — :mod:`analyzers.stalls`;
2. the Timeline from the chosen source (:func:`load_timeline`), joined with that evidence;
3. :func:`analyzers.analyze.analyze` (:func:`run_analysis`), the stall findings added;
4. the report written (:func:`write_outputs`, :func:`write_html`) and the sinks
   (:mod:`analyzers.sinks.dispatch`).

A TSDB run (``--prometheus``) hands steps 2-4 for each window to :mod:`analyzers.job`, with the
analysis and report writing passed in. Failures map to the exit codes of
:mod:`stormotel.exitcodes`: user mistakes and unreadable input print one ``stormotel analyze:
error: ...`` line and exit non-zero; they never print a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from stormotel.analyzers.cli_flags import PROG, build_parser
from stormotel.analyzers.cli_options import options_from_args
from stormotel.analyzers.options import AnalysisOptions, AnalyzeOptions, OutputOptions

from stormotel import errors, exitcodes
from stormotel.textsafe import one_line

if TYPE_CHECKING:  # the heavy modules (numpy, httpx) load only when a command needs them
    from stormotel.analyzers.report import Report
    from stormotel.analyzers.sources.base import ProgressFn
    from stormotel.analyzers.stalls.cli_support import StallResult
    from stormotel.analyzers.timeline import Timeline

__all__ = ["PROG", "build_parser", "load_timeline", "main", "render", "run_analysis",
           "write_html", "write_outputs"]


# --- the steps ---------------------------------------------------------------------------------
def _progress(output: OutputOptions) -> ProgressFn | None:
    if output.quiet:
        return None
    return lambda msg: print(f"{PROG}: {one_line(msg, 2000)}", file=sys.stderr, flush=True)


def read_stalls(opts: AnalyzeOptions) -> StallResult | None:
    """Step 1: the stall evidence the flags name, read and judged (None when there is none)."""
    from stormotel.analyzers.stalls.stacks import find_snapshot_files

    if not opts.stalls.wanted and not find_snapshot_files(opts.stalls.stacks_in):
        return None
    from stormotel.analyzers.stalls.cli_support import read_stall_evidence

    return read_stall_evidence(opts.stalls, _progress(opts.output))


def load_timeline(opts: AnalyzeOptions) -> Timeline:
    """Step 2: the Timeline from the telemetry files, with the OOM dumps they point at."""
    from stormotel.analyzers.sources import load_paths
    from stormotel.analyzers.sources.oom_dumps import attach_oom_dumps

    paths = list(opts.source.paths)
    timeline = load_paths(paths, progress=_progress(opts.output), job_id=opts.job.job_id)
    dirs = [p for p in paths if Path(p).is_dir()]  # a job folder holds its oom/ dumps
    return attach_oom_dumps(timeline, [*dirs, *opts.source.oom_dumps])


def run_analysis(timeline: Timeline, analysis: AnalysisOptions) -> Report:
    """Step 3: the analyzer facade with the flags' settings."""
    from stormotel.analyzers.analyze import analyze

    return analyze(timeline, ranks=analysis.ranks, align=analysis.align,
                   settings=analysis.settings)


def render(report: Report, fmt: str) -> str:
    if fmt == "json":
        return report.to_json()
    from stormotel.analyzers.summary import render_summary

    return render_summary(report)


def write_outputs(report: Report, output: OutputOptions, *, several: bool = False) -> None:
    """Step 4: render and write (stdout or --output: the job's own path, see
    :mod:`analyzers.scheduled.outputs`)."""
    from stormotel.analyzers.scheduled.outputs import job_path

    text = render(report, output.format) + "\n"
    if output.output and output.output != "-":
        out = job_path(output.output, report.job_id, several=several)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        if not output.quiet:
            print(f"{PROG}: wrote {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def write_html(report: Report, timeline: Timeline, path: Path, *, quiet: bool,
               several: bool = False) -> None:
    """The self-contained HTML report (charts + findings), written atomically."""
    from stormotel.analyzers.scheduled.outputs import job_path
    from stormotel.analyzers.sinks.html_report import write_html_report

    written = write_html_report(job_path(path, report.job_id, several=several), timeline,
                                report)
    if not quiet:
        print(f"{PROG}: wrote {written.path} ({written.size_bytes / 1e6:.1f} MB)",
              file=sys.stderr)


# --- the two kinds of run ----------------------------------------------------------------------
def _fail(parser: argparse.ArgumentParser, exc: errors.StormotelError) -> NoReturn:
    parser.exit(errors.exit_code_of(exc), f"{PROG}: error: {one_line(exc)}\n")


def _run_files(opts: AnalyzeOptions, parser: argparse.ArgumentParser) -> int:
    """Files and/or stall evidence → one report → outputs and sinks."""
    try:
        stalls = read_stalls(opts)
        if stalls is not None and not opts.source.paths:  # stall evidence alone
            timeline = stalls.marker_timeline(opts.job.job_id)
            report = stalls.empty_report(opts.job.job_id)
        else:
            timeline = load_timeline(opts)
            if stalls is not None:
                timeline = stalls.join(timeline)
            report = run_analysis(timeline, opts.analysis)
            if stalls is not None:
                stalls.apply(report)
    except errors.StormotelError as exc:
        _fail(parser, exc)
    try:
        write_outputs(report, opts.output)
        if opts.output.html:
            write_html(report, timeline, opts.output.html, quiet=opts.output.quiet)
    except OSError as exc:
        parser.exit(exitcodes.SINK_FAILURE,
                    f"{PROG}: error: cannot write output: {one_line(exc)}\n")
    if opts.job.sinks.wanted:
        from stormotel.analyzers.scheduled.outputs import job_sinks
        from stormotel.analyzers.sinks.dispatch import write_sinks

        job = dataclasses.replace(opts.job, sinks=job_sinks(opts.job.sinks, report.job_id,
                                                            several=False))
        if write_sinks(report, timeline, job).failed:
            return exitcodes.SINK_FAILURE
    if report.has_findings():
        return exitcodes.FINDINGS
    return _no_evidence(report, timeline, opts) or exitcodes.OK


def _no_evidence(report: Report, timeline: Timeline, opts: AnalyzeOptions) -> int:
    """SOURCE_FAILURE (3) with one line when the input held nothing to judge by — a file of
    prose given as --logs, --ranks naming no rank the input has — so cron and CI never read
    "no evidence" as healthy (it used to exit 0). The report is still written."""
    from stormotel.analyzers.rankspec import format_rank_list
    from stormotel.analyzers.summary import has_evidence

    if has_evidence(report):
        return 0
    have = sorted(timeline.ranks)
    wanted = opts.analysis.ranks
    if wanted is not None and have and not set(wanted) & set(have):
        why = (f"--ranks {format_rank_list(sorted(set(wanted)))} selects none of the ranks in "
               f"the input ({format_rank_list(have)})")
    else:
        why = "no memory samples, watchdog lines or Flight Recorder entries in the input"
    print(f"{PROG}: no evidence: {why}; nothing was judged, this is not a healthy verdict "
          "(exit 3)", file=sys.stderr)
    return exitcodes.SOURCE_FAILURE


def _run_tsdb(opts: AnalyzeOptions, parser: argparse.ArgumentParser) -> int:
    """The scheduled job: each window read from the TSDB → analysis → report → sinks. Stall
    evidence is read once, up front, so a bad dump is a usage error before any query; each
    window judges its findings with that window's telemetry (a rank whose memory ran out) and
    they reach the job's sinks."""
    from stormotel.analyzers import job
    from stormotel.analyzers.stalls.cli_support import attach_markers

    try:
        stalls = read_stalls(opts)
        seen: list[Timeline] = []  # the window's Timeline, for --html

        def analyze_window(timeline: Timeline) -> Report:
            seen[:] = [timeline]
            if stalls is None:
                return run_analysis(timeline, opts.analysis)
            marked = attach_markers(timeline, stalls.markers_by_rank)
            return stalls.apply(run_analysis(marked, opts.analysis), stalls.judged(marked))

        def emit(report: Report, several: bool = False) -> None:
            write_outputs(report, opts.output, several=several)
            if opts.output.html and seen:
                write_html(report, seen[0], opts.output.html, quiet=opts.output.quiet,
                           several=several)

        if opts.job.schedule.scheduled and not opts.job.job_id and not opts.job.tsdb.dcgm:
            from stormotel.analyzers.scheduled.run import run_scheduled

            return run_scheduled(opts.job, analyze_window, run_one=job.run_job,
                                 emit_report=emit)
        return job.run_job(opts.job, analyze_window, emit_report=emit)
    except errors.StormotelError as exc:
        _fail(parser, exc)


def _one_blas_thread() -> None:
    """Before numpy loads: one OpenBLAS thread (unless the user chose a number).

    The analyzer does no matrix work (vector reductions only), but OpenBLAS starts a pool of
    one thread per core at import, which busy-waits: 0.1 s of CPU per run, as much as parsing
    50 MB of telemetry, and again in forked loader processes. A process that already loaded
    numpy (a caller of :func:`main` in-process) is left as it is."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> int:
    _one_blas_thread()
    parser = build_parser()
    try:
        opts = options_from_args(parser.parse_args(argv))
    except errors.StormotelError as exc:
        _fail(parser, exc)
    if opts.job.tsdb.wanted:
        return _run_tsdb(opts, parser)
    return _run_files(opts, parser)


if __name__ == "__main__":
    sys.exit(main())
