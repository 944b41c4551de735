"""A replica's traceback inside a "main process first" guard: it waited for the main process.

The shape (issue 37, fresh4's rank-0-busy family): preprocessing (tokenizing, ``dataset.map``,
caching, downloading) runs under a context manager that lets the main process go first while
every other process waits in a barrier at the guard's *entry*; when the main process takes
longer than the process-group timeout, the replicas fail there. Pasted logs often keep only the
replica's traceback — the frames through the guard, sometimes cut before the error line
(LlamaFactory#360) — and before this module such a log read as "healthy" (exit 0): the traceback
alone is not stall evidence to the other rules.

What a frame proves is read off each guard's source; the entry path is the replica's only:

- ``transformers.main_process_first`` — ``TrainingArguments.main_process_first(local=True,
  desc=…)`` in ``transformers/training_args.py`` (4.9+): ``if not is_main_process:`` …
  ``dist.barrier()`` **before** ``yield``; the main process reaches its barrier only in
  ``finally`` after the work. ``is_main_process`` is ``local_process_index == 0`` when ``local``
  (the default), else ``process_index == 0``.
- ``accelerate.main_process_first`` — ``PartialState.main_process_first`` /
  ``local_main_process_first`` → ``_goes_first(is_main)`` in ``accelerate/state.py`` (0.12+):
  ``if not is_main: self.wait_for_everyone()`` before ``yield``.
- ``yolo.zero_first`` — ``torch_distributed_zero_first(local_rank)`` in ultralytics /
  yolov5 ``utils/torch_utils.py``: ``if local_rank not in {-1, 0}: dist.barrier(…)`` before
  ``yield``.

The guard's ``with`` line (CPython prints it under the caller's frame) followed, within a few
lines, by ``contextlib``'s ``__enter__`` frame proves the printing process is a **replica
waiting at the guard's entry** for the main process, which was still doing the guarded work. A
frame *inside* the guard followed by its barrier proves nothing on its own: the main process
reaches the same barrier from ``__exit__`` after the work, waiting for the replicas — the
opposite reading, never taken here (only ``__enter__`` decides). Which process that main one
is depends on ``local``: global rank 0, or the local rank 0 of the replica's node — the frame
does not say.
So the finding is ``undecided`` at ``low`` with rank 0 as the suspect and what decides it, and
it is read only when no other rule answers (``fallback``): a store or watchdog line that names
the rank decides instead.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls.log_failures import Found
from stormotel.analyzers.stalls.log_finding import log_finding

KIND = "main_first_wait"  #: the event kind: a replica's traceback at a main-first guard's entry
PATTERN = "python.main_first_entry"  #: the pattern findings carry

#: a guard's ``with`` line: the call CPython prints under the caller's frame
_GUARD = re.compile(r"\b(?P<name>(?:local_)?main_process_first|torch_distributed_zero_first)"
                    r"\s*\(")
#: CPython's frame line for contextlib's generator-based context manager, on entry or exit
_CONTEXTLIB = re.compile(r'contextlib\.py", line \d{1,6}, in (?P<side>__enter__|__exit__)')
#: how far (in segments) the ``__enter__`` frame may follow the guard's line
_NEAR = 4
_TRIGGERS = ("main_process_first", "zero_first", "contextlib.py")

REMEDIATION = [
    "A process waited at the entry of a 'main process first' guard (transformers "
    "main_process_first, accelerate main_process_first/local_main_process_first, "
    "torch_distributed_zero_first) while the main process ran the guarded work — tokenizing, "
    "dataset.map, caching, downloading — for longer than the process-group timeout. Check the "
    "main process's own output (its progress bar stops at ~the timeout: 30 min by default, 10 "
    "min under DeepSpeed); raise the timeout for preprocessing (TrainingArguments(ddp_timeout=…), "
    "accelerate InitProcessGroupKwargs(timeout=…), init_process_group(timeout=…)) or run the "
    "preprocessing once before launching (save_to_disk / a cached dataset)."]


class Scanner:
    """Finds the guard's ``with`` line and, within :data:`_NEAR` segments, the entry frame."""

    def __init__(self, ctx: Any) -> None:
        self.stamp = ctx.stamp
        self.found: list[Found] = []
        self.open: tuple[int, str, str, int | None] | None = None  # line, text, guard, rank

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if self.open is not None and no - self.open[0] > _NEAR:
            self.open = None
        if not any(t in low for t in _TRIGGERS):
            return
        guard = _GUARD.search(seg)
        if guard:
            self.open = (no, seg.strip()[:300], guard.group("name"), rank)
            return
        side = _CONTEXTLIB.search(seg)
        if self.open is None or side is None:
            return
        line, text, name, who = self.open
        self.open = None
        if side.group("side") == "__enter__":  # __exit__: the main process after the work
            self.found.append(Found(KIND, line, who, self.stamp(text), text,
                                    {"guard": name, "reporter": who}, PATTERN))

    def finish(self, text: str) -> list[Found]:
        return self.found


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """``undecided`` (low, suspect rank 0) when a replica's traceback stands at a guard's entry."""
    mine = [e for e in events if e.kind == KIND]
    if not mine:
        return []
    guards = sorted({str(e.detail.get("guard")) for e in mine if e.detail})
    reporters = sorted({int(r) for e in mine if e.detail and (r := e.detail.get("reporter"))
                        is not None})
    who = f"rank(s) {reporters}" if reporters else "a replica"
    return [log_finding(
        "undecided", [], "straggler_outside_nccl", "low", PATTERN,
        f"{who} failed inside the entry of {', '.join(guards)} ({len(mine)} traceback(s)): per "
        "the guard's source that is where every process but the main one waits while the main "
        "process does the guarded work (tokenizing, dataset.map, caching) — the main process "
        "was still busy when the wait timed out. It is global rank 0, or with local=True (the "
        "transformers default) the local rank 0 of the waiting process's node; the frames do "
        "not say which", REMEDIATION, mine, suspects=[0],
        collect_next=["the main process's own output (its progress bar at the time of the "
                      "timeout)", "whether the job spans one node (then the main process is "
                      "global rank 0)"])]
