"""What each rank's dump covers: a Flight Recorder dump is the tail of a bounded ring.

The recorder keeps the last ``TORCH_NCCL_TRACE_BUFFER_SIZE`` (``TORCH_FR_BUFFER_SIZE``) entries
and numbers every entry it ever recorded (``record_id``, from 0; since torch 2.8 from 0 again
after a ``reset``), so a dump whose first record id is above 0 has dropped older entries. Each
rank dumps at its own moment and records at its own rate, so the dumps of one job cover
different stretches of time: a rank whose ring holds no entry of a group may simply have
dropped it. Absence proves something only where the rank's window reaches back to the moment
the others entered the collective: a ring that dropped nothing, or whose oldest entry was
created before that moment (minus :data:`CLOCK_SLACK_NS`, for clock skew between hosts and
ranks that enqueue a little ahead of each other). No format version (2.3 to 2.10) writes the
time of the dump itself; the newest entry's creation time bounds it from below.

The module also answers who waits for whom: a rank's oldest entry that has not completed is
what its stream is blocked on; the members of that group that have not issued the same
sequence id (or the peer of a send/recv) are what it waits for. A rank with entries but
nothing pending, that others wait for, is stuck outside communication.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from stormotel.analyzers.stalls.fr_groups import GroupView
from stormotel.analyzers.stalls.fr_p2p import peer_of
from stormotel.analyzers.stalls.fr_types import DumpSet, FrEntry, GroupKey

#: how much older a rank's oldest entry must be than a moment for its window to cover it
CLOCK_SLACK_NS = 5_000_000_000
#: how far two hosts' clocks may disagree (NTP keeps a cluster within tens of ms)
CLOCK_SKEW_NS = 50_000_000
#: a dump whose rank recorded at most this fraction of the median of its peers is "short"
SHORT_FRACTION = 0.25
#: a rank's newest entry this much older than the median newest entry of its peers is "stale"
STALE_NS = 1_000_000_000


@dataclass
class RankWindow:
    """The stretch of one rank's history its dump holds."""

    rank: int
    entries: int
    first_record_id: int | None = None
    last_record_id: int | None = None
    oldest_ns: int | None = None  #: earliest ``time_created_ns`` held
    newest_ns: int | None = None  #: latest ``time_created_ns`` held (the dump is later)
    #: the ring dropped older entries (record ids start above 0, or the ring is full)
    dropped: bool = False
    #: entries recorded since start (or reset): ``last_record_id + 1``
    recorded: int = 0
    #: completion is tracked on this rank (some entry completed): "pending" means something
    state_known: bool = False
    pending: int = 0
    #: the oldest entry not completed: what this rank's stream waits on
    blocked_on: FrEntry | None = None
    #: a dump of active entries only (``only_active=True``): completed ones were left out
    only_active: bool = False

    def covers(self, t_ns: int | None) -> bool:
        """The window provably holds whatever this rank recorded from ``t_ns`` on."""
        if not self.entries:
            return False
        if not self.dropped:
            # everything since start (or since a reset, torch >= 2.8) — unless that start is
            # itself later than the moment (a rank that reset its recorder, or started late)
            return t_ns is None or self.oldest_ns is None \
                or self.oldest_ns <= t_ns + CLOCK_SLACK_NS
        return t_ns is not None and self.oldest_ns is not None \
            and self.oldest_ns + CLOCK_SLACK_NS <= t_ns

    def blocked_before(self, t_ns: int | None) -> bool:
        """The rank may already have been waiting inside another collective at ``t_ns``
        (within clock slack: erring this way keeps a waiting rank from being blamed)."""
        b = self.blocked_on
        if b is None:
            return False
        if t_ns is None or not b.time_created_ns:
            return True
        return b.time_created_ns <= t_ns + CLOCK_SKEW_NS

    def as_dict(self) -> dict[str, Any]:
        return {"entries": self.entries, "record_ids": [self.first_record_id,
                                                        self.last_record_id],
                "time_created_ns": [self.oldest_ns, self.newest_ns],
                "dropped_older": self.dropped, "pending": self.pending if self.state_known
                else None}


@dataclass
class Windows:
    """Every rank's window, the ring size they imply, and the wait-for relation."""

    by_rank: dict[int, RankWindow]
    #: inferred ring size (entries held by a rank that dropped older ones), None if unknown
    buffer_size: int | None
    #: rank -> ranks it waits for (from its oldest pending entry)
    waits_for: dict[int, set[int]] = field(default_factory=dict)
    _waited_by: dict[int, set[int]] | None = field(default=None, repr=False)
    _waiting_on: dict[frozenset[int], set[int]] = field(default_factory=dict, repr=False)
    _reached: dict[frozenset[int], set[int]] = field(default_factory=dict, repr=False)

    def covers(self, rank: int, t_ns: int | None) -> bool:
        w = self.by_rank.get(rank)
        return w is not None and w.covers(t_ns)

    def waiting_on(self, targets: frozenset[int]) -> set[int]:
        """Every rank that waits for one of ``targets``, directly or through ranks that wait
        in turn (one reverse walk per target set, cached: big jobs ask it per finding)."""
        hit = self._waiting_on.get(targets)
        if hit is None:
            if self._waited_by is None:
                self._waited_by = {}
                for r, ws in self.waits_for.items():
                    for m in ws:
                        self._waited_by.setdefault(m, set()).add(r)
            hit = _walk(targets, self._waited_by)
            self._waiting_on[targets] = hit
        return hit

    def waited_for_by(self, sources: frozenset[int]) -> set[int]:
        """Every rank one of ``sources`` waits for, directly or transitively (cached)."""
        hit = self._reached.get(sources)
        if hit is None:
            hit = _walk(sources, self.waits_for)
            self._reached[sources] = hit
        return hit

    def describe(self, ranks: list[int]) -> dict[str, Any]:
        """The ring size and the windows of ``ranks`` (evidence stays small on big jobs)."""
        return {"buffer_size": self.buffer_size,
                "ranks": {str(r): self.by_rank[r].as_dict() for r in ranks
                          if r in self.by_rank}}


def _walk(start: frozenset[int], edges: dict[int, set[int]]) -> set[int]:
    """Every node reachable from ``start`` along ``edges`` (``start`` itself only if on a
    cycle back to it)."""
    seen: set[int] = set()
    todo = [m for r in start for m in edges.get(r, ())]
    while todo:
        r = todo.pop()
        if r not in seen:
            seen.add(r)
            todo.extend(edges.get(r, ()))
    return seen


def rank_windows(ds: DumpSet) -> dict[int, RankWindow]:
    out: dict[int, RankWindow] = {}
    for r, d in ds.dumps.items():
        es = d.entries  # sorted by record id
        w = RankWindow(r, len(es))
        if es:
            w.first_record_id, w.last_record_id = es[0].record_id, es[-1].record_id
            # entries are created in record order on one clock: the ends hold the extremes
            w.oldest_ns = next((e.time_created_ns for e in es if e.time_created_ns), None)
            w.newest_ns = next((e.time_created_ns for e in reversed(es) if e.time_created_ns),
                               None)
            w.dropped = es[0].record_id > 0
            w.recorded = es[-1].record_id + 1
            w.only_active = _only_active(es)
            w.state_known = w.only_active or any(e.completed for e in es)
            if w.state_known:
                open_ = [e for e in es if not e.completed]
                w.pending = len(open_)
                w.blocked_on = open_[0] if open_ else None
        out[r] = w
    return out


def _only_active(es: list[FrEntry]) -> bool:
    """A dump taken with ``only_active`` (``_dump_nccl_trace(..., onlyActive=True)``, as
    NVIDIA's resiliency extension does): not one entry completed, their states are NCCL's
    ``scheduled``/``started``, and the record ids skip (completed entries between them were
    left out) or start past 0. Every entry in it is pending by construction."""
    if not es or any(e.completed for e in es):
        return False
    if any(e.state not in ("scheduled", "started") or e.backend not in ("nccl", "")
           for e in es):
        return False
    ids = [e.record_id for e in es]
    return ids[0] > 0 or ids[-1] - ids[0] + 1 > len(ids)


def build_windows(ds: DumpSet, groups: list[GroupView]) -> Windows:
    by_rank = rank_windows(ds)
    dropped = [w.entries for w in by_rank.values() if w.dropped]
    size = max(dropped) if dropped else None
    if size:
        for w in by_rank.values():  # a full ring: the next entry drops one, so treat it so
            w.dropped = w.dropped or w.entries >= size
    windows = Windows(by_rank, size)
    by_key = {g.key: g for g in groups}
    silent = set(ds.missing_ranks) | set(ds.empty_ranks)
    tables: dict[GroupKey, _GroupTable] = {}
    for r, w in by_rank.items():
        e = w.blocked_on
        g = by_key.get(e.group) if e is not None else None
        if e is None or g is None:
            continue
        if e.is_p2p:
            peer = peer_of(e, sorted(g.expected))
            waits = {peer} if peer is not None else set()
        else:
            t = tables.get(g.key) or tables.setdefault(g.key, _GroupTable(g))
            waits = {m for m in g.expected - {r}
                     if m in silent or t.not_issued(m, e, windows)}
            if not waits:  # every member issued it: those whose stream is stuck before it
                waits = {m for m in g.expected - {r} if t.stuck_before(by_rank.get(m), m, e)}
        if waits:
            windows.waits_for[r] = waits
    return windows


class _GroupTable:
    """Per member of one group: the last sequence id it issued and its pending entries by
    sequence id — built once, so asking about every member of a 1000-rank group stays cheap."""

    def __init__(self, g: GroupView) -> None:
        self.last: dict[int, int] = {}
        self.pending: dict[int, dict[int, FrEntry]] = {}
        for m in g.entries.keys() | g.status.keys():
            ents = g.entries.get(m, ())
            st = g.status.get(m)
            self.last[m] = max([x.seq_id for x in ents] + ([st.last_enqueued] if st else []))
            self.pending[m] = {x.seq_id: x for x in ents if not x.completed}

    def not_issued(self, m: int, e: FrEntry, windows: Windows) -> bool:
        """Member ``m`` has not issued ``e``'s collective (as far as its dump can tell)."""
        if m in self.last:
            return self.last[m] < e.seq_id
        w = windows.by_rank.get(m, RankWindow(m, 0))
        # an only-active dump without the group: completed all of it, or never issued this
        # one — it may be what holds the collective up, so it counts as waited for
        return windows.covers(m, e.time_created_ns) or not w.entries or w.only_active

    def stuck_before(self, w: RankWindow | None, m: int, e: FrEntry) -> bool:
        """The member's own entry for ``e``'s collective is pending behind an older pending
        entry of its stream (so ``e`` cannot run there yet). A member whose entry for it is
        absent or completed holds nothing up."""
        b = w.blocked_on if w is not None else None
        mine = self.pending.get(m, {}).get(e.seq_id)
        return b is not None and mine is not None and b.record_id < mine.record_id


def latest_created(g: GroupView, ranks: set[int] | None = None) -> int | None:
    """When the group's newest collective was entered (the latest creation time held)."""
    # each rank's lists are in sequence / record order: its newest entry is the last one
    times = [lst[-1].time_created_ns for table in (g.entries, g.p2p)
             for r, lst in table.items() if lst and (ranks is None or r in ranks)]
    return max((t for t in times if t), default=None)


@dataclass(frozen=True)
class Outside:
    """A rank that evidence says was stuck outside communication, and why."""

    rank: int
    category: str  #: empty_dump / short_dump / stale_dump / outside_communication
    reason: str


def outside_communication(ds: DumpSet, groups: list[GroupView], windows: Windows
                          ) -> list[Outside]:
    """Ranks stuck outside communication: an empty dump; a dump far shorter than its peers'
    (recorded at most :data:`SHORT_FRACTION` of the median); a rank whose stream is stuck in a
    collective its peers completed (:func:`stuck_streams`); or a rank with nothing pending
    that another rank waits for (``stale_dump`` when its newest entry is also at least
    :data:`STALE_NS` older than its peers'). Absence alone never proves more than that the
    rank did not speak: callers set the confidence from how much of the world spoke."""
    out = [Outside(r, "empty_dump", _empty_reason(ds, r)) for r in ds.empty_ranks]
    live = {r: w for r, w in windows.by_rank.items() if w.entries}
    if len(live) < 2:
        return out
    out += [Outside(r, "stream_stuck", why) for r, why in sorted(stuck_streams(groups,
                                                                              windows).items())]
    stuck = {o.rank for o in out}
    waited_on = {m for ws in windows.waits_for.values() for m in ws}
    for r, w in sorted(live.items()):
        if r in stuck:
            continue
        peers = [p for p in live.values() if p.rank != r]
        median_recorded = statistics.median(p.recorded for p in peers)
        waiting = w.state_known and w.pending > 0  # inside communication: a victim
        if not waiting and w.recorded <= SHORT_FRACTION * median_recorded:
            out.append(Outside(r, "short_dump", f"it recorded {w.recorded} entr"
                               f"{'y' if w.recorded == 1 else 'ies'} in all where its peers "
                               f"recorded {median_recorded:g} (median)"))
            continue
        if not (w.state_known and w.pending == 0 and r in waited_on):
            continue
        waiters = sorted(q for q, ws in windows.waits_for.items() if r in ws)
        newest = [p.newest_ns for p in peers if p.newest_ns is not None]
        gap = (statistics.median(newest) - w.newest_ns) if newest and w.newest_ns else None
        if gap is not None and gap >= STALE_NS:
            out.append(Outside(r, "stale_dump", f"nothing pending on it, rank(s) {waiters} wait "
                               f"for it, and its newest entry is {gap / 1e9:.1f} s older than "
                               "its peers' (median)"))
        else:
            out.append(Outside(r, "outside_communication", f"nothing pending on it while "
                               f"rank(s) {waiters} wait for it"))
    return out



def _empty_reason(ds: DumpSet, r: int) -> str:
    d = ds.dumps[r]
    if d.form == "empty":
        return ("its dump file is empty (stuck holding the GIL, or killed while dumping)")
    idle = d.pg_status and all(st.last_completed >= st.last_enqueued
                               for st in d.pg_status.values())
    return ("its dump holds no entries" + (" and its pg_status shows every collective it "
                                           "enqueued completed: it stopped issuing any"
                                           if idle else "")
            + " (stuck outside communication, e.g. holding the GIL)")


def stuck_streams(groups: list[GroupView], windows: Windows) -> dict[int, str]:
    """Ranks whose oldest pending entry is a collective every other member that recorded the
    group has completed (``pg_status`` last completed at or past it): the rank's own GPU
    work stopped (a CUDA error leaves its events unqueryable, a hung kernel never ends) while
    its peers went on — it is not waiting for anyone."""
    by_key = {g.key: g for g in groups}
    out: dict[int, str] = {}
    for r, w in windows.by_rank.items():
        e = w.blocked_on
        g = by_key.get(e.group) if e is not None and not e.is_p2p else None
        if e is None or g is None:
            continue
        mine = g.status.get(r)
        if mine is not None and mine.last_completed >= e.seq_id:
            continue
        others = [m for m in g.expected - {r} if m in g.status]
        if others and all(g.status[m].last_completed >= e.seq_id for m in others):
            out[r] = (f"its stream waits in {e.op} seq {e.seq_id} of group "
                      f"{e.group[0]}:{e.group[1]}, which rank(s) {sorted(others)} completed "
                      "(their pg_status): its own GPU work stopped (CUDA error, hung kernel)")
    return out
