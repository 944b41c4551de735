"""Cluster overview: every rank of a job side by side, to spot the one that is different."""

from __future__ import annotations

from grafanalib import core as g
from stormotel.dashboards import panels
from stormotel.dashboards.common import DashboardSpec, dashboard, finding_tags, variables
from stormotel.dashboards.settings import Settings

from stormotel import schema

UID = "stormotel-overview"


def overview_dashboard(cfg: Settings | None = None) -> g.Dashboard:
    cfg = cfg or Settings()
    sel = panels.Selection.dashboard()
    return dashboard(DashboardSpec(
        uid=UID, title="stormotel / cluster overview",
        description="GPU memory of every rank of a training job: device vs limit, allocator,"
                    " the gap, headroom, events, estimate vs actual, tracker health and the"
                    " analyzer's findings (annotations tagged 'stormotel').",
        templating=variables(),
        annotation_tags=finding_tags(f"${schema.ATTR_JOB_ID}"),
        cells=[*panels.memory(sel, cfg), *panels.events(sel), *panels.estimate(sel, cfg),
               *panels.tracker_health(sel), *panels.analyzer(sel, cfg)],
    ))
