"""How late a rank's exporter answered its scrapes, as its own edge gauges prove it.

A scraper stamps each sample with the time its scrape *started*; the exporter reads the
tracker's state when it answers. On a CPU-starved host the answer can come seconds later, so a
sample stamped before an incident can show memory that rose after it. The edge gauges give the
proof: a scrape that reports an edge (the tracker's own sample time) lying after its own stamp
was answered at least that much later (TSDB sources keep, per edge, the stamp of the earliest
scrape that reported it: ``EDGE_SEEN_ATTR``).

A rise timed by such a rank's scrape stamp (not by the tracker's edge) is known only to within
that lag, so a lead smaller than the lag is not a lead: the first-cause verdict is capped to a
tie and the note says which rank, by how much, and what to collect. The usual late reads are
caught before this, in :func:`.rises.timed_by_edge` (the edge the late scrape reported times
the rise); this is the guard for the rises no edge timed.

The same guard for a rank not read at all (:func:`blind_gaps`, :func:`blind_over`): no sample
over the span where its rise would have come before the leader's means it was not seen low
there, so that leader is at most low.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from stormotel.analyzers.algorithms.rises import FirstRise
from stormotel.analyzers.algorithms.tracker_edges import tracker_start
from stormotel.analyzers.timeline import EDGE_MARKER_KINDS, EDGE_SEEN_ATTR, Timeline

#: A scrape answered this much after its stamp is usual (the exporter's own work); later is late.
USUAL_ANSWER_NS = 100_000_000
#: Lags proven this long before or after an incident's first rise count for it (a starved host
#: stays starved for a while; one scrape interval of 15 s either side, with room).
NEAR_NS = 30_000_000_000

_EDGE_KINDS = frozenset(EDGE_MARKER_KINDS.values())


def proven_lag_ns(timeline: Timeline, rank: int, around_ns: int) -> int:
    """The longest a scrape of ``rank`` within :data:`NEAR_NS` of ``around_ns`` is proven to
    have been answered after its stamp (0 when no edge proves any)."""
    series = timeline.ranks.get(rank)
    if series is None or not len(series.markers):
        return 0
    m = series.markers
    worst = 0
    near = np.flatnonzero(np.abs(m.start_ns - around_ns) <= NEAR_NS)
    for k in near.tolist():
        if m.kind[k] not in _EDGE_KINDS or k >= len(m.attrs):
            continue
        attrs = m.attrs[k]
        seen = attrs.get(EDGE_SEEN_ATTR) if isinstance(attrs, Mapping) else None
        if isinstance(seen, int | float):
            worst = max(worst, int(m.start_ns[k]) - int(seen))
    return worst if worst > USUAL_ANSWER_NS else 0


def stamp_doubts(timeline: Timeline, rises: dict[int, FirstRise]) -> dict[int, int]:
    """Rank → proven answer lag, for the ranks of one incident whose rise is timed by a scrape
    stamp (not by the tracker's edge) while their exporter is proven to have answered late."""
    t0 = min(fr.t_ns for fr in rises.values())
    out = {}
    for r, fr in rises.items():
        if fr.from_edge_event:
            continue
        lag = proven_lag_ns(timeline, r, t0)
        if lag:
            out[r] = lag
    return out


def cap_note(doubts: dict[int, int], lead_ns: int) -> str:
    """Why a lead is not named: which ranks were read late, by how much, what to collect."""
    worst = ", ".join(f"rank {r} ≥ {lag / 1e9:.3g} s" for r, lag in sorted(doubts.items())[:16])
    return (f"the scrapes of some ranks were answered late ({worst} after their stamps, as "
            "their edge gauges prove): a rise timed by such a stamp may have happened up to "
            f"that much later, so a lead of {lead_ns / 1e9:.3g} s is not a lead — a tie. The "
            "trackers' archives (every sample at its own time) or their edge gauges on every "
            "rank would decide it; a starved host delays its exporters")


# A rank that was not read at all is the other half of the same question. A leader is named
# because every other rank was seen low until after it; a rank with no sample over part of the
# span before the leader's rise (its tracker or exporter stopped: a starved host) was not seen,
# and could have risen there first — even risen and fallen back, leaving no rise at all (the oom
# job with rank 1's tracker stopped over its leak named another rank's later rise at high). Its
# own resolution is its median interval; a hole well above that is blindness, not sampling.

#: A hole this many times the rank's own median interval is blindness (two missed reads are
#: not: a busy scraper skips one now and then).
BLIND_FACTOR = 4
#: ... and at least this long (a fast tracker's jitter under load is not blindness).
BLIND_MIN_NS = 1_000_000_000


def blind_gaps(timeline: Timeline, ranks: list[int], window_start_ns: int | None = None,
               slack_ns: int = 0) -> dict[int, np.ndarray]:
    """Rank → its blind holes, an ``(n, 2)`` array of (last sample before, first sample after),
    for the ranks that have any (:data:`BLIND_FACTOR` × the rank's median interval and
    :data:`BLIND_MIN_NS`). Taken once per analysis: one pass over each rank's sample times.

    A rank whose tracker's start edge (:func:`.tracker_edges.tracker_start`) lies that much
    before its first sample ran unseen over its head (a scrape target discovered late): the
    hole from its start (or the query window's start, ``window_start_ns``, if later) to its
    first sample is blind too. Without the edge nothing says the head was missed."""
    out = {}
    for r in ranks:
        s = timeline.ranks.get(r)
        med = s.median_interval_ns() if s is not None else None
        if s is None or not med:
            continue
        t = s.t_ns
        limit = max(BLIND_FACTOR * med, BLIND_MIN_NS)
        k = np.flatnonzero(np.diff(t) > limit)
        holes = np.stack([t[k], t[k + 1]], axis=1)
        began = tracker_start(s, int(t[0]), max(slack_ns, BLIND_MIN_NS))
        if began is not None:
            head_from = began if window_start_ns is None else max(began, window_start_ns)
            if int(t[0]) - head_from > limit:
                holes = np.concatenate([np.array([[head_from, int(t[0])]], np.int64), holes])
        if len(holes):
            out[r] = holes
    return out


def blind_over(gaps: dict[int, np.ndarray], leader: int, from_ns: int, to_ns: int,
               ) -> dict[int, tuple[int, int]]:
    """Rank (other than ``leader``) → its longest blind hole overlapping ``[from_ns, to_ns]``."""
    out = {}
    for r, holes in gaps.items():
        if r == leader:
            continue
        hit = holes[(holes[:, 0] < to_ns) & (holes[:, 1] > from_ns)]
        if len(hit):
            a, b = hit[int(np.argmax(hit[:, 1] - hit[:, 0]))].tolist()
            out[r] = (int(a), int(b))
    return out


def blind_note(holes: dict[int, tuple[int, int]], leader: int, origin_ns: int) -> str:
    """Why a leader is not named while another rank was blind: who, when, what to collect."""
    shown = ", ".join(f"rank {r} from {(a - origin_ns) / 1e9:+.3g} s to "
                      f"{(b - origin_ns) / 1e9:+.3g} s ({(b - a) / 1e9:.3g} s)"
                      for r, (a, b) in sorted(holes.items())[:16])
    return (f"some ranks have no sample over part of the span before rank {leader}'s rise "
            f"({shown}, relative to that rise; well above their own sampling interval): they "
            "were not seen and could have risen there first, even risen and fallen back, so "
            f"rank {leader} is not named above low. Their trackers' archives or logs over that "
            "span would decide it (a stopped or starved tracker leaves this hole; so does a "
            "scrape target found after its tracker started, as its start gauge shows: scrape "
            "it from its start)")
