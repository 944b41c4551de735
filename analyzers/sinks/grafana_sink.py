"""``--grafana-url``: one annotation per finding (keyed, so a re-run adds none twice) and, with
``--grafana-dashboard``, the incident dashboard, through Grafana's API
(:mod:`stormotel.analyzers.sinks.grafana`)."""

from __future__ import annotations

import json
from typing import TextIO

from stormotel.analyzers import http
from stormotel.analyzers.options import SinkOptions
from stormotel.analyzers.sinks import grafana
from stormotel.analyzers.sinks.base import BaseSink
from stormotel.analyzers.sinks.incident_dashboard import incident_board

from stormotel.textsafe import one_line


def _grafana_auth(sinks: SinkOptions) -> http.BearerAuth | None:
    token = http.read_secret(sinks.grafana_token_file, grafana.ENV_GRAFANA_TOKEN,
                             "Grafana token")
    return http.BearerAuth(token) if token else None


class GrafanaSink(BaseSink):
    """Annotations (one per finding, keyed) and, with ``--grafana-dashboard``, the incident
    dashboard through Grafana's API."""

    name = "grafana"
    option = "sinks.grafana_url"

    def _annotations(self) -> list[grafana.Annotation]:
        return grafana.annotations_for(self.ctx.report, self.ctx.job_id)

    def plan(self, out: TextIO) -> str:
        a, anns = self.ctx.sinks, self._annotations()
        res = grafana.sync_annotations(None, anns, self.ctx.job_id,
                                       dashboard_uid=a.grafana_dashboard_uid, dry_run=True)
        print(f"# would sync {len(anns)} annotation(s) to {one_line(self.target)}", file=out)
        for body in res.planned:
            print(json.dumps(body, sort_keys=True), file=out)
        if a.grafana_dashboard:
            board = incident_board(self.ctx.report, self.ctx.job_id, a.name_translation)
            print(f"# would save incident dashboard {board['uid']} to "
                  f"{one_line(self.target)}", file=out)
        return f"planned={len(anns)}"

    def write(self) -> str:
        a, ctx = self.ctx.sinks, self.ctx
        with http.make_client(ctx.settings, auth=_grafana_auth(a)) as client:
            api = grafana.GrafanaAPI(self.target, client, ctx.settings, ctx.deadline)
            res = grafana.sync_annotations(api, self._annotations(), ctx.job_id,
                                           dashboard_uid=a.grafana_dashboard_uid)
            detail = str(res)
            if a.grafana_dashboard:
                saved = grafana.save_dashboard_if_changed(
                    api, incident_board(ctx.report, ctx.job_id, ctx.sinks.name_translation),
                    f"stormotel analyze {ctx.job_id} {ctx.report.window_end_ns}",
                    folder_uid=a.grafana_folder)
                detail += f" dashboard={'saved' if saved else 'unchanged'}"
            return detail
