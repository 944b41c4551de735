"""Every output of a run: the report itself (text/JSON, :mod:`.report_sink`), the HTML page,
Grafana, the incident dashboard, Perfetto traces, Prometheus (remote write, Pushgateway). Each
sink class is one module (``*_sink.py``, ``incident_dashboard``, ``html_sink``) beside the writer
it drives, behind :mod:`.base`'s interface; :mod:`.dispatch` lists them in write order, and
:mod:`.outputs` gives each job its own file paths. Nothing is imported here, so a run over files
loads no server sink."""
