"""One way to build a log finding, for the rules of the scanned log kinds (:mod:`.log_scanners`).

Each rule says what its evidence proves; this keeps the finding's shape (source ``logs``, the
pattern it stands on, the reason, the lines) the same for every kind, so calibration and the
report read them alike.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import grammar as gr
from stormotel.analyzers.stalls.log_failures import Found

#: What :meth:`LineScanner.read` makes of one match: the rank the line is about (``None``: the
#: line names none) and the event's detail, or ``None`` to leave the line. Named once here so the
#: protocol's result is stated where the protocol is, not again in every scanner.
LineRead = tuple[int | None, dict[str, object]] | None


def log_finding(kind: str, ranks: list[int], category: str, confidence: str, pattern: str,
                reason: str, remediation: list[str], lines: list[Any], **ev: Any) -> StallFinding:
    """A stall finding from logs; ``lines`` are the events it stands on (file, line, text)."""
    return StallFinding(
        kind=kind, ranks=ranks, process_group=None, seq_id=None, op=None,  # type: ignore[arg-type]
        source="logs", confidence=confidence,  # type: ignore[arg-type]
        evidence={"category": category, "pattern": pattern, "reason": reason, **ev,
                  "lines": [{"line": f"{e.file}:{e.line}", "text": e.text[:240]}
                            for e in lines[:8]]},
        remediation=list(remediation))


def of_kind(events: list[Any], kind: str) -> list[Any]:
    """The events of one log kind that carry a detail: what that kind's rule reads."""
    return [e for e in events if e.kind == kind and e.detail]


class LineScanner:
    """A log kind whose evidence is one line each: on a line holding one of ``triggers``, the
    first of ``patterns`` that matches gives one event, with what :meth:`read` says the match
    proves (``None`` leaves the line). The shared half of those kinds' scanners.

    A subclass names its ``kind`` and ``patterns``; its ``triggers``, unless it says its own,
    are its patterns' catalogue triggers (:func:`.grammar.triggers_of`), the cheap filter the
    catalogue's own :func:`.grammar.scan` puts in front of each of them: stated once, in the
    catalogue, so a pattern added to a scanner cannot be left out of its filter."""

    kind: str
    triggers: tuple[str, ...]
    patterns: tuple[str, ...]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "patterns" in cls.__dict__ and "triggers" not in cls.__dict__:
            cls.triggers = gr.triggers_of(cls.patterns)

    def __init__(self, ctx: Any) -> None:
        self.stamp = ctx.stamp
        self.found: list[Found] = []

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        """(the rank the line is about, the event's detail) for a match of pattern ``pid``."""
        raise NotImplementedError

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        if not any(t in low for t in self.triggers):
            return
        for pid in self.patterns:
            m = gr.BY_ID[pid].regex.search(seg)
            if m is None:
                continue
            read = self.read(pid, m, rank)
            if read is not None:
                who, detail = read
                self.found.append(Found(self.kind, no, who, self.stamp(seg), seg.strip()[:300],
                                        detail, pid))
            return

    def finish(self, text: str) -> list[Found]:
        return self.found
