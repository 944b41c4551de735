"""The one place ``stormotel analyze``'s argparse namespace becomes options.

:func:`options_from_args` turns the namespace into
:class:`stormotel.analyzers.options.AnalyzeOptions` and makes every check that needs a parsed value
or several flags at once, before anything slow runs, so a mistake is one ``UsageError`` line and
exit 2. Nothing below the command line sees the namespace. :func:`job_options_from_args` does the
same for the flags of :func:`stormotel.analyzers.cli.job_flags.add_job_arguments` alone (a
parser with only those flags).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from urllib.parse import urlsplit

from stormotel.analyzers.algorithms.settings import parse_overrides, settings_for
from stormotel.analyzers.cli.job_flags import SCHEDULED_SETTLE_S
from stormotel.analyzers.http_flags import settings_from_args
from stormotel.analyzers.options import (
    AnalysisOptions,
    AnalyzeOptions,
    JobOptions,
    OutputOptions,
    ScheduleOptions,
    Shard,
    SinkOptions,
    SourceOptions,
    StallOptions,
    TsdbOptions,
    flag_values,
    resolve_shard,
)
from stormotel.analyzers.rankspec import parse_rank_spec
from stormotel.analyzers.sinks.dispatch import sink_flags
from stormotel.analyzers.sources.tsdb import source_flags

from stormotel import schema
from stormotel.errors import UsageError


def options_from_args(args: argparse.Namespace) -> AnalyzeOptions:
    """Every flag of ``stormotel analyze``, parsed and checked; raises a ``UsageError``."""
    job = job_options_from_args(args, quiet=args.quiet)
    source = SourceOptions(paths=tuple(args.paths), oom_dumps=tuple(args.oom_dumps or ()))
    if job.tsdb.wanted and source.paths:
        raise UsageError("give PATHs or --prometheus, not both")
    settings = settings_for(args.sensitivity, **parse_overrides(args.overrides))
    if job.tsdb.dcgm:
        # A DCGM value is as old as dcgm-exporter's last collection when scraped: a follower
        # seen low may already have risen that long before, so no lead shorter is claimed.
        settings = dataclasses.replace(settings, clock_tolerance_s=max(
            settings.clock_tolerance_s, job.tsdb.dcgm_collect_interval_s))
    analysis = AnalysisOptions(ranks=parse_rank_spec(args.ranks), align=args.align,
                               settings=settings)
    stalls = StallOptions(flight_recorder=args.flight_recorder, logs=tuple(args.logs or ()),
                          world_size=args.world_size, stacks=tuple(args.stacks or ()),
                          stacks_in=tuple(str(p) for p in source.paths),
                          job_id=getattr(args, "job_id", None),
                          nccl_ras=tuple(args.nccl_ras or ()), fr_pipe=args.fr_pipe,
                          live_timeout_s=args.live_timeout)
    if stalls.live_timeout_s is not None and not 0 < stalls.live_timeout_s <= 3600:
        raise UsageError(f"--live-timeout {args.live_timeout}: give seconds between 0 and 3600")
    if stalls.wanted:
        _check_world_size(stalls.world_size)
    elif not source.paths and not job.tsdb.wanted:
        raise UsageError("no telemetry given: pass one or more PATHs")
    output = OutputOptions(format=args.format, output=args.output, html=args.html,
                           quiet=args.quiet)
    return AnalyzeOptions(job=job, source=source, analysis=analysis, stalls=stalls,
                          output=output)


def _check_world_size(world_size: int | None) -> None:
    from stormotel.analyzers.stalls.cli_support import StallInputError
    from stormotel.analyzers.timeline import MAX_WORLD_SIZE

    if world_size is not None and not 1 <= world_size <= MAX_WORLD_SIZE:
        raise StallInputError(f"--world-size must be between 1 and {MAX_WORLD_SIZE}, "
                              f"got {world_size}")


def settle_of(args: argparse.Namespace) -> float:
    """``--settle`` as given; unset, 60 s where a next run covers the most recent time (a state
    file, ``--scheduled``) and 0 for a one-off run: it has no next run, and a window ending a
    minute ago found nothing 54 s into a job."""
    if args.settle is not None:
        return float(args.settle)
    scheduled = bool(args.state_file) or bool(args.scheduled)
    return SCHEDULED_SETTLE_S if scheduled else 0.0


def job_options_from_args(args: argparse.Namespace, *, quiet: bool = False) -> JobOptions:
    """The TSDB source, window, sinks and HTTP flags; raises a ``UsageError`` for flags that
    contradict each other or need another one."""
    problem = _job_problem(args)
    if problem:
        raise UsageError(problem)
    tsdb = TsdbOptions(prometheus=tuple(args.prometheus), step=args.step,
                       concurrency=args.concurrency, dcgm=args.dcgm,
                       gpu_rank_map=args.gpu_rank_map, rank_label=args.rank_label,
                       dcgm_selector=args.dcgm_selector,
                       dcgm_collect_interval_s=args.dcgm_collect_interval,
                       dcgm_fields=tuple((role, metric, unit)
                                         for given in getattr(args, "dcgm_field", None) or ()
                                         for role, (metric, unit) in given.items()),
                       read_api=getattr(args, "tsdb_read", "auto"),
                       extra=flag_values(args, source_flags()))
    schedule = ScheduleOptions(since=args.since, start=args.start, end=args.end,
                               state_file=args.state_file, settle=settle_of(args),
                               max_window=args.max_window, timeout=args.timeout,
                               scheduled=args.scheduled, job_selector=args.job_selector,
                               shard=_shard(args), now=getattr(args, "now", None))
    sinks = SinkOptions(grafana_url=args.grafana_url, grafana_token_file=args.grafana_token_file,
                        grafana_dashboard_uid=args.grafana_dashboard_uid,
                        grafana_dashboard=args.grafana_dashboard,
                        grafana_folder=args.grafana_folder,
                        incident_dashboard=args.incident_dashboard,
                        remote_write=tuple(args.remote_write), pushgateway=args.pushgateway,
                        perfetto=args.perfetto, dry_run=args.dry_run,
                        name_translation=getattr(args, "name_translation",
                                                 schema.DEFAULT_NAME_TRANSLATION),
                        extra=flag_values(args, sink_flags()))
    return JobOptions(job_id=args.job_id, tsdb=tsdb, schedule=schedule, sinks=sinks,
                      http=settings_from_args(args), quiet=quiet)


def _shard(args: argparse.Namespace) -> Shard | None:
    """``--shard`` with its index resolved (``JOB_COMPLETION_INDEX`` for ``--shard N``)."""
    spec = getattr(args, "shard", None)
    if spec is None:
        return None
    try:
        return resolve_shard(spec)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _url_problem(flag: str, value: str | None) -> str | None:
    """An endpoint flag's value must be an http(s) URL with a host: ``prometheus:9090`` used to
    be retried four times as a source failure (exit 3) instead of a usage error."""
    if value is None:
        return None
    parsed = urlsplit(value.strip())
    if parsed.scheme in ("http", "https") and parsed.hostname:
        return None
    hint = f"; did you mean http://{value}?" if "://" not in value else ""
    return f"{flag} {value!r} is not an http(s) URL{hint}"


def _job_problem(args: argparse.Namespace) -> str | None:
    """A one-line usage error, or None."""
    for flag, values in (("--prometheus", args.prometheus), ("--remote-write", args.remote_write),
                         ("--pushgateway", [args.pushgateway]),
                         ("--grafana-url", [args.grafana_url])):
        for value in values:
            if problem := _url_problem(flag, value):
                return problem
    if args.prometheus:
        if not args.job_id and not args.dcgm and not args.scheduled:
            return "--prometheus needs --job-id (or --scheduled to analyse every job found)"
        if args.job_selector and not args.scheduled:
            return "--job-selector needs --scheduled (and no --job-id)"
        if getattr(args, "shard", None) and (not args.scheduled or args.job_id):
            return "--shard needs --scheduled and no --job-id (it splits the discovered jobs)"
        if args.dcgm and args.gpu_rank_map is not None and args.rank_label is not None:
            return "--dcgm takes --gpu-rank-map FILE or --rank-label LABEL, not both"
        if args.dcgm and not args.job_id:
            return "--dcgm needs --job-id (the name findings are reported under)"
        if args.end is not None and args.start is None:
            return "--end needs --start"
        if args.start is not None and args.since is not None:
            return "give --since or --start/--end, not both"
        if getattr(args, "now", None) is not None:
            if args.start is not None:
                return "give --now or --start/--end, not both (--start/--end is the window)"
            if args.now > time.time_ns():
                return ("--now must not be later than the clock: a run stores its window's "
                        "end, and a stored end in the future is ignored by the next run")
    elif args.dcgm or args.state_file:
        return "--dcgm and --state-file need --prometheus URL"
    else:
        for declared in source_flags():  # a TSDB source's own flag reads --prometheus URLs
            if getattr(args, declared.dest, None):
                return f"{declared.names[0]} needs --prometheus URL"
    if (args.grafana_dashboard or args.grafana_dashboard_uid or args.grafana_folder) \
            and not args.grafana_url:
        return "--grafana-dashboard/--grafana-dashboard-uid/--grafana-folder need --grafana-url"
    if args.concurrency < 1:
        return "--concurrency must be at least 1"
    return None
