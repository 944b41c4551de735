"""torchelastic's failure table read as a split: who died of SIGABRT, who was still alive.

How a stuck collective ends under torchrun (``torch/distributed/elastic/multiprocessing/
api.py``, ``errors/__init__.py``): every rank that waits in the collective has it pending, so
its ProcessGroupNCCL watchdog times out and takes the process down by an uncaught exception
(``std::terminate``) or ``std::abort`` — exit code -6, "Signal 6 (SIGABRT) received by PID".
A rank that never entered the collective has nothing pending: its watchdog never fires and it
is still running when the agent, on the first failure, stops the node's other workers
("Sending process %s closing signal SIGTERM"; torch 2.5+ also lists them in the table with
-15). So on one node, a minority still alive among ranks that aborted together are the
stragglers. A lone SIGABRT is the opposite: the first rank to time out, a victim as often as
not (read elsewhere as a suspect). Ranks that failed any other way (exit 1, a SIGKILL, a
segfault) are their own evidence, so the split is read only when every failure is a SIGABRT
or the agent's SIGTERM.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from stormotel.analyzers.report import StallFinding

ELASTIC_CLOSING = "elastic_closing"
SIGABRT, SIGTERM = -6, -15
#: aborts of one node's ranks that time out together land within a few agent polls
_TOGETHER_S = 5

REMEDIATION = [
    "These ranks were still running when the others' watchdogs fired: they never entered the "
    "collective the others timed out in. Get their Python stacks (py-spy dump) at the next "
    "hang, or enable TORCH_NCCL_DUMP_ON_TIMEOUT=1 and read the Flight Recorder dumps."]


def _seconds(text: str) -> int | None:
    digits = [int(x) for x in text.replace("-", "_").replace(":", "_").split("_")
              if x.isdigit() and len(x) <= 4]
    if len(digits) != 6:
        return None
    y, mo, d, h, mi, s = digits
    return ((((y * 12 + mo) * 31 + d) * 24 + h) * 60 + mi) * 60 + s


def abort_split_findings(events: list[Any]) -> list[StallFinding]:
    """One node's table where a minority survived ranks that aborted together."""
    tables: dict[tuple[str, int], list[Any]] = defaultdict(list)
    for e in events:
        d = e.detail or {}
        if e.kind == "rank_error" and str(e.pattern).startswith("torchelastic.") \
                and "exit_code" in d and e.rank is not None:
            tables[(e.file, int(d.get("table") or 0))].append(e)
    closing = defaultdict(set)
    for e in events:
        if e.kind == ELASTIC_CLOSING and e.detail and e.detail.get("pid"):
            closing[e.file].add(int(e.detail["pid"]))
    out = []
    for (file, _), rows in tables.items():
        f = _split(rows, closing.get(file, set()))
        if f is not None:
            out.append(f)
    return out[:1]


def _split(rows: list[Any], closing_pids: set[int]) -> StallFinding | None:
    by_rank: dict[int, Any] = {}
    for e in rows:
        by_rank.setdefault(int(e.rank), e)
    codes = {r: int(e.detail["exit_code"]) for r, e in by_rank.items()}
    if any(c not in (SIGABRT, SIGTERM) for c in codes.values()):
        return None
    aborted = sorted(r for r, c in codes.items() if c == SIGABRT)
    if len(aborted) < 2:
        return None
    stamps = [s for r in aborted if (s := _seconds(str(by_rank[r].detail.get("time", ""))))
              is not None]
    if stamps and max(stamps) - min(stamps) > _TOGETHER_S:
        return None  # not one timeout: the first abort may be the rank's own failure
    offsets = {r - int(e.detail["local_rank"]) for r, e in by_rank.items()
               if e.detail.get("local_rank") is not None}
    if len(offsets) != 1:
        return None  # ranks of several nodes, or local ranks not printed
    offset = offsets.pop()
    survivors = {r for r, c in codes.items() if c == SIGTERM}
    listed_pids = {int(e.detail["pid"]) for e in by_rank.values() if e.detail.get("pid")}
    unlisted = closing_pids - listed_pids
    inferred = False
    if unlisted:
        # older torchelastic lists only the ranks that failed on their own; the agent's
        # closing lines count the others, so the node ran len(table) + len(unlisted) workers
        # and the survivors are the local ranks the table does not hold
        local_world = len(by_rank) + len(unlisted)
        held = {r - offset for r in by_rank}
        rest = set(range(local_world)) - held
        if len(rest) != len(unlisted) or any(x < 0 for x in held):
            return None
        survivors |= {offset + x for x in rest}
        inferred = True
    survivors_l = sorted(survivors)
    if not survivors_l or len(survivors_l) * 2 > len(aborted):
        return None
    reason = (f"torchelastic: rank(s) {aborted} ended with SIGABRT together (the watchdog "
              f"timeout's end) while rank(s) {survivors_l} were still running when the agent "
              "stopped the node" + (" (counted from its 'closing signal' lines: the table "
                                    "lists only the failed workers)" if inferred else "")
              + " — their watchdog had nothing pending: they never entered the collective the "
              "others waited in")
    ev: dict[str, Any] = {
        "category": "straggler_outside_nccl", "pattern": "torchelastic.abort_split",
        "aborted": aborted, "alive": survivors_l, "node_rank_offset": offset,
        "inferred_from_closing_lines": inferred, "reason": reason,
        "spoke": {"ranks": len(aborted) + len(survivors_l), "of": None},
        "lines": [{"line": f"{e.file}:{e.line}", "text": e.text[:240]} for e in rows[:8]]}
    return StallFinding(kind="straggler", ranks=survivors_l, process_group=None, seq_id=None,
                        op=None, source="logs",
                        confidence="medium" if not inferred and len(survivors_l) == 1
                        and len(aborted) >= 3 else "low",
                        evidence=ev, remediation=list(REMEDIATION))
