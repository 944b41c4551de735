"""Every rank's qualifying rises at once, for ranks sampled the same number of times.

A TSDB read of 10,000 ranks gives each rank a few hundred samples: there, finding a rank's rises
one by one (:func:`~stormotel.analyzers.algorithms.rises.rises_of`) is mostly Python
overhead per rank — a third of the whole analysis. Ranks of one length are stacked into one 2-D
array and each round of rises is found for all of them together: a running minimum along the
rows (the samples before a rank's previous rise set to +inf, so each row's minimum starts where
that rank's search does), the first sample a threshold above it, the baseline sample, the level
around it (a median of up to five samples), where the rise settles and the hole before it.

The answer is the rank-by-rank one, value for value (tests/analyzers/test_rise_batch.py): the
same float64 operations on the same elements in the same order. What the arrays cannot say
stays rank by rank: the tracker's edge timestamps and the training step (markers), a rank with
a missing sample (its finite samples are a different length), a trailing baseline window
(``rise_window_s``), long ranks (blocks of the running minimum stop at an early rise there) and
lengths too rare to batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from stormotel.analyzers.algorithms.rank_rows import batches, stack_rows
from stormotel.analyzers.algorithms.rises import (
    FIELD,
    KIND_FIRST_RISE,
    MAX_RISES,
    RISE_BLOCK,
    FirstRise,
    rises_of,
    steps_at,
    timed_by_edge,
)
from stormotel.analyzers.algorithms.robust import median_of
from stormotel.analyzers.algorithms.scratch import Scratch
from stormotel.analyzers.algorithms.settings import Settings
from stormotel.analyzers.timeline import RankSeries, Timeline

#: Ranks this long or shorter are batched (longer ones: rank by rank, where the per-rank cost
#: is the arithmetic, and the block-wise running minimum stops at an early rise).
BATCH_MAX_SAMPLES = RISE_BLOCK
#: A rise's level is the median of the samples up to this many before its baseline.
LEVEL_SAMPLES = 5


def rises_of_ranks(timeline: Timeline, ranks: Iterable[int], settings: Settings,
                   work: Scratch) -> dict[int, list[FirstRise]]:
    """``{r: rises_of(timeline.ranks[r], settings, work) for r in ranks}``, in that order;
    ranks of one length up to :data:`BATCH_MAX_SAMPLES` a batch at a time."""
    order = list(ranks)
    done: dict[int, list[FirstRise]] = {}
    if settings.rise_window_s <= 0:
        have = [r for r in order if FIELD in timeline.ranks[r].values]
        for n, keys in batches(timeline, have, min_len=2, max_len=BATCH_MAX_SAMPLES):
            done.update(_rises_of_batch(timeline, keys, n, settings))
    return {r: done[r] if r in done else rises_of(timeline.ranks[r], settings, work)
            for r in order}


@dataclass
class _Batch:
    """Ranks of one length whose device-used samples are all finite, stacked (row = rank)."""

    keys: list[int]
    series: list[RankSeries]
    t: np.ndarray  # int64 (ranks, n)
    x: np.ndarray  # float64 (ranks, n)
    steps: np.ndarray  # x's differences along the rows (ranks, n - 1)
    peak: list[float]
    threshold: list[float]  # as _rise computes it: a float, or the floor itself
    thr: np.ndarray  # the thresholds as float64


def _rises_of_batch(timeline: Timeline, keys: list[int], n: int, settings: Settings
                    ) -> dict[int, list[FirstRise]]:
    """The rises of the ranks ``keys`` (one length), round after round; ranks with a missing
    sample are left out (their finite samples are another length: rank by rank)."""
    series = [timeline.ranks[r] for r in keys]
    x = stack_rows([s.values[FIELD] for s in series], n)
    ok = np.isfinite(x).all(axis=1)
    if not ok.all():
        rows = ok.nonzero()[0]
        x = x[rows]
        keys = [keys[k] for k in rows.tolist()]
        series = [series[k] for k in rows.tolist()]
    if not keys:
        return {}
    peak = x.max(axis=1).tolist()
    threshold = [max(settings.rise_fraction * p, settings.rise_floor_bytes) for p in peak]
    batch = _Batch(keys, series, stack_rows([s.t_ns for s in series], n), x, np.diff(x, axis=1),
                   peak, threshold, np.array(threshold, dtype=np.float64))
    out: dict[int, list[FirstRise]] = {r: [] for r in keys}
    rows = np.arange(len(keys))
    after = np.zeros(len(keys), dtype=np.int64)
    for _ in range(MAX_RISES):
        # The samples after the previous rise: a suffix (t is sorted), as _rise slices it.
        keep = (batch.t[rows] <= after[rows, None]).sum(axis=1)
        rows, found = _round(batch, rows, keep)
        for row, fr in zip(rows.tolist(), found, strict=True):
            out[keys[row]].append(fr)
            after[row] = max(fr.settled_ns, fr.t_ns, int(after[row]))
        if not rows.size:
            break
    return out


def _round(b: _Batch, rows: np.ndarray, keep: np.ndarray
           ) -> tuple[np.ndarray, list[FirstRise]]:
    """One rise for each of ``rows`` searched from its sample ``keep`` on: the rows that rose,
    and their rises."""
    n = b.x.shape[1]
    cols = np.arange(n)
    v = b.x[rows]  # a copy: the samples before ``keep`` are hidden from the minimum
    v[cols < keep[:, None]] = np.inf
    base = np.minimum.accumulate(v, axis=1)
    with np.errstate(invalid="ignore"):  # inf - inf before ``keep``: NaN, never a hit
        hit = np.subtract(v, base, out=v) >= b.thr[rows, None]
    hit &= (n - keep >= 2)[:, None]  # a suffix of fewer than two samples has no rise
    i = hit.argmax(axis=1)
    at = np.arange(rows.shape[0])
    rose = hit[at, i]
    rows, keep, i, base_i = rows[rose], keep[rose], i[rose], base[at[rose], i[rose]]
    if not rows.size:
        return rows, []
    x = b.x[rows]
    # The baseline sample: the last time the row stood at its baseline value before the hit.
    at_base = (x == base_i[:, None]) & (cols >= keep[:, None]) & (cols <= i[:, None])
    j = n - 1 - at_base[:, ::-1].argmax(axis=1)
    level = _levels(x, np.maximum(keep, j - (LEVEL_SAMPLES - 1)), j)
    # Where the rise levels off: the first step after the hit below a tenth of the threshold.
    slow = (b.steps[rows] < (0.1 * b.thr[rows])[:, None]) & (cols[:-1] >= i[:, None])
    d = slow.argmax(axis=1)
    t = b.t[rows]
    r = np.arange(rows.shape[0])
    settled = np.where(slow[r, d], t[r, d], t[:, -1])
    hole = np.where(i > keep, t[r, i] - t[r, np.maximum(i - 1, 0)], 0)
    nxt = np.where(i + 1 < n, t[r, np.minimum(i + 1, n - 1)], t[r, i] + hole)
    delta = x[r, i] - level
    timed = [_timed(b.series[row], *vals) for row, *vals in zip(
        rows.tolist(), t[r, i].tolist(), hole.tolist(), nxt.tolist(), strict=True)]
    series = [b.series[row] for row in rows.tolist()]
    steps = steps_at(series, [rise_t for rise_t, _, _ in timed])
    found = [FirstRise(s.rank, rise_t, dlt, b.threshold[row], base_t, lvl, b.peak[row], st,
                       hl, edge, step=step)
             for s, row, (rise_t, hl, edge), dlt, base_t, lvl, st, step in zip(
                 series, rows.tolist(), timed, delta.tolist(), t[r, j].tolist(),
                 level.tolist(), settled.tolist(), steps, strict=True)]
    return rows, found


def _timed(series: RankSeries, t_i: int, hole: int, next_t: int) -> tuple[int, int, bool]:
    """(rise time, hole, timed by an edge?) of one rank's rise, timed by the tracker's edge
    when one falls in the hole before it (as _rise does)."""
    m = series.markers
    if hole and len(m) and KIND_FIRST_RISE in m.kinds:
        return timed_by_edge(m, t_i, hole, next_t, series.median_interval_ns() or 0)
    return t_i, hole, False


def _levels(x: np.ndarray, lo: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Per row, ``median_of(x[row, lo:j + 1])`` (one to five samples): the windows of one
    width sorted together, their middle taken as median_of takes it. A window holding a zero
    goes to median_of itself (numpy's median orders 0.0 and -0.0 its own way)."""
    out = np.empty(x.shape[0], dtype=np.float64)
    width = j + 1 - lo
    for w in np.unique(width).tolist():
        sel = (width == w).nonzero()[0]
        win = np.sort(x[sel[:, None], lo[sel, None] + np.arange(w)], axis=1)
        mid = w // 2
        out[sel] = win[:, mid] if w % 2 else (win[:, mid - 1] + (0.0 + win[:, mid])) / 2
        zero = (win == 0.0).any(axis=1)
        for k in sel[zero].tolist():
            out[k] = median_of(x[k, lo[k]: j[k] + 1])
    return out
