"""Many ranks × many samples down to a few thousand points per chart, spikes kept.

A chart is at most a couple of thousand pixels wide, so every series is cut into that many time
buckets and each bucket keeps its **minimum and maximum** (not a mean, which would flatten the
one-sample spike an incident often is). Across ranks the buckets become an **envelope**: the
lowest minimum, the median of per-rank bucket means, and the highest maximum of all ranks, so
1,024 ranks read as one band instead of 1,024 lines; the ranks a finding names are drawn on top.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from stormotel.analyzers.timeline import RankSeries


@dataclass(frozen=True)
class Buckets:
    """Equal time buckets over ``[t0_ns, t1_ns]``."""

    t0_ns: int
    t1_ns: int
    count: int

    @property
    def width_ns(self) -> float:
        return max(1.0, (self.t1_ns - self.t0_ns) / self.count)

    def index(self, t_ns: np.ndarray) -> np.ndarray:
        raw = ((t_ns - self.t0_ns) / self.width_ns).astype(np.int64)
        return np.clip(raw, 0, self.count - 1)

    def x_seconds(self) -> np.ndarray:
        """Two x positions per bucket (its first and third quarter): minimum, then maximum."""
        start = self.t0_ns + np.arange(self.count) * self.width_ns
        pair = np.stack([start + 0.25 * self.width_ns, start + 0.75 * self.width_ns], axis=1)
        return pair.reshape(-1) / 1e9


@dataclass(frozen=True)
class BucketStats:
    """Per-bucket minimum, maximum and mean of one series; NaN where the bucket is empty."""

    lo: np.ndarray
    hi: np.ndarray
    mean: np.ndarray
    #: The bucket's last sample (what a sample-and-hold line carries into the next bucket).
    last: np.ndarray | None = None


def bucket_stats(t_ns: np.ndarray, values: np.ndarray, buckets: Buckets) -> BucketStats:
    """Min/max/mean per bucket with ``reduceat`` over the (time-sorted) samples: no Python loop."""
    lo = np.full(buckets.count, np.nan)
    hi = np.full(buckets.count, np.nan)
    mean = np.full(buckets.count, np.nan)
    last = np.full(buckets.count, np.nan)
    ok = np.isfinite(values)
    if not ok.any():
        return BucketStats(lo, hi, mean, last)
    t, v = t_ns[ok], values[ok]
    idx = buckets.index(t)
    starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
    where = idx[starts]
    lo[where] = np.minimum.reduceat(v, starts)
    hi[where] = np.maximum.reduceat(v, starts)
    counts = np.diff(np.r_[starts, v.shape[0]])
    mean[where] = np.add.reduceat(v, starts) / counts
    last[where] = v[np.r_[starts[1:], v.shape[0]] - 1]
    return BucketStats(lo, hi, mean, last)


def hold_forward(values: np.ndarray, limit: int) -> np.ndarray:
    """Each empty (NaN) bucket between two with data takes the earlier value when the empty
    run is at most ``limit`` buckets long: a sampled value holds until the next sample (what a
    15 s scrape means). A longer silence stays empty, drawn as a labelled gap, never bridged."""
    n = values.shape[0]
    empty = np.isnan(values)
    ar = np.arange(n)
    prev = np.where(empty, -1, ar)
    np.maximum.accumulate(prev, out=prev)
    nxt = np.where(empty, n, ar)
    nxt = np.minimum.accumulate(nxt[::-1])[::-1]
    fill = empty & (prev >= 0) & (nxt < n) & (nxt - prev - 1 <= limit)
    out = values.astype(float)
    out[fill] = values[prev[fill]]
    return out


def empty_runs(values: np.ndarray, min_len: int) -> list[tuple[int, int]]:
    """``[first, last]`` bucket indices of NaN runs at least ``min_len`` long that lie between
    two buckets with data (before the first and after the last sample is not a gap)."""
    ok = ~np.isnan(values)
    if not ok.any():
        return []
    first, last = int(np.argmax(ok)), int(ok.shape[0] - 1 - np.argmax(ok[::-1]))
    inner = ~ok[first:last + 1]
    edges = np.diff(np.r_[0, inner.astype(np.int8), 0])
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    return [(first + int(a), first + int(b)) for a, b in zip(starts, ends, strict=True)
            if b - a + 1 >= min_len]


def field_values(series: RankSeries, field: str) -> np.ndarray:
    """A Timeline field by name; ``gap`` is derived (device used − allocator reserved)."""
    return series.gap if field == "gap" else series.values[field]


@dataclass(frozen=True)
class Envelope:
    lo: np.ndarray
    median: np.ndarray
    hi: np.ndarray
    ranks_reporting: int


def envelope(series: list[RankSeries], field: str, buckets: Buckets) -> Envelope:
    """Lowest minimum, median of means and highest maximum across ``series`` per bucket."""
    lo = np.full(buckets.count, np.nan)
    hi = np.full(buckets.count, np.nan)
    means: list[np.ndarray] = []
    for s in series:
        stats = bucket_stats(s.t_ns, field_values(s, field), buckets)
        if np.isnan(stats.mean).all():
            continue
        lo = np.fmin(lo, stats.lo)
        hi = np.fmax(hi, stats.hi)
        means.append(stats.mean)
    if not means:
        nan = np.full(buckets.count, np.nan)
        return Envelope(nan, nan, nan, 0)
    # All-NaN buckets stay NaN, and are left out of nanmedian rather than silenced around it:
    # warnings.catch_warnings() swaps the process's warning filters, so two reports rendered at
    # once (serve's workers) restored each other's and one's warning reached the process stderr.
    stacked = np.vstack(means)
    seen = ~np.isnan(stacked).all(axis=0)
    median = np.full(buckets.count, np.nan)
    median[seen] = np.nanmedian(stacked[:, seen], axis=0)
    return Envelope(lo, median, hi, len(means))


def as_pairs(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Interleave per-bucket (min, max) onto the two x positions of :meth:`Buckets.x_seconds`."""
    return np.stack([lo, hi], axis=1).reshape(-1)


def doubled(values: np.ndarray) -> np.ndarray:
    """The same value at both x positions of a bucket (envelope edges, the median)."""
    return np.repeat(values, 2)
