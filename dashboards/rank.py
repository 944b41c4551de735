"""Rank drill-down: one rank's full memory picture, its steps, events and findings."""

from __future__ import annotations

from grafanalib import core as g
from stormotel.dashboards import panels, promql
from stormotel.dashboards.common import (
    DashboardSpec,
    dashboard,
    finding_tags,
    row,
    timeseries,
    variables,
)
from stormotel.dashboards.dcgm_panels import dcgm
from stormotel.dashboards.settings import Settings

from stormotel import schema

UID = "stormotel-rank"


def _full_picture(sel: panels.Selection) -> list[panels.Cell]:
    """Every memory gauge of the rank on one axis, so their ordering is visible at a glance."""
    queries = [(promql.gauge(metric, sel.tracker), promql.name(metric))
               for metric in (*schema.MEMORY_GAUGES, *schema.PEAK_OF.values())]
    return [timeseries("Full memory picture", queries, "bytes", width=24, height=10,
                       description="Driver view (device used/limit/free, this process), allocator"
                                   " view (reserved, allocated, active, inactive split), the gap,"
                                   " and the peaks over the tracker's rolling window.")]


def _edges(sel: panels.Selection) -> list[panels.Cell]:
    """The tracker's edges at their exact sample times, whatever the scrape interval: what the
    analyzer reads to time a first cause from Prometheus alone."""
    legend = f"{panels.RANK_LEGEND} {{{{{schema.ATTR_EDGE}}}}}"
    return [
        row("Edges at exact sample times"),
        timeseries("Latest edge time", [(promql.edge_time_ms(sel.tracker), legend)],
                   "dateTimeAsIso", width=12,
                   description=schema.EDGE_TIMESTAMP.description + " A step in this line is a"
                   " new edge; its value is when it happened, to the tracker's own sample."),
        timeseries("Latest edge size", [(promql.edge_size(sel.tracker), legend)], "bytes",
                   width=12, description=schema.EDGE_SIZE.description),
    ]


def rank_dashboard(cfg: Settings | None = None) -> g.Dashboard:
    cfg = cfg or Settings()
    sel = panels.Selection.dashboard()
    return dashboard(DashboardSpec(
        uid=UID, title="stormotel / rank drill-down",
        description="One rank of a training job: every memory series, the training step, OOMs"
                    " and threshold crossings, estimate vs actual, tracker health, and the"
                    " analyzer's findings for this rank.",
        templating=variables(rank_multi=False),
        annotation_tags=finding_tags(f"${schema.ATTR_JOB_ID}", rank=f"${schema.ATTR_RANK}"),
        cells=[*_full_picture(sel), *panels.training(sel), *panels.memory(sel, cfg),
               *panels.events(sel), *_edges(sel), *panels.estimate(sel, cfg),
               *panels.tracker_health(sel), *panels.analyzer(sel, cfg), *dcgm(sel)],
    ))
