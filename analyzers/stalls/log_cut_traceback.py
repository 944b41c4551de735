"""A rank whose traceback stops before its exception line raised something nobody can read.

Why: a paste, an excerpt or a log that ends mid-traceback is common (the search tool's excerpt,
a terminal's scroll-back, a collector's line limit). When one rank prints its own out-of-memory
line and ANOTHER rank's traceback is cut before its exception line, that other rank raised an
exception of unknown type: its own failure (an OOM too, an assert) or a consequence of the first
rank's (an aborted communicator) — nothing in the lines tells which. So the first rank is not
established as the one culprit, and a ``rank_failure`` naming it alone may not be medium or high
(fresh8: diffusion-pipe#153, torchtune#2071 — both answered at medium before this rule).

The format, from CPython's ``Lib/traceback.py`` (``TracebackException.format``, 3.8-3.13; the C
printer ``PyErr_Display`` writes the same text): a header ``Traceback (most recent call
last):``, then per frame ``  File "<file>", line N, in <name>`` indented two spaces, its source
line indented four, 3.11+ caret lines (``^^^^`` / ``~~~~``) and ``  [Previous line repeated N
more times]`` indented too, and LAST the exception line ``<module>.<qualname>: <message>`` (the
module left out for builtins / ``__main__``; the bare name when the message is empty) at the
header's own indentation, followed only by its ``__notes__``. Chained exceptions print each
section the same way, joined by "During handling of the above exception, another exception
occurred:" / "The above exception was the direct cause of the following exception:"; an
exception group's sub-tracebacks sit behind a ``| `` margin, indented alike. Launchers put their
prefix in front of every line (torchrun's ``[rankN]:``, a timestamp), so indentation is read
after the prefix and compared with the header's.

What the evidence proves, line by line:

- a header, at least one frame line, and no exception line at the header's indentation after
  it on that rank before its lines stop: the rank raised an exception that is UNKNOWN (the only
  evidence kept: :data:`KIND`, one per rank, its latest traceback);
- a traceback that reaches its exception line is finished, whatever the exception says: an own
  error is read by :mod:`.log_failures` as that rank's failure, a consequence (timeout, aborted
  communicator, store error) proves a victim — neither is unknown;
- a header with no frame after it proves nothing (a header alone may be quoted text);
- a traceback with no rank (no launcher prefix, no rank in the file's name, e.g. one re-printed
  by ``torch.multiprocessing.spawn``'s ``ProcessRaisedException`` in the parent's output) names
  nobody and so cannot say who else failed: not kept;
- a rank that already has a failure of its own read is in a finding already: its cut
  traceback adds nothing (:func:`cap_unfinished` leaves the others as they were);
- a rank that printed its own watchdog timeout was waiting in a collective: when the failure
  is timed BEFORE the first timeout, whatever that rank raised came after it waited, so it does
  not contest the failure (untimed, the order is unknown and the cap stands).

The rule (:func:`cap_unfinished`): a ``rank_failure`` finding that does not include a rank with
an unfinished traceback is capped at ``low``; that rank is listed in ``suspects`` and the reason
says what to collect — the rank's full log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import log_failures as lf

#: one rank's traceback that stops before its exception line (a :class:`~.log_failures.Found`)
KIND = "unfinished_traceback"
#: the catalogue pattern it is read through: CPython's traceback
PATTERN = "python.exception"

_HEADER = "Traceback (most recent call last):"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: ``format_exception_only``'s line: ``<module>.<qualname>`` (``<locals>``, ``<unknown>`` may
#: appear), then ``: <message>`` or nothing
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_<][\w.<>]{0,300}(?::(?:\s.{0,2000})?)?$")


@dataclass
class _Open:
    """A rank's latest traceback: where its header was, how far it was indented, its frames."""

    line: int
    indent: int
    frames: int = 0
    last_frame: str = ""


def _split(seg: str) -> tuple[int, str]:
    """(indentation after the launcher's prefix, the message without prefix or colour codes)."""
    m = lf._PREFIX.match(seg)
    if m:
        prefix = m.group(0)
        indent = len(prefix) - len(prefix.rstrip())
        rest = seg[len(prefix):]
    else:
        indent = len(seg) - len(seg.lstrip())
        rest = seg[indent:]
    return indent, _ANSI.sub("", rest).rstrip()


class Scanner:
    """Per rank, the latest traceback and whether it reached its exception line."""

    def __init__(self, ctx: Any) -> None:
        self._open: dict[int, _Open] = {}

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if rank is None:
            return
        if "traceback (most recent call last)" in low:
            indent, text = _split(seg)
            if text == _HEADER:
                self._open[rank] = _Open(no, indent)  # the latest one replaces the earlier
                return
        tb = self._open.get(rank)
        if tb is None:
            return
        indent, text = _split(seg)
        if not text:
            return  # blank lines separate chained sections; they end nothing
        if indent > tb.indent:
            if text.startswith('File "'):  # a frame line; its source and carets are not
                tb.frames += 1
                tb.last_frame = text[:200]
            return
        if _EXCEPTION_LINE.match(text):
            del self._open[rank]  # reached its exception line: finished

    def finish(self, text: str) -> list[lf.Found]:
        return [lf.Found(KIND, tb.line, rank, None, _HEADER,
                         {"frames": tb.frames, "last_frame": tb.last_frame}, PATTERN)
                for rank, tb in sorted(self._open.items()) if tb.frames]


def cap_unfinished(failures: list[StallFinding], events: list[Any],
                   timed_out: set[int]) -> list[StallFinding]:
    """``failures`` with each ``rank_failure`` that leaves out a rank whose traceback is cut
    before its exception capped at ``low``, that rank a suspect (the findings are changed in
    place and returned). ``timed_out``: the ranks that printed a watchdog timeout."""
    failing = {r for f in failures for r in f.ranks}
    cut: dict[int, Any] = {}
    for e in events:
        if e.kind == KIND and e.rank is not None and e.rank not in failing:
            cut.setdefault(e.rank, e)
    if not cut:
        return failures
    for f in failures:
        timed_first = f.evidence.get("precedes_timeouts") is True and \
            f.evidence.get("first_error_ns") is not None and \
            f.evidence.get("first_timeout_ns") is not None
        others = sorted(r for r in cut if r not in f.ranks
                        and not (timed_first and r in timed_out))
        if f.kind != "rank_failure" or not others:
            continue
        who = ", ".join(map(str, others))
        named = ", ".join(map(str, f.ranks))
        if f.confidence != "low":
            f.evidence["confidence_cut"] = {"asked": f.confidence, "ceiling": "low"}
            f.confidence = "low"
        f.evidence["suspects"] = sorted(set(f.evidence.get("suspects", [])) | set(others))
        f.evidence["unfinished_tracebacks"] = {
            str(r): f"{cut[r].file}:{cut[r].line}" for r in others}
        f.evidence["reason"] = (
            f"{f.evidence.get('reason', '')}; but rank {who}'s traceback is cut before its "
            f"exception: rank {who} raised something unknown — its own failure or a "
            f"consequence — so rank {named} is not established as the one culprit")
        f.remediation = [f"Collect rank {who}'s full log: the exception line that ends its "
                         "traceback says whether it failed on its own or because of rank "
                         f"{named}.", *f.remediation]
    return failures
