"""Rank filter syntax shared by every command that takes a set of ranks.

``all`` (or empty) selects every rank; otherwise a comma list of ranks and inclusive ranges,
``0,2`` or ``0,4-7``. Stormlog users already know this syntax from its Diagnostics tab.
"""

from __future__ import annotations

import re

from stormotel.errors import UsageError

_TOKEN = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")
#: Refuse absurd ranges early instead of allocating a huge set (no real job is this large).
MAX_RANK = 1_000_000


class RankSpecError(UsageError, ValueError):
    """The rank filter could not be parsed; the message says which part and why."""


def parse_rank_spec(spec: str | None) -> frozenset[int] | None:
    """Parse a rank filter; ``None`` means "all ranks".

    >>> sorted(parse_rank_spec("0,4-7"))
    [0, 4, 5, 6, 7]
    >>> parse_rank_spec("all") is None
    True
    """
    if spec is None or spec.strip().lower() in ("", "all", "*"):
        return None
    ranks: set[int] = set()
    for part in spec.split(","):
        m = _TOKEN.match(part)
        if m is None:
            raise RankSpecError(
                f"bad rank filter {spec!r}: {part.strip()!r} is not a rank or a range like 4-7")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise RankSpecError(f"bad rank filter {spec!r}: range {lo}-{hi} is reversed")
        if hi > MAX_RANK:
            raise RankSpecError(f"bad rank filter {spec!r}: rank {hi} is larger than {MAX_RANK}")
        ranks.update(range(lo, hi + 1))
    return frozenset(ranks)


def format_rank_list(ranks: list[int] | tuple[int, ...] | frozenset[int] | set[int]) -> str:
    """Compact human form, the inverse of :func:`parse_rank_spec`: ``[0,1,2,5]`` → ``0-2,5``."""
    out: list[str] = []
    items = sorted(ranks)
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(out) if out else "none"
