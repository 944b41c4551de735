"""``torch.multiprocessing.spawn``'s parent-side report: which spawned process failed, and how.

Why: a job started with ``mp.spawn(fn, nprocs=N)`` (detectron2, fairseq, many research scripts)
ends in the PARENT with one exception naming one child — "process 1 terminated with signal
SIGKILL" — often with no rank prefix anywhere; before this rule such a log read "no evidence".

The messages, read in ``ProcessContext.join`` (``torch/multiprocessing/spawn.py`` at v1.13.0,
v2.1.0, v2.4.0, v2.8.0 and 2.13.0 — the same words throughout; grammar
``torch.mp_spawn.process_exited`` / ``torch.mp_spawn.process_raised``)::

    ProcessExitedException: process %d terminated with signal %s      (no error file/queue)
    ProcessExitedException: process %d terminated with exit code %d
    ProcessRaisedException:

    -- Process %d terminated with the following error:
    <the child's traceback.format_exc()>

What ``join`` proves. It waits on every live child's sentinel (``multiprocessing.connection.wait``
— on Linux a ``PollSelector`` whose ready list follows registration order, i.e. spawn index
order), pops the ready ones in that order and stops at the first with a non-zero exit code. So
the named child is the first failure the parent SAW; of children already dead at one wake-up it
is the LOWEST index, not necessarily the first to die (first only together). Only then does
``join`` stop the rest (SIGTERM; at 2.4 and after a SIGKILL after a 30 s grace, both logged by
pid — "Terminating process %s via signal SIGTERM"): the others' deaths are consequences and are
never reported. ``_wrap`` turns an ``Exception`` raised by ``fn`` into the error file (a queue up to
2.1) and exit 1, so:

- *raised*: the child's own traceback follows; its last exception line decides — an own error
  (an OOM, a CUDA / NCCL error, a bug: :mod:`.log_failures`' reading) is a culprit at ``low``;
  a consequence (a watchdog or store timeout, a closed connection, an aborted communicator) or
  a traceback cut before its exception line is a suspect;
- *exited by a signal*: its own death (SIGKILL — usually the host's OOM killer —, SIGSEGV,
  SIGBUS, SIGILL, SIGFPE) a culprit at ``low``; SIGABRT (how a watchdog timeout ends a process),
  SIGTERM/SIGINT/SIGHUP (a stop from outside) a suspect;
- *exited with a code*: ``fn`` left through ``sys.exit``/``os._exit`` (no exception reached
  ``_wrap``), a victim's way out as well: a suspect.

Index or rank: ``fn`` is called as ``fn(i, *args)``; ``i`` is the rank only where ``fn`` makes it
so — on one node usually rank = i, on several ``node_rank × nprocs + i`` (detectron2's
``launch``). When nothing in the logs shows a second node (no stated world above 8, no rank
above 7, no node rank above 0 or node count above 1), the index is read as the rank under the
presumption pattern ``torch.mp_spawn.index_as_rank`` — never above ``low``; otherwise the answer
is ``undecided`` naming the local process and how to turn it into a rank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls.log_finding import log_finding

KIND = "mp_spawn"
EXITED = "torch.mp_spawn.process_exited"
RAISED = "torch.mp_spawn.process_raised"
READING = "torch.mp_spawn.index_as_rank"
_EXITED = gr.BY_ID[EXITED].regex
_RAISED = gr.BY_ID[RAISED].regex
#: a child's death by a signal of its own (not how a waiting victim or a stopped process ends)
_OWN_SIGNALS = frozenset({"SIGKILL", "SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE"})
#: the unindented last line of a traceback: ``module.Name: message`` or a bare ``Name``
EXC_LINE = re.compile(r"^(?:[A-Za-z_]\w{0,80}\.){0,8}[A-Za-z_]\w{0,80}(?:Error|Exception|"
                       r"Interrupt|Exit|Iteration|Failure)(?::|\s*$)")
#: lines a child's traceback may span after its header before it is taken as cut
_SPAN = 2000
#: a node rank above 0 or a node count above 1 stated in the output: spawn indexes are local
NODES = re.compile(r"\b(?P<what>node_rank|machine_rank|nnodes|num_machines|num_nodes)\b"
                    r"\W{0,4}(?P<n>\d{1,5})\b")


def stated_nodes(seg: str, low: str) -> str | None:
    """What a line states of a second node ("nnodes 2", "node_rank 1"), or None."""
    if ("node" in low or "machine" in low) and (m := NODES.search(seg)):
        n = int(m.group("n"))
        if n > (0 if m.group("what").endswith("rank") else 1):
            return f"{m.group('what')} {n}"
    return None


#: the most GPUs one node commonly holds (a stated world above it means a second node)
_NODE_GPUS = 8

REMEDIATION = {
    "own": "Read that child's own error above (the traceback spawn re-printed, or dmesg for a "
           "SIGKILL: the host OOM killer names the pid) — its peers were stopped by the parent "
           "after it, so their ends are consequences.",
    "suspect": "The child spawn named ended the way a waiting victim or a stopped process ends: "
               "collect every child's own output (rank-prefixed logs: print the rank in fn, or "
               "run under torchrun --tee 3) and the first error of any of them before this "
               "report; the parent reports only the first child it found dead.",
    "map": "Map the spawn index to a rank: fn(i, *args) gets the LOCAL index i; the rank is what "
           "fn computes (one node: usually i; several: node_rank × nprocs + i) — print it, "
           "or collect the node's rank.",
}


@dataclass
class _Report:
    line: int
    text: str
    index: int
    how: str  #: "signal", "exit_code" or "raised"
    detail: dict[str, object] = field(default_factory=dict)
    exc_line: int | None = None  #: the child's last exception line (raised)
    exc_text: str = ""
    frames: int = 0


class Scanner:
    """spawn's reports of one file; a raised one is followed through the child's traceback,
    whose lines a private :class:`.log_failures.FailureScanner` reads as that child's."""

    def __init__(self, ctx: Any) -> None:
        self.stamp = ctx.stamp
        self.reports: list[_Report] = []
        self._open: _Report | None = None
        self._child: lf.FailureScanner | None = None
        self._nodes: str | None = None  #: what in this file shows a second node

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if self._nodes is None and ("node" in low or "machine" in low) and \
                (m := NODES.search(seg)):
            n = int(m.group("n"))
            if n > (0 if m.group("what").endswith("rank") else 1):
                self._nodes = f"{m.group('what')} {n}"
        if "terminated with" in low:
            if (m := _RAISED.search(seg)) is not None:
                self._close()
                idx = gr.parse_rank(m.group("idx"))
                if idx is not None:
                    self._open = _Report(no, seg.strip()[:300], idx, "raised")
                    self._child = lf.FailureScanner(None, self.stamp)
                return
            if (m := _EXITED.search(seg)) is not None and "the following error" not in low:
                self._close()
                self._exited(no, seg, m)
                return
        cur = self._open
        if cur is None or self._child is None:
            return
        if no - cur.line > _SPAN:
            self._close()
            return
        body = seg.rstrip()
        if body.lstrip().startswith('File "'):
            cur.frames += 1
        elif body and not body[0].isspace() and EXC_LINE.match(body):
            cur.exc_line, cur.exc_text = no, body[:300]
        elif body and not body[0].isspace() and cur.exc_line is not None and not \
                body.startswith(("Traceback", "During handling", "The above exception")):
            self._close()  # the child's traceback ended at its exception line
            return
        self._child.feed(no, seg, low, cur.index)

    def _exited(self, no: int, seg: str, m: re.Match[str]) -> None:
        idx = gr.parse_rank(m.group("idx"))
        if idx is None:
            return
        if m.group("sig"):
            sig = m.group("sig")
            self.reports.append(_Report(no, seg.strip()[:300], idx, "signal", {
                "signal": sig, "own": sig in _OWN_SIGNALS, "category": "signal",
                "error": f"terminated with signal {sig}"}))
        else:
            code = int(m.group("code"))
            self.reports.append(_Report(no, seg.strip()[:300], idx, "exit_code", {
                "exit_code": code, "own": False, "category": "exception",
                "error": f"terminated with exit code {code}"}))

    def _close(self) -> None:
        cur, child = self._open, self._child
        self._open = self._child = None
        if cur is None or child is None:
            return
        child.close(0)
        own = [f for f in child.found if f.kind == lf.RANK_ERROR and f.line == cur.exc_line]
        if own:
            d = own[0].detail
            cur.detail = {"own": True, "category": d.get("category", "exception"),
                          "error": cur.exc_text} | {
                k: d[k] for k in ("exception", "frame", "requested_bytes") if k in d}
        else:
            cur.detail = {"own": False, "category": "exception", "error": cur.exc_text or None,
                          "cut": cur.exc_line is None}
        self.reports.append(cur)

    def finish(self, text: str) -> list[lf.Found]:
        self._close()
        return [lf.Found(KIND, r.line, None, self.stamp(r.text), r.text, {
            "index": r.index, "how": r.how, "second_node": self._nodes, **r.detail},
            RAISED if r.how == "raised" else EXITED) for r in self.reports]


def second_node(mine: list[Any], events: list[Any], known: int | None) -> str | None:
    """What in the logs shows more than one node (None: nothing does)."""
    stated = next((str(e.detail["second_node"]) for e in mine if e.detail.get("second_node")),
                  None)
    if stated:
        return f"the output states {stated}"
    if known is not None and known > _NODE_GPUS:
        return f"the stated world ({known}) is larger than one node commonly holds"
    highest = max((e.rank for e in events if e.rank is not None), default=-1)
    if highest >= _NODE_GPUS:
        return f"rank {highest} appears in the logs"
    return None


def _why_not(d: dict[str, Any]) -> str:
    """Why a report names a suspect, not a culprit."""
    if d["how"] == "signal":
        return (f"it died of {d['signal']}: how a watchdog timeout (SIGABRT) or a stop from "
                "outside (SIGTERM/SIGINT/SIGHUP) ends a process that was only waiting")
    if d["how"] == "exit_code":
        return (f"it exited with code {d['exit_code']} without an exception reaching spawn "
                "(sys.exit / os._exit): a victim leaves so as well")
    if d.get("cut"):
        return "its traceback is cut before the exception line: what it raised is unknown"
    return (f"it raised {str(d.get('error') or '?')[:160]!r} — a consequence of a peer's "
            "trouble (a timeout, a closed connection, an aborted communicator), not an own "
            "error")


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """One finding for spawn's reports in the logs together (module docstring)."""
    mine = [e for e in events if e.kind == KIND and e.detail]
    if not mine:
        return []
    indexes = sorted({int(e.detail["index"]) for e in mine})
    second = second_node(mine, events, known)
    lead = mine[0].detail
    where = ("the parent of torch.multiprocessing.spawn reported process "
             f"{lead['index']} as the first child it found failed")
    if len(indexes) > 1:
        return [log_finding(
            "undecided", [], "unknown", "low", mine[0].pattern or EXITED,
            f"spawn reported different processes {indexes[:16]} in these logs — several "
            "parents (one per node: their indexes are local) or several runs: nobody is named",
            [REMEDIATION["map"], REMEDIATION["suspect"]], mine,
            suspects=[] if second else indexes[:16], process_indexes=indexes[:64])]
    idx = indexes[0]
    own = all(bool(e.detail.get("own")) for e in mine)
    what = str(lead.get("error") or lead["how"])[:200]
    if own and second is None:
        return [log_finding(
            "rank_failure", [idx], str(lead.get("category") or "exception"), "low", READING,
            f"{where}: {what} — its own failure; read as rank {idx} because nothing in the "
            f"logs shows a second node (on node k of a multi-node job it is k × nprocs + {idx})",
            [REMEDIATION["own"], REMEDIATION["map"]], mine, process_index=idx,
            rank_from="spawn's process index (fn(i, *args)), presumed the rank on one node",
            **{k: lead[k] for k in ("signal", "exit_code", "exception", "frame") if k in lead})]
    why = (f"it failed of its own ({what}), but the index is LOCAL and {second}"
           if own else _why_not(lead))
    return [log_finding(
        "undecided", [], str(lead.get("category") or "unknown"), "low",
        mine[0].pattern or EXITED, f"{where} — {why}", [
            REMEDIATION["map"] if own else REMEDIATION["suspect"], REMEDIATION["own"]
            if own else REMEDIATION["map"]], mine,
        suspects=[] if second else [idx], process_index=idx,
        rank_from="spawn's process index (fn(i, *args)): local to its node")]
