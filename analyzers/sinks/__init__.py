"""Where the analyzer job writes its findings: Grafana, Prometheus (remote write, Pushgateway),
Perfetto traces. Each sink is one module; :mod:`analyzers.job` picks them from flags."""
