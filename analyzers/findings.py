"""Every finding of a report in one common shape, in one stable order.

The report keeps each finding type in its own typed list, because that is the JSON contract
(DESIGN.md "Report contract"). The readers — the text summary, Grafana annotations, the findings
series, the Perfetto trace, the HTML page, the incident dashboard, rank attribution — want the
same few things of every finding (which ranks, how urgent, when, one sentence), so they iterate
:meth:`Report.findings() <stormotel.analyzers.report.Report.findings>` once instead of looping over
each list; a new finding type is one builder here, not a loop in every sink. What only one family
has (a suspect's lead, a stall's process group) stays on :attr:`Finding.record`.

Canonical order: first cause (suspect #1 first), OOM forensics (first OOM first), gap findings,
collective attributions, stall findings, each in the report's own order. Readers that rank by
importance instead sort with :func:`by_importance`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from stormotel.analyzers.algorithms.estimate_ratio import (
    EstimateRatio,
    over_estimate_ranks,
    ratio_text,
    severity_of_ratio,
)
from stormotel.analyzers.algorithms.oom_forensics import EV_OOM_NS
from stormotel.analyzers.locations import location_text
from stormotel.analyzers.report import (
    CollectiveAttribution,
    GapFinding,
    OomRank,
    Report,
    Severity,
    StallFinding,
    Suspect,
)

from stormotel.units import format_bytes

Family = Literal["first_cause", "oom", "gap", "collective", "stall", "estimate"]
FAMILIES: tuple[Family, ...] = ("first_cause", "oom", "gap", "collective", "stall", "estimate")
#: The order of importance that lists of ranks follow (who to look at first).
IMPORTANCE: dict[Family, int] = {"first_cause": 0, "oom": 1, "stall": 2, "gap": 3,
                                 "estimate": 4, "collective": 5}
FindingRecord = (Suspect | OomRank | GapFinding | CollectiveAttribution | StallFinding
                 | EstimateRatio)


@dataclass(slots=True)
class Finding:
    """One finding as every reader sees it; the family's own record rides along.

    Made afresh by each :func:`report_findings` call (changing one changes nothing else) and
    cheap to make: a large job has tens of thousands of collective attributions and most readers
    need only ranks, kind and severity, so the words (:attr:`title`, :attr:`text`,
    :attr:`where`) are made when read."""

    family: Family
    #: What was found: ``first_cause``, the OOM's cause, a gap classification, a collective
    #: class or a stall kind (the ``kind`` label of the findings series).
    kind: str
    ranks: tuple[int, ...]
    #: One scale for every family: a high-confidence suspect or stall is critical, medium a
    #: warning; gap findings carry their own; collective spikes are information.
    severity: Severity
    #: As the family states it: ``high``/``medium``/``low``, or a score such as ``0.83``.
    confidence: str
    #: When it started and ended, where the family knows (a stall may have no time at all).
    start_ns: int | None
    end_ns: int | None
    #: Position within its family (suspect #1 is 0, stall ``[i]`` is i).
    index: int
    #: False only where the analysis says it is the consequence of an earlier finding (a
    #: stall's ``consequence_of``).
    root: bool
    record: FindingRecord
    #: The report it came from (for the ranks' locations).
    report: Report = field(compare=False, repr=False)

    @property
    def title(self) -> str:
        """``kind (severity)``-style short label: what the verdict line names per rank."""
        if self.family == "first_cause":
            return f"first cause ({self.confidence})"
        if self.family == "oom":
            return f"out of memory ({self.kind})"
        if self.family == "stall":
            return f"{self.kind} ({self.confidence})"
        if isinstance(self.record, EstimateRatio) and self.record.ratio is not None:
            return f"peak {ratio_text(self.record.ratio)} its estimate ({self.severity})"
        return f"{self.kind} ({self.severity})"

    @property
    def text(self) -> str:
        """One sentence for annotations and trace slices."""
        return _text(self)

    @property
    def where(self) -> tuple[str, ...]:
        """``rank N: host=… pod=…`` for each named rank whose location is known."""
        return tuple(f"rank {r}: {w}" for r in self.ranks
                     if (w := location_text(self.report, r)))


def report_findings(report: Report) -> Iterator[Finding]:
    """The report's findings in canonical order (see the module docstring)."""
    for i, s in enumerate(report.cross_rank.first_cause_suspects):
        yield _first_cause(report, i, s)
    for i, o in enumerate(_oom_ranks(report)):
        yield _oom(report, i, o)
    for i, g in enumerate(report.gap_findings):
        yield _gap(report, i, g)
    for i, c in enumerate(report.collective_attributions):
        yield _collective(report, i, c)
    for i, st in enumerate(report.stall_findings):
        yield _stall(report, i, st)
    for i, e in enumerate(over_estimate_ranks(report.extra)):
        yield _estimate(report, i, e)


def by_importance(findings: Iterable[Finding]) -> list[Finding]:
    """Findings in the order a person should look at them; canonical order within a family."""
    return sorted(findings, key=lambda f: IMPORTANCE[f.family])


def ranks_named(findings: Iterable[Finding]) -> list[int]:
    """Every rank the findings name, in their order, once."""
    return list(dict.fromkeys(r for f in findings for r in f.ranks))


def severity_of_confidence(confidence: str) -> Severity:
    """``high`` → critical, ``medium`` → warning, anything else → info."""
    if confidence == "high":
        return "critical"
    return "warning" if confidence == "medium" else "info"


def evidence_text(evidence: dict[str, Any], limit: int = 6) -> str:
    """The first few scalar evidence entries as ``key=value`` (text outputs stay short)."""
    items = [f"{k}={v}" for k, v in list(evidence.items())[:limit]
             if isinstance(v, str | int | float | bool)]
    return ", ".join(items)


def stall_time_ns(evidence: dict[str, Any]) -> int | None:
    """When a stall was detected: an explicit time, else the first watchdog timeout in the
    evidence timeline, else its first event."""
    for key in ("time_ns", "start_ns"):
        v = evidence.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    events = [e for e in evidence.get("timeline") or [] if isinstance(e, dict)
              and isinstance(e.get("ts_ns"), int)]
    timeouts = [e["ts_ns"] for e in events if e.get("event") == "watchdog_timeout"]
    if timeouts:
        return min(timeouts)
    return min((e["ts_ns"] for e in events), default=None)


def _oom_ranks(report: Report) -> list[OomRank]:
    return list(report.oom_forensics.ranks) if report.oom_forensics is not None else []


def _first_cause(report: Report, i: int, s: Suspect) -> Finding:
    return Finding("first_cause", "first_cause", (s.rank,), severity_of_confidence(s.confidence),
                   s.confidence, s.first_spike_ns, s.first_spike_ns + s.lead_ns, i, True, s,
                   report)


def _oom(report: Report, i: int, o: OomRank) -> Finding:
    return Finding("oom", o.cause, (o.rank,), "critical", "high", o.oom_ns, o.oom_ns, i, True, o,
                   report)


def _gap(report: Report, i: int, g: GapFinding) -> Finding:
    return Finding("gap", g.classification, (g.rank,), g.severity, f"{g.confidence:.2f}",
                   g.start_ns, g.end_ns, i, True, g, report)


def _collective(report: Report, i: int, c: CollectiveAttribution) -> Finding:
    return Finding("collective", c.classification, (c.rank,), "info", f"{c.confidence:.2f}",
                   c.interval_start_ns, c.interval_end_ns, i, True, c, report)


def _stall(report: Report, i: int, st: StallFinding) -> Finding:
    t = stall_time_ns(st.evidence)
    return Finding("stall", st.kind, tuple(st.ranks), severity_of_confidence(st.confidence),
                   st.confidence, t, t, i, st.consequence_of is None, st, report)


def _estimate(report: Report, i: int, e: EstimateRatio) -> Finding:
    # A measured peak against a given number is a fact; from reserved/device-used (fallbacks
    # that include memory the estimate does not cover) it overstates, so medium.
    confidence = "high" if e.field == "allocated" else "medium"
    return Finding("estimate", "over_estimate", (e.rank,),
                   severity_of_ratio(e.ratio or 0.0),  # type: ignore[arg-type]
                   confidence, e.peak_ns, e.peak_ns, i, True, e, report)


def estimate_sentence(e: EstimateRatio) -> str:
    """The summary's and the annotations' words for one rank over its estimate."""
    ratio = e.ratio or 0.0
    why = ("the estimate is for another model or batch size, or in the wrong unit"
           if ratio >= 10 else "the estimate is stale or the job changed")
    return (f"rank {e.rank} peaked at {format_bytes(e.actual_peak_bytes, digits=1)} "
            f"({e.field}), {ratio_text(ratio)} its estimate of "
            f"{format_bytes(e.estimate_bytes, digits=1)}: {why}")


def _text(f: Finding) -> str:
    """The sentence annotations and trace slices show, in each family's own terms."""
    rec = f.record
    if isinstance(rec, Suspect):
        return (f"stormotel: rank {rec.rank} is first-cause suspect #{f.index + 1} "
                f"({rec.confidence} confidence), rose {rec.delta_bytes / 2**20:.0f} MiB "
                f"{rec.lead_ns / 1e9:.3g} s before the cluster onset"
                + ("; its rise ended in an OOM" if EV_OOM_NS in rec.evidence else "")
                + f". {evidence_text(rec.evidence)}")
    if isinstance(rec, OomRank):
        return f"stormotel: rank {rec.rank} ran out of memory ({rec.cause.replace('_', ' ')})"
    if isinstance(rec, GapFinding):
        return (f"stormotel: {rec.classification.replace('_', ' ')} on rank {rec.rank} "
                f"({rec.severity}, confidence {rec.confidence:.2f}). "
                f"{evidence_text(rec.evidence)}"
                + (f" Remediation: {rec.remediation[0]}" if rec.remediation else ""))
    if isinstance(rec, EstimateRatio):
        return f"stormotel: {estimate_sentence(rec)}"
    if isinstance(rec, CollectiveAttribution):
        return (f"stormotel: {rec.classification.replace('_', ' ')} gap spike on rank "
                f"{rec.rank} (confidence {rec.confidence:.2f}; {', '.join(rec.reason_codes)})")
    where = f"pg {rec.process_group} seq {rec.seq_id} {rec.op or ''}".strip()
    return (f"stormotel: stalled collective ({rec.kind}) at {where}; culprit ranks "
            f"{', '.join(map(str, rec.ranks)) or 'undecided'} ({rec.confidence}, from "
            f"{rec.source})" + (f" Remediation: {rec.remediation[0]}" if rec.remediation else ""))
