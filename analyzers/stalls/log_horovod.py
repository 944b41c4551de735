"""Horovod's stall inspector report, read as "who has not submitted what the others submitted".

Horovod's coordinator (rank 0) keeps, per tensor, the ranks that have submitted it; when a tensor
waits longer than ``HOROVOD_STALL_CHECK_TIME_SECONDS`` it prints every rank that has NOT
submitted it (``horovod/common/stall_inspector.cc``, 0.19+)::

    One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks
    and are waiting for remainder of ranks for more than 60 seconds. This may indicate that …
    Missing ranks:
    1: [DistributedAdamOptimizer_Allreduce/cond_1/HorovodAllreduce_grads_0, …]
    3!: [grads_7]

(older releases, ``operations.cc``: ``Stalled ops:`` then ``<tensor> [missing ranks: 1, 3]``).
The coordinator loops over every rank of the job, so an unlisted rank submitted everything.
What it proves: the others wait for the missing ranks. One set of ranks missing every tensor
are stragglers; ranks missing *different* tensors took different code paths (a tensor submitted
by one rank only lists every other rank as missing), so per tensor the smaller side — the
ranks missing it, or the ranks that submitted it — is the odd one, and a tie names nobody.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_failures import strip_prefix

HOROVOD = "horovod_stall"
#: mpirun --tag-output / horovodrun prefixes: ``[1,0]<stderr>:``, ``[0]<stdout>:``
_MPI_PREFIX = re.compile(r"^\s*\[\d{1,7}(?:,\d{1,7})?\]<std(?:err|out)>:")
_SHUTDOWN = re.compile(r"is stalled for longer than \d+ seconds|^\s*(?:Missing ranks|Stalled ops):")
#: how many lines a report may span before it is closed without a rank line
_SPAN = 4096

REMEDIATION = [
    "Horovod's coordinator saw these ranks not submit tensors the others submitted: get their "
    "Python stacks (py-spy dump) — a rank-dependent branch, an exception swallowed in a data "
    "loader, or a rank stuck before the step — and compare the tensor names across ranks "
    "(HOROVOD_TIMELINE) when the names differ."]


@dataclass
class HorovodReport:
    line: int
    text: str
    missing: dict[str, set[int]] = field(default_factory=dict)  #: tensor -> ranks missing it
    shutdown: set[int] = field(default_factory=set)  #: ranks marked "!"

    def as_detail(self) -> dict[str, Any]:
        return {"missing": {t: sorted(r) for t, r in self.missing.items()},
                "shutdown": sorted(self.shutdown)}


class HorovodScanner:
    """Stateful scan over one file's lines: :attr:`reports`, one per stall warning."""

    def __init__(self) -> None:
        self.reports: list[HorovodReport] = []
        self._open: HorovodReport | None = None

    def feed(self, no: int, line: str, low: str) -> None:
        if self._open is None and "subset of ranks" not in low and "missing ranks:" not in low:
            return
        text = strip_prefix(_MPI_PREFIX.sub("", line))
        if gr.BY_ID["horovod.stall_report"].regex.search(text):
            self.close()
            self._open = HorovodReport(no, text[:300])
        rep = self._open
        old = list(gr.BY_ID["horovod.stall_op_line"].regex.finditer(text))
        if old:  # older releases: the tensors and their missing ranks on the report's lines
            rep = rep or self._start(no, text)
            for m in old:
                rep.missing[m.group("tensor")] = set(gr.parse_rank_list(m.group("ranks")))
            return
        if rep is None:
            return
        line_m = gr.BY_ID["horovod.stall_rank_line"].regex.match(text)
        if line_m and (rank := gr.parse_rank(line_m.group("rank"))) is not None:
            for tensor in re.split(r",\s*", line_m.group("tensors")):
                tensor = tensor.strip().removesuffix("...").strip()
                if tensor:
                    rep.missing.setdefault(tensor, set()).add(rank)
            if line_m.group("bang"):
                rep.shutdown.add(rank)
            return
        if _SHUTDOWN.search(text) or rep.line == no or (no - rep.line < 3 and not rep.missing):
            return  # the report's own lines (its head may be wrapped over two lines)
        self.close()

    def _start(self, no: int, text: str) -> HorovodReport:
        self._open = HorovodReport(no, text[:300])
        return self._open

    def close(self) -> None:
        rep, self._open = self._open, None
        if rep is not None and rep.missing:
            self.reports.append(rep)


def horovod_findings(events: list[Any], world_size: int | None) -> list[StallFinding]:
    """The latest stall report of the job: the odd ranks per tensor (module docstring)."""
    reports = [e for e in events if e.kind == HOROVOD and e.detail]
    if not reports:
        return []
    e = reports[-1]
    missing = {t: set(r) for t, r in e.detail["missing"].items()}
    listed = set().union(*missing.values())
    world = world_size if world_size else max(listed) + 1
    explicit = bool(world_size)
    everyone = set(range(world))
    odd: set[int] = set()
    submitters_odd = False
    ties: list[str] = []
    for tensor, miss in missing.items():
        subs = everyone - miss
        if len(miss) < len(subs):
            odd |= miss
        elif len(subs) < len(miss) and subs and subs <= listed:
            # the few that submitted it are themselves missing what the others submitted:
            # two code paths, and theirs is the odd one
            odd |= subs
            submitters_odd = True
        else:
            # most ranks have not submitted it and its submitters lack nothing: the few took
            # a branch the others did not, or the many are stuck before it — counts cannot say
            ties.append(tensor)
    ev: dict[str, Any] = {
        "category": "mismatched_collective" if submitters_odd else "straggler_outside_nccl",
        "pattern": "horovod.stall_report", "missing": e.detail["missing"],
        "shutdown_ranks": e.detail["shutdown"], "witnesses": [e.rank] if e.rank is not None
        else [0], "spoke": {"ranks": world, "of": world if explicit else None},
        "world_size_from": "--world-size / log" if explicit else "highest rank listed + 1 "
        "(a lower bound)", "lines": [{"line": f"{e.file}:{e.line}", "text": e.text[:240]}],
        "reports": len(reports)}
    if ties or not odd or len(odd) * 2 >= world:
        ev["suspects"] = sorted(listed)[:64]
        ev["reason"] = ("Horovod's stall inspector: " + (
            f"tensor(s) {ties[:3]} are missing on as many ranks as submitted them, or on most "
            "ranks (the few that submitted them took a branch the others did not, or the many "
            "are stuck before it)" if ties else f"ranks {sorted(listed)[:16]} are missing "
            "tensors, and they are not a minority of the job")
            + " — nothing says which side is wrong; collect every rank's stack (py-spy dump) "
            "and the tensor names each rank submits (HOROVOD_TIMELINE)")
        return [StallFinding(kind="undecided", ranks=[], process_group=None, seq_id=None,
                             op=None, source="logs", confidence="low", evidence=ev,
                             remediation=list(REMEDIATION))]
    culprits = sorted(odd)
    clear = len(culprits) * 4 <= world or (explicit and len(culprits) * 2 < world - len(culprits))
    ev["reason"] = (
        f"Horovod's coordinator reports rank(s) {culprits} " + (
            "submitted tensors the other ranks never did (different code paths)"
            if submitters_odd else "never submitted tensors that the other "
            f"{world - len(culprits)} rank(s) submitted and wait on") + " for more than the "
        "stall-check time")
    return [StallFinding(kind="op_type_mismatch" if submitters_odd else "straggler",
                         ranks=culprits, process_group=None, seq_id=None, op=None,
                         source="logs", confidence="medium" if clear else "low", evidence=ev,
                         remediation=list(REMEDIATION))]
