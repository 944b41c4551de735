"""The fault-spec language of the simulated device.

One fault per clause, clauses separated by ``;`` (or given as repeated ``--fault`` flags)::

    rank=2:first_spike@t=3s,delta=512MiB,lead=500ms
    rank=2:leak@t=1s,rate=32MiB/s
    rank=*:spike@t=4s,delta=1GiB,duration=300ms
    rank=1-3:fragmentation@t=2s,factor=3
    rank=0:oom@t=6s
    rank=3:stall@t=60s
    rank=1:crash@t=30s

``rank=`` selects the owning rank(s): one number, a range ``a-b``, or ``*`` (all); omitted means
all ranks. ``@t=`` is when the fault starts, in seconds since the simulated clock's origin.
Sizes take B/KB/MB/GB/KiB/MiB/GiB; durations s/ms; rates a size per second (``32MiB/s``).

Kinds and what they do to the owning rank's numbers (parameters and defaults):

- ``leak``: the gap grows steadily (``rate=16MiB/s``) — persistent drift outside the allocator.
- ``spike``: the gap jumps by ``delta=1GiB`` for ``duration=500ms`` — a transient spike.
- ``fragmentation``: reserved inflates to ``factor=3`` x allocated — reserved ≫ allocated.
- ``first_spike``: allocated (and device used) step up by ``delta=512MiB`` at ``t`` on the owner
  and at ``t+lead`` (``lead=500ms``) on every other rank, for ``duration`` (default: for good) —
  the cross-rank incident where one rank rises first.
- ``oom``: at ``t`` the allocator asks for more than the device has: used pins at the total, the
  OOM counter increments, and ``SimulatedSampler.raise_if_oom()`` raises. With ``exit=1.5s``
  the OOM ends the rank that long after it (``stormotel track`` exits as a rank dying of an
  uncaught OOM does): the OOM that ends the job.

Process faults, played by ``stormotel track`` (the numbers stay healthy):

- ``stall``: from ``t`` the rank stops advancing its training step while its tracker keeps
  sampling — a rank hung in a collective or a data loader.
- ``crash``: at ``t`` the process dies at once of SIGKILL (no clean stop, no final export) — the
  kernel's OOM killer, a segfault, a lost node.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from stormotel import units
from stormotel.errors import UsageError

__all__ = ["FAULT_KINDS", "PROCESS_FAULTS", "Fault", "FaultSpecError", "parse_bytes",
           "parse_duration",
           "parse_faults"]

FAULT_KINDS: dict[str, dict[str, str]] = {  # kind -> parameter -> value type
    "leak": {"rate": "rate"},
    "spike": {"delta": "bytes", "duration": "duration"},
    "fragmentation": {"factor": "float"},
    "first_spike": {"delta": "bytes", "lead": "duration", "duration": "duration"},
    "oom": {"exit": "duration"},
    "stall": {},
    "crash": {},
}
#: Kinds that change what the process does rather than the device's numbers.
PROCESS_FAULTS = frozenset({"stall", "crash"})
_DEFAULTS: dict[str, dict[str, float]] = {
    "leak": {"rate": 16 * 2**20},
    "spike": {"delta": 2**30, "duration": 0.5},
    "fragmentation": {"factor": 3.0},
    "first_spike": {"delta": 512 * 2**20, "lead": 0.5, "duration": math.inf},
    "oom": {"exit": math.inf},  # inf: the rank lives on
    "stall": {},
    "crash": {},
}


class FaultSpecError(UsageError, ValueError):
    """A fault spec that cannot be parsed; the message quotes the clause and says what is wrong."""


@dataclass(frozen=True)
class Fault:
    """One planted fault. ``ranks`` is None for all ranks."""

    kind: str
    start_s: float = 0.0
    ranks: frozenset[int] | None = None
    params: dict[str, float] = field(default_factory=dict)

    def owned_by(self, rank: int) -> bool:
        return self.ranks is None or rank in self.ranks

    def param(self, name: str) -> float:
        return self.params.get(name, _DEFAULTS[self.kind][name])


def parse_bytes(text: str) -> int:
    """A size in a fault spec (``512MiB``, ``1GiB``, ``1000000``); see :mod:`stormotel.units`."""
    try:
        return units.parse_bytes(text)
    except units.UnitError:
        raise ValueError(f"{text!r} is not a size (e.g. 512MiB, 1GiB, 1000000)") from None


def parse_duration(text: str) -> float:
    """A time in a fault spec (``3s``, ``500ms``, ``1.5`` seconds)."""
    try:
        return units.parse_duration(text, bare_seconds=True)
    except units.UnitError:
        raise ValueError(f"{text!r} is not a duration (e.g. 3s, 500ms, 1.5)") from None


def _parse_rate(text: str) -> float:
    size, slash, per = text.partition("/")
    if not slash or per.strip() != "s":
        raise ValueError(f"{text!r} is not a rate (e.g. 32MiB/s)")
    return float(parse_bytes(size))


_PARSERS: dict[str, Callable[[str], float]] = {
    "bytes": parse_bytes, "duration": parse_duration, "rate": _parse_rate, "float": float}


def _parse_ranks(text: str, clause: str) -> frozenset[int] | None:
    text = text.strip()
    if text == "*":
        return None
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            if lo > hi or lo < 0:
                raise ValueError
            return frozenset(range(lo, hi + 1))
        value = int(text)
        if value < 0:
            raise ValueError
        return frozenset({value})
    except ValueError:
        raise FaultSpecError(f"fault {clause!r}: rank={text!r} must be N, A-B or *") from None


def _parse_clause(clause: str) -> Fault:
    body = clause.strip()
    ranks: frozenset[int] | None = None
    if body.startswith("rank="):
        selector, colon, body = body[len("rank="):].partition(":")
        if not colon:
            raise FaultSpecError(f"fault {clause!r}: expected 'rank=N:KIND...'")
        ranks = _parse_ranks(selector, clause)
    head, _, rest = body.partition(",")
    kind, at, start = head.partition("@")
    kind = kind.strip()
    if kind not in FAULT_KINDS:
        raise FaultSpecError(f"fault {clause!r}: unknown kind {kind!r} "
                             f"(one of {', '.join(FAULT_KINDS)})")
    items = [f"{start}"] if at else []
    items += [x for x in rest.split(",") if x.strip()] if rest else []
    start_s = 0.0
    params: dict[str, float] = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq:
            raise FaultSpecError(f"fault {clause!r}: {item!r} is not key=value")
        try:
            if key == "t":
                start_s = parse_duration(value)
            elif key in FAULT_KINDS[kind]:
                params[key] = _PARSERS[FAULT_KINDS[kind][key]](value)
            else:
                allowed = ", ".join(["t", *FAULT_KINDS[kind]])
                raise FaultSpecError(f"fault {clause!r}: {kind} has no parameter {key!r} "
                                     f"(allowed: {allowed})")
        except ValueError as e:
            if isinstance(e, FaultSpecError):
                raise
            raise FaultSpecError(f"fault {clause!r}: {key}: {e}") from None
        if key != "t" and not params[key] > 0:
            raise FaultSpecError(f"fault {clause!r}: {key} must be > 0")
    return Fault(kind=kind, start_s=start_s, ranks=ranks, params=params)


def parse_faults(specs: str | list[str] | tuple[str, ...] | None) -> tuple[Fault, ...]:
    """Parse one spec string (clauses separated by ``;``) or a list of them."""
    if not specs:
        return ()
    if isinstance(specs, str):
        specs = [specs]
    return tuple(_parse_clause(c) for spec in specs for c in spec.split(";") if c.strip())
