"""``stormotel analyze``: load telemetry, run the analyzer, write the report.

Structure (so other sources and sinks plug in with small edits):

- :func:`build_parser` composes small ``_add_*_arguments(parser)`` groups;
- :func:`main` (1) builds the Timeline from the chosen source (:func:`load_timeline`), (2) calls
  :func:`analyzers.analyze.analyze`, (3) renders and writes outputs (:func:`write_outputs`), and
  maps failures to the exit codes of :mod:`stormotel.exitcodes`.

User mistakes and unreadable input print one ``stormotel analyze: error: ...`` line and exit
non-zero; they never print a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from stormotel.analyzers.algorithms.settings import SENSITIVITIES, parse_overrides
from stormotel.analyzers.alignments import ALIGN_WALL, ALIGNMENTS
from stormotel.analyzers.cli_flags import add_stall_arguments, wants_stalls
from stormotel.analyzers.rankspec import parse_rank_spec
from stormotel.analyzers.scheduled import options as job_options

from stormotel import errors, exitcodes
from stormotel.textsafe import one_line

if TYPE_CHECKING:  # the heavy modules (numpy, httpx) load only when a command needs them
    from stormotel.analyzers.report import Report
    from stormotel.analyzers.sources.base import ProgressFn
    from stormotel.analyzers.timeline import Timeline

PROG = "stormotel analyze"

EPILOG = """\
exit codes: 0 healthy (no findings), 1 findings reported, 2 usage or input error,
3 no telemetry could be read, 4 writing an output failed, 70 internal error (a bug;
'stormotel --debug analyze ...' prints the traceback), 130 interrupted.

examples:
  stormotel analyze archive/run-7/                      # every rank's OTLP files
  stormotel analyze 'exports/events_rank*.json' --format json --output report.json
  stormotel analyze archive/ --ranks 0,4-7 --align markers --sensitivity high
"""


class UsageError(errors.UsageError):
    """A bad flag value; printed as one line, exit USAGE."""


# --- arguments ---------------------------------------------------------------------------------
def _add_source_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("telemetry sources")
    g.add_argument("paths", nargs="*", metavar="PATH",
                   help="files, folders (walked recursively) or quoted globs: OTLP JSON-lines "
                        "archives (.jsonl, also .gz/.zst), length-prefixed OTLP protobuf (.pb), "
                        "Stormlog telemetry exports (JSON, JSON lines, CSV). Merged and "
                        "de-duplicated across files.")
    g.add_argument("--job-id", metavar="ID",
                   help="analyse only this job's data when the files hold several jobs, and label "
                        "the report with it (default: the job id found in the data)")


def _add_analysis_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("analysis")
    g.add_argument("--ranks", metavar="SPEC", default="all",
                   help="ranks to analyse: 'all' (default), '0,2', '0,4-7'; requested ranks "
                        "with no data are reported missing")
    g.add_argument("--align", choices=ALIGNMENTS, default=ALIGN_WALL,
                   help="clock alignment across ranks: 'wall' trusts timestamps (NTP-synced "
                        "clusters; default), 'first-sample' lines up each rank's first sample, "
                        "'markers' lines up step/collective markers shared by all ranks. The "
                        "choice is stated in the output.")
    g.add_argument("--sensitivity", choices=SENSITIVITIES, default="medium",
                   help="threshold preset: 'low' is strict (fewer, surer findings), 'high' is "
                        "broad; default medium")
    g.add_argument("--set", dest="overrides", action="append", metavar="NAME=VALUE",
                   help="override one threshold of the preset, e.g. --set spike_z=5 --set "
                        "rise_floor_bytes=134217728 (repeatable; names in docs/analyzer.md)")


def _add_output_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: human summary (default); json: the versioned report "
                        "(stormotel.report/v1)")
    g.add_argument("--output", "-o", metavar="FILE",
                   help="write the report to FILE instead of stdout ('-' = stdout)")
    g.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")
    g.add_argument("--oom-dumps", action="append", metavar="PATH",
                   help="OOM ring dumps (*.ring.jsonl files or folders) for the OOM forensics; "
                        "dumps the telemetry's OOM events point at are read automatically")
    g.add_argument("--html", type=Path, metavar="FILE",
                   help="also write a self-contained HTML report (charts of every rank's "
                        "memory with the findings; opens offline in any browser)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Find the rank whose memory went wrong first, per-rank gap problems "
                    "(drift, spikes, fragmentation) and collective-synchronised spikes in "
                    "multi-rank GPU memory telemetry.")
    _add_source_arguments(p)
    _add_analysis_arguments(p)
    add_stall_arguments(p)  # stuck jobs: Flight Recorder dumps, worker logs
    _add_output_arguments(p)
    job_options.add_job_arguments(p, include_job_id=False)  # TSDB source, sinks, cron safety
    return p


# --- the three steps ---------------------------------------------------------------------------
def _progress(args: argparse.Namespace) -> ProgressFn | None:
    if args.quiet:
        return None
    return lambda msg: print(f"{PROG}: {one_line(msg, 2000)}", file=sys.stderr, flush=True)


def load_timeline(args: argparse.Namespace) -> Timeline:
    """Step 1: the Timeline from whichever source the flags chose."""
    from stormotel.analyzers.sources import load_paths
    from stormotel.analyzers.sources.oom_dumps import attach_oom_dumps

    if not args.paths:
        raise UsageError("no telemetry given: pass one or more PATHs")
    timeline = load_paths(args.paths, progress=_progress(args), job_id=args.job_id)
    dirs = [p for p in args.paths if Path(p).is_dir()]  # a job folder holds its oom/ dumps
    return attach_oom_dumps(timeline, [*dirs, *(args.oom_dumps or [])])


def run_analysis(timeline: Timeline, args: argparse.Namespace) -> Report:
    """Step 2: the analyzer facade with the flags' settings."""
    from stormotel.analyzers.analyze import analyze

    ranks = parse_rank_spec(args.ranks)
    return analyze(timeline, sensitivity=args.sensitivity, ranks=ranks, align=args.align,
                   overrides=parse_overrides(args.overrides))


def render(report: Report, fmt: str) -> str:
    if fmt == "json":
        return report.to_json()
    from stormotel.analyzers.summary import render_summary

    return render_summary(report)


def write_outputs(report: Report, args: argparse.Namespace) -> None:
    """Step 3: render and write (stdout or --output); other sinks are added here."""
    text = render(report, args.format) + "\n"
    if args.output and args.output != "-":
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        if not args.quiet:
            print(f"{PROG}: wrote {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def write_html(report: Report, timeline: Timeline, args: argparse.Namespace) -> None:
    """The self-contained HTML report (charts + findings), written atomically."""
    from stormotel.analyzers.sinks.html_report import write_html_report

    written = write_html_report(args.html, timeline, report)
    if not args.quiet:
        print(f"{PROG}: wrote {written.path} ({written.size_bytes / 1e6:.1f} MB)",
              file=sys.stderr)


def _validate(args: argparse.Namespace) -> None:
    """Check flag values before any slow loading, so mistakes fail fast."""
    parse_rank_spec(args.ranks)
    from stormotel.analyzers.algorithms.settings import settings_for

    settings_for(args.sensitivity, **parse_overrides(args.overrides))


def _tsdb_analysis(args: argparse.Namespace) -> Callable[[Timeline], Report]:
    """The scheduled job's analysis step; stall evidence (dumps, logs) is read once, up front,
    so a bad dump is a usage error before any query, and its findings reach the job's sinks."""
    from stormotel.analyzers.stalls.cli_support import attach_markers, stall_result_from_args

    if not wants_stalls(args):
        return lambda tl: run_analysis(tl, args)
    stalls = stall_result_from_args(args, _progress(args))
    return lambda tl: stalls.apply(run_analysis(attach_markers(tl, stalls.markers_by_rank), args))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = job_options.validate_args(args)
    if problem:
        parser.exit(exitcodes.USAGE, f"{PROG}: error: {problem}\n")
    if job_options.wants_tsdb(args):  # the scheduled job: TSDB window -> analysis -> sinks
        from stormotel.analyzers import job

        if args.paths:
            parser.exit(exitcodes.USAGE, f"{PROG}: error: give PATHs or --prometheus, not both\n")
        try:
            _validate(args)
            analyze_fn = _tsdb_analysis(args)
            seen: list[Timeline] = []  # the window's Timeline, for --html

            def analyze_and_keep(tl: Timeline) -> Report:
                seen[:] = [tl]
                return analyze_fn(tl)

            def emit(report: Report) -> None:
                write_outputs(report, args)
                if args.html and seen:
                    write_html(report, seen[0], args)

            if args.scheduled and not args.job_id and not args.dcgm:
                from stormotel.analyzers.scheduled.run import run_scheduled

                return run_scheduled(args, analyze_and_keep, run_one=job.run_job,
                                     emit_report=emit)
            return job.run_job(args, analyze_and_keep, emit_report=emit)
        except errors.StormotelError as exc:
            parser.exit(errors.exit_code_of(exc), f"{PROG}: error: {one_line(exc)}\n")
    try:
        _validate(args)
        if wants_stalls(args):  # Flight Recorder dumps / worker logs, telemetry optional
            from stormotel.analyzers.stalls.cli_support import analyze_with_stalls

            timeline, report = analyze_with_stalls(args, load_timeline, run_analysis,
                                                   _progress(args))
        else:
            timeline = load_timeline(args)
            report = run_analysis(timeline, args)
    except errors.StormotelError as exc:
        parser.exit(errors.exit_code_of(exc), f"{PROG}: error: {one_line(exc)}\n")
    try:
        write_outputs(report, args)
        if args.html:
            write_html(report, timeline, args)
    except OSError as exc:
        parser.exit(exitcodes.SINK_FAILURE,
                    f"{PROG}: error: cannot write output: {one_line(exc)}\n")
    if job_options.wants_sinks(args):
        from stormotel.analyzers.sinks.dispatch import write_sinks

        if write_sinks(report, timeline, args).failed:
            return exitcodes.SINK_FAILURE
    return exitcodes.FINDINGS if report.has_findings() else exitcodes.OK


if __name__ == "__main__":
    sys.exit(main())
