"""The XLA / TSL coordination service's heartbeat timeout: the JAX processes it lost.

Why: a multi-host JAX job whose process dies (an OOM kill, a segfault, a preempted VM) ends on
every other process with the coordination service's notice, not with an error of their own;
before this rule such a log read "no evidence".

The messages, read in ``CheckHeartbeatTimeout`` (grammar ``xla.coordination.heartbeat_timeout``):

- per stale task (tensorflow's ``coordination_service.cc``, TF 2.8 – 2.12, and xla/tsl's, read
  at openxla/xla a4771e3c and b80f3b74): "Task /job:%s/replica:0/task:%d heartbeat timeout. This
  indicates that the remote task has failed, got preempted, or crashed unexpectedly." — also
  inside "… has been set to ERROR in coordination service: …" (``SetTaskError``);
- propagated to every task (xla/tsl): "The following tasks are unhealthy (stopped sending
  heartbeats):\\n%s\\nThe tasks have crashed. …" — the stale tasks of ONE 1-second check, joined
  by newlines, at most ``kPendingStragglerLogLimit`` (3) of them.

What it proves: the service stopped hearing from the named tasks for ``heartbeat_timeout``
(JAX's ``heartbeat_timeout_seconds``) — crashed, preempted, or, a known false positive, alive
with its heartbeat thread starved or its network cut. JAX's process ``i`` is
``/job:jax_worker/replica:0/task:i``. So:

- one task named (by every notice in the logs): that JAX process a ``rank_failure`` at ``low``
  — the earliest process the service lost; its own log tells why;
- several at one check (a tie: first only together), a list at the print cap (more may be
  stale), another job than ``jax_worker`` (a TF job's task index, not a rank), or the named
  task printing the notice itself (it was alive — the false positive): ``undecided``, the tasks
  as suspects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls.log_finding import log_finding

KIND = "xla_heartbeat"
PATTERN = "xla.coordination.heartbeat_timeout"
_HEAD = gr.BY_ID[PATTERN].regex
_TASK = re.compile(r"/job:(?P<job>[\w.-]{1,64})/replica:\d{1,7}/task:(?P<task>\d{1,7})")
_END = re.compile(r"The tasks have crashed|RPC: |^\s*$")
#: names the propagated notice prints at most (``kPendingStragglerLogLimit``)
_CAP = 3
#: lines the propagated notice's names may take after its head
_SPAN = 6
_JAX = "jax_worker"

REMEDIATION = [
    "The coordination service lost the heartbeat of the named JAX process(es): read that "
    "process's own log for its last error (an OOM kill, a segfault, a Python exception), and "
    "the scheduler's events for its host (preemption, eviction, dmesg's OOM killer).",
    "If that process logged on normally up to the notice (it printed the notice itself), the "
    "heartbeat was a false positive: raise jax.distributed.initialize(heartbeat_timeout_seconds"
    "=…) and look for what starved it (a long host-side compile or checkpoint write).",
]


@dataclass
class _Notice:
    line: int
    text: str
    reporter: int | None  #: the rank the parser read for the line, if any
    tasks: list[tuple[str, int]] = field(default_factory=list)
    listed: bool = False  #: the propagated form (its list may be capped)


@dataclass
class Scanner:
    """Heartbeat-timeout notices: the per-task line, and the propagated list over its lines."""

    ctx: Any  #: the file's scan context (its ``stamp`` reads a line's time)
    notices: list[_Notice] = field(default_factory=list)
    _open: _Notice | None = None  #: a propagated notice whose names may follow

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if ("heartbeat timeout" in low or "stopped sending heartbeats" in low) and \
                (m := _HEAD.search(seg)):
            n = _Notice(no, seg.strip()[:300], rank)
            self.notices.append(n)
            if m.group("task"):
                self._add(n, m.group("task"))
                self._open = None
                return
            n.listed = True
            self._open = n
            # the rest of the message in the same segment (gRPC's JSON echo escapes "\n")
            for part in re.split(r"\\n|\n", seg[m.end():]):
                if _END.search(part) and part.strip():
                    self._open = None
                    break
                self._names(n, part)
            return
        cur = self._open
        if cur is None:
            return
        if no - cur.line > _SPAN or _END.search(seg) or not _TASK.search(seg):
            self._open = None
            return
        self._names(cur, seg)

    def _names(self, n: _Notice, text: str) -> None:
        for m in _TASK.finditer(text):
            self._add(n, m.group(0))

    @staticmethod
    def _add(n: _Notice, name: str) -> None:
        m = _TASK.search(name)
        task = gr.parse_rank(m.group("task")) if m else None
        if m and task is not None and (m.group("job"), task) not in n.tasks:
            n.tasks.append((m.group("job"), task))

    def finish(self, text: str) -> list[lf.Found]:
        return [lf.Found(KIND, n.line, n.reporter, self.ctx.stamp(n.text), n.text, {
            "tasks": [[j, t] for j, t in n.tasks], "listed": n.listed, "reporter": n.reporter},
            PATTERN) for n in self.notices if n.tasks]


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """One finding for every heartbeat notice of the logs together (module docstring)."""
    mine = [e for e in events if e.kind == KIND and e.detail]
    if not mine:
        return []
    named: set[tuple[str, int]] = set()
    capped = False
    for e in mine:
        named |= {(str(j), int(t)) for j, t in e.detail["tasks"]}
        capped |= bool(e.detail["listed"]) and len(e.detail["tasks"]) >= _CAP
    jobs = sorted({j for j, _ in named})
    tasks = sorted({t for _, t in named})
    alive = sorted({int(r) for e in mine if (r := e.detail.get("reporter")) is not None} &
                   set(tasks))
    lines = mine[:8]
    if len(tasks) == 1 and jobs == [_JAX] and not capped and not alive:
        return [log_finding(
            "rank_failure", tasks, "lost_heartbeat", "low", PATTERN,
            f"the coordination service stopped hearing JAX process {tasks[0]} "
            "(/job:jax_worker/task:%d) and told every other process — it crashed, was "
            "preempted, or its heartbeat starved; the first process the service lost"
            % tasks[0], REMEDIATION, lines,
            rank_from="JAX process index (task i of /job:jax_worker)")]
    why = ("the named task printed the notice itself, so it was alive: the heartbeat timed out "
           "for another reason (a starved heartbeat thread, the network)" if alive else
           f"the list is at the service's print cap ({_CAP}): more tasks may be stale"
           if capped else
           f"the tasks belong to job(s) {jobs}, whose task index is not a rank" if jobs != [_JAX]
           else "several tasks went stale (one check finds them together): first only together")
    return [log_finding(
        "undecided", [], "lost_heartbeat", "low", PATTERN,
        f"the coordination service lost the heartbeat of task(s) {tasks[:32]} — {why}",
        REMEDIATION, lines, suspects=tasks[:64], collect_next=tasks[:16],
        rank_from=("JAX process index (task i of /job:jax_worker)" if jobs == [_JAX]
                   else f"task index of job(s) {jobs}"))]
