"""DDP's unused-parameter error: the rank whose own backward left parameters without a gradient.

Why: a DDP job whose ranks disagree on which parameters get gradients (a data-dependent branch,
an MoE expert no token reached on one rank) hangs the others in a bucket's allreduce while the
rank that skipped raises on its next forward. Its traceback is raised inside DDP
(``torch/nn/parallel``), so the generic exception rule reads it as "inside a collective" and
names nobody, though the message names the rank.

The lines, read in ``Reducer::ensure_prior_reduction_finished``
(``torch/csrc/distributed/c10d/reducer.cpp`` at a 1.10-era commit — ``DistributedDebugLevel::
OFF`` — and a 2.x one — ``DebugLevel::Off`` —; the same strings in the torch 2.13 wheel's
``libtorch_cpu.so``; grammar ``torch.ddp.unused_parameters``)::

    RuntimeError: Expected to have finished reduction in the prior iteration before starting a
    new one. This error indicates that your module has parameters that were not used in
    producing loss. …
    (only with TORCH_DISTRIBUTED_DEBUG=INFO/DETAIL:)
    Parameters which did not receive grad for rank R: a.w, b.w
    Parameter indices which did not receive grad for rank R: 3 7

What it proves. The check runs when ``require_finalize_`` is still set — this rank's previous
backward never marked every parameter ready (its autograd hooks did not fire for the printed
indices), which no peer can cause: marking is local. Each rank prints only ITS OWN unmarked set
and ``process_group_->getRank()`` (DDP's group; the global rank on the default group). So:

- one rank in the logs → a culprit at ``low`` (category ``exception``): the presumption left is
  that DDP runs on the default group; a segment whose parser rank differs from the message's
  (a sub-group) names nobody;
- several ranks → each skipped parameters itself (a model- or data-wide cause, not one rank's):
  suspects, nobody named.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls.log_finding import (
    LineRead,
    LineScanner,
    log_finding,
    of_kind,
)

KIND = "ddp_unused"
PATTERN = "torch.ddp.unused_parameters"


class Scanner(LineScanner):
    """One event per "… did not receive grad for rank R:" line, with the segment's own rank."""

    kind, patterns = KIND, (PATTERN,)

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        told = int(m.group("rank"))
        return told, {"told": told, "seen": rank, "what": m.group("what").strip()[:160]}


REMEDIATION = [
    "That rank's forward (or loss) skipped the parameters it lists: find the data-dependent "
    "branch (an MoE expert, an optional head) or pass find_unused_parameters=True; set "
    "TORCH_DISTRIBUTED_DEBUG=DETAIL to get their names.",
    "The other ranks' timeouts in a bucket's allreduce are its consequence.",
]


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """One finding for every DDP unused-parameter line in the logs (module docstring)."""
    mine = of_kind(events, KIND)
    told = sorted({int(e.detail["told"]) for e in mine})
    if not told:
        return []
    other = sorted({int(e.detail["seen"]) for e in mine
                    if e.detail.get("seen") is not None and e.detail["seen"] != e.detail["told"]})
    if other:
        return [log_finding(
            "undecided", [], "exception", "low", PATTERN,
            f"DDP's reducer reported parameters without a gradient — the message's rank {told} "
            f"differs from the rank the line was read for {other}: DDP runs on a sub-group, "
            "whose rank is not global", REMEDIATION, mine, suspects=[])]
    if len(told) > 1:
        return [log_finding(
            "undecided", [], "exception", "low", PATTERN,
            f"DDP's reducer reported parameters without a gradient — ranks {told[:16]} each "
            "skipped parameters: a cause every rank shares (the model or the data), not one "
            "rank's", REMEDIATION, mine, suspects=told[:64], collect_next=told[:16])]
    return [log_finding(
        "rank_failure", told, "exception", "low", PATTERN,
        f"DDP's reducer on rank {told[0]} found its previous backward unfinished: parameters "
        f"{mine[0].detail['what'][:80]!r} received no gradient on that rank — its own forward "
        "skipped them, while peers wait in that bucket's allreduce", REMEDIATION, mine,
        rank_from="the rank in DDP's process group, presumed the default (global) group")]
