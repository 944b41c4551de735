"""Huawei Ascend HCCL's timeouts: a rank waited on a group peer that never sent.

Why: jobs on Ascend NPUs (torch_npu, MindSpore, vllm-ascend) report a collective stall through
HCCL's error codes, not ProcessGroupNCCL's watchdog; before this rule such a log read "no
evidence" (fresh7's vllm-ascend#3413). The texts, as CANN 7.x – 8.x print them (HCCL is closed
source; the codes and their texts are CANN's error-code reference; ``grammar`` patterns
``hccl.notify_wait_timeout`` and ``hccl.socket_timeout``):

- EI0002 (HCCL_EXEC_TIMEOUT, default 1800 s): "The wait execution of the Notify register times
  out. Reason: The Notify register has not received the Notify record from remote rank: [N].
  … group information: [group:[G], …, rankSize[S], rankId[…]]", after the "[ERROR] …
  (PID:p, Device:d, RankID:R) …" line of the rank that waited;
- EI0006 (HCCL_CONNECT_TIMEOUT): "Getting socket times out. Reason: Remote Rank did not send
  the data in time" — no peer named.

What it proves: rank R (its global id, when the "[ERROR] … RankID:R" line is there) waited in
group G on that group's rank N — N is a rank OF THE GROUP, not a global rank, and HCCL's own
"Possible Cause" lists a crashed or slow NPU, uneven samples and the link alike. So nobody is
named: ``undecided`` at low, with the waiter, the group rank and how to map it. A FALLBACK row
of :data:`.log_scanners.KINDS`: it answers only beside lines the rankless fallback counts
quiet, in that fallback's place.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_rankless
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding

KIND = "hccl_wait"
NOTIFY = "hccl.notify_wait_timeout"
SOCKET = "hccl.socket_timeout"
_RANK_ID = re.compile(r"\bRankID:(?P<rank>\d{1,7})\)")
_GROUP = re.compile(r"group:\[(?P<group>[^\]\s]{1,200})\]")
_SIZE = re.compile(r"rankSize\[(?P<size>\d{1,7})\]")

REMEDIATION = [
    "Map the group rank to a global rank: the group's member list (the ranks passed to "
    "new_group / the parallel config that built it); that rank's own log (its HCCL errors, a "
    "Python traceback, an OOM) tells whether it crashed, was slow, or never reached the "
    "collective.",
    "Compare the first HCCL error time on every rank (plog / ascend logs): the rank with no "
    "error, or the earliest other error, is where to look; raise HCCL_EXEC_TIMEOUT only if "
    "every rank is merely slow.",
]


class Scanner(LineScanner):
    """One event per EI0002 / EI0006 line; the waiter's global id from the ERROR line above."""

    kind, patterns = KIND, (NOTIFY, SOCKET)

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._reporter: int | None = None

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if "rankid:" in low and (m := _RANK_ID.search(seg)):
            self._reporter = gr.parse_rank(m.group("rank"))
        super().feed(no, seg, low, rank)

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        text = m.string
        detail: dict[str, object] = {"reporter": self._reporter if self._reporter is not None
                                     else rank}
        if pid == NOTIFY:
            detail["remote_group_rank"] = gr.parse_rank(m.group("remote"))
            if g := _GROUP.search(text):
                detail["group"] = g.group("group")
            if s := _SIZE.search(text):
                detail["group_size"] = int(s.group("size"))
        return None, detail


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """``undecided`` (low), when nothing but quiet lines is beside HCCL's waits."""
    mine = [e for e in events if e.kind == KIND and e.detail is not None]
    if not mine or any(e.kind != KIND and e.kind not in log_rankless.QUIET for e in events):
        return []
    details = [e.detail for e in mine]
    waiters = sorted({int(d["reporter"]) for d in details if d.get("reporter") is not None})
    remote = [(d.get("group"), d.get("remote_group_rank"), d.get("group_size"))
              for d in details if d.get("remote_group_rank") is not None]
    said = "; ".join(f"group {g or '?'} (size {s or '?'}): its rank {r}"
                     for g, r, s in remote[:4])
    reason = ("HCCL reported a collective stall"
              + (f" on global rank(s) {waiters[:16]}" if waiters else "")
              + (f", waiting on {said}" if said else ", a peer that did not send in time")
              + " — a rank of that group, not a global rank, and HCCL's own possible causes "
              "(a crashed or slow NPU, uneven samples, the link) alike: nobody named")
    return [log_finding("undecided", [], "hccl_wait", "low", mine[0].pattern or NOTIFY, reason,
                        REMEDIATION, mine, suspects=[], witnesses=waiters[:64],
                        group_ranks=True)]
