"""What ``stormotel analyze`` was asked to do, as typed, frozen options.

The command line is parsed and checked once
(:func:`stormotel.analyzers.cli.args.options_from_args`); everything below it — the file and
TSDB sources, the stall evidence, the scheduled job, the sinks — receives these options, never the
argparse namespace, so a reader sees in one place what each part can be told, and no part re-checks
a flag or guesses whether it was declared. Field names are the flags' names (``--max-window`` →
``max_window``); values are parsed (seconds, nanoseconds since the epoch, paths, rank sets). No
heavy import: building them stays cheap.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stormotel.analyzers.algorithms.settings import Settings
from stormotel.analyzers.http_flags import HttpSettings

from stormotel import schema

#: ``role=METRIC[:unit]`` pairs, comma separated (unit ``bytes`` or ``mib``): names a dcgm-exporter
#: rename that schema's framebuffer table does not know, for `stormotel analyze --dcgm` (also its
#: --dcgm-field flag). An analyzer setting, so it lives here, not in the tracker's environment.
DCGM_FIELDS_ENV = "STORMOTEL_DCGM_FIELDS"
ENV_GRAFANA_TOKEN = "GRAFANA_TOKEN"  # the Grafana sink's token, when no file is given
PUSH_JOB = "stormotel_analyzer"  # the Pushgateway grouping key's job


# --- --shard I/N: which of the discovered jobs this pod analyses (scheduled/shard.py) --------
#: Set by Kubernetes in every pod of an Indexed Job (completionMode: Indexed).
ENV_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"
#: More shards than this is a typo, not a cluster.
MAX_SHARDS = 10_000


@dataclass(frozen=True, eq=False, init=False)
class PluginFlag:
    """A flag a plug-in declares as data (argparse's own arguments, kept as given): a sink's row
    in ``sinks.dispatch.SINKS``, a TSDB source class in ``sources.tsdb.TSDB_SOURCES``. The command
    line adds it from the table and hands its value to the plug-in in ``SinkOptions.extra`` /
    ``TsdbOptions.extra`` under :attr:`dest`, so adding a plug-in with a flag touches no flag
    module, no options class and no line of ``cli/args.py`` (issue 35: two files a plug-in)."""

    names: tuple[str, ...]
    kwargs: Mapping[str, Any]

    def __init__(self, *names: str, **kwargs: Any) -> None:
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "kwargs", kwargs)

    @property
    def dest(self) -> str:
        """The key of its value (argparse's own rule: ``--my-flag`` → ``my_flag``)."""
        return str(self.kwargs.get("dest") or self.names[0].lstrip("-").replace("-", "_"))


def flag_values(values: Any, flags: tuple[PluginFlag, ...]) -> dict[str, Any]:
    """Each flag's value in a parsed namespace (None where the parser did not declare it)."""
    return {flag.dest: getattr(values, flag.dest, None) for flag in flags}


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, job_id: str) -> bool:
        return shard_of(job_id, self.count) == self.index


@dataclass(frozen=True)
class ShardSpec:
    """``--shard`` as given: the index is None when it comes from ``JOB_COMPLETION_INDEX``."""

    index: int | None
    count: int


def shard_of(job_id: str, count: int) -> int:
    """The job's shard among ``count``: stable across runs, hosts and Python versions."""
    digest = hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count


def parse_shard(text: str) -> ShardSpec:
    """``I/N`` or ``N``; ValueError (argparse's usage error) with the reason otherwise."""
    index_text, sep, count_text = text.strip().rpartition("/")
    if not sep:
        index_text, count_text = "", text.strip()
    try:
        count = int(count_text)
        index = int(index_text) if sep else None
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected I/N (e.g. 0/4) or N") from None
    if not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"--shard {text!r}: N must be 1..{MAX_SHARDS}")
    if index is not None and not 0 <= index < count:
        raise ValueError(f"--shard {text!r}: I must be 0..{count - 1}")
    return ShardSpec(index, count)


def resolve_shard(spec: ShardSpec, env: Mapping[str, str] | None = None) -> Shard:
    """The shard this pod runs: ``I`` as given, else ``JOB_COMPLETION_INDEX``; ValueError
    with the reason when neither gives an index in 0..N-1."""
    if spec.index is not None:
        return Shard(spec.index, spec.count)
    raw = (os.environ if env is None else env).get(ENV_COMPLETION_INDEX, "")
    if not raw.strip().isdigit():
        raise ValueError(f"--shard {spec.count} takes its index from ${ENV_COMPLETION_INDEX} "
                         "(set in a Kubernetes Indexed Job), which is "
                         f"{'not set' if not raw else repr(raw[:20]) + ', not an index'}; "
                         f"give --shard I/{spec.count} elsewhere")
    index = int(raw)
    if index >= spec.count:
        raise ValueError(f"${ENV_COMPLETION_INDEX}={index} is not below --shard {spec.count} "
                         "(the chart's shards and the Job's completions must agree)")
    return Shard(index, spec.count)


@dataclass(frozen=True)
class SourceOptions:
    """Telemetry files (``PATH``\\ s: files, folders, globs) and OOM ring dumps to read."""

    paths: tuple[str, ...]
    oom_dumps: tuple[str, ...]


@dataclass(frozen=True)
class AnalysisOptions:
    """How the analyzer judges: ranks (None = all), clock alignment, and the thresholds (the
    ``--sensitivity`` preset with the ``--set`` overrides, checked)."""

    ranks: frozenset[int] | None
    align: str
    settings: Settings


@dataclass(frozen=True)
class OutputOptions:
    """The report: its format, where it goes (None or ``-`` = stdout), the HTML report, and
    whether progress lines are printed."""

    format: str
    output: str | None
    html: Path | None
    quiet: bool


@dataclass(frozen=True)
class StallOptions:
    """Stuck-job evidence: Flight Recorder dumps and worker logs; ``world_size`` when ranks
    without evidence must be counted."""

    flight_recorder: Path | None
    logs: tuple[str, ...]
    world_size: int | None
    #: stack snapshots named with --stacks, and telemetry PATHs to look in (their stacks/)
    stacks: tuple[str, ...] = ()
    stacks_in: tuple[str, ...] = ()
    #: ``--job-id``: with logs of several run ids, the run to judge (the others are skipped);
    #: stack snapshots of other jobs are left out (counted), like every other input
    job_id: str | None = None
    #: live sources of a running job: NCCL RAS endpoints, Flight Recorder pipe prefix
    nccl_ras: tuple[str, ...] = ()
    fr_pipe: str | None = None
    live_timeout_s: float | None = None

    @property
    def wanted(self) -> bool:
        return bool(self.flight_recorder or self.logs or self.stacks or self.nccl_ras
                    or self.fr_pipe)


@dataclass(frozen=True)
class TsdbOptions:
    """The Prometheus-compatible endpoints to read, and how (stormotel or dcgm series)."""

    prometheus: tuple[str, ...]
    step: float | None
    concurrency: int
    dcgm: bool
    gpu_rank_map: Path | None
    rank_label: str | None
    dcgm_selector: str
    #: dcgm-exporter's collection interval: how old a scraped DCGM value may be.
    dcgm_collect_interval_s: float = 30.0
    #: --dcgm-field: framebuffer role → (metric, bytes per unit or None), merged over
    #: $STORMOTEL_DCGM_FIELDS by the source.
    dcgm_fields: tuple[tuple[str, str, int | None], ...] = ()
    #: ``--tsdb-read``: how raw series are read (``auto`` probes for a bulk API).
    read_api: str = "auto"
    #: The values of the flags the TSDB sources declare (``TsdbSource.flags``), by ``dest``.
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def wanted(self) -> bool:
        return bool(self.prometheus)


@dataclass(frozen=True)
class ScheduleOptions:
    """The window a TSDB run analyses and what keeps cron runs safe (seconds; ``start``/``end``
    in ns since the epoch)."""

    since: float | None
    start: int | None
    end: int | None
    state_file: Path | None
    settle: float
    max_window: float
    timeout: float
    scheduled: bool
    job_selector: str | None
    #: ``--shard``: this pod's share of the discovered jobs (None: all of them).
    shard: Shard | None = None
    #: ``--now``: the time the run takes as now, ns (None: the clock when the run starts).
    now: int | None = None


@dataclass(frozen=True)
class SinkOptions:
    """Where findings are written besides the report; ``dry_run`` prints instead (and leaves
    the state file alone)."""

    grafana_url: str | None
    grafana_token_file: Path | None
    grafana_dashboard_uid: str | None
    grafana_dashboard: bool
    grafana_folder: str | None
    incident_dashboard: Path | None
    remote_write: tuple[str, ...]
    pushgateway: str | None
    perfetto: Path | None
    dry_run: bool
    #: How the TSDB stores the tracker's OTLP series (Prometheus 3's ``translation_strategy``):
    #: the incident dashboard's panels select those names (docs/prometheus3.md).
    name_translation: str = schema.DEFAULT_NAME_TRANSLATION
    #: The values of the flags the sinks' rows declare (``SinkEntry.flags``), by ``dest``.
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def wanted(self) -> bool:
        return bool(self.grafana_url or self.remote_write or self.pushgateway or self.perfetto
                     or self.incident_dashboard or any(self.extra.values()))


@dataclass(frozen=True)
class JobOptions:
    """One job's run: its id, the TSDB to read, the window, the sinks and how to reach every
    endpoint. A file run uses the id, the sinks and the HTTP settings."""

    job_id: str | None
    tsdb: TsdbOptions
    schedule: ScheduleOptions
    sinks: SinkOptions
    http: HttpSettings
    quiet: bool


@dataclass(frozen=True)
class AnalyzeOptions:
    """Everything ``stormotel analyze`` was asked to do."""

    job: JobOptions
    source: SourceOptions
    analysis: AnalysisOptions
    stalls: StallOptions
    output: OutputOptions
