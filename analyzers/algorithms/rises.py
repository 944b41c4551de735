"""A rank's qualifying rises in device-used memory, each timed as finely as the evidence allows.

Per rank, a *qualifying rise* is the first sample whose device-used bytes stand at least
``max(rise_fraction × rank peak, rise_floor_bytes)`` above the running baseline — the minimum so
far (or over a trailing window). The seed resets its cumulative delta on every non-positive
delta, so one noisy dip restarts a genuine rise; a running minimum does not care about dips.
After a rise levels off the baseline restarts, so one rank can rise several times.

**Resolution.** Each rise is known only to lie in an interval: between the previous sample and
the crossing sample, or within one tracker sampling interval of the tracker's own edge timestamp
(a span event, or the ``…_edge_timestamp_seconds`` gauge a TSDB keeps). What the ranks' rises
mean together (warm-ups, incidents, leaders and ties) is :mod:`.first_cause`'s; many ranks' rises
at once are :mod:`.rise_batch`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import SupportsInt, cast

import numpy as np
from stormotel.analyzers.algorithms.robust import finite_samples, median_of, rolling_min
from stormotel.analyzers.algorithms.scratch import Scratch
from stormotel.analyzers.algorithms.settings import Settings
from stormotel.analyzers.timeline import (
    EDGE_GAP_STATED_ATTR,
    EDGE_RESOLUTION_ATTR,
    EDGE_SEEN_ATTR,
    KIND_FIRST_RISE,
    KIND_STEP,
    Markers,
    RankSeries,
)

from stormotel import schema

FIELD = "device_used"
#: Rises examined per rank (each is one vectorised pass over the rank's samples).
MAX_RISES = 16
#: Samples per block of the running minimum (see :func:`_first_rise_since_start`).
RISE_BLOCK = 4096
#: An edge timestamp whose tracker interval is unknown is trusted to within this.
DEFAULT_EDGE_RESOLUTION_NS = 1_000_000_000
#: An edge this close to a sample is that sample (the archive keeps the tracker's own stamps).
SAME_SAMPLE_NS = 1_000_000
#: A hole this many times the tracker's interval means its sampler ran late (jitter is less).
LATE_SAMPLE_FACTOR = 1.5


@dataclass(frozen=True)
class FirstRise:
    rank: int
    t_ns: int  # first sample at or above the threshold (or the tracker's edge time)
    delta_bytes: float  # rise above the baseline at that sample
    threshold_bytes: float
    baseline_ns: int  # when the baseline (running minimum) was set
    baseline_bytes: float
    peak_bytes: float
    settled_ns: int  # when the rise stopped climbing (steps < 10% of the threshold)
    hole_ns: int  # the rise happened at most this long before t_ns
    from_edge_event: bool = False  # timed by the tracker's in-process first-rise edge
    warmup: bool = False
    step: int | None = None

    @property
    def earliest_ns(self) -> int:
        """The earliest the rise can have happened, given the evidence's resolution."""
        return self.t_ns - self.hole_ns


@dataclass(frozen=True)
class _Finite:
    """A rank's finite device-used samples (views of the series when all are finite) and its
    peak, which every round's threshold is relative to."""

    t: np.ndarray
    v: np.ndarray
    peak: float


def _finite_used(series: RankSeries) -> _Finite | None:
    x = series.values.get(FIELD)
    if x is None or len(series) < 2:
        return None
    t, v = finite_samples(series.t_ns, x)
    if t.shape[0] < 2:
        return None
    return _Finite(t, v, float(v.max()))


def first_rise(series: RankSeries, settings: Settings, after_ns: int | None = None
               ) -> FirstRise | None:
    """The rank's first qualifying rise in device-used memory (after ``after_ns``), or None."""
    samples = _finite_used(series)
    return None if samples is None else _rise(series, samples, settings, after_ns, Scratch())


def _rise(series: RankSeries, samples: _Finite, settings: Settings, after_ns: int | None,
          work: Scratch) -> FirstRise | None:
    t, v, peak = samples.t, samples.v, samples.peak
    if after_ns is not None:
        # t is sorted: the samples after ``after_ns`` are a suffix (a view, not a copy).
        keep = int(t.searchsorted(after_ns, side="right"))
        t, v = t[keep:], v[keep:]
        if t.shape[0] < 2:
            return None
    threshold = max(settings.rise_fraction * peak, settings.rise_floor_bytes)
    # No sample stands higher above any baseline than max - min (float subtraction is
    # monotonic): a series that never moves by the threshold needs no running minimum.
    top = peak if after_ns is None else float(v.max())
    if top - float(v.min()) < threshold:
        return None
    n = t.shape[0]
    if settings.rise_window_s > 0:
        interval = max(int(np.median(np.diff(t))), 1)
        window = max(2, int(np.ceil(settings.rise_window_s * 1e9 / interval)) + 1)
        base = rolling_min(v, window)
        found = _first_above(v, base, threshold, work, 0, n)
    else:
        base = work.floats("rise_base", n)
        found = _first_rise_since_start(v, base, threshold, work)
    if found is None:
        return None
    i = found
    # The baseline sample: the last time the series was at its baseline value before the hit.
    at_base = np.equal(v[: i + 1], base[i], out=work.flags("rise_at_base", i + 1)).nonzero()[0]
    j = int(at_base[-1]) if at_base.size else 0
    # Report the rise against the level around the baseline, not its single lowest (noisy) sample.
    level = median_of(v[max(0, j - 4): j + 1])
    # Where the rise levels off: the next rise is looked for after that, so a multi-sample
    # ramp (a warm-up) is one rise, not several.
    settled = int(t[-1])
    if i + 1 < n:
        step = np.subtract(v[i + 1:], v[i:-1], out=work.floats("rise_step", n - i - 1))
        slow = np.less(step, 0.1 * threshold, out=work.flags("rise_slow", n - i - 1))
        k = int(slow.argmax())
        if slow[k]:
            settled = int(t[i + k])
    hole = int(t[i] - t[i - 1]) if i > 0 else 0  # i >= 1: the baseline precedes the hit
    rise_t, edge = int(t[i]), False
    m = series.markers
    if len(m) and hole:
        next_t = int(t[i + 1]) if i + 1 < n else int(t[i]) + hole
        rise_t, hole, edge = timed_by_edge(m, int(t[i]), hole, next_t,
                                           series.median_interval_ns() or 0)
    return FirstRise(series.rank, rise_t, float(v[i] - level), threshold, int(t[j]), level,
                     peak, settled, hole, edge, step=step_at(series, rise_t))


def _first_above(v: np.ndarray, base: np.ndarray, threshold: float, work: Scratch, lo: int,
                 hi: int) -> int | None:
    """The first index in [lo, hi) where ``v`` stands ``threshold`` above ``base``."""
    n = v.shape[0]
    above = np.greater_equal(
        np.subtract(v[lo:hi], base[lo:hi], out=work.floats("rise_above", n)[lo:hi]),
        threshold, out=work.flags("rise_hit", n)[lo:hi])
    k = int(above.argmax())
    return lo + k if above[k] else None


def _first_rise_since_start(v: np.ndarray, base: np.ndarray, threshold: float, work: Scratch
                            ) -> int | None:
    """The first crossing over the running minimum since the first sample, filling ``base``
    up to it: block by block, so a rise early in a long series ends the scan there (the
    minimum carried into a block is exact, so the blocks equal one accumulation)."""
    n = v.shape[0]
    for lo in range(0, n, RISE_BLOCK):
        hi = min(n, lo + RISE_BLOCK)
        block = np.minimum.accumulate(v[lo:hi], out=base[lo:hi])
        if lo:
            np.minimum(block, base[lo - 1], out=block)
        found = _first_above(v, base, threshold, work, lo, hi)
        if found is not None:
            return found
    return None


def timed_by_edge(m: Markers, t_i: int, hole: int, next_t: int, usual_ns: int
                  ) -> tuple[int, int, bool]:
    """(rise time, how long before it the rise may have happened, timed by an edge?) for a
    sample at ``t_i`` that first shows the rise, ``hole`` after the previous one (the series is
    usually sampled every ``usual_ns``).

    The tracker detects rises in-process at its own sampling rate and exports the exact time
    (span event or edge gauge); when one falls inside this sample's hole, it is the better
    timestamp, trusted to within the tracker's own gap before that sample. A scraper stamps a
    sample with the time its scrape *started*, and the exporter reads the tracker's latest
    sample later (tens to hundreds of ms on a loaded host), so the edge of the rise a scrape
    shows can lie just after that scrape's timestamp: it is taken up to ``late`` after it, and
    its interval then reaches back to one tracker interval before the scrape timestamp.

    Two cases claim a precision the evidence lacks and are widened instead:
    - the edge *is* this sample (the tracker's own archive) and the hole before it is much
      wider than both the edge's stated resolution and the series' usual interval: the sampler
      ran late (a CPU-starved or stopped process), so the hole is the truth (an edge that
      states its own gap is trusted to that gap; a series thinned to a coarser interval than
      the tracker sampled at keeps the edge's resolution);
    - the only edge lies after the scrape that shows the rise, beyond ``late`` but before the
      next sample (or anywhere after it, when that very scrape reported the edge: a series
      merged from two servers can hold another server's sample stamped between): the exporter
      read the value after the edge (its process was stopped or starved while the scrape
      waited), so the scrape time says nothing; the rise lies between the previous sample and
      the edge — or within the gap before the edge that the tracker stated, when it did.
    """
    if KIND_FIRST_RISE not in m.kinds:
        return t_i, hole, False  # no edge to time it by (what the searches below would find)
    late = min(hole // 2, DEFAULT_EDGE_RESOLUTION_NS)
    first_rise = m.kind == KIND_FIRST_RISE
    sel = np.flatnonzero(first_rise & (m.start_ns > t_i - hole) & (m.start_ns <= t_i + late))
    if sel.size:
        k = int(sel[np.argmin(m.start_ns[sel])])
        attrs = m.attrs[k] if k < len(m.attrs) else {}
        edge_t = int(m.start_ns[k])
        stated = _edge_resolution(attrs)
        res = stated or min(hole, DEFAULT_EDGE_RESOLUTION_NS)
        if (abs(edge_t - t_i) <= SAME_SAMPLE_NS and not _states_own_gap(attrs)
                and hole > LATE_SAMPLE_FACTOR * max(res, usual_ns)):
            res = hole
        after_scrape = max(edge_t - t_i, 0)
        return edge_t, min(hole, res) + after_scrape, True
    after = np.flatnonzero(first_rise & (m.start_ns > t_i + late))
    later = after[(m.start_ns[after] < next_t) | _reported_by(m, after, t_i)]
    if later.size:
        k = int(later[np.argmin(m.start_ns[later])])
        edge_t = int(m.start_ns[k])
        earliest = t_i - hole
        attrs = m.attrs[k] if k < len(m.attrs) else {}
        stated = _edge_resolution(attrs)
        if stated and _states_own_gap(attrs):
            # The tracker stated its gap before the edge's sample: the rise lies within it,
            # however late the scrape that reported it was answered.
            earliest = max(earliest, edge_t - stated)
        return edge_t, edge_t - earliest, True
    return t_i, hole, False


def _reported_by(m: Markers, idx: np.ndarray, t_i: int) -> np.ndarray:
    """Per marker in ``idx``: reported by a scrape stamped at or before ``t_i`` (TSDB sources
    say which scrape first reported an edge). Such an edge is the one the sample at ``t_i``
    shows, read late, whatever another endpoint's next stamp is: in a series merged from two
    servers the next sample can be stamped before the edge, and the late read's stamp once
    named its rank the first cause at high (docs/algorithms.md, "Late reads")."""
    out = np.zeros(idx.shape[0], dtype=bool)
    for j, k in enumerate(idx.tolist()):
        attrs = m.attrs[k] if k < len(m.attrs) else None
        seen = attrs.get(EDGE_SEEN_ATTR) if isinstance(attrs, Mapping) else None
        out[j] = isinstance(seen, int | float) and seen <= t_i + SAME_SAMPLE_NS
    return out


def _states_own_gap(attrs: object) -> bool:
    return isinstance(attrs, Mapping) and (schema.EVENT_ATTR_SINCE_PREVIOUS in attrs
                                           or attrs.get(EDGE_GAP_STATED_ATTR) is True)


def _edge_resolution(attrs: object) -> int | None:
    """An edge's resolution: the tracker's sampling interval, from the TSDB source (ns) or the
    span event itself (seconds)."""
    if not isinstance(attrs, Mapping):
        return None
    found: list[int] = []
    ns = attrs.get(EDGE_RESOLUTION_ATTR)
    if isinstance(ns, int | float) and ns > 0:
        found.append(int(ns))
    for key in (schema.SPAN_ATTR_SAMPLING_INTERVAL, schema.EVENT_ATTR_SINCE_PREVIOUS):
        secs = attrs.get(key)
        if isinstance(secs, int | float) and secs > 0:
            found.append(int(secs * 1e9))
    # The gap before the edge's sample when the tracker states it: never finer than its interval.
    return max(found) if found else None


def step_at(series: RankSeries, t_ns: int) -> int | None:
    """The training step the rank was in at ``t_ns``, when it reports steps."""
    m = series.markers
    if not len(m) or KIND_STEP not in m.kinds:
        return None
    cover = (m.start_ns <= t_ns) & (m.end_ns >= t_ns)
    if len(m.kinds) > 1:  # steps only (a TSDB read's markers): no kind to compare
        cover &= m.kind == KIND_STEP
    idx = cover.nonzero()[0]
    if not idx.size:
        return None
    return _step_number(m, int(idx[-1]))


def steps_at(series: list[RankSeries], t_ns: list[int]) -> list[int | None]:
    """``[step_at(s, t) for s, t in zip(series, t_ns)]``: the ranks whose markers are all
    steps (a TSDB read's) in one pass over their markers joined — each rank's last step
    covering its time, as the reduction of the covering positions within its own stretch."""
    out: list[int | None] = [None] * len(series)
    joined: list[int] = []
    for k, s in enumerate(series):
        m = s.markers
        if len(m) and KIND_STEP in m.kinds:
            if len(m.kinds) > 1:
                out[k] = step_at(s, t_ns[k])
            else:
                joined.append(k)
    if not joined:
        return out
    ms = [series[k].markers for k in joined]
    counts = np.fromiter((len(m) for m in ms), dtype=np.int64, count=len(ms))
    first = np.zeros(len(ms), dtype=np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    at = np.repeat(np.array([t_ns[k] for k in joined], dtype=np.int64), counts)
    cover = (np.concatenate([m.start_ns for m in ms]) <= at) & \
        (np.concatenate([m.end_ns for m in ms]) >= at)
    last = np.maximum.reduceat(np.where(cover, np.arange(at.shape[0]), -1), first)
    for k, m, lo, hit in zip(joined, ms, first.tolist(), last.tolist(), strict=True):
        if hit >= 0:
            out[k] = _step_number(m, hit - lo)
    return out


def _step_number(m: Markers, k: int) -> int | None:
    """The step number marker ``k`` carries, if it carries one int() accepts."""
    attrs = m.attrs[k] if k < len(m.attrs) else {}
    step = attrs.get(schema.SPAN_ATTR_STEP) if isinstance(attrs, Mapping) else None
    try:  # attrs come from files and servers: whatever int() accepts, else no step
        return None if step is None else int(cast("SupportsInt | str", step))
    except (TypeError, ValueError):
        return None


def rises_of(series: RankSeries, settings: Settings, scratch: Scratch | None = None
             ) -> list[FirstRise]:
    """Every qualifying rise of one rank, in time order (the baseline restarts after each)."""
    out: list[FirstRise] = []
    samples = _finite_used(series)
    if samples is None:
        return out
    work = scratch or Scratch()
    after: int | None = None
    for _ in range(MAX_RISES):
        fr = _rise(series, samples, settings, after, work)
        if fr is None:
            break
        out.append(fr)
        after = max(fr.settled_ns, fr.t_ns, after or 0)
    return out
