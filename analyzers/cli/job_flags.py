"""The scheduled analyzer's command line: durations, times and every flag of the TSDB run.
Declared here without heavy imports; :mod:`stormotel.analyzers.cli.args` turns what they fill
into typed options (and checks the flags that need each other), once."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from stormotel.analyzers.http_flags import add_http_arguments
from stormotel.analyzers.options import (
    DCGM_FIELDS_ENV,
    ENV_GRAFANA_TOKEN,
    PUSH_JOB,
    PluginFlag,
    ShardSpec,
    parse_shard,
)
from stormotel.analyzers.sinks.dispatch import sink_flags
from stormotel.analyzers.sources.tsdb import source_flags

from stormotel import schema, units

#: --settle when a next run will cover the most recent time (a state file or --scheduled): late
#: scrapes and remote writes land within it. A one-off run has no next run and reads up to now.
SCHEDULED_SETTLE_S = 60.0


def parse_duration(text: str) -> float:
    """``90s``, ``15m``, ``1h30m``, ``2d`` → seconds (Prometheus duration syntax), for argparse."""
    try:
        return units.parse_duration(text)
    except units.UnitError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def positive_duration(text: str) -> float:
    seconds = parse_duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be longer than zero")
    return seconds


#: The last instant an int64 of nanoseconds holds (2262-04-11): every timestamp the analyzer
#: keeps is int64 ns, so a time past it is a usage error, not an overflow deep inside.
MAX_TIME_NS = 2**63 - 1


def parse_time(text: str) -> int:
    """RFC 3339 (``2026-11-21T05:00:00Z``) or unix seconds → ns since the epoch, between 1970
    and 2262 (int64 ns); anything else is a usage error naming the value."""
    s = text.strip()
    bad = argparse.ArgumentTypeError(
        f"{text!r} is not a time (use RFC 3339 like 2026-11-21T05:00:00Z, or unix seconds "
        "between 0 and 9223372036)")
    try:
        seconds = float(s)
    except ValueError:
        try:
            dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
        except ValueError:
            raise bad from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        seconds = dt.timestamp()
    if not 0 <= seconds * 1e9 < MAX_TIME_NS:  # NaN and inf fail too
        raise bad
    return round(seconds * 1e9)


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
    src.add_argument("--tsdb-read", default="auto",
                     choices=("auto", "query", "remote-read", "export-native", "export"),
                     help="how raw series are read: auto (default) probes each endpoint for "
                          "Prometheus remote read, then VictoriaMetrics' native export, then "
                          "its JSON export, and falls back to the query API (the report says "
                          "which was used)")
    add_plugin_flags(src, source_flags())
    _add_dcgm_arguments(parser)
    _add_window_arguments(parser)
    _add_sink_arguments(parser)
    add_http_arguments(parser)


def _dcgm_field(text: str) -> dict[str, tuple[str, int | None]]:
    try:
        return schema.parse_dcgm_fields(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _add_dcgm_arguments(parser: argparse.ArgumentParser) -> None:
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
    dcgm.add_argument("--dcgm-collect-interval", type=positive_duration, default="30s",
                      metavar="DURATION",
                      help="dcgm-exporter's own collection interval (its --collect-interval; "
                           "default %(default)s): a scraped value may be that old, so a lead "
                           "shorter than it is not claimed")
    dcgm.add_argument("--dcgm-field", action="append", default=[], type=_dcgm_field,
                      metavar="ROLE=METRIC[:UNIT]",
                      help="read this metric as the framebuffer's ROLE (used, free, reserved, "
                           "total), UNIT bytes or mib (default: told apart by the values), for "
                           "a dcgm-exporter that renamed its fields; repeatable (also "
                           f"${DCGM_FIELDS_ENV}). Framebuffer names of the known "
                           "generations are found without it")


def _add_window_arguments(parser: argparse.ArgumentParser) -> None:
    win = parser.add_argument_group("window and cron safety")
    win.add_argument("--since", type=positive_duration, metavar="DURATION",
                     help="analyse the last DURATION (default 1h; with --state-file only the "
                          "first run uses it)")
    win.add_argument("--start", type=parse_time, metavar="TIME",
                     help="window start (RFC 3339 or unix seconds); with --end, overrides "
                          "--since and the state file")
    win.add_argument("--end", type=parse_time, metavar="TIME", help="window end (default now)")
    win.add_argument("--now", type=parse_time, metavar="TIME",
                     help="the time this run takes as now (default: the clock; never later): "
                          "a scheduled run as of a past cron tick, for a replay or a backfill "
                          "(the window ends --settle before it and the state continues there)")
    win.add_argument("--state-file", type=Path, metavar="FILE",
                     help="records the last analysed window end per job, so consecutive runs "
                          "cover time without gaps or overlaps (locked while a run is active)")
    # A duration's default is written once, as text: argparse parses it like a given value.
    win.add_argument("--settle", type=parse_duration, default=None, metavar="DURATION",
                     help="end the window this long before now and leave that time for the "
                          "next run, so late scrapes/remote writes are not missed (default "
                          f"{SCHEDULED_SETTLE_S:g}s with --state-file or --scheduled, where a "
                          "next run exists; 0 for a one-off run, which reads up to now)")
    win.add_argument("--max-window", type=positive_duration, default="1d", metavar="DURATION",
                     help="analyse at most this much per run when catching up "
                          "(default %(default)s)")
    win.add_argument("--timeout", type=positive_duration, default="5m", metavar="DURATION",
                     help="budget for the whole run: every request is cut short to fit "
                          "(default %(default)s)")
    win.add_argument("--scheduled", action="store_true",
                     help="run as a scheduled job (CronJob): exit 0 when the run succeeded, "
                          "findings written included; non-zero only when it failed (a "
                          "Kubernetes Job that exits 1 is marked failed and retried)")
    win.add_argument("--job-selector", metavar="MATCHERS",
                     help='with --scheduled and no --job-id: analyse only the jobs whose '
                          'series match these PromQL matchers, e.g. namespace="ml"')
    win.add_argument("--shard", type=_shard_arg, metavar="I/N",
                     help="with --scheduled and no --job-id: analyse only the discovered jobs "
                          "whose stable hash falls in shard I of N (0-based); 'N' alone takes I "
                          "from $JOB_COMPLETION_INDEX (a Kubernetes Indexed Job). State is "
                          "then kept per job, so N may change between runs")
    win.add_argument("--dry-run", action="store_true",
                     help="print what would be written (annotations, series, dashboard, trace) "
                          "and change nothing, state file included")


def _add_sink_arguments(parser: argparse.ArgumentParser) -> None:
    out = parser.add_argument_group("sinks: where findings are written")
    out.add_argument("--grafana-url", metavar="URL",
                     help="Grafana base URL: one region annotation per finding (idempotent)")
    out.add_argument("--grafana-token-file", type=Path, metavar="FILE",
                     help=f"Grafana service-account token (else ${ENV_GRAFANA_TOKEN}); "
                          "never logged")
    out.add_argument("--grafana-dashboard-uid", metavar="UID",
                     help="attach annotations to this dashboard (default: organisation-wide)")
    out.add_argument("--grafana-dashboard", action="store_true",
                     help="create/update the job's incident dashboard through Grafana's API")
    out.add_argument("--grafana-folder", metavar="UID",
                     help="folder (folderUid) the incident dashboard is saved into "
                          "(default: Grafana's General folder)")
    out.add_argument("--incident-dashboard", type=Path, metavar="FILE",
                     help="write the job's incident dashboard JSON to FILE")
    out.add_argument("--name-translation", choices=schema.NAME_TRANSLATIONS,
                     default=schema.DEFAULT_NAME_TRANSLATION, metavar="STRATEGY",
                     help="how the TSDB stores the tracker's OTLP series: Prometheus 3's otlp "
                          "translation_strategy, one of " + ", ".join(schema.NAME_TRANSLATIONS)
                          + "; the incident dashboard's panels select those names, as "
                          "`stormotel dashboards --name-translation` does for the shipped ones "
                          "(default: %(default)s; the analysis itself reads every spelling)")
    out.add_argument("--remote-write", action="append", default=[], metavar="URL",
                     help="Prometheus remote-write URL for the findings series (e.g. "
                          "http://prom:9090/api/v1/write, http://vm:8428/api/v1/write); "
                          "repeatable")
    out.add_argument("--pushgateway", metavar="URL",
                     help="Pushgateway base URL for the findings series (group job="
                          f"{PUSH_JOB}, job_id=ID, replaced each run)")
    out.add_argument("--perfetto", type=Path, metavar="FILE",
                     help="write the merged multi-rank timeline as Chrome trace JSON "
                          "(opens in ui.perfetto.dev)")
    add_plugin_flags(out, sink_flags())


def add_plugin_flags(group: argparse._ArgumentGroup, flags: tuple[PluginFlag, ...]) -> None:
    """The flags plug-ins declare in their tables (sinks/dispatch.SINKS, sources/tsdb
    TSDB_SOURCES), added as declared; cli/args.py hands their values back in ``extra``."""
    for flag in flags:
        group.add_argument(*flag.names, **flag.kwargs)


def _shard_arg(text: str) -> ShardSpec:
    try:
        return parse_shard(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix(f"--shard {text!r}: ")) from None
