"""Build real OTLP export requests (opentelemetry.proto messages) for archive tests.

Files are written the way the OTel file exporter and the collector write them: one
``ExportMetricsServiceRequest``/``ExportTraceServiceRequest`` per line via protobuf's JSON
mapping (``json_format.MessageToJson``: camelCase, int64 as strings), or length-prefixed binary.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

from google.protobuf import json_format
from google.protobuf.internal.encoder import _VarintBytes
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Metric,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from stormotel import schema
from tests.analyzers.synth import RankData


def kv(key: str, value: object) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def resource(rank: int | None, job_id: str = "job-otlp", world_size: int = 4) -> Resource:
    attrs = [kv(schema.RES_SERVICE_NAME, schema.SERVICE_NAME), kv(schema.ATTR_JOB_ID, job_id),
             kv(schema.ATTR_WORLD_SIZE, str(world_size))]
    if rank is not None:
        attrs += [kv(schema.ATTR_RANK, str(rank)), kv(schema.ATTR_HOST, f"node-{rank // 8}")]
    return Resource(attributes=attrs)


def metrics_requests(d: RankData, *, per_request: int = 10, job_id: str = "job-otlp",
                     world_size: int = 4, rank_in_points: bool = False
                     ) -> list[ExportMetricsServiceRequest]:
    """One request per ``per_request`` samples, each with a gauge per field."""
    fields = {"allocated": d.allocated, "reserved": d.reserved, "device_used": d.device_used,
              "device_total": d.device_total}
    out = []
    for lo in range(0, d.t_ns.shape[0], per_request):
        hi = min(lo + per_request, d.t_ns.shape[0])
        metrics = []
        for f, arr in fields.items():
            m = schema.FIELD_METRICS[f]
            pt_attrs = [kv(schema.ATTR_RANK, str(d.rank)), kv(schema.ATTR_JOB_ID, job_id)] \
                if rank_in_points else []
            pts = [NumberDataPoint(time_unix_nano=int(d.t_ns[i]), as_int=int(arr[i]),
                                   attributes=pt_attrs) for i in range(lo, hi)]
            metrics.append(Metric(name=m.name, unit=m.unit, gauge=Gauge(data_points=pts)))
        res = resource(None if rank_in_points else d.rank, job_id, world_size)
        out.append(ExportMetricsServiceRequest(resource_metrics=[ResourceMetrics(
            resource=res, scope_metrics=[ScopeMetrics(metrics=metrics)])]))
    return out


def trace_request(d: RankData, *, job_id: str = "job-otlp", world_size: int = 4
                  ) -> ExportTraceServiceRequest:
    spans = []
    for start, end, name, kind in d.markers:
        if kind == "step":
            spans.append(Span(name=schema.SPAN_STEP, start_time_unix_nano=start,
                              end_time_unix_nano=end,
                              attributes=[kv(schema.SPAN_ATTR_STEP, int(name.split()[-1]))]))
        else:
            spans.append(Span(name=schema.SPAN_MARK, start_time_unix_nano=start,
                              end_time_unix_nano=end, attributes=[kv(schema.SPAN_ATTR_MARK, name)]))
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=resource(d.rank, job_id, world_size), scope_spans=[ScopeSpans(spans=spans)])])


def json_lines(messages: Iterable[object]) -> bytes:
    return b"".join(json_format.MessageToJson(m, indent=None).encode() + b"\n"  # type: ignore
                    for m in messages)


def write_archive(folder: Path, data: list[RankData], **kw: object) -> Path:
    """``folder/rank-R.metrics.jsonl`` (+ ``.traces.jsonl`` when a rank has markers)."""
    folder.mkdir(parents=True, exist_ok=True)
    for d in data:
        (folder / f"rank-{d.rank}.metrics.jsonl").write_bytes(
            json_lines(metrics_requests(d, **kw)))  # type: ignore[arg-type]
        if d.markers:
            (folder / f"rank-{d.rank}.traces.jsonl").write_bytes(json_lines([trace_request(d)]))
    return folder


def length_prefixed(messages: Iterable[object], *, varint: bool = False) -> bytes:
    out = b""
    for m in messages:
        body = m.SerializeToString()  # type: ignore[attr-defined]
        out += (_VarintBytes(len(body)) if varint else struct.pack(">I", len(body))) + body
    return out
