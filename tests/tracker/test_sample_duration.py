"""The sample-duration histogram the sampling thread keeps itself: the same points the OTel SDK's
histogram gave (buckets, sum, min/max, temporality, place in the scope), on every destination."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Iterator

import pytest
from opentelemetry.sdk.metrics import Histogram as HistogramInstrument
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader

from stormotel import schema
from stormotel.sample_duration import DurationHistogram
from stormotel.tracker import MemoryTracker
from tests.tracker.otlp_util import HttpReceiver, points

DURATIONS = [0.00005, 0.0001, 0.0001000001, 0.0003, 0.002, 0.7, 1.0, 3.5]


def _sdk_point(values: list[float], temporality: AggregationTemporality,
               rounds: int = 1) -> list:
    """What the SDK's explicit-bucket histogram exports for ``values`` (once per round)."""
    reader = InMemoryMetricReader(preferred_temporality={HistogramInstrument: temporality})
    meter = MeterProvider(metric_readers=[reader]).get_meter(schema.INSTRUMENTATION_SCOPE)
    hist = meter.create_histogram(schema.SAMPLE_DURATION.name, unit="s",
                                  explicit_bucket_boundaries_advisory=
                                  schema.SAMPLE_DURATION_BUCKETS)
    out = []
    for _ in range(rounds):
        for v in values:
            hist.record(v, {"rank": "0"})
        data = reader.get_metrics_data()
        out.append(data.resource_metrics[0].scope_metrics[0].metrics[0].data.data_points[0])
    return out


@pytest.mark.parametrize("temporality", [AggregationTemporality.CUMULATIVE,
                                         AggregationTemporality.DELTA])
def test_points_match_the_sdk_histogram(temporality: AggregationTemporality) -> None:
    ours = DurationHistogram()
    view = ours.view({"rank": "0"}, temporality)
    got = []
    for _ in range(2):
        for v in DURATIONS:
            ours.record(v)
        got.append(view.point())
    for mine, sdk in zip(got, _sdk_point(DURATIONS, temporality, rounds=2), strict=True):
        assert mine is not None
        assert list(mine.bucket_counts) == list(sdk.bucket_counts)
        assert (mine.count, mine.min, mine.max) == (sdk.count, sdk.min, sdk.max)
        assert mine.sum == pytest.approx(sdk.sum)
        assert tuple(mine.explicit_bounds) == tuple(sdk.explicit_bounds)
        assert dict(mine.attributes) == {"rank": "0"}
    if temporality is AggregationTemporality.DELTA:
        assert got[1].count == len(DURATIONS)  # the second interval only
        assert got[1].start_time_unix_nano == got[0].time_unix_nano
        assert view.point() is None  # nothing new: no point, as the SDK's delta
    else:
        assert got[1].count == 2 * len(DURATIONS)


def test_delta_window_min_max_are_the_interval_s() -> None:
    ours = DurationHistogram()
    view = ours.view({}, AggregationTemporality.DELTA)
    ours.record(0.5)
    ours.record(0.001)
    first = view.point()
    ours.record(0.01)
    second = view.point()
    assert first is not None and second is not None
    assert (first.min, first.max) == (0.001, 0.5)
    assert (second.min, second.max, second.count) == (0.01, 0.01, 1)


@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    rx = HttpReceiver()
    yield rx
    rx.close()


@pytest.mark.parametrize("preference", ["cumulative", "delta"])
def test_every_destination_exports_the_histogram(
        make_tracker: Callable[..., MemoryTracker], receiver: HttpReceiver,
        preference: str) -> None:
    """Prometheus endpoint, OTLP and the lines archive each carry the histogram, first in the
    tracker's scope, with every sample counted once per destination."""
    tracker = make_tracker(prometheus_port=0, prometheus_addr="127.0.0.1",
                           otlp_endpoint=receiver.url, otlp_interval=3600,
                           archive_dir=None, sampling_interval=3600, env={
                               "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": preference})
    tracker.start_tracking()
    for _ in range(6):
        tracker._tick()
    samples = tracker.stats["samples"]
    assert tracker.prometheus_address is not None
    body = urllib.request.urlopen(
        f"http://127.0.0.1:{tracker.prometheus_address[1]}/metrics", timeout=10).read().decode()
    count_lines = [line for line in body.splitlines()
                   if line.startswith(f"{schema.SAMPLE_DURATION.prom}_count{{")]
    assert len(count_lines) == 1 and float(count_lines[0].split()[-1]) == samples
    assert 'rank="1"' in count_lines[0] and 'job_id="t-job"' in count_lines[0]
    tracker.stop_tracking()  # the final OTLP export
    pts = [p for _r, name, p in points(receiver.got.metrics)
           if name == schema.SAMPLE_DURATION.name]
    total = sum(p.count for p in pts) if preference == "delta" else pts[-1].count
    assert total == tracker.stats["samples"]
    first = receiver.got.metrics[0].resource_metrics[0].scope_metrics[0]
    assert first.metrics[0].name == schema.SAMPLE_DURATION.name
    want = 1 if preference == "delta" else 2  # AGGREGATION_TEMPORALITY_DELTA / _CUMULATIVE
    assert first.metrics[0].histogram.aggregation_temporality == want
