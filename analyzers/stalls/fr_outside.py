"""One finding for the ranks stuck outside communication, seen across the whole world.

A rank that hangs holding the GIL (or in a CPU loop, or dead) stops recording: its dump is
empty, far shorter than its peers', or ends long before theirs with nothing pending. A rank
whose GPU work stopped (CUDA error) keeps a collective pending that its peers completed. Every
group it belongs to then waits for it, and a per-group reading blames whichever members each
group's windows happen to show. This module names those ranks once, for the world, with a
confidence that says how much of the world spoke; the per-group findings that only say the
same (a silent member of one group) are folded into it, and findings about ranks that wait
for them become its consequences (:mod:`.fr_analysis`).
"""

from __future__ import annotations

from stormotel.analyzers.report import Confidence, StallFinding
from stormotel.analyzers.stalls.fr_types import DumpSet
from stormotel.analyzers.stalls.fr_window import Outside, Windows

REMEDIATION = [
    "These ranks stopped recording collectives while the others kept going and now wait for "
    "them: they were stuck outside communication (holding the GIL, a CPU-side hang, data "
    "loading, or dead). Get their Python stacks (py-spy dump --native), their logs, and check "
    "their hosts for OOM kills and signals.",
]
STREAM_REMEDIATION = [
    "These ranks' GPU work stopped while their peers completed the same collective: look for "
    "a CUDA error or an Xid in their logs and the host's kernel log (dmesg), and for a kernel "
    "that never ends (compute-sanitizer, a hung custom kernel); drain the node if the GPU "
    "reports errors.",
]

#: pattern id per category (calibration.py caps confidence per pattern)
PATTERNS = {"empty_dump": "fr.ring.empty_dump", "short_dump": "fr.ring.short_dump",
            "stale_dump": "fr.ring.stale_dump", "stream_stuck": "fr.stream.peers_completed",
            "outside_communication": "fr.ring.outside_communication"}


def outside_finding(ds: DumpSet, windows: Windows, outside: list[Outside]) -> StallFinding | None:
    """The world-level ``straggler`` for ``outside`` (None when they are not a minority)."""
    if not outside:
        return None
    ranks = sorted({o.rank for o in outside})
    spoke = ds.world_size - len(ranks) - len(set(ds.missing_ranks) - set(ranks))
    if 2 * len(ranks) > spoke:
        return None  # a silent majority: nothing says which side is the odd one out
    categories = sorted({o.category for o in outside})
    category = categories[0] if len(categories) == 1 else "outside_communication"
    waiting = sorted(windows.waiting_on(frozenset(ranks)) - set(ranks))
    any_state = any(w.state_known for w in windows.by_rank.values())
    confidence: Confidence = "medium"
    why_low = []
    if ds.missing_ranks:
        why_low.append(f"rank(s) {ds.missing_ranks} left no dump and may be the cause as well")
    if any_state and not waiting:
        why_low.append("no rank is seen waiting for them")
    if why_low:
        confidence = "low"
    per_rank = {str(o.rank): {"category": o.category, "reason": o.reason} for o in outside}
    reason = "; ".join(f"rank {o.rank}: {o.reason}" for o in outside)
    if waiting:
        reason += f" — rank(s) {waiting} wait for them"
    return StallFinding(
        kind="straggler", ranks=ranks, process_group=None, seq_id=None, op=None,
        source="flight_recorder", confidence=confidence,
        evidence={"pattern": PATTERNS[category], "category": category, "per_rank": per_rank,
                  "behind_ranks": ranks, "waiting_ranks": waiting,
                  "empty_dump_ranks": sorted(ds.empty_ranks),
                  "unseen_ranks": sorted(ds.missing_ranks),
                  "spoke": {"ranks": spoke, "of": ds.world_size},
                  "reason": reason + ("; " + "; ".join(why_low) if why_low else ""),
                  "windows": windows.describe(ranks)},
        remediation=[*(STREAM_REMEDIATION if "stream_stuck" in categories else []),
                     *(REMEDIATION if set(categories) - {"stream_stuck"} else [])])
