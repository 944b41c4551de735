"""Grafana building blocks shared by every stormotel dashboard (grafanalib).

Variables (``datasource``, ``job_id``, ``rank``, ``host``), the annotation query on the
``stormotel`` tag, panel constructors that always set a unit, a legend and the warning/critical
thresholds, and a grid layout so dashboards list panels instead of computing coordinates.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from grafanalib import core as g
from grafanalib._gen import DashboardEncoder
from stormotel.dashboards import promql

from stormotel import schema

DATASOURCE_VAR = "datasource"
DATASOURCE: dict[str, str] = {"type": "prometheus", "uid": f"${{{DATASOURCE_VAR}}}"}
GRAFANA_DATASOURCE: dict[str, str] = {"type": "grafana", "uid": "-- Grafana --"}
GRID_WIDTH = 24
#: Grafana's built-in interval macros, used where a window should follow the zoom level.
RATE_INTERVAL = "$__rate_interval"
#: The query step itself: windows of adjacent points do not overlap.
STEP_INTERVAL = "$__interval"
DASHBOARD_TAGS = [schema.ANNOTATION_TAG, "gpu", "memory"]


# --- variables ---------------------------------------------------------------------------------
def variables(*, job_id: str | None = None, ranks: Sequence[str] | None = None,
              rank_multi: bool = True) -> g.Templating:
    """``datasource``, ``job_id``, ``rank`` and ``host`` variables.

    ``job_id``/``ranks`` pin the defaults (incident dashboards); the lists stay queryable so a
    reader can still widen the view.
    """
    up = promql.name(schema.DEVICE_USED)
    job = promql.matchers(**{schema.ATTR_JOB_ID: f"${schema.ATTR_JOB_ID}"})
    job_rank = promql.matchers(**{schema.ATTR_JOB_ID: f"${schema.ATTR_JOB_ID}",
                                  schema.ATTR_RANK: f"${schema.ATTR_RANK}"})
    rank_default: str | list[str] | None = list(ranks) if ranks else None
    if ranks and not rank_multi:
        rank_default = ranks[0]
    return g.Templating(list=[
        g.Template(name=DATASOURCE_VAR, label="Data source", query="prometheus",
                   type="datasource"),
        g.Template(name=schema.ATTR_JOB_ID, label="Job", dataSource=DATASOURCE,
                   query=promql.label_values(up, schema.ATTR_JOB_ID), default=job_id,
                   refresh=g.REFRESH_ON_TIME_RANGE_CHANGE),
        g.Template(name=schema.ATTR_RANK, label="Rank", dataSource=DATASOURCE,
                   query=promql.label_values(up, schema.ATTR_RANK, job), default=rank_default,
                   multi=rank_multi, includeAll=rank_multi, allValue=".*" if rank_multi else None,
                   sort=3,  # numerical ascending
                   refresh=g.REFRESH_ON_TIME_RANGE_CHANGE),
        g.Template(name=schema.ATTR_HOST, label="Host", dataSource=DATASOURCE,
                   query=promql.label_values(up, schema.ATTR_HOST, job_rank),
                   multi=True, includeAll=True, allValue=".*", default="$__all",
                   refresh=g.REFRESH_ON_TIME_RANGE_CHANGE),
    ])


def finding_tags(job_id: str, rank: str | None = None) -> list[str]:
    """The tags of the findings a board shows: stormotel's, the job's and, on a one-rank board,
    the rank's (``job_id``/``rank`` values or template variables), as the Grafana sink tags them
    (:func:`stormotel.schema.annotation_tag`)."""
    tags = [schema.ANNOTATION_TAG, schema.annotation_tag(schema.ATTR_JOB_ID, job_id)]
    if rank is not None:
        tags.append(schema.annotation_tag(schema.ATTR_RANK, rank))
    return tags


def finding_annotations(tags: Iterable[str]) -> g.Annotations:
    """Analyzer findings: Grafana annotations carrying all of ``tags`` (``stormotel``, ...)."""
    tags = list(tags)
    return g.Annotations(list=[
        {"builtIn": 1, "datasource": GRAFANA_DATASOURCE, "enable": True, "hide": True,
         "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard",
         "target": {"limit": 100, "matchAny": False, "tags": [], "type": "dashboard"}},
        {"datasource": GRAFANA_DATASOURCE, "enable": True, "hide": False,
         "iconColor": "red", "name": "stormotel findings", "type": "tags", "tags": tags,
         "matchAny": False, "limit": 200,
         "target": {"type": "tags", "tags": tags, "matchAny": False, "limit": 200}},
    ])


# --- targets and panels ------------------------------------------------------------------------
def target(expr: str, legend: str, ref: str, *, instant: bool = False) -> g.Target:
    return g.Target(expr=expr, legendFormat=legend, refId=ref, instant=instant,
                    datasource=DATASOURCE, format="table" if instant else "time_series")


def _targets(queries: Sequence[tuple[str, str]], instant: bool = False) -> list[g.Target]:
    return [target(expr, legend, chr(ord("A") + i), instant=instant)
            for i, (expr, legend) in enumerate(queries)]


@dataclass
class Cell:
    """A panel and how much of the grid it takes (width of 24, height in rows)."""

    panel: g.Panel
    width: int = 12
    height: int = 8


def timeseries(title: str, queries: Sequence[tuple[str, str]], unit: str, *, description: str,
               thresholds: list[dict[str, Any]] | None = None, width: int = 12,
               height: int = 8, overrides: list[dict[str, Any]] | None = None,
               draw: str = "line", min_value: int | None = None) -> Cell:
    return Cell(g.TimeSeries(
        title=title, description=description, dataSource=DATASOURCE, targets=_targets(queries),
        unit=unit, legendDisplayMode="table", legendPlacement="right",
        legendCalcs=["lastNotNull", "max"], tooltipMode="multi", tooltipSort="desc",
        thresholds=thresholds or [{"color": "green", "value": None}],
        thresholdsStyleMode="dashed" if thresholds else "off", overrides=overrides or [],
        drawStyle=draw, fillOpacity=60 if draw == "bars" else 0, valueMin=min_value,
        maxDataPoints=1000), width, height)


def table(title: str, queries: Sequence[tuple[str, str]], unit: str, *, description: str,
          width: int = 12, height: int = 8, sort_by: str = "Value") -> Cell:
    """Instant-query table (one row per series, labels as columns)."""
    return Cell(g.Table(
        title=title, description=description, dataSource=DATASOURCE,
        targets=_targets(queries, instant=True), unit=unit, displayMode="color-background",
        sortBy=[g.TableSortByField(displayName=sort_by, desc=True)],
        transformations=[{"id": "organize", "options": {
            "excludeByName": {"Time": True, "__name__": True}}}]), width, height)


def stat(title: str, queries: Sequence[tuple[str, str]], unit: str, *, description: str,
         thresholds: list[dict[str, Any]] | None = None, width: int = 6, height: int = 4,
         reduce: str = "lastNotNull", no_value: str = "0") -> Cell:
    """``no_value`` is what the panel reads without data: "0" for counts, but a word for
    quantities where no data is not zero (e.g. "never" for the time since an event)."""
    return Cell(g.Stat(
        title=title, description=description, dataSource=DATASOURCE, targets=_targets(queries),
        format=unit, reduceCalc=reduce, graphMode="none", colorMode="background",
        thresholds=thresholds or [{"color": "green", "value": None}],
        noValue=no_value), width, height)


def row(title: str) -> Cell:
    return Cell(g.RowPanel(title=title), GRID_WIDTH, 1)


def layout(cells: Iterable[Cell]) -> list[g.Panel]:
    """Place cells left to right, wrapping at the grid width; rows start a new line."""
    panels: list[g.Panel] = []
    x = y = line_height = 0
    for cell in cells:
        if x + cell.width > GRID_WIDTH or isinstance(cell.panel, g.RowPanel):
            x, y, line_height = 0, y + line_height, 0
        cell.panel.gridPos = g.GridPos(h=cell.height, w=cell.width, x=x, y=y)
        panels.append(cell.panel)
        x += cell.width
        line_height = max(line_height, cell.height)
        if isinstance(cell.panel, g.RowPanel):
            x, y, line_height = 0, y + cell.height, 0
    return panels


@dataclass
class DashboardSpec:
    """What distinguishes one stormotel dashboard from another."""

    uid: str
    title: str
    description: str
    cells: list[Cell]
    templating: g.Templating
    annotation_tags: list[str] = field(default_factory=lambda: [schema.ANNOTATION_TAG])
    time_from: str = "now-6h"
    time_to: str = "now"
    tags: list[str] = field(default_factory=lambda: list(DASHBOARD_TAGS))


def dashboard(spec: DashboardSpec) -> g.Dashboard:
    return g.Dashboard(
        title=spec.title, uid=spec.uid, description=spec.description, tags=spec.tags,
        templating=spec.templating, annotations=finding_annotations(spec.annotation_tags),
        panels=layout(spec.cells), time=g.Time(spec.time_from, spec.time_to), refresh="30s",
        graphTooltip=g.GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR, timezone="utc",
        # Jump between overview, drill-down and incident views keeping job, ranks and time.
        links=[{"type": "dashboards", "tags": [schema.ANNOTATION_TAG], "asDropdown": True,
                "includeVars": True, "keepTime": True, "title": "stormotel dashboards",
                "icon": "external link", "targetBlank": False, "url": "", "tooltip": ""}],
        schemaVersion=37,
    ).auto_panel_ids()


def to_json(board: g.Dashboard) -> str:
    """Deterministic JSON (sorted keys, 2-space indent, trailing newline) for files and the API."""
    return json.dumps(board.to_json_data(), cls=DashboardEncoder, indent=2, sort_keys=True) + "\n"
