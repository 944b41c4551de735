"""OTLP export over gRPC and HTTP reaches a receiver that decodes real OTLP protobuf.

No OpenTelemetry Collector binary can be installed here; the receivers in ``otlp_util`` decode
the bytes with the official ``opentelemetry.proto.collector`` classes, as a collector would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from stormotel import schema
from stormotel.tracker import MemoryTracker
from tests.tracker.otlp_util import GrpcReceiver, HttpReceiver, attrs, points, spans


@pytest.fixture(params=["grpc", "http"])
def receiver(request: pytest.FixtureRequest) -> Iterator[tuple[str, GrpcReceiver | HttpReceiver]]:
    rx = GrpcReceiver() if request.param == "grpc" else HttpReceiver()
    yield request.param, rx
    rx.close()


def _check(rx: GrpcReceiver | HttpReceiver) -> None:
    assert rx.got.metrics, "no metrics export arrived"
    names = set()
    for res, name, point in points(rx.got.metrics):
        names.add(name)
        assert res[schema.RES_SERVICE_INSTANCE_ID] == "t-job/rank-1"
        assert res[schema.ATTR_JOB_ID] == "t-job" and res[schema.ATTR_WORLD_SIZE] == "2"
        labels = attrs(point.attributes)
        assert labels[schema.ATTR_RANK] == "1" and labels[schema.ATTR_HOST] == "node-a"
    assert {schema.DEVICE_USED.name, schema.DEVICE_USED_PEAK.name, schema.GAP.name,
            schema.SAMPLES.name} <= names
    span_names = {s.name for res, s in spans(rx.got.traces)
                  if res[schema.ATTR_RANK] == "1"}
    assert {schema.SPAN_SESSION, schema.SPAN_STEP} <= span_names


def test_otlp_export_by_arguments(receiver: tuple[str, GrpcReceiver | HttpReceiver],
                                  make_tracker: Callable[..., MemoryTracker]) -> None:
    protocol, rx = receiver
    tracker = make_tracker(otlp_endpoint=rx.url, otlp_protocol=protocol, otlp_interval=0.2)
    assert tracker.start_tracking().destinations == [schema.DEST_OTLP]
    for i in range(3):
        with tracker.step(i):
            time.sleep(0.15)
    tracker.stop_tracking()  # final export + span flush
    _check(rx)
    assert tracker.stats["export_failures"] == {f"{schema.DEST_OTLP}/export_failed": 0}


def test_otlp_export_by_standard_env(receiver: tuple[str, GrpcReceiver | HttpReceiver],
                                     make_tracker: Callable[..., MemoryTracker],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    protocol, rx = receiver
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url,
           "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc" if protocol == "grpc" else "http/protobuf",
           "OTEL_EXPORTER_OTLP_INSECURE": "true"}
    for key, value in env.items():  # the official exporters read os.environ themselves
        monkeypatch.setenv(key, value)
    tracker = make_tracker(env=env, otlp_interval=0.2)
    tracker.start_tracking()
    with tracker.step(0):
        time.sleep(0.3)
    tracker.stop_tracking()
    _check(rx)
