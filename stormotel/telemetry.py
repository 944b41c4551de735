"""OTel wiring: the tracker's numbers as instruments, and the destinations they are exported to.

Every instrument is *observable*: the sampling thread only updates :class:`TrackerState`, and each
export (a Prometheus scrape, an OTLP push, an archive line) reads it through callbacks. The peak
gauges are the maximum over a :class:`RollingPeak` window of the tracker's own clock (default
30 s), never reset by a read: an HA pair of Prometheus servers, a collector and a person running
``curl`` all see the same peak, and no spike falls between scrapes of up to the window. Edges
(first rise, threshold crossings, OOMs) are also gauges — the exact time and size of the latest
edge of each kind — so a TSDB keeps sample-exact times whatever its scrape interval.

Destinations (any combination): the OTLP JSON-lines archive (official file exporter, one line
per sample), OTLP gRPC/HTTP (official exporters, standard ``OTEL_*`` variables) and a Prometheus
pull endpoint (official ``PrometheusMetricReader`` + prometheus-client HTTP server).

The ``OTEL_*`` variables mean what the OTel specification says: metrics and traces are enabled
separately (``OTEL_{METRICS,TRACES}_EXPORTER``, per-signal endpoints), the default protocol is
http/protobuf, a base endpoint gets ``/v1/<signal>`` appended, the temporality preference is
honoured, and a bad value is a logged, counted fallback rather than an exception in training.
"""

from __future__ import annotations

import logging
import math
import operator
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import (
    AlwaysOffExemplarFilter,
    MeterProvider,
)
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from stormotel import schema
from stormotel.config import ExportConfig
from stormotel.edges import LEVELS
from stormotel.environment import (
    export_interval_ms,
    otlp_timeout_s,
    temporality_preference,
)
from stormotel.exporters import (
    ArchiveStream,
    GuardedMetricExporter,
    GuardedSpanExporter,
    last_exporter_log,
)
from stormotel.otlp_hint import likely_cause
from stormotel.sample_duration import DurationHistogram, prometheus_reader, temporality_of
from stormotel.samplers.base import Sample

if TYPE_CHECKING:
    from stormotel.scrape_watch import ScrapeWatch

__all__ = ["Destination", "Edge", "RollingPeak", "Telemetry", "TrackerState", "archive_paths"]

log = logging.getLogger("stormotel.telemetry")

_PEAK_FIELDS = ("device_used", "allocated", "reserved", "gap")  # order of RollingPeak columns
_PEAK_METRICS = (schema.DEVICE_USED_PEAK, schema.ALLOC_ALLOCATED_PEAK,
                 schema.ALLOC_RESERVED_PEAK, schema.GAP_PEAK)
_FIELD_OF: dict[schema.Metric, str] = {
    schema.DEVICE_USED: "device_used", schema.DEVICE_LIMIT: "device_total",
    schema.DEVICE_FREE: "device_free", schema.PROCESS_USED: "process_used",
    schema.ALLOC_ALLOCATED: "allocated", schema.ALLOC_RESERVED: "reserved",
    schema.ALLOC_ACTIVE: "active", schema.ALLOC_INACTIVE_SPLIT: "inactive_split",
    schema.GAP: "gap",
}


def archive_paths(archive_dir: str | os.PathLike[str], job_id: str,
                  rank: int) -> tuple[Path, Path]:
    """``<archive_dir>/<job_id>/rank-<R>.metrics.jsonl`` and ``….traces.jsonl``."""
    base = Path(archive_dir) / job_id / f"{schema.ARCHIVE_RANK_PREFIX}{rank}"
    return (base.with_name(base.name + schema.ARCHIVE_METRICS_SUFFIX),
            base.with_name(base.name + schema.ARCHIVE_TRACES_SUFFIX))


#: A sample's peak-tracked fields as one tuple (one C call: this runs for every sample).
_peak_values: Callable[[Sample], tuple[float | int | None, ...]] = \
    operator.attrgetter(*_PEAK_FIELDS)


class RollingPeak:
    """Highest value of each peak-tracked field over the last ``window_s`` of sample time.

    Rolled by the samples' own timestamps in ``buckets`` time buckets (O(1) per sample, O(buckets)
    per read) and never reset by a read, so every reader sees the same value. The window covers
    between ``window_s - window_s/buckets`` and ``window_s`` of history. Plain lists, not numpy:
    a handful of fields per sample costs less in Python than one numpy call's overhead, and this
    runs on the sampling thread for every sample.
    """

    def __init__(self, window_s: float = schema.PEAK_WINDOW_S, buckets: int = 30) -> None:
        if not (isinstance(window_s, int | float) and 0 < window_s < math.inf):
            raise ValueError(f"peak window {window_s!r} must be a positive number of seconds")
        self.window_s = float(window_s)
        self._bucket_ns = max(1, int(window_s * 1e9 / buckets))
        self._max: list[list[float | int | None]] = [[None] * len(_PEAK_FIELDS)
                                                     for _ in range(buckets)]
        self._ids = [-(2**62)] * buckets
        self._now = -(2**62)
        self._lock = threading.Lock()

    def update(self, timestamp_ns: int, values: Sequence[float | int | None]) -> None:
        """Fold one sample's values (``None`` or NaN: no value) into its time bucket."""
        bucket = int(timestamp_ns) // self._bucket_ns
        slot = bucket % len(self._ids)
        with self._lock:
            if self._ids[slot] != bucket:
                self._ids[slot] = bucket
                self._max[slot] = [None if v is None or v != v else v for v in values]
            else:
                row = self._max[slot]
                for i, v in enumerate(values):
                    held = row[i]
                    if v is not None and v == v and (held is None or v > held):
                        row[i] = v
            if bucket > self._now:
                self._now = bucket

    def peak(self, index: int) -> float | None:
        """The peak of one field over the window ending at the latest sample, or None."""
        with self._lock:
            oldest = self._now - len(self._ids)
            column = [v for bucket, row in zip(self._ids, self._max, strict=True)
                      if bucket > oldest and (v := row[index]) is not None]
        return float(max(column)) if column else None


@dataclass(frozen=True)
class Edge:
    """The latest edge of one kind: when (the sample's own timestamp) and how big."""

    timestamp_ns: int
    size_bytes: int
    #: seconds since the tracker's previous sample (None: the first sample, or unknown)
    gap_s: float | None = None


@dataclass
class TrackerState:
    """What the sampling thread knows; read by every export's callbacks. Guarded by ``lock``."""

    latest: Sample | None = None
    step: int | None = None
    estimate_bytes: int | None = None
    sample_duration_s: float | None = None
    samples: int = 0
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> count
    export_failures: dict[tuple[str, str], int] = field(default_factory=dict)
    #: destination -> exports that succeeded (``stormotel track`` fails when none ever did).
    export_successes: dict[str, int] = field(default_factory=dict)
    crossings: dict[str, int] = field(default_factory=dict)  # level -> count
    caught_ooms: int = 0
    stall_snapshots: int = 0
    stalled: bool = False
    peak: RollingPeak = field(default_factory=RollingPeak)
    #: edge kind (schema.EDGE_*) -> the latest edge of that kind.
    edges: dict[str, Edge] = field(default_factory=dict)
    sampling_interval_s: float | None = None
    #: Unix ns of the tracker's start and clean stop (the start/stop edges alert rules read).
    started_ns: int | None = None
    stopped_ns: int | None = None
    #: 1 when a clean stop's timestamp is delivered (final OTLP export, or a lingering endpoint).
    stop_reported: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Every sample's duration, aggregated here once for all destinations (each export adds
    #: its histogram point: stormotel.sample_duration).
    durations: DurationHistogram = field(default_factory=DurationHistogram)

    def record(self, sample: Sample, duration_s: float) -> None:
        self.peak.update(sample.timestamp_ns, _peak_values(sample))
        with self.lock:
            self.latest = sample
            self.samples += 1
            self.sample_duration_s = duration_s
        self.durations.record(duration_s)

    def record_edge(self, kind: str, timestamp_ns: int, size_bytes: int,
                    gap_s: float | None = None) -> None:
        with self.lock:
            self.edges[kind] = Edge(int(timestamp_ns), int(size_bytes), gap_s)

    def count_drop(self, reason: str, n: int = 1) -> None:
        with self.lock:
            self.dropped[reason] = self.dropped.get(reason, 0) + n

    def count_export_failure(self, destination: str, reason: str) -> None:
        with self.lock:
            key = (destination, reason)
            self.export_failures[key] = self.export_failures.get(key, 0) + 1

    def count_export_success(self, destination: str) -> None:
        with self.lock:
            self.export_successes[destination] = self.export_successes.get(destination, 0) + 1

    def count_crossing(self, level: str) -> None:
        with self.lock:
            self.crossings[level] = self.crossings.get(level, 0) + 1


Callback = Callable[[CallbackOptions], Iterable[Observation]]


class _Observers:
    """The callbacks the instruments read ``state`` through, with ``base`` (the point
    attributes) on every observation. One factory per shape of reading."""

    def __init__(self, state: TrackerState, base: Mapping[str, str]) -> None:
        self.state = state
        self.base = dict(base)

    def _with(self, extra: Mapping[str, str]) -> dict[str, str]:
        return {**self.base, **extra}

    def field(self, name: str) -> Callback:
        """The latest sample's ``name`` (nothing before the first sample or when unmeasured)."""
        state, base = self.state, self.base

        def cb(_: CallbackOptions) -> Iterable[Observation]:
            sample = state.latest
            value = None if sample is None else getattr(sample, name)
            return [] if value is None else [Observation(value, base)]
        return cb

    def peak(self, index: int) -> Callback:
        """The rolling peak of a field, never below its latest value."""
        state, base = self.state, self.base

        def cb(_: CallbackOptions) -> Iterable[Observation]:
            sample = state.latest
            latest = None if sample is None else getattr(sample, _PEAK_FIELDS[index])
            if latest is None:
                return []
            peak = state.peak.peak(index)
            return [Observation(int(max(latest, peak if peak is not None else latest)), base)]
        return cb

    def edge(self, value: Callable[[Edge], float | int | None]) -> Callback:
        """One point per edge kind seen, labelled by the kind."""
        state = self.state

        def cb(_: CallbackOptions) -> Iterable[Observation]:
            with state.lock:
                edges = sorted(state.edges.items())
            return [Observation(v, self._with({schema.ATTR_EDGE: kind}))
                    for kind, edge in edges if (v := value(edge)) is not None]
        return cb

    def scalar(self, get: Callable[[], float | int | None]) -> Callback:
        base = self.base

        def cb(_: CallbackOptions) -> Iterable[Observation]:
            value = get()
            return [] if value is None else [Observation(value, base)]
        return cb

    def by_attr(self, get: Callable[[], Mapping[Any, int]], keys: tuple[str, ...]) -> Callback:
        """One point per key of a counted mapping, the key's parts as the ``keys`` labels."""
        state = self.state

        def cb(_: CallbackOptions) -> Iterable[Observation]:
            with state.lock:
                items = list(get().items())
            out = []
            for key, count in items:
                parts = key if isinstance(key, tuple) else (key,)
                out.append(Observation(count, self._with(dict(zip(keys, parts, strict=True)))))
            return out
        return cb

    def sampler_count(self, name: str, extra: Callable[[], int] = lambda: 0
                      ) -> Callable[[], int | None]:
        """A sampler's counter, never below ``extra`` (the tracker's own count of the same)."""
        state = self.state

        def get() -> int | None:
            sample = state.latest
            value = None if sample is None else getattr(sample, name)
            if value is None and not extra():
                return None
            return max(value or 0, extra())
        return get


def _instrument_table(obs: _Observers) -> list[tuple[schema.Metric, Callback]]:
    """Every schema instrument the tracker registers and the callback it reads, in the order
    they are created (the order of the exposition and of every export)."""
    state = obs.state
    # An OOM caught by capture_oom is also an allocator OOM on CUDA: take the larger count. The
    # series exists from the first sample at 0 even where the sampler counts none (NVML): the
    # tracker's own capture_oom count is known, and alert rules see 0 -> 1 from one scrape.
    ooms = obs.sampler_count("num_ooms", lambda: state.caught_ooms)
    return [
        *((m, obs.field(_FIELD_OF[m])) for m in schema.MEMORY_GAUGES),
        (schema.DEVICE_UTILIZATION, obs.field("utilization")),
        *((m, obs.peak(i)) for i, m in enumerate(_PEAK_METRICS)),
        (schema.ESTIMATE, obs.scalar(lambda: state.estimate_bytes)),
        (schema.STEP, obs.scalar(lambda: state.step)),
        (schema.EDGE_TIMESTAMP, obs.edge(lambda e: e.timestamp_ns / 1e9)),
        (schema.EDGE_SIZE, obs.edge(lambda e: e.size_bytes)),
        (schema.EDGE_GAP, obs.edge(lambda e: e.gap_s)),
        (schema.SAMPLING_INTERVAL, obs.scalar(lambda: state.sampling_interval_s)),
        (schema.STALLED, obs.scalar(lambda: int(state.stalled))),
        (schema.TRACKER_START, obs.scalar(
            lambda: None if state.started_ns is None else state.started_ns / 1e9)),
        (schema.TRACKER_STOP, obs.scalar(
            lambda: None if state.stopped_ns is None else state.stopped_ns / 1e9)),
        (schema.TRACKER_STOP_REPORTED, obs.scalar(lambda: state.stop_reported)),
        (schema.ALLOC_RETRIES, obs.scalar(obs.sampler_count("alloc_retries"))),
        (schema.OOMS, obs.scalar(lambda: None if state.latest is None else (ooms() or 0))),
        (schema.THRESHOLD_CROSSINGS, obs.by_attr(lambda: state.crossings, (schema.ATTR_LEVEL,))),
        (schema.SAMPLES, obs.scalar(lambda: state.samples)),
        (schema.STALL_SNAPSHOTS, obs.scalar(lambda: state.stall_snapshots)),
        (schema.SAMPLES_DROPPED, obs.by_attr(lambda: state.dropped, (schema.ATTR_REASON,))),
        (schema.EXPORT_FAILURES, obs.by_attr(lambda: state.export_failures,
                                             (schema.ATTR_DESTINATION, schema.ATTR_REASON))),
    ]


def _register_instruments(provider: MeterProvider, state: TrackerState,
                          attrs: Mapping[str, str],
                          written_elsewhere: frozenset[str] = frozenset()) -> None:
    """Create every instrument of :func:`_instrument_table` on ``provider``.

    Every instrument is observable; the sample-duration histogram is not an SDK instrument at
    all (the SDK would clean and hash its attributes on every sample, once per destination:
    :mod:`stormotel.sample_duration` keeps it and each export adds its point). Instruments
    named in ``written_elsewhere`` are left out: the compact archive writes every sample's
    gauges itself, and collecting them here would only give the writer points to drop."""
    meter = provider.get_meter(schema.INSTRUMENTATION_SCOPE, schema.SCHEMA_VERSION)
    create = {schema.Kind.COUNTER: meter.create_observable_counter,
              schema.Kind.UPDOWN_COUNTER: meter.create_observable_up_down_counter,
              schema.Kind.GAUGE: meter.create_observable_gauge}
    for metric, cb in _instrument_table(_Observers(state, attrs)):
        if metric.name not in written_elsewhere:
            create[metric.kind](metric.name, [cb], unit=metric.unit,
                                description=metric.description)


def rank_info_labels(resource_attributes: Mapping[str, Any], env: Mapping[str, str]
                     ) -> dict[str, str]:
    """Labels of the rank's info series: identity, GPU UUID, pod/namespace/node, Slurm ids.

    Read from the Resource (which already merged the identity, ``K8S_*`` downward-API variables
    and ``OTEL_RESOURCE_ATTRIBUTES``), then Slurm's own ``SLURM_JOB_ID``/``SLURM_STEP_ID``. Empty
    values are left out so a label is either right or absent.
    """
    labels: dict[str, str] = {}
    for key in schema.RANK_INFO_LABELS:
        value = resource_attributes.get(key)
        if value not in (None, ""):
            labels[key] = str(value)
    for res_key, label in schema.RES_TO_RANK_INFO.items():
        value = resource_attributes.get(res_key)
        if value not in (None, "") and label not in labels:
            labels[label] = str(value)
    for var, label in schema.ENV_SLURM_RANK_INFO.items():
        if env.get(var) and label not in labels:
            labels[label] = env[var]
    return labels


def register_rank_info(provider: MeterProvider, labels: Mapping[str, str]) -> None:
    """``stormotel_rank_info{...} 1``: the join key from a GPU (DCGM's UUID) to job and rank."""
    meter = provider.get_meter(schema.INSTRUMENTATION_SCOPE, schema.SCHEMA_VERSION)
    fixed = dict(labels)
    meter.create_observable_gauge(schema.RANK_INFO.name, [lambda _: [Observation(1, fixed)]],
                                  unit=schema.RANK_INFO.unit,
                                  description=schema.RANK_INFO.description)


class ScrapeCounter:
    """A collector that yields nothing and counts the scrapes of the Prometheus endpoint, so a
    stopping tracker knows whether anybody scrapes it (when its stop was read and served is
    the :class:`~stormotel.scrape_watch.ScrapeWatch`'s business)."""

    def __init__(self) -> None:
        self.count = 0
        self._cond = threading.Condition()

    def collect(self) -> Iterable[Any]:
        with self._cond:
            self.count += 1
            self._cond.notify_all()
        return []


@dataclass
class Destination:
    name: str
    provider: MeterProvider
    reader: MetricReader
    on_sample: bool = False  # archive: export driven by samples, not by a timer
    every: int = 1  # ... one export every this many samples
    pending: int = 0  # samples since the last export
    archive: Any = None  # CompactArchiveWriter: samples go to its queue, not to reader.collect


def otlp_failure_hint(cfg: ExportConfig, env: Mapping[str, str], signal: str = "metrics"
                      ) -> str:
    """The likely cause of failing OTLP exports for ``signal`` (a protocol/port mismatch), or
    "" (see :mod:`stormotel.otlp_hint`)."""
    return likely_cause(cfg.protocol(env, signal), cfg.endpoint(signal, env),
                        last_exporter_log())


def _otlp_metric_exporter(cfg: ExportConfig, env: Mapping[str, str],
                          temporality: dict[type, AggregationTemporality]) -> Callable[[], Any]:
    endpoint, timeout = cfg.endpoint("metrics", env), otlp_timeout_s(cfg.otlp_timeout_s, env)
    if cfg.protocol(env, "metrics") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        insecure = _insecure(endpoint)
        return lambda: OTLPMetricExporter(endpoint=endpoint, insecure=insecure, timeout=timeout,
                                          preferred_temporality=temporality)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpMetricExporter,
    )

    return lambda: HttpMetricExporter(endpoint=endpoint, timeout=timeout,
                                      preferred_temporality=temporality)


def _otlp_span_exporter(cfg: ExportConfig, env: Mapping[str, str]) -> Callable[[], Any]:
    endpoint, timeout = cfg.endpoint("traces", env), otlp_timeout_s(cfg.otlp_timeout_s, env)
    if cfg.protocol(env, "traces") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        insecure = _insecure(endpoint)
        return lambda: OTLPSpanExporter(endpoint=endpoint, insecure=insecure, timeout=timeout)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    return lambda: HttpSpanExporter(endpoint=endpoint, timeout=timeout)


def _insecure(endpoint: str | None) -> bool | None:
    if endpoint and "://" in endpoint:
        return urlparse(endpoint).scheme == "http"
    return None  # the exporter reads OTEL_EXPORTER_OTLP_INSECURE


class Telemetry:
    """All providers, readers, exporters and the Prometheus server of one tracker."""

    def __init__(self, resource: Resource, attrs: Mapping[str, str], state: TrackerState,
                 cfg: ExportConfig, job_id: str, rank: int,
                 env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.state = state
        self.destinations: list[Destination] = []
        self.tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.archive_files: tuple[Path, Path] | None = None
        self.prometheus_address: tuple[str, int] | None = None
        self._streams: list[ArchiveStream] = []
        #: the archive's span processors: closed before any network destination at the stop
        self._archive_span_processors: list[BatchSpanProcessor] = []
        self._prom_server: Any = None
        #: Scrapes of the pull endpoint, for the linger at the end (None: no endpoint).
        self.scrape_watch: ScrapeWatch | None = None
        self._tracer: Any = None
        self._lock = threading.Lock()
        self._linger_s = max(0.0, float(cfg.prometheus_linger_s or 0.0))
        self.scrapes = ScrapeCounter()
        #: monotonic time of the clean-stop edge: a scrape that began collecting then or later
        #: read it (:meth:`_linger`)
        self._stopped_mono: float | None = None
        if state.started_ns is None:
            state.started_ns = time.time_ns()
        self.otlp_failure_hint: Callable[[], str] = lambda: otlp_failure_hint(cfg, env)
        self._resource, self._attrs = resource, attrs
        self._info_labels = rank_info_labels(resource.attributes, env)
        #: one warning per destination, metrics and spans together
        self._warned: set[str] = set()
        fmt = cfg.archive_format or schema.ARCHIVE_FORMAT_DEFAULT
        if cfg.archive_dir is not None and fmt == schema.ARCHIVE_FORMAT_COMPACT:
            self._add_compact_archive(resource, attrs, cfg, job_id, rank)
        elif cfg.archive_dir is not None:
            self._add_lines_archive(cfg, job_id, rank)
        if cfg.signal_enabled("metrics", env):
            self._add_otlp_metrics(cfg, env)
        if cfg.signal_enabled("traces", env):
            self._add_otlp_spans(cfg, env)
        if cfg.prometheus_port is not None:
            self._start_prometheus(cfg, resource, attrs)
        self._settle_counters()

    def _add(self, name: str, reader: MetricReader, on_sample: bool = False, every: int = 1,
             point_attrs: Mapping[str, str] | None = None,
             written_elsewhere: frozenset[str] = frozenset()) -> Destination:
        """One metrics destination: its own provider, every instrument, the rank-info series
        (not in the archive, whose lines carry the identity as Resource)."""
        provider = MeterProvider(resource=self._resource, metric_readers=[reader],
                                 shutdown_on_exit=False,
                                 exemplar_filter=AlwaysOffExemplarFilter())  # gauges only
        _register_instruments(provider, self.state,
                              self._attrs if point_attrs is None else point_attrs,
                              written_elsewhere)
        if name != schema.DEST_ARCHIVE:
            register_rank_info(provider, self._info_labels)
        self.destinations.append(Destination(name, provider, reader, on_sample, every))
        return self.destinations[-1]

    def _add_lines_archive(self, cfg: ExportConfig, job_id: str, rank: int) -> None:
        """The ``lines`` archive: the official file exporters, metrics exported every
        ``every``-th sample, spans batched."""
        from opentelemetry.exporter.otlp.json.file import FileMetricExporter, FileSpanExporter

        state, fail, warned = self.state, self.state.count_export_failure, self._warned
        metrics_path, traces_path = archive_paths(cfg.archive_dir or ".", job_id, rank)
        self.archive_files = (metrics_path, traces_path)

        def dropped(reason: str) -> None:  # a batch the disk refused: counted, no traceback
            fail(schema.DEST_ARCHIVE, reason)

        m_stream = ArchiveStream(metrics_path, on_drop=dropped)
        t_stream = ArchiveStream(traces_path, on_drop=dropped)
        self._streams += [m_stream, t_stream]
        self._add(schema.DEST_ARCHIVE, PeriodicExportingMetricReader(
            GuardedMetricExporter(schema.DEST_ARCHIVE,
                                  lambda: FileMetricExporter(stream=m_stream.open()), fail,
                                  warned=warned, add=state.durations.view(self._attrs).add_to),
            export_interval_millis=math.inf), on_sample=True, every=self._archive_every(cfg))
        self._add_archive_spans(BatchSpanProcessor(
            GuardedSpanExporter(schema.DEST_ARCHIVE,
                                lambda: FileSpanExporter(stream=t_stream.open()), fail,
                                warned=warned),
            schedule_delay_millis=1000))

    def _add_otlp_metrics(self, cfg: ExportConfig, env: Mapping[str, str]) -> None:
        """Metrics pushed over OTLP on the SDK's timer; a bad interval or temporality in the
        environment is counted and warned about, and the default used."""
        state, fail = self.state, self.state.count_export_failure
        interval_ms, bad_interval = export_interval_ms(cfg.otlp_interval_s, env)
        temporality, bad_temporality = temporality_preference(env)
        for var, bad, used in (
                ("OTEL_METRIC_EXPORT_INTERVAL", bad_interval, f"{interval_ms:g} ms"),
                ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", bad_temporality,
                 "cumulative")):
            if bad is not None:
                fail(schema.DEST_OTLP, schema.REASON_BAD_CONFIG)
                log.warning("stormotel: %s=%r is not valid; using %s", var, bad, used)
        self._add(schema.DEST_OTLP, PeriodicExportingMetricReader(
            GuardedMetricExporter(schema.DEST_OTLP,
                                  _otlp_metric_exporter(cfg, env, temporality), fail,
                                  warned=self._warned, preferred_temporality=temporality,
                                  on_success=state.count_export_success,
                                  add=state.durations.view(
                                      self._attrs, temporality_of(temporality)).add_to,
                                  hint=lambda: otlp_failure_hint(cfg, env, "metrics")),
            export_interval_millis=interval_ms))

    def _add_otlp_spans(self, cfg: ExportConfig, env: Mapping[str, str]) -> None:
        state = self.state
        self.tracer_provider.add_span_processor(BatchSpanProcessor(
            GuardedSpanExporter(schema.DEST_OTLP, _otlp_span_exporter(cfg, env),
                                state.count_export_failure, warned=self._warned,
                                on_success=state.count_export_success,
                                hint=lambda: otlp_failure_hint(cfg, env, "traces"))))

    def _settle_counters(self) -> None:
        """Whether a clean stop will be reported, and every counter's known label sets at 0."""
        state = self.state
        # A clean stop is told from a crash only if its timestamp gets out: pushed by the final
        # OTLP export, or scraped from an endpoint that waits for one last scrape.
        pushed = any(d.name == schema.DEST_OTLP for d in self.destinations)
        lingers = self._prom_server is not None and self._linger_s > 0
        state.stop_reported = int(pushed or lingers)
        # Counters start at zero for every known label set, so rate()/increase() work from the
        # first scrape and "no failures" is a series with value 0, not a missing series.
        with state.lock:
            for reason in (schema.REASON_SAMPLER_ERROR, schema.REASON_OVERRUN):
                state.dropped.setdefault(reason, 0)
            for dest in self.destinations:
                state.export_failures.setdefault((dest.name, "export_failed"), 0)
            for level in LEVELS.values():
                state.crossings.setdefault(level, 0)

    def _add_compact_archive(self, resource: Resource, attrs: Mapping[str, str],
                             cfg: ExportConfig, job_id: str, rank: int) -> None:
        """Metrics through :class:`CompactArchiveWriter` (its SDK reader only collects the
        non-per-sample instruments, every few seconds); spans through the official file
        exporter as in the ``lines`` format, zstd-compressed on append
        (``rank-R.traces.jsonl.zst``, :mod:`stormotel.archive_spans`)."""
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        from stormotel.archive_spans import CompressedArchiveStream
        from stormotel.archive_writer import PER_SAMPLE_NAMES, ArchiveLimits, CompactArchiveWriter

        metrics_path, lines_traces = archive_paths(cfg.archive_dir or ".", job_id, rank)
        traces_path = lines_traces.with_name(lines_traces.name.removesuffix(
            schema.ARCHIVE_TRACES_SUFFIX) + schema.ARCHIVE_COMPACT_TRACES_SUFFIX)
        t_stream = CompressedArchiveStream(  # a lost frame: counted as the lines format does
            traces_path, on_drop=lambda reason: self.state.count_export_failure(
                schema.DEST_ARCHIVE, reason))
        self._streams.append(t_stream)
        reader = InMemoryMetricReader()
        # Per-sample gauges and durations go through ``put``; the SDK reader collects only the
        # rest. The identity is written once in the resource, so the points carry none: the SDK
        # would clean and hash ten attributes per observation only for the writer to drop them.
        dest = self._add(schema.DEST_ARCHIVE, reader, on_sample=True, point_attrs={},
                   written_elsewhere=PER_SAMPLE_NAMES)
        state = self.state
        dest.archive = CompactArchiveWriter(
            metrics_path.parent, rank, dict(resource.attributes), attrs,
            collect=reader.get_metrics_data,
            on_failure=lambda reason: state.count_export_failure(schema.DEST_ARCHIVE, reason),
            on_drop=state.count_drop, limits=ArchiveLimits(batch_s=cfg.archive_interval_s or 1.0))
        self.archive_files = (dest.archive.current_file, traces_path)
        fail = state.count_export_failure
        self._add_archive_spans(BatchSpanProcessor(
            GuardedSpanExporter(schema.DEST_ARCHIVE,
                                lambda: FileSpanExporter(stream=t_stream.open()), fail,
                                warned=self._warned),
            schedule_delay_millis=1000))

    def _add_archive_spans(self, processor: BatchSpanProcessor) -> None:
        self._archive_span_processors.append(processor)
        self.tracer_provider.add_span_processor(processor)

    def _archive_every(self, cfg: ExportConfig) -> int:
        """``lines`` format: one line every this many samples (``archive_interval_s`` thins the
        archive; each line keeps the peak since the previous one); 1 = every sample."""
        interval = self.state.sampling_interval_s
        if cfg.archive_interval_s is None or not interval:
            return 1
        return max(1, round(cfg.archive_interval_s / interval))

    def _start_prometheus(self, cfg: ExportConfig, resource: Resource,
                          attrs: Mapping[str, str]) -> None:
        """The scrape endpoint. The labels the resource holds with the same value come from
        the resource (the exporter's ``resource_attribute_filter`` puts them on every series)
        rather than from each point: the same exposition, without the SDK cleaning and hashing
        them on every observation of every scrape."""
        addr = cfg.prometheus_addr or "0.0.0.0"
        from_resource = frozenset(k for k, v in attrs.items()
                                  if resource.attributes.get(k) == v)
        point_attrs = {k: v for k, v in attrs.items() if k not in from_resource}
        from prometheus_client import start_http_server

        from stormotel.scrape_watch import ScrapeWatch, WatchedRegistry, watch_server

        watch = ScrapeWatch()
        registry = WatchedRegistry(watch, auto_describe=False)
        registry.register(self.scrapes)
        try:
            server, _thread = start_http_server(int(cfg.prometheus_port or 0),
                                                addr=addr, registry=registry)
        except OSError as e:
            self.state.count_export_failure(schema.DEST_PROMETHEUS, "bind_failed")
            log.warning("stormotel: Prometheus endpoint %s:%s could not start (%s); continuing "
                        "without it", addr, cfg.prometheus_port, e)
            return
        self._prom_server = server
        watch_server(server, watch)
        self.scrape_watch = watch
        self.prometheus_address = (addr, int(server.server_port))
        # No otel_scope_* labels: one scope only, and they would sit on every series.
        self._add(schema.DEST_PROMETHEUS, prometheus_reader(
            self.state.durations.view(point_attrs),
            registry=registry, scope_info_enabled=False,
            resource_attribute_filter=from_resource.__contains__), point_attrs=point_attrs)

    def tracer(self) -> Any:
        """The tracker's tracer (built once: ``get_tracer`` costs ~100 us per call)."""
        if self._tracer is None:
            self._tracer = self.tracer_provider.get_tracer(schema.INSTRUMENTATION_SCOPE,
                                                           schema.SCHEMA_VERSION)
        return self._tracer

    def after_sample(self) -> None:
        """Export the sample-driven destinations (the archive) every ``every``-th sample."""
        for dest in self.destinations:
            if dest.archive is not None:
                state = self.state
                dest.archive.put(state.latest, state.step, state.sample_duration_s)
            elif dest.on_sample:
                dest.pending += 1
                if dest.pending >= dest.every:
                    self._collect(dest)

    def _collect(self, dest: Destination, timeout_millis: int = 5_000) -> None:
        dest.pending = 0
        try:
            dest.reader.collect(timeout_millis=timeout_millis)
        except Exception as e:  # never raise into the sampling loop
            self.state.count_export_failure(dest.name, type(e).__name__.lower())

    def flush(self, timeout_millis: int = 5_000) -> None:
        """Push what every push destination holds now (spans, OTLP, archive); never raises."""
        try:
            self.tracer_provider.force_flush(timeout_millis)
        except Exception as e:
            log.debug("stormotel: span flush failed: %s", e)
        for dest in self.destinations:
            if dest.name == schema.DEST_PROMETHEUS:
                # Pull only: its reader's force_flush queues one more collection that the next
                # scrape would serve beside its own (every series twice).
                continue
            try:
                if dest.archive is not None:
                    dest.archive.flush()
                elif dest.on_sample:
                    self._collect(dest, timeout_millis)
                else:
                    dest.provider.force_flush(timeout_millis)
            except Exception as e:
                log.debug("stormotel: %s flush failed: %s", dest.name, e)

    def disarm_after_fork(self) -> None:
        """In a forked child: close the inherited listening socket (the parent keeps serving),
        stop the periodic readers the SDK restarts in children, and forget everything else —
        the child must neither export the parent's series nor wait on its threads at exit."""
        if self._prom_server is not None:
            try:
                self._prom_server.socket.close()
            except OSError as e:
                log.debug("stormotel: closing the inherited Prometheus socket failed: %s", e)
            self._prom_server = None
            self.scrape_watch = None
        for dest in self.destinations:
            if isinstance(dest.reader, PeriodicExportingMetricReader):
                stopped = threading.Event()
                stopped.set()
                dest.reader._shutdown_event = stopped
        self.destinations = []
        self._streams = []

    def mark_stopped(self) -> None:
        """The clean-stop edge, set once, at the start of the stop: a scrape from then on (the
        tracker's linger after an event included) reads the stop timestamp."""
        if self.state.stopped_ns is None:
            self.state.stopped_ns = time.time_ns()
            self._stopped_mono = time.monotonic()

    def _linger(self) -> None:
        """Keep serving until one scrape that began after the stop edge has been *served* (its
        response written), at most ``prometheus_linger_s``; at once when a scrape already
        did (during the linger after an event), and not at all when nobody ever scraped this
        endpoint (nothing would come). Served, not begun: the endpoint closes and the process
        exits after this, and a scrape cut off then never reaches the TSDB. (It waited a
        quarter second after the scrape began; a CPU-starved serving thread took longer to
        write the response, and a rank that stopped cleanly read as one that died.)"""
        watch, moment = self.scrape_watch, self._stopped_mono
        if (self._prom_server is None or watch is None or moment is None
                or self._linger_s <= 0 or not self.scrapes.count):
            return
        watch.wait_served(moment, self._linger_s)

    def _close_destination(self, dest: Destination, timeout_millis: int) -> None:
        """Final export of one destination (its archive writer closed, the samples since its
        last line written) and its provider shut down; never raises."""
        if dest.archive is not None:
            dest.archive.close()
        if dest.on_sample and dest.pending:  # samples since the last line: write it
            self._collect(dest, timeout_millis)
        try:
            dest.provider.shutdown(timeout_millis=timeout_millis)
        except Exception as e:
            log.debug("stormotel: %s shutdown failed: %s", dest.name, e)

    def close_archive(self, timeout_millis: int = 5_000) -> None:
        """Write everything the archive holds to disk and close it: its spans, its last
        metrics line. Goes before any network destination, so a collector that black-holes
        or refuses cannot keep a sample taken before the stop off the disk. Never raises."""
        self.mark_stopped()
        with self._lock:
            for processor in self._archive_span_processors:
                try:
                    processor.shutdown()  # exports its queue to the file, then closes
                except Exception as e:
                    log.debug("stormotel: archive span shutdown failed: %s", e)
            for dest in self.destinations:
                if dest.name == schema.DEST_ARCHIVE:
                    self._close_destination(dest, timeout_millis)
            self.destinations = [d for d in self.destinations if d.name != schema.DEST_ARCHIVE]
            for stream in self._streams:
                stream.close()

    def shutdown(self, timeout_millis: int = 5_000, linger: bool = True) -> None:
        """Record the clean-stop edge, close the archive (:meth:`close_archive`), give a
        scraper the chance to see the edge (``linger``), then final export of everything else,
        and release files, sockets and threads. Never raises."""
        self.close_archive(timeout_millis)
        if linger:
            self._linger()
        with self._lock:
            try:
                self.tracer_provider.shutdown()
            except Exception as e:
                log.debug("stormotel: tracer shutdown failed: %s", e)
            for dest in self.destinations:
                self._close_destination(dest, timeout_millis)
            self.destinations.clear()
            if self._prom_server is not None:
                self._prom_server.shutdown()
                self._prom_server.server_close()
                self._prom_server = None
                self.scrape_watch = None
            for stream in self._streams:
                stream.close()
