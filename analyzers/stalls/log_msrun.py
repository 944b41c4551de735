"""MindSpore msrun's own post-mortem: the worker nodes its scheduler stopped hearing from.

Why: a MindSpore job started by ``msrun`` ends, when a worker exits non-zero, with msrun's own
lines — "There's worker exits with exception, kill all other workers." and, after reading the
scheduler's log, "Time out nodes are ['3']" — and often nothing else of the workers (their logs
sit in msrun's log directory). Before this rule such a log read "no evidence" (fresh7's
MindAct#1983).

Read in msrun's source (mindspore/python/mindspore/parallel/cluster/process_entity/_api.py,
``_ProcessManager.join_processes`` and ``_analyze_log``; ``grammar`` pattern
``mindspore.msrun.time_out_nodes``):

- msrun polls its workers; the first it finds exited non-zero makes it log "Worker process %d
  exit with exception." and "There's worker exits with exception, kill all other workers.",
  and it SIGKILLs the rest;
- after the scheduler exits, ``_analyze_log`` collects from scheduler.log every "node: <id> is
  timed out" — the nodes whose heartbeat the scheduler lost — and prints "Time out nodes are
  <list>";
- a worker's node id is its rank: ``index`` on one machine, ``node_rank * local_worker_num +
  index`` across machines (``_get_node_id_and_log_path``, exported as RANK_ID); without
  ``--node_rank`` on several machines MindSpore assigns it, and the id may not be a number.

What it proves: the listed nodes stopped heartbeating before the scheduler exited. One id: that
worker died or hung first — the ones msrun killed afterwards had not yet timed out — a culprit
at ``low`` (the line says it went silent, not why: its own log, worker_<id>.log, says).
Several ids: suspects (the killed ones time out too when the scheduler waits long enough).
None, or ids that are not ranks: a failure with nobody named.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding

KIND = "msrun_timeout_nodes"
PATTERN = "mindspore.msrun.time_out_nodes"
_ID = re.compile(r"'([^']{0,64})'|\"([^\"]{0,64})\"|(\d{1,7})")

REMEDIATION = [
    "Read the timed-out worker's own log in msrun's log directory (worker_<rank>.log, or grep "
    "-rn 'rank id:' for auto-assigned ids): its last lines say whether it crashed (a "
    "traceback, an OOM kill in dmesg) or hung (py-spy dump of that process at the next hang).",
]


class Scanner(LineScanner):
    """One event per "Time out nodes are [...]" line."""

    kind, patterns = KIND, (PATTERN,)

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        ids = [next(g for g in t if g) for t in _ID.findall(m.group("ids")) if any(t)]
        return None, {"ids": ids[:256]}


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    mine = [e for e in events if e.kind == KIND and e.detail is not None]
    if not mine:
        return []
    ids: list[str] = []
    for e in mine:
        ids += [i for i in e.detail["ids"] if i not in ids]
    ranks = [gr.parse_rank(i) for i in ids]
    named = sorted({r for r in ranks if r is not None})
    if len(ids) == 1 and len(named) == 1:
        return [log_finding(
            "rank_failure", named, "lost_heartbeat", "low", PATTERN,
            f"msrun's scheduler lost node {named[0]}'s heartbeat (its 'Time out nodes are "
            f"{ids}'): that worker (rank {named[0]}, msrun's node id) went silent first — msrun "
            "SIGKILLed the others after a worker exited non-zero; why it went silent (a crash, "
            "an OOM kill, a hang) is in its own log",
            REMEDIATION, mine, rank_from="msrun's node id (RANK_ID: the worker's rank)")]
    return [log_finding(
        "undecided", [], "lost_heartbeat", "low", PATTERN,
        "msrun's scheduler lost the heartbeat of " + (
            f"nodes {ids[:16]}: several went silent (the workers msrun killed time out too "
            "when the scheduler waits long enough) — which failed first is in their own logs"
            if ids else "no node (an empty list): a worker exited with an exception, which "
            "one msrun's lines do not say"),
        REMEDIATION, mine, suspects=named[:64], collect_next=named[:16])]
