"""The pull endpoint serves exactly the names schema.py calls canonical, with identity labels.

This is the check behind ``schema.prom_name``: the exporter (opentelemetry-exporter-prometheus)
adds ``_bytes``/``_seconds``/``_total`` but no ``_ratio`` for unit "1".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from stormotel import schema
from stormotel.tracker import MemoryTracker


def test_served_names_match_schema(make_tracker: Callable[..., MemoryTracker],
                                   tmp_path: Path) -> None:
    tracker = make_tracker(prometheus_port=0, prometheus_addr="127.0.0.1",
                           archive_dir=tmp_path / "a", estimate_bytes=10 * 2**30,
                           env={"K8S_POD_NAME": "trainer-1", "K8S_NAMESPACE": "ml"})
    tracker.set_threshold(schema.THRESHOLD_WARNING, 10.0)
    tracker.start_tracking()
    with tracker.step(3):
        time.sleep(0.2)
    host, port = tracker.prometheus_address or ("", 0)
    text = httpx.get(f"http://{host}:{port}/metrics", timeout=5).text
    tracker.stop_tracking()
    samples = {s.name: s for fam in text_string_to_metric_families(text) for s in fam.samples}
    # The edge gap is unknown for an edge on a tracker's first sample (the threshold crossing
    # here); test_peaks_and_edge_gauges checks it for a later edge.
    # The stop timestamp is served only after a clean stop (test_stop_edges scrapes it there).
    maybe = {schema.EDGE_GAP.name, schema.TRACKER_STOP.name}
    for metric in schema.ALL_METRICS:
        served = metric.prom_series[-1]  # a histogram's _count, else the name itself
        if metric.name in maybe and served not in samples:
            continue
        assert served in samples, f"{metric.name}: {served} not served"
        labels = samples[served].labels
        assert {k: labels[k] for k in tracker.identity.labels()} == tracker.identity.labels()
        assert labels[schema.prom_label(schema.ATTR_HW_ID)] == "GPU-simulated-1"
        # Semconv hardware attributes the sampler knows; attribution when set; no scope labels.
        assert labels[schema.prom_label(schema.ATTR_HW_NAME)].startswith("Simulated GPU")
        assert labels[schema.ATTR_POD] == "trainer-1" and labels[schema.ATTR_NAMESPACE] == "ml"
        assert schema.ATTR_NODE not in labels and schema.ATTR_SLURM_JOB_ID not in labels
        assert not [k for k in labels if k.startswith("otel_scope")], labels
    assert samples[schema.DEVICE_UTILIZATION.prom].value < 1.0
    assert samples[schema.ESTIMATE.prom].value == 10 * 2**30
    assert samples[schema.STEP.prom].value == 3
    assert samples[f"{schema.SAMPLE_DURATION.prom}_count"].value >= 1
    crossings = [s for s in text_string_to_metric_families(text)
                 if s.name == schema.THRESHOLD_CROSSINGS.prom.removesuffix("_total")]
    by_level = {s.labels["level"]: s.value for s in crossings[0].samples
                if s.name.endswith("_total")}
    assert by_level == {"warning": 1.0, "critical": 0.0}
    info = samples["target_info"].labels
    assert info["service_instance_id"] == "t-job/rank-1" and info["sampler"] == "simulated"
