"""First cause from a 1 s Prometheus scrape with the tracker's edge gauges, in the shape the
Prometheus source builds (samples at scrape timestamps, edges through ``markers_from_edges``).

A scrape is stamped with the time it started, and the exporter reads the tracker's latest sample
later, so the first scrape that shows a rise can be stamped before the tracker's own edge time.
The times below are those of the production benchmark's ``lead-400ms`` job scraped every 1 s
(rank 2 led by ~400 ms; rank 3's rise showed in the scrape stamped 52.304 s, its tracker edge is
52.484 s), which came out as a tie before the late edge was matched."""

from __future__ import annotations

import numpy as np
from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.sources.prometheus import markers_from_edges
from stormotel.analyzers.timeline import RankIdentity, Timeline, TimelineBuilder

from stormotel import schema
from tests.analyzers.synth import GIB, MIB

S = 1_000_000_000
T0 = 1_700_000_000 * S
TRACKER_INTERVAL = 100_000_000


def _timeline(edges_s: dict[int, float], shown_s: dict[int, float]) -> Timeline:
    """Per rank: scrapes every 1 s at the phase of ``shown_s[r]`` (the first scrape showing the
    1 GiB rise), the edge gauge holding ``edges_s[r]`` from its edge on."""
    rng = np.random.default_rng(3)
    b = TimelineBuilder()
    edge_parts = {}
    for r, shown in shown_s.items():
        t = T0 + np.rint((shown % 1.0 + np.arange(90)) * S).astype(np.int64)
        high = t >= T0 + round(shown * S)
        used = 4.5 * GIB + rng.normal(0, 2 * MIB, t.shape[0]) + np.where(high, 1.0 * GIB, 0.0)
        b.set_identity(RankIdentity(rank=r, job_id="job-scrape", world_size=len(shown_s)))
        b.add_samples(r, t, device_used=used, device_total=np.full(t.shape[0], 80.0 * GIB))
        gauge = np.where(high, (T0 + round(edges_s[r] * S)) / 1e9, np.nan)
        edge_parts[(r, schema.EDGE_FIRST_RISE)] = [(t, gauge)]
    for r, m in markers_from_edges(edge_parts, dict.fromkeys(shown_s, TRACKER_INTERVAL)).items():
        b.add_markers(r, m)
    return b.build()


def test_an_edge_just_after_the_scrape_that_showed_the_rise_still_times_it():
    edges = {0: 52.517, 1: 52.473, 2: 52.095, 3: 52.484}
    shown = {0: 52.600, 1: 52.550, 2: 52.150, 3: 52.304}
    cr = analyze(_timeline(edges, shown)).cross_rank
    top = cr.first_cause_suspects[0]
    assert (top.rank, top.confidence, len(cr.first_cause_suspects)) == (2, "high", 1)
    rise3 = cr.incidents[0]["rises"]["3"]
    assert rise3["timed_by_edge_event"] is True
    # The follower's interval covers both readings: from one tracker interval before the
    # scrape timestamp to its own edge.
    assert rise3["earliest_ns"] == T0 + round(52.304 * S) - TRACKER_INTERVAL


def test_ranks_whose_edges_lie_within_the_tracker_interval_stay_a_tie():
    """A shared cause: every edge within 60 ms, one of them after its scrape's timestamp."""
    edges = {0: 52.500, 1: 52.530, 2: 52.470, 3: 52.480}
    shown = {0: 52.600, 1: 52.550, 2: 52.900, 3: 52.304}
    cr = analyze(_timeline(edges, shown)).cross_rank
    assert len(cr.first_cause_suspects) > 1
    assert all(s.confidence == "low" for s in cr.first_cause_suspects)


def test_an_edge_long_after_the_scrape_is_not_taken_for_its_rise():
    """An edge more than half a scrape interval after the scrape that showed the rise belongs to
    something else; the rise keeps the scrape's own 1 s hole and the incident is a tie."""
    edges = {0: 52.517, 1: 52.473, 2: 52.095, 3: 52.984}
    shown = {0: 52.600, 1: 52.550, 2: 52.150, 3: 52.304}
    cr = analyze(_timeline(edges, shown)).cross_rank
    assert cr.incidents[0]["rises"]["3"]["timed_by_edge_event"] is False
    assert all(s.confidence == "low" for s in cr.first_cause_suspects)
