"""Push the findings series to a Prometheus Pushgateway.

The exposition format and the Pushgateway protocol are prometheus-client's
(:func:`prometheus_client.push_to_gateway`, a ``PUT`` that replaces the job's group, so a re-run
replaces the previous findings instead of adding to them); only the transport is ours, so TLS,
auth, timeouts and retries follow the same rules as every other endpoint of the job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import groupby

import httpx
from prometheus_client import CollectorRegistry, push_to_gateway
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from stormotel.analyzers.http import Deadline, HttpSettings, request
from stormotel.analyzers.options import PUSH_JOB as PUSH_JOB
from stormotel.analyzers.sinks.findings_series import SeriesPoint

from stormotel import schema

#: The Pushgateway ``job`` grouping label; ``job_id`` is the second grouping key.


class _PointsCollector(Collector):
    """Exposes a fixed list of points (no timestamps: the Pushgateway rejects them)."""

    def __init__(self, points: Sequence[SeriesPoint], drop_labels: tuple[str, ...]) -> None:
        self._points = sorted(points, key=lambda p: (p.name, p.label_items()))
        self._drop = drop_labels

    def collect(self) -> Iterator[Metric]:
        for name, group in groupby(self._points, key=lambda p: p.name):
            pts = list(group)
            keys = sorted({k for p in pts for k in p.labels if k not in self._drop})
            family: GaugeMetricFamily | CounterMetricFamily
            if pts[0].kind == "counter":
                family = CounterMetricFamily(name.removesuffix("_total"), pts[0].help,
                                             labels=keys)
            else:
                family = GaugeMetricFamily(name, pts[0].help, labels=keys)
            for p in pts:
                family.add_metric([str(p.labels.get(k, "")) for k in keys], p.value)
            yield family


def registry_for(points: Sequence[SeriesPoint]) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(_PointsCollector(points, drop_labels=(schema.ATTR_JOB_ID,)))
    return registry


def _handler(client: httpx.Client, settings: HttpSettings, deadline: Deadline | None
             ) -> Callable[..., Callable[[], None]]:
    def handler(url: str, method: str, timeout: float | None,
                headers: list[tuple[str, str]], data: bytes) -> Callable[[], None]:
        def send() -> None:
            request(client, method, url, settings=settings, deadline=deadline, content=data,
                    headers=dict(headers))
        return send
    return handler


def push(client: httpx.Client, gateway: str, job_id: str, points: Sequence[SeriesPoint], *,
         settings: HttpSettings, deadline: Deadline | None = None) -> int:
    """Replace group ``{job="stormotel_analyzer", job_id=…}`` with ``points``."""
    push_to_gateway(gateway, job=PUSH_JOB, registry=registry_for(points),
                    grouping_key={schema.ATTR_JOB_ID: job_id}, timeout=settings.timeout_s,
                    handler=_handler(client, settings, deadline))
    return len(points)
