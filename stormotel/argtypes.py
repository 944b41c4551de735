"""Value types for the tracker's commands' flags (``stormotel track``, ``estimate``): each one
converts a flag's text and says, in argparse's own error, what the text should have been.

One checker (:func:`checked`) for all of them, so a new flag's type is a line, and every
message keeps the shape users see today: ``'x' is not a number``, ``'0' must be > 0``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

__all__ = ["checked", "percent", "port", "positive_float", "positive_int", "seconds"]

_T = TypeVar("_T", int, float)


def checked(text: str, convert: Callable[[str], _T], noun: str, ok: Callable[[_T], bool],
            must: str) -> _T:
    """``convert(text)`` when it parses and ``ok`` holds; else an
    :class:`argparse.ArgumentTypeError` saying it is not ``noun``, or ``must`` (formatted with
    ``text`` and ``value``)."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(must.format(text=repr(text), value=value))
    return value


def positive_float(text: str) -> float:
    return checked(text, float, "a number", lambda v: v > 0, "{text} must be > 0")


def seconds(text: str) -> float:
    return checked(text, float, "a number", lambda v: 0 <= v < float("inf"),
                   "{text} must be a number of seconds >= 0")


def percent(text: str) -> float:
    value = positive_float(text)
    if value > 100:
        raise argparse.ArgumentTypeError(f"{text!r} must be a percentage in (0, 100]")
    return value


def port(text: str) -> int:
    return checked(text, int, "a port number", lambda v: 0 <= v <= 65535,
                   "{text} must be in 0..65535 (0 = any free port)")


def positive_int(text: str) -> int:
    return checked(text, int, "an integer", lambda v: v >= 1, "must be >= 1, got {value}")
