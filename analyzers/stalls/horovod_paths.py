"""Horovod's stall report read as code paths: when no path holds most ranks, nobody is odd.

Horovod's coordinator prints, per rank, the tensors that rank has not submitted while others
have (``horovod/common/stall_inspector.cc``, ``Missing ranks:`` / ``Stalled ranks:``; the older
forms list the same per tensor). A rank's *path* is the set of the report's tensors it did
submit (every tensor minus the ones listed for it; an unlisted rank submitted all of them).
:mod:`.log_horovod` names, per tensor, the smaller side. That is sound while one path holds most
of the job (the stragglers or the branch-takers are the few). It is not when every rank misses a
tensor another rank submitted *and* no path is shared by more than half the ranks (horovod#2662,
the ``hvd.join`` test: rank 0 submitted neither broadcast, rank 1 one, ranks 2-3 the other):
the per-tensor minorities then contradict one another, and which path is "the program" is not
in the report.

Without a stated world size the job is counted at the report's lower bound (highest rank listed
+ 1). A larger world only adds ranks that submitted everything — a new path that would, above
twice the lower bound, be the majority and make every listed rank odd — so the answer
says which size decides it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from stormotel.analyzers.report import StallFinding


def paths(missing: dict[str, set[int]], world: int) -> dict[int, frozenset[str]]:
    """Per rank of ``range(world)``, the report's tensors it submitted."""
    tensors = frozenset(missing)
    return {r: tensors - {t for t, miss in missing.items() if r in miss} for r in range(world)}


def no_majority(missing: dict[str, set[int]], world: int) -> dict[str, Any] | None:
    """What the report shows when no rank submitted every tensor and no path is shared by more
    than half of ``world`` (evidence for an ``undecided`` finding); ``None`` otherwise."""
    if not missing or world < 2:
        return None
    by_rank = paths(missing, world)
    tensors = frozenset(missing)
    if any(p == tensors for p in by_rank.values()):
        return None  # some rank submitted everything: the per-tensor reading holds
    sizes = Counter(by_rank.values())
    if max(sizes.values()) * 2 > world:
        return None  # one path holds most of the job: the others are the odd ones
    groups = sorted((sorted(r for r, p in by_rank.items() if p == path), sorted(path))
                    for path in sizes)
    return {"paths": [{"ranks": ranks[:64], "submitted": subs[:8]} for ranks, subs in groups],
            "largest_path": max(sizes.values()), "ranks_counted": world}


def reason(found: dict[str, Any], explicit: bool) -> str:
    """The reason and what would decide it, in words."""
    world = found["ranks_counted"]
    shown = "; ".join(f"rank(s) {g['ranks']} submitted {g['submitted'] or 'none of them'}"
                      for g in found["paths"][:6])
    text = (f"Horovod's stall inspector: every one of the {world} rank(s) misses a tensor that "
            f"another rank submitted, and no code path is shared by more than half of them "
            f"({shown}) — the per-tensor minorities contradict one another, so no rank is odd")
    if not explicit:
        text += (f". The report does not print the job's size: at {world} ranks this is a "
                 "divergence with no majority; if the job has more than "
                 f"{2 * world} ranks (horovodrun -np / hvd.size()), the unlisted ranks "
                 f"{world}.. submitted everything and ranks 0-{world - 1} all lag behind them")
    return text


def undecided(found: dict[str, Any], ev: dict[str, Any], listed: list[int], explicit: bool,
              remediation: list[str]) -> StallFinding:
    """The ``undecided`` finding: every listed rank a suspect, and the size to collect."""
    ev = {**ev, **found, "suspects": listed[:64], "reason": reason(found, explicit)}
    if not explicit:
        ev["collect_next"] = ("the job's size (horovodrun -np / hvd.size()): the report does "
                              "not print it")
    return StallFinding(kind="undecided", ranks=[], process_group=None, seq_id=None, op=None,
                        source="logs", confidence="low", evidence=ev,
                        remediation=list(remediation))
