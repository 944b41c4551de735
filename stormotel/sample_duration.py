"""The sample-duration histogram, kept by the sampling thread itself and added to each export.

``stormotel.tracker.sample.duration`` is read (the dashboard's "sample duration" panel takes its
mean; a slow driver shows in its buckets), so it stays a histogram on every destination. But
recorded through the OTel SDK it cost each destination ~8 us per sample on the sampling thread
(the SDK cleans and hashes the point's attributes on every call): with the Prometheus endpoint
and OTLP both on, more than half of a sample's cost. Here the thread folds a duration into
plain bucket counts (one ``bisect``, ~1 us, whatever the number of destinations), and each
destination's export adds the one data point built from them when it collects — every 10 s or
per scrape, not per sample. The series is the one the SDK wrote: same name, unit, description,
bucket bounds, attributes, position in the scope, and temporality (a destination that prefers
delta gets each interval's counts, min and max).
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
)

from stormotel import schema

__all__ = ["DurationHistogram", "DurationView"]


class DurationView:
    """One destination's reading of the histogram: cumulative, or delta since its last export
    (then it remembers what it exported and the interval's own min and max)."""

    def __init__(self, histogram: DurationHistogram, attributes: Mapping[str, str],
                 temporality: AggregationTemporality) -> None:
        self._histogram = histogram
        self.attributes = dict(attributes)
        self.delta = temporality is AggregationTemporality.DELTA
        self.temporality = temporality
        self._last_counts = [0] * len(histogram.counts)
        self._last_sum = 0.0
        self._last_ns = histogram.start_ns
        #: the interval's [min, max] (delta only); updated by the histogram on each record
        self.window: list[float] = [float("inf"), float("-inf")]

    def point(self) -> HistogramDataPoint | None:
        """The data point for an export now; None before the first sample (the SDK exports
        no point for a histogram nothing was recorded into)."""
        h = self._histogram
        now = time.time_ns()
        with h.lock:
            counts, total, count = list(h.counts), h.sum, h.count
            low, high = (self.window if self.delta else (h.min, h.max))
            if self.delta:
                self.window = [float("inf"), float("-inf")]
        if not count:
            return None
        start = h.start_ns
        if self.delta:  # this interval only: what came since the previous export
            previous, self._last_counts = self._last_counts, counts
            counts = [c - before for c, before in zip(counts, previous, strict=True)]
            total, self._last_sum = total - self._last_sum, total
            start, self._last_ns = self._last_ns, now
            if not sum(counts):
                return None
        return HistogramDataPoint(attributes=self.attributes, start_time_unix_nano=start,
                                  time_unix_nano=now, count=sum(counts), sum=total,
                                  bucket_counts=counts, explicit_bounds=h.bounds,
                                  min=low, max=high)

    def add_to(self, metrics_data: MetricsData | None) -> MetricsData | None:
        """``metrics_data`` with this view's point as the tracker scope's first metric (where
        the SDK put its synchronous histogram), or unchanged when there is no point yet."""
        if metrics_data is None:
            return None
        point = self.point()
        if point is None:
            return metrics_data
        metric = Metric(name=schema.SAMPLE_DURATION.name,
                        description=schema.SAMPLE_DURATION.description,
                        unit=schema.SAMPLE_DURATION.unit,
                        data=Histogram(data_points=[point],
                                       aggregation_temporality=self.temporality))
        resources = []
        added = False
        for rm in metrics_data.resource_metrics:
            scopes = []
            for sm in rm.scope_metrics:
                if not added and sm.scope.name == schema.INSTRUMENTATION_SCOPE:
                    sm = dataclasses.replace(sm, metrics=[metric, *sm.metrics])
                    added = True
                scopes.append(sm)
            resources.append(dataclasses.replace(rm, scope_metrics=scopes))
        return MetricsData(resource_metrics=resources) if added else metrics_data


class DurationHistogram:
    """Bucket counts, sum, count, min and max of every sample's duration (seconds), with the
    bounds the SDK histogram was given (``schema.SAMPLE_DURATION_BUCKETS``)."""

    def __init__(self, bounds: tuple[float, ...] = schema.SAMPLE_DURATION_BUCKETS) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0
        self.min = float("inf")
        self.max = float("-inf")
        self.start_ns = time.time_ns()
        self.lock = threading.Lock()
        self._views: list[DurationView] = []

    def record(self, seconds: float) -> None:
        """Fold one duration in (the sampling thread, once per sample)."""
        # bisect_left: a value equal to a bound falls in that bound's bucket (le="bound"),
        # as in the SDK's explicit-bucket aggregation.
        index = bisect.bisect_left(self.bounds, seconds)
        with self.lock:
            self.counts[index] += 1
            self.sum += seconds
            self.count += 1
            if seconds < self.min:
                self.min = seconds
            if seconds > self.max:
                self.max = seconds
            for view in self._views:
                window = view.window
                if seconds < window[0]:
                    window[0] = seconds
                if seconds > window[1]:
                    window[1] = seconds

    def view(self, attributes: Mapping[str, str],
             temporality: AggregationTemporality = AggregationTemporality.CUMULATIVE
             ) -> DurationView:
        """A destination's reading, with the point attributes its series carry."""
        view = DurationView(self, attributes, temporality)
        if view.delta:
            with self.lock:
                self._views.append(view)
        return view


def temporality_of(preferred: Mapping[type, AggregationTemporality] | None
                   ) -> AggregationTemporality:
    """The temporality an exporter asks for histograms (cumulative unless it says delta)."""
    from opentelemetry.sdk.metrics import Histogram as HistogramInstrument

    if preferred is None:
        return AggregationTemporality.CUMULATIVE
    return preferred.get(HistogramInstrument, AggregationTemporality.CUMULATIVE)


def prometheus_reader(view: DurationView, **kwargs: Any) -> Any:
    """The official ``PrometheusMetricReader`` whose every collection (one per scrape) carries
    ``view``'s point; imported here, lazily, like the reader itself."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    class _Reader(PrometheusMetricReader):
        def _receive_metrics(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
                             **kw: Any) -> None:
            super()._receive_metrics(view.add_to(metrics_data),  # type: ignore[arg-type]
                                     timeout_millis, **kw)

    return _Reader(**kwargs)

