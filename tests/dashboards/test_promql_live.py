"""Every PromQL expression of every dashboard panel, variable and rule, run against a real
Prometheus that scraped a real tracker run and holds the analyzer's written-back findings.

Two ``MemoryTracker`` ranks (simulated device; rank 1 leaks outside the allocator) serve their
pull endpoints; Prometheus scrapes them every second and
evaluates the generated rules file; the analyzer's own findings-series code remote-writes a
report into the same Prometheus. Each expression must parse, and each one that does not end in an
alert condition must return series.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import yaml
from stormotel.analyzers.algorithms.estimate_ratio import EstimateRatio, EstimateVsActual
from stormotel.analyzers.http import HttpSettings
from stormotel.analyzers.report import (
    CollectiveAttribution,
    CrossRank,
    GapFinding,
    Report,
    StallFinding,
    Suspect,
)
from stormotel.analyzers.sinks import remote_write
from stormotel.analyzers.sinks.findings_series import findings_samples, run_samples
from stormotel.dashboards.common import to_json
from stormotel.dashboards.incident import incident_dashboard

from stormotel import schema
from stormotel.tracker import MemoryTracker
from tests import servers
from tests.dashboards import exprs
from tests.servers import loopback_client

pytestmark = pytest.mark.servers

JOB = "dash-e2e"
HOST = "node-a"
GiB = 2**30


@dataclass
class Cluster:
    prometheus: servers.Server
    trackers: list[MemoryTracker]
    client: httpx.Client

    def query(self, promql: str) -> dict[str, Any]:
        body: dict[str, Any] = self.client.get(f"{self.prometheus.url}/api/v1/query",
                                               params={"query": promql}, timeout=10).json()
        return body


def _trackers() -> list[MemoryTracker]:
    # The leak drives the drift panels; the spike gives rank 1 a first-rise edge (edge panels).
    faults = "rank=1:leak@t=0s,rate=128MiB/s;rank=1:spike@t=2s,delta=1GiB,duration=500ms"
    out = []
    for rank in range(2):
        t = MemoryTracker(sampler="simulated", sampling_interval=0.05, job_id=JOB, rank=rank,
                          local_rank=rank, world_size=2, host=HOST, prometheus_port=0,
                          prometheus_addr="127.0.0.1", estimate_bytes=2 * GiB, faults=faults)
        out.append(t.start_tracking())
    return out


def _findings_report(now_ns: int) -> Report:
    """What the analyzer reports for such a run: rank 1 first, its gap drifting, a collective
    spike and a stall."""
    return Report(
        job_id=JOB, world_size=2, participating_ranks=[0, 1], missing_ranks=[],
        cross_rank=CrossRank(cluster_onset_ns=now_ns - 2_000_000_000, first_cause_suspects=[
            Suspect(rank=1, confidence="high", first_spike_ns=now_ns - 3_000_000_000,
                    lead_ns=1_000_000_000, delta_bytes=512 * 2**20)]),
        gap_findings=[GapFinding(rank=1, classification="persistent_drift", severity="critical",
                                 confidence=0.9, evidence={"slope_bytes_per_s": 256 * 2**20,
                                                           "time_to_full_s": 40.0})],
        collective_attributions=[CollectiveAttribution(
            rank=1, classification="collective_likely", confidence=0.7,
            interval_start_ns=now_ns - 5_000_000_000, interval_end_ns=now_ns - 4_000_000_000,
            reason_codes=["aligned_across_ranks"])],
        stall_findings=[StallFinding(kind="straggler", ranks=[1], process_group="0", seq_id=3,
                                     op="all_reduce", source="flight_recorder",
                                     confidence="medium")],
        window_start_ns=now_ns - 60_000_000_000, window_end_ns=now_ns,
        sections=[EstimateVsActual([
            EstimateRatio(0, 10.0 * 2**30, 9.0 * 2**30, 0.9, "allocated", now_ns, False),
            EstimateRatio(1, 10.0 * 2**30, 16.0 * 2**30, 1.6, "allocated", now_ns, True)])],
    )


def _write_findings(url: str) -> None:
    """Two consecutive analyzer runs (the first failed) and the second run's findings."""
    now_ms = int(time.time() * 1000)
    points = [*run_samples(job_id=JOB, duration_s=2.5, now_ms=now_ms - 10_000,
                           runs_by_outcome={"ok": 1, "source_failure": 0}, success=True),
              *run_samples(job_id=JOB, duration_s=2.0, now_ms=now_ms,
                           runs_by_outcome={"ok": 1, "source_failure": 1}, success=False),
              *findings_samples(_findings_report(now_ms * 1_000_000), timestamp_ms=now_ms)]
    with httpx.Client() as client:
        remote_write.write(client, f"{url}/api/v1/write", points, settings=HttpSettings())


def _load_rules(server: servers.Server) -> None:
    """Add the generated rules file to the fixture's config and reload (lifecycle API)."""
    config_path = server.workdir / "prometheus.yml"
    config = yaml.safe_load(config_path.read_text())
    config["rule_files"] = [str(exprs.RULES_PATH)]
    config_path.write_text(yaml.safe_dump(config))
    loopback_client().post(f"{server.url}/-/reload", timeout=10).raise_for_status()


def _wait_for(cluster: Cluster, promql: str, n: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = cluster.query(promql)
        if body.get("status") == "success" and len(body["data"]["result"]) >= n:
            return
        time.sleep(0.5)
    raise AssertionError(f"{promql!r} did not return {n} series within {timeout}s:\n"
                         f"{cluster.prometheus.logs()}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    trackers = _trackers()
    try:
        targets = [f"127.0.0.1:{t.prometheus_address[1]}" for t in trackers
                   if t.prometheus_address is not None]
        assert len(targets) == len(trackers), "a tracker did not start its Prometheus endpoint"
        with servers.prometheus(tmp_path_factory.mktemp("prom"), scrape_targets=targets,
                                scrape_interval="1s") as prom:
            _load_rules(prom)
            c = Cluster(prom, trackers, httpx.Client())
            for step in range(3):
                for t in trackers:
                    with t.step(step):
                        pass
            _write_findings(prom.url)
            # Recording rules chain (headroom → time to full) and rates need a few scrapes.
            _wait_for(c, schema.REC_TIME_TO_FULL, 1)
            _wait_for(c, f"rate({schema.SAMPLES.prom}[10s]) > 0", 2)
            _wait_for(c, schema.EDGE_TIMESTAMP.prom, 1)
            yield c
            c.client.close()
    finally:
        for t in trackers:
            t.stop_tracking()


VARIABLES_ALL = {"job_id": JOB, "rank": "0|1", "host": ".*", "__rate_interval": "10s",
                 "__interval": "2s", "__range": "1m"}


def _check(cluster: Cluster, expr: exprs.Expr, variables: dict[str, str]) -> str | None:
    promql = exprs.to_promql(expr.expr, variables)
    body = cluster.query(promql)
    if body.get("status") != "success":
        return f"{expr.where}: {body.get('error')} in {promql}"
    if expr.must_return and not body["data"]["result"]:
        return f"{expr.where}: no series for {promql}"
    return None


def _check_all(cluster: Cluster, checks: list[tuple[exprs.Expr, dict[str, str]]]) -> list[str]:
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = pool.map(lambda c: _check(cluster, *c), checks)
        return [r for r in results if r]


def test_every_shipped_expression_parses_and_returns_series(cluster: Cluster) -> None:
    found = exprs.all_exprs()
    assert len(found) > 60  # every panel/variable/rule of both dashboards and the rules file
    # Everything with all ranks and hosts; the drill-down again narrowed to one rank and host.
    one_rank = {**VARIABLES_ALL, "rank": "1", "host": HOST}
    checks = [(e, VARIABLES_ALL) for e in found]
    checks += [(e, one_rank) for e in found if e.where.startswith("stormotel-rank")]
    failures = _check_all(cluster, checks)
    assert not failures, "\n".join(failures)


def test_incident_dashboard_expressions_return_series(cluster: Cluster) -> None:
    board = json.loads(to_json(incident_dashboard(JOB, [1])))
    found = list(exprs.dashboard_exprs(board, "incident"))
    assert found
    failures = _check_all(cluster, [(e, {**VARIABLES_ALL, "rank": "1"}) for e in found])
    assert not failures, "\n".join(failures)


def test_rules_load_and_evaluate_without_errors(cluster: Cluster) -> None:
    body = loopback_client().get(f"{cluster.prometheus.url}/api/v1/rules", timeout=10).json()
    loaded = [r for g in body["data"]["groups"] for r in g["rules"]]
    shipped = yaml.safe_load(exprs.RULES_PATH.read_text())
    assert len(loaded) == sum(len(g["rules"]) for g in shipped["groups"])
    bad = [f"{r['name']}: {r.get('lastError')}" for r in loaded if r["health"] != "ok"]
    assert not bad, bad


def test_leaking_rank_stands_out(cluster: Cluster) -> None:
    """The recorded quantities say what the planted fault did: only rank 1's gap grows."""
    body = cluster.query(f"{schema.REC_GAP_SLOPE} > 0")
    ranks = {s["metric"][schema.ATTR_RANK] for s in body["data"]["result"]}
    assert ranks == {"1"}
    first = cluster.query(schema.AN_FIRST_CAUSE)["data"]["result"]
    assert [(s["metric"][schema.ATTR_RANK], s["metric"]["confidence"]) for s in first] == \
        [("1", "high")]

