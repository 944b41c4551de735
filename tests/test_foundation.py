"""The shared foundation: schema naming rules, Timeline building, CLI dispatch, server fixtures."""

from __future__ import annotations

import subprocess
import sys

import httpx
import numpy as np
from stormotel.analyzers.report import REPORT_SCHEMA, CrossRank, Report, Suspect
from stormotel.analyzers.timeline import RankIdentity, TimelineBuilder

from stormotel import schema


def test_prometheus_names_follow_otlp_translation() -> None:
    assert schema.DEVICE_USED.prom == "hw_gpu_memory_usage_bytes"
    # the OTel pull exporter serves unit-"1" gauges without a suffix; the collector adds _ratio
    assert schema.DEVICE_UTILIZATION.prom == "hw_gpu_memory_utilization"
    assert "hw_gpu_memory_utilization_ratio" in schema.DEVICE_UTILIZATION.prom_aliases
    assert schema.OOMS.prom == "stormotel_oom_total"
    assert schema.ALLOC_RESERVED.prom_aliases[:2] == ("stormotel_allocator_reserved_bytes",
                                                      "stormotel_allocator_reserved")


def test_metric_names_are_unique() -> None:
    names = [m.name for m in schema.ALL_METRICS]
    proms = [m.prom for m in schema.ALL_METRICS]
    assert len(set(names)) == len(names)
    assert len(set(proms)) == len(proms)


def test_builder_merges_split_fields_and_counts_exact_duplicates() -> None:
    b = TimelineBuilder()
    b.set_identity(RankIdentity(rank=1, job_id="j", world_size=2))
    b.add_samples(1, np.array([30, 10, 20]), device_used=np.array([3.0, 1.0, 2.0]))
    b.add_samples(1, np.array([10, 20, 30]), reserved=np.array([0.5, 1.5, 2.5]))
    b.add_samples(1, np.array([10]), reserved=np.array([0.5]))  # exact duplicate of a row
    tl = b.build()
    s = tl.ranks[1]
    assert s.t_ns.tolist() == [10, 20, 30]
    assert s.field("device_used").tolist() == [1.0, 2.0, 3.0]
    assert s.gap.tolist() == [0.5, 0.5, 0.5]
    assert tl.missing_ranks() == [0]
    assert tl.job_id == "j"
    assert tl.skipped["duplicate_sample"] == 1


def test_report_json_contract_has_required_keys() -> None:
    rep = Report(job_id="j", world_size=4, participating_ranks=[0, 1, 2, 3], missing_ranks=[],
                 cross_rank=CrossRank(cluster_onset_ns=5, first_cause_suspects=[
                     Suspect(rank=2, confidence="high", first_spike_ns=1, lead_ns=4,
                             delta_bytes=float("nan"))]))
    d = rep.to_dict()
    assert d["schema"] == REPORT_SCHEMA
    for key in ("job_id", "world_size", "participating_ranks", "missing_ranks", "cross_rank",
                "gap_findings", "collective_attributions", "stall_findings"):
        assert key in d
    assert d["cross_rank"]["first_cause_suspects"][0]["delta_bytes"] is None  # NaN is not JSON


def test_cli_help_and_unknown_command() -> None:
    ok = subprocess.run([sys.executable, "-m", "stormotel", "--help"], capture_output=True,
                        text=True, check=False)
    assert ok.returncode == 0 and "analyze" in ok.stdout and "track" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "stormotel", "frobnicate"], capture_output=True,
                         text=True, check=False)
    assert bad.returncode == 2 and "unknown command 'frobnicate'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_real_prometheus_fixture_answers_queries(prometheus_server) -> None:
    r = httpx.get(prometheus_server.url + "/api/v1/query", params={"query": "1+1"})
    assert r.json()["data"]["result"][1] == "2"
