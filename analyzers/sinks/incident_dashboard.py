"""``--incident-dashboard FILE``: the incident dashboard (the ranks the findings name, the
window) as Grafana JSON in a file; :func:`incident_board` is also what ``--grafana-dashboard``
saves through Grafana's API."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, TextIO

from stormotel.analyzers.findings import ranks_named
from stormotel.analyzers.report import Report
from stormotel.analyzers.sinks.base import BaseSink

from stormotel import schema
from stormotel.atomic import write_atomic
from stormotel.textsafe import redact_tree

#: The findings whose ranks the incident dashboard shows, first-cause suspects first.
BOARD_FAMILIES = ("first_cause", "gap", "stall")


def incident_board(report: Report, job_id: str,
                   naming: str = schema.DEFAULT_NAME_TRANSLATION) -> dict[str, Any]:
    """The dashboard's JSON model for ``report``'s suspects and window, its panels selecting
    the series as the TSDB stores them (``naming``: Prometheus 3's OTLP name translation)."""
    from stormotel.dashboards import promql
    from stormotel.dashboards.common import to_json
    from stormotel.dashboards.incident import incident_dashboard

    suspects = ranks_named(f for f in report.findings() if f.family in BOARD_FAMILIES)
    start = end = None
    if report.window_start_ns is not None and report.window_end_ns is not None:
        start = datetime.fromtimestamp(report.window_start_ns / 1e9, UTC)
        end = datetime.fromtimestamp(report.window_end_ns / 1e9, UTC)
    with promql.naming(naming):
        board = incident_dashboard(job_id, suspects, start=start, end=end)
    doc: dict[str, Any] = json.loads(to_json(board))
    return doc


class IncidentDashboardFileSink(BaseSink):
    """The incident dashboard JSON written to ``--incident-dashboard FILE`` (the job's own
    path in a run over several jobs)."""

    name = "incident_dashboard"
    option = "sinks.incident_dashboard"
    per_job = True

    def plan(self, out: TextIO) -> str:
        board = incident_board(self.ctx.report, self.ctx.job_id, self.ctx.sinks.name_translation)
        print(f"# would write incident dashboard {board['uid']} to {self.target}", file=out)
        return ""

    def write(self) -> str:
        board = incident_board(self.ctx.report, self.ctx.job_id, self.ctx.sinks.name_translation)
        write_atomic(self.target, json.dumps(redact_tree(board), indent=2, sort_keys=True) + "\n")
        return str(self.target)
