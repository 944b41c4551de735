"""Grafana dashboards and Prometheus rules for stormotel, as code.

- :mod:`dashboards.promql` — PromQL built from :mod:`stormotel.schema` names (shared by both).
- :mod:`dashboards.settings` — thresholds and windows shared by panels and alerts.
- :mod:`dashboards.common` — grafanalib variables, annotations, panel constructors, layout.
- :mod:`dashboards.panels` — the panel catalogue, one function per dashboard section.
- :mod:`dashboards.overview`, :mod:`dashboards.rank`, :mod:`dashboards.incident` — dashboards.
- :mod:`dashboards.rules`, :mod:`dashboards.rule_tests` — rules file and its promtool tests.
- :mod:`dashboards.build` — ``stormotel dashboards``: writes/checks the generated files.
"""
