"""What a first-cause report names above low: the answer the first-cause boundary tests judge
(a wrong rank at high or medium is the failure that matters most)."""

from __future__ import annotations

from typing import Any

SURE = ("high", "medium")


def named_above_low(cross: dict[str, Any]) -> set[tuple[int, str]]:
    """(rank, confidence) of every rank ``cross`` (a report's ``cross_rank``) names at high or
    medium: as a first-cause suspect or as an incident's leader."""
    suspects = [(s["rank"], s["confidence"]) for s in cross["first_cause_suspects"]]
    leaders = [(i["leader"], i["confidence"]) for i in cross["incidents"]]
    return {(rank, sure) for rank, sure in suspects + leaders if sure in SURE}
