"""Test helpers: decode OTLP (archive lines, protobuf bodies) and stand in for a collector.

No OpenTelemetry Collector binary can be installed here, so the receivers below are small local
servers that decode what they get with the official protobuf classes
(``opentelemetry.proto.collector.*``) — the same bytes a collector would parse.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import zstandard
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from stormotel import schema
from stormotel.archive_writer import compact_archive_glob

MetricsRequest = metrics_service_pb2.ExportMetricsServiceRequest
TraceRequest = trace_service_pb2.ExportTraceServiceRequest


def value_of(v: AnyValue) -> Any:
    return getattr(v, v.WhichOneof("value")) if v.WhichOneof("value") else None


def attrs(kvs: list[KeyValue] | Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in kvs}


def archive_lines(path: Path) -> list[bytes]:
    """The JSON lines of one archive file: plain (``lines`` format, traces) or a compact
    ``.zst`` file, decompressed up to its last complete block as every zstd reader does."""
    data = path.read_bytes()
    if path.name.endswith(".zst"):
        data = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True) \
            .decompress(data)  # every frame: one ends at each companion frame
    return data.splitlines()


def parse_lines(path: Path, message: type) -> list[Any]:
    return [json_format.Parse(line, message()) for line in archive_lines(path)]


def metrics_files(folder: Path, rank: int) -> list[Path]:
    """One rank's metrics archive in ``folder``: the rotated compact files (oldest first) or the
    single ``lines``-format file."""
    compact = sorted(folder.glob(compact_archive_glob(rank)))
    lines_file = f"{schema.ARCHIVE_RANK_PREFIX}{rank}{schema.ARCHIVE_METRICS_SUFFIX}"
    return compact or [folder / lines_file]


def metrics_requests(folder: Path, rank: int) -> list[Any]:
    """Every ``ExportMetricsServiceRequest`` one rank archived in ``folder``, in order."""
    return [r for f in metrics_files(folder, rank) for r in parse_lines(f, MetricsRequest)]


def samples_archived(requests: list[Any]) -> int:
    """How many samples the requests carry: one device-used data point each, in either format."""
    return sum(1 for _r, name, _p in points(requests) if name == schema.DEVICE_USED.name)


def points(requests: list[Any]) -> Iterator[tuple[dict[str, Any], str, Any]]:
    """(resource attrs, metric name, data point) for every gauge/sum/histogram point."""
    for req in requests:
        for rm in req.resource_metrics:
            res = attrs(rm.resource.attributes)
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    kind = m.WhichOneof("data")
                    data = getattr(m, kind) if kind else m.gauge
                    for p in data.data_points:
                        yield res, m.name, p


def spans(requests: list[Any]) -> Iterator[tuple[dict[str, Any], Any]]:
    for req in requests:
        for rs in req.resource_spans:
            res = attrs(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    yield res, s


class Received:
    def __init__(self) -> None:
        self.metrics: list[Any] = []
        self.traces: list[Any] = []
        self.other_paths: list[str] = []
        self.lock = threading.Lock()


class HttpReceiver:
    """OTLP/HTTP (protobuf) on loopback: <prefix>/v1/metrics and <prefix>/v1/traces; any other
    path is a 404, remembered in ``got.other_paths``."""

    def __init__(self, prefix: str = "") -> None:
        self.got = Received()
        got = self.got

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == f"{prefix}/v1/metrics":
                    msg, reply, sink = MetricsRequest(), \
                        metrics_service_pb2.ExportMetricsServiceResponse(), got.metrics
                elif self.path == f"{prefix}/v1/traces":
                    msg, reply, sink = TraceRequest(), \
                        trace_service_pb2.ExportTraceServiceResponse(), got.traces
                else:
                    with got.lock:
                        got.other_paths.append(self.path)
                    self.send_response(404)
                    self.end_headers()
                    return
                msg.ParseFromString(body)
                with got.lock:
                    sink.append(msg)
                out = reply.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class GrpcReceiver:
    """OTLP/gRPC on loopback with the official generated servicers."""

    def __init__(self) -> None:
        self.got = Received()
        got = self.got

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                with got.lock:
                    got.metrics.append(request)
                return metrics_service_pb2.ExportMetricsServiceResponse()

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                with got.lock:
                    got.traces.append(request)
                return trace_service_pb2.ExportTraceServiceResponse()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), self.server)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.url = f"http://127.0.0.1:{port}"

    def close(self) -> None:
        self.server.stop(grace=None)
