"""One scheduled run over every training job with telemetry in its window.

``stormotel analyze --prometheus URL --scheduled [--job-selector 'namespace="ml"']`` (no
``--job-id``) discovers the jobs, then runs the single-job run (:func:`analyzers.job.run_job`)
for each, one summary line per job. The run's exit code is 0 when every job's run succeeded
(findings written included), else the first failure's code in the order usage (2), source (3),
sink (4) — the same codes as a single-job run (docs/exit-codes.md).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
from collections.abc import Callable
from typing import TextIO

from stormotel.analyzers import http
from stormotel.analyzers.options import JobOptions
from stormotel.analyzers.report import Report
from stormotel.analyzers.scheduled import shard
from stormotel.analyzers.scheduled.discovery import DiscoveryError, discover_jobs
from stormotel.analyzers.scheduled.outputs import job_sinks
from stormotel.analyzers.timeline import Timeline

from stormotel import exitcodes
from stormotel.textsafe import one_line

#: Discovery looks back this far without --since: several CronJob periods, so a job whose end
#: falls between runs is still found by the next run (which gives it its final analysis).
DISCOVERY_WINDOW_S = 3600.0
#: Which failure a run over many jobs reports when several jobs failed differently.
_PRECEDENCE = (exitcodes.USAGE, exitcodes.SOURCE_FAILURE, exitcodes.SINK_FAILURE)


def run_scheduled(job: JobOptions, analyze_fn: Callable[[Timeline], Report], *,
                  run_one: Callable[..., int],
                  emit_report: Callable[..., None] | None = None,
                  err: TextIO | None = None, now_ns: int | None = None) -> int:
    """Discover the window's jobs and run ``run_one`` (``analyzers.job.run_job``) for each;
    ``emit_report(report, several=...)`` writes a job's report (at its own path when
    ``several`` jobs are analysed)."""
    err = err or sys.stderr
    now_ns = now_ns if now_ns is not None else time.time_ns()
    schedule = job.schedule
    end = now_ns - int(schedule.settle * 1e9)
    span = schedule.since if schedule.since is not None else DISCOVERY_WINDOW_S
    start = end - int(span * 1e9)
    try:
        with http.make_client(job.http) as client:
            jobs = discover_jobs(client, job.tsdb.prometheus,
                                 selector=schedule.job_selector or "", start_ns=start,
                                 end_ns=end, settings=job.http,
                                 deadline=http.Deadline(schedule.timeout),
                                 warn=lambda m: print(f"stormotel analyze: warning: {one_line(m)}",
                                                      file=err))
    except DiscoveryError as e:
        print(f"stormotel analyze: error: {one_line(e)}", file=err)
        return exitcodes.SOURCE_FAILURE
    found = len(jobs)
    jobs = shard.select(jobs, schedule.shard)  # --shard: this pod's share (scheduled/shard.py)
    if not jobs:
        where = f" in shard {schedule.shard} ({found} in all)" if schedule.shard else ""
        print("stormotel analyze: no training job has telemetry in the window"
              f"{' matching ' + schedule.job_selector if schedule.job_selector else ''}{where}",
              file=err)
        return exitcodes.OK
    codes = []
    # Several jobs (or any sharded run): every output path is the job's own (scheduled/outputs.py)
    several = len(jobs) > 1 or schedule.shard is not None
    for job_id in jobs:
        one = dataclasses.replace(job, job_id=job_id,
                                  sinks=job_sinks(job.sinks, job_id, several=several),
                                  schedule=shard.job_schedule(schedule, job_id))
        emit = None if emit_report is None else functools.partial(emit_report, several=several)
        codes.append(run_one(one, analyze_fn, emit_report=emit, err=err, now_ns=now_ns))
    failed = [c for c in codes if c != exitcodes.OK]
    return next((c for c in _PRECEDENCE if c in failed), failed[0] if failed else exitcodes.OK)
