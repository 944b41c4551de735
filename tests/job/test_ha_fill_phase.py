"""An HA pair's hole filled from the other replica, at the CLI through two real Prometheus
servers: ``stormotel analyze --prometheus A --prometheus B`` must not name a healthy rank the
first cause at high because the fill put the other replica's phase of a swing into its series.

Both servers scrape every rank's device memory, which swings 2 GiB within a training step;
server A (every 15 s) happens to catch each target at the swing's low phase, server B (every
10 s) at its high phase — fixed phases, as a real server's per-target offset gives. The source
takes B's series (more samples) and fills its holes from A. Rank 0 rises 1 GiB at the epoch,
the others 20 s later (the planted leader: rank 0). Server B missed rank 2's scrapes from 50 s
to 20 s before the epoch: filled from A, rank 2's series dips 2 GiB there and "rises" back
before rank 0 — named the leader at high before the source recorded its filled runs
(:mod:`stormotel.analyzers.algorithms.replica_mix`). Either server alone: rank 0.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests import servers
from tests.job import planted, two_servers
from tests.job.stubs import FaultProxy

pytestmark = pytest.mark.servers

GIB = float(1 << 30)
LEAD_IN_S, AFTER_S = 240.0, 60.0
RISES_S = {0: 0.0, 1: 20.0, 2: 20.0, 3: 20.0}
#: Each server's interval, level (the swing's phase it catches) and per-target phase (s).
SERVERS = {"a": (15.0, 2.58 * GIB, {0: 3.1, 1: 7.4, 2: 11.9, 3: 0.6}),
           "b": (10.0, 4.58 * GIB, {0: 2.2, 1: 5.3, 2: 8.7, 3: 1.4})}
#: Server B missed rank 2's scrapes in this span (s after the epoch).
MISSED = (2, -50.0, -20.0)


def _series(server: str, epoch: float, missed: bool) -> dict[tuple[int, str], Any]:
    every, level, phases = SERVERS[server]
    out = {}
    for rank, phase in phases.items():
        t = np.arange(epoch - LEAD_IN_S + phase, epoch + AFTER_S, every)
        if missed and server == "b" and rank == MISSED[0]:
            t = t[(t < epoch + MISSED[1]) | (t > epoch + MISSED[2])]
        v = level + np.where(t >= epoch + RISES_S[rank], GIB, 0.0)
        t_ms = np.rint(t * 1000).astype(np.int64)
        out[(rank, "device_used")] = (t_ms, v)
        out[(rank, "device_total")] = (t_ms, np.full(t.size, 80 * GIB))
    return out


#: Raw reads over this range are refused as too large (a proxy answering as Prometheus does
#: over ``--query.max-samples``): the source reads each rank alone and halves its read in time
#: until it fits, so each server's series arrives in four time chunks (as a window over
#: 10,000 samples does).
CHUNK_MS = 100_000
#: The query API (Prometheus's remote read answers a window whole; the query API reads a
#: window over 10,000 samples, or one refused, in time chunks).
QUERY_API = ("--tsdb-read", "query")


def _planted_pair(work: Path) -> Iterator[dict[str, Any]]:
    with servers.prometheus(work / "a") as a, servers.prometheus(work / "b") as b:
        epoch = float(int(time.time()) - AFTER_S - 30)  # recent: Prometheus's head block
        for job, missed in (("missed", True), ("on-time", False)):
            for name, srv in (("a", a), ("b", b)):
                planted.write(srv.url + "/api/v1/write", job, _series(name, epoch, missed),
                              alias_rank=None)
                planted.wait_visible(srv.url, job, 8)
        yield {"a": a.url, "b": b.url, "epoch": epoch, "work": work}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    yield from _planted_pair(tmp_path_factory.mktemp("ha-fill"))


@pytest.fixture(scope="module")
def chunked_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    for pair in _planted_pair(tmp_path_factory.mktemp("ha-fill-chunked")):
        a = FaultProxy(pair["a"], max_range_ms=CHUNK_MS)
        b = FaultProxy(pair["b"], max_range_ms=CHUNK_MS)
        with a, b:
            yield {**pair, "a": a.url, "b": b.url, "proxies": (a, b)}


def _analyze(urls: list[str], job: str, epoch: float, out: Path, *extra: str
             ) -> dict[str, Any]:
    return two_servers.analyze(urls, job, epoch - LEAD_IN_S - 5, epoch + AFTER_S + 5, out,
                               *extra)


def _sure(report: dict[str, Any]) -> list[int]:
    return two_servers.sure_ranks(report)


def test_a_hole_filled_at_the_other_phase_names_no_wrong_rank(pair: dict[str, Any]) -> None:
    a, b, epoch, work = pair["a"], pair["b"], pair["epoch"], pair["work"]
    ab = _analyze([a, b], "missed", epoch, work / "missed-ab.json")
    ba = _analyze([b, a], "missed", epoch, work / "missed-ba.json")
    assert ab["cross_rank"] == ba["cross_rank"]
    assert _sure(ab) == [], ab["cross_rank"]
    notes = [n for i in ab["cross_rank"]["incidents"] for n in i["notes"] if "replica" in n]
    assert notes and "ranks [2]" in notes[0], ab["cross_rank"]["incidents"]
    for url, name in ((a, "a"), (b, "b")):
        alone = _analyze([url], "missed", epoch, work / f"missed-{name}.json")
        assert set(_sure(alone)) <= {0}, alone["cross_rank"]


def test_with_no_missed_scrape_the_pair_names_rank_0_at_high(pair: dict[str, Any]) -> None:
    """The same servers and swing, nothing missed: the record of filled runs costs the
    planted leader nothing."""
    report = _analyze([pair["b"], pair["a"]], "on-time", pair["epoch"],
                      pair["work"] / "on-time.json")
    named = [(s["rank"], s["confidence"]) for s in report["cross_rank"]["first_cause_suspects"]]
    assert named == [(0, "high")] and _sure(report) == [0], report["cross_rank"]


def test_a_pair_read_in_time_chunks_is_merged_per_server(chunked_pair: dict[str, Any]) -> None:
    """The same pair with every series read in time chunks. Merged chunk by chunk, the chunk
    with the most samples was the chosen replica and every other chunk of both servers was
    interleaved around it, unrecorded: the zigzag of the phases again. Merged per server
    first, the answers are those of the whole reads above, in either server order."""
    a, b, epoch, work = (chunked_pair["a"], chunked_pair["b"], chunked_pair["epoch"],
                         chunked_pair["work"])
    ab = _analyze([a, b], "missed", epoch, work / "missed-ab.json", *QUERY_API)
    ba = _analyze([b, a], "missed", epoch, work / "missed-ba.json", *QUERY_API)
    assert ab["cross_rank"] == ba["cross_rank"]
    assert _sure(ab) == [], ab["cross_rank"]
    notes = [n for i in ab["cross_rank"]["incidents"] for n in i["notes"] if "replica" in n]
    assert notes and "ranks [2]" in notes[0], ab["cross_rank"]["incidents"]
    report = _analyze([b, a], "on-time", epoch, work / "on-time.json", *QUERY_API)
    named = [(s["rank"], s["confidence"]) for s in report["cross_rank"]["first_cause_suspects"]]
    assert named == [(0, "high")] and _sure(report) == [0], report["cross_rank"]
    assert all(proxy.refused for proxy in chunked_pair["proxies"])  # reads split in time
