"""Point-to-point (send/recv) entries matched by peer: who never posted their side.

A pipeline stage that never posts its ``recv`` leaves its neighbour's ``send`` pending for
ever. Entries are matched per ordered pair (source, destination) of *global* ranks: the peers in
``nccl:send 1->2`` / ``nccl:recv 2<-1`` are group ranks, mapped through the group's sorted
members. Counting only the *pending* (not completed) operations of each side keeps the match
right whatever the ring buffers dropped (they drop the oldest, completed ones): more pending
sends from A to B than pending receives on B from A means B never posted the receive, and the
other way round. A rank blamed by one pair that itself waits in another pair is part of a cycle
(send/send deadlock), not a culprit; a cycle alone is ``undecided``.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls.fr_groups import GroupView
from stormotel.analyzers.stalls.fr_types import FrEntry

_PEERS = re.compile(r"\b(send|recv) (\d{1,7})(->|<-)(\d{1,7})\b")

REMEDIATION = [
    "A rank never posted its side of a send/recv (pipeline stage stuck before it, or a "
    "schedule that differs per stage): get that rank's Python stack and compare the pipeline "
    "schedule across stages (number of micro-batches, warm-up/cool-down steps).",
]


def _pair(e: FrEntry, members: list[int]) -> tuple[int, int] | None:
    """(global source, global destination) of a send/recv entry, None if unreadable."""
    m = _PEERS.search(e.profiling_name)
    if not m:
        return None
    a, b = int(m.group(2)), int(m.group(4))
    src, dst = (a, b) if m.group(3) == "->" else (b, a)
    if max(src, dst) >= len(members):
        return None
    return members[src], members[dst]


def peer_of(e: FrEntry, members: list[int]) -> int | None:
    """The global rank at the other end of a send/recv entry, None if unreadable."""
    pair = _pair(e, members)
    if pair is None:
        return None
    return pair[1] if pair[0] == e.rank else pair[0]


def p2p_findings(g: GroupView, silent: set[int], no_dump: frozenset[int] | set[int] = frozenset()
                 ) -> tuple[list[StallFinding], list[str]]:
    """Findings for point-to-point ops of one group, and notes on what was not matched.

    ``silent``: ranks whose side is unseen (no dump, or an empty one); ``no_dump``: those of them
    with no readable dump at all. A rank "never posted" its send/recv only by its own ring's
    silence: an empty dump is that rank's own record (stuck, or killed while dumping), but a
    rank with no dump has no ring to be silent in — the blame then rests on its peers' side
    alone, so it is never above ``low``."""
    if not g.p2p:
        return [], []
    members = sorted(g.expected)
    notes: list[str] = []
    sends: Counter[tuple[int, int]] = Counter()
    recvs: Counter[tuple[int, int]] = Counter()
    unreadable = 0
    for entries in g.p2p.values():
        for e in entries:
            if e.completed or e.op not in ("send", "recv"):
                continue
            pair = _pair(e, members)
            if pair is None:
                unreadable += 1
                continue
            (sends if e.op == "send" else recvs)[pair] += 1
    if unreadable:
        notes.append(f"group {g.label}: {unreadable} pending point-to-point entr"
                     f"{'y' if unreadable == 1 else 'ies'} without readable peers were not "
                     "matched")
    culprits: dict[int, list[str]] = {}
    waiting: set[int] = set()
    pairs: list[dict[str, Any]] = []
    for pair in sorted(set(sends) | set(recvs)):
        src, dst = pair
        extra = sends[pair] - recvs[pair]
        if extra == 0:
            continue
        blamed, waiter, missing = (dst, src, "recv") if extra > 0 else (src, dst, "send")
        culprits.setdefault(blamed, []).append(f"{missing} from/to {waiter}")
        waiting.add(waiter)
        pairs.append({"src": src, "dst": dst, "pending_sends": sends[pair],
                      "pending_recvs": recvs[pair], "never_posted": f"{missing} on {blamed}"})
    if not pairs:
        return [], notes
    named = sorted(r for r in culprits if r not in waiting)
    ev: dict[str, Any] = {"pairs": pairs, "waiting_ranks": sorted(waiting),
                          "category": "p2p_unposted"}
    if not named:
        ev["suspects"] = sorted(culprits)
        ev["reason"] = ("point-to-point cycle: every rank blamed also waits on a peer "
                        f"({sorted(culprits)}) — a send/send or recv/recv deadlock")
        return [StallFinding(kind="undecided", ranks=[], process_group=g.label, seq_id=None,
                             op="send/recv", source="flight_recorder", confidence="low",
                             evidence=ev, remediation=list(REMEDIATION))], notes
    ev["behind_ranks"] = named
    ev["reason"] = ("; ".join(f"rank {r} never posted its {', '.join(culprits[r])}"
                              for r in named)
                    + f" — rank(s) {sorted(waiting)} wait for it")
    unseen = sorted(set(named) & silent)
    if unseen:
        ev["unseen_ranks"] = unseen
    undumped = sorted(set(named) & set(no_dump))
    if undumped:
        ev["no_dump_ranks"] = undumped
        ev["reason"] += (f"; rank(s) {undumped} left no readable dump: what they posted is "
                         "not seen, only that their peers wait")
    confidence = ("low" if undumped else
                  "high" if not unseen and len(named) == 1 else "medium")
    return [StallFinding(kind="straggler", ranks=named, process_group=g.label, seq_id=None,
                         op="send/recv", source="flight_recorder",
                         confidence=confidence,  # type: ignore[arg-type]
                         evidence=ev, remediation=list(REMEDIATION))], notes
