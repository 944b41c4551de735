"""Kubernetes events and the training operators' Failed condition: which pods were stopped, how.

Why: beside the pod table (:mod:`.log_pod_table`) and the describe block
(:mod:`.log_pod_describe`), users paste ``kubectl get events`` or the describe block's
``Events:`` table, and the operator's "PyTorchJob … is failed because 1 Worker replica(s)
failed"; before this rule those read "no evidence" unless a container state was in them.

The rows (grammar ``k8s.event.pod_stopped``; kubectl's layouts as read for the describe block at
kubectl v0.24.0 / v0.31.0): ``kubectl get events`` / ``kubectl events`` — ``LAST SEEN  TYPE
REASON  OBJECT  MESSAGE`` with OBJECT ``kind/name``; describe — ``Type  Reason  Age  From
Message`` under the block of the pod (its ``Name:``). The reasons read, in
kubernetes/kubernetes through the index: the kubelet's ``Evicted`` (``eviction/helpers.go``:
"The node was low on resource: %v. …"), ``BackOff`` ("Back-off restarting failed container %s
in pod %s"), the scheduler's ``Preempted`` ("Preempted by pod %v on node %v") and
``FailedScheduling``, the node controller's ``NodeNotReady`` on each pod of a lost node, and
node-problem-detector's ``OOMKilling`` on a NODE (the kernel's "Killed process %d (%s)").
The operators (grammar ``k8s.operator.job_failed``; training-operator's ``UpdateJobStatus``):
"<Kind> <name> is failed|restarting because N <type> replica(s) failed".

What each proves: Evicted, Preempted and NodeNotReady stop a pod from OUTSIDE its processes (the
node's pressure, the scheduler, a lost node); FailedScheduling means the pod never started;
BackOff repeats a failure of the container whose own log says why. The pod is the one whose
loss the others waited on — or one stopped after the failure — and the events' ages do not
order pods reliably: its rank (a PyTorchJob's ``master-0`` = 0, ``worker-i`` = i + 1, beside its
master, as the pod table reads it) is a SUSPECT, never a culprit. OOMKilling names a node and a
pid, the operator a count: nobody. All ``undecided`` at ``low``; a fallback kind, so the pod's
own termination (the describe block, the pod table) answers first.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls.log_finding import log_finding, of_kind
from stormotel.analyzers.stalls.log_pod_table import pytorchjob_rank

KIND = "k8s_events"
EVENT = "k8s.event.pod_stopped"
OPERATOR = "k8s.operator.job_failed"
_OBJECT = re.compile(r"^(?P<kind>[a-z][\w.-]{0,80})/(?P<name>[a-z0-9][a-z0-9.-]{0,252})\s")
#: any event row of kubectl get events: its OBJECT pod (the job's pods, for the rank map)
_ROW = re.compile(r"(?<!\S)(?:Normal|Warning)\s{1,40}[A-Z]\w{1,60}\s{1,40}pod/"
                  r"(?P<name>[a-z0-9][a-z0-9.-]{0,252})\s")
_NAME = re.compile(r"^Name:\s{1,60}(?P<name>[a-z0-9][a-z0-9.-]{0,252})\s*$")
#: the reasons that stop (or never start) a pod, and what each says
_SAYS = {"Evicted": "evicted (the node's pressure)", "Preempted": "preempted by the scheduler",
         "NodeNotReady": "on a node that stopped answering",
         "FailedScheduling": "never scheduled (never started)",
         "BackOff": "its container kept failing (restart back-off)"}
_EVENTS = 4096


class Scanner:
    """Event rows with the pod each names (the OBJECT column, else the describe block's pod),
    and the operators' Failed lines; every pod name seen is kept to map names to ranks."""

    def __init__(self, ctx: Any) -> None:
        self.found: list[lf.Found] = []
        self.names: list[str] = []
        self.block: str | None = None

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if "name:" in low and (n := _NAME.match(seg)) is not None:
            self.block = n.group("name")
            self.names.append(self.block)
            return
        if len(self.found) >= _EVENTS:
            return
        if "replica(s) failed" in low and (m := gr.BY_ID[OPERATOR].regex.search(seg)):
            self.found.append(lf.Found(KIND, no, None, None, seg.strip()[:300], {
                "reason": f"{m.group('kind')} {m.group('what')}", "pod": None, "object": "job",
                "count": f"{m.group('n')} {m.group('rtype')}"}, OPERATOR))
            return
        if "pod/" in low and (row := _ROW.search(seg)) is not None:
            self.names.append(row.group("name"))  # any event row: a pod of the job shown
        if not any(t in low for t in gr.BY_ID[EVENT].triggers):
            return
        m = gr.BY_ID[EVENT].regex.search(seg)
        if m is None:
            return
        obj = _OBJECT.match(m.group("rest"))
        kind = obj.group("kind") if obj else ("pod" if self.block else "")
        name = obj.group("name") if obj else self.block
        if not name or (obj is None and m.group("reason") == "BackOff"):
            return  # under a describe block BackOff repeats its container's state (read there)
        if kind == "pod":
            self.names.append(name)
        self.found.append(lf.Found(KIND, no, None, None, seg.strip()[:300], {
            "reason": m.group("reason"), "pod": name if kind == "pod" else None,
            "object": f"{kind}/{name}"}, EVENT))

    def finish(self, text: str) -> list[lf.Found]:
        for f in self.found:
            f.detail["names"] = self.names[:_EVENTS]
        return self.found


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """One finding for the events and operator lines of the logs (module docstring)."""
    mine = of_kind(events, KIND)
    if not mine:
        return []
    names = sorted({n for e in mine for n in e.detail.get("names", [])})
    stopped = [e for e in mine if e.detail["reason"] in _SAYS and e.detail["pod"]]
    pods: dict[str, str] = {}
    for e in stopped:
        pods.setdefault(e.detail["pod"], e.detail["reason"])
    ranks = {p: pytorchjob_rank(p, names) for p in pods}
    suspects = sorted({r for r in ranks.values() if r is not None})
    said = "; ".join(f"pod {p} {_SAYS[why]}" + (f" (rank {ranks[p]})" if ranks[p] is not None
                                                else "")
                     for p, why in list(pods.items())[:8])
    others = [e for e in mine if e not in stopped]
    more = "; ".join(dict.fromkeys(
        f"{e.detail['object']} {e.detail['reason']}" + (f" ({e.detail['count']} replica(s))"
                                                       if "count" in e.detail else "")
        for e in others[:8]))
    if not said:
        reason = (f"Kubernetes reports {more}: a node's kill names a pid, an operator's count "
                  "names no pod — nobody is named")
    else:
        reason = (f"Kubernetes events: {said}" + (f"; also {more}" if more else "")
                  + " — stopped from outside its processes, never started, or a repetition of "
                    "its container's own failure; which pod went first the events do not say: "
                    + ("suspects" if suspects else "no pod maps to a rank (a PyTorchJob's "
                       "master-0 / worker-i beside its master does)"))
    return [log_finding("undecided", [], "exception", "low",
                        stopped[0].pattern if stopped else mine[0].pattern, reason, REMEDIATION,
                        (stopped or mine)[:8], suspects=suspects[:64], collect_next=suspects[:16],
                        rank_from="a PyTorchJob's master-0 = 0 / worker-i = i+1 (the "
                                  "training-operator's RANK with one process per pod)")]


#: what to collect and where to look (read by findings)
REMEDIATION = [
    "Read the named pods' own logs (kubectl logs --previous) and `kubectl describe pod`: the "
    "container's State / Last State says whether it ended of its own (OOMKilled, a signal) "
    "before or after the event.",
    "For Evicted / NodeNotReady / OOMKilling, look at the node (kubectl describe node: its "
    "conditions and pressure); for Preempted, the job's priority class; for FailedScheduling, "
    "the resources the pod asks for.",
]
