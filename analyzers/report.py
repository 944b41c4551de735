"""The versioned analyzer report (DESIGN.md "Report contract").

Findings are plain dataclasses so every algorithm, source and sink shares one vocabulary;
``Report.to_dict()`` is the JSON contract others rely on (``stormotel.report/v1``). Keys may be
added, never renamed or removed without bumping the schema.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from stormotel.textsafe import redact

if TYPE_CHECKING:
    from collections.abc import Iterator

    from stormotel.analyzers.findings import Finding

REPORT_SCHEMA = "stormotel.report/v1"

Confidence = Literal["high", "medium", "low"]
Severity = Literal["info", "warning", "critical"]
GapClass = Literal["persistent_drift", "transient_spike", "fragmentation"]
CollectiveClass = Literal["collective_confident", "collective_likely", "collective_suspect"]
StallKind = Literal["straggler", "not_joined", "size_mismatch", "op_type_mismatch", "rank_failure",
                    "dtype_mismatch", "count_split", "undecided"]


@dataclass
class Suspect:
    rank: int
    confidence: Confidence
    first_spike_ns: int
    lead_ns: int
    delta_bytes: float
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class CrossRank:
    cluster_onset_ns: int | None = None
    first_cause_suspects: list[Suspect] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    alignment: str = "wall"
    resolution_ns: int | None = None
    #: Every incident in the window (leader or tie each), oldest first.
    incidents: list[dict[str, Any]] = field(default_factory=list)
    #: What the evidence allows: its resolution, and the rule for claiming a lead.
    resolution: str | None = None


@dataclass
class GapFinding:
    rank: int
    classification: GapClass
    severity: Severity
    confidence: float
    evidence: dict[str, Any] = field(default_factory=dict)
    remediation: list[str] = field(default_factory=list)
    #: When the finding starts/ends (for annotations and traces); optional.
    start_ns: int | None = None
    end_ns: int | None = None


@dataclass
class CollectiveAttribution:
    rank: int
    classification: CollectiveClass
    confidence: float
    interval_start_ns: int
    interval_end_ns: int
    reason_codes: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class StallFinding:
    kind: StallKind
    ranks: list[int]
    process_group: str | None
    seq_id: int | None
    op: str | None
    source: Literal["flight_recorder", "logs", "telemetry", "stacks"]
    confidence: Confidence
    evidence: dict[str, Any] = field(default_factory=dict)
    remediation: list[str] = field(default_factory=list)
    #: A consequence of an earlier finding rather than a new culprit.
    consequence_of: int | None = None


@dataclass
class Report:
    job_id: str | None
    world_size: int | None
    participating_ranks: list[int]
    missing_ranks: list[int]
    cross_rank: CrossRank = field(default_factory=CrossRank)
    gap_findings: list[GapFinding] = field(default_factory=list)
    collective_attributions: list[CollectiveAttribution] = field(default_factory=list)
    stall_findings: list[StallFinding] = field(default_factory=list)
    #: Loading notes and counted skips, so nothing is silently dropped.
    notes: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    #: Analysis window and settings, for auditing and for idempotent sinks.
    window_start_ns: int | None = None
    window_end_ns: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    #: Free-form extra sections (e.g. estimate vs. actual, skipped analyses).
    extra: dict[str, Any] = field(default_factory=dict)

    def has_findings(self) -> bool:
        from stormotel.analyzers.algorithms.estimate_ratio import over_estimate_ranks

        return bool(self.cross_rank.first_cause_suspects or self.gap_findings
                    or self.collective_attributions or self.stall_findings
                    or self.extra.get("oom_forensics")  # an OOM is a finding on its own
                    or over_estimate_ranks(self.extra))

    def findings(self) -> Iterator[Finding]:
        """Every finding in one common shape and a stable order, for the summary and the sinks
        (:mod:`analyzers.findings`; imported here on use, as it builds on these classes)."""
        from stormotel.analyzers.findings import report_findings

        return report_findings(self)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d = {"schema": REPORT_SCHEMA, **d}
        return _jsonable(d)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)


def _jsonable(obj: Any) -> Any:
    """numpy scalars and tuples → plain JSON types; NaN/inf → None (JSON has neither)."""
    if isinstance(obj, str):  # endpoint URLs and server messages: never a credential
        return redact(obj)
    if isinstance(obj, dict):
        return {redact(str(k)): _jsonable(v) for k, v in obj.items()}  # keys too: endpoint URLs
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        obj = obj.item()
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return None
    return obj
