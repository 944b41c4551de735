"""Ranks whose ProcessGroupNCCL logged an ERROR or FATAL line: they were in NCCL, not silent.

torch's c10 logging (``c10/util/Logging.cpp``, ``MessageLogger``) starts every line with ``[``,
the severity letter (``F E W I V``), an optional ``mmdd hh:mm:ss.ns`` stamp, then
``file:line]``. ProcessGroupNCCL writes ERROR lines when one of its works failed or timed out,
when its watchdog / heartbeat monitor aborts the group, and (2.4+) when ``shutdown()`` aborts it
on the way out ("ProcessGroupNCCL aborts successfully"); FATAL when the monitor kills the process
(``LOG(ERROR) << logPrefix() …`` in ``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp``, 1.13
onward). So a rank with such a line had reached NCCL and its process group was alive and logging
at the end: it is not a rank that stayed outside NCCL. The line alone is no stall evidence (a
normal shutdown prints one too): it is context, like the world size.

What that changes (fresh5's accelerate#2375, its dev half): the watchdog triage names a rank
that "logged other lines but no watchdog line while N ranks timed out" a straggler outside NCCL.
When a pasted excerpt is cut inside a rank's watchdog line — ``[rank3]:[E
ProcessGroupNCCL.cpp:523] [R`` — that rank did log its watchdog line; the paste lost it. A rank
whose own ProcessGroupNCCL logged an error is never counted among those silent ranks (the
finding lists it apart, as a rank whose watchdog line the evidence does not hold). Nothing is
named on this line alone: it proves which side of NCCL the rank was on, not who was late.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from stormotel.analyzers.stalls.log_finding import LineScanner

PATTERN = "torch.c10.pg_nccl_error_line"
#: the event kind of one such line (read by the watchdog triage, :mod:`.log_analysis`)
KIND = "pg_nccl_error"


class Scanner(LineScanner):
    """One ``pg_nccl_error`` event per ERROR / FATAL ProcessGroupNCCL line of a known rank."""

    kind = KIND
    patterns = (PATTERN,)

    def read(self, pid: str, m: re.Match[str], rank: int | None
             ) -> tuple[int | None, dict[str, object]] | None:
        return None if rank is None else (rank, {})


def ranks(events: Sequence[object]) -> set[int]:
    """The ranks whose ProcessGroupNCCL logged an ERROR or FATAL line."""
    return {r for e in events if getattr(e, "kind", None) == KIND
            and isinstance(r := getattr(e, "rank", None), int)}
