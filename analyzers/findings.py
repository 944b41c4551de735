"""Every finding of a report in one common shape, in one stable order.

The report keeps each finding type in its own typed list, because that is the JSON contract
(DESIGN.md "Report contract"). The readers — the text summary, Grafana annotations, the findings
series, the Perfetto trace, the HTML page, the incident dashboard, rank attribution — want the
same few things of every finding (which ranks, how urgent, when, one sentence), so they iterate
:meth:`Report.findings() <analyzers.report.Report.findings>` once instead of looping over each
list; a new finding type is one builder here, not a loop in every sink. What only one family
has (a suspect's lead, a stall's process group) stays on :attr:`Finding.record`.

Canonical order: first cause (suspect #1 first), OOM forensics (first OOM first), gap findings,
collective attributions, stall findings, each in the report's own order. Readers that rank by
importance instead sort with :func:`by_importance`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from stormotel.analyzers.algorithms.oom_forensics import OomRank
from stormotel.analyzers.locations import location_text
from stormotel.analyzers.report import (
    CollectiveAttribution,
    GapFinding,
    Report,
    Severity,
    StallFinding,
    Suspect,
)

Family = Literal["first_cause", "oom", "gap", "collective", "stall"]
FAMILIES: tuple[Family, ...] = ("first_cause", "oom", "gap", "collective", "stall")
#: The order of importance that lists of ranks follow (who to look at first).
IMPORTANCE: dict[Family, int] = {"first_cause": 0, "oom": 1, "stall": 2, "gap": 3,
                                 "collective": 4}
FindingRecord = Suspect | OomRank | GapFinding | CollectiveAttribution | StallFinding


@dataclass(frozen=True)
class Finding:
    """One finding as every reader sees it; the family's own record rides along."""

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
    #: ``kind (severity)``-style short label: what the verdict line names per rank.
    title: str
    #: One sentence for annotations and trace slices.
    text: str
    #: ``rank N: host=… pod=…`` for each named rank whose location is known.
    where: tuple[str, ...]
    record: FindingRecord


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


def _where(report: Report, ranks: Iterable[int]) -> tuple[str, ...]:
    return tuple(f"rank {r}: {w}" for r in ranks if (w := location_text(report, r)))


def _oom_ranks(report: Report) -> list[OomRank]:
    forensics = report.extra.get("oom_forensics")
    entries = forensics.get("ranks") if isinstance(forensics, dict) else None
    ranks = (OomRank.from_mapping(d) for d in entries or [] if isinstance(d, dict))
    return [r for r in ranks if r is not None]


def _first_cause(report: Report, i: int, s: Suspect) -> Finding:
    return Finding(
        "first_cause", "first_cause", (s.rank,), severity_of_confidence(s.confidence),
        s.confidence, s.first_spike_ns, s.first_spike_ns + s.lead_ns, i, True,
        f"first cause ({s.confidence})",
        f"stormotel: rank {s.rank} is first-cause suspect #{i + 1} ({s.confidence} "
        f"confidence), rose {s.delta_bytes / 2**20:.0f} MiB {s.lead_ns / 1e9:.3g} s before "
        f"the cluster onset. {evidence_text(s.evidence)}",
        _where(report, (s.rank,)), s)


def _oom(report: Report, i: int, o: OomRank) -> Finding:
    return Finding(
        "oom", o.cause, (o.rank,), "critical", "high", o.oom_ns, o.oom_ns, i, True,
        f"out of memory ({o.cause})",
        f"stormotel: rank {o.rank} ran out of memory ({o.cause.replace('_', ' ')})",
        _where(report, (o.rank,)), o)


def _gap(report: Report, i: int, g: GapFinding) -> Finding:
    return Finding(
        "gap", g.classification, (g.rank,), g.severity, f"{g.confidence:.2f}", g.start_ns,
        g.end_ns, i, True, f"{g.classification} ({g.severity})",
        f"stormotel: {g.classification.replace('_', ' ')} on rank {g.rank} "
        f"({g.severity}, confidence {g.confidence:.2f}). {evidence_text(g.evidence)}"
        + (f" Remediation: {g.remediation[0]}" if g.remediation else ""),
        _where(report, (g.rank,)), g)


def _collective(report: Report, i: int, c: CollectiveAttribution) -> Finding:
    return Finding(
        "collective", c.classification, (c.rank,), "info", f"{c.confidence:.2f}",
        c.interval_start_ns, c.interval_end_ns, i, True, f"{c.classification} (info)",
        f"stormotel: {c.classification.replace('_', ' ')} gap spike on rank {c.rank} "
        f"(confidence {c.confidence:.2f}; {', '.join(c.reason_codes)})",
        _where(report, (c.rank,)), c)


def _stall(report: Report, i: int, st: StallFinding) -> Finding:
    t = stall_time_ns(st.evidence)
    where = f"pg {st.process_group} seq {st.seq_id} {st.op or ''}".strip()
    return Finding(
        "stall", st.kind, tuple(st.ranks), severity_of_confidence(st.confidence),
        st.confidence, t, t, i, st.consequence_of is None, f"{st.kind} ({st.confidence})",
        f"stormotel: stalled collective ({st.kind}) at {where}; culprit ranks "
        f"{', '.join(map(str, st.ranks)) or 'undecided'} ({st.confidence}, from {st.source})"
        + (f" Remediation: {st.remediation[0]}" if st.remediation else ""),
        _where(report, st.ranks), st)
