"""Majority vote across ranks: which ranks disagree with a strict majority.

Flight Recorder groups and worker logs both decide "who is the odd one out" this way (a sequence
number, an op, a fingerprint). A tie has no majority, and then nothing says which side is wrong,
so the vote returns None and the caller reports "undecided" instead of guessing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from typing import TypeVar

V = TypeVar("V", bound=Hashable)


def minority_vote(values: Mapping[int, V]) -> tuple[list[int], V] | None:
    """``(minority ranks, majority value)`` against a strict majority; None on a tie or when
    there are no values."""
    if not values:
        return None
    (top, n), *rest = Counter(values.values()).most_common()
    if rest and rest[0][1] == n:
        return None
    return sorted(r for r, v in values.items() if v != top), top
