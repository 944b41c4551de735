"""The TSDB run: one job (``--job-id``), or the CronJob run over every training job with
telemetry in its window.

``stormotel analyze --prometheus URL --scheduled [--job-selector 'namespace="ml"']`` (no
``--job-id``) discovers the jobs, then runs the single-job run
(:func:`stormotel.analyzers.scheduled.job.run_job`) for each, one summary line per job, each
job's files at its own path (:mod:`stormotel.analyzers.sinks.outputs`). The run's exit code
is 0 when every job's run succeeded (findings written included), else the first failure's code
in the order usage (2), source (3), sink (4) — the same codes as a single-job run
(docs/exit-codes.md).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, TextIO

from stormotel.analyzers import http, messages
from stormotel.analyzers.options import AnalyzeOptions
from stormotel.analyzers.run import read_stalls
from stormotel.analyzers.scheduled import shard
from stormotel.analyzers.scheduled.job import run_job
from stormotel.analyzers.scheduled.window import clock_ns
from stormotel.analyzers.sources.discovery import DiscoveryError, discover_jobs
from stormotel.analyzers.sources.protocol import Progress

from stormotel import exitcodes
from stormotel.textsafe import one_line

if TYPE_CHECKING:  # the stall machinery (its compiled patterns) loads with stall evidence
    from stormotel.analyzers.stalls.cli_support import StallResult

#: Discovery looks back this far without --since: several CronJob periods, so a job whose end
#: falls between runs is still found by the next run (which gives it its final analysis).
DISCOVERY_WINDOW_S = 3600.0
#: Which failure a run over many jobs reports when several jobs failed differently.
FAILURE_PRECEDENCE = (exitcodes.USAGE, exitcodes.SOURCE_FAILURE, exitcodes.SINK_FAILURE)


def run_tsdb(opts: AnalyzeOptions, *, out: TextIO | None = None,
             err: TextIO | None = None) -> int:
    """The TSDB run the flags ask for. Stall evidence is read once, up front, so a bad dump is
    a usage error before any query; each window judges it with its own telemetry.
    ``out``/``err``: where its report and lines go (the process's streams when None)."""
    out, err = out or sys.stdout, err or sys.stderr
    stalls = read_stalls(opts, Progress(opts.output.quiet, err))
    job = opts.job
    if job.schedule.scheduled and not job.job_id and not job.tsdb.dcgm:
        return run_scheduled(opts, stalls=stalls, out=out, err=err)
    return run_job(opts, stalls=stalls, out=out, err=err).code


def run_scheduled(opts: AnalyzeOptions, *, stalls: StallResult | None = None,
                  out: TextIO | None = None, err: TextIO | None = None,
                  now_ns: int | None = None) -> int:
    """Discover the window's jobs and run each (at its own output paths when several)."""
    err = err or sys.stderr
    now_ns = now_ns if now_ns is not None else clock_ns(opts.job.schedule)
    jobs = discover(opts, err, now_ns)
    if jobs is None:
        return exitcodes.SOURCE_FAILURE
    schedule = opts.job.schedule
    found = len(jobs)
    jobs = shard.select(jobs, schedule.shard)  # --shard: this pod's share (scheduled/shard.py)
    if not jobs:
        selector = schedule.job_selector
        where = f" in shard {schedule.shard} ({found} in all)" if schedule.shard else ""
        messages.say(err, "no training job has telemetry in the window"
                     f"{' matching ' + selector if selector else ''}{where}")
        return exitcodes.OK
    # Several jobs (or any sharded run): every output path is the job's own (sinks/outputs.py)
    several = len(jobs) > 1 or schedule.shard is not None
    # Each job's state is its own file in every mode (scheduled/state.py): a sharded and an
    # unsharded run read and lock the same one.
    codes = [run_job(dataclasses.replace(opts, job=dataclasses.replace(opts.job, job_id=job_id)),
                     stalls=stalls, several=several, out=out, err=err, now_ns=now_ns,
                     skip_locked=True).code
             for job_id in jobs]
    failed = [c for c in codes if c != exitcodes.OK]
    return next((c for c in FAILURE_PRECEDENCE if c in failed),
                failed[0] if failed else exitcodes.OK)


def discover(opts: AnalyzeOptions, err: TextIO, now_ns: int) -> list[str] | None:
    """The job ids with telemetry in the discovery window (None: discovery failed, said)."""
    job, schedule = opts.job, opts.job.schedule
    end = now_ns - int(schedule.settle * 1e9)
    span = schedule.since if schedule.since is not None else DISCOVERY_WINDOW_S
    start = end - int(span * 1e9)
    try:
        with http.make_client(job.http) as client:
            return list(discover_jobs(
                client, job.tsdb.prometheus, selector=schedule.job_selector or "",
                start_ns=start, end_ns=end, settings=job.http,
                deadline=http.Deadline(schedule.timeout),
                warn=lambda m: messages.warn(err, one_line(m))))
    except DiscoveryError as e:
        messages.error(err, one_line(e))
        return None
