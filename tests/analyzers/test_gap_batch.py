"""The ranks gap analysis skips a batch at a time (flat gap, never fragmented) are exactly those
the rank-by-rank checks find flat and unfragmentable, and gap analysis gives the same findings,
notes and spike episodes with and without the batches: random ranks with flat and moving gaps,
fragmentation by either measure, missing samples, a partial inactive-split counter, zero
reservations, values near the float range's end and a flat gap whose mean is not its value."""

from __future__ import annotations

import numpy as np
import pytest
from stormotel.analyzers.algorithms import rank_rows
from stormotel.analyzers.algorithms.gap import (
    _flat,
    _gap,
    _none_fragmented,
    fragmentation_finding,
    gap_analysis,
)
from stormotel.analyzers.algorithms.gap_batch import quiet_ranks
from stormotel.analyzers.algorithms.scratch import Scratch
from stormotel.analyzers.algorithms.settings import Settings
from stormotel.analyzers.timeline import FIELDS, RankIdentity, RankSeries, Timeline

GIB = 2.0**30
T0 = 1_700_000_000_000_000_000


def _series(rng: np.random.Generator, r: int, n: int) -> RankSeries:
    kind = r % 11
    res = np.full(n, 40 * GIB)
    v = {f: np.full(n, np.nan) for f in FIELDS}
    v["reserved"] = res
    v["allocated"] = res - rng.choice([1, 2]) * GIB
    v["device_used"] = res + GIB
    if kind == 1:
        v["device_used"] = v["device_used"] + rng.normal(0, 2**20, n)  # the gap moves
    elif kind == 2:
        v["allocated"] = res * 0.3  # fragmented (reserved - allocated)
    elif kind == 3:
        v["inactive_split"] = np.full(n, 0.6 * 40 * GIB)  # fragmented (inactive split)
    elif kind == 4:
        v["inactive_split"] = np.full(n, 0.01 * GIB)  # counter reported, nothing idle
    elif kind == 5:
        v["inactive_split"][: n // 2] = 0.01 * GIB  # counter reported half the time
    elif kind == 6:
        v["device_used"][int(rng.integers(0, n))] = np.nan  # a missing sample
    elif kind == 7:
        v["reserved"] = np.zeros(n)  # nothing reserved (a ratio with no denominator)
        v["device_used"] = np.full(n, GIB)
    elif kind == 8:
        v = {f: a * 1e291 for f, a in v.items()}  # near the float range's end
    elif kind == 9:
        v["allocated"] = np.full(n, np.nan)  # neither idle measure
    elif kind == 10:  # every gap sample the same, their mean not (1.1 + 1.1 + ... rounds)
        v["reserved"], v["allocated"] = np.full(n, 0.2), np.full(n, 0.1)
        v["device_used"] = np.full(n, 1.3)
    t = T0 + np.arange(n, dtype=np.int64) * 15 * 10**9
    return RankSeries(RankIdentity(r), t, v)


def _timeline(seed: int) -> Timeline:
    rng = np.random.default_rng(seed)
    ranks = {r: _series(rng, r, int(rng.choice([5, 12, 12, 240, 241]))) for r in range(500)}
    return Timeline(ranks)


@pytest.mark.parametrize("settings", [Settings(), Settings(frag_ratio=0.0),
                                      Settings(spike_min_bytes=0.0), Settings(min_samples=240)])
def test_quiet_ranks_are_those_each_ranks_own_checks_find(settings: Settings) -> None:
    tl = _timeline(1)
    quiet = quiet_ranks(tl, tl.rank_ids, settings)
    work = Scratch()
    for r in tl.rank_ids:
        s = tl.ranks[r]
        tg = _gap(s, work)
        flat = tg is not None and tg[0].shape[0] >= settings.min_samples and \
            _flat(tg[1], settings)
        if r in quiet:
            assert flat and fragmentation_finding(s, settings, work) is None, r
        elif flat and len(s) >= 12 and r % 11 in (0, 4, 7):  # all finite, ordinary values
            res = s.values["reserved"]
            idle = s.values["inactive_split"] if r % 11 == 4 else res - s.values["allocated"]
            assert not (float(res.min()) > 0 and _none_fragmented(res, idle, settings)), r
    if settings.spike_min_bytes > 0:
        assert len(quiet) > 20
    else:
        assert not quiet


def test_gap_analysis_is_the_same_with_and_without_batches(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    tl = _timeline(2)
    batched = gap_analysis(tl, Settings())
    monkeypatch.setattr(rank_rows, "MIN_BATCH", 10**9)
    alone = gap_analysis(tl, Settings())
    assert repr(batched.findings) == repr(alone.findings)
    assert batched.notes == alone.notes
    assert list(batched.episodes) == list(alone.episodes)
    assert all(repr(batched.episodes[r]) == repr(alone.episodes[r]) for r in alone.episodes)
    kinds = {f.classification for f in batched.findings}
    assert "fragmentation" in kinds
