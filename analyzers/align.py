"""Clock alignment across ranks: an explicit choice, recorded in the Timeline and the report.

- ``wall`` (default): trust the timestamps as written. Right for NTP/PTP-synced clusters, where
  skews are far below the sampling interval; nothing is shifted.
- ``first-sample``: shift each rank so its first sample coincides with the reference rank's (what
  Stormlog always does). Right when all ranks started tracking together but clocks are not synced;
  wrong when ranks really started at different times.
- ``markers``: shift each rank by the median offset of anchors every rank shares (the same step
  span or the same collective marker, matched by name and occurrence), measured against the
  reference rank. Collectives complete together on every rank, so they are the best anchors.

The reference is the lowest rank. Anchors are only what every rank shares by construction —
step boundaries and collective marks; a rank's own edges (first rise, threshold crossings, OOMs)
are the evidence being measured and are never anchors. When ``wall`` is used but shared anchors
say the clocks disagree by more than one sampling interval, a note says so; it suggests
``--align markers`` only when aligning would not change the first-cause finding next to it
(:func:`review_skew_hint`) — otherwise it says which finding aligning would erase.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
from stormotel.analyzers.report import CrossRank
from stormotel.analyzers.timeline import (
    ALIGN_FIRST_SAMPLE,
    ALIGN_MARKERS,
    ALIGN_WALL,
    ALIGNMENTS,
    Markers,
    Timeline,
)

from stormotel import schema
from stormotel.errors import UsageError

#: Marker kinds usable as anchors: what every rank shares by construction. Instants such as
#: thresholds, first rises and OOMs differ per rank by nature — they are the evidence.
ANCHOR_KINDS = frozenset({"step", "collective"})
#: Marker names that are a rank's own edges, whatever kind a source gave them.
EDGE_NAMES = frozenset({schema.SPAN_EDGE, schema.EVENT_FIRST_RISE, schema.EVENT_THRESHOLD,
                        schema.EVENT_OOM})
#: Start of the skew note, so the analysis can review it against its finding.
SKEW_NOTE = "wall clocks look skewed"


class AlignmentError(UsageError, ValueError):
    """An unknown alignment name."""


def _anchor_keys(m: Markers) -> dict[tuple[str, int], int]:
    """(name, occurrence index) → end time; ends, because a collective ends together everywhere."""
    out: dict[tuple[str, int], int] = {}
    seen: dict[str, int] = {}
    # Whole columns as lists first and a plain dict as the counter: indexing numpy arrays per
    # marker costs ~1 µs a time, and a TSDB read of ten thousand ranks holds millions of steps.
    for raw, kind, end in zip(m.name.tolist(), m.kind.tolist(), m.end_ns.tolist(), strict=True):
        if kind not in ANCHOR_KINDS:
            continue
        name = str(raw)
        if name in EDGE_NAMES:
            continue
        k = seen.get(name, 0)
        out[(name, k)] = int(end)
        seen[name] = k + 1
    return out


def marker_offsets(timeline: Timeline) -> tuple[dict[int, int], int]:
    """Per-rank offset (ns) that maps the rank's clock onto the reference rank's, from anchors
    shared by every rank; returns (offsets, number of shared anchors). Empty when none shared.
    """
    ranks = [r for r in timeline.rank_ids if len(timeline.ranks[r].markers)]
    if len(ranks) < 2 or len(ranks) != len(timeline.ranks):
        return {}, 0
    # Intersected rank by rank, so a job whose ranks share no anchor stops at the first rank
    # that has none of the others' (a TSDB read names each rank's steps at its own scrapes:
    # keying all of 1,024 ranks first cost ~1.2 s for an empty answer).
    keys: dict[int, dict[tuple[str, int], int]] = {}
    shared: set[tuple[str, int]] | None = None
    for r in ranks:
        keys[r] = _anchor_keys(timeline.ranks[r].markers)
        shared = set(keys[r]) if shared is None else shared & keys[r].keys()
        if not shared:
            return {}, 0
    assert shared is not None
    order = sorted(shared)
    ref = ranks[0]
    ref_t = np.array([keys[ref][k] for k in order], dtype=np.int64)
    offsets = {}
    for r in ranks:
        t = np.array([keys[r][k] for k in order], dtype=np.int64)
        offsets[r] = int(np.median(ref_t - t))
    return offsets, len(order)


def align(timeline: Timeline, how: str = ALIGN_WALL) -> Timeline:
    """Return a new Timeline shifted per ``how``; ``alignment``/``offsets_ns``/notes record it."""
    if how not in ALIGNMENTS:
        raise AlignmentError(f"unknown alignment {how!r}; choose one of {', '.join(ALIGNMENTS)}")
    notes = list(timeline.notes)
    offsets: dict[int, int] = {}
    applied = how
    if how == ALIGN_FIRST_SAMPLE:
        firsts = {r: int(s.t_ns[0]) for r, s in timeline.ranks.items() if len(s)}
        if firsts:
            ref = firsts[min(firsts)]
            offsets = {r: ref - t for r, t in firsts.items()}
    elif how == ALIGN_MARKERS:
        offsets, n = marker_offsets(timeline)
        if offsets:
            notes.append(f"clocks aligned on {n} marker(s) shared by all ranks")
        else:
            applied = ALIGN_WALL
            notes.append("--align markers: no step/collective marker is shared by every rank; "
                         "kept wall-clock timestamps")
    else:
        probe, n = marker_offsets(timeline)
        res = timeline.resolution_ns()
        if probe and res:
            worst = max(probe, key=lambda r: abs(probe[r]))
            if abs(probe[worst]) > res:
                notes.append(
                    f"{SKEW_NOTE}: {n} shared step/collective marker(s) put rank {worst} "
                    f"{probe[worst] / 1e6:+.1f} ms off rank {min(probe)} (more than the "
                    f"{res / 1e6:.1f} ms sampling interval); consider --align markers")
    ranks = timeline.ranks
    if any(offsets.values()):
        ranks = {r: (s.shifted(offsets[r]) if offsets.get(r) else s) for r, s in ranks.items()}
    if how != applied:
        notes.append(f"alignment requested: {how}; applied: {applied}")
    return replace(timeline, ranks=ranks, alignment=applied,
                   offsets_ns={r: offsets.get(r, 0) for r in timeline.ranks}, notes=notes)


def _verdict(cross: CrossRank) -> tuple[int, str] | None:
    top = cross.first_cause_suspects[0] if cross.first_cause_suspects else None
    if top is None or top.confidence not in ("high", "medium"):
        return None
    return top.rank, top.confidence


def review_skew_hint(timeline: Timeline, cross: CrossRank,
                     rerun: Callable[[Timeline], CrossRank]) -> Timeline:
    """Keep the ``--align markers`` suggestion only if following it keeps the finding.

    ``rerun`` is the first-cause analysis; it is run once more on the marker-aligned timeline.
    If the named rank (or its confidence) would change, the suggestion is replaced by a note
    saying so: advice that erases the finding it sits next to is worse than none.
    """
    hint = next((n for n in timeline.notes if n.startswith(SKEW_NOTE)), None)
    if hint is None:
        return timeline
    here = _verdict(cross)
    there = _verdict(rerun(align(timeline, ALIGN_MARKERS)))
    if here == there:
        return timeline
    say = (f"{hint.split('; consider --align markers')[0]}; NOT suggesting --align markers: "
           f"it would change the first cause from {_describe(here)} to {_describe(there)}. "
           "Check the hosts' clock sync (chrony/PTP) before trusting either")
    return replace(timeline, notes=[say if n == hint else n for n in timeline.notes])


def _describe(verdict: tuple[int, str] | None) -> str:
    return "no rank" if verdict is None else f"rank {verdict[0]} ({verdict[1]})"
