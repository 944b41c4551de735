"""The report's first sentence: the answer to the question a page asks.

An OOM page asks *which rank ran out first, why, and what to change*; a dead-rank page asks
*which rank stopped, and when*; a leak page asks *which rank, how fast, and how long until the
device is full*. :func:`headline` picks, in that order of urgency, the finding that answers and
says it in one line with the rank it names: the receiver's index and job pages show it above
the report, and the text summary starts with it. It adds no judgement of its own: every fact is
a field of the report (OOM forensics, the dead-rank and other stall findings, gap findings,
first-cause suspects).
"""

from __future__ import annotations

from dataclasses import dataclass

from stormotel.analyzers.algorithms.dead_rank import CATEGORY as STOPPED
from stormotel.analyzers.rankspec import format_rank_list
from stormotel.analyzers.report import Report

from stormotel.units import format_bytes

#: The one setting each OOM cause's evidence supports (docs/analyzer.md, OOM forensics).
OOM_SETTING: dict[str, str] = {
    "fragmentation": "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (the allocator held far "
                     "more than live tensors: fragmentation, not a model too big)",
    "outside_allocator": "smaller NCCL buffers (NCCL_BUFFSIZE) or fewer channels, and check for "
                         "other processes on the GPU (the memory was outside PyTorch's "
                         "allocator)",
    "genuine_peak": "a smaller micro-batch (or activation checkpointing): live tensors "
                    "themselves filled the device",
    "undecided": "none yet: the samples lack the allocator fields to tell the cause; track with "
                 "the cuda sampler to get them",
}


@dataclass(frozen=True)
class Headline:
    """One line, the rank it names (None: no single rank), and what kind of answer it is."""

    text: str
    rank: int | None
    kind: str


def headline(report: Report) -> Headline:
    """The report's answer, most urgent first: OOM, dead rank, other root stall, leak, first
    cause, other findings, healthy (or no evidence, or partial: ranks of the world without
    data are never called healthy, as the text summary's verdict says)."""
    oom = report.oom_forensics
    if oom is not None and oom.ranks:
        first = next((r for r in oom.ranks if r.rank == oom.first_rank), oom.ranks[0])
        setting = OOM_SETTING.get(first.cause, OOM_SETTING["undecided"])
        who = f"rank {first.rank} ran out of memory first" if oom.first_rank is not None \
            else f"ranks {', '.join(str(r.rank) for r in oom.ranks[:4])} ran out of memory " \
                 "within one sampling interval"
        return Headline(f"OOM: {who} ({first.cause.replace('_', ' ')}); setting: {setting}",
                        oom.first_rank, "oom")
    roots = [f for f in report.stall_findings if f.consequence_of is None and f.ranks]
    for root in roots:
        if root.evidence.get("category") == STOPPED:
            return Headline(f"dead rank: {root.evidence.get('reason')}", root.ranks[0],
                            "dead_rank")
    drifts = sorted((g for g in report.gap_findings if g.classification == "persistent_drift"
                     and g.severity in ("critical", "warning")),
                    key=lambda g: (g.evidence.get("time_to_full_s") or float("inf"), g.rank))
    if drifts:
        g = drifts[0]
        rate = float(g.evidence.get("slope_bytes_per_s") or 0.0) * 60
        ttf = g.evidence.get("time_to_full_s")
        full = f"device full in {_duration(float(ttf))}" if ttf else "no device size to " \
            "project a time to full"
        return Headline(f"leak: rank {g.rank} grows {format_bytes(rate, digits=1)}/min outside "
                        f"the allocator; {full}", g.rank, "leak")
    if roots:
        st = roots[0]
        return Headline(f"stall: {st.kind} on rank(s) {', '.join(map(str, st.ranks[:8]))} "
                        f"({st.confidence}, from {st.source})", st.ranks[0], "stall")
    suspects = report.cross_rank.first_cause_suspects
    if suspects and suspects[0].confidence in ("high", "medium"):
        s = suspects[0]
        when = (f"{s.lead_ns / 1e9:.3g} s before the others" if report.cross_rank.cluster_onset_ns
                is not None else "while no other rank rose")
        return Headline(f"first cause: rank {s.rank} rose {format_bytes(s.delta_bytes, digits=1)}"
                        f" {when} ({s.confidence})", s.rank, "first_cause")
    named = [f for f in report.findings() if f.ranks and f.severity in ("critical", "warning")]
    if named:
        top = min(named, key=lambda x: {"critical": 0, "warning": 1}[x.severity])
        return Headline(f"{top.title} on rank {top.ranks[0]}", top.ranks[0], top.family)
    if report.has_findings():  # low-confidence or job-wide: no rank is named on them
        return Headline("no confident single-rank finding; low-confidence findings are in the "
                        "report", None, "findings")
    if not report.extra.get("samples", 1) and not report.stall_findings:
        return Headline("no evidence: nothing was read to judge by (not a healthy verdict)",
                        None, "no_evidence")
    if report.missing_ranks:  # a rank killed before its first export leaves no data at all
        return Headline(f"no finding in the ranks read; no data from rank(s) "
                        f"{format_rank_list(report.missing_ranks)} of the world (not a healthy "
                        "verdict on those)", None, "partial")
    return Headline("healthy: no finding in the window", None, "healthy")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
