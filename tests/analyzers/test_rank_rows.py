"""The per-rank facts filled in a batch at a time (median sampling interval, marker kinds) are
those each rank computes for itself, value and type: ranks of odd and even sample counts,
jittered clocks, equal intervals, steps only, steps with other kinds, no markers; and the
ranks in batches of any size."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from stormotel.analyzers.algorithms import rank_rows
from stormotel.analyzers.algorithms.estimate_ratio import estimate_ratios
from stormotel.analyzers.algorithms.rank_rows import batches, prime_rank_facts, ranks_reporting
from stormotel.analyzers.timeline import (
    FIELDS,
    KIND_COLLECTIVE,
    KIND_STEP,
    Markers,
    RankIdentity,
    RankSeries,
    Timeline,
)

T0 = 1_700_000_000_000_000_000


def _markers(rng: np.random.Generator, n: int, kind: int) -> Markers:
    if kind == 0:
        return Markers.empty()
    kinds = [KIND_STEP] * n
    if kind == 2:
        kinds[int(rng.integers(0, n))] = KIND_COLLECTIVE
    start = T0 + np.arange(n, dtype=np.int64) * 10**9
    return Markers(start, start + 10**8, np.array(["s"] * n, object), np.array(kinds, object))


def _field(rng: np.random.Generator, n: int) -> np.ndarray:
    """Reported, never reported, reported after a missing first sample or only at the end."""
    a = np.ones(n)
    how = int(rng.integers(0, 4))
    if how == 1:
        a[:] = np.nan
    elif how == 2:
        a[0] = np.nan
    elif how == 3:
        a[:-1] = np.inf
    return a


def _timeline(seed: int) -> Timeline:
    rng = np.random.default_rng(seed)
    ranks = {}
    for r in range(400):
        n = int(rng.choice([1, 2, 3, 4, 239, 240, 241]))
        step = 15 * 10**9 if r % 3 else 10**8
        jitter = rng.integers(-step // 7, step // 7, n) if r % 4 else np.zeros(n, np.int64)
        t = T0 + np.arange(n, dtype=np.int64) * step + jitter
        t = np.unique(t)
        values = {f: _field(rng, t.shape[0]) for f in FIELDS}
        ranks[r] = RankSeries(RankIdentity(r), t, values,
                              _markers(rng, int(rng.integers(1, 50)), r % 3))
    return Timeline(ranks)


@pytest.mark.parametrize("elements", [1 << 20, 700])
def test_primed_facts_are_each_ranks_own(monkeypatch: pytest.MonkeyPatch, elements: int) -> None:
    monkeypatch.setattr(rank_rows, "BATCH_ELEMENTS", elements)
    tl = _timeline(4)
    prime_rank_facts(tl)
    primed = [r for r, s in tl.ranks.items() if "_median_interval" in s.__dict__]
    assert len(primed) > 300
    assert sum("kinds" in s.markers.__dict__ for s in tl.ranks.values()) > 100
    for r, s in tl.ranks.items():
        own = replace(s, markers=replace(s.markers))  # no cache: computes its own
        got, want = s.median_interval_ns(), own.median_interval_ns()
        assert (type(got), got) == (type(want), want), r
        assert s.markers.kinds == own.markers.kinds, r
        assert type(s.markers.kinds) is frozenset


def test_batches_cover_each_length_once_within_the_bounds(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setattr(rank_rows, "BATCH_ELEMENTS", 1000)
    tl = _timeline(5)
    seen: list[int] = []
    for n, keys in batches(tl, tl.rank_ids, min_len=2, max_len=240):
        assert all(len(tl.ranks[r]) == n for r in keys) and 2 <= n <= 240
        assert len(keys) <= max(rank_rows.MIN_BATCH, 1000 // n)
        seen.extend(keys)
    assert len(seen) == len(set(seen)) > 100
    lengths = {len(tl.ranks[r]) for r in seen}
    assert 241 not in lengths and 1 not in lengths


def test_estimate_ratios_are_the_same_with_and_without_batches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rank's actual peak (allocated, else reserved, else device used) and when: ties
    at the top (the first counts), a missing sample, no allocated bytes at all."""
    rng = np.random.default_rng(6)
    ranks = {}
    for r in range(300):
        n = int(rng.choice([3, 60, 61]))
        t = T0 + np.arange(n, dtype=np.int64) * 10**9
        values = {f: np.round(rng.uniform(0, 4, n)) * 2.0**30 for f in FIELDS}
        if r % 5 == 1:
            values["allocated"][int(rng.integers(0, n))] = np.nan
        elif r % 5 == 2:
            values["allocated"][:] = np.nan
        ranks[r] = RankSeries(RankIdentity(r), t, values)
    tl = Timeline(ranks, meta={"estimate_bytes": 2.0**31})
    batched = estimate_ratios(tl)
    monkeypatch.setattr(rank_rows, "MIN_BATCH", 10**9)
    assert repr(estimate_ratios(tl)) == repr(batched)
    assert {r.field for r in batched[0]} == {"allocated", "reserved"}


def test_ranks_reporting_a_field_are_those_that_have_it() -> None:
    tl = _timeline(7)
    del tl.ranks[3].values["reserved"]  # a rank without the field at all
    for name in FIELDS:
        want = [r for r in tl.rank_ids if tl.ranks[r].has(name)]
        assert ranks_reporting(tl, tl.rank_ids, name) == want
        assert 0 < len(want) < len(tl.rank_ids)
