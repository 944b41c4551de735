"""One rank busy while the others time out, in a log that does not state the world size.

:mod:`.log_busy` names the silent rank (at ``low``) only when the world size is stated. Pasted
logs often do not state it (LlamaFactory#2424, yolov5#4400: ranks 1..3 time out in one
collective, their watchdog lines glued to a tqdm bar, rank 0 prints nothing). Then the highest
rank seen + 1 is only a lower bound: ranks above it may exist and be missing from the paste as
well, so the silent rank below it is *a* rank that did not report, not proven to be *the* one.

What the log does prove is kept, and what would decide it is said exactly: every rank below the
highest one seen reported the same timeout except one, that rank printed no stall line at all,
and a progress bar ran in the waiters' stream. The answer is ``undecided`` with that rank as the
suspect, and ``collect_next`` names the fact that decides it — the job's size (``WORLD_SIZE``,
``torchrun --nnodes × --nproc_per_node``, the launcher's line, or ``--world-size N``): if it is
the lower bound, :mod:`.log_busy` names the rank; if larger, the ranks above are unaccounted for.
"""

from __future__ import annotations

from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls import log_absent_zero, log_busy
from stormotel.analyzers.stalls.log_failures import Found
from stormotel.analyzers.stalls.log_finding import log_finding


class Scanner:
    """Reads nothing of its own: the bars and timeouts are :mod:`.log_busy`'s and the
    watchdog's events; this kind (and :mod:`.log_absent_zero`'s) only brings the rule."""

    def __init__(self, ctx: Any) -> None:
        pass

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        return None

    def finish(self, text: str) -> list[Found]:
        return []


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """The busy-rank shape at the lower-bound world, when no world size is stated."""
    if known:
        return []  # stated: log_busy decides
    bars = [e for e in events if e.kind == log_busy.KIND and e.pattern == log_busy.BUSY]
    waits = [e for e in events if e.kind in log_busy._WAITS and e.rank is not None]
    if not bars or not waits:
        return []
    waiting = {e.rank for e in waits}
    bound = max(waiting) + 1
    silent = set(range(bound)) - waiting
    seqs = {(e.group, e.seq) for e in waits if e.kind == gr.K_TIMEOUT}
    if len(silent) != 1 or len(waiting) < 2 or len(seqs) > 1:
        return []
    (busy,) = silent
    if busy == 0 and log_absent_zero.reporters(events, known) is not None:
        return []  # rank 0 below ranks 1..k: log_absent_zero names it (at low)
    own_bar = log_busy.busy_bar(events, bars, waits, busy)
    if not own_bar:
        return []
    shown = _ranks(sorted(waiting))
    collect = (f"the world size (WORLD_SIZE, torchrun --nnodes x --nproc_per_node, the "
               f"launcher's line, or --world-size N): ranks {shown} report the timeout; if the "
               f"job has {bound} ranks, rank {busy} is the straggler; if more, collect the logs "
               f"of ranks {bound}.. as well")
    return [log_finding(
        "undecided", [], "straggler_outside_nccl", "low", log_busy.BUSY,
        f"ranks {shown} timed out waiting in the same collective and rank {busy} printed no "
        "stall line while a progress bar kept running in their stream, but the log does not "
        f"state the world size: {bound} is only a lower bound (highest rank seen + 1), so rank "
        f"{busy} is not proven to be the only rank that did not arrive — {collect}",
        [f"Give the job's size: rerun with --world-size N (or include the launcher's lines). "
         f"If N is {bound}, rank {busy} was busy outside the collective (a progress bar ran: "
         "tokenising, caching a data set, saving under main_process_first / zero_first) "
         "longer than the process-group timeout."], own_bar + waits[:4],
        suspects=[busy], collect_next=collect, waiting_ranks=sorted(waiting),
        world_lower_bound=bound)]


def _ranks(ranks: list[int]) -> str:
    """``1-3`` for a run, else the list."""
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ", ".join(map(str, ranks[:16])) + (" …" if len(ranks) > 16 else "")
