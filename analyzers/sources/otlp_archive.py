"""OTLP archives: the JSON-lines files of the OTel file exporter, and length-prefixed protobuf.

Each JSON line is one ``ExportMetricsServiceRequest`` or ``ExportTraceServiceRequest`` in the
protobuf JSON mapping (camelCase keys, int64 as strings). Lines are decoded with ``orjson`` (or
``json``) into dicts and walked once, collecting per (rank, field) *column lists*; numpy converts
each column in one call. Protobuf files (``format: proto`` of the collector's file exporter, a
4-byte big-endian length before each message, or the varint-delimited form of the OTel file
exporter spec) are decoded with the official ``opentelemetry.proto`` classes and mapped to the
same dict shape, so both paths share one walker.

Identity comes from resource attributes (what stormotel's tracker sets), else from data-point
attributes (a collector that merged several ranks into one resource, or a Prometheus receiver),
else from a ``rank-N`` file name, which is noted.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
from stormotel.analyzers.sources.base import LoadContext
from stormotel.analyzers.sources.columns import bytes_column, time_column
from stormotel.analyzers.sources.jsonio import JSONDecodeError, loads
from stormotel.analyzers.sources.markers import (
    MarkerAccumulator,
    counter_increases,
    exception_attrs,
    kind_for_mark,
)
from stormotel.analyzers.timeline import (
    EDGE_MARKER_KINDS,
    EDGE_RESOLUTION_ATTR,
    KIND_EXCEPTION,
    KIND_FIRST_RISE,
    KIND_OOM,
    KIND_STEP,
    KIND_THRESHOLD,
    KIND_TRACKER_START,
    KIND_TRACKER_STOP,
    META_ESTIMATE_BYTES,
    META_STOP_REPORTED,
    OOM_FROM_COUNTER,
    OOM_SOURCE_ATTR,
    RankIdentity,
    distinct_count,
)

from stormotel import schema
from stormotel.errors import SourceInputError

#: The tracker's edge gauges, read as markers (the time of each edge, and its resolution).
_EDGE_GAUGES = frozenset({schema.EDGE_TIMESTAMP.name, schema.SAMPLING_INTERVAL.name})
#: The tracker's clean-stop gauges: its stop time (one point, in the export after the stop) and
#: whether it delivers that stop; read as a stop marker and a rank list (a few points a rank).
STOP_GAUGES = frozenset({schema.TRACKER_STOP.name, schema.TRACKER_STOP_REPORTED.name})
#: The tracker's start gauge (its start time, the same value in every export of one process):
#: each distinct value is one start marker — a file that began after its trackers did (an OTel
#: Collector started later) still says when each began, and a restarted rank has two.
START_GAUGES = frozenset({schema.TRACKER_START.name})
#: The per-process edge gauges read as stop or start markers.
PROCESS_GAUGES = STOP_GAUGES | START_GAUGES
#: Only the OOM edge: the decoders that skip the other edge gauges (their spans carry them).
OOM_EDGE_ONLY = frozenset({schema.EDGE_OOM})
#: metric name → (Timeline field, is_peak)
METRIC_FIELDS: dict[str, tuple[str, bool]] = {
    **{m.name: (f, False) for f, m in schema.FIELD_METRICS.items()},
    **{m.name: (f, True) for f, m in schema.FIELD_PEAK_METRICS.items()},
    schema.ALLOC_INACTIVE_SPLIT.name: ("inactive_split", False),
}
_EVENT_KINDS = {schema.EVENT_THRESHOLD: KIND_THRESHOLD, schema.EVENT_FIRST_RISE: KIND_FIRST_RISE,
                schema.EVENT_OOM: KIND_OOM}
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_WHITESPACE = frozenset(b" \t\n\r\x0b\x0c")  # what bytes.strip() removes


def _get(d: Mapping[str, Any], camel: str, snake: str, default: Any = None) -> Any:
    v = d.get(camel)
    return d.get(snake, default) if v is None else v


def _attr_value(v: Mapping[str, Any]) -> Any:
    for key in ("stringValue", "string_value"):
        if key in v:
            return v[key]
    for key in ("intValue", "int_value"):
        if key in v:
            return int(v[key])
    for key in ("doubleValue", "double_value"):
        if key in v:
            return float(v[key])
    for key in ("boolValue", "bool_value"):
        if key in v:
            return bool(v[key])
    return None


def attributes(items: Any) -> dict[str, Any]:
    """OTLP ``[{key, value: {stringValue|intValue|...}}]`` → plain dict (bad entries dropped)."""
    out: dict[str, Any] = {}
    if not isinstance(items, list):
        return out
    for kv in items:
        try:
            out[kv["key"]] = _attr_value(kv.get("value") or {})
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
            continue
    return out


def _opt_int(v: Any) -> int | None:
    """An int64-sized integer, else None (``"inf"``, 401 digits and 2**70 are not ranks,
    world sizes or timestamps)."""
    try:
        i = None if v is None or isinstance(v, bool) else int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return i if i is None or -(2**63) <= i < 2**63 else None


def identity_from(attrs: Mapping[str, Any]) -> RankIdentity | None:
    rank = _opt_int(attrs.get(schema.ATTR_RANK))
    if rank is None or rank < 0:
        return None
    host = attrs.get(schema.ATTR_HOST) or attrs.get(schema.RES_HOST_NAME)
    gpu = attrs.get(schema.ATTR_GPU)
    return RankIdentity(rank=rank, job_id=_str_or_none(attrs.get(schema.ATTR_JOB_ID)),
                        local_rank=_opt_int(attrs.get(schema.ATTR_LOCAL_RANK)),
                        world_size=_opt_int(attrs.get(schema.ATTR_WORLD_SIZE)),
                        host=_str_or_none(host), gpu=None if gpu is None else str(gpu),
                        gpu_uuid=_str_or_none(attrs.get(schema.ATTR_GPU_UUID)),
                        **_located(attrs))


def _located(attrs: Mapping[str, Any]) -> dict[str, str | None]:
    """pod/namespace/node (labels, else the OTel ``k8s.*`` resource attributes), Slurm job."""
    out: dict[str, str | None] = {}
    by_label = {label: res for res, label in schema.RES_TO_RANK_INFO.items()}
    for label in (schema.ATTR_POD, schema.ATTR_NAMESPACE, schema.ATTR_NODE,
                  schema.ATTR_SLURM_JOB_ID):
        value = attrs.get(label) or (attrs.get(by_label[label]) if label in by_label else None)
        out[label] = _str_or_none(value)
    return out


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


class _Columns:
    """Per (rank, field, is_peak) timestamps and values: Python lists filled point by point, or
    whole arrays from :mod:`stormotel.analyzers.sources.otlp_compact` (never both in one file)."""

    def __init__(self) -> None:
        self.t: dict[tuple[int, str, bool], list[Any] | np.ndarray] = {}
        self.v: dict[tuple[int, str, bool], list[Any] | np.ndarray] = {}

    def lists(self, key: tuple[int, str, bool]) -> tuple[list[Any], list[Any]]:
        """The (timestamps, values) lists for ``key``, created on first use."""
        ts, vs = self.t.get(key), self.v.get(key)
        if ts is None or vs is None:
            ts, vs = self.t[key], self.v[key] = [], []
        if not (isinstance(ts, list) and isinstance(vs, list)):
            raise TypeError(f"column {key} was already set as arrays")
        return ts, vs

    def set_arrays(self, key: tuple[int, str, bool], t: np.ndarray, v: np.ndarray) -> None:
        """The whole column at once (int64 nanoseconds, float64 bytes)."""
        self.t[key], self.v[key] = t, v


class OtlpFileReader:
    """Reads one OTLP file (already decompressed) into a :class:`LoadContext`."""

    def __init__(self, ctx: LoadContext, path: str) -> None:
        self.ctx = ctx
        self.path = path
        self.cols = _Columns()
        self.markers = MarkerAccumulator()
        self.identities: dict[int, RankIdentity] = {}
        m = _RANK_IN_NAME.search(path.rsplit("/", 1)[-1])
        self.name_rank = int(m.group(1)) if m else None
        self.used_name_rank = False
        self._last_resource: Any = None
        self._last_rank: int | None = None
        self.records = 0
        #: rank → (time, bytes) of the latest `stormotel.memory.estimate` point.
        self.estimates: dict[int, tuple[int, float]] = {}
        self.edges: set[tuple[int, str, int]] = set()  # (rank, edge kind, ms)
        self.intervals: dict[int, int] = {}  # rank -> tracker sampling interval (ns)
        self.stops: set[tuple[int, int]] = set()  # (rank, ms) of each clean stop
        self.reports_stop: set[int] = set()  # ranks whose tracker delivers its clean stop
        self.starts: set[tuple[int, int]] = set()  # (rank, ms) of each tracker start
        #: rank → (time, count) points of the OOM counter (``stormotel.oom``), and the ranks
        #: whose points are deltas (a collector's delta temporality), not running totals.
        self.oom_counts: dict[int, list[tuple[int, float]]] = {}
        self.oom_delta: set[int] = set()
        #: The memory columns come from elsewhere (a compact file's columnar companion,
        #: :mod:`stormotel.analyzers.sources.otlp_cols`): JSON without them is not "no memory".
        self.columns_elsewhere = False

    # --- framing ----------------------------------------------------------------------------
    def read_json_lines(self, data: bytes | bytearray, *, arrays: bool = True) -> None:
        """Typed decoding (:mod:`stormotel.analyzers.sources.otlp_fast`); odd lines fall back to
        :meth:`read_json_lines_generic`'s walker there. ``arrays=False`` skips the compact
        archive's array path (:mod:`stormotel.analyzers.sources.otlp_compact`), for comparing the
        two."""
        from stormotel.analyzers.sources.otlp_fast import read_json

        read_json(self, data, arrays=arrays)

    def read_json_lines_generic(self, data: bytes) -> None:
        """The dict walker over every line (the previous implementation, kept as reference)."""
        for line, where, cut in numbered_lines(data, self.path):
            try:
                obj = loads(line)
            except JSONDecodeError as exc:
                self.skip_bad_json(where, cut, exc)
                continue
            self._consume(obj, where)

    def skip_bad_json(self, where: str, cut: bool, exc: Exception) -> None:
        """Count a line that is not JSON; ``cut``: the file's unterminated last line."""
        self.ctx.skip("truncated_line" if cut else "bad_json", where, f"not valid JSON ({exc})")

    def read_protobuf(self, data: bytes) -> None:
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
        )
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        base = self.path.rsplit("/", 1)[-1].lower()
        is_traces = any(k in base for k in ("trace", "span"))
        cls = ExportTraceServiceRequest if is_traces else ExportMetricsServiceRequest
        try:
            for index, (offset, payload) in enumerate(_frames(data, self.path), start=1):
                where = f"{self.path}: message {index} at byte {offset}"
                try:
                    msg = cls.FromString(payload)
                except DecodeError as exc:
                    self.ctx.skip("bad_protobuf", where, f"not a {cls.__name__} ({exc})")
                    continue
                self._consume(json_format.MessageToDict(msg), where)
        except _BadTail as tail:  # the messages before it are kept, as a cut JSON line's are
            self.ctx.skip("bad_protobuf", f"{self.path}: byte {tail.pos}",
                          f"a length past the end of the file ({len(data) - tail.pos} bytes "
                          "left): the rest is not read")

    # --- walking ----------------------------------------------------------------------------
    def _consume(self, obj: Any, where: str) -> None:
        if not isinstance(obj, dict):
            self.ctx.skip("wrong_type", where, "line is not a JSON object")
            return
        self.records += 1
        rms = _get(obj, "resourceMetrics", "resource_metrics")
        rss = _get(obj, "resourceSpans", "resource_spans")
        if rms is None and rss is None:
            self.ctx.skip("not_otlp", where, "no resourceMetrics or resourceSpans")
            return
        try:
            for rm in rms or ():
                self._resource_metrics(rm, where)
            for rs in rss or ():
                self._resource_spans(rs, where)
        except (TypeError, AttributeError, KeyError) as exc:
            self.ctx.skip("wrong_type", where, f"unexpected OTLP structure ({exc!r})")

    def _resource_rank(self, res_attrs: Mapping[str, Any]) -> int | None:
        ident = identity_from(res_attrs)
        if ident is not None:
            self._remember(ident)
            return ident.rank
        return None

    def _remember(self, ident: RankIdentity) -> None:
        if ident.rank not in self.identities:
            self.identities[ident.rank] = ident

    def _fallback_rank(self, where: str, n: int) -> int | None:
        if self.name_rank is not None:
            self.used_name_rank = True
            return self.name_rank
        self.ctx.skip("no_rank", where, "no rank in resource, data-point attributes or file name",
                      n)
        return None

    def _resource_metrics(self, rm: Mapping[str, Any], where: str) -> None:
        resource = rm.get("resource")
        if resource is not None and resource == self._last_resource:
            res_rank = self._last_rank  # same resource as the previous line: the common case
        else:
            res_attrs = attributes((resource or {}).get("attributes"))
            if self.ctx.other_job(res_attrs.get(schema.ATTR_JOB_ID)):
                self.ctx.skip("other_job", where, f"job {res_attrs.get(schema.ATTR_JOB_ID)!r}")
                return
            res_rank = self._resource_rank(res_attrs)
            self._last_resource, self._last_rank = resource, res_rank
        for sm in _get(rm, "scopeMetrics", "scope_metrics") or ():
            for metric in sm.get("metrics") or ():
                if metric.get("name") == schema.ESTIMATE.name:
                    self._estimate(res_rank, metric)
                    continue
                if metric.get("name") in _EDGE_GAUGES:
                    self.edge_points(res_rank, metric.get("name"), _rows(metric))
                    continue
                if metric.get("name") in PROCESS_GAUGES:
                    self.stop_points(res_rank, metric.get("name"), _rows(metric))
                    continue
                if metric.get("name") == schema.OOMS.name:
                    self.oom_points(res_rank, _rows(metric), _is_delta(metric))
                    continue
                spec = METRIC_FIELDS.get(metric.get("name"))
                if spec is None:
                    continue
                body = metric.get("gauge") or metric.get("sum")
                if not body:
                    continue
                dps = _get(body, "dataPoints", "data_points") or ()
                if not dps:
                    continue
                field, is_peak = spec
                if res_rank is not None:
                    self._points(res_rank, field, is_peak, dps)
                    continue
                self._points_by_attr_rank(field, is_peak, dps, where)

    def _estimate(self, res_rank: int | None, metric: Mapping[str, Any]) -> None:
        """The pre-run estimate (constant per run): keep each rank's latest finite point."""
        for dp in _get(metric.get("gauge") or {}, "dataPoints", "data_points") or ():
            ident = identity_from(attributes(dp.get("attributes")))
            rank = res_rank if res_rank is not None else (ident.rank if ident else None)
            t = _opt_int(_get(dp, "timeUnixNano", "time_unix_nano")) or 0
            try:
                value = float(_value(dp))
            except (TypeError, ValueError):
                continue
            if rank is not None and np.isfinite(value) and value > 0 and \
                    t >= self.estimates.get(rank, (-1, 0.0))[0]:
                self.estimates[rank] = (t, value)

    def oom_points(self, res_rank: int | None, rows: Iterable[Row], delta: bool) -> None:
        """Points of the allocator's OOM counter: each increase is an OOM (``flush``), the one
        evidence of an OOM the training code did not wrap in ``capture_oom``."""
        for attrs, t, raw in rows:
            rank, value = _rank_value(res_rank, attrs, raw)
            if rank is None or t is None or t <= 0 or not np.isfinite(value) or value < 0:
                continue
            self.oom_counts.setdefault(rank, []).append((t, value))
            if delta:
                self.oom_delta.add(rank)

    def edge_points(self, res_rank: int | None, name: Any, rows: Iterable[Row],
                    kinds: frozenset[str] | None = None) -> None:
        """Edge gauges (time of the latest edge per kind) and the sampling interval: each
        distinct edge time is one edge marker, for OTLP data that carries no spans. ``kinds``
        keeps only those edge kinds (None: all)."""
        is_interval = name == schema.SAMPLING_INTERVAL.name
        for attrs, _t, raw in rows:
            rank, value = _rank_value(res_rank, attrs, raw)
            if rank is None or not np.isfinite(value) or value <= 0:
                continue
            if is_interval:
                self.intervals[rank] = max(self.intervals.get(rank, 0), int(value * 1e9))
            elif (kind := str(attrs.get(schema.ATTR_EDGE, ""))) in EDGE_MARKER_KINDS and \
                    (kinds is None or kind in kinds):
                self.edges.add((rank, kind, round(value * 1000)))

    def stop_points(self, res_rank: int | None, name: Any, rows: Iterable[Row]) -> None:
        """The clean-stop and start gauges: each distinct stop or start time is one stop or
        start marker (``flush``); a ``reported`` point of 1 puts the rank in
        :data:`META_STOP_REPORTED`."""
        is_stop = name == schema.TRACKER_STOP.name
        is_start = name == schema.TRACKER_START.name
        for attrs, _t, raw in rows:
            rank, value = _rank_value(res_rank, attrs, raw)
            if rank is None or not np.isfinite(value):
                continue
            if is_start:
                if 0 < value < 1e11:  # Unix seconds, as the TSDB source reads it
                    self.starts.add((rank, round(value * 1000)))
            elif is_stop:
                if value > 0:
                    self.stops.add((rank, round(value * 1000)))
            elif value == 1:
                self.reports_stop.add(rank)

    def _points(self, rank: int, field: str, is_peak: bool, dps: list[Any]) -> None:
        ts, vs = self.cols.lists((rank, field, is_peak))
        for dp in dps:
            t = dp.get("timeUnixNano")
            ts.append(t if t is not None else dp.get("time_unix_nano"))
            v = dp.get("asDouble")
            vs.append(v if v is not None else _value(dp))

    def _points_by_attr_rank(self, field: str, is_peak: bool, dps: list[Any], where: str) -> None:
        groups: dict[int, list[Any]] = {}
        orphans = 0
        for dp in dps:
            ident = identity_from(attributes(dp.get("attributes")))
            if ident is None:
                orphans += 1
                continue
            if self.ctx.other_job(ident.job_id):
                self.ctx.skip("other_job", where, f"job {ident.job_id!r}")
                continue
            self._remember(ident)
            groups.setdefault(ident.rank, []).append(dp)
        if orphans:
            rank = self._fallback_rank(where, orphans)
            if rank is not None:
                groups.setdefault(rank, []).extend(
                    dp for dp in dps if identity_from(attributes(dp.get("attributes"))) is None)
        for rank, group in groups.items():
            self._points(rank, field, is_peak, group)

    def _resource_spans(self, rs: Mapping[str, Any], where: str) -> None:
        res_attrs = attributes((rs.get("resource") or {}).get("attributes"))
        if self.ctx.other_job(res_attrs.get(schema.ATTR_JOB_ID)):
            self.ctx.skip("other_job", where, f"job {res_attrs.get(schema.ATTR_JOB_ID)!r}")
            return
        rank = self._resource_rank(res_attrs)
        for ss in _get(rs, "scopeSpans", "scope_spans") or ():
            for span in ss.get("spans") or ():
                attrs = attributes(span.get("attributes"))
                span_rank = rank
                if span_rank is None:
                    ident = identity_from(attrs)
                    span_rank = ident.rank if ident else self._fallback_rank(where, 1)
                if span_rank is None:
                    continue
                self._span(span_rank, span, attrs, where)

    def _span(self, rank: int, span: Mapping[str, Any], attrs: dict[str, Any], where: str) -> None:
        name = str(span.get("name") or "")
        start = _opt_int(_get(span, "startTimeUnixNano", "start_time_unix_nano"))
        end = _opt_int(_get(span, "endTimeUnixNano", "end_time_unix_nano")) or start
        if start is None or start <= 0:
            self.ctx.skip("bad_timestamp", where, f"span {name!r} has no start time")
            return
        if name == schema.SPAN_STEP:
            step = attrs.get(schema.SPAN_ATTR_STEP)
            self.markers.add(rank, start, end or start, f"step {step}", KIND_STEP, attrs)
        elif name == schema.SPAN_MARK or schema.SPAN_ATTR_MARK in attrs:  # old and new naming
            mark = str(attrs.get(schema.SPAN_ATTR_MARK) or name)
            self.markers.add(rank, start, end or start, mark, kind_for_mark(mark), attrs)
        elif name not in (schema.SPAN_SESSION, schema.SPAN_EDGE):
            # An edge span only carries its event (below): the rank's own evidence, never a
            # mark another rank shares (it must not become a clock anchor).
            self.markers.add(rank, start, end or start, name, kind_for_mark(name), attrs)
        for ev in span.get("events") or ():
            kind = _EVENT_KINDS.get(ev.get("name"))
            t = _opt_int(_get(ev, "timeUnixNano", "time_unix_nano"))
            if ev.get("name") == schema.EVENT_EXCEPTION and t is not None and \
                    name in (schema.SPAN_STEP, schema.SPAN_MARK):
                self.markers.add(rank, t, t, name, KIND_EXCEPTION,
                                 exception_attrs(attributes(ev.get("attributes"))))
                continue
            if kind is None or t is None:
                continue
            self.markers.add(rank, t, t, str(ev.get("name")), kind,
                             attributes(ev.get("attributes")))

    # --- output -----------------------------------------------------------------------------
    def flush(self) -> int:
        """Convert the collected columns and hand them to the builder; returns samples read."""
        b = self.ctx.builder
        for ident in self.identities.values():
            b.set_identity(ident)
        if self.used_name_rank:
            self.ctx.note(f"{self.path}: rank taken from the file name (no rank attribute)")
        have_value = {(r, f) for (r, f, peak) in self.cols.t if not peak}
        series: dict[int, list[tuple[str, np.ndarray, np.ndarray]]] = {}
        for (rank, field, is_peak), ts in self.cols.t.items():
            if is_peak and (rank, field) in have_value:
                continue  # the value series is there; peaks are only a fallback
            where = f"{self.path} (rank {rank}, {field})"
            t, ok = time_column(ts, self.ctx, where, "timeUnixNano")
            v = bytes_column(self.cols.v[(rank, field, is_peak)], self.ctx, where, field)
            keep = ok & ~np.isnan(v)
            if not keep.any():
                continue
            series.setdefault(rank, []).append((field, t[keep], v[keep]))
            if is_peak:
                self.ctx.note(f"{self.path}: rank {rank} {field} taken from its peak series")
        samples = 0
        for rank, fields in series.items():
            chunks = _by_timestamps(fields)
            for t, values in chunks:
                b.add_samples(rank, t, **values)
            samples += distinct_count(chunks[0][0] if len(chunks) == 1 else
                                      np.concatenate([t for t, _ in chunks]))
        if self.estimates:
            known: dict[int, float] = b.meta.setdefault(META_ESTIMATE_BYTES, {})  # type: ignore[assignment]
            known.update({rank: value for rank, (_, value) in self.estimates.items()})
        for rank, kind, t_ms in sorted(self.edges):
            attrs: dict[str, object] = {schema.ATTR_EDGE: kind}
            if rank in self.intervals:
                attrs[EDGE_RESOLUTION_ATTR] = self.intervals[rank]
            self.markers.add(rank, t_ms * 1_000_000, t_ms * 1_000_000, kind,
                             EDGE_MARKER_KINDS[kind], attrs)
        for rank, stop_ms in sorted(self.stops):
            stop_ns = stop_ms * 1_000_000
            self.markers.add(rank, stop_ns, stop_ns, "tracker stop", KIND_TRACKER_STOP, {})
        for rank, start_ms in sorted(self.starts):
            start_ns = start_ms * 1_000_000
            self.markers.add(rank, start_ns, start_ns, "tracker start", KIND_TRACKER_START, {})
        if self.reports_stop:
            known_r: list[int] = b.meta.setdefault(META_STOP_REPORTED, [])  # type: ignore[assignment]
            known_r.extend(r for r in sorted(self.reports_stop) if r not in known_r)
        self._oom_counter_markers()
        for rank, m in self.markers.build().items():
            b.add_markers(rank, m)
        # Samples = distinct (rank, timestamp) pairs, whatever number of fields each carries.
        return samples

    def _oom_counter_markers(self) -> None:
        """One OOM marker per increase of a rank's OOM counter, unless this file's OOM edge
        gauge already put one inside that increase's interval (the same OOM, timed exactly).
        The marker sits at the first point that shows the increase; its resolution is the
        interval back to the point before."""
        for rank, points in sorted(self.oom_counts.items()):
            t = np.fromiter((p[0] for p in points), np.int64, len(points))
            v = np.fromiter((p[1] for p in points), np.float64, len(points))
            if rank in self.oom_delta:  # deltas: a positive point is an increase in its own
                order = np.argsort(t, kind="stable")  # interval, back to the previous point
                t, v = t[order], v[order]
                rises = [(int(t[i]), int(t[i - 1]) if i else int(t[i]), float(v[i]))
                         for i in np.flatnonzero(v > 0).tolist()]
            else:
                rises = counter_increases(t, v)
                if len(v) and float(v[np.argmin(t)]) > 0:
                    self.ctx.note(f"{self.path}: rank {rank}'s OOM counter already read "
                                  f"{float(v[np.argmin(t)]):g} at its first point; when those "
                                  "OOMs happened is not known")
            exact = [t_ms * 1_000_000 for r, kind, t_ms in self.edges
                     if r == rank and kind == schema.EDGE_OOM]
            for at, before, count in rises:
                if any(before - 1_000_000 <= e <= at + 1_000_000 for e in exact):
                    continue
                self.markers.add(rank, at, at, "OOM", KIND_OOM, {
                    OOM_SOURCE_ATTR: OOM_FROM_COUNTER, "count": count,
                    EDGE_RESOLUTION_ATTR: max(0, at - before)})


def _by_timestamps(fields: list[tuple[str, np.ndarray, np.ndarray]]
                   ) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """Fields sharing one timestamp array as one chunk (a batch of samples carries every gauge at
    the same stamps): one row per sample for the Timeline to merge instead of one per field.
    Each field still sits in exactly one chunk, so the merge keeps every value it kept before."""
    groups: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []
    for field, t, v in fields:
        for stamps, values in groups:
            if stamps.shape == t.shape and np.array_equal(stamps, t):
                values[field] = v
                break
        else:
            groups.append((t, {field: v}))
    return groups


def numbered_lines(data: bytes | bytearray, path: str) -> Iterator[tuple[memoryview, str, bool]]:
    """Each non-blank line (a view into ``data``: the file is not copied line by line), where
    it is (``path:line``), and whether it is an unterminated last line (a writer cut off
    mid-line)."""
    view = memoryview(data)
    start = lineno = 0
    while True:
        end = data.find(b"\n", start)
        lineno += 1
        cut = end < 0
        line = view[start:len(data) if cut else end]
        if line and (line[0] not in _WHITESPACE or bytes(line).strip()):
            yield line, f"{path}:{lineno}", cut
        if cut:
            return
        start = end + 1


#: One data point as the edge and counter readers take it: (attributes, time ns, value).
Row = tuple[dict[str, Any], int | None, Any]


def _rows(metric: Mapping[str, Any]) -> Iterator[Row]:
    body = metric.get("gauge") or metric.get("sum") or {}
    for dp in _get(body, "dataPoints", "data_points") or ():
        yield (attributes(dp.get("attributes")),
               _opt_int(_get(dp, "timeUnixNano", "time_unix_nano")), _value(dp))


def _is_delta(metric: Mapping[str, Any]) -> bool:
    body = metric.get("sum") or {}
    return _get(body, "aggregationTemporality", "aggregation_temporality") in \
        (1, "AGGREGATION_TEMPORALITY_DELTA")


def _value(dp: Mapping[str, Any]) -> Any:
    v = dp.get("asDouble")
    if v is None:
        v = dp.get("asInt")
        if v is None:
            v = dp.get("as_double", dp.get("as_int"))
    return v


class _BadTail(Exception):
    """The framing breaks at byte ``pos``, after at least one whole message."""

    def __init__(self, pos: int) -> None:
        super().__init__(pos)
        self.pos = pos


def _frames(data: bytes, path: str) -> Iterator[tuple[int, bytes]]:
    """Split length-prefixed protobuf: 4-byte big-endian lengths, else varint-delimited.

    A file whose 4-byte lengths stop fitting part-way (a flipped bit in a length, a cut) is
    still read with them when it starts like one (a length under 16 MiB: a zero first byte,
    which no varint-delimited request begins with): the messages before the break are kept
    and :class:`_BadTail` says where it broke. A break before the first message is not
    length-prefixed protobuf at all."""
    fixed = _fits_fixed32(data) or data[:1] == b"\x00"
    pos = 0
    while pos < len(data):
        if fixed:
            n: int | None = None
            body = pos + 4
            if body <= len(data):
                (n,) = struct.unpack_from(">I", data, pos)
        else:
            n, body = _read_varint(data, pos)
        if n is None or body + n > len(data):
            if pos == 0:
                raise SourceInputError(f"{path}: byte {pos}: not length-prefixed protobuf "
                                       "(bad length)")
            raise _BadTail(pos)
        yield pos, data[body:body + n]
        pos = body + n


def _fits_fixed32(data: bytes) -> bool:
    pos = 0
    while pos + 4 <= len(data):
        (n,) = struct.unpack_from(">I", data, pos)
        pos += 4 + n
    return pos == len(data) and len(data) > 0


def _read_varint(data: bytes, pos: int) -> tuple[int | None, int]:
    shift = result = 0
    while pos < len(data) and shift < 64:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    return None, pos


def _rank_value(res_rank: int | None, attrs: Any, raw: Any) -> tuple[int | None, float]:
    """A point's rank (the resource's, else the point's identity) and its value as a float
    (NaN when it is not a number: the callers skip non-finite values)."""
    rank = res_rank
    if rank is None:
        ident = identity_from(attrs)
        rank = ident.rank if ident else None
    try:
        return rank, float(raw)
    except (TypeError, ValueError):
        return rank, float("nan")
