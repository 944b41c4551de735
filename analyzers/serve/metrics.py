"""The receiver's own Prometheus metrics, in a registry of its own (never the process-global
one, which would mix in whatever else a process registers). Names live in
:mod:`stormotel.schema` beside every other series name."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from stormotel import schema


class ServeMetrics:
    """Webhooks received (by result), analyses (by outcome), queue depth, runs in flight and
    analysis duration."""

    def __init__(self, depth: Callable[[], float]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.webhooks = Counter(schema.SERVE_WEBHOOKS, "Alertmanager webhook requests received, "
                                "by result (queued, coalesced, duplicate, full, bad_request, "
                                "unauthorized, too_large)", ["result"], registry=r)
        self.alerts = Counter(schema.SERVE_ALERTS, "Alerts received, by whether they carried a "
                              "job_id label", ["with_job"], registry=r)
        self.analyses = Counter(schema.SERVE_ANALYSES, "Analyses run, by outcome (ok, findings, "
                                "source_failure, sink_failure, usage_error, internal_error)",
                                ["outcome"], registry=r)
        self.duration = Histogram(schema.SERVE_ANALYSIS_SECONDS, "Duration of one analysis",
                                  buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300),
                                  registry=r)
        self.queue_depth = Gauge(schema.SERVE_QUEUE_DEPTH, "Jobs queued for analysis (in "
                                 "flight included)", registry=r)
        self.queue_depth.set_function(depth)
        self.inflight = Gauge(schema.SERVE_INFLIGHT, "Analyses running now", registry=r)
        for result in ("queued", "coalesced", "duplicate", "full", "bad_request",
                       "unauthorized", "too_large"):
            self.webhooks.labels(result)
        for outcome in ("ok", "findings", "source_failure", "sink_failure", "usage_error",
                        "internal_error"):
            self.analyses.labels(outcome)
