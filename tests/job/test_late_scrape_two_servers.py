"""Two Prometheus servers scraping the same four trackers (15 s and 10 s), one rank's exporter
starved around the incident: ``stormotel analyze --prometheus A --prometheus B`` must never name
a wrong rank at high or medium, in either order.

The series are what the scrapers would have stored (:mod:`tests.job.scrape_model`: stamped
when the scrape started, valued when the exporter answered). This is the shape of the suite's
busy-run failure (lead-1s, rank 1 planted 1 s ahead): server B's scrape of rank 0 stamped
9.6 s was answered after rank 0's rise at 11.03 s, server A's at 10.2 s likewise; merged, the
9.6 s sample showed the rise before rank 1's edge (10.0 s), its edge lay beyond A's next
stamp, and rank 0 was named the first cause at high (truth: rank 1). Either server alone timed
it by its edge.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from stormotel import schema
from tests import servers
from tests.job import planted, two_servers
from tests.job.scrape_model import Rank, Server, write_job

pytestmark = pytest.mark.servers

LEAD_IN_S = 60.0
DURATION_S = 30.0  # after the epoch
#: lead-1s: staggered starts, each rank's first-rise edge (s after the epoch): rank 1 leads.
STARTS_S = {0: -60.0, 1: -55.5, 2: -58.0, 3: -55.0}
EDGES_S = {0: 11.03, 1: 10.002, 2: 10.986, 3: 10.971}
#: Each target's scrape phase per server (what a real server's hash of the target gives:
#: fixed, different per target and server).
SERVERS = {"a": Server(15.0, {0: 10.2, 1: 9.757, 2: 9.499, 3: 7.389}),
           "b": Server(10.0, {0: 9.6, 1: 2.124, 2: 0.515, 3: 5.263})}
#: Rank 0's exporter starved: every scrape started in this window is answered at its end.
STARVED = (9.5, 11.2)
#: Rank 0's tracker reported a threshold crossing at its rise, but no first-rise edge (its
#: first-rise detector's bar was higher): nothing times its rise but the scrape stamps.
THRESHOLD_ONLY = {0: schema.EDGE_THRESHOLD_WARNING}


def _ranks(starved: bool, kinds: dict[int, str] | None = None) -> dict[int, Rank]:
    return {r: Rank(STARTS_S[r], EDGES_S[r],
                    edge_kind=(kinds or {}).get(r, schema.EDGE_FIRST_RISE),
                    starved=STARVED if starved and r == 0 else None) for r in STARTS_S}


def _analyze(urls: list[str], job: str, epoch: float, out: Path) -> dict[str, Any]:
    return two_servers.analyze(urls, job, epoch - LEAD_IN_S - 5, epoch + DURATION_S + 40, out)


def _sure(report: dict[str, Any]) -> list[int]:
    return two_servers.sure_ranks(report)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Any:
    work = tmp_path_factory.mktemp("late-scrape")
    with servers.prometheus(work / "a") as a, servers.prometheus(work / "b") as b:
        # Recent enough for Prometheus's head block: the whole job ended a minute ago.
        epoch = float(int(time.time()) - DURATION_S - 60)
        jobs = {"starved": (_ranks(True), True), "on-time": (_ranks(False), True),
                "starved-no-gap-gauge": (_ranks(True), False),
                "starved-threshold-edge": (_ranks(True, THRESHOLD_ONLY), True)}
        for job, (ranks, gap) in jobs.items():
            for name, srv in (("a", a), ("b", b)):
                n = write_job(srv.url, job, ranks, SERVERS[name], epoch, DURATION_S,
                              gap_gauge=gap)
                planted.wait_visible(srv.url, job, n)
        yield {"a": a.url, "b": b.url, "epoch": epoch, "work": work}


@pytest.mark.parametrize("job", ["starved", "on-time", "starved-no-gap-gauge",
                                 "starved-threshold-edge"])
def test_two_servers_never_name_a_wrong_rank_in_any_order(pair: dict[str, Any],
                                                          job: str) -> None:
    a, b, epoch, work = pair["a"], pair["b"], pair["epoch"], pair["work"]
    ab = _analyze([a, b], job, epoch, work / f"{job}-ab.json")
    ba = _analyze([b, a], job, epoch, work / f"{job}-ba.json")
    assert ab["cross_rank"] == ba["cross_rank"]
    for report in (ab, _analyze([a], job, epoch, work / f"{job}-a.json"),
                   _analyze([b], job, epoch, work / f"{job}-b.json")):
        assert set(_sure(report)) <= {1}, report["cross_rank"]


def test_on_schedule_the_planted_leader_is_named_from_both_servers(pair: dict[str, Any]
                                                                   ) -> None:
    report = _analyze([pair["a"], pair["b"]], "on-time", pair["epoch"],
                      pair["work"] / "on-time-named.json")
    top = report["cross_rank"]["first_cause_suspects"][0]
    assert (top["rank"], top["confidence"]) == (1, "high"), report["cross_rank"]


def test_a_starved_exporter_is_timed_by_the_edge_its_late_scrape_reported(
        pair: dict[str, Any]) -> None:
    """The late scrape reported rank 0's edge (11.03 s, the tracker's gap 0.1 s): the rise is
    timed by it, not by the scrape's stamp, and rank 1 is still named at high."""
    report = _analyze([pair["a"], pair["b"]], "starved", pair["epoch"],
                      pair["work"] / "starved-named.json")
    cross = report["cross_rank"]
    top = cross["first_cause_suspects"][0]
    assert (top["rank"], top["confidence"]) == (1, "high"), cross
    rise0 = cross["incidents"][0]["rises"]["0"]
    assert rise0["timed_by_edge_event"] is True
    assert rise0["t_ns"] == round((pair["epoch"] + EDGES_S[0]) * 1000) * 1_000_000


def test_a_rise_timed_by_a_stamp_read_late_is_not_a_lead(pair: dict[str, Any]) -> None:
    """No first-rise edge times rank 0's rise, so its merged series puts it at the 9.6 s stamp,
    0.4 s before rank 1's edge; its threshold edge (11.03 s), reported by that very scrape,
    proves the scrape was answered 1.43 s late. The lead is within that: a tie, and the note
    names the rank and the lag."""
    report = _analyze([pair["a"], pair["b"]], "starved-threshold-edge", pair["epoch"],
                      pair["work"] / "threshold-edge.json")
    cross = report["cross_rank"]
    assert _sure(report) == [], cross
    assert cross["incidents"][0]["rises"]["0"]["timed_by_edge_event"] is False
    assert any("rank 0 ≥ 1.43 s" in n for n in cross["notes"]), cross["notes"]
