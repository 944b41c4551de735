"""One rank busy while the others time out: the rank without a timeout line, by its absence.

The shape (issue 37): rank 0 tokenizes or loads under ``main_process_first`` / ``zero_first``
while ranks 1..N wait in a collective; their watchdog timeouts land in the same stream as
rank 0's tqdm bar, often glued after it on one line. A pasted excerpt can also simply leave a
rank out (vllm#8978: three of four ranks time out, the fourth is not in the paste), so absence
alone names nobody. It is read here only when all of this holds:

- the world size is stated (``known``), at least three ranks;
- every rank but one printed a watchdog timeout, all of the same collective (one SeqNum);
- that rank printed no stall line at all (no timeout, counters, signal, error of its own);
- a progress bar runs in a file that holds the timeouts of several ranks, and the bar's line
  carries no rank or that rank's.

The bar carries no rank, so its owner is presumed: the finding is a reading (pattern
``log.busy_rank``) and never more than ``low``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_failures import RANK_ERROR, Found
from stormotel.analyzers.stalls.log_finding import log_finding

KIND = "progress"  #: a progress bar seen in a file (not stall evidence by itself)
BUSY = "log.busy_rank"
_WAITS = frozenset({gr.K_TIMEOUT, "watchdog_bare"})
#: every kind by which a rank shows it was waiting or failing (its absence is what counts)
_SPOKE = frozenset({gr.K_TIMEOUT, "watchdog_bare", gr.K_COUNTERS, gr.K_FIRST_SIGNAL,
                    gr.K_OBSERVED_SIGNAL, gr.K_HEARTBEAT, gr.K_TEARDOWN, gr.K_GLOO_WAIT,
                    RANK_ERROR, "nccl_warn", "init_wait", "store_barrier", "barrier_peer"})

REMEDIATION = ["This rank kept working (a progress bar ran) while every other rank timed out "
               "waiting for it: work done by one rank only (tokenising, caching a data set, "
               "saving) took longer than the process-group timeout. Raise the timeout "
               "(init_process_group(timeout=…)) or do that work before init / on every rank."]


class Scanner:
    """Counts progress-bar segments per rank prefix (the first line of each is kept)."""

    def __init__(self, ctx: Any) -> None:
        self.first: dict[int | None, tuple[int, str]] = {}
        self.count: dict[int | None, int] = defaultdict(int)

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if "%|" not in seg or not gr.BY_ID[BUSY].regex.search(seg):
            return
        self.count[rank] += 1
        self.first.setdefault(rank, (no, seg.strip()[:300]))

    def finish(self, text: str) -> list[Found]:
        return [Found(KIND, no, rank, None, line, {"bars": self.count[rank]}, BUSY)
                for rank, (no, line) in self.first.items()]


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    bars = [e for e in events if e.kind == KIND and e.pattern == BUSY]
    if not bars or not known or known < 3:
        return []
    waits = [e for e in events if e.kind in _WAITS and e.rank is not None]
    waiting = {e.rank for e in waits}
    missing = set(range(known)) - waiting
    seqs = {(e.group, e.seq) for e in waits if e.kind == gr.K_TIMEOUT}
    if len(missing) != 1 or len(waiting) != known - 1 or len(seqs) > 1:
        return []
    (busy,) = missing
    own_bar = busy_bar(events, bars, waits, busy)
    if not own_bar:
        return []
    return [log_finding(
        "straggler", [busy], "straggler_outside_nccl", "low", BUSY,
        f"every rank of the {known} but rank {busy} timed out waiting in the same collective "
        f"({len(waiting)} ranks), rank {busy} printed no stall line at all, and a progress bar "
        "kept running in the same stream — presumed rank "
        f"{busy}'s: it was busy outside the collective the others waited in",
        REMEDIATION, own_bar + waits[:4], waiting_ranks=sorted(waiting),
        rank_from="presumed: the progress bar carries no rank")]


def busy_bar(events: list[Any], bars: list[Any], waits: list[Any], busy: int) -> list[Any]:
    """The progress-bar lines that may be the silent rank ``busy``'s: none when it printed any
    stall line of its own; else the bars (its own or rankless) in a stream at least two waiting
    ranks print to. Shared with log_busy_unstated, which reads the same shape at a lower-bound
    world."""
    if any(e.rank == busy for e in events if e.kind in _SPOKE):
        return []
    stream = {f for f in {e.file for e in waits}
              if len({e.rank for e in waits if e.file == f}) >= 2}
    return [e for e in bars if e.file in stream and e.rank in (None, busy)]
