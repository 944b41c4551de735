"""The standard OTEL_* configuration, as an operator sets it, against a local OTLP receiver.

Each case configures the tracker only through the environment (or ``otlp_endpoint=``), runs a
few steps and checks what a collector would receive (real protobuf, decoded by otlp_util).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from stormotel import schema
from stormotel.tracker import MemoryTracker
from tests.tracker.otlp_util import GrpcReceiver, HttpReceiver, attrs, spans

DELTA, CUMULATIVE = 1, 2  # opentelemetry.proto AggregationTemporality values


@pytest.fixture
def http_rx() -> Iterator[HttpReceiver]:
    rx = HttpReceiver()
    yield rx
    rx.close()


def _run(make_tracker: Callable[..., MemoryTracker], **kwargs: Any) -> MemoryTracker:
    tracker = make_tracker(otlp_interval=0.2, **kwargs)
    tracker.start_tracking()
    for i in range(2):
        with tracker.step(i):
            time.sleep(0.15)
    tracker.stop_tracking()
    return tracker


def _metric_names(rx: HttpReceiver | GrpcReceiver) -> set[str]:
    return {m.name for req in rx.got.metrics for rm in req.resource_metrics
            for sm in rm.scope_metrics for m in sm.metrics}


def _otlp_failures(tracker: MemoryTracker) -> dict[str, int]:
    return {k: v for k, v in tracker.stats["export_failures"].items()
            if k.startswith(schema.DEST_OTLP) and v}


def test_default_protocol_is_http_protobuf(http_rx: HttpReceiver,
                                           make_tracker: Callable[..., MemoryTracker]) -> None:
    tracker = _run(make_tracker, env={"OTEL_EXPORTER_OTLP_ENDPOINT": http_rx.url})
    assert schema.DEVICE_USED.name in _metric_names(http_rx)
    assert any(s.name == schema.SPAN_STEP for _r, s in spans(http_rx.got.traces))
    assert not _otlp_failures(tracker) and not http_rx.got.other_paths


def test_traces_exporter_none(http_rx: HttpReceiver,
                              make_tracker: Callable[..., MemoryTracker]) -> None:
    _run(make_tracker, env={"OTEL_EXPORTER_OTLP_ENDPOINT": http_rx.url,
                            "OTEL_TRACES_EXPORTER": "none"})
    assert _metric_names(http_rx) and not http_rx.got.traces


def test_metrics_exporter_none(http_rx: HttpReceiver,
                               make_tracker: Callable[..., MemoryTracker]) -> None:
    tracker = _run(make_tracker, env={"OTEL_EXPORTER_OTLP_ENDPOINT": http_rx.url,
                                      "OTEL_METRICS_EXPORTER": "none"})
    assert not http_rx.got.metrics and http_rx.got.traces
    assert schema.DEST_OTLP not in tracker.destinations


def test_only_the_metrics_endpoint_sends_no_traces_anywhere(
        http_rx: HttpReceiver, make_tracker: Callable[..., MemoryTracker]) -> None:
    tracker = _run(make_tracker, env={
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": f"{http_rx.url}/v1/metrics"})
    assert _metric_names(http_rx) and not http_rx.got.traces
    # No span exporter at all: nothing tried localhost:4318 (that would count as a failure).
    assert not _otlp_failures(tracker)


@pytest.mark.parametrize(("preference", "expected"), [("delta", DELTA),
                                                      ("cumulative", CUMULATIVE)])
def test_temporality_preference(preference: str, expected: int, http_rx: HttpReceiver,
                                make_tracker: Callable[..., MemoryTracker]) -> None:
    _run(make_tracker, env={"OTEL_EXPORTER_OTLP_ENDPOINT": http_rx.url,
                            "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": preference})
    found = {m.sum.aggregation_temporality for req in http_rx.got.metrics
             for rm in req.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
             if m.name == schema.SAMPLES.name}
    assert found == {expected}
    usage = {m.sum.is_monotonic for req in http_rx.got.metrics for rm in req.resource_metrics
             for sm in rm.scope_metrics for m in sm.metrics
             if m.name == schema.DEVICE_USED.name}
    assert usage == {False}  # hw.gpu.memory.usage: an UpDownCounter, as semconv says


def test_service_name_is_not_overridden(http_rx: HttpReceiver,
                                        make_tracker: Callable[..., MemoryTracker]) -> None:
    _run(make_tracker, env={"OTEL_EXPORTER_OTLP_ENDPOINT": http_rx.url,
                            "OTEL_SERVICE_NAME": "llama-pretrain"})
    services = {attrs(rm.resource.attributes)[schema.RES_SERVICE_NAME]
                for req in http_rx.got.metrics for rm in req.resource_metrics}
    assert services == {"llama-pretrain"}


def test_base_path_in_the_argument_is_handled_like_the_variable(
        make_tracker: Callable[..., MemoryTracker]) -> None:
    rx = HttpReceiver(prefix="/otlp")
    try:
        for endpoint in (f"{rx.url}/otlp", f"{rx.url}/otlp/"):
            _run(make_tracker, otlp_endpoint=endpoint, otlp_protocol="http")
        _run(make_tracker, env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"{rx.url}/otlp"})
    finally:
        rx.close()
    assert len(rx.got.metrics) >= 3 and rx.got.traces
    assert not rx.got.other_paths


def test_bad_export_interval_is_a_logged_counted_fallback(
        http_rx: HttpReceiver, make_tracker: Callable[..., MemoryTracker],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    tracker = make_tracker(env={"OTEL_EXPORTER_OTLP_ENDPOINT": http_rx.url,
                                "OTEL_METRIC_EXPORT_INTERVAL": "10s"})
    tracker.start_tracking()  # no traceback: the fallback is 10 000 ms
    tracker.stop_tracking()  # the final export still arrives
    assert _metric_names(http_rx)
    assert tracker.stats["export_failures"][f"{schema.DEST_OTLP}/{schema.REASON_BAD_CONFIG}"] == 1
    assert "OTEL_METRIC_EXPORT_INTERVAL='10s' is not valid" in caplog.text


@pytest.mark.parametrize("endpoint", ["not a url", "ftp://collector:4317", "http://",
                                      "http://collector:99999"])
def test_endpoint_that_is_not_a_url_is_a_clear_error(endpoint: str,
                                                     make_tracker: Callable[..., MemoryTracker]
                                                     ) -> None:
    with pytest.raises(ValueError, match="is not an OTLP endpoint URL"):
        make_tracker(otlp_endpoint=endpoint)
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_ENDPOINT="):
        make_tracker(env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})


def test_grpc_still_works_when_asked_for(make_tracker: Callable[..., MemoryTracker]) -> None:
    rx = GrpcReceiver()
    try:
        tracker = _run(make_tracker, env={"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url,
                                          "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    finally:
        rx.close()
    assert _metric_names(rx) and rx.got.traces and not _otlp_failures(tracker)
