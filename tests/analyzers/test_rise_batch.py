"""First cause's rises found for many ranks at once (ranks of one length stacked, 10,000 ranks
from a TSDB) are the rank-by-rank rises, field for field and type for type: random ranks with
warm-ups, stepped rises, dips, ties at the baseline, zeros, missing samples, holes, the tracker's
edge timestamps and step markers, under several thresholds; and the whole report through
``analyze`` with and without batches."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from stormotel.analyzers.algorithms import rank_rows, rise_batch
from stormotel.analyzers.algorithms.first_cause import MAX_RISES, rises_of
from stormotel.analyzers.algorithms.rise_batch import rises_of_ranks
from stormotel.analyzers.algorithms.rises import step_at, steps_at
from stormotel.analyzers.algorithms.scratch import Scratch
from stormotel.analyzers.algorithms.settings import Settings
from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.timeline import (
    EDGE_RESOLUTION_ATTR,
    FIELDS,
    KIND_COLLECTIVE,
    KIND_FIRST_RISE,
    KIND_STEP,
    Markers,
    RankIdentity,
    RankSeries,
    Timeline,
)

from stormotel import schema

MIB = 2.0**20
GIB = 2.0**30
T0 = 1_700_000_000_000_000_000
S = 1_000_000_000


def _values(rng: np.random.Generator, n: int, shape: int) -> np.ndarray:
    """Device-used bytes of one rank: flat, a warm-up ramp, steps, dips, plateaus, zeros."""
    base = 4 * GIB + np.round(rng.normal(0, 4 * MIB, n) / MIB) * MIB  # repeated values: ties
    if shape == 0:
        return base
    if shape == 1:  # a warm-up ramp from the first sample, then a spike later on
        base[: n // 8] *= np.linspace(0.1, 1, n // 8)
        base[n // 2:] += rng.uniform(0.2, 2) * GIB
    elif shape == 2:  # more teeth (up, flat, back down) than the rises examined per rank
        base += (np.floor(np.arange(n) * 2 * (MAX_RISES + 4) / n) % 2) * GIB
    elif shape == 3:  # a rise, a dip back to the baseline, a rise again
        base[n // 4: n // 2] += GIB
        base[n // 2 + 1:] += rng.choice([0.5, 1.5]) * GIB
    elif shape == 4:  # zeros before the job allocates (a zero in the baseline's level)
        base[: int(rng.integers(1, 6))] = 0.0
        base[n // 3:] += GIB
    elif shape == 5:  # a missing sample: its finite samples are one fewer
        base[int(rng.integers(0, n))] = np.nan
        base[n // 2:] += GIB
    else:  # a rise in the very last samples (no settling, the suffix ends there)
        base[-int(rng.integers(1, 3)):] += 3 * GIB
    return base


def _markers(rng: np.random.Generator, t: np.ndarray, kind: int) -> Markers:
    """Steps (sometimes with a collective among them) and the tracker's first-rise edges, some
    inside a sample's hole, some with a stated resolution."""
    if kind == 0:
        return Markers.empty()
    starts, ends, names, kinds, attrs = [], [], [], [], []
    for k in range(0, t.shape[0], 10):
        starts.append(int(t[k]))
        ends.append(int(t[min(k + 10, t.shape[0] - 1)]) - 1)
        names.append("train_step")
        kinds.append(KIND_STEP)
        attrs.append({schema.SPAN_ATTR_STEP: k // 10} if k % 30 else {})
    if kind >= 2:
        for k in rng.choice(t.shape[0] - 1, min(6, t.shape[0] - 1), replace=False).tolist():
            at = int(t[k + 1]) - int(rng.integers(0, 2 * S))
            starts.append(at)
            ends.append(at)
            names.append("first_rise")
            kinds.append(KIND_FIRST_RISE)
            attrs.append({EDGE_RESOLUTION_ATTR: int(rng.choice([0, S // 10]))})
    if kind == 3:
        starts.append(int(t[0]))
        ends.append(int(t[-1]))
        names.append("allreduce")
        kinds.append(KIND_COLLECTIVE)
        attrs.append({})
    return Markers(np.array(starts, np.int64), np.array(ends, np.int64),
                   np.array(names, object), np.array(kinds, object), tuple(attrs))


def _timeline(seed: int, ranks: int) -> Timeline:
    """Ranks of a few lengths (some lengths too rare to batch), jittered clocks with holes."""
    rng = np.random.default_rng(seed)
    out = {}
    for r in range(ranks):
        n = int(rng.choice([2, 3, 40, 40, 40, 240, 240, 240, 241, 5000]))
        gaps = rng.integers(14, 16, n) * S + rng.integers(-S // 10, S // 10, n)
        gaps[rng.random(n) < 0.05] *= 4  # missed scrapes: holes
        t = T0 + int(rng.integers(0, 60)) * S + np.cumsum(gaps).astype(np.int64)
        values = {f: np.full(n, np.nan) for f in FIELDS}
        values["device_used"] = _values(rng, n, int(rng.integers(0, 7)))
        out[r] = RankSeries(RankIdentity(r, job_id="j", world_size=ranks), t, values,
                            _markers(rng, t, int(rng.integers(0, 4))))
    return Timeline(out, job_id="j", world_size=ranks)


def _typed(rises: list[Any]) -> str:
    """The rises with every field's type: an int threshold is not a float one in the JSON."""
    return repr([[(type(v).__name__, v) for v in vars(fr).values()] for fr in rises])


SETTINGS = [Settings(), Settings(rise_fraction=0.02), Settings(rise_floor_bytes=64 * 2**20),
            Settings(rise_fraction=0.0, rise_floor_bytes=0.0), Settings(rise_window_s=120.0)]


@pytest.mark.parametrize("settings", SETTINGS, ids=["medium", "low-fraction", "int-floor",
                                                    "zero-threshold", "trailing-window"])
def test_batched_rises_equal_each_ranks_own(settings: Settings) -> None:
    tl = _timeline(5, 600)
    got = rises_of_ranks(tl, tl.rank_ids, settings, Scratch())
    assert list(got) == tl.rank_ids
    for r in tl.rank_ids:
        want = rises_of(tl.ranks[r], settings, Scratch())
        assert _typed(got[r]) == _typed(want), r
    found = [fr for rs in got.values() for fr in rs]
    assert max(len(rs) for rs in got.values()) > 1
    if settings.rise_floor_bytes:  # (a zero threshold rises at every suffix's first sample)
        assert any(fr.from_edge_event for fr in found)
        assert any(fr.step is not None for fr in found)
        assert any(len(rs) == MAX_RISES for rs in got.values())


def test_batches_are_taken_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small batches (many per length) give the same rises as one batch, and the ranks that
    were batched are most of them (the check above is not all the rank-by-rank path)."""
    tl = _timeline(9, 400)
    calls: list[int] = []
    real = rise_batch._rises_of_batch

    def spy(timeline: Timeline, keys: list[int], n: int, settings: Settings) -> dict:
        calls.append(len(keys))
        return real(timeline, keys, n, settings)

    monkeypatch.setattr(rise_batch, "_rises_of_batch", spy)
    whole = rises_of_ranks(tl, tl.rank_ids, Settings(), Scratch())
    assert sum(calls) > 300
    monkeypatch.setattr(rank_rows, "BATCH_ELEMENTS", 1000)
    calls.clear()
    small = rises_of_ranks(tl, tl.rank_ids, Settings(), Scratch())
    assert len(calls) > 20
    assert _typed([fr for r in tl.rank_ids for fr in small[r]]) == \
        _typed([fr for r in tl.rank_ids for fr in whole[r]])


def test_the_report_is_the_same_with_and_without_batches(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    tl = _timeline(3, 300)
    batched = analyze(tl).to_json()
    monkeypatch.setattr(rank_rows, "MIN_BATCH", 10**9)
    alone = analyze(tl).to_json()

    def masked(text: str) -> str:
        return re.sub(r'"analysis_seconds": [0-9.e-]+', "", text)

    assert masked(batched) == masked(alone)
    assert '"first_rise_by_rank"' in batched


def test_steps_of_many_ranks_at_once_are_each_ranks_own() -> None:
    """Overlapping steps (the last covering one counts), step numbers as text or nonsense,
    fewer attrs than markers, times before, between and after the steps, mixed kinds."""
    rng = np.random.default_rng(8)
    series, times = [], []
    for r in range(500):
        n = int(rng.integers(0, 30))
        start = np.sort(T0 + rng.integers(0, 100, n) * S)
        end = start + rng.integers(0, 5, n) * S
        numbers: list[Any] = [int(k) for k in rng.integers(0, 1000, n)]
        for k in rng.choice(n, min(n, 3), replace=False).tolist():
            numbers[k] = rng.choice(["17", "x", None, 3.0])
        attrs = tuple({schema.SPAN_ATTR_STEP: v} if v is not None else {} for v in numbers)
        kinds = [KIND_STEP] * n
        if r % 7 == 0 and n:
            kinds[0] = KIND_COLLECTIVE
        m = Markers(start, end, np.array(["s"] * n, object), np.array(kinds, object),
                    attrs[: n - (r % 5 == 0)])
        series.append(RankSeries(RankIdentity(r), np.empty(0, np.int64), {}, m))
        times.append(T0 + int(rng.integers(-5, 110)) * S)
    got = steps_at(series, times)
    want = [step_at(s, t) for s, t in zip(series, times, strict=True)]
    assert got == want
    assert sum(v is not None for v in got) > 100 and None in got
