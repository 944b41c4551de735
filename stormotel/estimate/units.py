"""Byte quantities as people type them (``80GiB``, ``512MB``, ``1e9``) and as tables show them.

Binary (``KiB``, ``MiB``, ``GiB``, ``TiB``) and decimal (``kB``, ``MB``, ``GB``, ``TB``) prefixes
are both accepted because GPU data sheets say "80 GB" for what ``nvidia-smi`` and PyTorch report in
GiB; getting that wrong is a 7 % error, so the parser never guesses: ``GB`` means 10**9, ``GiB``
2**30, and a bare ``G`` is refused with a hint.
"""

from __future__ import annotations

import math
import re

_MULTIPLIERS: dict[str, int] = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


class UnitError(ValueError):
    """A byte quantity that cannot be parsed; the message says what was wrong."""


def parse_bytes(text: str) -> int:
    """``"80GiB"`` → 85899345920. Fractions are allowed (``1.5GiB``); the result is whole bytes.

    Raises :class:`UnitError` with a one-line explanation for anything else.
    """
    match = _QUANTITY.match(text)
    if not match:
        raise UnitError(f"{text!r} is not a byte quantity (examples: 80GiB, 512MB, 1073741824)")
    number, unit = match.groups()
    multiplier = _MULTIPLIERS.get(unit.lower())
    if multiplier is None:
        hint = ""
        if unit.lower() in ("k", "m", "g", "t"):
            hint = f" — write {unit}iB (binary) or {unit}B (decimal)"
        raise UnitError(f"{text!r}: unknown unit {unit!r}{hint}; "
                        "use B, kB/MB/GB/TB or KiB/MiB/GiB/TiB")
    value = float(number) * multiplier
    if not math.isfinite(value):
        raise UnitError(f"{text!r} is too large")
    return round(value)


def format_bytes(n: int | float | None) -> str:
    """Human-readable binary size, e.g. ``1.50 GiB``; ``-`` for None."""
    if n is None:
        return "-"
    sign = "-" if n < 0 else ""
    value = float(abs(n))
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{sign}{int(value)} B" if unit == "B" else f"{sign}{value:.2f} {unit}"
        value /= 1024
    return f"{sign}{value:.2f} TiB"
