"""Byte sizes and durations as people write and read them, parsed and formatted in one place.

Flags (``--device-memory 80GiB``, ``--window 1h30m``), fault specs (``delta=512MiB``,
``@t=3s``) and every summary line go through these functions, so a size is read and printed
the same way by the tracker, the estimator and the analyzer.

Binary (``KiB``, ``MiB``, ``GiB``, ``TiB``) and decimal (``kB``, ``MB``, ``GB``, ``TB``) prefixes
are both accepted because GPU data sheets say "80 GB" for what ``nvidia-smi`` and PyTorch report in
GiB; getting that wrong is a 7 % error, so the parser never guesses: ``GB`` means 10**9, ``GiB``
2**30, and a bare ``G`` is refused with a hint.
"""

from __future__ import annotations

import math
import re

from stormotel.errors import UsageError

#: Unit (lower-case) → bytes. Decimal and binary prefixes are both explicit; a bare ``G`` is
#: refused because it is ambiguous.
BYTE_UNITS: dict[str, int] = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
#: Prometheus duration units → seconds.
DURATION_UNITS: dict[str, float] = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400,
                                    "w": 604800}

_QUANTITY = re.compile(
    r"^\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


class UnitError(UsageError, ValueError):
    """A size or duration that cannot be parsed; the message says what was wrong."""


def parse_bytes(text: str) -> int:
    """``"80GiB"`` → 85899345920. Fractions are allowed (``1.5GiB``); the result is whole bytes.

    Raises :class:`UnitError` with a one-line explanation for anything else.
    """
    match = _QUANTITY.match(text)
    if not match:
        raise UnitError(f"{text!r} is not a byte quantity (examples: 80GiB, 512MB, 1073741824)")
    number, unit = match.groups()
    multiplier = BYTE_UNITS.get(unit.lower())
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


def parse_duration(text: str, *, bare_seconds: bool = False) -> float:
    """``90s``, ``500ms``, ``15m``, ``1h30m``, ``2d`` → seconds (Prometheus duration syntax);
    ``0`` is zero. With ``bare_seconds`` a plain number (``1.5``) means seconds too."""
    s = text.strip()
    if bare_seconds:
        try:
            value = float(s)
        except ValueError:
            pass
        else:
            if math.isfinite(value) and value >= 0:
                return value
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * DURATION_UNITS[m.group(2)]
        pos = m.end()
    if s == "0":
        return 0.0
    if pos != len(s) or not s:
        raise UnitError(f"{text!r} is not a duration (use e.g. 90s, 15m, 1h30m, 2d)")
    return total


def format_bytes(n: float | None, *, digits: int = 2, missing: str = "-") -> str:
    """Binary size for people, e.g. ``1.50 GiB`` (``digits`` after the point; whole bytes
    below 1 KiB); ``missing`` for None."""
    if n is None:
        return missing
    sign = "-" if n < 0 else ""
    value = float(abs(n))
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{sign}{value:.0f} B" if unit == "B" else f"{sign}{value:.{digits}f} {unit}"
        value /= 1024
    return f"{sign}{value:.{digits}f} TiB"


def format_duration(seconds: float | None, *, missing: str = "?") -> str:
    """A duration in the unit that reads best: ms below 1 s, then s, min, h, d."""
    if seconds is None:
        return missing
    s = float(seconds)
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"
