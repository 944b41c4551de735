"""A rank's ProcessGroupNCCL ERROR line cut before its message: which LOG statement printed it.

torch's c10 logging (``c10/util/Logging.cpp``, ``MessageLogger``) starts every line with ``[``,
the severity letter (``F E W I V``), an optional ``mmdd hh:mm:ss.ns`` stamp, then
``file:line]``: the ``__FILE__`` / ``__LINE__`` of the ``LOG(...)`` statement that printed it.
One build, one ``file:line``, one statement. That prefix is all a paste keeps of a line it cut
(fresh5's accelerate#2375 ends inside rank 3's line: ``[rank3]:[E ProcessGroupNCCL.cpp:523] [R``).

What such a prefix proves depends on the statement, and most ERROR / FATAL statements of
ProcessGroupNCCL.cpp prove nothing about where the rank was (read in ProcessGroupNCCL.cpp's
heartbeat monitor, watchdog and abort; the list is in docs/stalls.md, fresh5 section): from 2.3
the heartbeat monitor of EVERY rank — a straggler stuck in Python outside NCCL included — prints
"Received a global dump signal from rank N" (2.3) / "Received a dump signal due to a collective
timeout from rank N" (2.4+) through ``LOG(ERROR) << errorMsg``, the same statement that prints
"… from this local rank" and the watchdog-hang message; then ``terminateProcess``'s
``LOG(FATAL)`` kills that process whatever side of NCCL it was on. Only WorkNCCL's timeout
statement ("Watchdog caught collective operation timeout: WorkNCCL(…)") is printed by a rank
whose OWN work timed out, i.e. a rank that had entered the collective.

So the rule states only this: a rank whose line the evidence holds at the same
``ProcessGroupNCCL.cpp:N`` as other ranks' READ watchdog-timeout lines was printed by that same
statement — the rank printed the watchdog timeout too: it is a waiter, not a rank silent
outside NCCL (still not named: its SeqNum and op are lost with the line). A line at any other
call site proves nothing here and the rank stays as the triage had it. A whole line is read by
its own pattern as before; this event is context only (never stall or health evidence).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner

PATTERN = "torch.c10.pg_nccl_error_line"
#: the event kind of one such line (read by the watchdog triage, :mod:`.log_analysis`)
KIND = "pg_nccl_error"

#: a READ watchdog-timeout line's own call site: the c10 prefix, at most two bracketed log
#: prefixes (``[Rank r]`` / ``[PG ID … Rank r]``), then WorkNCCL's timeout message itself — not
#: a statement that only quotes it ("Process group watchdog thread terminated with exception:
#: [Rank r] Watchdog caught …" is the watchdog's catch, another statement)
_TIMEOUT_SITE = re.compile(
    r"\[E(?:\d{3,4} \d{2}:\d{2}:\d{2}\.\d{1,9})? ?(?:\d{1,9} )?ProcessGroupNCCL\.cpp:"
    r"(?P<line>\d{1,6})\]\s{0,4}(?:\[[^\]\n]{1,160}\]\s{0,4}){0,2}"
    r"Watchdog caught collective operation timeout")


class Scanner(LineScanner):
    """One ``pg_nccl_error`` event per ERROR / FATAL ProcessGroupNCCL line of a known rank,
    with the statement's line number (``call_site``)."""

    kind = KIND
    patterns = (PATTERN,)

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        return None if rank is None else (rank, {"call_site": int(m.group("line"))})


def timeout_sites(events: Iterable[object], timeout_kind: str) -> dict[int, set[int]]:
    """The call sites (ProcessGroupNCCL.cpp line numbers) of the READ watchdog-timeout lines,
    each with the ranks whose line it printed."""
    sites: dict[int, set[int]] = {}
    for e in events:
        if getattr(e, "kind", None) != timeout_kind:
            continue
        m = _TIMEOUT_SITE.search(str(getattr(e, "text", "")))
        rank = getattr(e, "rank", None)
        if m is not None and isinstance(rank, int):
            sites.setdefault(int(m.group("line")), set()).add(rank)
    return sites


def timeout_line_unread(events: Iterable[object], timeout_kind: str) -> set[int]:
    """The ranks with a ProcessGroupNCCL ERROR line at the call site of OTHER ranks' read
    watchdog-timeout lines: they printed the watchdog timeout too (the line was cut or garbled
    before its message could be read)."""
    evs = list(events)
    sites = timeout_sites(evs, timeout_kind)
    out: set[int] = set()
    for e in evs:
        if getattr(e, "kind", None) != KIND:
            continue
        rank, detail = getattr(e, "rank", None), getattr(e, "detail", None) or {}
        site = detail.get("call_site") if isinstance(detail, dict) else None
        if isinstance(rank, int) and site in sites and sites[site] - {rank}:
            out.add(rank)
    return out
