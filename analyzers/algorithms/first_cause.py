"""Cross-rank first cause: incidents, which rank rose first in each, and how sure we can be.

Per rank, a *qualifying rise* is the first sample whose device-used bytes stand at least
``max(rise_fraction × rank peak, rise_floor_bytes)`` above the running baseline — the minimum so
far (or over a trailing window). The seed resets its cumulative delta on every non-positive
delta, so one noisy dip restarts a genuine rise; a running minimum does not care about dips.
After a rise levels off the baseline restarts, so one rank can rise several times (each rank's
rises: :mod:`.rises`; ranks of one length a batch at a time: :mod:`.rise_batch`).

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

from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np
from stormotel.analyzers.algorithms import read_lag, replica_mix
from stormotel.analyzers.algorithms.rank_rows import ranks_reporting
from stormotel.analyzers.algorithms.rise_batch import rises_of_ranks
from stormotel.analyzers.algorithms.rises import FIELD, MAX_RISES, FirstRise
from stormotel.analyzers.algorithms.rises import RISE_BLOCK as RISE_BLOCK
from stormotel.analyzers.algorithms.rises import first_rise as first_rise
from stormotel.analyzers.algorithms.rises import rises_of as rises_of
from stormotel.analyzers.algorithms.rises import step_at as step_at
from stormotel.analyzers.algorithms.robust import finite_ends, median_of
from stormotel.analyzers.algorithms.scratch import Scratch
from stormotel.analyzers.algorithms.settings import Settings
from stormotel.analyzers.algorithms.tracker_edges import (
    tracker_restarts,
    tracker_start,
    unseen_rises,
)
from stormotel.analyzers.report import Confidence, CrossRank, Suspect
from stormotel.analyzers.timeline import (
    KIND_OOM,
    META_OOM_DUMPS,
    OomDump,
    RankSeries,
    Timeline,
)

#: A rise whose baseline lies this close to the rank's first sample climbs from its start.
WARMUP_FROM_START_NS = 2_000_000_000
#: The warm-up is at most this share of a rank's observed span.
WARMUP_SHARE = 0.25
#: Every candidate rise's time, rank, the latest its sample can have been read
#: (:func:`_read_by`) and whether only its tracker's edge shows it
#: (:func:`.tracker_edges.unseen_rises`), in time order.
Earlier = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
#: A tracker start stamped this much after the rank's first sample is still that sample's
#: tracker (the gauge is the tracker host's clock, the sample a scraper's).
START_SLACK_NS = 1_000_000_000


def mark_warmups(timeline: Timeline, rises: dict[int, list[FirstRise]], settings: Settings,
                 window_start_ns: int | None) -> dict[int, list[FirstRise]]:
    """Flag each rank's own warm-up: its first rise, within ``warmup_s`` of its start (at most
    a quarter of what it observed), when the rank started in the window (not a query window cut
    into a running job) and the rise either climbs from that very start or comes at the same
    delay after its own start as another rank's first rise does — the same program warming up,
    whatever the ranks' start offsets. The rank's start is its tracker's start edge where the
    source read it (:func:`.tracker_edges.tracker_start`), else its first sample."""
    starts: dict[int, int] = {}
    delays: dict[int, int] = {}
    tolerance: dict[int, int] = {}
    windows: dict[int, tuple[int, int]] = {}  # rank -> (its start, its warm-up window)
    cut_warmups: set[int] = set()
    tol = int(settings.clock_tolerance_s * 1e9)
    for r, rs in rises.items():
        series = timeline.ranks[r]
        first, last = finite_ends(series.values[FIELD])
        t = series.t_ns[[first, last]]
        interval = series.median_interval_ns() or 0
        cut, origin, catching_up = _started(timeline, r, rs, int(t[0]), interval,
                                            window_start_ns, tol, int(settings.warmup_s * 1e9))
        if catching_up:
            cut_warmups.add(r)
        if not rs or cut:
            continue
        span = int(t[-1] - origin)
        warmup_ns = min(settings.warmup_s * 1e9, WARMUP_SHARE * span)
        windows[r] = (origin, int(warmup_ns))
        if not _within_warmup(rs[0], origin, int(t[0]), warmup_ns):
            continue
        # "Climbs from the very start" is from the first sample: a head unseen (a target
        # found late) may hide the warm-up's beginning, and its first scrape come mid-climb.
        starts[r] = int(t[0])
        delays[r] = rs[0].t_ns - origin
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
            if from_start:
                _same_warmup_steps(timeline, out[r], 0, starts[r], plateaus, r)
    _mark_restart_warmups(timeline, out, delays, tolerance, plateaus, settings)
    _mark_shared_warmups(out, windows, int(settings.clock_tolerance_s * 1e9))
    _mark_loads_from_empty(out)
    _unmark_rises_that_ran_out(timeline, out, int(settings.warmup_s * 1e9))
    return out


def _mark_loads_from_empty(out: dict[int, list[FirstRise]]) -> None:
    """Where every rank's first rise climbs from a device holding less than one threshold, each
    is that rank's program loading, whatever its delay after the start (in place): nothing of a
    rise's size had been on any device, so no rank had anything to lead with. Real trackers
    start at process start and a model load may wait 30-90 s on the file system or NCCL init;
    such loads, staggered per rank, were named a leader at high on healthy jobs
    (tests/job/test_late_staggered_load.py). Every rank, not one: a rank with a small model
    rising first from its low level while another rank already held more is left to the
    rules above (setting its rise aside alone would make a follower the leader)."""
    firsts = [rs[0] for rs in out.values() if rs]
    if len(firsts) < 2 or any(fr.baseline_bytes >= fr.threshold_bytes for fr in firsts):
        return
    for rs in out.values():
        if rs and not rs[0].warmup:
            rs[0] = replace(rs[0], warmup=True)


def _same_warmup_steps(timeline: Timeline, rs: list[FirstRise], k0: int, start_ns: int,
                       plateaus: dict[int, float], r: int) -> None:
    """Set aside (in place) the rises after ``rs[k0]``, a warm-up climbing from the rank's
    start (its first sample at ``start_ns``), that are the same warm-up's steps.

    A warm-up climbs in steps (activations come and go while it ramps): a rise that climbs
    again from a dip soon after the rank's start, back to about the level the warm-up had
    already reached — or to the level the other ranks' warm-ups reach (the same program; a
    noisy first sample can stand above the dip) — is the same warm-up. One that climbs well
    above both is not, however soon after the start (a fault planted early)."""
    others = [p for o, p in plateaus.items() if o != r]
    common = median_of(np.array(others)) if others else -np.inf
    series = timeline.ranks[r]
    interval = series.median_interval_ns() or 0
    x, t = series.values[FIELD], series.t_ns
    end = start_ns + max(2 * interval, WARMUP_FROM_START_NS)
    for k in range(k0 + 1, len(rs)):
        nxt = rs[k]
        if nxt.baseline_ns > end:
            break
        before = x[(t >= start_ns) & (t <= nxt.baseline_ns)]
        after = x[(t >= nxt.t_ns) & (t <= max(nxt.settled_ns, nxt.t_ns))]
        reached = np.nanmax(before) if before.size else -np.inf
        climbed = np.nanmax(after) if after.size else np.inf
        if climbed > max(reached, common) + 0.5 * nxt.threshold_bytes:
            break
        rs[k] = replace(nxt, warmup=True)


def _mark_restart_warmups(timeline: Timeline, out: dict[int, list[FirstRise]],
                          delays: dict[int, int], tolerance: dict[int, int],
                          plateaus: dict[int, float], settings: Settings) -> None:
    """A rank whose tracker started again inside its data — its process restarted (torchrun's
    elastic restart of the worker group, a pod restarted), as a later value of its start
    gauge proves (:func:`.tracker_edges.tracker_restarts`) — warms up again: the first rise
    seen after each later start, climbing from after it, is judged as the first rise after
    the first start is (in place): within the warm-up window reckoned from that start, and
    climbing from the restarted process's first sample or at the same delay after its start
    as another rank's warm-up (a first start's or a restart's). Its rise after a restart is
    the new process loading its model, not a rank leading the others (one pod restarted at
    the window's middle had its warm-up named a one-rank incident at high)."""
    tol = max(int(settings.clock_tolerance_s * 1e9), START_SLACK_NS)
    found = []  # (rank, index of the rise, the restart's first sample, delay, tolerance)
    for r, rs in out.items():
        if not rs:
            continue
        series = timeline.ranks[r]
        first, last = finite_ends(series.values[FIELD])
        t = series.t_ns
        end = int(t[last])
        for began in tracker_restarts(series, int(t[first]), end, tol):
            k = next((i for i, fr in enumerate(rs) if fr.t_ns >= began), None)
            if k is None or rs[k].warmup or rs[k].baseline_ns < began - tol:
                continue
            fr = rs[k]
            first_after = int(t[min(int(t.searchsorted(began - tol)), len(t) - 1)])
            warmup_ns = min(settings.warmup_s * 1e9, WARMUP_SHARE * (end - began))
            if not _within_warmup(fr, began, first_after, warmup_ns):
                continue
            interval = series.median_interval_ns() or 0
            found.append((r, k, first_after, fr.t_ns - began,
                          max(2 * interval, fr.hole_ns, 1_000_000_000)))
    for r, k, first_after, delay, own in found:
        fr = out[r][k]
        interval = timeline.ranks[r].median_interval_ns() or 0
        from_start = fr.baseline_ns - first_after <= max(2 * interval, WARMUP_FROM_START_NS)
        alike = any(abs(d - delay) <= max(tolerance[o], own) for o, d in delays.items()
                    if o != r) or any(abs(d - delay) <= max(t, own)
                                      for o, _, _, d, t in found if o != r)
        if from_start or alike:
            out[r][k] = replace(fr, warmup=True)
            if from_start:
                _same_warmup_steps(timeline, out[r], k, first_after, plateaus, r)


def _started(timeline: Timeline, r: int, rs: list[FirstRise], first_ns: int, interval: int,
             window_start_ns: int | None, tol: int, warmup_ns: int) -> tuple[bool, int, bool]:
    """(the window cut into rank ``r``'s run, the instant its warm-up is reckoned from, its
    first rise is it catching up). The tracker's own start edge, where its gauge was read,
    decides: started before the window, the rank was running (no warm-up at its first
    sample); started inside it, its warm-up runs from that start, however late its first
    sample came."""
    began = tracker_start(timeline.ranks[r], first_ns, max(tol, START_SLACK_NS))
    if began is not None:
        if window_start_ns is not None:
            return began + tol < window_start_ns, began, False
        # Files have no query window, but one may begin after its trackers did (an OTel
        # Collector started later, an archive's first files rotated away): a tracker that
        # started longer before the rank's first sample than a warm-up lasts, plus the two
        # intervals a scraper's first reads may lag the start by, was running, its warm-up
        # over before the data began. Only the warm-up window was allowed once, and ranks
        # first scraped 25-70 s after their start (15-60 s scrapes, 10 s late), their warm-up
        # at the second scrape, had it named at high (benchmarks/eval_blind_cap.py).
        return first_ns - began > warmup_ns + 2 * interval + 10**9, began, False
    # Without it, timing guesses. A rank whose data begins at the window's start was running
    # before it: no warm-up can be seen. Running, it has a sample within one interval of the
    # start (half an interval and a second more for a late scrape); a wider slack takes a rank
    # that started a few scrapes in for a cut one, and its warm-up for an incident named at
    # high (a missed scrape at the very start errs the other way: a rise called warm-up).
    cut = window_start_ns is not None and first_ns <= window_start_ns + 1.5 * interval + 10**9
    # Cut or started just after the window began, it cannot be told by timing; but a rise
    # from its very first sample to no more than the others already hold is the rank catching
    # up (its first scrape came mid warm-up), never a lead.
    return cut, first_ns, bool(rs) and cut and _catches_up(timeline, r, rs[0], first_ns,
                                                            interval)


def _within_warmup(rise: FirstRise, start_ns: int, first_ns: int, warmup_ns: float) -> bool:
    """``rise`` may lie within the warm-up window after the rank's start: seen within it, or
    seen at the sample right after the rank's first (at ``first_ns``: it may have happened just
    after that one, and a scrape up to an interval after the tracker's start is usual). With
    15 s scrapes a rank's warm-up shows at its second scrape, more than a quarter of what a rank
    that started 23 s before the incident observed — its warm-up was once named the first
    cause at high (a wrong rank)."""
    return rise.t_ns - start_ns <= warmup_ns or rise.earliest_ns <= first_ns


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
    baseline, within ``horizon_ns`` (the warm-up window) of its crossing, and before the rank's
    next rise began: an OOM after a later rise is that rise's (a warm-up that settled at 1 s
    was once taken for the rise that ran out at 11 s, after a spike at 10.5 s, and named the
    first cause ahead of the rank that really ran out first)."""
    ooms = _oom_times(timeline)
    for r, rs in out.items():
        times = ooms.get(r)
        if not times:
            continue
        for k, fr in enumerate(rs):
            end = fr.t_ns + horizon_ns
            if k + 1 < len(rs):
                end = min(end, rs[k + 1].baseline_ns)
            if fr.warmup and any(fr.baseline_ns <= t <= end for t in times):
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
    the rank catching up with the others, not leading them. One other rank holding data is
    enough: the first rank scraped, mid warm-up, rises while only one other has been
    scraped (a clean-clone production run, 2026-11-29: rank 1 named a single-rank incident at
    high for its warm-up, the two later ranks not yet scraped)."""
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
    if not held:
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
    with_field = ranks_reporting(timeline, timeline.rank_ids, FIELD)
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
    # A file's data has no query window; its own start (the earliest sample compared) stands
    # for one, so a file begun after its trackers is not blind over what came before it.
    blind = read_lag.blind_gaps(timeline, with_field,
                                window_start if window_start is not None
                                else _data_start(timeline, with_field),
                                int(settings.clock_tolerance_s * 1e9))
    fills = replica_mix.fill_runs(timeline)
    earlier = _earlier(timeline, candidates, with_field, all_rises, window_ns)
    incidents = [_judge(group, timeline, last_ns, missing, settings, warm_spans, res, blind,
                        fills, earlier) for group in _group(candidates, window_ns)]
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


def _data_start(timeline: Timeline, ranks: list[int]) -> int | None:
    """The earliest sample of ``ranks``: where a file's data begins."""
    firsts = [int(timeline.ranks[r].t_ns[0]) for r in ranks if len(timeline.ranks[r])]
    return min(firsts) if firsts else None


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
           res: int | None, blind_gaps: dict[int, np.ndarray], fills: dict[int, np.ndarray],
           earlier: Earlier) -> Incident:
    """One incident: leader only when its rise interval ends before every follower's begins.
    Taken once for all incidents: ``last_ns``, each compared rank's last sample time;
    ``res``, the timeline's resolution; ``warm_spans``, each warm-up's rank, earliest and
    settled time; ``blind_gaps``, each compared rank's blind holes (:mod:`.read_lag`);
    ``fills``, each rank's samples filled from another replica (:mod:`.replica_mix`);
    ``earlier``, every candidate rise's time, rank and the latest it can have been read
    (:func:`_read_by`), in time order."""
    inc = Incident(rises)
    order = sorted(rises.values(), key=lambda fr: (fr.t_ns, fr.rank))
    first = order[0]
    tol = int(settings.clock_tolerance_s * 1e9)
    # A rank still warming up when this incident began could have been part of it, unseen.
    t0, pad = first.t_ns, res or 0
    overlapping = sorted(r for r, earliest, settled in warm_spans if r not in rises
                         and earliest <= t0 <= settled + pad)
    if len(order) == 1:
        sure: Confidence = "medium" if missing else "high"
        if why := _unproven(first, [first], fills, earlier, settings, res):
            inc.notes.append(why)
            sure = "low"
        elif before := _warmed_before(first, warm_spans, settings, res):
            inc.notes.append(_warmed_before_note(before, first))
            sure = "low"
        return _judge_alone(inc, first, timeline, last_ns, settings, res, blind_gaps,
                            None if overlapping else sure)
    inc.onset_ns = order[1].t_ns
    lead = order[1].t_ns - first.t_ns
    # The earliest any follower can have risen, against the latest the leader can have: a
    # follower still seen low at or after the leader was seen high rose after it.
    bound = min(fr.earliest_ns for fr in order[1:]) - first.t_ns - tol
    steps = {fr.step for fr in order}
    # The leader's rise timed by a scrape stamp its exporter is proven to have answered late
    # may lie up to that lag later: a lead within it is a tie (:mod:`.read_lag`).
    doubts = {r: lag for r, lag in read_lag.stamp_doubts(timeline, {first.rank: first}).items()
              if bound < lag} if bound >= 0 else {}
    latest = first.t_ns  # the latest the leader's rise can have happened
    if doubts:
        inc.notes.append(read_lag.cap_note(doubts, lead))
        bound, latest = -1, first.t_ns + max(doubts.values())
    if bound >= 0 and None not in steps and len(steps) == 1:
        inc.kind = "workload"
        inc.notes.append(f"ranks {sorted(rises)} rose within the same training step "
                         f"{steps.pop()}: the workload, not one rank; no leader is named")
        tied = order
    elif bound >= 0 and not overlapping and (
            why := _blind_note(first, latest, blind_gaps, settings, res)
            or _unproven(first, order, fills, earlier, settings, res)):
        inc.notes.append(why)
        inc.suspects = [_suspect(first, lead, "low", res, timeline, bound=bound)]
        return inc
    elif bound >= 0 and not overlapping:
        inc.kind, inc.leader, inc.lead_bound_ns = "leader", first.rank, bound
        inc.confidence = "medium" if missing else "high"
        inc.suspects = [_suspect(first, lead, inc.confidence, res, timeline, bound=bound)]
        return inc
    else:
        tied = [fr for fr in order if fr.earliest_ns - tol < latest]
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


def _judge_alone(inc: Incident, first: FirstRise, timeline: Timeline,
                 last_ns: list[tuple[int, int]], settings: Settings, res: int | None,
                 blind_gaps: dict[int, np.ndarray], sure: Confidence | None) -> Incident:
    """A lone rise: named at ``sure`` (None: a warm-up overlapped it) when it leads the end of
    every other rank's data by at least the resolution and no other rank was blind before it."""
    others_end = min(end for r, end in last_ns if r != first.rank)
    lead = max(others_end - first.t_ns, 0)
    bound = others_end - first.t_ns - int(settings.clock_tolerance_s * 1e9)
    conf: Confidence = "low"
    if bound >= 0 and res and lead >= res and sure is not None:
        conf = sure
    blind = _blind(first, first.t_ns, blind_gaps, settings, res) if conf != "low" else {}
    if blind:
        conf = "low"
        inc.notes.append(read_lag.blind_note(blind, first.rank, first.t_ns))
    inc.kind, inc.leader, inc.confidence, inc.lead_bound_ns = ("single_rank", first.rank,
                                                               conf, max(bound, 0))
    inc.notes.append(f"only rank {first.rank} rose; the others never reached their "
                     "threshold outside their warm-up (lead measured to the end of their data)")
    inc.suspects = [_suspect(first, lead, conf, res, timeline, alone=True)]
    return inc


def _blind(first: FirstRise, latest: int, blind_gaps: dict[int, np.ndarray], settings: Settings,
           res: int | None) -> dict[int, tuple[int, int]]:
    """The other compared ranks blind (:func:`.read_lag.blind_gaps`) somewhere a rise of theirs
    would have come first: from one cascade window before the leader's rise interval to the
    latest the leader can have risen (a rise there would have been this incident's)."""
    window_ns = int(max(settings.cascade_window_s * 1e9, 2 * (res or 0)))
    return read_lag.blind_over(blind_gaps, first.rank, first.earliest_ns - window_ns, latest)


def _blind_note(first: FirstRise, latest: int, blind_gaps: dict[int, np.ndarray],
                settings: Settings, res: int | None) -> str | None:
    """Every other rank seen low until after the leader is the claim; a blind one was not."""
    blind = _blind(first, latest, blind_gaps, settings, res)
    return read_lag.blind_note(blind, first.rank, first.t_ns) if blind else None


def _unproven(first: FirstRise, order: list[FirstRise], fills: dict[int, np.ndarray],
              earlier: Earlier, settings: Settings, res: int | None) -> str | None:
    """Why a leader's rise does not prove it led, if it does not: it may have followed a rise
    of theirs, seen late through its own hole (:func:`_rose_before`), or a rise of the incident
    compares one HA replica's phase with the other's (:mod:`.replica_mix`)."""
    before, edge_only = _rose_before(first, earlier, settings, res)
    if before:
        return _before_note(before, first, edge_only)
    if mixed := replica_mix.across_replicas(fills, order):
        return replica_mix.mixed_note(mixed, first.rank)
    return None


def _earlier(timeline: Timeline, candidates: list[FirstRise], ranks: list[int],
             all_rises: dict[int, list[FirstRise]], window_ns: int) -> Earlier:
    """:data:`Earlier` of the candidate rises and of the rises only tracker edges show."""
    by_time = sorted([(fr.t_ns, fr.rank, _read_by(fr, timeline), False) for fr in candidates]
                     + _unseen(timeline, ranks, all_rises, window_ns))
    return (np.array([t for t, _, _, _ in by_time], np.int64),
            np.array([r for _, r, _, _ in by_time]),
            np.array([t for _, _, t, _ in by_time], np.int64),
            np.array([u for _, _, _, u in by_time], bool))


def _unseen(timeline: Timeline, ranks: list[int], all_rises: dict[int, list[FirstRise]],
            window_ns: int) -> list[tuple[int, int, int, bool]]:
    """Rises only a rank's tracker edge shows (:func:`.tracker_edges.unseen_rises`: no rise of
    its samples, warm-ups included, within a cascade window of the edge), as :data:`Earlier`
    entries: the edge's own time is when it rose. A leader's transient rise that fell back
    between two scrapes left its follower the only rank seen rising; on the calibration jobs
    read as the tracker exports them, that follower was named alone at high."""
    out = []
    for r in ranks:
        seen = [(fr.earliest_ns, fr.t_ns) for fr in all_rises.get(r, [])]
        out += [(t, r, t, True)
                for t in unseen_rises(timeline.ranks[r], seen, window_ns)]
    return out


def _rose_before(first: FirstRise, earlier: Earlier, settings: Settings,
                 res: int | None) -> tuple[list[int], list[int]]:
    """Other ranks with a rise from one cascade window before ``first``'s rise interval to its
    crossing sample: ``first`` may have risen anywhere in that interval, so within their
    incident's window — a follower of theirs, seen late (its own hole), not a rank that led.
    Their rise is taken at the latest it can have been read (:func:`_read_by`), not at its
    stamp: a follower 28 s behind (30 s window, 15 s scrapes) whose leader's crossing scrape
    was stamped 4 s before it was answered lay 30.2 s after that stamp, and the two were named
    two lone rises, each at high — the follower the wrong rank. Also returns those of them
    that only their tracker's edge shows there (:func:`_unseen`)."""
    window_ns = int(max(settings.cascade_window_s * 1e9, 2 * (res or 0)))
    t, ranks, read_by, unseen = earlier
    lo_ns = first.earliest_ns - window_ns
    slack = int((read_by - t).max()) if len(t) else 0  # t is sorted; read_by need not be
    lo, hi = np.searchsorted(t, [lo_ns - slack, first.t_ns], side="left")
    hits = [(int(r), bool(u)) for r, by, u in zip(ranks[lo:hi].tolist(),
                                                  read_by[lo:hi].tolist(),
                                                  unseen[lo:hi].tolist(), strict=True)
            if r != first.rank and by >= lo_ns]
    before = sorted({r for r, _ in hits})
    return before, [r for r in before if all(u for k, u in hits if k == r)]


def _read_by(fr: FirstRise, timeline: Timeline) -> int:
    """The latest instant the sample that showed ``fr`` can have been read. A scraper stamps a
    sample when its scrape starts and the exporter answers within the scrape timeout, which
    Prometheus holds to at most the scrape interval: a rise a scrape stamp times may have been
    read up to one of its rank's intervals after that stamp. A tracker's edge is its own
    sample's time; the rank's own interval bounds the rest (an archive's samples are the
    tracker's own, and its interval is the tracker's)."""
    if fr.from_edge_event:
        return fr.t_ns
    return fr.t_ns + int(timeline.ranks[fr.rank].median_interval_ns() or 0)


def _warmed_before(first: FirstRise, warm_spans: list[tuple[int, int, int]],
                   settings: Settings, res: int | None) -> list[int]:
    """Other ranks with a rise set aside as warm-up that began from one cascade window before
    ``first``'s rise interval to its crossing: they did reach a threshold, just before it, so
    ``first`` is not proven to be the only rank that rose, nor the first. Which rise is a
    warm-up is judged from timing after each rank's start; ranks whose trackers started late
    (a loaded host) had the same fault set aside on one rank (inside its warm-up window) and
    judged on the next (just outside its own) — named alone at high: the wrong rank."""
    window_ns = int(max(settings.cascade_window_s * 1e9, 2 * (res or 0)))
    lo = first.earliest_ns - window_ns
    return sorted({r for r, earliest, _ in warm_spans
                   if r != first.rank and lo <= earliest < first.t_ns})


def _warmed_before_note(ranks: list[int], first: FirstRise) -> str:
    return (f"ranks {ranks[:16]} rose within a cascade window before rank {first.rank}, in "
            "rises set aside as their warm-up (soon after their start): if one of those was "
            f"no warm-up, rank {first.rank} followed it, so it is not named above low. The "
            "ranks' start times (a late start moves a fault into the warm-up window) or "
            "their archives would decide it")


def _before_note(ranks: list[int], first: FirstRise, edge_only: list[int]) -> str:
    if edge_only:
        return (f"the trackers of ranks {edge_only[:16]} set a first-rise edge within a cascade "
                f"window before rank {first.rank}'s rise that their samples never show (a rise "
                "that fell back between two scrapes; the edge gauge keeps its time): rank "
                f"{first.rank} may have followed them, so it is not named above low. Their "
                "trackers' archives (every sample at its own time) would decide it")
    return (f"rank {first.rank}'s rise is known only to within "
            f"{(first.t_ns - first.earliest_ns) / 1e9:.3g} s (its last sample before it), and "
            f"ranks {ranks[:16]} rose within a cascade window before that (a rise a scrape "
            "stamp times taken at the latest it can have been read, one interval after the "
            f"stamp): rank {first.rank} "
            "may have followed them, seen late, so it is not named above low. Its tracker's "
            "archive (every sample at its own time) or its edge gauges would decide it")


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
