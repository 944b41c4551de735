"""Ranks of one length as the rows of 2-D arrays, and the per-rank facts every algorithm asks
for, found for all of them at once.

A TSDB read of 10,000 ranks gives each rank a few hundred samples and a few hundred step
markers. Each algorithm asks each rank the same questions — its median sampling interval, which
marker kinds it has — and each answer, cached on the rank (``RankSeries.median_interval_ns``,
``Markers.kinds``), costs a few numpy calls whose overhead is most of the cost. Here the ranks
of one length are stacked and the answers computed together, with the same arithmetic on the
same elements, then stored where the rank's own cache keeps them, so every later question is
answered from it as before (tests/analyzers/test_rank_rows.py checks the values are those the
rank computes itself).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
from stormotel.analyzers.timeline import KIND_STEP, RankSeries, Timeline

#: Elements (ranks x samples) of one batch's stacked arrays (8 MiB each).
BATCH_ELEMENTS = 1 << 20
#: Fewer ranks than this of one length are left to each rank's own computation.
MIN_BATCH = 4
#: The kinds of a rank whose markers are all steps (the only set a TSDB read gives).
STEPS_ONLY = frozenset((KIND_STEP,))


def stack_rows(arrays: list[np.ndarray], n: int) -> np.ndarray:
    """Arrays of ``n`` values each as the rows of one 2-D array: one concatenation (np.stack
    costs five times as much per array, and batches are of hundreds of short arrays)."""
    return np.concatenate(arrays).reshape(len(arrays), n)


def batches(timeline: Timeline, ranks: Iterable[int], min_len: int = 1,
            max_len: int | None = None) -> Iterator[tuple[int, list[int]]]:
    """(length, ranks) for the ``ranks`` of each length in [min_len, max_len] shared by at
    least :data:`MIN_BATCH` ranks, at most :data:`BATCH_ELEMENTS` samples a batch."""
    by_len: dict[int, list[int]] = {}
    for r in ranks:
        n = len(timeline.ranks[r])
        if n >= min_len and (max_len is None or n <= max_len):
            by_len.setdefault(n, []).append(r)
    for n, group in by_len.items():
        if len(group) < MIN_BATCH:
            continue
        per_batch = max(MIN_BATCH, BATCH_ELEMENTS // n)
        for lo in range(0, len(group), per_batch):
            yield n, group[lo:lo + per_batch]


def ranks_reporting(timeline: Timeline, ranks: list[int], name: str) -> list[int]:
    """``[r for r in ranks if timeline.ranks[r].has(name)]``: the ranks with a finite value of
    field ``name``, one check per batch (``has`` would find every field of every rank, when
    most analyses ask for one field of all ranks and the others of a few)."""
    found: set[int] = set()
    asked: set[int] = set()
    have = [r for r in ranks if name in timeline.ranks[r].values]
    for n, keys in batches(timeline, have):
        x = stack_rows([timeline.ranks[r].values[name] for r in keys], n)
        asked.update(keys)
        found.update(r for r, ok in zip(keys, np.isfinite(x).any(axis=1).tolist(), strict=True)
                     if ok)
    return [r for r in ranks if (r in found if r in asked else timeline.ranks[r].has(name))]


def prime_rank_facts(timeline: Timeline) -> None:
    """Fill each rank's cached median sampling interval and marker kinds, a batch at a time
    (ranks left out compute theirs when first asked, as before)."""
    for n, keys in batches(timeline, timeline.ranks, min_len=2):
        series = [timeline.ranks[r] for r in keys]
        for s, iv in zip(series, _median_intervals(series, n), strict=True):
            s.__dict__.setdefault("_median_interval", iv)
    _prime_kinds(list(timeline.ranks.values()))


def _median_intervals(series: list[RankSeries], n: int) -> list[int]:
    """``RankSeries._median_interval`` of each of ``series`` (``n`` >= 2 samples each): the
    middle of the timestamps' differences (one selection per row), or the mean of the two
    middle ones as that property takes it."""
    d = np.diff(stack_rows([s.t_ns for s in series], n), axis=1)
    mid = d.shape[1] // 2
    d.partition(mid, axis=1)
    upper = d[:, mid].astype(np.float64)
    if d.shape[1] % 2:
        return upper.astype(np.int64).tolist()
    lower = d[:, :mid].max(axis=1).astype(np.float64)
    return ((lower + (0.0 + upper)) / 2).astype(np.int64).tolist()


def _prime_kinds(series: list[RankSeries]) -> None:
    """``Markers.kinds`` of every rank whose markers are all steps, found by one comparison
    over all ranks' kinds joined (the others: their own set, when first asked)."""
    marked = [s.markers for s in series if len(s.markers) and "kinds" not in s.markers.__dict__]
    if not marked:
        return
    counts = np.fromiter((len(m) for m in marked), dtype=np.int64, count=len(marked))
    starts = np.zeros(len(marked), dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    steps = np.concatenate([m.kind for m in marked]) == KIND_STEP
    all_steps = np.logical_and.reduceat(steps, starts)
    for m, only in zip(marked, all_steps.tolist(), strict=True):
        if only:
            m.__dict__["kinds"] = STEPS_ONLY
