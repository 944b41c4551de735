"""One way to build a log finding, for the rules of the scanned log kinds (:mod:`.log_scanners`).

Each rule says what its evidence proves; this keeps the finding's shape (source ``logs``, the
pattern it stands on, the reason, the lines) the same for every kind, so calibration and the
report read them alike.
"""

from __future__ import annotations

from typing import Any

from stormotel.analyzers.report import StallFinding


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
