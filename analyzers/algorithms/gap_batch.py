"""The ranks gap analysis has nothing to say about, found for many ranks at once.

Most ranks of a job are quiet: the gap (device used − allocator reserved: NCCL buffers, the CUDA
context) never moves, so no drift and no spike is possible (``gap._flat``), and no sample's idle
pool bytes reach the fragmentation floor (``gap._none_fragmented``). At 10,000 ranks from a TSDB
asking each rank that one by one is mostly Python overhead; here ranks of one length are stacked
and the same questions asked of every row together, with the same float64 arithmetic on the same
elements. A rank whose answer could depend on anything the rows do not show — a missing sample, a
partly reported inactive-split counter, values near the float range's end (where the rank-by-rank
check of finiteness by a sum would see an overflow) — is simply not called quiet, and gap
analysis looks at it as before. tests/analyzers/test_gap_batch.py checks both ways agree.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from stormotel.analyzers.algorithms.rank_rows import batches, stack_rows
from stormotel.analyzers.algorithms.settings import Settings
from stormotel.analyzers.timeline import RankSeries, Timeline

#: Values this large are left to the rank-by-rank pass: below it, no sum of a batchable row
#: (at most 2**20 values) can overflow, so every row's finiteness check by a sum agrees.
LARGE = 1e300
_FIELDS = ("device_used", "reserved", "allocated", "inactive_split")
_NEEDED = frozenset(_FIELDS)
#: Longer ranks are left to the rank-by-rank pass (see :data:`LARGE`).
MAX_LEN = 1 << 20
#: An integer this far below 2**53 times a row's length sums exactly in any order.
EXACT_INT = 2.0**53


def quiet_ranks(timeline: Timeline, ranks: Iterable[int], settings: Settings) -> set[int]:
    """Of ``ranks``, those with at least ``min_samples`` samples whose gap is flat and that
    cannot be fragmented: gap analysis records no spike episode and no finding for them."""
    out: set[int] = set()
    if not settings.spike_min_bytes > 0:
        return out  # (gap._flat: only a positive spike floor rules out every spike)
    have = [r for r in ranks if timeline.ranks[r].values.keys() >= _NEEDED]
    for n, keys in batches(timeline, have, min_len=max(settings.min_samples, 1),
                           max_len=MAX_LEN):
        out.update(_quiet(keys, [timeline.ranks[r] for r in keys], n, settings))
    return out


def _quiet(keys: list[int], series: list[RankSeries], n: int, settings: Settings
           ) -> list[int]:
    used, res, alloc, split = (stack_rows([s.values[f] for s in series], n) for f in _FIELDS)
    gap = used - res
    c = gap[:, 0]
    # gap._flat: every sample exactly the first (the mean too: checked per row below).
    flat = (gap.max(axis=1) == c) & (gap.min(axis=1) == c) & (np.abs(c) < LARGE) & \
        _usable(used) & _usable(res) & _usable(gap)
    # fragmentation_finding's idle bytes: the inactive-split counter where the rank reports
    # it at every sample, reserved - allocated where it never does (else: rank by rank).
    has_split = np.isfinite(split).all(axis=1)
    no_split = ~np.isfinite(split).any(axis=1) & _usable(alloc)
    idle = np.where(has_split[:, None], split, res - alloc)
    rmin = res.min(axis=1)
    most = idle.max(axis=1)
    ok = flat & (has_split | no_split) & _usable(idle) & (rmin > 0)
    # gap._flat's third reduction, the fit's own mean: n copies of an integer below
    # 2**53 / n sum to n times it exactly in any order, so their mean is it; other rows are
    # summed as gap._flat sums them.
    exact = (np.floor(c) == c) & (np.abs(c) * n < EXACT_INT)
    out = []
    for k in ok.nonzero()[0].tolist():
        if not exact[k] and float(np.add.reduce(gap[k]) / n) != float(c[k]):
            continue
        m = float(most[k])
        if m < settings.frag_min_bytes or (settings.frag_ratio > 0 and m < settings.frag_ratio
                                           * float(rmin[k]) * (1 - 1e-9)):
            out.append(keys[k])  # gap._none_fragmented
    return out


def _usable(a: np.ndarray) -> np.ndarray:
    """Rows whose every value is finite and below :data:`LARGE` in magnitude."""
    with np.errstate(invalid="ignore"):
        return (np.abs(a) < LARGE).all(axis=1)
