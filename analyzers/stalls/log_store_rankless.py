"""The job broke at its key-value store, and no line names the rank that broke it.

Why: in the third fresh set (tests/stalls/data/fresh3) logs whose only distributed lines were
the store's own — a lost store connection, a store that could not start, the head of the
ncclUniqueId error cut by a title, the init barrier's timeout quoted without its rank — read
as "healthy" (exit 0) or "no evidence" (exit 3). Each is read off its emitter's source
(``grammar``, patterns of kind ``store_rankless``); what each proves:

- ``torch.store.connection_lost`` — TCPStore.cpp's ``recvValue failed on SocketImpl(…): …``
  (and ``recvVector`` / ``recvValueWithTimeout``; the inventory files them under
  ``c10d.store``, stall evidence): the reporter lost the store, which rank 0's process (or
  node 0's agent) serves — that process went away (crashed, killed) or simply finished
  first. The reporter is a victim; nobody is named. At the very end of a run the same lines
  are teardown noise: with the job's own shutdown lines in the logs
  (``torch.nccl.normal_shutdown``: destroy_process_group aborting its communicators, the
  watchdog "terminated normally") they are read as such and give no finding; without them
  the run cannot be told finished, so it is not called healthy. The heartbeat monitor's
  "Failed to check the "should dump" flag on TCPStore" that follows them is not read: the
  inventory's criterion files it on the normal path.
- ``torch.store.listen_failed`` — socket.cpp's "The server socket has failed to listen on any
  local network address": the store's host could not bind MASTER_PORT (errno 98: taken by
  another job or a leftover process): the job never started; no rank is at fault.
- ``torch.nccl.unique_id_head`` — "[r] is setting up NCCL communicator" cut before "and
  retrieving ncclUniqueId from [0] …": group rank r failed to get the NCCL id; the full
  message would name the group's rank 0 and the store's error (``log_store_wait`` reads it);
  without them rank 0 is a suspect, no more (the group may be a sub-group).
- ``torch.store.connect_reset`` — the TCPStore constructor's "Connection reset by peer"
  (RuntimeError, later DistNetworkError): a client was reset by the store's server at init —
  at 1,536 ranks (fresh3 pytorch-76913) the server's listen backlog overflowing; names nobody.
- ``torch.store.poll_failed`` — socket.cpp's "While waitForInput, poolFD failed with …"
  (2.4+): the reporter's wait on the store broke off (fresh3 kohya-ss-2899, inside
  ``accelerator.wait_for_everyone()``); names nobody.
- ``torch.c10d.store_barrier_rankless`` — the init barrier's timeout without "on rank: r, for
  key: k (world_size=W, worker_count=K …)": some rank arrived and gave up; with no counts the
  missing ranks cannot be named or counted (``log_store_barrier`` reads the full form).

A FALLBACK row of :data:`.log_scanners.KINDS`: read only when no other rule answers; the
answer is ``undecided`` at ``low`` with what to collect next, so such a log is never healthy.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_failures import NORMAL_SHUTDOWN
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding

KIND = "store_rankless"
LOST = "torch.store.connection_lost"
LISTEN = "torch.store.listen_failed"
HEAD = "torch.nccl.unique_id_head"
SHUTDOWN = "torch.nccl.normal_shutdown"  #: a marker: the job's own shutdown, not evidence
BARRIER = "torch.c10d.store_barrier_rankless"
POLL = "torch.store.poll_failed"
RESET = "torch.store.connect_reset"
#: in the order one answers when a log holds several: the most specific first (a store that
#: never started explains everything after it; a lost connection is the weakest evidence)
PATTERNS: tuple[str, ...] = (LISTEN, BARRIER, HEAD, RESET, LOST, POLL)

#: per pattern: the category, what the lines prove, what to collect next
_SAYS: dict[str, tuple[str, str, str]] = {
    LOST: (
        "store_unreachable",
        "rank(s) {who} lost their connection to the job's key-value store ({n} line(s)): the "
        "process serving it — rank 0's, or node 0's torchrun agent — went away (crashed, was "
        "killed, or finished before the others); the lines name nobody — not a healthy run "
        "unless every rank had already finished its work",
        "Read the log of the store's host (rank 0 / node 0) around the first of these lines: an "
        "exception, an OOM kill (dmesg), a CUDA error there is the cause; if every rank had "
        "finished its work, these lines are teardown noise (rank 0 exited first) and the run "
        "itself completed."),
    LISTEN: (
        "store_unreachable",
        "the store's server could not listen on MASTER_PORT ({n} line(s)): the port is taken "
        "(errno 98: another job, or a leftover process of an earlier run) — the job never "
        "started, no rank is at fault — not healthy",
        "Find what holds the port (ss -ltnp | grep PORT; kill the leftover process) or give "
        "each job its own MASTER_PORT (e.g. derived from SLURM_JOB_ID; torchrun "
        "--master_port / --rdzv-endpoint)."),
    HEAD: (
        "store_wait",
        "group rank(s) {who} failed to get the NCCL id through the store while setting up "
        "their NCCL communicator — the line is cut before the rank it waited on (the full "
        "message names the group's rank 0) and the store's error; rank 0 is a suspect — the "
        "rank failed, so the job is not healthy",
        "Collect the full error line (it ends with the rank waited on and the store's error: "
        "Socket Timeout, Connection reset, …) and the group's rank 0's own log: an exception, "
        "an OOM or long preprocessing before init there is the usual cause."),
    RESET: (
        "store_unreachable",
        "the job's key-value store reset the connection of {who} at init ({n} line(s)): the "
        "store's server (rank 0's process or node 0's agent) dropped clients — at thousands "
        "of ranks its listen backlog overflows; or it went down — names nobody — not healthy",
        "Read the store host's log (rank 0 / node 0) at that time; at scale use torch >= 2.4 "
        "(the libuv TCPStore backend, connect retries), TORCH_DISTRIBUTED_DEBUG=DETAIL, or a "
        "staggered start; collect how many ranks failed to connect."),
    POLL: (
        "store_unreachable",
        "rank(s) {who} saw their wait on the job's key-value store break off ('While "
        "waitForInput, poolFD failed', {n} line(s)) — inside a barrier or a key wait; the "
        "store's server (rank 0's process or node 0's agent) or the ranks not yet at the "
        "barrier are the ones to read; names nobody — not healthy",
        "Collect every rank's log around this line: the rank that never reached the barrier "
        "(an exception, a long step, an OOM kill) and the store host's log (rank 0 / node 0); "
        "py-spy dump of each rank shows who is not in the barrier."),
    BARRIER: (
        "not_at_init",
        "a rank timed out in the store-based barrier of process-group init ({n} line(s)), "
        "quoted without its rank and counts: some rank never reached init_process_group, and "
        "these lines cannot say which or how many — the init failed, so the job is not healthy",
        "Collect every rank's full 'Timed out initializing process group in store based "
        "barrier on rank: r, for key: k (world_size=W, worker_count=K …)' lines: with them the "
        "missing ranks are named by their absence; then read the missing ranks' own logs "
        "(slow preprocessing before init, an exception, a node that never started)."),
}


class Scanner(LineScanner):
    kind = KIND
    patterns = (*PATTERNS, SHUTDOWN)

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        """As every line scanner; a shutdown line's event is of the context kind
        ``normal_shutdown`` (never evidence: a completed job's log stays healthy)."""
        before = len(self.found)
        super().feed(no, seg, low, rank)
        if len(self.found) > before and self.found[-1].pattern == SHUTDOWN:
            self.found[-1].kind = NORMAL_SHUTDOWN

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        detail: dict[str, object] = {"reporter": rank}
        if pid == HEAD:
            try:
                detail["group_rank"] = gr.parse_rank(m.group("rank"))
            except gr.NumberTooLong:
                return None
        return rank, detail


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """``undecided`` (low), one finding for the first pattern the logs hold (PATTERNS order)."""
    mine = [e for e in events if e.kind == KIND and e.pattern in PATTERNS]
    if any(e.kind == NORMAL_SHUTDOWN for e in events):
        mine = [e for e in mine if e.pattern != LOST]  # teardown noise of a finished run
    if not mine:
        return []
    first = min(mine, key=lambda e: PATTERNS.index(e.pattern))
    same = [e for e in mine if e.pattern == first.pattern]
    category, says, collect = _SAYS[first.pattern]
    reporters = sorted({int(r) for e in same for r in (
        (e.detail or {}).get("group_rank") if first.pattern == HEAD else e.rank,) if r is not None})
    who = str(reporters) if reporters else "?"
    suspects = [0] if first.pattern in (LOST, HEAD) and 0 not in reporters else []
    return [log_finding(
        "undecided", [], category, "low", first.pattern,
        says.format(who=who, n=len(same)), [collect], same, suspects=suspects,
        reported_by=reporters)]
