"""Incident dashboard for one analysed job: its suspect ranks pinned, its findings as annotations.

Called by the analyzer job after a run with findings; it reuses the panel catalogue of
the standard dashboards, so an incident looks like the overview narrowed to what went wrong.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime

from grafanalib import core as g
from stormotel.dashboards import panels
from stormotel.dashboards.common import Cell, DashboardSpec, dashboard, finding_tags, variables
from stormotel.dashboards.settings import Settings

from stormotel import schema

UID_PREFIX = "stormotel-incident-"
_UID_MAX = 40  # Grafana's limit on dashboard UIDs
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def incident_uid(job_id: str) -> str:
    """A stable Grafana UID per job, so re-running the analyzer updates the same dashboard."""
    slug = _UNSAFE.sub("-", job_id).strip("-")
    uid = UID_PREFIX + slug
    if len(uid) > _UID_MAX or not slug:
        digest = hashlib.sha256(job_id.encode()).hexdigest()[:10]
        uid = f"{UID_PREFIX}{slug[:_UID_MAX - len(UID_PREFIX) - 11]}-{digest}".replace("--", "-")
    return uid


def _grafana_time(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _summary(job_id: str, suspects: Sequence[str]) -> Cell:
    ranks = ", ".join(suspects) if suspects else "none"
    text = (f"**Job** `{job_id}` — **suspect ranks** (most likely first cause first): {ranks}.\n\n"
            "The rank variable is pinned to the suspects; choose *All* to compare with peers."
            " Findings are the annotations tagged `stormotel`.")
    return Cell(g.Text(title="Incident", content=text, mode="markdown"), 24, 3)


def incident_dashboard(job_id: str, suspect_ranks: Sequence[int | str], *,
                       start: datetime | None = None, end: datetime | None = None,
                       settings: Settings | None = None) -> g.Dashboard:
    """The incident dashboard of ``job_id`` with ``suspect_ranks`` pinned (first cause first).

    ``start``/``end`` set the dashboard's time range (naive datetimes are UTC); default: the last
    6 hours. Serialise with :func:`stormotel.dashboards.common.to_json`.
    """
    if not job_id:
        raise ValueError("incident_dashboard needs a job_id")
    cfg = settings or Settings()
    suspects = [str(rank) for rank in suspect_ranks]
    sel = panels.Selection.dashboard()
    return dashboard(DashboardSpec(
        uid=incident_uid(job_id), title=f"stormotel incident / {job_id}",
        description=f"Analyzer incident view of job {job_id}: suspect ranks "
                    f"{', '.join(suspects) or 'none'} pinned, findings as annotations.",
        templating=variables(job_id=job_id, ranks=suspects or None),
        annotation_tags=finding_tags(job_id),
        time_from=_grafana_time(start) if start else "now-6h",
        time_to=_grafana_time(end) if end else "now",
        tags=[schema.ANNOTATION_TAG, "incident"],
        cells=[_summary(job_id, suspects), *panels.analyzer(sel, cfg), *panels.memory(sel, cfg),
               *panels.training(sel), *panels.events(sel), *panels.estimate(sel, cfg),
               *panels.tracker_health(sel)],
    ))
