"""Marker vocabulary: which names are collectives, and building per-rank Markers arrays.

Step spans, ``tracker.mark(...)`` spans, span events (threshold crossings, first rises, OOMs) and
Stormlog ``context`` strings all end up as :class:`~stormotel.analyzers.timeline.Markers`. A name
that mentions a collective (``nccl:all_reduce``, ``barrier``, ...) is kind ``collective``, which is
what collective attribution looks for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
from stormotel.analyzers.timeline import KIND_COLLECTIVE, KIND_MARK, Markers

from stormotel import schema

_COLLECTIVE = re.compile(
    r"nccl|rccl|gloo|all[_\- ]?reduce|all[_\- ]?gather|reduce[_\- ]?scatter|broadcast|barrier"
    r"|all[_\- ]?to[_\- ]?all|collective", re.IGNORECASE)


def is_collective(name: str | None) -> bool:
    """True when a marker or context string names a collective operation."""
    return bool(name) and _COLLECTIVE.search(name) is not None  # type: ignore[arg-type]


def kind_for_mark(name: str) -> str:
    return KIND_COLLECTIVE if is_collective(name) else KIND_MARK


#: a frame of Python's formatted traceback (``traceback.format_exception``)
_TB_FRAME = re.compile(r'^  File "([^"\n]{1,1024})", line (\d{1,9}), in ([^\n]{1,256})$', re.M)
#: traceback text read (its end: the innermost frames), frames kept, message characters kept
MAX_TRACE_CHARS = 16384
MAX_EXC_FRAMES = 12
MAX_EXC_MESSAGE = 300
#: how Python's formatted traceback joins a chain: the exception being handled (or the explicit
#: cause) comes first, the one that was raised last comes last
_CHAIN = re.compile(r"\n\n(?:During handling of the above exception, another exception occurred"
                    r"|The above exception was the direct cause of the following exception):"
                    r"\n\n")
#: chained exceptions kept, innermost frames kept of each
MAX_CHAINED = 4
CHAINED_FRAMES = 4


def exception_attrs(attrs: Mapping[str, object]) -> dict[str, object]:
    """An exception event's attributes as a marker keeps them (bounded): ``type``, ``message``
    and ``frames`` — the traceback's last frames as ``(file, line, function)``, innermost last,
    which say whether it was raised in the rank's own code or inside a collective."""
    trace = str(attrs.get(schema.EVENT_ATTR_EXC_STACKTRACE) or "")[-MAX_TRACE_CHARS:]
    frames = [(f, int(n), fn.strip()) for f, n, fn in _TB_FRAME.findall(trace)]
    return {"type": str(attrs.get(schema.EVENT_ATTR_EXC_TYPE) or "")[:120],
            "message": str(attrs.get(schema.EVENT_ATTR_MESSAGE) or "")[:MAX_EXC_MESSAGE],
            "frames": tuple(frames[-MAX_EXC_FRAMES:]),
            "chained": chained_exceptions(trace)}


def chained_exceptions(trace: str) -> tuple[tuple[str, tuple[tuple[str, int, str], ...]], ...]:
    """The exceptions the last one was raised while handling (or from), earliest first: each
    one's ``type: message`` line and innermost frames. Why: code that catches a collective's
    failure and raises its own ``RuntimeError("training failed")`` is a victim of the peer
    that broke the collective, not a rank that failed by itself (helper nh, round three)."""
    parts = _CHAIN.split(trace)[:-1]
    out = []
    for part in parts[-MAX_CHAINED:]:
        found = list(_TB_FRAME.finditer(part))
        tail = part[found[-1].end():] if found else part
        # the source line (and its ^^^ markers) are indented; the exception's line is not
        line = next((ln for ln in tail.splitlines() if ln.strip() and not ln.startswith(" ")),
                    "")
        frames = tuple((m.group(1), int(m.group(2)), m.group(3).strip())
                       for m in found[-CHAINED_FRAMES:])
        out.append((line[:MAX_EXC_MESSAGE], frames))
    return tuple(out)


class MarkerAccumulator:
    """Collects markers for many ranks as plain lists, then emits one Markers per rank."""

    def __init__(self) -> None:
        self._rows: dict[int, list[tuple[int, int, str, str, Mapping[str, object]]]] = {}

    def add(self, rank: int, start_ns: int, end_ns: int, name: str, kind: str,
            attrs: Mapping[str, object] | None = None) -> None:
        self._rows.setdefault(rank, []).append(
            (start_ns, max(end_ns, start_ns), name, kind, attrs or {}))

    def __len__(self) -> int:
        return sum(len(v) for v in self._rows.values())

    def build(self) -> dict[int, Markers]:
        out: dict[int, Markers] = {}
        for rank, rows in self._rows.items():
            out[rank] = Markers(
                start_ns=np.fromiter((r[0] for r in rows), np.int64, len(rows)),
                end_ns=np.fromiter((r[1] for r in rows), np.int64, len(rows)),
                name=np.array([r[2] for r in rows], dtype=object),
                kind=np.array([r[3] for r in rows], dtype=object),
                attrs=tuple(r[4] for r in rows))
        return out


def counter_increases(t_ns: np.ndarray, counts: np.ndarray) -> list[tuple[int, int, float]]:
    """Where a cumulative counter (the allocator's OOM counter) went up: ``(time of the first
    point that shows it, time of the point before, how many)`` per increase, in time order.

    The event happened in ``(before, time]``: that interval is the increase's resolution. A drop
    is a counter reset (a restarted process): what it shows after the reset counts from zero.
    The first point is never an increase: nothing says when a count it already holds began.
    """
    order = np.argsort(t_ns, kind="stable")
    t, v = t_ns[order], counts[order]
    ok = np.isfinite(v)
    t, v = t[ok], v[ok]
    if t.size < 2:
        return []
    diff = np.diff(v)
    grew = np.where(diff < 0, v[1:], diff)  # after a reset, the new value is all increase
    return [(int(t[i + 1]), int(t[i]), float(grew[i])) for i in np.flatnonzero(grew > 0).tolist()]
