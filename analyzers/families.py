"""The built-in finding families and the report's findings in canonical order.

Each family is a :class:`~stormotel.analyzers.findings.FindingFamily`: how its records become
:class:`~stormotel.analyzers.findings.Finding` s and the words every reader shows (title,
sentence, annotation span and key, verdict phrase). These five read the report's own typed
lists (first cause, OOM forensics, gap, collective, stall); an algorithm that adds a family
brings it with its report section (:class:`~stormotel.analyzers.report.Section`), and its
findings follow these in the report's order of sections.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import cast

from stormotel.analyzers.findings import (
    AnnotationSpan,
    Finding,
    FindingFamily,
    evidence_text,
    ms,
    severity_of_confidence,
    stall_time_ns,
)
from stormotel.analyzers.rankspec import format_rank_list
from stormotel.analyzers.report import (
    EV_OOM_NS,
    CollectiveAttribution,
    GapFinding,
    OomRank,
    Report,
    StallFinding,
    Suspect,
)


class FirstCause(FindingFamily):
    name = "first_cause"
    importance = 0

    def make(self, report: Report, i: int, s: Suspect) -> Finding:
        return Finding(self, "first_cause", (s.rank,), severity_of_confidence(s.confidence),
                       s.confidence, s.first_spike_ns, s.first_spike_ns + s.lead_ns, i, True,
                       s, report)

    def title(self, f: Finding) -> str:
        return f"first cause ({f.confidence})"

    def text(self, f: Finding) -> str:
        rec = cast(Suspect, f.record)
        return (f"stormotel: rank {rec.rank} is first-cause suspect #{f.index + 1} "
                f"({rec.confidence} confidence), rose {rec.delta_bytes / 2**20:.0f} MiB "
                f"{rec.lead_ns / 1e9:.3g} s before the cluster onset"
                + ("; its rise ended in an OOM" if EV_OOM_NS in rec.evidence else "")
                + f". {evidence_text(rec.evidence)}")

    def annotation(self, f: Finding, report: Report) -> AnnotationSpan | None:
        """From the first rise to the cluster onset, and at least as long as the lead; keyed
        by position: a later verdict that names another rank replaces it."""
        if f.start_ns is None or f.end_ns is None:
            return None
        start = f.start_ns // 1_000_000
        onset = report.cross_rank.cluster_onset_ns
        end = ms(onset, start) if onset else start
        return AnnotationSpan(start, max(end, start + (f.end_ns - f.start_ns) // 1_000_000),
                              f"suspect{f.index + 1}", (f"confidence={f.confidence}",),
                              by_ranks=False, by_start=False)

    def verdict_weight(self, f: Finding) -> int:
        return 0


class Oom(FindingFamily):
    """OOM forensics: no annotation (the dashboards draw the tracker's own OOM edges)."""

    name = "oom"
    importance = 1
    verdict_ordered = True

    def make(self, report: Report, i: int, o: OomRank) -> Finding:
        return Finding(self, o.cause, (o.rank,), "critical", "high", o.oom_ns, o.oom_ns, i, True,
                       o, report)

    def title(self, f: Finding) -> str:
        return f"out of memory ({f.kind})"

    def text(self, f: Finding) -> str:
        rec = cast(OomRank, f.record)
        return f"stormotel: rank {rec.rank} ran out of memory ({rec.cause.replace('_', ' ')})"

    def annotation(self, f: Finding, report: Report) -> AnnotationSpan | None:
        return None


#: Gap findings that last (one per job, kind and rank): a later run widens, never duplicates,
#: their annotation.
PERSISTENT_KINDS = ("persistent_drift", "fragmentation")


class Gap(FindingFamily):
    name = "gap"
    importance = 3

    def make(self, report: Report, i: int, g: GapFinding) -> Finding:
        return Finding(self, g.classification, (g.rank,), g.severity, f"{g.confidence:.2f}",
                       g.start_ns, g.end_ns, i, True, g, report)

    def text(self, f: Finding) -> str:
        rec = cast(GapFinding, f.record)
        return (f"stormotel: {rec.classification.replace('_', ' ')} on rank {rec.rank} "
                f"({rec.severity}, confidence {rec.confidence:.2f}). "
                f"{evidence_text(rec.evidence)}"
                + (f" Remediation: {rec.remediation[0]}" if rec.remediation else ""))

    def annotation(self, f: Finding, report: Report) -> AnnotationSpan | None:
        start = ms(f.start_ns, ms(report.window_start_ns, ms(report.window_end_ns, 0)))
        lasting = f.kind in PERSISTENT_KINDS
        return AnnotationSpan(start, ms(f.end_ns, start), "", (f"severity={f.severity}",),
                              by_start=not lasting, widen=lasting)


class Collective(FindingFamily):
    name = "collective"
    importance = 5
    verdict_per_rank = False

    def make(self, report: Report, i: int, c: CollectiveAttribution) -> Finding:
        return Finding(self, c.classification, (c.rank,), "info", f"{c.confidence:.2f}",
                       c.interval_start_ns, c.interval_end_ns, i, True, c, report)

    def text(self, f: Finding) -> str:
        rec = cast(CollectiveAttribution, f.record)
        return (f"stormotel: {rec.classification.replace('_', ' ')} gap spike on rank "
                f"{rec.rank} (confidence {rec.confidence:.2f}; {', '.join(rec.reason_codes)})")

    def verdict_group(self, findings: Sequence[Finding]) -> str:
        ranks = sorted({r for f in findings for r in f.ranks})
        return f"collective spikes on ranks {format_rank_list(ranks)}"


class Stall(FindingFamily):
    name = "stall"
    importance = 2
    verdict_per_rank = False

    def make(self, report: Report, i: int, st: StallFinding) -> Finding:
        t = stall_time_ns(st.evidence)
        return Finding(self, st.kind, tuple(st.ranks), severity_of_confidence(st.confidence),
                       st.confidence, t, t, i, st.consequence_of is None, st, report)

    def title(self, f: Finding) -> str:
        return f"{f.kind} ({f.confidence})"

    def text(self, f: Finding) -> str:
        rec = cast(StallFinding, f.record)
        where = f"pg {rec.process_group} seq {rec.seq_id} {rec.op or ''}".strip()
        return (f"stormotel: stalled collective ({rec.kind}) at {where}; culprit ranks "
                f"{', '.join(map(str, rec.ranks)) or 'undecided'} ({rec.confidence}, from "
                f"{rec.source})"
                + (f" Remediation: {rec.remediation[0]}" if rec.remediation else ""))

    def annotation(self, f: Finding, report: Report) -> AnnotationSpan | None:
        """At its detection, else at the window's end (a stall is found at the end)."""
        if f.start_ns is None and report.window_end_ns is None:
            return None
        start = ms(f.start_ns, ms(report.window_end_ns, 0))
        rec = cast(StallFinding, f.record)
        return AnnotationSpan(start, start, f"{rec.process_group}|{rec.seq_id}", ("stall",))

    def verdict_group(self, findings: Sequence[Finding]) -> str:
        return stall_verdict([cast(StallFinding, f.record) for f in findings])


def stall_verdict(findings: list[StallFinding]) -> str:
    """The verdict's stall part: the root causes first, then how many findings in all."""
    roots = [f for f in findings if f.consequence_of is None]
    named = [f"{f.kind} on rank(s) {format_ranks(f.ranks)} "
             f"({f.evidence.get('category') or f.confidence}"
             + ("; local rank, one node presumed" if str(f.evidence.get("rank_from", ""))
                .startswith("presumed") else "") + ")" for f in roots
             if f.ranks and not f.evidence.get("waits_elsewhere")][:2]
    lead = "stall root cause: " + "; ".join(named) if named else "stall: no single rank"
    # where the ranks are, when snapshots say it (a named culprit or an undecided split)
    places = next((str(f.evidence["reason"])[:300] for f in roots if f.source == "stacks"
                   and f.evidence.get("reason")), None)
    if places:
        lead += f" [{places}]"
    return f"{lead} — {len(findings)} stall finding(s), {len(roots)} root(s)"


def format_ranks(ranks: list[int]) -> str:
    return ",".join(map(str, ranks)) if len(ranks) <= 8 else \
        f"{ranks[0]}..{ranks[-1]} ({len(ranks)} ranks)"


FIRST_CAUSE, OOM, GAP, COLLECTIVE, STALL = FirstCause(), Oom(), Gap(), Collective(), Stall()


def report_findings(report: Report) -> Iterator[Finding]:
    """The report's findings in canonical order (see :mod:`stormotel.analyzers.findings`)."""
    for i, s in enumerate(report.cross_rank.first_cause_suspects):
        yield FIRST_CAUSE.make(report, i, s)
    if report.oom_forensics is not None:
        for i, o in enumerate(report.oom_forensics.ranks):
            yield OOM.make(report, i, o)
    for i, g in enumerate(report.gap_findings):
        yield GAP.make(report, i, g)
    for i, c in enumerate(report.collective_attributions):
        yield COLLECTIVE.make(report, i, c)
    for i, st in enumerate(report.stall_findings):
        yield STALL.make(report, i, st)
    for section in report.sections:
        yield from section.findings(report)
