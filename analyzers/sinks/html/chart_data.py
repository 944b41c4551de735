"""What the report's charts draw, as one JSON-able dict: envelopes, named ranks, edges, spans.

Everything here is already reduced to screen size (see :mod:`downsample`), so the page never
holds more than a few hundred thousand numbers whatever the job's size. Times are Unix seconds
(the x axis), memory is MiB rounded to 0.1 (the y axes format it as MiB/GiB).
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

import numpy as np
from stormotel.analyzers.findings import Finding, ranks_named
from stormotel.analyzers.report import Report
from stormotel.analyzers.sinks.html.downsample import (
    Buckets,
    as_pairs,
    bucket_stats,
    doubled,
    empty_runs,
    envelope,
    field_values,
    hold_forward,
)
from stormotel.analyzers.timeline import (
    KIND_COLLECTIVE,
    KIND_FIRST_RISE,
    KIND_OOM,
    KIND_STEP,
    KIND_THRESHOLD,
    RankSeries,
    Timeline,
)

#: Charts, in page order: (field, title).
CHARTS: tuple[tuple[str, str], ...] = (
    ("allocated", "allocator allocated"),
    ("reserved", "allocator reserved"),
    ("device_used", "device used (driver)"),
    ("gap", "gap = device used − allocator reserved (memory outside the allocator)"),
)
DEFAULT_BUCKETS = 1200
#: Ranks drawn as their own lines when nothing names them (small jobs show every rank).
ALL_RANKS_UP_TO = 8
MAX_NAMED_RANKS = 8
MAX_EDGE_EVENTS = 400
MAX_SPANS = 4000
MAX_COLLECTIVE_REGIONS = 200
MAX_GAP_REGIONS = 60
#: A value holds until the next sample; silence longer than this many sampling intervals is a gap.
HOLD_INTERVALS = 3
MIB = float(1 << 20)


class ChartData(TypedDict):
    """What the page embeds as JSON for its script (times in Unix seconds, memory in MiB)."""

    x: list[float]
    #: Per field: title, ranks reporting, envelope (lo/median/hi) and the named ranks' lines.
    charts: list[dict[str, Any]]
    #: Vertical lines: onset, leader/followers, edges.
    events: list[dict[str, Any]]
    #: Shaded intervals: gap findings and collective attributions.
    regions: list[dict[str, Any]]
    #: Step and collective spans of one reference rank.
    spans: list[dict[str, Any]]
    named_ranks: list[int]
    #: Width of one bucket; absent when no rank has samples.
    bucket_seconds: NotRequired[float]
    #: The data's own sampling/scrape interval: each value holds (step line) at most
    #: HOLD_INTERVALS of these; a longer silence is a labelled "no data" region.
    resolution_seconds: NotRequired[float]


def confidence_words(confidence: float) -> str:
    """A 0..1 confidence as words (high from 0.8, medium from 0.5, else low)."""
    return "high" if confidence >= 0.8 else "medium" if confidence >= 0.5 else "low"


def severity_words(severity: str, confidence: float) -> str:
    """Severity and confidence in one phrase that does not contradict itself: a ``critical``
    finding at confidence 0.48 reads "critical if real — low confidence (0.48): check before
    acting", not a bare "critical" beside a number."""
    words = confidence_words(confidence)
    if words == "low" and severity in ("critical", "warning"):
        return f"{severity} if real — low confidence ({confidence:.2f}): check before acting"
    return f"{severity}, {words} confidence ({confidence:.2f})"


def named_ranks(report: Report, timeline: Timeline, limit: int = MAX_NAMED_RANKS) -> list[int]:
    """The ranks findings name, most important first: first-cause leader and followers, OOM
    ranks, stall culprits (not their consequences), critical gap findings, other gap and
    collective findings; every rank when the job is small."""
    order = ranks_named(sorted((f for f in report.findings() if f.root), key=_draw_order))
    if len(timeline.ranks) <= ALL_RANKS_UP_TO:
        order += timeline.rank_ids
    seen: list[int] = []
    for r in order:
        if r in timeline.ranks and r not in seen:
            seen.append(r)
    return seen[:limit]


def _draw_order(f: Finding) -> tuple[int, bool]:
    """Importance of the family; among gap findings the critical ones first."""
    return f.importance, f.family == "gap" and f.severity != "critical"


def aligned(timeline: Timeline, report: Report) -> dict[int, RankSeries]:
    """Series shifted by the offsets the analysis applied, so findings and lines agree."""
    offsets = {int(k): int(v) for k, v in (report.extra.get("offsets_ns") or {}).items()}
    return {r: (s.shifted(offsets[r]) if offsets.get(r) else s)
            for r, s in timeline.ranks.items()}


def _window(series: dict[int, RankSeries]) -> tuple[int, int] | None:
    starts = [int(s.t_ns[0]) for s in series.values() if len(s)]
    ends = [int(s.t_ns[-1]) for s in series.values() if len(s)]
    if not starts:
        return None
    return min(starts), max(max(ends), min(starts) + 1)


def _mib(values: np.ndarray) -> list[float | None]:
    out = np.round(values / MIB, 1)
    return [None if v != v else v for v in out.tolist()]


def chart_data(timeline: Timeline, report: Report, *, bucket_count: int = DEFAULT_BUCKETS,
               ranks: list[int] | None = None) -> ChartData:
    """The charts' data: x (seconds), per field an envelope and the named ranks' lines."""
    series = aligned(timeline, report)
    window = _window(series)
    shown = named_ranks(report, timeline) if ranks is None else ranks
    if window is None:
        return {"x": [], "charts": [], "events": [], "regions": [], "spans": [],
                "named_ranks": shown}
    # No more buckets than the densest rank has samples: a short job would otherwise leave
    # most buckets empty and its lines drawn as scattered dots.
    densest = max(len(s) for s in series.values())
    buckets = Buckets(window[0], window[1], max(2, min(bucket_count, densest)))
    resolution_ns = _resolution_ns(report, series)
    hold = max(1, int(np.ceil(HOLD_INTERVALS * resolution_ns / buckets.width_ns)))
    ordered = [series[r] for r in sorted(series)]
    charts: list[dict[str, Any]] = []
    gaps: list[dict[str, Any]] = []
    for field, title in CHARTS:
        env = envelope(ordered, field, buckets)
        if not env.ranks_reporting:
            continue
        first = not charts  # silences are labelled once, from the first chart drawn
        if first:
            gaps = _gap_regions(env.hi, None, buckets, hold)
        lines = []
        for r in shown:
            stats = bucket_stats(series[r].t_ns, field_values(series[r], field), buckets)
            held = hold_forward(stats.last if stats.last is not None else stats.hi, hold)
            empty = np.isnan(stats.lo)
            lo, hi = np.where(empty, held, stats.lo), np.where(empty, held, stats.hi)
            lines.append({"rank": r, "y": _mib(as_pairs(lo, hi))})
            if first:
                gaps += _gap_regions(stats.hi, r, buckets, hold)
        charts.append({"field": field, "title": title, "ranks_reporting": env.ranks_reporting,
                       "lo": _mib(doubled(hold_forward(env.lo, hold))),
                       "median": _mib(doubled(hold_forward(env.median, hold))),
                       "hi": _mib(doubled(hold_forward(env.hi, hold))), "lines": lines})
    return {"x": np.round(buckets.x_seconds(), 3).tolist(), "charts": charts,
            "events": _events(report, series, shown),
            "regions": _regions(report) + gaps[:MAX_GAP_REGIONS],
            "spans": _spans(series, shown), "named_ranks": shown,
            "bucket_seconds": buckets.width_ns / 1e9,
            "resolution_seconds": resolution_ns / 1e9}


def _resolution_ns(report: Report, series: dict[int, RankSeries]) -> float:
    """The interval the data was sampled or scraped at: the analysis' own figure, else the
    median spacing of the densest rank."""
    if report.cross_rank.resolution_ns:
        return float(report.cross_rank.resolution_ns)
    spacings = [float(np.median(np.diff(s.t_ns))) for s in series.values() if len(s) > 1]
    return max(1.0, min(spacings)) if spacings else 1.0


def _gap_regions(values: np.ndarray, rank: int | None, buckets: Buckets, hold: int
                 ) -> list[dict[str, Any]]:
    """Silences longer than the hold: drawn grey and labelled, never bridged by a line."""
    out = []
    for i0, i1 in empty_runs(values, hold + 1):
        t0 = (buckets.t0_ns + i0 * buckets.width_ns) / 1e9
        t1 = (buckets.t0_ns + (i1 + 1) * buckets.width_ns) / 1e9
        who = "no rank reported" if rank is None else f"rank {rank}: no samples"
        out.append({"t0": t0, "t1": t1, "kind": "no_data", "rank": rank,
                    "label": f"{who} for {t1 - t0:.3g} s (tracker stopped, scrape failed or "
                             "rank restarted)"})
    return out


def _events(report: Report, series: dict[int, RankSeries], shown: list[int]
            ) -> list[dict[str, Any]]:
    """Vertical lines: cluster onset, first-cause leader/followers, threshold/OOM/rise edges."""
    events: list[dict[str, Any]] = []
    cross = report.cross_rank
    if cross.cluster_onset_ns is not None:
        events.append({"t": cross.cluster_onset_ns / 1e9, "kind": "onset",
                       "label": "cluster onset"})
    for f in report.findings():
        if f.family == "first_cause" and f.start_ns is not None:
            role = "leader" if f.index == 0 else "follower"
            events.append({"t": f.start_ns / 1e9, "kind": role, "rank": f.ranks[0],
                           "label": f"{role} rank {f.ranks[0]} ({f.confidence})"})
    edge_kinds = (KIND_OOM, KIND_THRESHOLD, KIND_FIRST_RISE)
    edges: list[dict[str, Any]] = []
    for rank in [*shown, *(r for r in sorted(series) if r not in shown)]:
        m = series[rank].markers
        for i in np.flatnonzero(np.isin(m.kind, edge_kinds)).tolist():
            edges.append({"t": int(m.start_ns[i]) / 1e9, "kind": str(m.kind[i]), "rank": rank,
                          "label": f"{m.kind[i]} rank {rank}: {m.name[i]}"})
            if len(edges) >= MAX_EDGE_EVENTS:
                return events + edges
    return events + edges


def _regions(report: Report) -> list[dict[str, Any]]:
    """Shaded intervals: gap findings and collective attributions with their time span."""
    regions: list[dict[str, Any]] = []
    for f in report.findings():
        if f.start_ns is None or f.end_ns is None:
            continue
        if f.family == "gap":
            regions.append({"t0": f.start_ns / 1e9, "t1": f.end_ns / 1e9,
                            "kind": f"gap_{f.severity}",
                            "label": f"rank {f.ranks[0]}: {f.kind} "
                                     f"({severity_words(f.severity, float(f.confidence))})"})
        elif f.family == "collective" and f.index < MAX_COLLECTIVE_REGIONS:
            regions.append({"t0": f.start_ns / 1e9, "t1": f.end_ns / 1e9,
                            "kind": "collective_attribution",
                            "label": f"rank {f.ranks[0]}: {f.kind}"})
    return regions


def _spans(series: dict[int, RankSeries], shown: list[int]) -> list[dict[str, Any]]:
    """Step and collective spans of one reference rank (the leader, else the lowest rank):
    steps are shared by all ranks by construction, so one lane reads for the whole job."""
    ref = shown[0] if shown else (min(series) if series else None)
    if ref is None:
        return []
    m = series[ref].markers
    keep = np.flatnonzero(np.isin(m.kind, (KIND_STEP, KIND_COLLECTIVE)))[:MAX_SPANS]
    return [{"t0": int(m.start_ns[i]) / 1e9, "t1": int(m.end_ns[i]) / 1e9,
             "kind": str(m.kind[i]), "name": str(m.name[i]), "rank": ref}
            for i in keep.tolist()]
