"""What a TSDB run's report says about the run itself: the window, the endpoints that answered,
the analyses the source had to skip, the source's notes; and the warnings for a partial read
(one of several endpoints down, some ranks' queries failed: not a failure, docs/exit-codes.md)."""

from __future__ import annotations

from typing import TextIO

from stormotel.analyzers.report import Report
from stormotel.analyzers.scheduled.window import Window
from stormotel.analyzers.sources.prometheus import LoadOutcome
from stormotel.analyzers.timeline import Timeline

from stormotel.textsafe import one_line


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
        print(f"stormotel analyze: warning: {one_line(url)}: ranks {sorted(ranks)[:20]} only "
              "partly read",
              file=err)
    for url, why in src.endpoints_failed.items():
        print(f"stormotel analyze: warning: endpoint {one_line(url)} failed: {one_line(why)}",
              file=err)
