"""Ranks whose work ended in an exception, read from the spans it left.

Why: a rank that raises in its own code (a corrupt sample, a bad batch) takes its peers down
within milliseconds — gloo and NCCL raise "Connection closed by peer" in their collective — and
under torchrun or srun every process then runs its exit handlers: the tracker stops cleanly on
each rank, no rank is silent while the others go on (:mod:`.dead_rank` needs that), no stack
snapshot fires. Before this module such a job read as healthy (exit 0) from its archive
(helper uh, ``raise3x``/``raise2x`` in ``tests/stalls/newcomer_hang_jobs.py``).

The evidence: the tracker's step and mark spans record the exception that left them
(OpenTelemetry's ``exception`` event: type, message, traceback), read as ``KIND_EXCEPTION``
markers. A rank's *first* exception ended its work when no step of that rank starts after it
(an exception the training loop caught and went on from is not an end; nor is one that ends
work on purpose, :data:`DELIBERATE`). Where it was raised
is the traceback's innermost frame:

- in the rank's own code (no ``torch/distributed`` frame among the innermost ones, and neither
  its type nor its message a communication failure, :data:`_COMM_FAILURE`): that rank
  failed by itself — a ``rank_failure`` naming it, ``medium`` (never ``high``: no held-out set
  measures it), whatever its peers did;
- inside a collective on every rank that has one: those ranks failed because of a peer (it
  left, or sent what they did not expect) — and so did a rank whose exception, wherever it was
  raised, says the communicator failed: NCCL reports a peer's loss asynchronously, at the next
  synchronising call in the rank's own code (``loss.item()`` raising "NCCL communicator was
  aborted"), and DDP's gradient all-reduce raises from ``backward()``, no ``torch/distributed``
  frame in sight; the ranks of the world with no such exception are
  the suspects — ``undecided``, ``low``: a rank killed by a signal records no exception, but
  neither does one whose spans were lost. Nothing when an earlier finding (a dead rank) or an
  OOM already names the cause their failure follows from.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.timeline import KIND_EXCEPTION, KIND_OOM, KIND_STEP, Timeline

PATTERN_OWN = "stormotel.telemetry.exception_own_code"
PATTERN_PEER = "stormotel.telemetry.exception_in_collective"
#: innermost traceback frames looked at for a collective (the raise is below the call)
INNERMOST = 4
_COMM = ("torch/distributed/", "torch/nn/parallel/")
#: a communication failure by its type (torch.distributed's ``DistError`` family) or its words
#: (NCCL's and Gloo's own messages, c10d's): a consequence of a peer, wherever it surfaced
_COMM_FAILURE = re.compile(
    r"\bDist(?:Backend|Network|Store|Queue)?Error\b|\bNCCL\b|\bgloo\b|ProcessGroup|\bc10d\b|"
    r"communicator|Connection (?:closed|reset) by peer|Broken pipe|collective operation timeout",
    re.IGNORECASE)
#: exceptions that end work on purpose (a loop's end, Ctrl-C, sys.exit): no failure
DELIBERATE = frozenset({"StopIteration", "StopAsyncIteration", "GeneratorExit",
                        "KeyboardInterrupt", "SystemExit"})


def step_exceptions(timeline: Timeline, earlier: list[StallFinding],
                    notes: list[str] | None = None) -> list[StallFinding]:
    """The finding the ranks' last exceptions support (module docstring), or none; ranks an
    ``earlier`` finding already names are left to it."""
    named = {r for f in earlier for r in f.ranks}
    ended: dict[int, dict[str, Any]] = {}
    for rank, series in timeline.ranks.items():
        m = series.markers
        if KIND_EXCEPTION not in m.kind:
            continue
        at = [i for i in np.flatnonzero(m.kind == KIND_EXCEPTION)]
        first = min(at, key=lambda i: int(m.start_ns[i]))
        t = int(m.start_ns[first])
        steps = m.start_ns[m.kind == KIND_STEP]
        if (steps > t).any():
            continue  # caught, and the rank went on
        if str(m.attrs[first].get("type") or "").rsplit(".", 1)[-1] in DELIBERATE:
            continue
        ended[rank] = {"t_ns": t, **m.attrs[first], "span": str(m.name[first])}
    if not ended:
        return []
    own = sorted(r for r, e in ended.items() if not _in_collective(e))
    world = timeline.world_size or (max(timeline.ranks) + 1 if timeline.ranks else 0)
    about = own or sorted(ended)
    ev: dict[str, Any] = {
        "category": "exception",
        "exceptions": {str(r): _describe(ended[r]) for r in sorted(ended)[:16]},
        "reason": "; ".join(f"rank {r}: {_describe(ended[r])}" for r in about[:4])}
    if own:
        if set(own) <= named:
            return []
        ev.update({"pattern": PATTERN_OWN, "proof": (
            f"rank(s) {own[:8]} raised in their own code and no step of theirs started after; "
            + (f"rank(s) {sorted(set(ended) - set(own))[:8]} then failed inside a collective"
               if set(ended) - set(own) else "no other rank recorded an exception"))})
        return [StallFinding(
            kind="rank_failure", ranks=own, process_group=None, seq_id=None, op=None,
            source="telemetry", confidence="medium", evidence=ev,
            remediation=[f"Rank(s) {own[:8]} raised {ended[own[0]].get('type') or 'an exception'}"
                         f" in their own code ({_where(ended[own[0]])}): fix that; the other "
                         "ranks' errors follow from it."])]
    if named or any(KIND_OOM in s.markers.kind for s in timeline.ranks.values()):
        return []  # the cause is already named (a dead rank, an OOM): their failure follows
    suspects = [r for r in range(min(world, 4096)) if r not in ended][:64]
    ev.update({"pattern": PATTERN_PEER, "suspects": suspects, "proof": (
        f"rank(s) {sorted(ended)[:8]} failed inside a collective (a peer left or sent what "
        f"they did not expect); rank(s) {suspects[:8]} recorded no exception")})
    if notes is not None:
        notes.append(f"rank(s) {sorted(ended)[:16]} ended in an exception inside a collective: "
                     "the peer they wait for is the cause; read the logs of "
                     f"rank(s) {suspects[:16]} (--logs)")
    return [StallFinding(
        kind="undecided", ranks=[], process_group=None, seq_id=None, op=None,
        source="telemetry", confidence="low", evidence=ev,
        remediation=[f"Ranks {sorted(ended)[:8]} failed inside a collective because of a peer; "
                     f"rank(s) {suspects[:8]} recorded no exception (killed, aborted, or their "
                     "spans were lost): read their logs and the launcher's exit codes "
                     "(`stormotel analyze ARCHIVE --logs LOG_DIR`)."])]


def _frames(e: dict[str, Any]) -> list[tuple[str, int, str]]:
    frames = e.get("frames") or ()
    return [(str(f[0]), int(f[1]), str(f[2])) for f in frames
            if isinstance(f, (tuple, list)) and len(f) == 3 and isinstance(f[1], int)]


def _in_collective(e: dict[str, Any]) -> bool:
    """Raised inside torch.distributed (a collective, its wait) rather than the rank's code, or
    a communication failure surfacing in the rank's code (:data:`_COMM_FAILURE`), or raised
    while handling (or from) such a failure: ``except Exception: raise RuntimeError("training
    failed")`` around a collective whose peer died is that peer's victim (round three's
    ``victim_rethrow3``: named at ``medium`` before)."""
    if _comm_failure(f"{e.get('type') or ''} {str(e.get('message') or '')[:2000]}",
                     _frames(e)):
        return True
    chained = e.get("chained") or ()
    return any(isinstance(c, (tuple, list)) and len(c) == 2 and _comm_failure(
        str(c[0]), _frames({"frames": c[1]})) for c in chained)


def _comm_failure(text: str, frames: list[tuple[str, int, str]]) -> bool:
    if _COMM_FAILURE.search(text):
        return True
    return any(any(c in str(f[0]).replace("\\", "/") for c in _COMM)
               for f in frames[-INNERMOST:])


def _where(e: dict[str, Any]) -> str:
    own = [f for f in _frames(e) if "-packages/" not in str(f[0])]
    f = own[-1] if own else (_frames(e) or [("?", 0, "?")])[-1]
    return f"{f[2]} at {str(f[0])[-120:]}:{f[1]}"


def _describe(e: dict[str, Any]) -> str:
    return (f"{e.get('type') or 'exception'}: {str(e.get('message') or '')[:160]} "
            f"({_where(e)}, {e.get('span')})")
