"""Rank 0 named by its absence when the world size is not stated (issue 37 item 2).

The shape: ranks 1..k (contiguous) all report the same wait — a watchdog timeout of one
collective (one SeqNum, or one op where the line has none), or a wait on the job's key-value
store — and rank 0 prints nothing of its own. Rank 0 exists in every job and is certainly
absent from the reporters; the ranks above k may exist and be missing from the paste as well,
so this is a reading under a presumption (pattern ``log.rank0_absent``, never above ``low``),
and ``collect_next`` asks for the world size that decides it. Read only when:

- no world size is stated (with one stated, :mod:`.log_busy` and the watchdog triage decide);
- the reporters are exactly ranks 1..k, with no gap: a gap above 0 shows the paste leaves ranks
  out anywhere, and then rank 0's absence is no different from theirs;
- every reporter's wait is the same one, and no wait line without a rank (which could be rank
  0's own) is in the logs;
- rank 0 printed no line of any kind the parser reads as evidence (a timeout, counters, a
  signal, an error of its own, a barrier or store line): that would show it reached the same
  point, or failed on its own — then its own line decides, not its absence;
- no reporter failed on its own (an OOM, a CUDA error: that error leads, not rank 0's
  absence);
- no line names the rank waited on itself (an NCCL-id wait, StoreCollectives' missing ranks,
  a monitoredBarrier peer): the reference decides;
- for watchdog timeouts, at least two reporters (:data:`MIN_REPORTERS`): one rank's timeout
  alone is as often a paste of that rank's output only (DeepDeWedge#22: rank 1's lines of a
  4-GPU box, a hardware fault) — its neighbours are missing just as rank 0 is. A store wait
  needs only one: the store and the keys waited on at set-up (the NCCL id, the barrier
  counter) are rank 0's, so a lone store waiter points at rank 0 by reference as well.
"""

from __future__ import annotations

from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_busy
from stormotel.analyzers.stalls.log_failures import RANK_ERROR
from stormotel.analyzers.stalls.log_finding import log_finding

PATTERN = "log.rank0_absent"
STORE_WAIT = "torch.store.wait_timeout"
#: lines that name the rank waited on themselves: the reference decides, not rank 0's absence
BY_REFERENCE = frozenset({"torch.nccl.unique_id_wait", "torch.store_collectives.missing",
                          "torch.gloo.monitored_barrier_peer", "torch.gloo.check_rank_logs"})
#: reporters a watchdog-timeout shape needs (one rank's paste proves nothing about rank 0)
MIN_REPORTERS = {"collective": 2, "store": 1}
#: event kinds that only say something about the file, never that rank 0 stalled or failed
_NEUTRAL = frozenset({log_busy.KIND, gr.K_WORLD})
_WATCHDOG = frozenset({gr.K_TIMEOUT, "watchdog_bare"})

REMEDIATION = ["Read rank 0's own output from the time the others began to wait: an exception, "
               "an OOM kill, a prompt (wandb login), or work only rank 0 does (tokenising, "
               "caching a data set, downloading, saving under main_process_first / zero_first) "
               "that took longer than the process-group timeout. Give the job's size "
               "(--world-size N or the launcher's lines): if it is larger than the reporters + "
               "1, collect the other ranks' logs as well."]


def reporters(events: list[Any], known: int | None) -> tuple[str, list[int]] | None:
    """``(what they wait in, ranks 1..k)`` when the shape holds, else ``None``; shared with
    the rules that would otherwise answer the same logs ``undecided`` (store wait, busy rank
    without a stated world)."""
    if known or any(e.pattern in BY_REFERENCE for e in events):
        return None  # stated: the other rules decide; a line naming the rank waited on does
    for what, waits in (("collective", [e for e in events if e.kind in _WATCHDOG]),
                        ("store", [e for e in events if e.kind == "init_wait"
                                   and e.pattern == STORE_WAIT])):
        if not waits:
            continue
        ranks = sorted({e.rank for e in waits if e.rank is not None})
        if (any(e.rank is None for e in waits) or len(ranks) < MIN_REPORTERS[what]
                or ranks != list(range(1, len(ranks) + 1))):
            return None
        if what == "collective":
            keys = {(e.group, e.seq if e.seq is not None else e.op) for e in waits
                    if e.kind == gr.K_TIMEOUT}
            if len(keys) != 1:
                return None
        if any(e.rank == 0 and e.kind not in _NEUTRAL for e in events):
            return None
        if any(e.kind == RANK_ERROR and e.rank in ranks for e in events):
            return None  # a reporter failed on its own: its error is the lead, not 0's absence
        return what, ranks
    return None


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    shape = reporters(events, known)
    if shape is None:
        return []
    what, ranks = shape
    k = ranks[-1]
    waits = [e for e in events if e.rank in ranks and (
        e.kind in _WATCHDOG if what == "collective" else e.pattern == STORE_WAIT)]
    bars = [e for e in events if e.kind == log_busy.KIND and e.pattern == log_busy.BUSY]
    files = {e.file for e in waits}
    bar = [e for e in bars if e.file in files and e.rank in (None, 0)]
    shown = f"1-{k}" if k > 1 else "1"
    wait = ("timed out in the same collective" + (f" (SeqNum {waits[0].seq})"
                                                   if waits[0].seq is not None else "")
            if what == "collective" else "timed out waiting on the job's key-value store "
            "(served by rank 0's process; the keys waited on at set-up are rank 0's to set)")
    collect = (f"the world size (WORLD_SIZE, torchrun --nnodes x --nproc_per_node, the "
               f"launcher's line, or --world-size N): if the job has {k + 1} ranks, rank 0 is "
               f"the only one that did not arrive; if more, ranks {k + 1}.. may be missing too "
               "— collect their logs and rank 0's")
    return [log_finding(
        "straggler", [0], "store_wait" if what == "store" else "straggler_outside_nccl",
        "low", PATTERN,
        f"rank(s) {shown} {wait} and rank 0 printed no line of its own — rank 0 exists in every "
        "job and is the one rank certainly absent from the reporters, so it is pointed at: "
        "late (busy before the collective), stuck, or dead without a line"
        + (" (a progress bar with no rank of its own ran in the waiters' stream: if it is "
           "rank 0's, rank 0 was still busy when the others gave up)" if bar else "")
        + f"; the world size is not stated, so ranks above {k} may be missing too — "
        f"{collect}", REMEDIATION, bar[:2] + waits[:6],
        waiting_ranks=ranks, world_lower_bound=k + 1, collect_next=collect,
        rank_from="absence: the only rank below the highest reporter with no line; "
                  "presumed the whole job's rank 0 (no world size stated)")]
