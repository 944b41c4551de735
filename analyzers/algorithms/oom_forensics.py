"""OOM forensics across ranks: who ran out first, and why.

When several ranks die of OOM, the one that ran out first is usually the cause and the others
are collateral (their peers stopped, a collective aborted, a retry hit the same wall). For the
first rank, the last sample before the OOM tells the kind of problem:

- ``fragmentation``: the allocator had reserved far more than live tensors use (reserved ≫
  allocated): ``expandable_segments``/``max_split_size_mb`` territory, not a model that is too big;
- ``outside_allocator``: the device held a lot that PyTorch's allocator does not know about
  (the gap: NCCL buffers, cuDNN workspaces, another process);
- ``genuine_peak``: live tensors themselves filled the device;
- ``undecided``: the samples lack the fields to tell.

Two OOMs within one sampling interval (or any clock skew) are a tie and said so: the order is
never claimed finer than the data.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stormotel.analyzers.report import (
    EV_OOM_CAUSE,
    EV_OOM_FIRST,
    EV_OOM_NS,
    OomForensics,
    OomRank,
    OomThresholds,
)
from stormotel.analyzers.timeline import EDGE_RESOLUTION_ATTR, KIND_OOM, OomDump, Timeline

__all__ = [
    "DEFAULT_THRESHOLDS",
    "EV_OOM_CAUSE",
    "EV_OOM_FIRST",
    "EV_OOM_NS",
    "OomForensics",
    "OomRank",
    "OomThresholds",
    "classify",
    "mark_suspects_that_ran_out",
    "oom_forensics",
]


#: The thresholds the report is judged by (frozen: one shared default).
DEFAULT_THRESHOLDS = OomThresholds()


def classify(last: dict[str, float | None], t: OomThresholds = DEFAULT_THRESHOLDS
             ) -> tuple[str, dict[str, Any]]:
    """The cause of one OOM from its last sample, and the numbers that decided it."""
    alloc, res = last.get("allocated"), last.get("reserved")
    used, total = last.get("device_used"), last.get("device_total")
    ev: dict[str, Any] = {}
    waste = gap = None
    if alloc is not None and res is not None:
        waste = res - alloc
        ev["reserved_minus_allocated_bytes"] = waste
        ev["reserved_unused_share"] = round(waste / res, 3) if res > 0 else None
    if used is not None and res is not None:
        gap = used - res
        ev["gap_bytes"] = gap
    base = total or used
    frag = (waste is not None and res and waste >= t.fragmentation_bytes
            and waste / res >= t.fragmentation_share)
    outside = (gap is not None and base and gap >= t.gap_bytes and gap / base >= t.gap_share)
    if frag and outside:
        return ("fragmentation" if (waste or 0) >= (gap or 0) else "outside_allocator"), ev
    if frag:
        return "fragmentation", ev
    if outside:
        return "outside_allocator", ev
    if alloc is None or res is None:
        return "undecided", ev
    return "genuine_peak", ev


def _from_markers(timeline: Timeline, have: set[int]) -> list[OomDump]:
    """OOMs seen only as telemetry (an OOM event, the OOM edge gauge, or the allocator's OOM
    counter going up; no dump here): classified from the Timeline.

    A marker may be coarse — a counter increase is only known to lie in ``(t − resolution,
    t]`` — so its resolution (``EDGE_RESOLUTION_ATTR``) decides ties, and the sample that
    classifies it is the fullest one in that interval (the OOM happened against the wall), not
    one taken after the OOM freed its memory."""
    out = []
    for rank, s in timeline.ranks.items():
        if rank in have:
            continue
        m = s.markers
        if KIND_OOM not in m.kinds or not len(s):
            continue
        ooms = [i for i, k in enumerate(m.kind.tolist()) if k == KIND_OOM]
        first = min(ooms, key=lambda i: int(m.start_ns[i]))
        t_oom = int(m.start_ns[first])
        attrs = m.attrs[first] if first < len(m.attrs) else {}
        res = attrs.get(EDGE_RESOLUTION_ATTR)
        res_ns = int(res) if isinstance(res, int | float) and res > 0 else 0
        at_or_before = int((s.t_ns <= t_oom).sum()) - 1
        i = max(0, at_or_before)
        if res_ns and at_or_before >= 0:
            lo = int(np.searchsorted(s.t_ns, t_oom - res_ns, side="right"))
            if lo <= at_or_before:
                field = "device_used" if s.has("device_used") else "reserved"
                window = s.values[field][lo:at_or_before + 1]
                if np.isfinite(window).any():
                    i = lo + int(np.nanargmax(window))
        last = {k: (float(v) if v == v else None)
                for k in ("allocated", "reserved", "device_used", "device_total")
                for v in [s.values[k][i]]}
        # The marker's own resolution when it states one (an edge: the tracker's sampling
        # interval, even from a TSDB scraped every 15 s; a counter increase: its interval),
        # else the rank's sampling interval.
        interval_ns = res_ns or s.median_interval_ns() or 0
        out.append(OomDump("", rank, t_oom, interval_ns / 1e9 or None, last))
    return out


def oom_forensics(timeline: Timeline, dumps: list[OomDump] | None = None,
                  thresholds: OomThresholds = DEFAULT_THRESHOLDS) -> OomForensics | None:
    """The report's OOM section (``Report.oom_forensics``), or None when no rank ran out of
    memory."""
    dumps = list(dumps or [])
    first_per_rank: dict[int, OomDump] = {}
    for d in sorted(dumps, key=lambda d: d.oom_ns):
        first_per_rank.setdefault(d.rank, d)
    events = [*first_per_rank.values(), *_from_markers(timeline, set(first_per_rank))]
    if not events:
        return None
    events.sort(key=lambda d: d.oom_ns)
    ranks = []
    for d in events:
        cause, ev = classify(d.last, thresholds)
        ranks.append(OomRank(d.rank, d.oom_ns, cause, d.last.get("allocated"),
                             d.last.get("reserved"), d.last.get("device_used"),
                             d.last.get("device_total"), ev.get("gap_bytes"), ev,
                             d.path or None, d.error or None, "dump" if d.path else "telemetry"))
    first = ranks[0]
    resolution_ns = int(1e9 * max((d.sampling_interval_s or 0.0) for d in events[:2]))
    tie = len(events) > 1 and events[1].oom_ns - events[0].oom_ns <= resolution_ns
    if tie:
        tied = [r.rank for r in ranks if r.oom_ns - first.oom_ns <= resolution_ns]
        summary = (f"ranks {tied} ran out of memory within one sampling interval "
                   f"({resolution_ns / 1e6:.0f} ms) of each other: which went first is "
                   "undecided; compare their causes below")
    else:
        lead = (events[1].oom_ns - events[0].oom_ns) / 1e9 if len(events) > 1 else None
        summary = (f"rank {first.rank} ran out of memory first"
                   + (f", {lead:.3g} s before rank {events[1].rank}" if lead is not None else "")
                   + f": {first.cause.replace('_', ' ')}"
                   + (f" (dump {first.dump_path})" if first.dump_path else ""))
    return OomForensics(None if tie else first.rank, tie, resolution_ns, summary, ranks,
                        thresholds)


def mark_suspects_that_ran_out(suspects: list[Any], forensics: OomForensics) -> None:
    """A suspect whose rank ran out of memory at or after its first rise: its rise ended in an
    OOM, and the finding says so (when, what kind, whether it was the first OOM)."""
    ranks = {r.rank: r for r in forensics.ranks}
    for suspect in suspects:
        oom = ranks.get(suspect.rank)
        if oom is None or int(oom.oom_ns) < int(suspect.first_spike_ns):
            continue
        suspect.evidence[EV_OOM_NS] = int(oom.oom_ns)
        suspect.evidence[EV_OOM_CAUSE] = str(oom.cause)
        suspect.evidence[EV_OOM_FIRST] = forensics.first_rank == suspect.rank
