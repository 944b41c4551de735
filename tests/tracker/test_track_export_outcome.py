"""``stormotel track`` against a local OTLP receiver: what a user sees when the collector
example is right, when it sends HTTP to the gRPC port (the docs' old example), and when nothing
listens. The receivers decode what they get with the official protobuf classes."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator

import pytest

from stormotel import exitcodes, schema
from stormotel.otlp_hint import likely_cause
from tests.cli import run_stormotel
from tests.tracker.otlp_util import GrpcReceiver, HttpReceiver, points


def _track(endpoint: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_stormotel("track", "--sampler", "simulated", "--duration", "2.5",
                         "--otlp-interval", "0.5", "--otlp-endpoint", endpoint, "--job-id",
                         "collector", "--rank", "1", "--world-size", "2", *extra,
                         timeout=60, cwd=None)


@pytest.fixture
def http_receiver() -> Iterator[HttpReceiver]:
    r = HttpReceiver()
    yield r
    r.close()


@pytest.fixture
def grpc_receiver() -> Iterator[GrpcReceiver]:
    r = GrpcReceiver()
    yield r
    r.close()


def _ranks_received(requests: list[object]) -> set[str]:
    return {str(res.get(schema.ATTR_RANK)) for res, name, _p in points(requests)
            if name == schema.DEVICE_USED.name}


def test_http_protobuf_to_the_http_port_exits_0(http_receiver: HttpReceiver) -> None:
    out = _track(http_receiver.url)
    assert out.returncode == exitcodes.OK, out.stderr
    assert "error" not in out.stderr and "likely cause" not in out.stderr
    assert _ranks_received(http_receiver.got.metrics) == {"1"}


def test_grpc_to_the_grpc_port_exits_0(grpc_receiver: GrpcReceiver) -> None:
    out = _track(grpc_receiver.url, "--otlp-protocol", "grpc")
    assert out.returncode == exitcodes.OK, out.stderr
    assert _ranks_received(grpc_receiver.got.metrics) == {"1"}


def test_http_to_a_grpc_port_is_a_loud_failure(grpc_receiver: GrpcReceiver) -> None:
    """The old docs' example: the default protocol (http/protobuf) sent to a gRPC port.
    Every export fails; the warning names the cause and the run exits 4, not 0."""
    out = _track(grpc_receiver.url)
    assert out.returncode == exitcodes.SINK_FAILURE, out.stderr
    assert not grpc_receiver.got.metrics
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("stormotel track: error: no OTLP export succeeded"), last
    assert "gRPC port" in last and "4318" in last and "OTEL_EXPORTER_OTLP_PROTOCOL=grpc" in last
    assert "Traceback" not in out.stderr


def test_nothing_listening_exits_4() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    out = _track(f"http://127.0.0.1:{port}")
    assert out.returncode == exitcodes.SINK_FAILURE, out.stderr
    assert "no OTLP export succeeded" in out.stderr
    assert "connection refused" in out.stderr and "gRPC port" not in out.stderr
    # The SDK's own retry chatter stays out of the user's terminal (its text feeds the cause).
    assert "Transient error" not in out.stderr and "retrying in" not in out.stderr
    assert "Failed to export" not in out.stderr


def test_nothing_listening_on_the_grpc_port_is_not_blamed_on_the_protocol() -> None:
    """The issue's case: http/protobuf (the default) to :4317 with no collector at all. The
    port says "gRPC", but the exporter never reached anything: the hint says connection refused
    first. Text as urllib3 2.x logs it through the OTLP/HTTP exporter."""
    refused = ("Transient error HTTPConnectionPool(host='127.0.0.1', port=4317): Max retries "
               "exceeded with url: /v1/metrics (Caused by NewConnectionError(\"HTTPConnection("
               "host='127.0.0.1', port=4317): Failed to establish a new connection: [Errno 111] "
               "Connection refused\")) encountered while exporting metrics batch, retrying in "
               "1.07s.")
    hint = likely_cause("http/protobuf", "http://127.0.0.1:4317/v1/metrics", refused)
    assert "nothing is listening at http://127.0.0.1:4317" in hint and "gRPC" not in hint
    grpc = "StatusCode.UNAVAILABLE: failed to connect to all addresses; last error: ..."
    assert "connection refused" in likely_cause("grpc", "http://127.0.0.1:4317", grpc)
    dns = "Failed to resolve 'collector' ([Errno -2] Name or service not known)"
    assert "does not resolve" in likely_cause("http/protobuf", "http://collector:4318", dns)


def test_likely_cause_from_ports_alone() -> None:
    assert "port 4317 is the OTLP/gRPC port" in likely_cause("http/protobuf",
                                                              "http://collector:4317/v1/metrics")
    assert "port 4318 is the OTLP/HTTP port" in likely_cause("grpc", "http://collector:4318")
    assert likely_cause("http/protobuf", "http://collector:4318/v1/metrics") == ""
    assert likely_cause("grpc", "http://collector:4317") == ""
