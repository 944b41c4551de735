"""Horovod's stall inspector report, read as "who has not submitted what the others submitted".

Horovod's coordinator (rank 0) keeps, per tensor, the ranks that have submitted it; when a tensor
waits longer than ``HOROVOD_STALL_CHECK_TIME_SECONDS`` it prints every rank that has NOT
submitted it (``horovod/common/stall_inspector.cc``, 0.19+)::

    One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks
    and are waiting for remainder of ranks for more than 60 seconds. This may indicate that …
    Missing ranks:
    1: [DistributedAdamOptimizer_Allreduce/cond_1/HorovodAllreduce_grads_0, …]
    3!: [grads_7]

The wording changed across releases (read at every tag of horovod/horovod):

- 0.9.0-0.13.6 (``tensorflow/mpi_ops.cc``, then ``common/operations.cc``): one line,
  ``Stalled ops: <tensor> [ready ranks: 4, 6, 1], <tensor> [ready ranks: …]`` — the ranks
  that HAVE submitted each tensor, in arrival order;
- 0.13.7-0.16.1 (``operations.cc``): ``Stalled ops:`` then one ``<tensor> [missing ranks: 1, 3]``
  per tensor (0.16.0-0.16.1 glue the first one to ``Stalled ops:``);
- 0.16.2-0.20.0 ``Stalled ranks:``, 0.20.1+ ``Missing ranks:`` (``stall_inspector.cc`` from
  0.17), then one ``<rank>[!]: [<tensor>, …]`` line per rank.

Every form lists, per tensor, either the ranks of ``[0, size)`` that submitted it or all the
others, so an unlisted rank of the job submitted everything it was not listed for, and every
tensor in the report was submitted by at least one rank. What it proves: the others wait for the
missing ranks. A rank marked ``!`` has waited past ``HOROVOD_STALL_SHUTDOWN_TIME_SECONDS``, and
then the report ends with "One or more rank (marked by \"!\") is stalled for longer than N
seconds. Will shutdown." (0.16.4+, ``LOG(ERROR)`` instead of ``WARNING``): Horovod itself ends
the job after N s — the "Horovod has been shut down" errors of the other ranks that follow are
this stall's end, not an exception of theirs (``shutdown_after_s`` in the finding).
One set of ranks missing every tensor are stragglers; ranks missing *different*
tensors took different code paths (a tensor submitted by one rank only lists every other rank
as missing), so per tensor the smaller side — the ranks missing it, or the ranks that submitted
it — is the odd one, and a tie names nobody. The size is printed by no release: without it,
the missing ranks of the "missing" forms are exact and the job is at least one rank larger
than the highest rank listed (and than any tensor's missing set) — every larger world only adds
submitters, so a tie at that lower bound is the one world in which the missing side is not a
minority (named, ``low``); the "ready" form gives only the gaps below its highest ready rank
(ranks above it may be missing too: ``low``, world size to collect).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import horovod_paths
from stormotel.analyzers.stalls.log_failures import strip_prefix

HOROVOD = "horovod_stall"
#: the op names Horovod's TensorFlow ops give the tensors they submit (mpi_ops.py / mpi_ops.cc)
_HOROVOD_OP = re.compile(r"Horovod(?:Allreduce|Allgather|Broadcast|Alltoall|Reducescatter)_")
#: mpirun --tag-output / horovodrun prefixes: ``[1,0]<stderr>:``, ``[0]<stdout>:``
_MPI_PREFIX = re.compile(r"^\s*\[\d{1,7}(?:,\d{1,7})?\]<std(?:err|out)>:")
#: the report's last line when a rank is marked "!" (0.16.4+): Horovod ends the job after N s
_WILL_SHUTDOWN = re.compile(r"is stalled for longer than (?P<secs>\d{1,9}) seconds\. Will shutdown")
_SHUTDOWN = re.compile(r"is stalled for longer than \d+ seconds"
                       r"|^\s*(?:Missing ranks|Stalled ranks|Stalled ops):")
#: "Stalled ops:" glued to the first tensor (0.16.0-0.16.1) or heading the one-line form
_OPS_HEAD = re.compile(r"^.*?Stalled ops:\s*")
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
    ready: dict[str, set[int]] = field(default_factory=dict)  #: tensor -> ranks that sent it
    shutdown_after: int | None = None  #: "… longer than N seconds. Will shutdown."

    def as_detail(self) -> dict[str, Any]:
        out: dict[str, Any] = {"missing": {t: sorted(r) for t, r in self.missing.items()},
                               "ready": {t: sorted(r) for t, r in self.ready.items()},
                               "shutdown": sorted(self.shutdown)}
        if self.shutdown_after is not None:
            out["shutdown_after_s"] = self.shutdown_after
        return out


class HorovodScanner:
    """Stateful scan over one file's lines: :attr:`reports`, one per stall warning."""

    def __init__(self) -> None:
        self.reports: list[HorovodReport] = []
        #: warnings cut before their rank list (a paste, a title, a tqdm redraw over the rest):
        #: a stall shown, nobody named (read only when no whole report is in the file)
        self.cut: list[HorovodReport] = []
        #: report rank lines quoted without their warning ("3: [HorovodAllreduce_…]"): a rank
        #: the inspector listed as lacking tensors, the report's head and the others unseen
        self.orphans: list[HorovodReport] = []
        self._open: HorovodReport | None = None
        #: the mpirun tag of the open report's lines: other ranks' tagged lines interleaved
        #: with them (mpirun reads each rank's stream apart) neither join nor close it
        self._tag = ""

    def feed(self, no: int, line: str, low: str) -> None:
        if self._open is None and "subset of ranks" not in low and "missing ranks:" not in low \
                and "ready ranks:" not in low:
            if ": [" in low and "horovod" in low:
                self._orphan(no, strip_prefix(_MPI_PREFIX.sub("", line)))
            return
        tag = _MPI_PREFIX.match(line)
        if self._open is not None and tag and self._tag and tag.group(0).strip() != self._tag:
            return
        text = strip_prefix(_MPI_PREFIX.sub("", line))
        if gr.BY_ID["horovod.stall_report"].regex.search(text):
            self.close()
            self._open = HorovodReport(no, text[:300])
            self._tag = tag.group(0).strip() if tag else ""
        rep = self._open
        ops = _OPS_HEAD.sub("", text) if "Stalled ops:" in text else text
        old = list(gr.BY_ID["horovod.stall_op_line"].regex.finditer(ops))
        ready = list(gr.BY_ID["horovod.stall_ready_line"].regex.finditer(ops))
        if old or ready:  # older releases: per tensor, its missing (or its ready) ranks
            if rep is None:
                rep = self._start(no, text)
                self._tag = tag.group(0).strip() if tag else ""
            for m in old:
                rep.missing[m.group("tensor")] = set(gr.parse_rank_list(m.group("ranks")))
            for m in ready:
                rep.ready[m.group("tensor")] = set(gr.parse_rank_list(m.group("ranks")))
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
        if will := _WILL_SHUTDOWN.search(text):
            rep.shutdown_after = int(will.group("secs"))
            return
        if _SHUTDOWN.search(text) or rep.line == no or (no - rep.line < 3 and not rep.missing):
            return  # the report's own lines (its head may be wrapped over two lines)
        self.close()

    def _orphan(self, no: int, text: str) -> None:
        """A report's rank line without its head: kept only when its tensors carry Horovod's
        own op names (TensorFlow's ``HorovodAllreduce_…``), which no srun label or log line
        of another kind does."""
        m = gr.BY_ID["horovod.stall_rank_line"].regex.match(text)
        if not m or not _HOROVOD_OP.search(m.group("tensors")) or len(self.orphans) >= 64:
            return
        if (rank := gr.parse_rank(m.group("rank"))) is None:
            return
        rep = HorovodReport(no, text[:300])
        for tensor in re.split(r",\s*", m.group("tensors")):
            if tensor := tensor.strip().removesuffix("...").strip():
                rep.missing.setdefault(tensor, set()).add(rank)
        self.orphans.append(rep)

    def _start(self, no: int, text: str) -> HorovodReport:
        self._open = HorovodReport(no, text[:300])
        return self._open

    def close(self) -> None:
        rep, self._open = self._open, None
        if rep is not None and (rep.missing or rep.ready):
            self.reports.append(rep)
        elif rep is not None:
            self.cut.append(rep)


def horovod_findings(events: list[Any], world_size: int | None) -> list[StallFinding]:
    """The latest stall report of the job: the odd ranks per tensor (module docstring)."""
    reports = [e for e in events if e.kind == HOROVOD and e.detail and not e.detail.get("cut")
               and not e.detail.get("orphan")]
    if not reports:
        return _cut_findings([e for e in events if e.kind == HOROVOD and e.detail
                              and (e.detail.get("cut") or e.detail.get("orphan"))])
    e = reports[-1]
    missing, world, bound = _resolve(e.detail, world_size)
    listed = set().union(*missing.values())
    explicit = bool(world_size)
    everyone = set(range(world))
    odd: set[int] = set()
    submitters_odd = False
    ties: list[str] = []
    tie_at_bound = False
    for tensor, miss in missing.items():
        subs = everyone - miss
        if len(miss) < len(subs):
            odd |= miss
        elif bound == "missing" and len(miss) == len(subs) and miss:
            # a tie only in the smallest world the report allows: any larger one adds
            # submitters (the "missing" forms list every rank that did not submit)
            odd |= miss
            tie_at_bound = True
        elif len(subs) < len(miss) and subs and subs <= listed:
            # the few that submitted it are themselves missing what the others submitted:
            # two code paths, and theirs is the odd one
            odd |= subs
            submitters_odd = True
        else:
            # most ranks have not submitted it and its submitters lack nothing: the few took
            # a branch the others did not, or the many are stuck before it — counts cannot say
            ties.append(tensor)
    diverged = horovod_paths.no_majority(missing, world)
    ev = _report_evidence(e, len(reports), world, explicit, bound, submitters_odd)
    if diverged is not None:
        return [horovod_paths.undecided(diverged, ev, sorted(listed), explicit, REMEDIATION)]
    if ties or not odd or (len(odd) * 2 >= world and not tie_at_bound):
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
    if not explicit and (tie_at_bound or bound == "ready"):
        clear = False  # the world size decides it: named at low, the size to collect
        ev["collect_next"] = ("the job's size (horovodrun -np / hvd.size()): the report "
                              "does not print it")
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


def _report_evidence(e: Any, reports: int, world: int, explicit: bool, bound: str,
                     submitters_odd: bool) -> dict[str, Any]:
    """What every finding on one stall report carries: the report's lines and counts, the world
    it was read against, and Horovod's own shutdown of the job when the report announced it."""
    ev: dict[str, Any] = {
        "category": "mismatched_collective" if submitters_odd else "straggler_outside_nccl",
        "pattern": "horovod.stall_report", "missing": e.detail["missing"],
        "shutdown_ranks": e.detail["shutdown"], "witnesses": [e.rank] if e.rank is not None
        else [0], "spoke": {"ranks": world, "of": world if explicit else None},
        "world_size_from": "--world-size / log" if explicit else _BOUND_WORDS[bound],
        "lines": [{"line": f"{e.file}:{e.line}", "text": e.text[:240]}],
        "reports": reports}
    if e.detail.get("ready"):
        ev["ready"] = e.detail["ready"]
    if e.detail.get("shutdown_after_s") is not None:
        ev["shutdown_after_s"] = e.detail["shutdown_after_s"]
        ev["shutdown"] = (
            f"Horovod ends the job itself: rank(s) {e.detail['shutdown']} stalled past "
            f"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS={e.detail['shutdown_after_s']} — the other "
            "ranks' 'Horovod has been shut down' errors that follow are this stall's end")
    return ev


_BOUND_WORDS = {
    "missing": "a lower bound: the highest rank listed + 1, and at least one submitter per "
               "tensor (a larger world only adds submitters)",
    "ready": "a lower bound: the highest ready rank + 1 (ranks above it may be missing too)",
    "explicit": "--world-size / log"}


def _resolve(detail: dict[str, Any], world_size: int | None
             ) -> tuple[dict[str, set[int]], int, str]:
    """Per tensor, the ranks missing it, and the world they are counted in.

    The "missing" forms list every rank of ``[0, size)`` that has not submitted a tensor, and
    each tensor was submitted by someone, so without ``world_size`` the job has at least
    ``max(listed) + 1`` ranks and more than any tensor's missing set. The "ready" form (0.9.0 -
    0.13.6) lists the submitters instead: the missing ranks are the rest of the world, and
    without its size only the ranks below the highest ready rank are known."""
    missing = {t: set(r) for t, r in detail.get("missing", {}).items()}
    ready = {t: set(r) for t, r in detail.get("ready", {}).items()}
    if world_size:
        everyone = set(range(world_size))
        for t, subs in ready.items():
            missing.setdefault(t, set()).update(everyone - subs)
        return missing, world_size, "explicit"
    top = max((r for rs in (*missing.values(), *ready.values()) for r in rs), default=0)
    world = top + 1
    if any(set(range(world)) <= m for m in missing.values()):
        world += 1  # nobody would have submitted it: one more rank did
    for t, subs in ready.items():
        missing.setdefault(t, set()).update(set(range(world)) - subs)
    return missing, world, "ready" if ready else "missing"


def _cut_findings(cut: list[Any]) -> list[StallFinding]:
    """The stall inspector's warning with no rank list after it (cut by the paste, or the log
    ends there), or its rank lines with no warning: Horovod saw tensors waiting on a subset of
    ranks past the stall-check time — a stall, never "healthy" — but which side is wrong is in
    the lines that are missing."""
    if not cut:
        return []
    listed = sorted({int(r) for e in cut for r in (e.detail.get("ranks") or [])})
    e = cut[-1]
    ev: dict[str, Any] = {
        "category": "straggler_outside_nccl", "pattern": "horovod.stall_report",
        "cut": True, "witnesses": [e.rank] if e.rank is not None else [0],
        "lines": [{"line": f"{e.file}:{e.line}", "text": e.text[:240]}], "reports": len(cut),
        "reason": "Horovod's stall inspector warned that tensors wait on a subset of ranks, "
                  "but the report is cut before its 'Stalled ranks:' / 'Missing ranks:' list "
                  "(or 'Stalled ops:' in older releases): a stall, no rank named",
        "collect_next": "the whole warning from rank 0's log, with the rank lines after it "
                        "(mpirun --tag-output keeps each fragment's rank; don't paste from a "
                        "terminal that redraws a progress bar over it), and the job's size "
                        "(horovodrun -np)"}
    if listed:  # only rank lines, no head: the inspector listed these ranks as lacking tensors
        ev["suspects"] = listed[:64]
        ev["reason"] = (
            f"Horovod stall-report line(s) without their warning: rank(s) {listed[:16]} had not "
            "submitted the listed tensors that other ranks had — whether they are the few that "
            "lag or the many that wait cannot be told without the rest of the report")
    return [StallFinding(kind="undecided", ranks=[], process_group=None, seq_id=None, op=None,
                         source="logs", confidence="low", evidence=ev,
                         remediation=list(REMEDIATION))]
