"""The TSDB's bulk read APIs against REAL servers: Prometheus 2.42 remote read (streamed XOR
chunks) and VictoriaMetrics' export API give the same Timeline as the query API.

Planted-fault telemetry (rank 2 rises 20 s before the others, rank 3 in the OTLP-receiver
spelling, the step gauge and an OOM counter beside it) is remote-written into each server;
the job is read twice, once with ``--tsdb-read query`` and once probing for the bulk API, and
every rank's samples and markers, and the findings, must be the same — with the API that was
used said in the Timeline's meta, its notes and the report.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.http import HttpSettings
from stormotel.analyzers.sources.prometheus import QueryWindow, load_prometheus
from stormotel.analyzers.timeline import Timeline

from stormotel import exitcodes
from tests import servers
from tests.job import planted
from tests.job.conftest import run_cli
from tests.job.stubs import FaultProxy
from tests.job.test_tsdb_job import victoriametrics_dedup

pytestmark = pytest.mark.servers
BULK = {"prometheus": "remote_read", "victoriametrics": "vm_native"}


@pytest.fixture(scope="module", params=["prometheus", "victoriametrics"])
def filled(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    start = servers.prometheus if request.param == "prometheus" else victoriametrics_dedup
    with start(tmp_path_factory.mktemp(request.param)) as server:
        p = planted.fill(server.url, "bulk-1")
        yield request.param, server, p


def _window(p: planted.Planted) -> QueryWindow:
    return QueryWindow(p.job_id, p.start_ns - 2_000_000_000, p.end_ns + 2_000_000_000)


def _same_timeline(a: Timeline, b: Timeline) -> None:
    assert a.rank_ids == b.rank_ids and len(a.rank_ids) == 4
    for rank in a.rank_ids:
        x, y = a.ranks[rank], b.ranks[rank]
        assert x.identity == y.identity
        assert np.array_equal(x.t_ns, y.t_ns), rank
        assert sorted(x.values) == sorted(y.values)
        for name in x.values:
            assert np.array_equal(x.values[name], y.values[name], equal_nan=True), (rank, name)
        assert np.array_equal(x.markers.start_ns, y.markers.start_ns)
        assert np.array_equal(x.markers.end_ns, y.markers.end_ns)
        assert x.markers.kind.tolist() == y.markers.kind.tolist()
        assert x.markers.name.tolist() == y.markers.name.tolist()
    assert a.skipped == b.skipped


def test_bulk_api_reads_the_same_timeline_as_the_query_api(filled) -> None:
    kind, server, p = filled
    query, _ = load_prometheus([server.url], _window(p), read_api="query")
    bulk, outcome = load_prometheus([server.url], _window(p))
    assert not outcome.partial
    assert query.meta["prometheus"]["read_api"] == {server.url: "query"}
    assert bulk.meta["prometheus"]["read_api"] == {server.url: BULK[kind]}
    _same_timeline(query, bulk)
    assert sum(bulk.ranks[r].t_ns.size for r in bulk.rank_ids) == 4 * 480
    said = " ".join(bulk.notes)
    assert ("remote read (streamed XOR chunks)" if kind == "prometheus"
            else "native export") in said
    a, b = analyze(query), analyze(bulk)
    lead = [(s.rank, s.confidence) for s in b.cross_rank.first_cause_suspects]
    assert lead[0][0] == p.fault_rank
    assert [(s.rank, s.confidence) for s in a.cross_rank.first_cause_suspects] == lead


def test_forced_bulk_api_the_server_lacks_falls_back_with_a_note(filled) -> None:
    kind, server, p = filled
    other = "export" if kind == "prometheus" else "remote-read"
    tl, outcome = load_prometheus([server.url], _window(p), read_api=other)
    assert not outcome.partial and len(tl.rank_ids) == 4
    assert tl.meta["prometheus"]["read_api"] == {server.url: "query"}
    assert any("no bulk read API answered" in n for n in tl.notes), tl.notes


def test_bulk_reads_keep_the_tenant_and_auth_headers(filled) -> None:
    """Every request of a bulk read carries the endpoint's headers (a tenant, a token)."""
    kind, server, p = filled
    with FaultProxy(server.url) as proxy:
        settings = HttpSettings(headers=(("X-Scope-OrgID", "team-a"),
                                         ("Authorization", "Bearer tok-123")))
        tl, _ = load_prometheus([proxy.url], _window(p), settings=settings)
        seen = list(proxy.headers_seen)
    assert tl.meta["prometheus"]["read_api"] == {proxy.url: BULK[kind]}
    bulk_path = "/api/v1/read" if kind == "prometheus" else "/api/v1/export/native"
    bulk = [h for h in seen if h["path"] == bulk_path]
    assert len(bulk) >= 2  # the probe and the reads
    assert all(h.get("x-scope-orgid") == "team-a" and h.get("authorization") == "Bearer tok-123"
               for h in bulk)


def test_cli_report_says_which_api_read_the_job(filled, tmp_path: Path) -> None:
    kind, server, p = filled
    out = tmp_path / "r.json"
    r = run_cli("--prometheus", server.url, "--job-id", p.job_id, "--start",
                str(p.start_ms / 1000 - 2), "--end", str(p.end_ms / 1000 + 2),
                "--format", "json", "--output", str(out))
    assert r.returncode == exitcodes.FINDINGS, r.stderr
    report = json.loads(out.read_text())
    assert report["extra"]["source"]["read_api"] == {server.url: BULK[kind]}
    assert any("read through the" in n for n in report["notes"])
    assert report["cross_rank"]["first_cause_suspects"][0]["rank"] == p.fault_rank
