"""A zstd frame inflated a slice of input at a time, never past a budget.

Why slices: one ``decompress`` call on a whole frame that does not declare its size can return
any amount of output (a small bomb inflates to gigabytes); fed ``SLICE`` compressed bytes at a
time, each call's output is bounded and the running total is checked before more is asked for.
The collector's zstd records and the compact archive's companion frames are read this way.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SLICE", "OverBudget", "inflate_frame"]

#: Compressed bytes per ``decompress`` call: bounds one call's output.
SLICE = 4096


class OverBudget(Exception):
    """The frame inflates past the budget; the caller says what that means for its file."""


def inflate_frame(d: Any, data: memoryview, budget: int) -> tuple[bytes, int]:
    """Feed ``data`` to the zstd decompressobj ``d`` until its frame ends or the input does:
    (the output, how far into ``data`` was fed). ``d.eof`` says whether the frame was
    complete (the unfed rest and ``d.unused_data`` are where the next frame starts); more than
    ``budget`` bytes of output raise :class:`OverBudget`."""
    parts = []
    at = got = 0
    while at < len(data) and not d.eof:
        chunk = d.decompress(data[at:at + SLICE])
        at += SLICE
        got += len(chunk)
        if got > budget:
            raise OverBudget
        parts.append(chunk)
    return b"".join(parts), at
