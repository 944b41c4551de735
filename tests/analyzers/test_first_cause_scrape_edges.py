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
from stormotel.analyzers.sources.markers import MarkerAccumulator
from stormotel.analyzers.sources.prometheus.markers import markers_from_edges
from stormotel.analyzers.timeline import KIND_FIRST_RISE, RankIdentity, Timeline, TimelineBuilder

from stormotel import schema
from tests.analyzers.synth import GIB, MIB

S = 1_000_000_000
T0 = 1_700_000_000 * S
TRACKER_INTERVAL = 100_000_000


def _timeline(edges_s: dict[int, float], shown_s: dict[int, float],
              every_s: float = 1.0, gaps_s: dict[int, float] | None = None) -> Timeline:
    """Per rank: scrapes every ``every_s`` at the phase of ``shown_s[r]`` (the first scrape
    showing the 1 GiB rise), the edge gauge holding ``edges_s[r]`` from its edge on."""
    rng = np.random.default_rng(3)
    b = TimelineBuilder()
    edge_parts, gap_parts = {}, {}
    for r, shown in shown_s.items():
        t = T0 + np.rint((shown % every_s + np.arange(90) * every_s) * S).astype(np.int64)
        high = t >= T0 + round(shown * S)
        used = 4.5 * GIB + rng.normal(0, 2 * MIB, t.shape[0]) + np.where(high, 1.0 * GIB, 0.0)
        b.set_identity(RankIdentity(rank=r, job_id="job-scrape", world_size=len(shown_s)))
        b.add_samples(r, t, device_used=used, device_total=np.full(t.shape[0], 80.0 * GIB))
        gauge = np.where(high, (T0 + round(edges_s[r] * S)) / 1e9, np.nan)
        edge_parts[(r, schema.EDGE_FIRST_RISE)] = [(t, gauge)]
        if gaps_s and r in gaps_s:
            gap_parts[(r, schema.EDGE_FIRST_RISE)] = [(t, np.where(high, gaps_s[r], np.nan))]
    intervals = dict.fromkeys(shown_s, TRACKER_INTERVAL)
    for r, m in markers_from_edges(edge_parts, intervals, gap_parts).items():
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


def test_an_edge_long_after_the_scrape_widens_the_rise_to_it():
    """An edge more than half a scrape interval after the scrape that showed the rise, before
    the next scrape: either the exporter read the value late (its process stopped or starved
    while the scrape waited) or the edge is of something else. Either way the scrape's stamp
    does not bound the rise: it lies between the previous scrape and the edge, and the
    incident is a tie."""
    edges = {0: 52.517, 1: 52.473, 2: 52.095, 3: 52.984}
    shown = {0: 52.600, 1: 52.550, 2: 52.150, 3: 52.304}
    cr = analyze(_timeline(edges, shown)).cross_rank
    rise3 = cr.incidents[0]["rises"]["3"]
    assert rise3["t_ns"] == T0 + round(52.984 * S)
    assert rise3["earliest_ns"] == T0 + round(51.304 * S)
    assert all(s.confidence == "low" for s in cr.first_cause_suspects)


def test_a_scrape_read_late_does_not_name_its_rank_first():
    """Scrapes every 15 s. Rank 1's exporter was starved while the scrape stamped 64.45 s
    waited; it answered at 65.7 s with the sample of 65.6 s, just after rank 1's rise (its edge,
    65.6 s). Rank 0 rose at 65.0 s. Taking the scrape's stamp for the time named rank 1 the
    leader at high, before rank 0 that really rose first."""
    edges = {0: 65.0, 1: 65.6}
    shown = {0: 70.9, 1: 64.45}
    cr = analyze(_timeline(edges, shown, every_s=15.0)).cross_rank
    assert not [s.rank for s in cr.first_cause_suspects if s.confidence in ("high", "medium")]
    assert cr.incidents[0]["rises"]["1"]["t_ns"] == T0 + round(65.6 * S)


def test_the_edge_gap_gauge_keeps_a_starved_rank_from_looking_late():
    """Scrapes every 15 s, every rank's edge seen by a scrape after it. Rank 1's tracker was
    starved for a second before its edge sample at 65.0 s (it rose at ~64.2 s); rank 0 rose at
    64.6 s. With the nominal 0.1 s interval rank 0 was the first cause at high; the edge-gap
    gauge (1.0 s) says rank 1's rise may lie anywhere in the second before its edge: a tie."""
    edges = {0: 64.6, 1: 65.0}
    shown = {0: 70.9, 1: 66.3}
    before = analyze(_timeline(edges, shown, every_s=15.0)).cross_rank
    top = before.first_cause_suspects[0]
    assert (top.rank, top.confidence) == (0, "high")
    cr = analyze(_timeline(edges, shown, every_s=15.0, gaps_s={0: 0.1, 1: 1.0})).cross_rank
    assert not [s.rank for s in cr.first_cause_suspects if s.confidence in ("high", "medium")]
    assert cr.incidents[0]["rises"]["1"]["earliest_ns"] == T0 + round(64.0 * S)


def _starved_archive(stated_gap: bool) -> Timeline:
    """The tracker's own archive at 10 Hz with its first-rise span events: rank 0 rises at
    10.0 s; rank 1's tracker was stopped from 8.95 s to 10.4 s (a CPU-starved or SIGSTOPped
    process) and rose at 9.0 s, so its first sample above the baseline, and its edge, are at
    10.4 s. ``stated_gap``: the edge carries the tracker's gap since its previous sample."""
    b = TimelineBuilder()
    for r in (0, 1):
        t = np.arange(0, 200) * TRACKER_INTERVAL
        if r == 1:
            t = np.concatenate([t[t < 9.0 * S], np.arange(104, 200) * TRACKER_INTERVAL])
        rise_at = 10.0 * S if r == 0 else 9.0 * S
        used = 4.5 * GIB + np.where(t >= rise_at, 1.0 * GIB, 0.0)
        b.set_identity(RankIdentity(rank=r, job_id="job-starved", world_size=2))
        b.add_samples(r, T0 + t, device_used=used, device_total=np.full(t.shape[0], 80.0 * GIB))
        edge_i = int(np.flatnonzero(t >= rise_at)[0])
        edge_t = int(T0 + t[edge_i])
        attrs: dict[str, object] = {schema.SPAN_ATTR_SAMPLING_INTERVAL: 0.1}
        if stated_gap:
            attrs[schema.EVENT_ATTR_SINCE_PREVIOUS] = (t[edge_i] - t[edge_i - 1]) / 1e9
        acc = MarkerAccumulator()
        acc.add(r, edge_t, edge_t, schema.EVENT_FIRST_RISE, KIND_FIRST_RISE, attrs)
        for rank, m in acc.build().items():
            b.add_markers(rank, m)
    return b.build()


def test_a_starved_tracker_archive_is_a_tie_not_a_lead_for_the_other_rank():
    """Before: rank 1's edge was trusted to the nominal 0.1 s, so rank 0 (10.0 s) was named the
    first cause at high although rank 1 rose a second earlier. The archive's own hole before
    the edge's sample (1.45 s) is what the evidence resolves; with the tracker's stated gap
    (new archives) the same."""
    for stated in (False, True):
        cr = analyze(_starved_archive(stated)).cross_rank
        assert not [s.rank for s in cr.first_cause_suspects
                    if s.confidence in ("high", "medium")], stated
        rise1 = cr.incidents[0]["rises"]["1"]
        assert rise1["earliest_ns"] == T0 + round(8.9 * S), stated
