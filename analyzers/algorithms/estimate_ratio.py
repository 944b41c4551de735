"""Estimate vs. actual, per rank: the measured peak divided by the pre-run estimate.

``stormotel estimate`` predicts what live tensors will need at the peak (MemTracker counts
tensor storages, what the caching allocator calls *allocated*), and the tracker exports that
prediction as ``stormotel.memory.estimate`` beside the measured series. Here each rank's actual
peak is compared with its estimate: ``ratio = actual peak / estimate``, so 1.0 is a perfect
prediction and 1.25 means the rank used a quarter more than planned.

The actual peak comes from the most comparable field a rank reports: ``allocated`` (same quantity
as the estimate), else ``reserved`` (adds the allocator's cached, fragmented blocks), else
``device_used`` (adds the CUDA context, NCCL and other libraries). The field used is recorded per
rank: the fallbacks overstate the ratio, which errs on the side of a warning.

Estimates come from the archive (``Timeline.meta["estimate_bytes"]``, rank → bytes, filled by
sources that read the estimate series) or are passed in: one number for every rank, or a
mapping rank → bytes. Pure and vectorised: one ``nanmax`` per rank and field.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from stormotel.analyzers.algorithms.plugin import AlgorithmInput, Estimates
from stormotel.analyzers.algorithms.rank_rows import batches, stack_rows
from stormotel.analyzers.algorithms.robust import all_finite
from stormotel.analyzers.findings import AnnotationSpan, Finding, FindingFamily
from stormotel.analyzers.report import Report
from stormotel.analyzers.textlines import capped
from stormotel.analyzers.timeline import META_ESTIMATE_BYTES, Timeline

from stormotel.units import format_bytes

#: Fields tried for the actual peak, most comparable to a MemTracker estimate first.
PEAK_FIELDS: tuple[str, ...] = ("allocated", "reserved", "device_used")
#: Default tolerance before a rank counts as over its estimate (matches the alert's default).
DEFAULT_MARGIN = 0.10
#: Ranks over their estimate listed in the text summary before "… N more".
MAX_SUMMARY_LINES = 20

__all__ = ["DEFAULT_MARGIN", "PEAK_FIELDS", "EstimateRatio", "EstimateVsActual", "Estimates",
           "estimate_ratios", "estimate_section", "has_estimates", "section"]


@dataclass(frozen=True)
class EstimateRatio:
    """One rank's estimate against what it actually used."""

    rank: int
    estimate_bytes: float | None
    actual_peak_bytes: float | None
    ratio: float | None
    #: Timeline field the actual peak was taken from (None when the rank has no memory data).
    field: str | None
    peak_ns: int | None
    #: ratio > 1 + margin: the rank used more than planned, beyond the tolerance.
    over_estimate: bool

    def to_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict`` of this flat record of immutable values, without its deep
        copy of each value (one entry per rank: a tenth of a second at 10,000 ranks)."""
        return {name: getattr(self, name) for name in _RATIO_FIELDS}


_RATIO_FIELDS = tuple(f.name for f in fields(EstimateRatio))


@dataclass(frozen=True)
class EstimateVsActual:
    """The report's estimate section (:attr:`Report.sections`): every rank's ratio, the notes
    on ranks that could not be compared, and the margin. In the JSON contract it is where it
    has always been: ``extra["estimate_vs_actual"]`` (detail) and ``extra["estimate_ratio"]``
    (rank → ratio, which the findings-series sink exports as
    ``stormotel_analyzer_estimate_ratio``)."""

    ratios: list[EstimateRatio]
    notes: list[str] = dataclasses.field(default_factory=list)
    margin: float = DEFAULT_MARGIN

    def extra_entries(self) -> dict[str, Any]:
        return {"estimate_vs_actual": {"margin": self.margin, "peak_fields": list(PEAK_FIELDS),
                                       "ranks": [r.to_dict() for r in self.ratios],
                                       "notes": self.notes},
                "estimate_ratio": self.ratio_by_rank()}

    def ratio_by_rank(self) -> dict[int, float]:
        return {r.rank: r.ratio for r in self.ratios if r.ratio is not None}

    def over(self) -> list[EstimateRatio]:
        """The ranks that peaked above their estimate beyond the margin — a finding (exit 1, a
        verdict line), not only a number in the JSON: a job 11,483x over its estimate used to
        read "healthy"."""
        return [r for r in self.ratios if r.over_estimate and r.ratio is not None]

    def has_findings(self) -> bool:
        return bool(self.over())

    def findings(self, report: Report) -> Iterator[Finding]:
        for i, e in enumerate(self.over()):
            # A measured peak against a given number is a fact; from reserved/device-used
            # (fallbacks that include memory the estimate does not cover) it overstates: medium.
            confidence = "high" if e.field == "allocated" else "medium"
            yield Finding(ESTIMATE, "over_estimate", (e.rank,),
                          "critical" if (e.ratio or 0.0) >= 2 else "warning", confidence,
                          e.peak_ns, e.peak_ns, i, True, e, report)

    def summary_lines(self, report: Report) -> list[str]:
        over = list(self.findings(report))
        if not over:
            return []
        return [f"Estimate vs actual ({len(over)} rank(s) over the estimate):",
                *capped(over, MAX_SUMMARY_LINES,
                        lambda f: f"  {f.severity:<8} {estimate_sentence(f.record)}",
                        lambda n: f"  ... {n} more in the JSON report")]


class EstimateFamily(FindingFamily):
    """A rank over its estimate: over the margin a warning, twice the estimate or more critical
    (the plan is wrong). Said per rank in the verdict; no annotation (the dashboards plot the
    ratio series)."""

    name = "estimate"
    importance = 4

    def title(self, f: Finding) -> str:
        ratio = f.record.ratio
        if ratio is None:
            return super().title(f)
        return f"peak {ratio_text(ratio)} its estimate ({f.severity})"

    def text(self, f: Finding) -> str:
        return f"stormotel: {estimate_sentence(f.record)}"

    def annotation(self, f: Finding, report: Report) -> AnnotationSpan | None:
        return None


ESTIMATE = EstimateFamily()


def estimate_sentence(e: EstimateRatio) -> str:
    """The summary's and the annotations' words for one rank over its estimate."""
    ratio = e.ratio or 0.0
    why = ("the estimate is for another model or batch size, or in the wrong unit"
           if ratio >= 10 else "the estimate is stale or the job changed")
    return (f"rank {e.rank} peaked at {format_bytes(e.actual_peak_bytes, digits=1)} "
            f"({e.field}), {ratio_text(ratio)} its estimate of "
            f"{format_bytes(e.estimate_bytes, digits=1)}: {why}")


def ratio_text(ratio: float) -> str:
    """``1.25x``, ``3.4x``, ``11,483x``: as many digits as a person reads."""
    return f"{ratio:,.0f}x" if ratio >= 100 else f"{ratio:.3g}x"


def section(inp: AlgorithmInput) -> EstimateVsActual | None:
    """The algorithm as the analysis runs it (:data:`~stormotel.analyzers.analyze.
    SECTION_ALGORITHMS`): None when no estimate was given or read."""
    if not has_estimates(inp.timeline, inp.estimates):
        return None
    return estimate_section(*estimate_ratios(inp.timeline, inp.estimates))


def estimate_ratios(timeline: Timeline, estimates: Estimates = None, *,
                    margin: float = DEFAULT_MARGIN) -> tuple[list[EstimateRatio], list[str]]:
    """Per-rank ``actual peak / estimate``, plus notes on ranks that could not be compared.

    ``estimates`` overrides ``timeline.meta["estimate_bytes"]``; a single number applies to every
    rank (a homogeneous job where each rank runs the same estimated step).
    """
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    per_rank = _per_rank_estimates(timeline, estimates)
    notes: list[str] = []
    out: list[EstimateRatio] = []
    peaks = _allocated_peaks(timeline)
    for rank in timeline.rank_ids:
        est = per_rank.get(rank)
        field, peak, peak_ns = peaks.get(rank) or _actual_peak(timeline, rank)
        if est is None:
            notes.append(f"rank {rank}: no estimate")
        elif est <= 0:
            notes.append(f"rank {rank}: estimate {est:g} B is not positive; no ratio")
        if peak is None:
            notes.append(f"rank {rank}: no allocated, reserved or device-used samples")
        elif field != PEAK_FIELDS[0]:
            notes.append(f"rank {rank}: actual peak from {field} (no allocator allocated), "
                         "which includes memory the estimate does not cover")
        ratio = peak / est if (peak is not None and est is not None and est > 0) else None
        out.append(EstimateRatio(rank=rank, estimate_bytes=est, actual_peak_bytes=peak,
                                 ratio=ratio, field=field, peak_ns=peak_ns,
                                 over_estimate=ratio is not None and ratio > 1 + margin))
    for rank in sorted(set(per_rank) - set(timeline.ranks)):
        notes.append(f"rank {rank}: estimate given but no samples")
    return out, notes


def has_estimates(timeline: Timeline, estimates: Estimates = None) -> bool:
    """Whether any estimate was given or read: without one there is no section and the
    per-rank peaks need not be looked for."""
    return estimates is not None or timeline.meta.get(META_ESTIMATE_BYTES) is not None


def estimate_section(ratios: list[EstimateRatio], notes: list[str],
                     margin: float = DEFAULT_MARGIN) -> EstimateVsActual | None:
    """The report's section; None when no rank has an estimate, so reports of jobs without
    one stay unchanged."""
    if not any(r.estimate_bytes is not None for r in ratios):
        return None
    return EstimateVsActual(ratios, notes, margin)


def _per_rank_estimates(timeline: Timeline, estimates: Estimates) -> dict[int, float]:
    source: Any = timeline.meta.get(META_ESTIMATE_BYTES) if estimates is None else estimates
    if source is None:
        return {}
    if isinstance(source, int | float) and not isinstance(source, bool):
        return {rank: float(source) for rank in timeline.expected_ranks()}
    if not isinstance(source, Mapping):
        raise TypeError(f"estimates must be a number or a mapping rank -> bytes, "
                        f"got {type(source).__name__}")
    out: dict[int, float] = {}
    for rank, value in source.items():
        if value is not None and math.isfinite(float(value)):
            out[int(rank)] = float(value)
    return out


def _allocated_peaks(timeline: Timeline) -> dict[int, tuple[str, float, int]]:
    """``_actual_peak`` of the ranks whose allocated bytes are all finite, ranks of one length
    a batch at a time: the row's first maximum, as np.argmax takes it per rank (the rest: rank
    by rank)."""
    name = PEAK_FIELDS[0]
    have = [r for r in timeline.rank_ids if name in timeline.ranks[r].values]
    out: dict[int, tuple[str, float, int]] = {}
    for n, keys in batches(timeline, have):
        series = [timeline.ranks[r] for r in keys]
        x = stack_rows([s.values[name] for s in series], n)
        ok = np.isfinite(x).all(axis=1)
        i = x.argmax(axis=1)
        rows = np.arange(len(keys))
        top = x[rows, i].tolist()
        for k in ok.nonzero()[0].tolist():
            out[keys[k]] = (name, top[k], int(series[k].t_ns[i[k]]))
    return out


def _actual_peak(timeline: Timeline, rank: int) -> tuple[str | None, float | None, int | None]:
    series = timeline.ranks[rank]
    for name in PEAK_FIELDS:
        values = series.values.get(name)
        if values is None or not values.shape[0]:
            continue
        if all_finite(values):  # no NaN to skip: argmax is nanargmax, without its copy
            i = int(np.argmax(values))
        elif np.isfinite(values).any():
            i = int(np.nanargmax(values))
        else:
            continue
        return name, float(values[i]), int(series.t_ns[i])
    return None, None, None
