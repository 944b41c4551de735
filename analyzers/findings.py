"""Every finding of a report in one common shape, in one stable order.

The report keeps each finding type in its own typed list, because that is the JSON contract
(DESIGN.md "Report contract"). The readers — the text summary, Grafana annotations, the findings
series, the Perfetto trace, the HTML page, the incident dashboard, rank attribution — want the
same few things of every finding (which ranks, how urgent, when, one sentence), so they iterate
:meth:`Report.findings() <stormotel.analyzers.report.Report.findings>` once instead of looping over
each list. What only one family has (a suspect's lead, a stall's process group) stays on
:attr:`Finding.record`.

Each finding says its own words through its family (:class:`FindingFamily`: its title, its
sentence, where its annotation sits and what keys it, how the verdict names it), so no reader
branches on the family: a new algorithm with findings brings its family beside its record
(``algorithms/estimate_ratio.py`` is the example) and every reader shows it. The built-in
families are in :mod:`~stormotel.analyzers.families`.

Canonical order: first cause (suspect #1 first), OOM forensics (first OOM first), gap findings,
collective attributions, stall findings, then each of the report's sections (estimate vs actual
first), each in the report's own order. Readers that rank by importance instead sort with
:func:`by_importance`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stormotel.analyzers.locations import location_text
from stormotel.analyzers.report import Report, Severity

#: How the verdict line ranks a rank by its worst finding: first cause first (0), then critical,
#: warning, info (:meth:`FindingFamily.verdict_weight`).
VERDICT_WEIGHT = {"critical": 1, "warning": 2, "info": 3}


@dataclass(frozen=True)
class AnnotationSpan:
    """Where a finding's Grafana annotation sits (ms) and what its idempotency key is made of,
    beyond the job and the finding's kind."""

    start_ms: int
    end_ms: int
    #: What tells two findings of one kind apart (a suspect's position, a stall's group/seq).
    identity: str = ""
    #: Tags beyond the common ones (kind, ranks, job, key).
    tags: tuple[str, ...] = ()
    #: Keyed on the ranks it names; False for a verdict by position, which a later run that
    #: names another rank replaces.
    by_ranks: bool = True
    #: Keyed on its start; False for what a later run re-finds (a lasting finding, a verdict).
    by_start: bool = True
    #: A lasting finding: a later run widens the region it already covers.
    widen: bool = False


class FindingFamily:
    """What every reader asks of one family of findings, answered once by the family.

    The defaults fit a finding about one rank at a time: titled ``kind (severity)``, named per
    rank in the verdict by its severity, annotated over its time range when it has one. A family
    overrides what it says differently."""

    #: :attr:`Finding.family` (the family's name in code and tests).
    name: str = ""
    #: Place in the order a person should look at findings (:func:`by_importance`; 0 first).
    importance: int = 9
    #: False: the verdict names the family's findings in one phrase (:meth:`verdict_group`),
    #: not per rank.
    verdict_per_rank: bool = True
    #: The verdict lists ranks of this family in the family's own order (first OOM first).
    verdict_ordered: bool = False

    def title(self, f: Finding) -> str:
        """Short label: what the verdict line names per rank."""
        return f"{f.kind} ({f.severity})"

    def text(self, f: Finding) -> str:
        """One sentence for annotations and trace slices."""
        ranks = ", ".join(map(str, f.ranks)) or "none"
        return f"stormotel: {self.title(f)} on rank(s) {ranks}"

    def annotation(self, f: Finding, report: Report) -> AnnotationSpan | None:
        """Its annotation (None: no place on the time axis)."""
        if f.start_ns is None or f.end_ns is None:
            return None
        return AnnotationSpan(f.start_ns // 1_000_000, f.end_ns // 1_000_000)

    def verdict_weight(self, f: Finding) -> int:
        """Rank order in the verdict line (lower first)."""
        return VERDICT_WEIGHT[f.severity]

    def verdict_group(self, findings: Sequence[Finding]) -> str:
        """The verdict's phrase for all of this family's findings (``verdict_per_rank=False``)."""
        ranks = sorted({r for f in findings for r in f.ranks})
        return f"{self.name} on ranks {', '.join(map(str, ranks))}"


@dataclass(slots=True)
class Finding:
    """One finding as every reader sees it; the family's own record rides along.

    Made afresh by each :meth:`Report.findings` call (changing one changes nothing else) and
    cheap to make: a large job has tens of thousands of collective attributions and most readers
    need only ranks, kind and severity, so the words (:attr:`title`, :attr:`text`,
    :attr:`where`) are made when read."""

    #: The family that says this finding's words (:class:`FindingFamily`).
    of: FindingFamily
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
    #: The family's own record (a ``Suspect``, a ``StallFinding``, an ``EstimateRatio``, …).
    record: Any
    #: The report it came from (for the ranks' locations).
    report: Report = field(compare=False, repr=False)

    @property
    def family(self) -> str:
        """``first_cause``, ``oom``, ``gap``, ``collective``, ``stall``, ``estimate``, …"""
        return self.of.name

    @property
    def importance(self) -> int:
        return self.of.importance

    @property
    def title(self) -> str:
        """``kind (severity)``-style short label: what the verdict line names per rank."""
        return self.of.title(self)

    @property
    def text(self) -> str:
        """One sentence for annotations and trace slices."""
        return self.of.text(self)

    @property
    def where(self) -> tuple[str, ...]:
        """``rank N: host=… pod=…`` for each named rank whose location is known."""
        return tuple(f"rank {r}: {w}" for r in self.ranks
                     if (w := location_text(self.report, r)))


def by_importance(findings: Iterable[Finding]) -> list[Finding]:
    """Findings in the order a person should look at them; canonical order within a family."""
    return sorted(findings, key=lambda f: f.of.importance)


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


def ms(ns: int | None, default: int) -> int:
    """Nanoseconds to the milliseconds annotations use (``default`` when unknown)."""
    return default if ns is None else int(ns) // 1_000_000
