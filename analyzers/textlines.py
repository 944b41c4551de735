"""Bounded lists of lines for text outputs: a big job must not print a thousand rows.

The summary's gap findings, collective intervals and notes and the stalls' per-rank state table
all print the first few items and then one line saying how many more the JSON report holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def capped(items: Sequence[T], limit: int, line: Callable[[T], str],
           more: Callable[[int], str]) -> list[str]:
    """One line per item for the first ``limit`` items, then ``more(left_out)`` if any were."""
    lines = [line(item) for item in items[:limit]]
    if len(items) > limit:
        lines.append(more(len(items) - limit))
    return lines
