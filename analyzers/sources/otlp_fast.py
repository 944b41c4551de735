"""Typed decoding of OTLP JSON metrics: only the fields the Timeline uses, no per-point dicts.

``orjson.loads`` builds a dict for every data point, every attribute and every key of a line the
reader then throws away (the tracker's lines carry descriptions, counters, scopes...). msgspec
decodes straight into small ``gc=False`` structs that declare only the fields the analyzer reads
(name, time, value, resource attributes, sum temporality), skipping everything else in C; why
msgspec: it is maintained, typed, one C extension that also encodes (the tracker's compact
archive writer), and ``strict=False`` turns the protobuf JSON mapping's int64-as-string into
ints without a Python pass. The garbage collector is paused while a file is decoded (millions of
short-lived objects would otherwise trigger full collections).

Every shape real producers write is accepted, at the same speed:

* ``ExportMetricsServiceRequest`` per line (stormotel, the OTel file exporters, the collector's
  file exporter with int64 as strings and empty resources/scopes);
* bare ``ResourceMetrics`` objects per line (the Java SDK's logging exporter);
* one pretty-printed document, or a JSON array of requests;
* enum names (``"AGGREGATION_TEMPORALITY_DELTA"``) as well as numbers; delta sums are summed up
  into levels (a note says so), cumulative sums and gauges are read as levels.

Spans and anything the typed decoder rejects (snake_case keys, wrong types) go through the
generic dict walker of :mod:`stormotel.analyzers.sources.otlp_archive`, so skips and notes are
unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec
from stormotel.analyzers.gcpause import gc_paused
from stormotel.analyzers.sources.jsonio import JSONDecodeError, first_byte, loads
from stormotel.analyzers.sources.otlp_archive import (
    METRIC_FIELDS,
    OOM_EDGE_ONLY,
    PROCESS_GAUGES,
    Row,
    numbered_lines,
)

from stormotel import schema

if TYPE_CHECKING:
    from stormotel.analyzers.sources.otlp_archive import OtlpFileReader

__all__ = ["read_json"]


class _AnyValue(msgspec.Struct, rename="camel", gc=False, frozen=True):
    string_value: str | None = None
    int_value: int | None = None
    double_value: float | None = None
    bool_value: bool | None = None


class _KeyValue(msgspec.Struct, gc=False):
    key: str
    value: _AnyValue = _AnyValue()


class OtlpResource(msgspec.Struct, gc=False):
    attributes: list[_KeyValue] = []


class OtlpPoint(msgspec.Struct, rename="camel", gc=False):
    time_unix_nano: int = 0
    as_int: int | None = None
    as_double: float | None = None
    attributes: list[_KeyValue] = []


class _Body(msgspec.Struct, rename="camel", gc=False):
    data_points: list[OtlpPoint] = []
    aggregation_temporality: int | str = 0


#: A metric's body: its data points decoded as structs (here), or left as raw bytes
#: (:mod:`stormotel.analyzers.sources.otlp_compact`, which parses a whole file's points at once).
BodyT = TypeVar("BodyT")


class Metric(msgspec.Struct, Generic[BodyT], gc=False):
    name: str = ""
    gauge: BodyT | None = None
    sum: BodyT | None = None


class ScopeMetrics(msgspec.Struct, Generic[BodyT], gc=False):
    metrics: list[Metric[BodyT]] = []


_Metric = Metric[_Body]
_ScopeMetrics = ScopeMetrics[_Body]


class _ResourceMetrics(msgspec.Struct, rename="camel", gc=False):
    resource: OtlpResource | None = None
    scope_metrics: list[_ScopeMetrics] = []


class _Envelope(msgspec.Struct, rename="camel", gc=False):
    """A request, or a bare ResourceMetrics/ResourceSpans (``resource`` + ``scope*``)."""

    resource_metrics: list[_ResourceMetrics] = []
    resource_spans: list[msgspec.Raw] = []
    resource: OtlpResource | None = None
    scope_metrics: list[_ScopeMetrics] = []
    scope_spans: list[msgspec.Raw] = []


_line_decoder = msgspec.json.Decoder(_Envelope, strict=False)
_doc_decoder = msgspec.json.Decoder(_Envelope | list[_Envelope], strict=False)
_DELTA = (1, "AGGREGATION_TEMPORALITY_DELTA")


def attrs_of(items: list[_KeyValue]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in items:
        v = kv.value
        value: Any = v.string_value
        if value is None:
            value = v.int_value if v.int_value is not None else \
                v.double_value if v.double_value is not None else v.bool_value
        out[kv.key] = value
    return out


#: Metrics read for their few points, not as memory columns: the OOM counter, and the edge
#: gauges (only the OOM edge: spans carry the others) with the sampling interval they need.
CONTEXT_METRICS = frozenset({schema.OOMS.name, schema.EDGE_TIMESTAMP.name,
                             schema.SAMPLING_INTERVAL.name, *PROCESS_GAUGES})


def point_rows(points: list[OtlpPoint]) -> list[Row]:
    return [(attrs_of(dp.attributes), dp.time_unix_nano,
             dp.as_int if dp.as_double is None else dp.as_double) for dp in points]


def _is_oom_edge(dp: OtlpPoint) -> bool:
    return any(kv.key == schema.ATTR_EDGE and kv.value.string_value == schema.EDGE_OOM
               for kv in dp.attributes)


def read_context_metric(reader: OtlpFileReader, res_rank: int | None, name: str,
                        points: list[OtlpPoint], temporality: int | str) -> None:
    """Hand one of :data:`CONTEXT_METRICS` to the reader (OOM counter, OOM edge, clean-stop
    and start gauges). Only the OOM edge's points are turned into rows, and the stop-reported
    gauge's only where it says 1: a ``lines`` archive repeats every edge and those gauges per
    line."""
    if name == schema.OOMS.name:
        reader.oom_points(res_rank, point_rows(points), temporality in _DELTA)
    elif name == schema.EDGE_TIMESTAMP.name:
        oom = [dp for dp in points if _is_oom_edge(dp)]
        if oom:
            reader.edge_points(res_rank, name, point_rows(oom), OOM_EDGE_ONLY)
    elif name == schema.TRACKER_START.name and res_rank is not None:
        # In every context line (each line of a ``lines`` archive) with the same value: one
        # set entry per point, no row built.
        for dp in points:
            value = dp.as_int if dp.as_double is None else dp.as_double
            if value is not None and 0 < value < 1e11:
                reader.starts.add((res_rank, round(value * 1000)))
    elif name in PROCESS_GAUGES:
        if name == schema.TRACKER_STOP_REPORTED.name and res_rank is not None:
            # In every context line (each line of a ``lines`` archive): one point, and the
            # rank is known; rows only where it says 1 and the rank is not yet listed.
            if res_rank in reader.reports_stop:
                return
            points = [dp for dp in points if (dp.as_int if dp.as_double is None
                                              else dp.as_double) == 1]
            if not points:
                return
        reader.stop_points(res_rank, name, point_rows(points))
    else:
        reader.edge_points(res_rank, name, point_rows(points), OOM_EDGE_ONLY)


def read_json(reader: OtlpFileReader, data: bytes | bytearray, *, arrays: bool = True) -> None:
    """Decode an OTLP JSON file (lines, or one document) into ``reader``'s columns.

    A compact archive (:mod:`stormotel.analyzers.sources.otlp_compact`) goes straight into arrays
    unless ``arrays`` is False; any other file, or one that path declines, is walked here."""
    walker = _Walker(reader)
    with gc_paused():
        first = first_byte(data)
        head_end = data.find(b"\n")
        head = data[:head_end if head_end >= 0 else len(data)].strip()
        if first in (b"{", b"[") and head in (b"{", b"["):  # one pretty-printed document
            walker.document(bytes(data))
        else:
            if arrays:
                from stormotel.analyzers.sources.otlp_compact import read_compact

                if read_compact(reader, data):
                    return
            # The walker may keep views of lines; a reused scratch buffer is copied first.
            walker.lines(bytes(data) if isinstance(data, bytearray) else data)
    walker.finish()


def _a_later_line_is_an_object(data: bytes) -> bool:
    """Whether a line after the first is a whole JSON object on its own: a JSON-lines file
    whose first line(s) were damaged, never a pretty-printed document (its lines are
    ``"resourceMetrics": [``, ``{``, or array items followed by their commas). Asked only of
    a file that did not decode as one document."""
    lines = numbered_lines(data, "")
    next(lines, None)
    for line, _, _ in lines:
        try:
            if isinstance(msgspec.json.decode(line), dict):
                return True
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue
    return False


class _Walker:
    def __init__(self, reader: OtlpFileReader) -> None:
        self.r = reader
        self.names: set[str] = set()
        self.delta_keys: set[tuple[int, str, bool]] = set()

    def lines(self, data: bytes) -> None:
        decode = _line_decoder.decode
        for line, where, cut in numbered_lines(data, self.r.path):
            try:
                env = decode(line)
            except (msgspec.DecodeError, UnicodeDecodeError):  # msgspec: bad UTF-8 in a string
                self._slow(line, where, truncated=cut)
                continue
            if not self._envelope(env, line, where):
                self._slow(line, where, truncated=False)

    def document(self, data: bytes) -> None:
        where = f"{self.r.path} (one JSON document)"
        try:
            doc = _doc_decoder.decode(data)
        except msgspec.ValidationError:  # JSON, of another shape: the generic walker decides
            self._slow(data, where, truncated=False)
            return
        except (msgspec.DecodeError, UnicodeDecodeError):
            if _a_later_line_is_an_object(data):
                # JSON lines whose first line is a damaged ``{`` (or ``[``): bad lines counted
                # as the generic walker counts them, not the whole file lost as one document.
                self.lines(data)
                return
            self._slow(data, where, truncated=False)
            return
        for env in doc if isinstance(doc, list) else [doc]:
            if not self._envelope(env, None, where):
                self.r.ctx.skip("not_otlp", where, "no resourceMetrics or resourceSpans")

    def _slow(self, raw: bytes | memoryview, where: str, truncated: bool) -> None:
        """The generic dict walker: same skips and notes as before for odd input."""
        try:
            obj = loads(raw)
        except JSONDecodeError as exc:
            self.r.skip_bad_json(where, truncated, exc)
            return
        if isinstance(obj, dict) and "resourceMetrics" not in obj and \
                "resource_metrics" not in obj and "resourceSpans" not in obj and \
                "resource_spans" not in obj and ("scopeMetrics" in obj or "scopeSpans" in obj):
            obj = {"resourceMetrics": [obj]} if "scopeMetrics" in obj else \
                {"resourceSpans": [obj]}
        if isinstance(obj, list):  # a JSON array of export requests on one line
            for i, item in enumerate(obj):
                self.r._consume(item, f"{where} [item {i}]")
            return
        self.r._consume(obj, where)

    def _envelope(self, env: _Envelope, line: bytes | memoryview | None, where: str) -> bool:
        """Walk one decoded object; False when it holds nothing this decoder knows."""
        rms = env.resource_metrics
        spans = env.resource_spans
        if not rms and (env.scope_metrics or (env.resource is not None and not env.scope_spans
                                               and not spans)):
            rms = [_ResourceMetrics(env.resource, env.scope_metrics)]
        if not rms and not spans and not env.scope_spans:
            return False
        self.r.records += 1
        for rm in rms:
            self._resource_metrics(rm, where)
        try:  # spans are kept raw (undecoded, so unchecked UTF-8) until now
            for raw in spans:
                self.r._resource_spans(msgspec.json.decode(raw), where)
            if env.scope_spans:
                bare = {"resource": msgspec.to_builtins(env.resource) if env.resource else {},
                        "scopeSpans": [msgspec.json.decode(raw) for raw in env.scope_spans]}
                self.r._resource_spans(bare, where)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # bad UTF-8 (either, by
            # msgspec's version), counted as the generic walker counts such a line
            self.r.skip_bad_json(where, False, exc)
        return True

    def _resource_metrics(self, rm: _ResourceMetrics, where: str) -> None:
        r = self.r
        resource = rm.resource
        key = resource  # structs compare by value: the same resource as the previous line
        if key is not None and key == r._last_resource:
            res_rank = r._last_rank
        else:
            res_attrs = attrs_of(resource.attributes) if resource is not None else {}
            if r.ctx.other_job(res_attrs.get(schema.ATTR_JOB_ID)):
                r.ctx.skip("other_job", where, f"job {res_attrs.get(schema.ATTR_JOB_ID)!r}")
                return
            res_rank = r._resource_rank(res_attrs)
            r._last_resource, r._last_rank = key, res_rank
        fields = METRIC_FIELDS
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                name = metric.name
                self.names.add(name)
                if name == schema.ESTIMATE.name:
                    r._estimate(res_rank, msgspec.to_builtins(metric))
                    continue
                if name in CONTEXT_METRICS:
                    body = metric.gauge or metric.sum
                    if body is not None and body.data_points:
                        read_context_metric(r, res_rank, name, body.data_points,
                                            body.aggregation_temporality
                                            if metric.gauge is None else 0)
                    continue
                spec = fields.get(name)
                if spec is None:
                    continue
                body = metric.gauge or metric.sum
                if body is None or not body.data_points:
                    continue
                field, is_peak = spec
                delta = metric.gauge is None and body.aggregation_temporality in _DELTA
                if res_rank is None:
                    dps = [msgspec.to_builtins(dp) for dp in body.data_points]
                    r._points_by_attr_rank(field, is_peak, dps, where)
                    if delta:
                        self.delta_keys |= {k for k in r.cols.t if k[1:] == (field, is_peak)}
                    continue
                if delta:
                    self.delta_keys.add((res_rank, field, is_peak))
                ts, vs = r.cols.lists((res_rank, field, is_peak))
                dps = body.data_points
                ts.extend([dp.time_unix_nano for dp in dps])
                vs.extend([dp.as_int if dp.as_double is None else dp.as_double for dp in dps])

    def finish(self) -> None:
        r = self.r
        for key in self.delta_keys:  # delta sums: changes per interval → running level
            ts, vs = r.cols.t[key], r.cols.v[key]
            order = sorted(range(len(ts)), key=lambda i: int(ts[i]))
            level = 0.0
            out = [0.0] * len(vs)
            for i in order:
                v = vs[i]
                level += float(v) if v is not None else 0.0
                out[i] = level
            r.cols.v[key] = out
            r.ctx.note(f"{r.path}: rank {key[0]} {key[1]} is a delta sum; read as its running "
                       "total")
        if self.names and not r.cols.t and not r.estimates and not r.columns_elsewhere:
            shown = ", ".join(sorted(self.names)[:6]) + (" …" if len(self.names) > 6 else "")
            wanted = ", ".join(sorted(METRIC_FIELDS)[:3])
            r.ctx.note(f"{r.path}: OTLP metrics but no GPU memory series: found "
                       f"{len(self.names)} metric name(s) ({shown}); stormotel reads e.g. "
                       f"{wanted}")

