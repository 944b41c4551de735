"""Cross-rank first cause: incidents, which rank rose first in each, and how sure we can be.

Per rank, a *qualifying rise* is the first sample whose device-used bytes stand at least
``max(rise_fraction × rank peak, rise_floor_bytes)`` above the running baseline — the minimum so
far (or over a trailing window). The seed resets its cumulative delta on every non-positive
delta, so one noisy dip restarts a genuine rise; a running minimum does not care about dips.
After a rise levels off the baseline restarts, so one rank can rise several times.

A rank's first rise shortly after its own first sample is its **warm-up** (model, optimizer,
first steps) and never an incident, whatever the start offsets between ranks. The remaining
rises are grouped into **incidents**: rises of different ranks within a bounded cascade window.
Every incident is judged on its own — a leader, or a tie — and reported.

**Resolution.** Each rise is known only to lie in an interval: between the previous sample and
the crossing sample, or within one tracker sampling interval of the tracker's own edge timestamp
(a span event, or the ``…_edge_timestamp_seconds`` gauge a TSDB keeps). A leader is named at
high/medium confidence only when its interval ends before every follower's begins (plus a clock
tolerance); otherwise the incident is a tie and the report says why. Everything happens on the
timeline as aligned by :mod:`stormotel.analyzers.align`; the alignment is stated in the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, SupportsInt, cast

import numpy as np
from stormotel.analyzers.algorithms.robust import (
    finite_ends,
    finite_samples,
    median_of,
    rolling_min,
)
from stormotel.analyzers.algorithms.scratch import Scratch
from stormotel.analyzers.algorithms.settings import Settings
from stormotel.analyzers.report import Confidence, CrossRank, Suspect
from stormotel.analyzers.timeline import (
    EDGE_RESOLUTION_ATTR,
    KIND_FIRST_RISE,
    KIND_OOM,
    KIND_STEP,
    META_OOM_DUMPS,
    Markers,
    OomDump,
    RankSeries,
    Timeline,
)

from stormotel import schema

FIELD = "device_used"
#: Rises examined per rank (each is one vectorised pass over the rank's samples).
MAX_RISES = 16
#: A rise whose baseline lies this close to the rank's first sample climbs from its start.
WARMUP_FROM_START_NS = 2_000_000_000
#: The warm-up is at most this share of a rank's observed span.
WARMUP_SHARE = 0.25
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
      next sample: the exporter read the value after the edge (its process was stopped or
      starved while the scrape waited), so the scrape time says nothing; the rise lies between
      the previous sample and the edge.
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
    later = np.flatnonzero(first_rise & (m.start_ns > t_i + late) & (m.start_ns < next_t))
    if later.size:
        edge_t = int(m.start_ns[later].min())
        return edge_t, edge_t - (t_i - hole), True
    return t_i, hole, False


def _states_own_gap(attrs: object) -> bool:
    return isinstance(attrs, Mapping) and schema.EVENT_ATTR_SINCE_PREVIOUS in attrs


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
    attrs = m.attrs[int(idx[-1])] if int(idx[-1]) < len(m.attrs) else {}
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


def mark_warmups(timeline: Timeline, rises: dict[int, list[FirstRise]], settings: Settings,
                 window_start_ns: int | None) -> dict[int, list[FirstRise]]:
    """Flag each rank's own warm-up: its first rise, within ``warmup_s`` of its first sample
    (at most a quarter of what it observed), when that sample is the rank's start (not the edge
    of a query window cut into a running job) and the rise either climbs from that very start
    or comes at the same delay after its own start as another rank's first rise does — the
    same program warming up, whatever the ranks' start offsets."""
    starts: dict[int, int] = {}
    delays: dict[int, int] = {}
    tolerance: dict[int, int] = {}
    windows: dict[int, tuple[int, int]] = {}  # rank -> (its start, its warm-up window)
    cut_warmups: set[int] = set()
    for r, rs in rises.items():
        series = timeline.ranks[r]
        first, last = finite_ends(series.values[FIELD])
        t = series.t_ns[[first, last]]
        interval = series.median_interval_ns() or 0
        # A rank whose data begins at the window's start was running before it: no warm-up
        # can be seen. Running, it has a sample within one interval of the start (half an
        # interval and a second more for a late scrape); a wider slack takes a rank that
        # started a few scrapes in for a cut one, and its warm-up for an incident named at
        # high (a missed scrape at the very start errs the other way: a rise called warm-up).
        cut = window_start_ns is not None and \
            t[0] <= window_start_ns + 1.5 * interval + 10**9
        if rs and cut and _catches_up(timeline, r, rs[0], int(t[0]), interval):
            # Cut or started just after the window began, it cannot be told by timing; but a
            # rise from its very first sample to no more than the others already hold is the
            # rank catching up (its first scrape came mid warm-up), never a lead.
            cut_warmups.add(r)
        if not rs or cut:
            continue
        span = int(t[-1] - t[0])
        warmup_ns = min(settings.warmup_s * 1e9, WARMUP_SHARE * span)
        windows[r] = (int(t[0]), int(warmup_ns))
        if rs[0].t_ns - t[0] > warmup_ns:
            continue
        starts[r] = int(t[0])
        delays[r] = rs[0].t_ns - int(t[0])
        tolerance[r] = max(2 * interval, rs[0].hole_ns, 1_000_000_000)
    out = {r: list(rs) for r, rs in rises.items()}
    for r in cut_warmups:
        out[r][0] = replace(out[r][0], warmup=True)
    plateaus = _warmup_plateaus(timeline, starts)
    for r in starts:
        fr = rises[r][0]
        interval = timeline.ranks[r].median_interval_ns() or 0
        from_start = fr.baseline_ns - starts[r] <= max(2 * interval, WARMUP_FROM_START_NS)
        alike = any(abs(delays[o] - delays[r]) <= max(tolerance[o], tolerance[r])
                    for o in delays if o != r)
        if from_start or alike:
            out[r][0] = replace(fr, warmup=True)
            if not from_start:
                continue
            # A warm-up climbs in steps (activations come and go while it ramps): a rise that
            # climbs again from a dip soon after the rank's start, back to about the level the
            # warm-up had already reached — or to the level the other ranks' warm-ups reach
            # (the same program; a noisy first sample can stand above the dip) — is the same
            # warm-up. One that climbs well above both is not, however soon after the start (a
            # fault planted early).
            others = [p for o, p in plateaus.items() if o != r]
            common = median_of(np.array(others)) if others else -np.inf
            series = timeline.ranks[r]
            x, t = series.values[FIELD], series.t_ns
            end = starts[r] + max(2 * interval, WARMUP_FROM_START_NS)
            for k in range(1, len(out[r])):
                nxt = out[r][k]
                if nxt.baseline_ns > end:
                    break
                before = x[(t >= starts[r]) & (t <= nxt.baseline_ns)]
                after = x[(t >= nxt.t_ns) & (t <= max(nxt.settled_ns, nxt.t_ns))]
                reached = np.nanmax(before) if before.size else -np.inf
                climbed = np.nanmax(after) if after.size else np.inf
                if climbed > max(reached, common) + 0.5 * nxt.threshold_bytes:
                    break
                out[r][k] = replace(nxt, warmup=True)
    _mark_shared_warmups(out, windows, int(settings.clock_tolerance_s * 1e9))
    _unmark_rises_that_ran_out(timeline, out, int(settings.warmup_s * 1e9))
    return out


def _oom_times(timeline: Timeline) -> dict[int, list[int]]:
    """Each rank's OOM instants: its OOM dumps and its OOM markers (event, edge, counter)."""
    out: dict[int, list[int]] = {}
    for d in cast("list[OomDump] | None", timeline.meta.get(META_OOM_DUMPS)) or []:
        out.setdefault(int(d.rank), []).append(int(d.oom_ns))
    for r, s in timeline.ranks.items():
        m = s.markers
        if KIND_OOM in m.kinds:
            out.setdefault(r, []).extend(int(m.start_ns[i]) for i, k in enumerate(m.kind.tolist())
                                         if k == KIND_OOM)
    return out


def _unmark_rises_that_ran_out(timeline: Timeline, out: dict[int, list[FirstRise]],
                               horizon_ns: int) -> None:
    """A rise that ends in its rank's OOM is an incident, however soon after the rank's start
    and however like the others' warm-ups it looks (in place). Timing alone once set aside a
    rank whose leak began 0.5 s after a late start — alike in delay to a healthy rank's
    warm-up — and named the rank that ran out a second later the first cause at high, beside
    an OOM section saying the set-aside rank ran out first. The OOM must come after the rise's
    baseline and within ``horizon_ns`` (the warm-up window) of its crossing."""
    ooms = _oom_times(timeline)
    for r, rs in out.items():
        times = ooms.get(r)
        if not times:
            continue
        for k, fr in enumerate(rs):
            if fr.warmup and any(fr.baseline_ns <= t <= fr.t_ns + horizon_ns for t in times):
                rs[k] = replace(fr, warmup=False)


def _mark_shared_warmups(out: dict[int, list[FirstRise]], windows: dict[int, tuple[int, int]],
                         tol: int) -> None:
    """A rise that *every* running rank makes together — within the resolution of the
    evidence, each within its own warm-up window — is the job's warm-up, not an incident (in
    place): no rank led it, and at the start of a job it is the program warming up.

    Ranks that start apart but warm up at one shared instant (a common clock origin, a first
    collective they all wait on) rise together at a different delay after each one's own start,
    and a warm-up climbs in steps: one rank's step was once set aside and another's, at the
    same instant, was not — so the latter "led" the others' *next* step by a whole step and was
    named the first cause at high. Rises that all ranks make at once are never one rank's lead.
    Groups are formed as ties are judged: from the earliest crossing, every rise that may have
    happened before it (its interval begins before that crossing). Repeated while a pass sets
    more aside (a stepped warm-up is set aside step by step); at most ``MAX_RISES`` passes."""
    if len(out) < 2 or not set(out) <= set(windows):
        return
    starts = np.sort(np.fromiter((start for start, _ in windows.values()), np.int64))
    for _ in range(MAX_RISES):
        pending = sorted(((fr.t_ns, r, k) for r, rs in out.items() for k, fr in enumerate(rs)
                          if fr.t_ns - windows[r][0] <= windows[r][1]))
        changed = False
        i = 0
        while i < len(pending):
            t_first = pending[i][0]
            group: dict[int, int] = {}
            j = i
            while j < len(pending) and out[pending[j][1]][pending[j][2]].earliest_ns - tol \
                    < t_first:
                _, r, k = pending[j]
                group.setdefault(r, k)
                j += 1
            i = max(j, i + 1)
            # Every rank running then (a rank not yet started cannot rise with the others);
            # counted by a search over the sorted starts, not a pass over the ranks per group.
            running = int(starts.searchsorted(t_first, side="left"))
            if len(group) < 2 or len(group) != running or \
                    any(windows[r][0] >= t_first for r in group):
                continue
            rises = [out[r][k] for r, k in group.items()]
            if not all(fr.warmup for fr in rises):
                for r, k in group.items():
                    out[r][k] = replace(out[r][k], warmup=True)
                changed = True
        if not changed:
            return


def _catches_up(timeline: Timeline, rank: int, rise: FirstRise, first_ns: int,
                interval: int) -> bool:
    """``rise`` climbs from ``rank``'s first sample (within one interval) to no more than the
    level the other ranks already held when it rose (their median, half a threshold of slack):
    the rank catching up with the others, not leading them."""
    if rise.baseline_ns - first_ns > max(interval, 10**9):
        return False
    held = []
    for o, series in timeline.ranks.items():
        if o == rank or not len(series) or FIELD not in series.values:
            continue
        k = int(np.searchsorted(series.t_ns, rise.t_ns, side="right"))
        before = series.values[FIELD][:k]
        before = before[np.isfinite(before)]
        if before.size:
            held.append(float(before[-1]))
    if len(held) < 2:
        return False
    return _climbed_to(timeline.ranks[rank], rise) <= \
        median_of(np.array(held)) + 0.5 * rise.threshold_bytes


def _climbed_to(series: RankSeries, rise: FirstRise) -> float:
    """The highest level ``rise`` reached before it levelled off: from its baseline to its
    crossing or settling sample. Not the rank's own peak, which a later incident sets (a
    catching-up rank was once named at high because the job's planted spike, a minute later,
    stood above what the others held at its first scrape)."""
    t, x = series.t_ns, series.values[FIELD]
    lo = int(t.searchsorted(rise.baseline_ns, side="right"))
    hi = int(t.searchsorted(max(rise.settled_ns, rise.t_ns), side="right"))
    climbed = x[lo:hi]
    climbed = climbed[np.isfinite(climbed)]
    return float(climbed.max()) if climbed.size else rise.peak_bytes


def _warmup_plateaus(timeline: Timeline, starts: dict[int, int]) -> dict[int, float]:
    """Per rank seen from its start, the highest level in its first ``WARMUP_FROM_START_NS``:
    where the program's warm-up takes it (the median over other ranks ignores one faulty)."""
    out = {}
    for r, start in starts.items():
        series = timeline.ranks[r]
        interval = series.median_interval_ns() or 0
        # t_ns is sorted: the first seconds are a slice, not a mask over the whole series.
        end = start + max(2 * interval, WARMUP_FROM_START_NS)
        lo = int(series.t_ns.searchsorted(start, side="left"))
        hi = int(series.t_ns.searchsorted(end, side="right"))
        early = series.values[FIELD][lo:hi]
        early = early[np.isfinite(early)]
        if early.size:
            out[r] = float(early.max())
    return out


@dataclass
class Incident:
    """Rises of several ranks within one cascade window, and the verdict on them."""

    rises: dict[int, FirstRise]
    onset_ns: int | None = None
    suspects: list[Suspect] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    leader: int | None = None
    confidence: Confidence = "low"
    lead_bound_ns: int = 0
    kind: str = "tie"  # leader | tie | single_rank | workload

    def to_dict(self) -> dict[str, Any]:
        first = min(fr.t_ns for fr in self.rises.values())
        return {"start_ns": first, "onset_ns": self.onset_ns, "kind": self.kind,
                "leader": self.leader, "confidence": self.confidence,
                "lead_lower_bound_ns": self.lead_bound_ns,
                "ranks": sorted(self.rises),
                "tied_ranks": sorted(s.rank for s in self.suspects) if self.kind == "tie"
                else [],
                "rises": {str(r): {"t_ns": fr.t_ns, "earliest_ns": fr.earliest_ns,
                                   "delta_bytes": fr.delta_bytes,
                                   "timed_by_edge_event": fr.from_edge_event,
                                   "step": fr.step}
                          for r, fr in sorted(self.rises.items())},
                "notes": list(self.notes)}


def analyze_first_cause(timeline: Timeline, settings: Settings) -> tuple[CrossRank, dict]:
    """Incidents, each with a leader or a tie; the first-cause suspects are those of the first
    cross-rank incident with a clear leader (else of the first cross-rank incident, else of the
    only rank that rose). Also returns the per-rank rise table."""
    res = timeline.resolution_ns()
    out = CrossRank(alignment=timeline.alignment, resolution_ns=res)
    missing = timeline.missing_ranks()
    with_field = [r for r in timeline.rank_ids if timeline.ranks[r].has(FIELD)]
    no_field = sorted(set(timeline.ranks) - set(with_field))
    if no_field:
        out.notes.append(f"ranks without device-used memory (not compared): {no_field}")
    if len(with_field) < 2:
        out.notes.append("first-cause analysis needs at least two ranks with device-used memory;"
                         f" have {len(with_field)}")
        return out, {}
    if missing:
        out.notes.append(f"missing ranks {missing} may have risen earlier; confidence lowered")
    window_start = _window_start(timeline)
    # Ranks of one length a batch at a time (that module builds on this one's rise).
    from stormotel.analyzers.algorithms.rise_batch import rises_of_ranks

    all_rises = mark_warmups(timeline, rises_of_ranks(timeline, with_field, settings, Scratch()),
                             settings, window_start)
    warmups = {r: rs[0] for r, rs in all_rises.items() if rs and rs[0].warmup}
    candidates = [fr for rs in all_rises.values() for fr in rs if not fr.warmup]
    edge_ranks = sorted({fr.rank for fr in candidates if fr.from_edge_event})
    out.resolution = _resolution_statement(timeline, res, edge_ranks)
    if warmups:
        out.notes.append(f"warm-up of ranks {_ranks(warmups)} (each one's first rise, soon "
                         "after its own start) is not an incident")
    if not candidates:
        if not warmups:
            out.notes.append("no rank showed a qualifying rise (>= "
                             f"{settings.rise_fraction:.0%} of its peak and >= "
                             f"{settings.rise_floor_bytes / 2**20:.0f} MiB)")
        return out, {"incidents_examined": 0, "ranks": {}}
    window_ns = int(max(settings.cascade_window_s * 1e9, 2 * (res or 0)))
    # Every rise set aside as warm-up (a stepped warm-up has several), not only the first: a
    # rank that rose at the same instant as an incident's leader, in a step of its warm-up,
    # did not follow it.
    warm_spans = [(r, w.earliest_ns, w.settled_ns) for r, rs in all_rises.items()
                  for w in rs if w.warmup]
    last_ns = [(r, int(timeline.ranks[r].t_ns[-1])) for r in with_field]
    incidents = [_judge(group, timeline, last_ns, missing, settings, warm_spans, res)
                 for group in _group(candidates, window_ns)]
    out.incidents = [inc.to_dict() for inc in incidents]
    cross = [inc for inc in incidents if len(inc.rises) > 1]
    chosen = next((i for i in cross if i.kind == "leader"), cross[0] if cross else None)
    if chosen is None:
        singles = {r for inc in incidents for r in inc.rises}
        chosen = incidents[0] if len(singles) == 1 else None
        if chosen is None:
            out.notes.append(f"ranks {sorted(singles)} each rose on their own at different "
                             "times (no cross-rank incident); see gap findings")
    if chosen is not None:
        out.cluster_onset_ns = chosen.onset_ns
        out.first_cause_suspects = chosen.suspects
        out.notes.extend(chosen.notes)
        others = [inc for inc in incidents if inc is not chosen and len(inc.rises) > 1]
        if others:
            out.notes.append(f"{len(incidents)} incidents in the window; each is listed in "
                             "cross_rank.incidents (leader or tie)")
    table = {}
    if chosen is not None:
        table = {r: {"first_spike_ns": fr.t_ns, "delta_bytes": fr.delta_bytes,
                     "threshold_bytes": fr.threshold_bytes, "baseline_ns": fr.baseline_ns,
                     "earliest_ns": fr.earliest_ns, "timed_by_edge_event": fr.from_edge_event}
                 for r, fr in sorted(chosen.rises.items())}
    return out, {"incidents_examined": len(incidents),
                 "chosen_incident": None if chosen is None else incidents.index(chosen) + 1,
                 "warmup_ranks": sorted(warmups), "ranks": table}


def _window_start(timeline: Timeline) -> int | None:
    """Start of a query window cut into a running job (TSDB sources), if the source said."""
    meta = timeline.meta.get("prometheus")
    value = meta.get("window_start_ns") if isinstance(meta, dict) else None
    return int(value) if isinstance(value, int | float) else None


def _group(rises: list[FirstRise], window_ns: int) -> list[dict[int, FirstRise]]:
    """Incidents: from the earliest unassigned rise, each rank's earliest rise within the
    cascade window; repeat. O(R log R) over all rises."""
    pending = sorted(rises, key=lambda fr: (fr.t_ns, fr.rank))
    groups: list[dict[int, FirstRise]] = []
    while pending:
        t0 = pending[0].t_ns
        group: dict[int, FirstRise] = {}
        rest = []
        for fr in pending:
            if fr.t_ns <= t0 + window_ns and fr.rank not in group:
                group[fr.rank] = fr
            else:
                rest.append(fr)
        groups.append(group)
        pending = rest
    return groups


def _judge(rises: dict[int, FirstRise], timeline: Timeline, last_ns: list[tuple[int, int]],
           missing: list[int], settings: Settings, warm_spans: list[tuple[int, int, int]],
           res: int | None) -> Incident:
    """One incident: leader only when its rise interval ends before every follower's begins.
    Taken once for all incidents: ``last_ns``, each compared rank's last sample time;
    ``res``, the timeline's resolution; ``warm_spans``, each warm-up's rank, earliest and
    settled time."""
    inc = Incident(rises)
    order = sorted(rises.values(), key=lambda fr: (fr.t_ns, fr.rank))
    first = order[0]
    tol = int(settings.clock_tolerance_s * 1e9)
    # A rank still warming up when this incident began could have been part of it, unseen.
    t0, pad = first.t_ns, res or 0
    overlapping = sorted(r for r, earliest, settled in warm_spans if r not in rises
                         and earliest <= t0 <= settled + pad)
    if len(order) == 1:
        others_end = min(end for r, end in last_ns if r != first.rank)
        lead = max(others_end - first.t_ns, 0)
        bound = others_end - first.t_ns - tol
        conf: Confidence = "low"
        if bound >= 0 and res and lead >= res and not overlapping:
            conf = "medium" if missing else "high"
        inc.kind, inc.leader, inc.confidence, inc.lead_bound_ns = ("single_rank", first.rank,
                                                                   conf, max(bound, 0))
        inc.notes.append(f"only rank {first.rank} rose; the others never reached their "
                         "threshold (lead measured to the end of their data)")
        inc.suspects = [_suspect(first, lead, conf, res, timeline, alone=True)]
        return inc
    inc.onset_ns = order[1].t_ns
    lead = order[1].t_ns - first.t_ns
    # The earliest any follower can have risen, against the latest the leader can have: a
    # follower still seen low at or after the leader was seen high rose after it.
    bound = min(fr.earliest_ns for fr in order[1:]) - first.t_ns - tol
    steps = {fr.step for fr in order}
    if bound >= 0 and None not in steps and len(steps) == 1:
        inc.kind = "workload"
        inc.notes.append(f"ranks {sorted(rises)} rose within the same training step "
                         f"{steps.pop()}: the workload, not one rank; no leader is named")
        tied = order
    elif bound >= 0 and not overlapping:
        inc.kind, inc.leader, inc.lead_bound_ns = "leader", first.rank, bound
        inc.confidence = "medium" if missing else "high"
        inc.suspects = [_suspect(first, lead, inc.confidence, res, timeline, bound=bound)]
        return inc
    else:
        tied = [fr for fr in order if fr.earliest_ns - tol < first.t_ns]
        if overlapping:
            inc.notes.append(f"ranks {overlapping} were still warming up when this incident "
                             "began and could have led it unseen")
        widest = max(fr.hole_ns for fr in tied)
        same = [fr.rank for fr in tied if fr.t_ns == first.t_ns]
        if len(same) > 1:
            inc.notes.append(f"ranks {same[:16]} rose at the same aligned time")
        holes = [fr.rank for fr in tied if res and fr.hole_ns > res]
        if holes:
            inc.notes.append(f"ranks {holes[:16]} have a sampling hole before their rise and "
                             f"may have risen before rank {first.rank}")
        inc.notes.append(
            f"ranks {[fr.rank for fr in tied][:16]} rose within the resolution of the evidence "
            f"(each rise is known to within {widest / 1e9:.3g} s; rank {first.rank} is ahead by "
            f"{lead / 1e9:.3g} s, which is not a lead): a tie — a shared cause (a collective, "
            "the input pipeline) is as likely as one faulty rank; finer sampling or the "
            "tracker's edge gauges would decide it")
    inc.suspects = [_suspect(fr, 0, "low", res, timeline, tied=len(tied)) for fr in tied]
    return inc


def _resolution_statement(timeline: Timeline, res: int | None, edge_ranks: list[int]) -> str:
    parts = []
    if res:
        parts.append(f"samples every ~{res / 1e9:.3g} s (coarsest rank)")
    if edge_ranks:
        parts.append(f"tracker edge timestamps for ranks {edge_ranks[:16]}")
    return ("evidence: " + "; ".join(parts) + ". A lead is claimed only when the leader's rise "
            "interval ends before every follower's begins; otherwise the incident is a tie.")


def _ranks(d: dict[int, Any]) -> str:
    ranks = sorted(d)
    return f"{ranks[:16]}{' ...' if len(ranks) > 16 else ''}"


def _suspect(fr: FirstRise, lead: int, conf: Confidence, res: int | None, timeline: Timeline,
             *, alone: bool = False, tied: int = 0, bound: int | None = None) -> Suspect:
    ev = {"timestamp_ns": fr.t_ns, "earliest_ns": fr.earliest_ns, "lead_ns": lead,
          "lead_lower_bound_ns": bound, "delta_bytes": fr.delta_bytes,
          "threshold_bytes": fr.threshold_bytes, "baseline_ns": fr.baseline_ns,
          "baseline_bytes": fr.baseline_bytes, "peak_bytes": fr.peak_bytes,
          "resolution_ns": res, "lead_intervals": (lead / res) if res else None,
          "sample_hole_before_ns": fr.hole_ns, "timed_by_edge_event": fr.from_edge_event,
          "step": fr.step, "alignment": timeline.alignment,
          "offset_ns": timeline.offsets_ns.get(fr.rank, 0)}
    if alone:
        ev["only_rank_to_rise"] = True
    if tied:
        ev["tied_ranks"] = tied
    return Suspect(rank=fr.rank, confidence=conf, first_spike_ns=fr.t_ns, lead_ns=lead,
                   delta_bytes=fr.delta_bytes, evidence=ev)
