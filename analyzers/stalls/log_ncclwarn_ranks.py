"""NCCL WARN lines that name ranks (or show their process failing) without a failure word.

Why: ``nccl.warn.failure`` reads a WARN as stall evidence only when it says fail/error/abort/
timeout; the WARNs below (read from NCCL's source at v2.18.3 – v2.30.7: the inventory) name
ranks in other words and were read as nothing, so a log holding one printed "no evidence".
What each proves (``grammar``, patterns of kind ``nccl_warn_ranks``):

- ``duplicate_checkin``: two processes claimed one rank at bootstrap — a duplicate launch
  (category ``duplicate_launch``), the rank a suspect, never a straggler;
- ``duplicate_gpu`` / ``no_path`` / ``version_mismatch``: the named ranks cannot form the
  communicator (one GPU for two ranks, no transport between them, mixed NCCL releases): a
  launch or configuration fault (category ``configuration``), the named ranks suspects;
- ``peer_closed``: the reporter lost a peer named by address (category ``fabric``) — a victim;
- ``api_check``: the reporter's NCCL refused a call or failed an internal check (category
  ``nccl_error``) — the reporter a suspect.

NCCL prefixes its lines with ``host:pid:tid [dev]``, not a rank; the reporter's rank is the
launcher's prefix when there is one. The answer is ``undecided`` at ``low`` (which of two named
ranks is at fault, or whether the peer died first, the line does not say), and the row is a
FALLBACK of :data:`.log_scanners.KINDS`: read only when no other rule answers.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding

KIND = "nccl_warn_ranks"
PATTERNS: tuple[str, ...] = ("nccl.warn.duplicate_checkin", "nccl.warn.duplicate_gpu",
                             "nccl.warn.version_mismatch", "nccl.warn.peer_closed",
                             "nccl.warn.no_path", "nccl.warn.api_check")
_CATEGORY = {"nccl.warn.duplicate_checkin": "duplicate_launch",
             "nccl.warn.duplicate_gpu": "configuration", "nccl.warn.no_path": "configuration",
             "nccl.warn.version_mismatch": "configuration", "nccl.warn.peer_closed": "fabric",
             "nccl.warn.api_check": "nccl_error"}
_WHY = {
    "duplicate_launch": "two processes claimed the same rank at NCCL bootstrap: a duplicate "
                        "launch (a doubled or restarted worker, two jobs on one unique id)",
    "configuration": "the named ranks cannot form the communicator (one GPU for two ranks, no "
                     "transport or NIC between them, mixed NCCL releases, nodes set up "
                     "differently)",
    "fabric": "the reporter lost a peer named by address (it died or aborted first)",
    "nccl_error": "the reporter's NCCL refused a call or failed an internal check",
}
REMEDIATION = {
    "duplicate_launch": ["Look for a second launch on the same rendezvous (a restarted pod, "
                         "two jobs on one MASTER_ADDR:PORT, a worker started twice) before "
                         "suspecting a slow rank."],
    "configuration": ["Check the launch configuration of the named ranks: CUDA_VISIBLE_DEVICES "
                      "and LOCAL_RANK (one GPU per rank), the same NCCL in every image, the "
                      "NICs and topology of their nodes (NCCL_DEBUG=INFO, "
                      "NCCL_DEBUG_SUBSYS=INIT)."],
    "fabric": ["Read the log of the peer at that address: it ended or aborted first (its own "
               "error); the network (IB counters, dmesg) if it did not."],
    "nccl_error": ["The reporter's NCCL rejected a call: check the NCCL API use on that rank "
                   "(peers, window/segment setup) and report it with NCCL_DEBUG=INFO."],
}
_RANKS = re.compile(r"^(?:a|b)\d?$")


class Scanner(LineScanner):
    kind = KIND
    patterns = PATTERNS

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        named: list[int] = []
        if pid == "nccl.warn.duplicate_checkin":
            named = gr.named_rank(m.group("rank"))
        elif pid == "nccl.warn.api_check":
            named = [rank] if rank is not None else []
        else:
            for key, value in m.groupdict().items():
                r = gr.parse_rank(value) if _RANKS.match(key) else None
                if r is not None and r not in named:
                    named.append(r)
        peer = m.group("peer") if pid == "nccl.warn.peer_closed" else None
        return rank, {"suspects": named, "peer": peer, "category": _CATEGORY[pid]}


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    by_cat: dict[str, list[Any]] = defaultdict(list)
    for e in events:
        if e.kind == KIND and e.detail is not None:
            by_cat[str(e.detail["category"])].append(e)
    out = []
    for cat, evs in by_cat.items():
        suspects = sorted({int(r) for e in evs for r in e.detail["suspects"]})
        witnesses = sorted({e.rank for e in evs if e.rank is not None} - set(suspects))
        peers = sorted({str(e.detail["peer"]) for e in evs if e.detail.get("peer")})[:16]
        reason = _WHY[cat] + (f"; rank(s) {suspects[:16]} named (suspects, not proven)"
                              if suspects else "") + \
            (f"; peer address(es) {peers}" if peers else "") + \
            (f"; reported by rank(s) {witnesses[:16]}" if witnesses else "")
        out.append(log_finding("undecided", [], cat, "low", evs[0].pattern or KIND, reason,
                               REMEDIATION[cat], evs, suspects=suspects[:64],
                               witnesses=witnesses[:64], collect_next=suspects[:16],
                               **({"addresses": peers} if peers else {})))
    return out
