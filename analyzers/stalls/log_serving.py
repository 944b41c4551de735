"""Inference and RL frameworks' own failure and wait lines: a stall or a death, no rank named.

Why: fresh5's held-out inference / RL cases (vLLM, OpenRLHF on Ray) read as "no evidence"
(exit 3) although their logs hold the framework's own message that something waited or died.
Those cases were then marked tuned on (``"tuned_by": "f6"``); the messages are read off their
emitters' source (``grammar``, patterns of kind ``serving_rankless``), and what each proves:

- ``vllm.shm_broadcast.no_block`` — vLLM's ``MessageQueue`` (shm_broadcast.py; SGLang keeps a
  copy): "No available [shared memory broadcast] block found in N second(s)". The group's
  ``writer_rank`` (0 by default — the driver worker or engine core that broadcasts the
  scheduler's work) prints it in ``acquire_write`` when a block is not yet read by every reader,
  and each reader prints the SAME text in ``acquire_read`` when no new block is written. So the
  line does not say whether its printer wrote or read, and therefore not on whom it waited: it
  names nobody. Slow but healthy work (compilation, quantization) prints it too, which is why
  the answer is only "a wait shown" — never a rank, never "healthy".
- ``ray.raylet.worker_died`` — the raylet's "A worker died or was killed while executing a task
  by an unexpected system error …" (node_manager.cc, only for a SYSTEM_ERROR disconnect): a Ray
  worker process died (OOM killer, SIGKILL, SIGSEGV, a lost connection). It names the process
  (worker id, IP, PID), never a training or tensor-parallel rank.
- ``ray.actor.worker_died`` — the GCS's death cause "The actor is dead because its worker
  process has died. Worker exit type: SYSTEM_ERROR | USER_ERROR | NODE_OUT_OF_MEMORY …"; the
  intended exits (``exit_actor()``, an idle worker reaped) are not read.
- ``ray.actor_died_error`` — ``ActorDiedError`` / ``RayActorError`` "The actor died unexpectedly
  before finishing this task." raised in the caller of a dead actor.

A FALLBACK row of :data:`.log_scanners.KINDS`: read only when no other rule answers (an NCCL or
torch line that names a rank decides instead); the answer is ``undecided`` at ``low`` with what
to collect next, so such a log is never "healthy" nor "no evidence".
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding

KIND = "serving_rankless"
SHM_WAIT = "vllm.shm_broadcast.no_block"
RAYLET_DIED = "ray.raylet.worker_died"
ACTOR_DIED = "ray.actor.worker_died"
ACTOR_ERROR = "ray.actor_died_error"
#: in the order one answers when a log holds several: a process that died explains a wait
PATTERNS: tuple[str, ...] = (RAYLET_DIED, ACTOR_DIED, ACTOR_ERROR, SHM_WAIT)

_RAY_COLLECT = (
    "Read the dead worker's own log (on its node: /tmp/ray/session_latest/logs/"
    "worker-<Worker ID>-*.err / .out and python-core-worker-<Worker ID>_<PID>.log) and that "
    "node's kernel log (dmesg: OOM killer, Xid, SIGSEGV); map the PID to its rank through the "
    "framework's own per-rank lines (e.g. '(RayWorkerWrapper pid=N) … rank=R'). If the worker "
    "was killed after a hang elsewhere, the first rank with its own error or no NCCL watchdog "
    "line is the one to look at.")

#: per pattern: the category, what the lines prove, what to collect next
_SAYS: dict[str, tuple[str, str, str]] = {
    SHM_WAIT: (
        "unknown",
        "a process of a vLLM group waited {secs} s or more on the shared-memory broadcast "
        "({n} line(s){who}): the writer (the group's rank 0 — the driver / engine core) and "
        "the readers print the same text, so the line does not say which side waited nor on "
        "whom; a worker hanging in a collective, a dead worker, or slow work (compilation, "
        "quantization) all print it — nobody named, and not healthy while it repeats",
        "Collect a stack of every vLLM process while it hangs (py-spy dump --pid PID for the "
        "engine core and each worker; VLLM_TRACE_FUNCTION=1 for a trace), every worker's log "
        "with NCCL_DEBUG=INFO, and torch's Flight Recorder dumps (TORCH_NCCL_TRACE_BUFFER_SIZE, "
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1): the worker not in the collective, or dead, is the one "
        "to look at."),
    RAYLET_DIED: (
        "process_died",
        "a Ray worker process died by a system error ({n} line(s){pids}) — killed (OOM killer, "
        "SIGKILL), crashed (SIGSEGV) or disconnected; the raylet names it by worker id, IP and "
        "PID, not by rank — nobody named", _RAY_COLLECT),
    ACTOR_DIED: (
        "process_died",
        "a Ray actor's worker process died ({exit}; {n} line(s)) — the actor is named by its "
        "id, pid and ip, not by rank — nobody named", _RAY_COLLECT),
    ACTOR_ERROR: (
        "process_died",
        "a call to a Ray actor failed because the actor died ({n} line(s)): the caller is a "
        "victim; the dead actor is named by class and pid, not by rank — nobody named",
        _RAY_COLLECT),
}

_PID = re.compile(r"Worker PID: (\d{1,10})")


class Scanner(LineScanner):
    kind = KIND
    patterns = PATTERNS

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        detail: dict[str, object] = {"reporter": rank}
        text = m.string
        if pid == SHM_WAIT:
            detail["seconds"] = m.group("secs")
        elif pid == RAYLET_DIED and (wp := _PID.search(text)):
            detail["worker_pid"] = int(wp.group(1))
        elif pid == ACTOR_DIED:
            detail["exit_type"] = m.group("exit")
        return rank, detail


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """``undecided`` (low), one finding for the first pattern the logs hold (PATTERNS order)."""
    mine = [e for e in events if e.kind == KIND and e.pattern in PATTERNS]
    if not mine:
        return []
    first = min(mine, key=lambda e: PATTERNS.index(e.pattern))
    same = [e for e in mine if e.pattern == first.pattern]
    category, says, collect = _SAYS[first.pattern]
    d: dict[str, Any] = {}
    for e in same:
        for k, v in (e.detail or {}).items():
            if v is not None:
                d.setdefault(k, v)
    pids = sorted({int(e.detail["worker_pid"]) for e in same
                   if e.detail and e.detail.get("worker_pid") is not None})
    reporters = sorted({int(e.rank) for e in same if e.rank is not None})
    reason = says.format(
        n=len(same), secs=d.get("seconds", "?"), exit=d.get("exit_type", "?"),
        who=f"; reported by rank(s) {reporters}" if reporters else "",
        pids=f"; worker PID {', '.join(map(str, pids[:8]))}" if pids else "")
    return [log_finding(
        "undecided", [], category, "low", first.pattern, reason, [collect], same,
        suspects=[], reported_by=reporters)]
