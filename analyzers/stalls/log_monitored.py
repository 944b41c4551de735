"""Gloo's monitoredBarrier seen from a non-coordinator: innocent reporters, rank 0 referenced.

``ProcessGroupGloo::monitoredBarrier`` (1.10 → main): every rank but 0 sends a token to rank 0
and waits for its ack; only rank 0 enforces the timeout. When that exchange fails a rank
raises "Rank r successfully reached monitoredBarrier, but received errors while waiting for
send/recv from rank 0. Please check rank 0 logs for faulty rank." What it proves:

- rank r reached the barrier — a victim, never a culprit;
- rank 0 failed the exchange: either rank 0 itself was late or dead, or rank 0 found another
  rank missing and raised ("Rank k failed to pass monitoredBarrier", read by the witness
  rule) without acking. Which one is in rank 0's log.

So the line points at rank 0 by reference (issue 37 item 2: the rank waited on, never the
reporter):

- every other rank of a known world reported reaching the barrier (no one else can be
  missing): rank 0, ``medium``;
- no world size stated: rank 0, ``low`` — what the line proves is that rank 0 failed the
  exchange (it was late or dead, or it found another rank missing); what decides between the
  two is rank 0's own line, said in the finding (``decides``);
- a stated world with other ranks silent: ``undecided``, rank 0 and the silent ranks as
  suspects (one of them may be the rank rank 0 found missing);
- the tail alone ("Please check rank 0 logs for faulty rank", the head cut or wrapped away)
  points at the same rank, presumed of the default group (no launcher prefix to compare).

When rank 0's own line ("Ranks … failed to pass monitoredBarrier", "timed out in
monitoredBarrier") is in the logs, that line decides and this rule says nothing.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding

KIND = "barrier_peer"  #: a non-coordinator reached the barrier and lost its coordinator
PEER = "torch.gloo.monitored_barrier_peer"
TAIL = "torch.gloo.check_rank_logs"  #: the message's tail only: the reporter is not in it
_COORDINATOR = ("torch.gloo.monitored_barrier_ranks", "torch.gloo.monitored_barrier_rank",
                "torch.gloo.monitored_barrier_timeout")

REMEDIATION = ["Every rank that reported reached monitored_barrier; its coordinator (rank 0) "
               "failed it. Read rank 0's log: 'Rank k failed to pass monitoredBarrier' names "
               "the faulty rank; nothing there means rank 0 itself was late (preprocessing, "
               "saving, a prompt) or died."]


class Scanner(LineScanner):
    kind, patterns = KIND, (PEER, TAIL)

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        root = gr.parse_rank(m.group("root"))
        if pid == TAIL:
            return rank, {"coordinator": root, "launcher_rank": rank, "tail": True}
        return gr.parse_rank(m.group("rank")), {"coordinator": root, "launcher_rank": rank}


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    peers = [e for e in events if e.kind == KIND and e.pattern in (PEER, TAIL) and e.detail]
    if not peers or any(e.pattern in _COORDINATOR for e in events):
        return []
    reached = sorted({e.rank for e in peers if e.rank is not None})
    roots = sorted({e.detail["coordinator"] for e in peers
                    if e.detail.get("coordinator") is not None})
    # the ranks in the message are the barrier group's; a launcher prefix that differs shows
    # a sub-group, whose rank 0 is not global rank 0
    sub = any(e.detail.get("launcher_rank") not in (None, e.rank) for e in peers)
    if sub:
        return [log_finding(
            "undecided", [], "barrier_coordinator", "low", PEER,
            f"group rank(s) {reached} of a sub-group reached monitored_barrier and their "
            f"coordinator (the group's rank {roots or '?'}) failed it; which global rank that "
            "is, the lines do not say — collect the group's rank list and its rank 0's log",
            REMEDIATION, peers, suspects=[], witnesses=reached, group_ranks=True)]
    if len(roots) == 1 and known and reached and \
            set(reached) == set(range(known)) - {roots[0]}:
        return [log_finding(
            "straggler", roots, "straggler_outside_nccl", "medium", PEER,
            f"every other rank of the {known} ({reached if len(reached) <= 16 else 'all'}) "
            f"reached monitored_barrier and lost the exchange with rank {roots[0]}, its "
            f"coordinator: no other rank can be missing, so rank {roots[0]} was late or died",
            REMEDIATION, peers, witnesses=reached)]
    silent = sorted(set(range(known)) - set(reached) - set(roots)) if known else []
    root = roots[0] if len(roots) == 1 else None
    if root is not None and not silent:
        return [_by_reference(root, reached, peers)]
    others = (f"rank(s) {silent[:16]} reporting it too" if known else
              f"every rank but {root} reporting it, with the job's size stated (WORLD_SIZE, "
              "the launcher's line, or --world-size N)")
    decide = (f"what decides it: rank {root}'s own log ('Ranks … failed to pass "
              f"monitoredBarrier' names the faulty ranks), or {others} — then rank {root} "
              "itself was late or died") if root is not None else None
    return [log_finding(
        "undecided", [], "barrier_coordinator", "low", PEER,
        f"rank(s) {reached or '?'} reached monitored_barrier, and their coordinator rank "
        f"{roots or '?'} failed it: rank {roots or '?'} was late or died, or it found another "
        "rank missing" + (f" (no line from rank(s) {silent[:16]})" if silent else "")
        + " — rank 0's log names the faulty rank" + (f"; {decide}" if decide else ""),
        REMEDIATION, peers,
        suspects=(roots + silent)[:64], collect_next=roots, witnesses=reached,
        **({"decides": decide} if decide else {}))]


def _by_reference(root: int, reached: list[int], peers: list[Any]) -> StallFinding:
    """The coordinator the peers name, at ``low``: it failed the barrier — late or dead itself,
    or it found another rank missing; its own line decides which (and wins when present)."""
    decide = (f"what decides it: rank {root}'s own log — 'Ranks … failed to pass "
              "monitoredBarrier' (or 'Rank k failed to pass …') names the faulty ranks instead "
              f"and wins when present; no such line means rank {root} itself was late (busy "
              "before the barrier) or died; or every rank but "
              f"{root} reporting this line with the job's size stated (WORLD_SIZE, the "
              "launcher's line, or --world-size N)")
    who = f"rank(s) {reached}" if reached else "a rank (the line's head is cut)"
    return log_finding(
        "straggler", [root], "straggler_outside_nccl", "low", peers[0].pattern or PEER,
        f"{who} reached monitored_barrier and lost the exchange with rank {root}, its "
        f"coordinator, which the line names ('Please check rank {root} logs'): rank {root} "
        "failed the barrier — it was late or died, or it found another rank missing and "
        f"raised without acking; the reporters are innocent — {decide}",
        REMEDIATION, peers, witnesses=reached, decides=decide, collect_next=[root],
        rank_from="by reference: the coordinator the message names (presumed the default "
                  "group: no launcher prefix differs from the message's rank)")
