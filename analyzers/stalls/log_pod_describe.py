"""``kubectl describe pod`` pasted into a report: the container that ended, how, and its RANK.

Why: beside (or instead of) the ``kubectl get pods`` table (:mod:`.log_pod_table`), users paste
the describe block of the pod that failed; before this rule it read "no evidence".

The block, read in kubectl's ``pkg/describe/describe.go`` at the tags v0.24.0 and v0.31.0
(kubernetes/kubectl; grammar ``k8s.describe_pod.terminated``): ``describePod`` writes ``Name:``,
``Namespace:`` … at column 0, the pod's ``Status:`` and, when set, its ``Reason:`` (``Evicted``
from the kubelet's eviction manager); then per container ``describeContainerState`` →
``describeStatus("State", …)`` and, when the container restarted, ``"Last State"``::

    State:          Terminated
      Reason:       OOMKilled            (only when the runtime gave one)
      Exit Code:    137
      Signal:       9                    (only when > 0)

and ``describeContainerEnvVars`` lists the pod spec's ``Environment:`` (``RANK:  1``), where the
Kubeflow training-operator puts ``RANK`` and ``PET_NPROC_PER_NODE``
(``pkg/controller.v1/pytorch/envvar.go``, as :mod:`.log_pod_table` reads it).

Which rank a pod is: its ``RANK`` in the block, when ``PET_NPROC_PER_NODE`` is absent or 1 (with
more processes per pod RANK is the node's); else a PyTorchJob's ``<job>-master-0`` /
``-worker-i`` when the pods described include its master (:func:`.log_pod_table.
pytorchjob_rank`). Other operators' names (MPIJob's ``-launcher`` / ``-worker-i``: a node of
mpirun ranks; JobSet's ``<set>-<job>-<jobindex>-<podindex>-<hash>``; LeaderWorkerSet's
``<lws>-<group>[-<i>]``) map to no rank: nobody named.

What it proves, as for the pod table (of a container's two ends, the ``Last State`` is the
earlier — the first failure when it restarted once): one described pod ended ``OOMKilled``
(its container's memory cgroup) or by its own death signal, while no other described pod
failed — that rank's own failure at ``low``; ``Error`` with an exit code (137 is a SIGKILL
from anyone: the kubelet's eviction, a preemption, a peer's launcher), ``Evicted`` (the NODE's
pressure), several failed pods, or no rank: suspects or nobody.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls.log_pod_table import judge, pytorchjob_rank
from stormotel.analyzers.stalls.log_srun_exit import node_launcher_in

PATTERN = "k8s.describe_pod.terminated"
_NAME = re.compile(r"^Name:\s{1,60}(?P<name>[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?)\s*$")
_POD_REASON = re.compile(r"^Reason:\s{1,60}(?P<reason>[A-Za-z]\w{0,40})\s*$")
_STATE = gr.BY_ID[PATTERN].regex
_FIELD = re.compile(r"^\s{2,24}(?P<key>Reason|Exit Code|Signal):\s{1,60}(?P<value>-?[\w:]{1,40})"
                    r"\s*$")
_ENV = re.compile(r"^\s{2,24}(?P<key>RANK|PET_NPROC_PER_NODE):\s{1,80}(?P<value>\S{1,16})\s*$")
_QUOTE = re.compile(r"^\s{0,8}(?:>\s?|\|\s?){1,3}")
_BLOCKS = 512


class Scanner:
    """The describe blocks of one file, read from its raw lines at the end (their tab-aligned
    fields are no log records), then judged together as the pod table's rows are."""

    def __init__(self, ctx: Any) -> None:
        self._launcher = False

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if not self._launcher and node_launcher_in(low):
            self._launcher = True

    def finish(self, text: str) -> list[lf.Found]:
        if "Terminated" not in text and "Evicted" not in text:
            return []
        pods: list[dict[str, Any]] = []
        cur: dict[str, Any] | None = None
        state: dict[str, str] | None = None
        for no, raw in enumerate(text.splitlines(), 1):
            line = _QUOTE.sub("", raw, count=1).rstrip()
            if (m := _NAME.match(line)) is not None:
                if len(pods) >= _BLOCKS:
                    break
                cur = {"name": m.group("name"), "no": no, "ends": [], "env": {}, "ns": False}
                pods.append(cur)
                state = None
                continue
            if cur is None:
                continue
            if line.startswith("Namespace:"):
                cur["ns"] = True
            elif (m := _POD_REASON.match(line)) is not None:
                cur["reason"] = m.group("reason")
            elif (m := _STATE.match(line)) is not None:
                state = {"line": line.strip(), "no": str(no)}
                cur["ends"].append(state)
            elif state is not None and (m := _FIELD.match(line)) is not None:
                state.setdefault(m.group("key"), m.group("value"))
            elif (m := _ENV.match(line)) is not None:
                cur["env"].setdefault(m.group("key"), m.group("value"))
                state = None
            elif line.strip() and not line.startswith((" ", "\t")):
                state = None
        pods = [p for p in pods if p["ns"]]  # a describe block has its Namespace: next
        if not pods:
            return []
        names = [p["name"] for p in pods]
        rows, ranks = [], {}
        for p in pods:
            status, no, line = _status(p)
            rows.append((no, p["name"], status, f"pod {p['name']}: {line}"[:200]))
            ranks[p["name"]] = _rank(p, names)
        return judge(rows, ranks, self._launcher, PATTERN, RANK_FROM)


RANK_FROM = ("the RANK in the pod's environment (set by the training-operator), or a "
             "PyTorchJob's master-0 = 0 / worker-i = i+1: a process's rank with one process per "
             "pod")


def _status(pod: dict[str, Any]) -> tuple[str, int, str]:
    """kubectl's one status word for the pod (as printPod would show it), the line, the text."""
    if pod.get("reason") == "Evicted":
        return "Evicted", pod["no"], "Reason: Evicted (the node's pressure)"
    # a Last State ended before the State shown: the earlier end first
    for end in sorted(pod["ends"], key=lambda e: not e["line"].startswith("Last State")):
        code = end.get("Exit Code", "")
        reason = end.get("Reason", "")
        if reason == "Completed" or (code == "0" and not reason):
            continue
        word = reason or (f"Signal:{end['Signal']}" if end.get("Signal") else
                          f"ExitCode:{code}" if code else "")
        if word and (word != "Error" or code != "0"):
            return word, int(end["no"]), f"{end['line']}, Reason {reason or '-'}, Exit Code " \
                                         f"{code or '-'}"
    return "Running", pod["no"], "no terminated container"


def _rank(pod: dict[str, Any], names: list[str]) -> int | None:
    """The pod's RANK from its environment (one process per pod), else its PyTorchJob name."""
    env = pod["env"]
    if env.get("PET_NPROC_PER_NODE", "1") != "1":
        return None  # torchrun inside: RANK is the node's
    if "RANK" in env:
        return gr.parse_rank(env["RANK"])
    return pytorchjob_rank(pod["name"], names)
