"""Grafana dashboards and Prometheus rules for stormotel, as code.

- :mod:`stormotel.dashboards.promql` — PromQL built from :mod:`stormotel.schema` names (shared by
  both).
- :mod:`stormotel.dashboards.settings` — thresholds and windows shared by panels and alerts.
- :mod:`stormotel.dashboards.common` — grafanalib variables, annotations, panel constructors,
  layout.
- :mod:`stormotel.dashboards.panels` — the panel catalogue, one function per dashboard section.
- :mod:`stormotel.dashboards.overview`, :mod:`stormotel.dashboards.rank`,
  :mod:`stormotel.dashboards.incident` — dashboards.
- :mod:`stormotel.dashboards.rules`, :mod:`stormotel.dashboards.rule_tests` — rules file and its
  promtool tests.
- :mod:`stormotel.dashboards.build` — ``stormotel dashboards``: writes/checks the generated files.
"""
