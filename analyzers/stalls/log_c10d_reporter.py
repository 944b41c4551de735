"""c10d and torchelastic lines that show a stall through their reporter only.

Why: most of ProcessGroupNCCL's error lines (read from the torch wheels at released tags: the
inventory, ``docs/data/stall_inventory.json``) say that the PRINTING rank's collective,
communicator, wait or watchdog failed — "Exception (either an error or timeout) detected by
watchdog", "ProcessGroupNCCL watchdog hang", the Flight Recorder dump coordination lines — and
nothing about which rank began it ("Some NCCL operations have failed or timed out", "NCCL
communicator was aborted on rank r" and the agent's death signal are :mod:`.log_rankless`'s).
A log holding only such lines was read as "no evidence" (exit 3) or healthy. What each proves
(``grammar``, patterns of kind ``c10d_reporter``):

- the reporter hit a stall or failure: it is a WITNESS, never a culprit by reporting;
- ``torch.nccl.watchdog_hang``: the reporter's own watchdog is stuck in a CUDA/NCCL call — the
  reporter is a suspect (a hint, as ``torch.nccl.heartbeat``);
- ``torch.nccl.health_check``: rank r could not create its communicator — a suspect;
- ``torch.store_collectives.missing``: the ranks the reporter waited on (their key never came)
  — named by reference at ``low`` (issue 37 item 2), the reporter a witness;
- ``torch.gloo.check_rank_logs``: the coordinator to read — named by :mod:`.log_monitored`
  (at ``low``); here only as this fallback's suspect;
- ``torch.nccl.dump_lines``' "from rank r" names a VICTIM (its watchdog fired first).

So the answer is ``undecided`` at ``low`` (but for the missing ranks above), with the suspects
above and what to collect.
The reporter-only lines are a FALLBACK row of :data:`.log_scanners.KINDS`: read only when no
other rule answers (with watchdog timeouts, desync reports, … those rules decide and these lines
add nothing); the by-reference lines are a row of their own, read always.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding

KIND = "c10d_reporter"
REF_KIND = "c10d_reference"
#: lines that name a rank by reference: read even when other evidence decides (their own row)
MISSING = "torch.store_collectives.missing"
REFERENCE: tuple[str, ...] = ("torch.nccl.health_check", MISSING)
#: (the tail "check rank r logs" is a fallback: its whole message is log_monitored's)
PATTERNS: tuple[str, ...] = ("torch.gloo.check_rank_logs", "torch.store.setup_failed",
                             "torch.nccl.watchdog_hang",
                             "torch.nccl.dump_lines",
            "torch.nccl.abort_lines", "torch.nccl.watchdog_error",
            "torch.detail.mismatch_hint")

REMEDIATION = [
    "These lines show the printing rank failed or waited, not which rank began it: collect "
    "every rank's log (TORCH_NCCL_DESYNC_DEBUG=1, NCCL_DEBUG=INFO), the Flight Recorder dumps "
    "(TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT=1) and py-spy stacks of every "
    "rank; a rank with no such line is the first to look at."]


class Scanner(LineScanner):
    kind = KIND
    patterns = PATTERNS

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        named: list[int] = []
        if pid == "torch.nccl.health_check":
            named = gr.named_rank(m.group("rank"))
        elif pid == "torch.store_collectives.missing":
            named = gr.parse_rank_list(m.group("ranks"))
        elif pid == "torch.gloo.check_rank_logs":
            named = gr.named_rank(m.group("root"))
        elif pid == "torch.nccl.watchdog_hang" and rank is not None:
            named = [rank]  # its own watchdog is stuck: the reporter is wedged
        elif pid == "torch.store.setup_failed" and "UV Store" in m.group(0) and rank is not None:
            named = [rank]  # the store server on the reporter could not start
        initiator = gr.parse_rank(m.group("initiator")) if pid == "torch.nccl.dump_lines" \
            else None
        return rank, {"suspects": named, "initiator": initiator}


class RefScanner(Scanner):
    kind = REF_KIND
    patterns = REFERENCE


def reference_findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """The ranks named by reference. StoreCollectives' "missing ranks" (StoreCollectives.cpp
    barrier/gather/all_gather, 2.4+: after the wait timed out, the reporter lists every rank
    whose key was not in the store) names the ranks waited on: those every report lists, at
    ``low`` (ranks of the StoreCollectives world, presumed global). The rest stay suspects of an
    ``undecided`` (a health-check failure is the reporter's own)."""
    mine = [e for e in events if e.kind == REF_KIND and e.detail is not None]
    missing = [e for e in mine if e.pattern == MISSING]
    if missing:
        reporters = {e.rank for e in missing if e.rank is not None}
        named = set.intersection(*(set(e.detail["suspects"]) for e in missing)) - reporters
        if named:
            ranks = sorted(named)
            return [log_finding(
                "straggler", ranks[:64], "straggler_outside_nccl", "low", MISSING,
                f"rank(s) {sorted(reporters) or '?'} gave up waiting at a store-based "
                f"collective and list rank(s) {ranks[:16]} as missing (their key was not in "
                "the store when the wait timed out): the ranks waited on, by reference — late, "
                "stuck or dead; ranks of the StoreCollectives world, presumed global",
                ["Read the listed ranks' logs from the time of the barrier: an exception, a "
                 "long step only they run, a dead process."], missing,
                witnesses=sorted(reporters)[:64], collect_next=ranks[:16])]
    return _finding(mine)


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """The reporter-only lines (a fallback row: read only when no other rule answers)."""
    return _finding([e for e in events if e.kind == KIND and e.detail is not None])


def _finding(mine: list[Any]) -> list[StallFinding]:
    if not mine:
        return []
    suspects = sorted({int(r) for e in mine for r in e.detail["suspects"]})
    witnesses = sorted({e.rank for e in mine if e.rank is not None} - set(suspects))
    initiators = sorted({e.detail["initiator"] for e in mine
                         if e.detail.get("initiator") is not None})
    pats = sorted({str(e.pattern) for e in mine})
    reason = (f"rank(s) {witnesses or '?'} report a failed or timed-out collective, "
              f"communicator or wait of their own ({', '.join(pats[:6])}), which names no "
              "culprit")
    if suspects:
        reason += f"; rank(s) {suspects[:16]} named by the lines themselves (suspects, not proven)"
    if initiators:
        reason += (f"; rank(s) {initiators} timed out first (their watchdog sent the dump "
                   "signal): victims, not culprits")
    return [log_finding("undecided", [], "unknown", "low", mine[0].pattern or KIND,
                        reason + " — collect every rank's log", REMEDIATION, mine,
                        suspects=suspects[:64], witnesses=witnesses[:64],
                        collect_next=suspects[:16])]
