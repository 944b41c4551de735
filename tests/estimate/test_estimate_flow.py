"""Estimate vs. actual end to end: an estimate file → the tracker's archive → the analyzer report.

Two simulated ranks track with ``estimate_bytes`` (a `stormotel estimate` JSON for rank 0, a
plain number for rank 1); the analyzer loads their OTLP archive and reports actual / estimate
per rank, read from the archived ``stormotel.memory.estimate`` series.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from stormotel.analyzers.algorithms.estimate_ratio import EstimateVsActual
from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.sinks.findings_series import findings_samples
from stormotel.analyzers.sources import load_paths

from stormotel import schema
from stormotel.tracker import MemoryTracker

GIB = 2**30


def test_estimate_flows_from_tracker_archive_to_analyzer_report(tmp_path: Path) -> None:
    estimate_file = tmp_path / "estimate.json"
    estimate_file.write_text(json.dumps({"schema": "stormotel.estimate/v1",
                                         "peak_bytes": 20 * GIB}))
    archive = tmp_path / "archive"
    trackers = [MemoryTracker(sampler="simulated", sampling_interval=0.02, job_id="est-flow",
                              rank=rank, world_size=2, archive_dir=archive,
                              estimate_bytes=estimate, env={})
                for rank, estimate in ((0, str(estimate_file)), (1, 4 * GIB))]
    for t in trackers:
        t.start_tracking()
    time.sleep(0.5)
    for t in trackers:
        t.stop_tracking()

    timeline = load_paths([str(archive)])
    assert timeline.meta["estimate_bytes"] == {0: 20 * GIB, 1: 4 * GIB}
    report = analyze(timeline)
    section = json.loads(report.to_json())["extra"]["estimate_vs_actual"]  # the JSON contract
    by_rank = {r["rank"]: r for r in section["ranks"]}
    est = report.section(EstimateVsActual)  # typed on the report
    assert est is not None and "estimate_vs_actual" not in report.extra
    for rank, estimate in ((0, 20 * GIB), (1, 4 * GIB)):
        actual = float(np.nanmax(timeline.ranks[rank].field("allocated")))
        assert by_rank[rank]["field"] == "allocated"
        assert by_rank[rank]["ratio"] == pytest.approx(actual / estimate)
        assert est.ratio_by_rank()[rank] == pytest.approx(actual / estimate)
    assert by_rank[0]["rank"] == 0
    # ... and the findings sink turns the ratios into the series the dashboards plot.
    exported = {p.labels["rank"]: p.value for p in findings_samples(report)
                if p.name == schema.AN_ESTIMATE_RATIO}
    assert exported == {str(r): pytest.approx(v) for r, v in est.ratio_by_rank().items()}
