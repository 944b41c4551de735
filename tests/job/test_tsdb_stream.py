"""Reads are turned into the Timeline rank by rank as they arrive (memory bounded by the ranks
still being read); a job read in many small reads must give the Timeline one read gives, and a
read that keeps failing in the middle must cost only its own ranks, with the documented
partial-read warning and exit code (docs/exit-codes.md).

The data is in a REAL VictoriaMetrics; :class:`tests.job.stubs.FaultProxy` only makes the reads
of one rank (or one series) fail on cue.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from stormotel.analyzers.http import HttpSettings
from stormotel.analyzers.sources.prometheus import QueryWindow, load_prometheus
from stormotel.analyzers.timeline import KIND_OOM, KIND_STEP, Timeline

from stormotel import exitcodes, schema
from tests import servers
from tests.job import planted
from tests.job.conftest import run_cli, summary_line
from tests.job.stubs import FaultProxy
from tests.job.test_tsdb_job import victoriametrics_dedup

pytestmark = pytest.mark.servers
JOB = "streamed-1"


@pytest.fixture(scope="module")
def planted_vm(tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[tuple[servers.Server, planted.Planted]]:
    """Four ranks' memory series, step gauges and OOM counters (rank 2 OOMs at the fault)."""
    p, data = planted.make(job_id=JOB, minutes=10)
    with victoriametrics_dedup(tmp_path_factory.mktemp("stream") / "vm") as vm:
        planted.write(vm.url + "/api/v1/write", JOB, data)
        planted.write_markers(vm.url + "/api/v1/write", JOB, data[(0, "reserved")][0],
                              oom_at_ms=p.fault_ms)
        planted.wait_visible(vm.url, JOB, len(data) + 8)
        yield vm, p


def _window(p: planted.Planted) -> QueryWindow:
    return QueryWindow(JOB, p.start_ns - 2 * 10**9, p.end_ns + 2 * 10**9)


def _assert_same_rank(got: Timeline, want: Timeline, rank: int) -> None:
    a, b = got.ranks[rank], want.ranks[rank]
    assert a.identity == b.identity
    np.testing.assert_array_equal(a.t_ns, b.t_ns)
    assert a.values.keys() == b.values.keys()
    for name, v in b.values.items():
        np.testing.assert_array_equal(a.values[name], v, f"rank {rank} {name}")
    np.testing.assert_array_equal(a.markers.start_ns, b.markers.start_ns)
    np.testing.assert_array_equal(a.markers.end_ns, b.markers.end_ns)
    assert a.markers.name.tolist() == b.markers.name.tolist()
    assert a.markers.kind.tolist() == b.markers.kind.tolist()
    assert list(a.markers.attrs) == list(b.markers.attrs)


def test_rank_by_rank_reads_build_the_timeline_of_one_read(planted_vm) -> None:
    vm, p = planted_vm
    whole, _ = load_prometheus([vm.url], _window(p))  # all four ranks in each read
    # One rank per read, two reads in flight: each rank is finished while others are read.
    by_rank, outcome = load_prometheus([vm.url], _window(p), rank_batch=1, concurrency=2)
    assert not outcome.partial
    assert sorted(by_rank.ranks) == sorted(whole.ranks) == [0, 1, 2, 3]
    for rank in range(4):
        _assert_same_rank(by_rank, whole, rank)
    kinds = set(by_rank.ranks[2].markers.kind.tolist())
    assert {KIND_STEP, KIND_OOM} <= kinds  # the markers were built, not only the samples
    # Every step name is one shared object per step number, across ranks.
    first = {n: id(n) for n in by_rank.ranks[0].markers.name.tolist()}
    assert all(first.get(n, id(n)) == id(n) for n in by_rank.ranks[1].markers.name.tolist())
    assert by_rank.skipped == whole.skipped and by_rank.notes == whole.notes


def test_a_read_failing_mid_stream_costs_only_its_ranks(planted_vm) -> None:
    """Rank 2's reads keep failing (503) while ranks 0, 1 and 3 are read before and after
    them: those three are whole, rank 2 is named as failed, and the outcome is partial."""
    vm, p = planted_vm
    whole, _ = load_prometheus([vm.url], _window(p))
    with FaultProxy(vm.url, fail_body=b"rank%3D~%222%22") as proxy:
        got, outcome = load_prometheus([proxy.url], _window(p), rank_batch=1, concurrency=2,
                                       settings=HttpSettings(retries=0))
    assert outcome.partial
    assert outcome.ranks_failed == {proxy.url: {2}}
    assert not outcome.endpoints_failed and outcome.endpoints_ok == [proxy.url]
    assert sorted(got.ranks) == [0, 1, 3]
    for rank in (0, 1, 3):
        _assert_same_rank(got, whole, rank)
    reads_of_rank_2 = outcome.queries // 4  # every rank's reads: one per series
    assert got.skipped["query_failed"] == reads_of_rank_2 >= 4
    assert any("for ranks 2 failed" in n and "503" in n for n in got.notes), got.notes


def test_cli_partial_read_mid_stream_warns_and_exits_as_documented(planted_vm,
                                                                   tmp_path: Path) -> None:
    """One series' read fails after others were read: the run still analyses and reports
    (exit 0 or 1, never a source failure), warns that the ranks were partly read, and its
    summary line says partial."""
    vm, p = planted_vm
    name = schema.FIELD_METRICS["device_total"].prom_aliases[0]
    out = tmp_path / "r.json"
    with FaultProxy(vm.url, fail_body=f"%22{name}%22".encode()) as proxy:
        r = run_cli("--prometheus", proxy.url, "--job-id", JOB,
                    "--start", str(p.start_ms / 1000 - 2), "--end", str(p.end_ms / 1000 + 2),
                    "--format", "json", "--http-retries", "1", "-o", str(out))
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode in (exitcodes.OK, exitcodes.FINDINGS), r.stderr
    assert f"warning: {proxy.url}: ranks [0, 1, 2, 3] only partly read" in r.stderr
    report = json.loads(out.read_text())
    assert report["participating_ranks"] == [0, 1, 2, 3]  # what was read is analysed
    assert summary_line(r.stderr)["partial"] == "true"


def test_a_rank_is_finished_only_when_every_endpoint_has_answered(tmp_path: Path) -> None:
    """An HA pair holding the same ranks, one sample of rank 1 larger on one of them: read
    rank by rank, the rank is merged once both endpoints' reads are in, so the larger value is
    kept and the conflict noted as the source's own rule says (not the builder's "last read
    wins", which a rank finished after the first endpoint would fall back to)."""
    p, data = planted.make(job_id=JOB, minutes=5)
    t, v = data[(1, "reserved")]
    bumped = dict(data)
    bumped[(1, "reserved")] = (t, np.where(np.arange(t.size) == 100, v + 2**30, v))
    with victoriametrics_dedup(tmp_path / "a") as a, victoriametrics_dedup(tmp_path / "b") as b:
        for vm, series in ((a, data), (b, bumped)):
            planted.write(vm.url + "/api/v1/write", JOB, series)
            planted.wait_visible(vm.url, JOB, len(series))
        got, outcome = load_prometheus([a.url, b.url], _window(p), rank_batch=1)
        swapped, _ = load_prometheus([b.url, a.url], _window(p), rank_batch=1)
    assert not outcome.partial
    reserved = got.ranks[1].values["reserved"]
    at = int(np.searchsorted(got.ranks[1].t_ns, int(t[100]) * 1_000_000))
    assert reserved[at] == v[100] + 2**30
    np.testing.assert_array_equal(swapped.ranks[1].values["reserved"], reserved)
    assert got.skipped["conflicting_sample"] == 1
    assert any("the larger value was kept" in n for n in got.notes), got.notes


def test_a_slow_answer_holds_up_at_most_the_read_ahead() -> None:
    """The first read hangs (a retry, a slow shard): the reads behind it may run ahead, but
    never more than the bounded read-ahead, so their decoded answers cannot pile up without
    limit (``pool.map`` would have run all of them); the answers still come in task order."""
    import threading

    from stormotel.analyzers.sources.prometheus import load as prom

    release = threading.Event()
    started: list[int] = []
    lock = threading.Lock()

    def read(i: int) -> int:
        with lock:
            started.append(i)
        if i == 0:
            assert release.wait(10)
        return i * 10

    workers = 3
    ahead = prom.READ_AHEAD_PER_WORKER * workers
    seen_while_blocked: list[int] = []

    def look_then_release() -> None:
        with lock:
            seen_while_blocked.append(len(started))
        release.set()

    got = prom._in_order_bounded(read, list(range(40)), workers)
    timer = threading.Timer(0.5, look_then_release)  # the others have long finished by then
    timer.start()
    first = next(got)  # returns once read 0 is released
    assert seen_while_blocked == [ahead]  # read 0 and the read-ahead behind it, no more
    assert first == (0, 0)
    assert list(got) == [(i, i * 10) for i in range(1, 40)]
    assert sorted(started) == list(range(40))
    timer.join()


def _plain(vm_url: str, window: QueryWindow, monkeypatch: pytest.MonkeyPatch) -> Timeline:
    """The job read the plain way: every series listed before the first read."""
    from stormotel.analyzers.sources.prometheus import load

    with monkeypatch.context() as m:
        m.setattr(load, "discover_quick", lambda *a, **k: None)
        return load_prometheus([vm_url], window)[0]


def _same_timeline(got: Timeline, want: Timeline) -> None:
    assert sorted(got.ranks) == sorted(want.ranks)
    for rank in want.ranks:
        _assert_same_rank(got, want, rank)
    assert got.skipped == want.skipped and got.notes == want.notes


def test_reads_start_from_label_values_and_give_the_listed_timeline(planted_vm, monkeypatch
                                                                    ) -> None:
    """The quick discovery (two label-values answers; the listing beside the reads) reads the
    Timeline the listing-first discovery reads, identities included, and reads it once."""
    import httpx

    vm, p = planted_vm
    paths: list[str] = []
    client = httpx.Client(event_hooks={"request": [lambda r: paths.append(r.url.path)]})
    got, outcome = load_prometheus([vm.url], _window(p), client=client)
    client.close()
    assert not outcome.partial
    assert "/api/v1/label/__name__/values" in paths and "/api/v1/series" in paths
    reads = paths.count("/api/v1/query")
    _same_timeline(got, _plain(vm.url, _window(p), monkeypatch))
    assert got.ranks[2].identity.host is not None  # the listing's identity, not a bare rank
    # Read once: the same number of raw reads as the plain path makes.
    plain_paths: list[str] = []
    client = httpx.Client(event_hooks={"request": [lambda r: plain_paths.append(r.url.path)]})
    from stormotel.analyzers.sources.prometheus import load

    with monkeypatch.context() as m:
        m.setattr(load, "discover_quick", lambda *a, **k: None)
        load_prometheus([vm.url], _window(p), client=client)
    client.close()
    assert reads == plain_paths.count("/api/v1/query")


def test_a_server_that_ignores_match_on_label_values_is_read_again_listing_first(
        planted_vm, monkeypatch) -> None:
    """Label values answered without ``match[]`` (names of other jobs: here a rolling-peak
    spelling this job never wrote) would read the wrong series; the listing catches it and the
    job is read again the plain way, with the same Timeline and a progress line saying so."""
    from stormotel.analyzers.sources.prometheus_api import PrometheusAPI

    vm, p = planted_vm
    want = _plain(vm.url, _window(p), monkeypatch)
    real = PrometheusAPI.label_values

    def unfiltered(self, label, selector, start_ns, end_ns):  # type: ignore[no-untyped-def]
        got = real(self, label, selector, start_ns, end_ns)
        if label == "__name__":
            got = [*got, schema.FIELD_PEAK_METRICS["allocated"].prom]
        return got

    said: list[str] = []
    monkeypatch.setattr(PrometheusAPI, "label_values", unfiltered)
    got, outcome = load_prometheus([vm.url], _window(p), progress=said.append)
    assert not outcome.partial
    assert any("reading again" in s and "listing" in s for s in said), said
    _same_timeline(got, want)
