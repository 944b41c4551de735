"""A ``kubectl get pods`` table pasted into a report: which pod failed, and which rank it is.

Why: a Kubeflow PyTorchJob's report is often only the pod table — one pod ``OOMKilled``, the
rest ``Running`` (hung in their next collective) — and before this rule it read "no evidence".

The table (grammar ``k8s.pod_status``): kubectl's ``printPod``
(``pkg/printers/internalversion/printers.go``) prints NAME READY STATUS RESTARTS AGE; STATUS is
the pod's phase, or a container's Waiting / Terminated reason (``OOMKilled``, ``Error``,
``Completed``, ``CrashLoopBackOff``), ``Signal:%d`` / ``ExitCode:%d`` when the runtime gave no
reason, ``Terminating`` while the pod is deleted.

Which rank a pod is: the training-operator names a replica's pod ``<job>-<type>-<index>``
(``GenGeneralName``) and, when the job has a Master, sets ``RANK`` (and ``PET_NODE_RANK``) to
the index, plus one for a Worker (``pkg/controller.v1/pytorch/envvar.go``, read at v1.5.0 and
v1.8.1): master-0 is 0, worker-i is i+1. That is the pod's NODE rank — a process rank only with
one process per pod (no torchrun ``--nproc_per_node`` > 1 inside; the output shows no per-node
launcher). Other operators' names (JobSet's ``<set>-<job>-<index>-<pod>-<hash>``, a worker
without a master) map to no rank here.

What it proves: one pod ``OOMKilled`` (or ended by its own death signal, ``Signal:9`` /
``Signal:11`` …) while no other pod failed: that pod's container was killed for memory first —
its rank a culprit at ``low`` (the presumption of one process per pod). ``Error``,
``ExitCode:N``, ``CrashLoopBackOff`` (how a timed-out victim ends too), several failed pods, or
pods mapping to no rank: suspects or nobody (``undecided``).
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls.log_rankless import KIND as RANKLESS
from stormotel.analyzers.stalls.log_srun_exit import node_launcher_in

PATTERN = "k8s.pod_status"
_HEAD = gr.BY_ID[PATTERN].regex
_ROW = re.compile(r"^\s*(?P<name>[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?)\s+(?P<ready>\d{1,3}/"
                  r"\d{1,3})\s+(?P<status>[A-Za-z][\w:.-]{0,40})\s+(?P<restarts>\d{1,6})"
                  r"(?:\s+\([^)\n]{0,40}\))?\s+\S{1,20}")
_PYTORCHJOB = re.compile(r"^(?P<job>[a-z0-9.-]{1,240})-(?P<type>master|worker)-(?P<i>\d{1,6})$")
#: statuses that are a failure of the pod's own container: killed for memory or by its own signal
_OWN = frozenset({"OOMKilled", "Signal:9", "Signal:11", "Signal:7", "Signal:4", "Signal:8"})
#: statuses of a failed container (besides any Signal:N and a non-zero ExitCode:N)
_FAILED = frozenset({"OOMKilled", "Error", "CrashLoopBackOff", "ContainerStatusUnknown",
                     "Evicted", "Init:Error", "Init:CrashLoopBackOff", "Init:OOMKilled"})
_ROWS = 4096
#: a quoted paste's prefix ("> ", "| ") before a table line
_QUOTE = re.compile(r"^\s{0,8}(?:>\s?|\|\s?){1,3}")


class Scanner:
    """The pod tables of one file, read from its raw lines at the end (the parser glues a long
    line to the next as a wrapped record, which a table's rows are not), then judged whole."""

    def __init__(self, ctx: Any) -> None:
        self.stamp = ctx.stamp
        self._launcher = False

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if not self._launcher and node_launcher_in(low):
            self._launcher = True

    def finish(self, text: str) -> list[lf.Found]:
        if "RESTARTS" not in text:
            return []
        tables: list[list[tuple[int, str, str, str]]] = []
        open_ = False
        for no, line in enumerate(text.splitlines(), 1):
            line = _QUOTE.sub("", line, count=1)
            if "RESTARTS" in line and _HEAD.search(line):
                tables.append([])
                open_ = True
                continue
            if not open_:
                continue
            m = _ROW.match(line)
            if m is None or len(tables[-1]) >= _ROWS:
                open_ = False
                continue
            tables[-1].append((no, m.group("name"), m.group("status"), line.strip()[:200]))
        out: list[lf.Found] = []
        for rows in tables:
            out += self._judge(rows)
        return out

    def _judge(self, rows: list[tuple[int, str, str, str]]) -> list[lf.Found]:
        names = [r[1] for r in rows]
        return judge(rows, {n: pytorchjob_rank(n, names) for n in names}, self._launcher,
                     PATTERN, RANK_FROM)


RANK_FROM = ("the training-operator's RANK of the pod (master-0 = 0, worker-i = i+1): a node's "
             "rank, a process's only with one process per pod")


def judge(rows: list[tuple[int, str, str, str]], ranks: dict[str, int | None], launcher: bool,
          pattern: str, rank_from: str) -> list[lf.Found]:
    """The evidence of one set of pods (line, name, kubectl's status word, text): each failed
    pod as its rank's error — its own failure (``OOMKilled``, its own death signal) only when it
    is the one failed pod — or, when a failed pod maps to no rank (or each pod runs a per-node
    launcher), one rankless reading naming the pods."""
    failed = [r for r in rows if _failed(r[2])]
    if not failed:
        return []
    if launcher or any(ranks.get(r[1]) is None for r in failed):
        what = ", ".join(f"{r[1]} {r[2]}" for r in failed[:8])
        return [lf.Found(RANKLESS, failed[0][0], None, None, failed[0][3], {
            "reporter": None, "error": what + (" — each pod runs a per-node launcher, so "
                                               "its rank is a node's" if launcher
                                               else "")}, pattern)]
    own = len(failed) == 1 and failed[0][2] in _OWN
    out = []
    for no, name, status, line in failed:
        detail: dict[str, object] = {
            "category": "oom" if status.endswith("OOMKilled") else
            "signal" if status.startswith("Signal:") else "exception",
            "launcher": "kubernetes", "launcher_only": True, "weak_rank": True,
            "error": f"pod {name}: {status}", "host": name, "rank_from": rank_from}
        if status.startswith("Signal:"):
            detail["signal"] = lf.signal_name(-int(status.split(":")[1]))
        if not own:
            detail |= {"ambiguous": True, "why": (
                f"the pods show {len(failed)} failed pod(s) "
                f"({', '.join(f'{n} {s}' for _, n, s, _ in failed[:8])}): "
                + ("first only together — which ended first they do not say"
                   if len(failed) > 1 else
                   f"{status} is how a victim's timeout ends a pod too"))}
        out.append(lf.Found(lf.RANK_ERROR, no, ranks[name], None, line, detail, pattern))
    return out


def _failed(status: str) -> bool:
    """Whether kubectl's STATUS says the pod's container failed (printPod's reasons)."""
    return status in _FAILED or status.startswith("Signal:") or (
        status.startswith("ExitCode:") and status != "ExitCode:0")


def pytorchjob_rank(name: str, names: list[str]) -> int | None:
    """The training-operator's RANK of a PyTorchJob pod, when the pods shown include its
    Master."""
    m = _PYTORCHJOB.match(name)
    if m is None:
        return None
    job = m.group("job")
    if f"{job}-master-0" not in names:
        return None  # no Master: the operator sets no RANK (elastic), the index is not a rank
    index = gr.parse_rank(m.group("i"))
    if index is None:
        return None
    return index if m.group("type") == "master" else gr.parse_rank(str(index + 1))
