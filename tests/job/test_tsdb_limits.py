"""A job larger than the TSDB's default limits is read in smaller questions, never failed.

VictoriaMetrics refuses a ``/api/v1/series`` answer over ``-search.maxSeries`` (30,000 by
default: a 2,100-rank job of 14 series per rank) and any query over
``-search.maxSamplesPerQuery``. Here a REAL VictoriaMetrics runs with both limits scaled down to
the planted job's size, so the same refusals happen with 4 ranks: discovery must split by rank
(label values, then series per rank set) and raw reads must be halved in time, and the Timeline
must be the one an unlimited server gives.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stormotel.analyzers.sources.prometheus import QueryWindow, load_prometheus

from stormotel import schema
from tests.job import planted
from tests.job.stubs import FaultProxy
from tests.job.test_tsdb_job import victoriametrics_dedup
from tests.servers import loopback_client

pytestmark = pytest.mark.servers


def _wait_ranks(url: str, job_id: str, ranks: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    loopback_client().get(url + "/internal/force_flush", timeout=5)
    while time.monotonic() < deadline:
        r = loopback_client().get(url + f"/api/v1/label/{schema.ATTR_RANK}/values",
                                  params={"match[]": f'{{{schema.ATTR_JOB_ID}="{job_id}"}}'},
                                  timeout=5)
        if len(r.json().get("data", [])) >= ranks:
            return
        time.sleep(0.2)
    raise AssertionError(f"{url} never showed {ranks} ranks of {job_id}")


@pytest.fixture(scope="module")
def over_limits(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, QueryWindow, Any]:
    """The planted job and the Timeline an unlimited server gives for it: the same for every
    read API below (built once, not once per API)."""
    p, data = planted.make(job_id="over-limits", minutes=10)
    window = QueryWindow(p.job_id, p.start_ns - 10**9, p.end_ns + 10**9)
    with victoriametrics_dedup(tmp_path_factory.mktemp("free")) as free:
        planted.write(free.url + "/api/v1/write", p.job_id, data)
        planted.wait_visible(free.url, p.job_id, len(data))
        want, _ = load_prometheus([free.url], window)
    return p, data, window, want


@pytest.mark.parametrize("read_api", ["query", "export", "auto"])
def test_refused_series_and_samples_are_split_until_they_fit(
        tmp_path: Path, over_limits: tuple[Any, Any, QueryWindow, Any], read_api: str) -> None:
    """``query``: the query API's own splitting (series by rank set, raw reads in time).
    ``export``: the export API refused the same way (its probe too) still gives the Timeline an
    unlimited server gives; ``auto``: the native export (bound by ``-search.maxExportSeries``,
    not by these query limits) reads the same Timeline. (VictoriaMetrics answers the listing
    from the search an export probe cached, so the listing's split is only checked with the
    query API.)"""
    p, data, window, want = over_limits
    per_rank = sum(1 for rank, _ in data if rank == 0)
    # One rank's series fit, two ranks' do not; a 64-rank read of one field over the whole
    # window (4 x 600 samples) is refused, a quarter of it passes.
    limits = [f"-search.maxSeries={per_rank + 1}", "-search.maxSamplesPerQuery=700"]
    with victoriametrics_dedup(tmp_path / "vm", *limits) as vm:
        planted.write(vm.url + "/api/v1/write", p.job_id, data)
        _wait_ranks(vm.url, p.job_id, 4)  # /series itself is limited here
        with FaultProxy(vm.url) as counting:
            got, outcome = load_prometheus([counting.url], window, read_api=read_api)
    assert not outcome.partial, got.notes  # nothing failed
    assert sorted(got.ranks) == sorted(want.ranks) == [0, 1, 2, 3]
    for rank, series in want.ranks.items():
        assert got.ranks[rank].t_ns.tolist() == series.t_ns.tolist()
        for fname, v in series.values.items():
            np.testing.assert_array_equal(got.ranks[rank].values[fname], v, f"{rank} {fname}")
    assert got.ranks[3].identity == want.ranks[3].identity
    if read_api == "auto":
        assert got.meta["prometheus"]["read_api"] == {counting.url: "vm_native"}
        return
    if read_api != "query":
        assert got.meta["prometheus"]["read_api"] == {counting.url: "vm_export"}
        assert sum(r.startswith("/api/v1/export") for r in counting.requests) > 8
        return
    # It did split: the label values call that sizes the series questions, and several
    # series questions after the refused one.
    assert any(r.startswith("/api/v1/label/rank/values") for r in counting.requests)
    assert sum(r.startswith("/api/v1/series") for r in counting.requests) >= 5


def test_discovery_refused_as_too_large_asks_per_job_set(tmp_path: Path) -> None:
    """The scheduled run's discovery touches every rank's device series in the cluster; over
    ``-search.maxUniqueTimeseries`` it is refused, and the same question per set of candidate
    job ids (from label values) finds exactly the jobs an unlimited server finds."""
    from stormotel.analyzers.http import HttpSettings, make_client
    from stormotel.analyzers.sources.discovery import discover_jobs

    jobs = [f"big-{i}" for i in range(3)]
    found = {}
    for name, limits in (("free", []), ("vm", ["-search.maxUniqueTimeseries=5"])):
        with victoriametrics_dedup(tmp_path / name, *limits) as vm:
            for job_id in jobs:
                p, data = planted.make(job_id=job_id, minutes=5)
                planted.write(vm.url + "/api/v1/write", job_id,
                              {k: v for k, v in data.items() if k[1] == "device_used"})
            _wait_ranks(vm.url, jobs[-1], 4)
            with make_client(HttpSettings()) as client:
                found[name] = discover_jobs(client, [vm.url], selector="",
                                            start_ns=p.start_ns - 60 * 10**9,
                                            end_ns=p.end_ns + 10**9, settings=HttpSettings())
    assert found["vm"] == found["free"] == jobs
