"""The XLA / TSL coordination service's barrier timeout: the tasks that never reached it.

Why: a JAX multi-host job (and a TF multi-worker one) synchronises its processes through the
coordination service that task 0 runs; when a barrier (``jax.distributed`` connect, a
``multihost_utils`` sync, an Orbax checkpoint barrier) expires, the service answers every waiter
with one error — and, since the versions that list names, that error says WHO never arrived.
Before this rule such a log read "no evidence" (fresh7's levanter#432).

The message, read in the service's source (``CheckBarrierTimeout``; ``grammar`` pattern
``xla.coordination.barrier_timeout``):

- tensorflow ``coordination_service.cc`` (TF 2.8 – 2.12): "Barrier timed out. Barrier_id: %s" —
  no names: a barrier expired, nobody named;
- then "Barrier timed out. Barrier_id: %s. Timed out task names:\\n%s" and, in
  ``xla/tsl/distributed_runtime/coordination/coordination_service.cc``, "Barrier timed out. Id:
  %s. … # of tasks that reached the barrier: %d/%d.\\nThe first task at the barrier: %s. Some
  timed out task names:\\n%s". The names are ``pending_tasks``: every task of the barrier whose
  ``at_barrier`` is false, one "/job:%s/replica:0/task:%d" per line, at most
  ``kPendingTaskLogLimit - 1`` (19; later ``kPendingStragglerLogLimit - 1``, 2) of them. "The
  first task at the barrier" is the opposite — the first that DID arrive — and is never read as
  missing.

What it proves: the listed tasks had not called the barrier when it expired — they are what the
others waited for (never started, crashed, or still busy before the barrier). JAX registers
process ``i`` as ``/job:jax_worker/replica:0/task:i``, so a task number is the JAX process index
(``jax.process_index()``); another job name (TF's ``worker``) is that job's task index. So:

- a complete list (the count line accounts for every pending task, or — the form without a
  count — fewer names than the cap could print): ``not_joined`` naming them, ``medium`` when
  the count line confirms the list is whole and they are a minority, ``low`` otherwise. The
  message itself says a barrier times out "because a task triggered the barrier too early or
  too slowly": when the barrier's size is known (the count's total, else the world size the
  evidence states) and the missing are not a minority of it, the few that arrived may be the
  early ones — ``undecided``, the listed tasks as suspects;
- a list the cap may have cut (the count says more are pending than listed): ``undecided``,
  the listed tasks as suspects;
- no names (the oldest form): ``undecided`` at low, what to collect.

The same error is often printed twice (the Python exception, then gRPC's JSON echo with the
newlines escaped as ``\\n``): one barrier id is read once, its fullest list kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_failures as lf
from stormotel.analyzers.stalls.log_finding import log_finding

KIND = "xla_barrier"
PATTERN = "xla.coordination.barrier_timeout"
_HEAD = gr.BY_ID[PATTERN].regex
_TASK = re.compile(r"^\s*/job:(?P<job>[\w.-]{1,64})/replica:\d{1,7}/task:(?P<task>\d{1,7})\s*$")
_COUNT = re.compile(r"# of tasks that reached the barrier: (?P<at>\d{1,7})/(?P<of>\d{1,7})")
_FIRST = re.compile(r"The first task at the barrier: /job:[\w.-]{1,64}/replica:\d{1,7}/task:"
                    r"(?P<task>\d{1,7})")
_NAMES = re.compile(r"timed out task names:", re.IGNORECASE)
#: the most names the listing forms print (``pending_task_count < kPendingTaskLogLimit`` = 20)
_CAP = 19
#: lines after the head a block's names, count and first-task lines may take
_SPAN = 40

REMEDIATION = [
    "The coordination service names the tasks that never reached the barrier: read those "
    "processes' own logs (JAX process i is /job:jax_worker/task:i) — a traceback, an OOM kill, "
    "or a process that was never started (every host must run the same program; "
    "num_processes must match the processes launched).",
    "If they are alive, dump their Python stacks (py-spy dump --pid) to see what keeps them "
    "before the barrier (data loading, a checkpoint read, a compile).",
]


@dataclass
class _Block:
    line: int
    text: str
    barrier: str
    pending: list[int] = field(default_factory=list)
    jobs: set[str] = field(default_factory=set)
    listed: bool = False  #: the message has a names part ("timed out task names:")
    reached: int | None = None
    total: int | None = None
    first: int | None = None


class Scanner:
    """Barrier-timeout blocks, read over the head line and the lines that continue it."""

    def __init__(self, ctx: Any) -> None:
        self.stamp = ctx.stamp
        self.blocks: list[_Block] = []
        self._open: _Block | None = None

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if "barrier timed out" in low and (m := _HEAD.search(seg)):
            self._open = _Block(no, seg.strip()[:300], m.group("id"))
            self.blocks.append(self._open)
            # the head line itself, then the rest of a message held in one segment (real or
            # escaped "\\n" newlines: gRPC's JSON echo)
            for part in re.split(r"\\n|\n", seg[m.start():]):
                self._part(part)
            return
        if self._open is not None and (no - self._open.line > _SPAN or not self._part(seg)):
            self._open = None

    def _part(self, text: str) -> bool:
        """One line of an open block; False when it is none of the message's lines."""
        b = self._open
        assert b is not None
        if not text.strip():
            return True
        if m := _TASK.match(text):
            if b.listed:
                task = gr.parse_rank(m.group("task"))
                if task is not None and task not in b.pending:
                    b.pending.append(task)
                    b.jobs.add(m.group("job"))
            return True
        matched = False
        if _NAMES.search(text):
            b.listed, matched = True, True
        if m := _COUNT.search(text):
            b.reached, b.total = int(m.group("at")), int(m.group("of"))
            matched = True
        if m := _FIRST.search(text):
            b.first = gr.parse_rank(m.group("task"))
            matched = True
        return matched or "usually happens because a task" in text

    def finish(self, text: str) -> list[lf.Found]:
        best: dict[str, _Block] = {}
        for b in self.blocks:
            kept = best.get(b.barrier)
            if kept is None or len(b.pending) > len(kept.pending):
                best[b.barrier] = b
        return [lf.Found(KIND, b.line, None, self.stamp(b.text), b.text, {
            "barrier": b.barrier, "pending": b.pending, "jobs": sorted(b.jobs),
            "listed": b.listed, "reached": b.reached, "total": b.total, "first": b.first},
            PATTERN) for b in sorted(best.values(), key=lambda b: b.line)]


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """One finding per barrier that timed out (module docstring)."""
    out = []
    for e in (e for e in events if e.kind == KIND and e.detail):
        d = e.detail
        pending: list[int] = sorted(d["pending"])
        where = f"barrier {d['barrier']!r}"
        jobs = d["jobs"]
        space = ("JAX process index (task i of /job:jax_worker)" if jobs == ["jax_worker"]
                 else f"task index of job(s) {jobs}")
        if not pending:
            out.append(log_finding(
                "undecided", [], "barrier_timeout", "low", PATTERN,
                f"the coordination service's {where} timed out"
                + (" — the message's list of tasks is empty or cut" if d["listed"] else
                   " — this version names no task") + ": some processes never reached it",
                REMEDIATION, [e], suspects=[], collect_next=[]))
            continue
        counted = d["reached"] is not None and d["total"] is not None
        missing = (d["total"] - d["reached"]) if counted else None
        complete = len(pending) == missing if counted else len(pending) < _CAP
        stated = (f" ({d['reached']}/{d['total']} reached it)" if counted else "")
        # "a task triggered the barrier too early or too slowly" (the message's own words):
        # when the missing are not a minority, the few that arrived may be the early ones
        total = d["total"] if counted else known
        if complete and (total is None or 2 * len(pending) < total):
            out.append(log_finding(
                "not_joined", pending, "barrier_not_reached",
                "medium" if counted and total is not None and 2 * len(pending) < total
                else "low",
                PATTERN,
                f"the coordination service's {where} timed out{stated}; the tasks it names "
                f"had NOT reached it: {pending[:32]} — the others waited for them (never "
                "started, crashed, or busy before the barrier)"
                + ("" if counted else "; the list is whole only by the service's print cap"),
                REMEDIATION, [e], rank_from=space, first_at_barrier=d["first"]))
        else:
            why = ("the list is cut by its print cap, so who else is missing is not said"
                   if not complete else
                   "they are not a minority of the barrier's tasks, so the few that arrived "
                   "may have called it too early (another code path) — which side is wrong "
                   "the message does not say")
            out.append(log_finding(
                "undecided", [], "barrier_not_reached", "low", PATTERN,
                f"the coordination service's {where} timed out{stated}; it lists "
                f"{len(pending)} task(s) that had not reached it ({pending[:32]}) — {why}",
                REMEDIATION, [e], suspects=pending[:64], collect_next=pending[:16],
                rank_from=space))
    return out
