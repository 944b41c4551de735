"""The tracker's clean-stop edge as the analysis reads it: one place, for every judgement that
asks whether a rank that went silent stopped on purpose.

Sources turn ``stormotel.tracker.stop.timestamp`` into ``KIND_TRACKER_STOP`` markers
(docs/algorithms.md, "A clean stop is no death", lists the read paths). Two judgements ask
about it: the dead-rank rule (:mod:`.dead_rank`: a rank silent while its peers go on) and the
stall verdict's telemetry check (``stalls.verdict.telemetry_failures``: memory at the device's
limit when a blamed rank went silent). Both ask the same question — does a stop edge explain
the silence that starts at this rank's last sample? — so both call :func:`clean_stop`, with the
same window: from :data:`STOP_BEFORE_INTERVALS` sampling intervals before the last sample (the
edge is stamped as the stop begins, and a TSDB holds the scrape a lingering endpoint serves
after it) to the silence threshold after it. An older stop (a run that stopped, then a restart
that died later) or one long after the silence began (a hung rank stopped later) explains
nothing.

What a stop edge does not say: *why* the tracker stopped. ``stop_tracking``, SIGTERM and the
interpreter's exit all write it, and the exit handler also runs after an uncaught exception
(``MemoryTracker._stop_at_exit``); only an OOM is told apart (its own event, written first).
Each judgement weighs that itself (dead_rank asks the peers' steps).

The tracker's start edge (``stormotel.tracker.start.timestamp``, a ``KIND_TRACKER_START``
marker, read from a TSDB and from OTLP files: archives, a collector's file) answers what sample
timing can only guess about a rank whose data begins late: was it running before the query
window (or the file) began, and was it unseen between its start and its first sample (a
scrape target discovered late)? :func:`tracker_start` gives it to
the first-cause warm-up rules (:func:`.first_cause.mark_warmups`) and to the blind-rank cap
(:func:`.read_lag.blind_gaps`). Without the gauge both keep their timing rules.

The tracker's first-rise edge (``stormotel.edge.timestamp{edge="first_rise"}``, a
``KIND_FIRST_RISE`` marker) is set on the tracker's own samples (every 100 ms by default) and
keeps the time of the latest qualifying rise after the memory falls back. A rise that fell back
between two scrapes (an allocation that failed and was freed) leaves no sample, but the next
scrape still reads its edge: :func:`unseen_rises` gives those edges to the first-cause rules
(another rank rose there, unseen by the samples).
"""

from __future__ import annotations

import numpy as np
from stormotel.analyzers.timeline import (
    KIND_FIRST_RISE,
    KIND_TRACKER_START,
    KIND_TRACKER_STOP,
    RankSeries,
)

#: A clean stop this many sampling intervals before the last sample still explains it: the stop
#: edge is stamped as the stop begins (a last sample may follow it), and a TSDB holds the last
#: scrape, which a lingering endpoint serves after the stop.
STOP_BEFORE_INTERVALS = 2


def clean_stop(series: RankSeries, end: int, interval_ns: int, after_ns: int) -> int | None:
    """The time of the rank's clean stop that explains silence from ``end`` (its last
    sample, the series sampled every ``interval_ns``): a stop marker from
    ``STOP_BEFORE_INTERVALS`` intervals before ``end`` to ``after_ns`` after it; else None."""
    m = series.markers
    if KIND_TRACKER_STOP not in m.kinds:
        return None
    lo, hi = end - STOP_BEFORE_INTERVALS * interval_ns, end + after_ns
    stops = [int(t) for t, k in zip(m.start_ns.tolist(), m.kind.tolist(), strict=True)
             if k == KIND_TRACKER_STOP and lo <= t <= hi]
    return min(stops) if stops else None


def tracker_start(series: RankSeries, first_ns: int, slack_ns: int) -> int | None:
    """When the tracker that took ``series``' first sample (at ``first_ns``) started: the
    latest start marker at most ``slack_ns`` after that sample (the gauge is the tracker
    host's clock, the samples a scraper's), never later than the sample itself; None without
    one (no gauge, or only a later restart's)."""
    m = series.markers
    if KIND_TRACKER_START not in m.kinds:
        return None
    starts = [int(t) for t, k in zip(m.start_ns.tolist(), m.kind.tolist(), strict=True)
              if k == KIND_TRACKER_START and t <= first_ns + slack_ns]
    return min(max(starts), first_ns) if starts else None


def tracker_restarts(series: RankSeries, first_ns: int, last_ns: int, slack_ns: int) -> list[int]:
    """Starts of later trackers of the rank, in order: start markers more than ``slack_ns``
    after its first sample (at ``first_ns``) and no later than its last (``last_ns``). The
    gauge is set once per process, so each is the rank's process started again (a restart);
    empty without the gauge or without a later value."""
    m = series.markers
    if KIND_TRACKER_START not in m.kinds:
        return []
    return sorted({int(t) for t, k in zip(m.start_ns.tolist(), m.kind.tolist(), strict=True)
                   if k == KIND_TRACKER_START and first_ns + slack_ns < t <= last_ns})


def unseen_rises(series: RankSeries, seen: list[tuple[int, int]], near_ns: int) -> list[int]:
    """The times of the rank's first-rise edges that none of its rises the samples show
    (``seen``: each one's earliest and latest time) lies within ``near_ns`` of: rises its
    tracker saw and its scrapes did not (risen and fallen back between them). Empty without
    the edge gauge."""
    m = series.markers
    if KIND_FIRST_RISE not in m.kinds:
        return []
    edges = m.start_ns[m.kind == KIND_FIRST_RISE].astype(np.int64)
    if seen:
        lo = np.array([a for a, _ in seen], np.int64) - near_ns
        hi = np.array([b for _, b in seen], np.int64) + near_ns
        near = ((edges[:, None] >= lo[None, :]) & (edges[:, None] <= hi[None, :])).any(axis=1)
        edges = edges[~near]
    return sorted({int(t) for t in edges.tolist()})
