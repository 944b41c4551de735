"""Several endpoints merge to the same series in any order (HA pairs, one TSDB per cluster)."""

from __future__ import annotations

import itertools

import numpy as np
from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.sources.prometheus.samples import filled_runs, merge_parts
from stormotel.analyzers.timeline import META_REPLICA_FILLS, Timeline

from tests.analyzers.synth import RankData, to_timeline


def test_merge_is_order_independent_drops_duplicates_and_counts_conflicts() -> None:
    a = (np.array([1, 2, 3], np.int64), np.array([10.0, 20.0, 30.0]))
    b = (np.array([2, 3, 4], np.int64), np.array([20.0, 35.0, 40.0]))  # 3: a conflict
    c = (np.array([1], np.int64), np.array([10.0]))  # an exact duplicate of a's first sample
    results = []
    for parts in itertools.permutations([a, b, c]):
        t, v, dups, conflicts, _ = merge_parts(list(parts))
        results.append((t.tolist(), v.tolist(), dups, conflicts))
    assert all(r == results[0] for r in results)
    assert results[0] == ([1, 2, 3, 4], [10.0, 20.0, 35.0, 40.0], 2, 1)


def _random_rank_parts(rng: np.random.Generator, rank: int) -> dict[str, list]:
    """One rank's field reads, shaped like the odd cases a TSDB gives: usually one read per
    field on one scrape's timestamps; sometimes a field on other timestamps, two reads (two
    endpoints or chunks), a read out of order, a repeated timestamp."""
    n = int(rng.integers(1, 12))
    base = np.cumsum(rng.integers(1, 4, n)).astype(np.int64) * 1000 + rank
    out: dict[str, list] = {}
    for f in ("allocated", "device_total", "device_used", "reserved"):
        t = base.copy()
        kind = rng.integers(0, 8)
        if kind == 1:
            t = t[: max(1, n - 1)]  # a missing sample
        elif kind == 2:
            t = t + 1  # scraped at another moment
        elif kind == 3 and n > 1:
            t = t[::-1].copy()  # out of order
        elif kind == 4 and n > 1:
            t = np.r_[t[:1], t[:-1]]  # a repeated timestamp
        v = rng.integers(0, 5, t.size).astype(np.float64)
        parts = [(t, v, "a")]
        if kind == 5:  # a second endpoint
            parts.append((t.copy(), v + rng.integers(0, 2, t.size), "b"))
        out[f] = parts
    return out


def test_merged_ranks_are_the_same_as_one_rank_at_a_time() -> None:
    """The all-ranks-at-once path for the usual read gives what merging each rank alone
    gives (timestamps, values, NaN padding, counted duplicates and conflicts)."""
    from stormotel.analyzers.sources.prometheus.samples import merge_samples
    from stormotel.analyzers.timeline import TimelineBuilder

    rng = np.random.default_rng(7)
    samples = {}
    for rank in range(300):
        for f, parts in _random_rank_parts(rng, rank).items():
            samples[(rank, f)] = parts
    batch, alone = TimelineBuilder(), TimelineBuilder()
    conflicts_batch = merge_samples(dict(samples), batch)
    conflicts_alone = sum(merge_samples({k: v for k, v in samples.items() if k[0] == r}, alone)
                          for r in range(300))
    assert conflicts_batch == conflicts_alone > 0
    a, b = batch.build(now_ns=10**18), alone.build(now_ns=10**18)
    assert a.skipped == b.skipped and a.skipped["duplicate_sample"] > 0
    for r in range(300):
        sa, sb = a.ranks[r], b.ranks[r]
        assert np.array_equal(sa.t_ns, sb.t_ns)
        for f in sa.values:
            assert np.array_equal(sa.values[f], sb.values[f], equal_nan=True), (r, f)


def test_step_markers_of_many_ranks_are_each_ranks_own() -> None:
    """Steps built for every rank of a read at once equal the rank-by-rank markers: steps
    that repeat, go back (a restart), stay, and step numbers beyond int64."""
    from stormotel.analyzers.sources.prometheus.markers import (
        StepNames,
        _step_markers,
        markers_from_series,
    )

    rng = np.random.default_rng(3)
    series = {}
    for rank in range(200):
        n = int(rng.integers(1, 30))
        t = np.cumsum(rng.integers(1, 5, n)).astype(np.int64) * 10**9
        v = np.cumsum(rng.integers(0, 3, n)).astype(np.float64)
        if rank % 7 == 0:
            v[n // 2:] -= 5  # a restart: the step goes back
        if rank % 11 == 0:
            v[-1] = np.nan  # not a number: dropped
        series[("step", rank)] = [(t, v)]
    many = markers_from_series(series, StepNames())
    one_names = StepNames()
    for (_, rank), [(t, v)] in series.items():
        ok = np.isfinite(v)
        if not ok.any():
            assert rank not in many
            continue
        want = _step_markers(t[ok], v[ok], one_names)
        got = many[rank]
        assert got.start_ns.tolist() == want.start_ns.tolist()
        assert got.end_ns.tolist() == want.end_ns.tolist()
        assert got.name.tolist() == want.name.tolist()
        assert got.kind.tolist() == want.kind.tolist()
        assert got.attrs == want.attrs
    huge = {("step", 0): [(np.array([1, 2], np.int64), np.array([1.0, 2.0]))],
            ("step", 1): [(np.array([1, 2], np.int64), np.array([2.0**70, 2.0**70]))]}
    got = markers_from_series(huge, StepNames())
    assert got[1].name.tolist() == [f"step {int(2.0**70)}"] and got[0].name.tolist() == [
        "step 1", "step 2"]


def test_an_ha_pair_scraping_a_swing_at_other_phases_is_one_replica_not_a_zigzag() -> None:
    """Two servers scraping one rank at 15 s and 10 s, each at a fixed phase of a 2 GiB swing
    within a training step (the session-17 busy run: 2.58 GiB on one, 4.58 GiB on the other):
    interleaved, the series zigzagged by 2 GiB and its start was named a first cause at high.
    Merged as replicas: the read with the most samples, in any order; the other's samples only
    in that one's hole."""
    gib = float(1 << 30)
    a_t = np.arange(5_200, 125_000, 15_000, dtype=np.int64) * 1_000_000
    b_t = np.arange(5_500, 125_000, 10_000, dtype=np.int64) * 1_000_000
    a = (a_t, np.full(a_t.size, 2.58 * gib))
    b = (b_t, np.full(b_t.size, 4.58 * gib))
    for parts in ([a, b], [b, a]):
        t, v, _, _, _ = merge_parts(parts)
        assert t.tolist() == b_t.tolist() and (v == 4.58 * gib).all()
    # a hole of three scrapes in the fuller read is filled from the other, nothing else
    hole = (b_t < 40_000 * 1_000_000) | (b_t > 70_000 * 1_000_000)
    for parts in ([a, (b_t[hole], b[1][hole])], [(b_t[hole], b[1][hole]), a]):
        t, v, _, _, got = merge_parts(parts)
        filled = sorted(set(t.tolist()) - set(b_t.tolist()))
        assert filled == [50_200 * 1_000_000, 65_200 * 1_000_000] == got.tolist()
        assert filled_runs(t, got) == [(50_200 * 1_000_000, 65_200 * 1_000_000)]
    # reads of other time ranges (chunks of one read) are kept whole
    t, _, _, _, filled = merge_parts([(b_t[:6], b[1][:6]), (b_t[6:], b[1][6:])])
    assert t.tolist() == b_t.tolist() and filled.size == 0  # one replica's own chunks


def test_an_ha_pair_read_in_time_chunks_is_merged_per_server_first() -> None:
    """The same pair (15 s at the low phase, 10 s at the high phase), each server's read cut
    into two time chunks (a window over 10,000 samples, or a read refused as too large and split
    in time). Part by part, the chunk with the most samples was the chosen replica and every
    other chunk of both servers filled around it: the second half zigzagged between the phases,
    unrecorded. Per server: B's chunks are one replica, A's only fill B's hole (recorded) —
    whatever order the parts arrive in; parts without their servers still interleave (the
    test can fail)."""
    gib = float(1 << 30)
    a_t = np.arange(5_200, 600_000, 15_000, dtype=np.int64) * 1_000_000
    b_t = np.arange(5_500, 600_000, 10_000, dtype=np.int64) * 1_000_000
    hole = (b_t < 400_000 * 1_000_000) | (b_t > 430_000 * 1_000_000)
    b_t = b_t[hole]
    cut = 350_000 * 1_000_000  # the chunk edge: B's first chunk is its bigger part
    parts = []
    for name, t, level in (("a", a_t, 2.58 * gib), ("b", b_t, 4.58 * gib)):
        for inside in (t <= cut, t > cut):
            parts.append((t[inside], np.full(int(inside.sum()), level), name))
    want_fill = [t for t in a_t.tolist() if 400_000 * 1_000_000 < t < 430_000 * 1_000_000]
    results = set()
    for order in itertools.permutations(parts):
        t, v, _, _, filled = merge_parts([(p[0], p[1]) for p in order], [p[2] for p in order])
        high = v == 4.58 * gib
        assert t[high].tolist() == b_t.tolist() and t[~high].tolist() == want_fill
        assert filled.tolist() == want_fill
        results.add((t.tobytes(), v.tobytes(), filled.tobytes()))
    assert len(results) == 1
    t, v, _, _, _ = merge_parts([(p[0], p[1]) for p in parts])  # servers unknown
    late = t > cut
    assert (v[late] == 2.58 * gib).sum() > len(want_fill)  # A's second chunk interleaved


GIB = float(1 << 30)
S = 1_000_000_000


def _ha_rank(rank: int, rise_s: float, hole: tuple[float, float] | None, *,
             primary_low: bool) -> tuple[RankData, list[tuple[int, int, int]]]:
    """One rank read from an HA pair: replica A scrapes a 2 GiB swing at its low phase (2.58
    GiB), B at its high phase (4.58 GiB), one every 15 s and the other every 10 s (the one
    with more samples is taken); device memory rises 1 GiB at ``rise_s``; ``hole``: the taken
    replica's missed scrapes (s), filled from the other. Returns the merged rank and its filled
    runs as the TSDB source records them."""
    lo_every, hi_every = (10.0, 15.0) if primary_low else (15.0, 10.0)
    a_t = (np.arange(5.2 + rank, 600, lo_every) * S).astype(np.int64)
    b_t = (np.arange(5.5 + rank, 600, hi_every) * S).astype(np.int64)
    a = (a_t, 2.58 * GIB + np.where(a_t >= rise_s * S, GIB, 0.0))
    b = (b_t, 4.58 * GIB + np.where(b_t >= rise_s * S, GIB, 0.0))
    if hole is not None:
        t, v = a if primary_low else b
        keep = (t < hole[0] * S) | (t > hole[1] * S)
        a, b = ((t[keep], v[keep]), b) if primary_low else (a, (t[keep], v[keep]))
    t, v, _, _, filled = merge_parts([a, b])
    runs = [(rank, x, y) for x, y in filled_runs(t, filled)]
    return RankData(rank, t, 0.7 * v, v, v, np.full(t.size, 80 * GIB)), runs


def _ha_job(hole_rank: int | None, hole: tuple[float, float] | None, *, primary_low: bool,
            record: bool = True) -> Timeline:
    """Four ranks: rank 0 rises at 300 s, the others 20 s later (10 s and 15 s scrapes)."""
    data, runs = [], []
    for r in range(4):
        d, mine = _ha_rank(r, 300.0 if r == 0 else 320.0, hole if r == hole_rank else None,
                           primary_low=primary_low)
        data.append(d)
        runs += mine
    tl = to_timeline(data)
    if record:
        tl.meta[META_REPLICA_FILLS] = runs
    return tl


def _sure(tl: Timeline) -> list[tuple[str, int]]:
    cr = analyze(tl).cross_rank
    named = [("suspect", s.rank) for s in cr.first_cause_suspects
             if s.confidence in ("high", "medium")]
    return named + [(i["kind"], i["leader"]) for i in cr.incidents
                    if i["leader"] is not None and i["confidence"] in ("high", "medium")]


def test_a_filled_sample_at_the_other_phase_does_not_make_a_rank_lead() -> None:
    """An HA pair's hole filled from the other replica puts that replica's phase of a swing
    into the series: a high-phase sample in a low-phase series is a 2 GiB spike, a low-phase
    sample in a high-phase series a dip the next sample rises 2 GiB from. Before the filled
    runs were recorded, rank 2's hole just before rank 0's rise named rank 2 the leader at
    high, and a hole anywhere named it a single_rank first cause at high. Now its rise mixes
    replicas: no rank above low in that incident (rank 0 may still be named elsewhere); on
    schedule rank 0 is named at high; the same input without the record still misleads (the
    test can fail)."""
    for primary_low, before_rise in ((False, (250.0, 280.0)), (True, (290.0, 305.0))):
        assert _sure(_ha_job(None, None, primary_low=primary_low)) == [
            ("suspect", 0), ("leader", 0)]
        for hole in (before_rise, (200.0, 235.0)):
            before = _sure(_ha_job(2, hole, primary_low=primary_low, record=False))
            assert any(r == 2 for _, r in before), (primary_low, hole, before)
            after = _sure(_ha_job(2, hole, primary_low=primary_low))
            assert all(r == 0 for _, r in after), (primary_low, hole, after)
    cr = analyze(_ha_job(2, (200.0, 235.0), primary_low=True)).cross_rank
    notes = [n for i in cr.incidents for n in i["notes"] if "replica" in n]
    assert notes and "ranks [2]" in notes[0] and "phase" in notes[0], cr.incidents
