"""The analyzer job end to end against REAL Prometheus and VictoriaMetrics.

Planted-fault telemetry (rank 2 rises 20 s before the others, rank 3 in the OTLP-receiver
spelling, device memory as the tracker's peak series) is remote-written into the server; the
job, run as ``stormotel analyze`` in a subprocess, must find rank 2 over the HTTP API, write its
findings back by remote write, and a second run over the same window must add nothing.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from stormotel.analyzers.http import HttpSettings
from stormotel.analyzers.sinks import remote_write
from stormotel.analyzers.sources.prometheus import QueryWindow, load_prometheus
from stormotel.analyzers.sources.prometheus_api import PrometheusAPI

from stormotel import exitcodes, schema
from tests import servers
from tests.job import planted
from tests.job.conftest import run_cli, summary_line
from tests.job.stubs import FaultProxy
from tests.servers import loopback_client

pytestmark = pytest.mark.servers


def _query(url: str, expr: str, *, wait_s: float = 10.0) -> list[dict]:
    """Instant query; waits for a non-empty answer (VictoriaMetrics indexes after ~1 s)."""
    deadline = time.monotonic() + wait_s
    while True:
        client = loopback_client()
        client.get(url + "/internal/force_flush", timeout=5)
        doc = client.get(url + "/api/v1/query", params={"query": expr}, timeout=10).json()
        assert doc["status"] == "success", doc
        if doc["data"]["result"] or time.monotonic() > deadline:
            return doc["data"]["result"]
        time.sleep(0.2)


@contextlib.contextmanager
def victoriametrics_dedup(workdir: Path, *extra: str) -> Iterator[servers.Server]:
    """VictoriaMetrics as deployed for idempotent writers: ``-dedup.minScrapeInterval=1ms``
    keeps one sample per series and timestamp (without it VM stores re-sent duplicates)."""
    binary = servers.require_binary("victoria-metrics")
    port = servers.free_port()
    argv = [binary, f"-storageDataPath={workdir / 'data'}", f"-httpListenAddr=127.0.0.1:{port}",
            "-search.latencyOffset=0s", "-retentionPeriod=100y", "-loggerLevel=ERROR",
            "-dedup.minScrapeInterval=1ms", *extra]
    server = servers._start("victoria-metrics", argv, workdir, port, "/health")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["prometheus", "victoriametrics"])
def tsdb(request: pytest.FixtureRequest, tmp_path: Path):
    start = servers.prometheus if request.param == "prometheus" else victoriametrics_dedup
    with start(tmp_path / request.param) as server:
        yield server


def test_job_finds_planted_first_cause_and_writes_back_once(tsdb, tmp_path: Path) -> None:
    p, data = planted.make(job_id="planted-e2e")
    write_url = tsdb.url + "/api/v1/write"
    planted.write(write_url, p.job_id, data, peak_fields=("device_used",))
    planted.wait_visible(tsdb.url, p.job_id, len(data))
    report_path = tmp_path / "report.json"
    window = ["--start", str((p.start_ms - 2000) / 1000), "--end", str((p.end_ms + 2000) / 1000)]
    args = ["--prometheus", tsdb.url, "--job-id", p.job_id, *window, "--format", "json",
            "--output", str(report_path), "--remote-write", write_url]
    r = run_cli(*args)
    assert r.returncode == exitcodes.FINDINGS, r.stderr
    report = json.loads(report_path.read_text())
    suspects = report["cross_rank"]["first_cause_suspects"]
    assert suspects and suspects[0]["rank"] == p.fault_rank
    assert abs(suspects[0]["lead_ns"] / 1e9 - 20.0) <= 1.0
    assert report["participating_ranks"] == [0, 1, 2, 3]  # rank 3 via the alias spelling
    assert any("rolling peak series" in n for n in report["notes"])
    s = summary_line(r.stderr)
    assert s["outcome"] == "findings" and s["first_cause"] == "2" and s["ranks"] == "4/4"

    # Findings are queryable where operators look.
    sel = f'{{{schema.ATTR_JOB_ID}="{p.job_id}"}}'
    hits = _query(tsdb.url, f"{schema.AN_FIRST_CAUSE}{sel}")
    assert [h["metric"]["rank"] for h in hits] == ["2"]
    lead = _query(tsdb.url, f"{schema.AN_FIRST_CAUSE_LEAD}{sel}")
    assert abs(float(lead[0]["value"][1]) - 20.0) <= 1.0

    # Same window again: the finding samples are the same samples, nothing is added.
    r2 = run_cli(*args)
    assert r2.returncode == exitcodes.FINDINGS, r2.stderr
    count = _query(tsdb.url, f"count_over_time({schema.AN_FIRST_CAUSE}{sel}[1h])")
    assert [c["value"][1] for c in count] == ["1"]
    findings = _query(tsdb.url, f"count_over_time({schema.AN_FINDINGS}{sel}[1h])")
    assert {c["value"][1] for c in findings} == {"1"}


def test_query_over_points_limit_is_chunked(prometheus_server) -> None:
    """12,000 points at 100 ms: over Prometheus' 11,000-point limit for one query."""
    p, data = planted.make(job_id="dense", minutes=20, interval_ms=100)
    one_rank = {k: v for k, v in data.items() if k[0] == 0 and k[1] == "reserved"}
    planted.write(prometheus_server.url + "/api/v1/write", p.job_id, one_rank)
    window = QueryWindow(p.job_id, p.start_ns, p.end_ns, step_s=0.1)
    timeline, outcome = load_prometheus([prometheus_server.url], window)
    assert len(timeline.ranks[0]) == 12_000
    assert outcome.queries == 1 and not outcome.partial

    # The limit is real: one unchunked request is refused by Prometheus ...
    with httpx.Client() as client:
        api = PrometheusAPI(prometheus_server.url, client, HttpSettings())
        sel = f'{schema.ALLOC_RESERVED.prom}{{job_id="dense"}}'
        r = client.post(prometheus_server.url + "/api/v1/query_range",
                        data={"query": sel, "start": p.start_ms / 1000, "end": p.end_ms / 1000,
                              "step": 0.1})
        assert r.status_code == 400 and "11,000 points" in r.text
        # ... and a too-large chunk is split until the server accepts it.
        result = api.query_range(sel, p.start_ms / 1000, p.end_ms / 1000, 0.1,
                                 max_points=20_000)
        assert sum(len(x["values"]) for x in result) == 12_000


def test_pre_run_estimate_series_reach_the_timeline(prometheus_server) -> None:
    p, data = planted.make(job_id="with-estimate", minutes=2)
    some = {k: v for k, v in data.items() if k[1] == "reserved"}
    planted.write(prometheus_server.url + "/api/v1/write", p.job_id, some)
    for rank in range(4):
        t, _ = data[(rank, "reserved")]
        est = np.full(t.shape, 24.0 * 2**30)
        body = remote_write.encode_arrays(schema.ESTIMATE.prom, planted.labels_for(p.job_id, rank),
                                          t, est)
        assert loopback_client().post(prometheus_server.url + "/api/v1/write", content=body,
                                      headers=remote_write.HEADERS).status_code == 204
    timeline, _ = load_prometheus([prometheus_server.url],
                                  QueryWindow(p.job_id, p.start_ns, p.end_ns))
    assert timeline.meta["estimate_bytes"] == {r: 24.0 * 2**30 for r in range(4)}
    assert timeline.rank_ids == [0, 1, 2, 3]


def test_server_with_a_lower_points_limit_still_gives_every_sample(tmp_path: Path) -> None:
    """VictoriaMetrics started with -search.maxPointsPerTimeseries=1000 (a query_range limit):
    memory series are read as raw samples at their own timestamps, which that limit does not
    cut, so every sample arrives in one request per chunk. (Halving on a refused query_range
    chunk is covered by test_query_over_points_limit_is_chunked.)"""
    with victoriametrics_dedup(tmp_path / "vm", "-search.maxPointsPerTimeseries=1000") as vm:
        p, data = planted.make(job_id="small-limit", minutes=40)
        one = {k: v for k, v in data.items() if k == (0, "reserved")}
        planted.write(vm.url + "/api/v1/write", p.job_id, one)
        planted.wait_visible(vm.url, p.job_id, 1)
        with FaultProxy(vm.url) as counting:  # forwards everything, records the paths
            timeline, outcome = load_prometheus(
                [counting.url], QueryWindow(p.job_id, p.start_ns, p.end_ns, step_s=1.0))
    assert len(timeline.ranks[0]) == 2400 and not outcome.partial
    assert not [r for r in counting.requests if r.startswith("/api/v1/query_range")]


def _analyze_with_straggler_logs(url: str, p: planted.Planted, tmp_path: Path,
                                 *extra: str) -> dict[str, Any]:
    """``--prometheus`` over the planted window with the straggler_v25 worker logs; the JSON
    report (the run must exit with findings)."""
    logs = Path(__file__).resolve().parents[1] / "stalls" / "data" / "logs" / "straggler_v25"
    report_path = tmp_path / "report.json"
    r = run_cli("--prometheus", url, "--job-id", p.job_id,
                "--start", str((p.start_ms - 2000) / 1000), "--end", str((p.end_ms + 2000) / 1000),
                "--format", "json", "--output", str(report_path), "--logs", str(logs), *extra)
    assert r.returncode == exitcodes.FINDINGS, r.stderr
    report: dict[str, Any] = json.loads(report_path.read_text())
    return report


def test_scheduled_job_carries_stall_findings_from_worker_logs(prometheus_server,
                                                               pushgateway_server,
                                                               tmp_path: Path) -> None:
    """--prometheus with --logs: memory findings from the TSDB and the straggler from the logs
    land in one report and in the pushed finding series."""
    p, data = planted.make(job_id="stuck-tsdb", minutes=2)
    planted.write(prometheus_server.url + "/api/v1/write", p.job_id, data)
    planted.wait_visible(prometheus_server.url, p.job_id, len(data))
    report = _analyze_with_straggler_logs(prometheus_server.url, p, tmp_path,
                                          "--pushgateway", pushgateway_server.url)
    assert report["cross_rank"]["first_cause_suspects"][0]["rank"] == p.fault_rank
    stalls = report["stall_findings"]
    assert [(f["kind"], f["ranks"]) for f in stalls if f["consequence_of"] is None] == \
        [("straggler", [2])]
    pushed = loopback_client().get(pushgateway_server.url + "/metrics", timeout=5).text
    assert any(line.startswith(schema.AN_STALL) and 'kind="straggler"' in line
               for line in pushed.splitlines())


def test_tsdb_run_judges_stall_findings_with_the_windows_telemetry(prometheus_server,
                                                                    tmp_path: Path) -> None:
    """--prometheus with --logs, where the TSDB shows the logs' straggler (rank 2) at 99 % of
    its device when its samples stopped, before every other rank's: the report carries the
    telemetry's rank_failure for rank 2, as a files run over the same data would (before, a
    TSDB run attached the collective markers but never judged the stall evidence with the
    telemetry)."""
    p, data = planted.make(job_id="stuck-oom-tsdb", minutes=2)
    for (rank, fname), (t, v) in list(data.items()):
        if rank == 2:
            cut = len(t) - 30
            v = np.full(cut, 79.2 * 2**30) if fname == "device_used" else v[:cut]
            data[(rank, fname)] = (t[:cut], v)
    planted.write(prometheus_server.url + "/api/v1/write", p.job_id, data)
    planted.wait_visible(prometheus_server.url, p.job_id, len(data))
    stalls = _analyze_with_straggler_logs(prometheus_server.url, p, tmp_path)["stall_findings"]
    failures = [f for f in stalls if f["kind"] == "rank_failure" and f["source"] == "telemetry"]
    assert [f["ranks"] for f in failures] == [[2]], stalls
    assert "99%" in failures[0]["evidence"]["reason"]


def test_scheduled_job_rejects_a_bad_dump_before_querying(tmp_path: Path) -> None:
    bad = tmp_path / "fr"
    bad.mkdir()
    (bad / "nccl_trace_rank_0").write_bytes(b"\x80\x04not a pickle")
    r = run_cli("--prometheus", "http://127.0.0.1:9", "--job-id", "x", "--since", "5m",
                "--flight-recorder", str(bad))
    assert r.returncode == exitcodes.USAGE, r.stderr
    assert "Traceback" not in r.stderr and "nccl_trace_rank_0" in r.stderr
