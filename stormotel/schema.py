"""The one place where stormotel spells its names.

Every OTel instrument name, unit, attribute key, span/event name and Prometheus series name lives
here. Exporters, the analyzer's queries, the dashboards' PromQL and the alert rules derive their
strings from this module, so renaming a metric is a one-line change and nothing drifts.

Naming follows OTel semantic conventions where one exists (``hw.gpu.memory.*`` for device-level
memory, attribute ``hw.id``) and the ``stormotel.`` namespace where none does. Prometheus names
follow the OTLP → Prometheus translation that the pull exporter
(``opentelemetry-exporter-prometheus``) actually serves: dots → underscores, unit ``By`` →
``_bytes``, ``s`` → ``_seconds``, monotonic counters get ``_total``; unit ``1`` gets NO suffix
there (the collector's Prometheus exporter adds ``_ratio``). :func:`prom_names` also lists the
spellings other translators produce so the analyzer accepts both.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from enum import StrEnum

SCHEMA_VERSION = "1"
INSTRUMENTATION_SCOPE = "stormotel"
SERVICE_NAME = "stormotel"


class Kind(StrEnum):
    GAUGE = "gauge"
    COUNTER = "counter"
    #: Non-monotonic sum (semconv UpDownCounter); a plain gauge in Prometheus, no ``_total``.
    UPDOWN_COUNTER = "updowncounter"
    #: Served as ``<prom>_bucket``/``_sum``/``_count`` in Prometheus.
    HISTOGRAM = "histogram"


@dataclass(frozen=True)
class Metric:
    """One OTel instrument and how it appears in Prometheus."""

    name: str
    unit: str
    kind: Kind
    description: str

    @property
    def prom(self) -> str:
        """Canonical Prometheus name after the standard OTLP translation."""
        return prom_name(self.name, self.unit, self.kind)

    @property
    def prom_series(self) -> tuple[str, ...]:
        """The series Prometheus stores: the name itself, or a histogram's three."""
        if self.kind is Kind.HISTOGRAM:
            return tuple(f"{self.prom}_{part}" for part in ("bucket", "sum", "count"))
        return (self.prom,)

    @property
    def prom_aliases(self) -> tuple[str, ...]:
        """Every spelling the analyzer accepts for this metric, canonical first."""
        return prom_names(self.name, self.unit, self.kind)


# --- identity: attribute keys (resource attributes AND data-point labels) -------------------------
# Data-point attribute keys are chosen to be valid Prometheus label names unchanged, so
# `{job_id="run-7", rank="2"}` works with no collector configuration.
ATTR_JOB_ID = "job_id"
ATTR_RANK = "rank"
ATTR_LOCAL_RANK = "local_rank"
ATTR_WORLD_SIZE = "world_size"
ATTR_HOST = "host"
ATTR_GPU = "gpu"  # device index on the host
ATTR_GPU_UUID = "gpu_uuid"
ATTR_HW_ID = "hw.id"  # semconv hardware id (GPU UUID when known, else index)
ATTR_SAMPLER = "sampler"  # cuda | nvml | simulated

# Labels put on every exported series, in this order.
IDENTITY_LABELS: tuple[str, ...] = (ATTR_JOB_ID, ATTR_RANK, ATTR_LOCAL_RANK, ATTR_WORLD_SIZE,
                                    ATTR_HOST, ATTR_GPU)

# Resource attributes (OTel semantic conventions) in addition to the identity keys above.
RES_SERVICE_NAME = "service.name"
RES_SERVICE_INSTANCE_ID = "service.instance.id"
RES_SERVICE_VERSION = "service.version"
RES_HOST_NAME = "host.name"
RES_K8S = {  # env var → resource attribute (the first of each; see ENV_K8S_* below)
    "K8S_POD_NAME": "k8s.pod.name",
    "K8S_NAMESPACE": "k8s.namespace.name",
    "K8S_NODE_NAME": "k8s.node.name",
}
RES_SCHEMA_VERSION = "stormotel.schema_version"

# Other data-point attribute keys.
ATTR_LEVEL = "level"  # threshold level: warning | critical
ATTR_REASON = "reason"  # why a sample or export was dropped
ATTR_DESTINATION = "destination"  # which exporter failed

# --- metrics ---------------------------------------------------------------------------------
BYTES = "By"
RATIO = "1"

DEVICE_USED = Metric("hw.gpu.memory.usage", BYTES, Kind.UPDOWN_COUNTER,
                     "Device memory in use as the driver reports it (all processes' view of"
                     " this GPU via NVML, or cudaMemGetInfo total-free).")
DEVICE_LIMIT = Metric("hw.gpu.memory.limit", BYTES, Kind.UPDOWN_COUNTER,
                      "Total device memory.")
DEVICE_UTILIZATION = Metric("hw.gpu.memory.utilization", RATIO, Kind.GAUGE,
                            "Device memory used / total.")
DEVICE_FREE = Metric("stormotel.device.memory.free", BYTES, Kind.GAUGE,
                     "Free device memory as the driver reports it.")
PROCESS_USED = Metric("stormotel.process.gpu.memory.usage", BYTES, Kind.GAUGE,
                      "This process's device memory where the driver reports it (NVML).")
ALLOC_ALLOCATED = Metric("stormotel.allocator.allocated", BYTES, Kind.GAUGE,
                         "Bytes held by live tensors in the framework allocator.")
ALLOC_RESERVED = Metric("stormotel.allocator.reserved", BYTES, Kind.GAUGE,
                        "Bytes the framework caching allocator has reserved from the driver.")
ALLOC_ACTIVE = Metric("stormotel.allocator.active", BYTES, Kind.GAUGE,
                      "Bytes in active allocator blocks.")
ALLOC_INACTIVE_SPLIT = Metric("stormotel.allocator.inactive_split", BYTES, Kind.GAUGE,
                              "Bytes in inactive, split (non-releasable) allocator blocks.")
GAP = Metric("stormotel.memory.gap", BYTES, Kind.GAUGE,
             "device used - allocator reserved: memory outside the framework allocator"
             " (NCCL buffers, cuDNN workspaces, other libraries).")
ESTIMATE = Metric("stormotel.memory.estimate", BYTES, Kind.GAUGE,
                  "Peak memory predicted for this rank before the job ran (stormotel estimate).")
STEP = Metric("stormotel.training.step", "{step}", Kind.GAUGE,
              "The training step the rank is in.")

# Peak over a rolling window of the tracker's own clock (default 30 s), never reset by a read:
# every scraper and exporter sees the same peak and no spike falls between scrapes
# (DESIGN.md "Resolution").
DEVICE_USED_PEAK = Metric("stormotel.device.memory.usage.peak", BYTES, Kind.GAUGE,
                          "Highest device used over the tracker's peak window (default 30 s).")
ALLOC_ALLOCATED_PEAK = Metric("stormotel.allocator.allocated.peak", BYTES, Kind.GAUGE,
                              "Highest allocator allocated over the tracker's peak window.")
ALLOC_RESERVED_PEAK = Metric("stormotel.allocator.reserved.peak", BYTES, Kind.GAUGE,
                             "Highest allocator reserved over the tracker's peak window.")
GAP_PEAK = Metric("stormotel.memory.gap.peak", BYTES, Kind.GAUGE,
                  "Highest gap over the tracker's peak window.")

ALLOC_RETRIES = Metric("stormotel.allocator.retries", "{retry}", Kind.COUNTER,
                       "cudaMalloc retries after the allocator flushed its cache.")
OOMS = Metric("stormotel.oom", "{oom}", Kind.COUNTER, "Out-of-memory errors seen by the allocator"
              " or caught by capture_oom.")
STALL_SNAPSHOTS = Metric("stormotel.stall.snapshots", "{snapshot}", Kind.COUNTER,
                         "Stack snapshots of every thread taken because the rank made no"
                         " progress (step/mark) for longer than its own rhythm allows.")
STALLED = Metric("stormotel.stalled", "1", Kind.GAUGE,
                 "1 while the rank is in a stall the tracker took a stack snapshot of (no"
                 " step/mark since), else 0.")
THRESHOLD_CROSSINGS = Metric("stormotel.threshold.crossings", "{crossing}", Kind.COUNTER,
                             "Upward crossings of the warning/critical device-memory percentage"
                             " (attribute level).")

# Tracker self-telemetry.
SAMPLES = Metric("stormotel.tracker.samples", "{sample}", Kind.COUNTER, "Samples taken.")
SAMPLES_DROPPED = Metric("stormotel.tracker.samples.dropped", "{sample}", Kind.COUNTER,
                         "Samples lost (sampler error, ring full, ...; attribute reason).")
EXPORT_FAILURES = Metric("stormotel.tracker.export.failures", "{export}", Kind.COUNTER,
                         "Exports that failed (attribute destination).")
SAMPLE_DURATION = Metric("stormotel.tracker.sample.duration", "s", Kind.HISTOGRAM,
                         "Wall time each sample took (sampler call + processing).")

MEMORY_GAUGES: tuple[Metric, ...] = (DEVICE_USED, DEVICE_LIMIT, DEVICE_FREE, PROCESS_USED,
                                      ALLOC_ALLOCATED, ALLOC_RESERVED, ALLOC_ACTIVE,
                                      ALLOC_INACTIVE_SPLIT, GAP)
PEAK_OF: dict[Metric, Metric] = {DEVICE_USED: DEVICE_USED_PEAK,
                                 ALLOC_ALLOCATED: ALLOC_ALLOCATED_PEAK,
                                 ALLOC_RESERVED: ALLOC_RESERVED_PEAK, GAP: GAP_PEAK}
ALL_METRICS: tuple[Metric, ...] = (*MEMORY_GAUGES, DEVICE_UTILIZATION, ESTIMATE, STEP,
                                   *PEAK_OF.values(), ALLOC_RETRIES, OOMS, THRESHOLD_CROSSINGS,
                                   SAMPLES, SAMPLES_DROPPED, EXPORT_FAILURES, SAMPLE_DURATION)

# --- edges as metrics, peak window (DESIGN.md "Resolution") ----------------------------------
# Each in-process edge (first qualifying rise, threshold crossing, OOM) is also a pair of gauges
# per rank and edge kind: the exact time of the latest edge (the Prometheus `…_timestamp_seconds`
# idiom) and its size, so a Prometheus-only deployment keeps sample-exact times whatever the
# scrape interval. The sampling interval says how exact "exact" is.
EDGE_TIMESTAMP = Metric("stormotel.edge.timestamp", "s", Kind.GAUGE,
                        "Unix time of the latest edge of each kind (attribute edge), to the"
                        " tracker's own sample.")
EDGE_SIZE = Metric("stormotel.edge.size", BYTES, Kind.GAUGE,
                   "Size of the latest edge of each kind: the rise above its baseline"
                   " (first_rise), device used at the crossing or the OOM.")
EDGE_GAP = Metric("stormotel.edge.gap", "s", Kind.GAUGE,
                  "Seconds from the tracker's previous sample to the latest edge's sample"
                  " (attribute edge): how long before its timestamp the edge may have happened."
                  " The sampling interval, unless the sampler ran late (a CPU-starved or stopped"
                  " process).")
SAMPLING_INTERVAL = Metric("stormotel.tracker.sampling.interval", "s", Kind.GAUGE,
                           "The tracker's sampling interval: the resolution of its edge times.")
ATTR_EDGE = "edge"
EDGE_FIRST_RISE = "first_rise"
EDGE_THRESHOLD_WARNING = "threshold_warning"
EDGE_THRESHOLD_CRITICAL = "threshold_critical"
EDGE_OOM = "oom"
EDGE_STALL = "stall"  # a stack snapshot was taken: the rank made no progress for its deadline
EDGE_KINDS = (EDGE_FIRST_RISE, EDGE_THRESHOLD_WARNING, EDGE_THRESHOLD_CRITICAL, EDGE_OOM,
              EDGE_STALL)
#: Default window of the peak gauges: covers one 30 s scrape, whoever reads.
PEAK_WINDOW_S = 30.0
ALL_METRICS = (*ALL_METRICS, EDGE_TIMESTAMP, EDGE_SIZE, EDGE_GAP, SAMPLING_INTERVAL,
               STALL_SNAPSHOTS, STALLED)
# Start and clean-stop edges of the tracker itself: alert rules tell a rank that stopped (stop
# timestamp seen) from one that died (silent without it), and never take a rank that has just
# started, or stopped cleanly, for a silent one.
TRACKER_START = Metric("stormotel.tracker.start.timestamp", "s", Kind.GAUGE,
                       "Unix time the tracker started sampling (one value per process).")
TRACKER_STOP = Metric("stormotel.tracker.stop.timestamp", "s", Kind.GAUGE,
                      "Unix time of the tracker's clean stop (stop_tracking, SIGTERM, atexit);"
                      " absent while it runs, and absent forever if the process died.")
TRACKER_STOP_REPORTED = Metric(
    "stormotel.tracker.stop.reported", "", Kind.GAUGE,
    "1 when this tracker delivers its stop timestamp on a clean stop (a final OTLP export, or a"
    " Prometheus endpoint that waits for one last scrape); 0 when a clean stop may look like a"
    " crash to a scraper.")
ALL_METRICS = (*ALL_METRICS, TRACKER_START, TRACKER_STOP, TRACKER_STOP_REPORTED)

# Sample field (analyzer Timeline / archive) → metric carrying it.
FIELD_METRICS: dict[str, Metric] = {
    "allocated": ALLOC_ALLOCATED,
    "reserved": ALLOC_RESERVED,
    "active": ALLOC_ACTIVE,
    "device_used": DEVICE_USED,
    "device_total": DEVICE_LIMIT,
    "device_free": DEVICE_FREE,
}
# Peak companions: the analyzer prefers the peak when sampling is coarser than the tracker's.
FIELD_PEAK_METRICS: dict[str, Metric] = {
    "allocated": ALLOC_ALLOCATED_PEAK,
    "reserved": ALLOC_RESERVED_PEAK,
    "device_used": DEVICE_USED_PEAK,
}

# --- spans and events ------------------------------------------------------------------------
SPAN_SESSION = "stormotel.session"
SPAN_STEP = "stormotel.step"
SPAN_MARK = "stormotel.mark"
EVENT_THRESHOLD = "stormotel.threshold_crossed"
EVENT_FIRST_RISE = "stormotel.first_rise"
EVENT_OOM = "stormotel.oom"
EVENT_SAMPLE = "stormotel.sample"  # archive mode may attach raw samples to spans

SPAN_ATTR_STEP = "stormotel.step.number"
SPAN_ATTR_MARK = "stormotel.mark.name"
SPAN_ATTR_MEM_START = "stormotel.memory.start_bytes"
SPAN_ATTR_MEM_END = "stormotel.memory.end_bytes"
SPAN_ATTR_MEM_PEAK = "stormotel.memory.peak_bytes"
EVENT_ATTR_LEVEL = ATTR_LEVEL
EVENT_ATTR_PERCENT = "stormotel.memory.percent"
EVENT_ATTR_BYTES = "stormotel.memory.bytes"
EVENT_ATTR_DELTA = "stormotel.memory.delta_bytes"
EVENT_ATTR_DUMP_PATH = "stormotel.oom.dump_path"
EVENT_ATTR_CONTEXT = "stormotel.oom.context"
EVENT_ATTR_MESSAGE = "exception.message"
# OpenTelemetry's exception event (semantic conventions): a step or mark span an exception left
# carries it (``record_exception``), with the type, message and formatted traceback
EVENT_EXCEPTION = "exception"
EVENT_ATTR_EXC_TYPE = "exception.type"
EVENT_ATTR_EXC_STACKTRACE = "exception.stacktrace"

# --- analyzer findings as Prometheus series (written by the analyzer job) ---------------------
# These are Prometheus-native (remote write / Pushgateway), so they are spelled as Prometheus names.
AN_LAST_SUCCESS = "stormotel_analyzer_last_success_timestamp_seconds"
AN_DURATION = "stormotel_analyzer_duration_seconds"
AN_RUNS = "stormotel_analyzer_runs_total"  # label outcome
AN_FINDINGS = "stormotel_analyzer_findings"  # labels kind, severity
AN_FIRST_CAUSE = "stormotel_analyzer_first_cause_suspect"  # labels rank, confidence; value 1
AN_FIRST_CAUSE_LEAD = "stormotel_analyzer_first_cause_lead_seconds"  # label rank
AN_GAP_DRIFT_SLOPE = "stormotel_analyzer_gap_drift_slope_bytes_per_second"  # label rank
AN_GAP_TIME_TO_FULL = "stormotel_analyzer_gap_time_to_full_seconds"  # label rank
AN_COLLECTIVE_CONFIDENCE = "stormotel_analyzer_collective_confidence"  # label rank
AN_STALL = "stormotel_analyzer_stall_finding"  # labels kind, rank
# `stormotel serve` (the Alertmanager receiver): its own /metrics, in its own registry.
SERVE_WEBHOOKS = "stormotel_serve_webhooks"  # counter (_total), label result
SERVE_ALERTS = "stormotel_serve_alerts"  # counter (_total), label with_job
SERVE_ANALYSES = "stormotel_serve_analyses"  # counter (_total), label outcome
SERVE_ANALYSIS_SECONDS = "stormotel_serve_analysis_duration_seconds"  # histogram
SERVE_QUEUE_DEPTH = "stormotel_serve_queue_depth"
SERVE_INFLIGHT = "stormotel_serve_analyses_in_flight"
#: The annotation every job-scoped alert carries when the rules know the receiver's URL.
ANNOTATION_REPORT_URL = "report_url"
AN_ESTIMATE_RATIO = "stormotel_analyzer_estimate_ratio"  # label rank: actual peak / estimate
AN_MISSING_RANKS = "stormotel_analyzer_missing_ranks"
ANALYZER_LABEL_KIND = "kind"
ANALYZER_LABEL_SEVERITY = "severity"
ANALYZER_LABEL_CONFIDENCE = "confidence"
ANALYZER_LABEL_OUTCOME = "outcome"

# --- NVIDIA dcgm-exporter series (MiB) --------------------------------------------------------
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"
DCGM_FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"
DCGM_UNIT_BYTES = 1024 * 1024
DCGM_GPU_LABELS = ("gpu", "UUID", "Hostname", "hostname", "pod", "namespace",
                   "exported_pod", "exported_namespace")

# dcgm-exporter across generations. Up to 4.8.x (DCGM <= 4.6) the framebuffer fields are
# DCGM_FI_DEV_FB_{USED,FREE,RESERVED} in MiB, labelled `Hostname` (4.8.3, upstream commit
# d5e5f51 "Rename Hostname label to hostname", made it `hostname`) - read from dcgm-exporter's
# own etc/default-counters.csv and internal/pkg/rendermetrics/render_metrics.go at tag
# 4.5.3-4.8.2 and that commit. Exporter 4.9 (DCGM 4.7) renames default fields to DCGM 4.7's
# names and reports framebuffer memory in bytes; neither its counters CSV nor DCGM 4.7's
# dcgm_fields.h was available to confirm the new names (the upstream snapshots end at 4.8.2 /
# DCGM 4.6.0). So nothing below trusts a name for the unit: the reader and the recording rules
# tell MiB from bytes by what the series say (a name that spells its unit, else the size: no GPU
# has 16 TiB = 2**24 MiB, and none has less than 16 MiB = 2**24 bytes, so a GPU whose FB series
# reach 2**24 reports bytes), and every framebuffer name matching DCGM_FB_NAME_RE is read, so a
# renamed field is found without a release. The analyzer's $STORMOTEL_DCGM_FIELDS
# (analyzers/options.py) overrides the mapping (docs/dcgm.md).
DCGM_FB_ROLES = ("used", "free", "reserved", "total")
#: Framebuffer gauges of any generation: DCGM_FI_DEV_FB_USED, a renamed …FB_USED_BYTES, or the
#: longer FRAMEBUFFER/MEMORY spellings; the role is the word after FB/FRAMEBUFFER/MEMORY.
DCGM_FB_NAME_RE = r"DCGM_FI_DEV_(?:FB|FRAMEBUFFER|FRAME_BUFFER)_(?:MEMORY_)?" \
                  r"(USED|FREE|RESERVED|TOTAL)(?:_BYTES|_B|_MIB|_MB)?"  # never _RATIO/_PERCENT
#: A name that spells its unit: the unit is that, whatever the values look like.
DCGM_NAME_UNITS = {"_BYTES": 1, "_B": 1, "_MIB": DCGM_UNIT_BYTES, "_MB": DCGM_UNIT_BYTES}
#: The size that tells the units apart (see above): 2**24 MiB = 16 TiB, 2**24 bytes = 16 MiB.
DCGM_BYTES_FLOOR = float(2 ** 24)
#: Recorded per GPU (UUID, GPU_I_ID) in bytes whichever generation is scraped, and per job/rank.
REC_DCGM_FB_USED_GPU = "stormotel:dcgm_fb_used_per_gpu:bytes"
REC_DCGM_FB_USED_RANK = "stormotel:dcgm_fb_used:bytes"


def dcgm_role_of(name: str) -> str | None:
    """``used``/``free``/``reserved``/``total`` for a framebuffer gauge of any generation."""
    m = re.fullmatch(DCGM_FB_NAME_RE, name.upper())
    return m.group(1).lower() if m else None


def dcgm_unit_of_name(name: str) -> int | None:
    """Bytes per unit when the name spells it (``…_BYTES``: 1, ``…_MIB``: MiB), else None."""
    upper = name.upper()
    for suffix, unit in sorted(DCGM_NAME_UNITS.items(), key=lambda kv: -len(kv[0])):
        if upper.endswith(suffix) and dcgm_role_of(upper[: -len(suffix)]) is not None:
            return unit
    return None


def parse_dcgm_fields(text: str) -> dict[str, tuple[str, int | None]]:
    """``used=DCGM_FI_X:bytes,free=DCGM_FI_Y`` → {role: (metric, bytes per unit or None)};
    ValueError with the offending part."""
    out: dict[str, tuple[str, int | None]] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        role, sep, rest = part.partition("=")
        metric, _, unit_text = rest.partition(":")
        role, metric = role.strip().lower(), metric.strip()
        if not sep or role not in DCGM_FB_ROLES or not re.fullmatch(r"[a-zA-Z_:][\w:]*", metric):
            raise ValueError(f"{part!r}: expected ROLE=METRIC[:bytes|mib] with ROLE one of "
                             f"{', '.join(DCGM_FB_ROLES)}")
        units = {"": None, "bytes": 1, "b": 1, "mib": DCGM_UNIT_BYTES}
        if unit_text.strip().lower() not in units:
            raise ValueError(f"{part!r}: unit must be bytes or mib")
        out[role] = (metric, units[unit_text.strip().lower()])
    return out

# --- Grafana annotation tags ------------------------------------------------------------------
ANNOTATION_TAG = "stormotel"


def annotation_tag(attr: str, value: object) -> str:
    """``attr=value``: how the analyzer's Grafana sink tags a finding with its job
    (:data:`ATTR_JOB_ID`) and each of its ranks (:data:`ATTR_RANK`), and so how the dashboards
    ask for them (``value`` a template variable there): one spelling for both sides."""
    return f"{attr}={value}"

# --- thresholds -------------------------------------------------------------------------------
THRESHOLD_WARNING = "memory_warning_percent"
THRESHOLD_CRITICAL = "memory_critical_percent"
DEFAULT_THRESHOLDS = {THRESHOLD_WARNING: 80.0, THRESHOLD_CRITICAL: 95.0}


# --- Prometheus translation -------------------------------------------------------------------
# Checked against opentelemetry-exporter-prometheus 0.66b1 (tests/tracker/test_prometheus_names.py):
# it maps By/s/ms but leaves unit "1" without a suffix; the collector spelling `_ratio` is an alias.
_UNIT_SUFFIX = {"By": "bytes", "s": "seconds", "ms": "milliseconds"}
_ALIAS_UNIT_SUFFIX = {"1": "ratio"}
_INVALID = re.compile(r"[^a-zA-Z0-9_:]")


def _sanitize(name: str) -> str:
    return re.sub(r"__+", "_", _INVALID.sub("_", name))


def prom_name(name: str, unit: str, kind: Kind) -> str:
    """The standard OTLP → Prometheus name (what the pull exporter serves)."""
    base = _sanitize(name)
    suffix = _UNIT_SUFFIX.get(unit, "")
    if suffix and not base.endswith("_" + suffix):
        base = f"{base}_{suffix}"
    if kind is Kind.COUNTER and not base.endswith("_total"):
        base += "_total"
    return base


@functools.lru_cache(maxsize=512)  # a pure function of a few dozen metrics, asked for per series
def prom_names(name: str, unit: str, kind: Kind) -> tuple[str, ...]:
    """Every spelling a Prometheus-compatible store may hold for one OTel metric.

    Canonical first; then the name without the unit suffix (collectors with
    ``add_metric_suffixes: false``) and the raw name with dots (UTF-8 names, Prometheus 3).
    """
    canonical = prom_name(name, unit, kind)
    plain = _sanitize(name) + ("_total" if kind is Kind.COUNTER else "")
    collector = canonical
    if unit in _ALIAS_UNIT_SUFFIX and kind is Kind.GAUGE:
        collector = f"{_sanitize(name)}_{_ALIAS_UNIT_SUFFIX[unit]}"
    out = [canonical]
    prom3 = [otlp_prom_name(name, unit, kind, s) for s in OTLP_STRATEGIES]
    for alt in (collector, plain, name, *prom3):
        if alt not in out:
            out.append(alt)
    return tuple(out)


# --- Prometheus 3's native OTLP ingestion (otlp.translation_strategy) ----------------------------
# Ported from prometheus/otlptranslator (metric_namer.go, unit_namer.go, strategy.go; the code
# Prometheus 3 runs on its /api/v1/otlp/v1/metrics receiver). Which name a series gets depends on
# the server's `otlp: translation_strategy:`. The analyzer accepts all four (prom_names); the
# rules and dashboards are generated for one of them (stored_name below; docs/prometheus3.md).
OTLP_UNDERSCORE_WITH_SUFFIXES = "UnderscoreEscapingWithSuffixes"  # Prometheus 3's default
OTLP_UNDERSCORE_NO_SUFFIXES = "UnderscoreEscapingWithoutSuffixes"
OTLP_UTF8_WITH_SUFFIXES = "NoUTF8EscapingWithSuffixes"
OTLP_NO_TRANSLATION = "NoTranslation"
OTLP_STRATEGIES = (OTLP_UNDERSCORE_WITH_SUFFIXES, OTLP_UNDERSCORE_NO_SUFFIXES,
                   OTLP_UTF8_WITH_SUFFIXES, OTLP_NO_TRANSLATION)
#: otlptranslator's unitMap (units the tracker uses and their neighbours) and perUnitMap.
_OTLP_UNITS = {"d": "days", "h": "hours", "min": "minutes", "s": "seconds",
               "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds", "By": "bytes",
               "KiBy": "kibibytes", "MiBy": "mebibytes", "GiBy": "gibibytes", "1": "",
               "%": "percent"}
_OTLP_PER_UNITS = {"s": "second", "m": "minute", "h": "hour", "d": "day"}
_NOT_COMPLIANT = re.compile(r"[^a-zA-Z0-9:]+")


def _otlp_unit_suffixes(unit: str) -> tuple[str, str]:
    """otlptranslator.buildUnitSuffixes: (main, per) suffixes; ``{…}`` annotations give none."""
    main_otel, _, per_otel = (part.strip() for part in unit.partition("/"))
    main = _OTLP_UNITS.get(main_otel, main_otel) if main_otel and not \
        set("{}") & set(main_otel) else ""
    per = ""
    if per_otel and not set("{}") & set(per_otel):
        per = "per_" + _OTLP_PER_UNITS.get(per_otel, per_otel)
    return main, per


def otlp_prom_name(name: str, unit: str, kind: Kind, strategy: str) -> str:
    """The series name Prometheus 3 stores for an OTLP metric under ``strategy``."""
    counter = kind is Kind.COUNTER  # monotonic sums; up-down counters are not
    ratio = unit == "1" and kind is Kind.GAUGE
    main, per = _otlp_unit_suffixes(unit)
    if strategy == OTLP_NO_TRANSLATION:
        return name
    if strategy == OTLP_UNDERSCORE_NO_SUFFIXES:
        out = "_".join(p for p in re.split(r"[^a-zA-Z0-9:_]+", name) if p)
        return "_" + out if out[:1].isdigit() else out
    if strategy == OTLP_UTF8_WITH_SUFFIXES:  # buildMetricName with suffixes
        out = name

        def trim(s: str, suffix: str) -> str:
            return s[: -(len(suffix) + 1)] if s.endswith(suffix) and \
                len(s) > len(suffix) + 1 else s
        if ratio:
            out = trim(out, "ratio")
        if counter:
            out = trim(out, "total")
        if per:
            out = trim(out, per)
        if main and not out.endswith(main):
            out = f"{out}_{main}"
        return out + (f"_{per}" if per else "") + ("_total" if counter else "") + \
            ("_ratio" if ratio else "")
    if strategy != OTLP_UNDERSCORE_WITH_SUFFIXES:
        raise ValueError(f"unknown OTLP translation strategy {strategy!r}")
    tokens = [p for p in _NOT_COMPLIANT.split(name) if p]  # normalizeName
    main_t = "_".join(p for p in _NOT_COMPLIANT.split(main) if p)
    per_t = "_".join(p for p in _NOT_COMPLIANT.split(per) if p).rstrip("_")
    if main_t in tokens:
        main_t = ""
    if per_t == "per" or per_t in tokens:
        per_t = ""
    tokens += [t for t in (main_t, per_t) if t]
    if counter:
        tokens = [t for t in tokens if t != "total"] + ["total"]
    if ratio:
        tokens = [t for t in tokens if t != "ratio"] + ["ratio"]
    out = "_".join(tokens)
    return "_" + out if out[:1].isdigit() else out


#: ``stormotel dashboards --name-translation`` / the chart's ``nameTranslation``: which names the
#: generated rules and dashboards select. The default is what the pull exporter, a collector's
#: Prometheus exporters and Prometheus 3's default receiver all store for every series they read
#: (they differ only in unit-"1" gauges gaining ``_ratio``, which nothing generated reads).
NAME_TRANSLATIONS = OTLP_STRATEGIES
DEFAULT_NAME_TRANSLATION = OTLP_UNDERSCORE_WITH_SUFFIXES


def stored_name(metric: Metric, strategy: str = DEFAULT_NAME_TRANSLATION) -> str:
    """The series name a TSDB holds for ``metric`` when the tracker's data arrives under
    ``strategy`` (one of :data:`NAME_TRANSLATIONS`): the one place rules and dashboards get it."""
    if strategy == DEFAULT_NAME_TRANSLATION:
        return metric.prom
    return otlp_prom_name(metric.name, metric.unit, metric.kind, strategy)


def prom_label(attribute_key: str) -> str:
    """Attribute key → Prometheus label name (dots become underscores)."""
    return _sanitize(attribute_key)


# --- tracker: archive layout, edge spans, drop reasons, simulated-device env ---------
# The OTLP JSON-lines archive: <archive_dir>/<job_id>/rank-<R>.metrics.jsonl and .traces.jsonl,
# one ExportMetricsServiceRequest / ExportTraceServiceRequest per line (docs/tracker.md).
ARCHIVE_METRICS_SUFFIX = ".metrics.jsonl"
ARCHIVE_TRACES_SUFFIX = ".traces.jsonl"
# The compact format's spans: the same lines, zstd (stormotel/archive_spans.py).
ARCHIVE_COMPACT_TRACES_SUFFIX = ARCHIVE_TRACES_SUFFIX + ".zst"
ARCHIVE_RANK_PREFIX = "rank-"
# A zero-length span per in-process edge (first rise, threshold crossing, OOM) carrying one event
# with the exact sample timestamp; short spans are exported promptly, unlike the session span.
SPAN_EDGE = "stormotel.edge"
EVENT_ATTR_SERIES = "stormotel.memory.series"  # which sample field the edge was seen on
EVENT_ATTR_BASELINE = "stormotel.memory.baseline_bytes"
EVENT_ATTR_THRESHOLD = "stormotel.threshold.percent"  # the line that was crossed
# Seconds from the tracker's previous sample to the edge's: the edge happened at most this long
# before its timestamp. It is the sampling interval unless the sampler ran late (a CPU-starved
# or stopped process), when the nominal interval would claim a precision the tracker lacks.
EVENT_ATTR_SINCE_PREVIOUS = "stormotel.sample.since_previous_s"

# --- stack snapshots of a stalled rank (stormotel/stall_watch.py; analyzers/stalls/stacks.py) ---
# <archive_dir>/<job_id>/stacks/rank-R-PID-N.stack.txt (renamed by the tracker once seen) or
# ….stack.pending (the C watchdog wrote it, the rank never got the GIL back). First line: the
# header prefix and one JSON object; then faulthandler's traceback of every thread.
STACKS_DIR = "stacks"
FR_DUMPS_DIR = "flight-recorder"  # beside stacks/: the Flight Recorder dump asked at a stall
STACK_SUFFIX = ".stack.txt"
STACK_PENDING_SUFFIX = ".stack.pending"
STACK_HEADER_PREFIX = "# stormotel stack snapshot "
STACK_TRAILER_PREFIX = "# stormotel progress "  # after the traceback: step and marks
STACK_PROGRESS_SUFFIX = ".stack.progress"  # header only: progress after a stall got over
EVENT_STALL = "stormotel.stall"
EVENT_ATTR_STACK_PATH = "stormotel.stall.snapshot_path"
EVENT_ATTR_SINCE_PROGRESS = "stormotel.stall.since_progress_s"
EVENT_ATTR_DEADLINE = "stormotel.stall.deadline_s"
SPAN_ATTR_EDGE = "stormotel.edge.event"  # on SPAN_EDGE: which event it carries
SPAN_ATTR_SAMPLING_INTERVAL = "stormotel.sampling_interval_s"  # on SPAN_SESSION
SPAN_ATTR_SAMPLER = ATTR_SAMPLER  # on SPAN_SESSION
# Flight-recorder (ring buffer) dump: JSON lines, first line a header with this schema tag.
RING_DUMP_SCHEMA = "stormotel.ring/v1"
# Values of ATTR_DESTINATION / ATTR_REASON on the self-telemetry counters.
DEST_ARCHIVE = "archive"
DEST_OTLP = "otlp"
DEST_PROMETHEUS = "prometheus"
REASON_SAMPLER_ERROR = "sampler_error"
REASON_OVERRUN = "overrun"  # sampling fell behind its interval; ticks skipped
# Environment variables (STORMOTEL_* and the OTEL_* the tracker reads) are named in
# stormotel/environment.py, each once; launcher variables describing the identity stay here.
# Linger after an event (OOM, SIGTERM, uncaught exception): the tracker keeps its Prometheus
# endpoint up at the end until one scrape read the final state, at most this long (0: never).
# 20 s covers a 15 s scrape interval and leaves the final export inside the 30 s grace period
# of torchrun (SIGTERM, then SIGKILL 30 s later), Kubernetes and Slurm (KillWait).
LINGER_AFTER_EVENT_S_DEFAULT = 20.0

# --- dashboards & alert rules: recording-rule series, analyzer outcome values --------
# Recorded by dashboards/rules/stormotel-rules.yml, aggregated `by` the IDENTITY_LABELS so every
# recorded series keeps job_id/rank/host and nothing else; dashboards and alerts read these.
REC_DEVICE_USED_RATIO = "stormotel:gpu_memory_used:ratio"  # device used / limit, 0..1
REC_DEVICE_HEADROOM = "stormotel:gpu_memory_headroom:bytes"  # limit - used
REC_GAP_SLOPE = "stormotel:memory_gap:deriv_bytes_per_second"  # least-squares slope of the gap
REC_TIME_TO_FULL = "stormotel:gpu_memory_time_to_full:seconds"  # headroom / gap slope (slope > 0)
REC_ESTIMATE_RATIO = "stormotel:memory_estimate:actual_ratio"  # peak allocated / estimate
# Values of ANALYZER_LABEL_OUTCOME on AN_RUNS that mean the run succeeded; any other is a failure.
AN_OUTCOMES_SUCCESS: tuple[str, ...] = ("ok", "findings")

# --- tracker in real launchers / OTel deployments: identity sources, attribution, semconv ------
# Launcher job-id sources (stormotel/identity.py documents the order).
ENV_OPENMPI_JOB = ("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_hnp_uri")
STORE_JOB_ID_KEY = "stormotel/job_id"  # key agreed through the torch.distributed store
# Attribution: series labels (when set) and their standard resource attributes.
# --- GPU attribution: the rank identity info series and the DCGM join ---------------------------
# One series per rank, value 1, whose labels say who owns the GPU: joins dcgm-exporter's
# DCGM_FI_DEV_* (label UUID) to job/rank by gpu_uuid. Unit "" so no pipeline adds a suffix
# (unit "1" becomes `_ratio` behind an OTel Collector's Prometheus exporter).
RANK_INFO = Metric("stormotel.rank.info", "", Kind.GAUGE,
                   "Always 1; labels identify the rank's GPU, pod and scheduler job.")
ATTR_POD = "pod"
ATTR_NAMESPACE = "namespace"
ATTR_NODE = "node"
ATTR_SLURM_JOB_ID = "slurm_job_id"
ATTR_SLURM_STEP_ID = "slurm_step_id"
ATTRIBUTION_LABELS: tuple[str, ...] = (ATTR_POD, ATTR_NAMESPACE, ATTR_NODE, ATTR_SLURM_JOB_ID,
                                       ATTR_SLURM_STEP_ID)
RES_K8S_POD = "k8s.pod.name"
RES_K8S_NAMESPACE = "k8s.namespace.name"
RES_K8S_NODE = "k8s.node.name"
RES_SLURM_JOB_ID = "slurm.job.id"
RES_SLURM_STEP_ID = "slurm.step.id"
ENV_K8S_POD = ("K8S_POD_NAME", "POD_NAME")
ENV_K8S_NAMESPACE = ("K8S_NAMESPACE", "POD_NAMESPACE", "K8S_POD_NAMESPACE")
ENV_K8S_NODE = ("K8S_NODE_NAME", "NODE_NAME")
# Semconv hardware attributes on every series when the sampler knows them.
ATTR_HW_NAME = "hw.name"
ATTR_HW_MODEL = "hw.model"
ATTR_HW_VENDOR = "hw.vendor"
# Spans: a mark's span is named by the mark itself; this attribute says which kind of span it is.
SPAN_ATTR_KIND = "stormotel.span.kind"
SPAN_KIND_STEP = "step"
SPAN_KIND_MARK = "mark"
# Self-telemetry reasons for configuration fallbacks and archive lines lost while unwritable.
REASON_BAD_CONFIG = "bad_config"
# Stormlog compatibility: its threshold names beyond the two shared ones, and its defaults.
STORMLOG_THRESHOLD_LEAK = "memory_leak_threshold"  # bytes growth between samples
STORMLOG_THRESHOLD_FRAGMENTATION = "fragmentation_threshold"  # inactive split / reserved
STORMLOG_DEFAULTS = {STORMLOG_THRESHOLD_LEAK: float(100 * 1024 * 1024),
                     STORMLOG_THRESHOLD_FRAGMENTATION: 0.3}
STORMLOG_SCHEMA_VERSION = 4
# Bucket bounds (seconds) of the sample-duration histogram: 0.1 ms (cuda) .. 1 s (a stuck driver).
SAMPLE_DURATION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                           0.1, 0.25, 0.5, 1.0)
# --- compact archive: many samples per OTLP line, zstd, rotated (stormotel/archive_writer.py) ---
ARCHIVE_FORMAT_LINES = "lines"  # one SDK-encoded request per sample, plain JSON lines
ARCHIVE_FORMAT_COMPACT = "compact"  # one request per batch, every sample, zstd, rotated
ARCHIVE_FORMATS: tuple[str, ...] = (ARCHIVE_FORMAT_LINES, ARCHIVE_FORMAT_COMPACT)
ARCHIVE_FORMAT_DEFAULT = ARCHIVE_FORMAT_COMPACT  # what a tracker writes unless told otherwise
REASON_ARCHIVE_QUEUE_FULL = "archive_queue_full"  # the archive writer fell behind
# --- per-job alerting: placement labels, per-rank problem series, analyzer run times ----------
# Labels Prometheus (target labels) or a global ruler (Thanos/Mimir) put on every series; rules
# keep them in every aggregation so two clusters' `train-1` never merge into one alert.
LABEL_NAMESPACE = "namespace"
LABEL_CLUSTER = "cluster"
PLACEMENT_LABELS: tuple[str, ...] = (LABEL_NAMESPACE, LABEL_CLUSTER)
# Memory the allocator could not give back: device used - (reserved - allocated), / limit.
REC_IN_USE_RATIO = "stormotel:gpu_memory_in_use:ratio"
# Per-rank problem series (present only while the rank has the problem); alerts count them
# per job and list the ranks.
REC_RANK_MEMORY_PRESSURE = "stormotel:rank_memory_pressure:ratio"  # in-use ratio while retrying
REC_RANK_GAP_DRIFT = "stormotel:rank_gap_drift:bytes_per_second"  # sustained growth only
REC_RANK_GAP_FILLS = "stormotel:rank_gap_fills_device:bytes"  # predicted growth > headroom
REC_RANK_SILENT = "stormotel:rank_silent:bool"  # 1: reported in the last hour, silent now
REC_RANK_ACTIVE = "stormotel:rank_active:bool"  # the rank sampled (or tried to) recently
REC_RANK_DROP_RATIO = "stormotel:rank_samples_dropped:ratio"  # dropped / (taken + dropped)
REC_RANK_OOMS = "stormotel:rank_ooms:increase"  # OOMs in the window, first appearance included
# Per-rank alerting series (one per rank, identity + placement labels; empty on a healthy job).
REC_RANK_SEEN = "stormotel:rank_seen:bool"  # the rank reported within the presence window
REC_RANK_STOPPED = "stormotel:rank_stopped_cleanly:timestamp"  # its latest run stopped cleanly
REC_RANK_GAP_FILLS_SOON = "stormotel:rank_gap_fills_device_soon:bytes"  # fast predict_linear
# Device used (allocator and gap together) filling the device: fast (critical) and slow (warning);
# empty where the gap alone explains it (the gap series name the cause).
REC_RANK_USED_FILLS_SOON = "stormotel:rank_memory_fills_device_soon:bytes"
REC_RANK_USED_FILLS = "stormotel:rank_memory_fills_device:bytes"
REC_RANK_STALLED = "stormotel:rank_stalled:step"  # samples go on, the step does not advance
#: One series per rank with the GPU UUID and pod it ran on (latest process), for alert labels.
REC_RANK_PLACEMENT = "stormotel:rank_placement:info"
# Unix time of the analyzer's last failed run for a job (written by failing runs).
AN_LAST_FAILURE = "stormotel_analyzer_last_failure_timestamp_seconds"
#: Labels of RANK_INFO, in order; an unknown value is left out, never exported empty.
RANK_INFO_LABELS: tuple[str, ...] = (*IDENTITY_LABELS, ATTR_GPU_UUID, ATTR_POD, ATTR_NAMESPACE,
                                     ATTR_NODE, ATTR_SLURM_JOB_ID, ATTR_SLURM_STEP_ID)
#: Identity carried into the analyzer's findings, annotations and reports for the ranks they name.
LOCATION_LABELS: tuple[str, ...] = (ATTR_HOST, ATTR_GPU, ATTR_GPU_UUID, ATTR_POD,
                                       ATTR_NAMESPACE, ATTR_NODE, ATTR_SLURM_JOB_ID)
#: OTel resource attribute (K8S_* downward-API env, OTEL_RESOURCE_ATTRIBUTES) → RANK_INFO label.
RES_TO_RANK_INFO = {"k8s.pod.name": ATTR_POD, "k8s.namespace.name": ATTR_NAMESPACE,
                    "k8s.node.name": ATTR_NODE}
#: Slurm's own variables for the job and step ids.
ENV_SLURM_RANK_INFO = {"SLURM_JOB_ID": ATTR_SLURM_JOB_ID, "SLURM_STEP_ID": ATTR_SLURM_STEP_ID}
DCGM_LABEL_UUID = "UUID"
DCGM_LABEL_GPU_INSTANCE = "GPU_I_ID"  # MIG: one series per GPU instance of a UUID
DCGM_LABELS_HOSTNAME = ("Hostname", "hostname")  # dcgm-exporter spelled it both ways over time
#: DCGM's "no value" sentinels start at DCGM_INT32_BLANK (0x7ffffff0) for 32-bit fields and
#: DCGM_INT64_BLANK (0x7ffffffffffffff0; +1 NOT_FOUND, +2 NOT_SUPPORTED, +3 NOT_PERMISSIONED)
#: for 64-bit ones. No framebuffer holds 2**31 MiB, so any FB value at or above the smaller one
#: is a sentinel: no data, never a reading.
DCGM_INT32_BLANK = 0x7FFFFFF0
DCGM_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
DCGM_INT64_NOT_SUPPORTED = DCGM_INT64_BLANK + 2
DCGM_FB_SENTINEL_FLOOR_MIB = float(DCGM_INT32_BLANK)
#: The subset put on the analyzer's per-rank findings series (few values per job, no UUIDs).
FINDING_ATTRIBUTION_LABELS: tuple[str, ...] = (ATTR_HOST, ATTR_GPU, ATTR_POD, ATTR_NAMESPACE)
