"""Where a run writes besides its report: Grafana, the incident dashboard, Perfetto traces,
Prometheus (remote write, Pushgateway), and the HTML page. Each sink class is one module
(``*_sink.py``, ``incident_dashboard``, ``html_sink``) beside the writer it drives;
:mod:`stormotel.analyzers.dispatch` lists them in write order."""
