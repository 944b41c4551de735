"""The versioned analyzer report (DESIGN.md "Report contract").

Findings are plain dataclasses so every algorithm, source and sink shares one vocabulary;
``Report.to_dict()`` is the JSON contract others rely on (``stormotel.report/v1``). Keys may be
added, never renamed or removed without bumping the schema.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from stormotel.analyzers.jsontext import dumps_indented

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


GIB = float(1 << 30)

#: Evidence keys a first-cause suspect gains when its rise ended in an OOM (set by
#: :func:`~stormotel.analyzers.algorithms.oom_forensics.mark_suspects_that_ran_out`, read by
#: the finding's sentence and the summary).
EV_OOM_NS = "ran_out_of_memory_ns"
EV_OOM_CAUSE = "ran_out_of_memory_cause"
EV_OOM_FIRST = "ran_out_of_memory_first"


@dataclass(frozen=True)
class OomThresholds:
    #: reserved − allocated, as a share of reserved, that makes it fragmentation …
    fragmentation_share: float = 0.3
    #: … and at least this many bytes.
    fragmentation_bytes: float = 0.5 * GIB
    #: gap (device used − reserved), as a share of the device, that makes it outside memory …
    gap_share: float = 0.15
    gap_bytes: float = 1.0 * GIB


@dataclass(frozen=True)
class OomRank:
    """One rank's first OOM, as the report's ``oom_forensics.ranks`` entries spell it."""

    rank: int
    oom_ns: int
    cause: str
    allocated_bytes: float | None
    reserved_bytes: float | None
    device_used_bytes: float | None
    device_total_bytes: float | None
    gap_bytes: float | None
    evidence: dict[str, Any] = field(default_factory=dict)
    dump_path: str | None = None
    error: str | None = None
    source: str = "telemetry"

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any]) -> OomRank | None:
        """Back from the report's JSON-shaped entry; None when it names no rank."""
        if not isinstance(d.get("rank"), int):
            return None

        def number(key: str) -> float | None:
            v = d.get(key)
            return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

        oom_ns = d.get("oom_ns")
        evidence = d.get("evidence")
        return cls(int(d["rank"]), oom_ns if isinstance(oom_ns, int) else 0,
                   str(d.get("cause") or "undecided"), number("allocated_bytes"),
                   number("reserved_bytes"), number("device_used_bytes"),
                   number("device_total_bytes"), number("gap_bytes"),
                   dict(evidence) if isinstance(evidence, dict) else {},
                   d.get("dump_path") or None, d.get("error") or None,
                   str(d.get("source") or "telemetry"))


@dataclass(frozen=True)
class OomForensics:
    """OOM forensics (:mod:`stormotel.analyzers.algorithms.oom_forensics`): the first OOM, or a
    tie, and each rank's cause. Serialised where the JSON contract has always had it: ``extra``'s
    ``oom_forensics`` key (:meth:`Report.to_dict`)."""

    first_rank: int | None
    tie: bool
    resolution_ns: int
    summary: str
    ranks: list[OomRank]
    thresholds: OomThresholds


class Section(Protocol):
    """An algorithm's own typed part of the report (:attr:`Report.sections`) and its findings.

    An algorithm with findings keeps its result in one object of its own type behind this
    protocol instead of a new field here, its dicts in ``extra`` or a reader that knows it:
    the JSON keeps the ``extra`` keys the section names, the findings (with their family's
    words, :class:`~stormotel.analyzers.findings.FindingFamily`) reach every reader through
    :meth:`Report.findings`, and the summary prints its lines. Estimate vs actual
    (:mod:`stormotel.analyzers.algorithms.estimate_ratio`) is one."""

    def extra_entries(self) -> dict[str, Any]:
        """Its part of the JSON contract: ``extra`` keys → values (dataclasses allowed)."""
        ...

    def has_findings(self) -> bool:
        ...

    def findings(self, report: Report) -> Iterator[Finding]:
        """Its findings, in its own order (after the built-in families)."""
        ...

    def summary_lines(self, report: Report) -> list[str]:
        """Its lines in the text summary (none: an empty list)."""
        ...


_SectionT = TypeVar("_SectionT")


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
    #: Free-form extra sections (e.g. the first-cause tables, stall evidence, skipped analyses).
    extra: dict[str, Any] = field(default_factory=dict)
    #: Which ranks ran out of memory, first, and why (None: no OOM). In the JSON contract it is
    #: ``extra["oom_forensics"]``, where it has always been.
    oom_forensics: OomForensics | None = None
    #: The algorithms' own typed sections (estimate vs actual, …), in the order they ran; in
    #: the JSON contract each is the ``extra`` keys it names, before ``oom_forensics``.
    sections: list[Section] = field(default_factory=list)

    def has_findings(self) -> bool:
        return bool(self.cross_rank.first_cause_suspects or self.gap_findings
                    or self.collective_attributions or self.stall_findings
                    or self.oom_forensics is not None  # an OOM is a finding on its own
                    or any(s.has_findings() for s in self.sections))

    def section(self, kind: type[_SectionT]) -> _SectionT | None:
        """The section of this type, if the analysis made one."""
        return next((s for s in self.sections if isinstance(s, kind)), None)

    def findings(self) -> Iterator[Finding]:
        """Every finding in one common shape and a stable order, for the summary and the sinks
        (:mod:`stormotel.analyzers.families`; imported here on use, as it builds on these
        classes)."""
        from stormotel.analyzers.families import report_findings

        return report_findings(self)

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: what ``dataclasses.asdict`` then :func:`_jsonable` gave, in one
        pass that builds every container anew (nothing returned is shared with the report)
        without asdict's deep copy of each leaf value, which are immutable or converted here:
        at 10,000 ranks (a suspect and a table row per rank) that copy was most of the time."""
        d = {name: getattr(self, name) for name in _field_names(type(self))}
        oom, sections = d.pop("oom_forensics"), d.pop("sections")
        entries = [(k, v) for s in sections for k, v in s.extra_entries().items()]
        if oom is not None:
            entries.append(("oom_forensics", oom))
        if entries:
            d["extra"] = _with_sections(d["extra"], entries)
        d = {"schema": REPORT_SCHEMA, **d}
        return _jsonable(d)

    def to_json(self, indent: int | None = 2) -> str:
        """``json.dumps(self.to_dict(), indent=indent)``; with an indent, written by
        :mod:`~stormotel.analyzers.jsontext` (the same text, without json's generator per
        container)."""
        d = self.to_dict()
        return json.dumps(d) if indent is None else dumps_indented(d, indent)


#: ``extra`` keys the analysis writes after the sections and the OOM section (the contract's
#: key order).
_AFTER_OOM = ("rank_attribution", "analysis_seconds")


def _with_sections(extra: dict[str, Any], entries: list[tuple[str, Any]]) -> dict[str, Any]:
    """``extra`` with the sections' keys (estimate vs actual, …) and then ``oom_forensics``
    where the analysis has always put them: after the first-cause tables and the sample count,
    before the rank attribution (or, without one, at the end)."""
    at = next((i for i, k in enumerate(extra) if k in _AFTER_OOM), len(extra))
    items = list(extra.items())
    return dict([*items[:at], *entries, *items[at:]])


_INF = float("inf")
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names in declaration order (what ``dataclasses.asdict`` walks),
    looked up once per class."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _jsonable(obj: Any) -> Any:
    """numpy scalars and tuples → plain JSON types; NaN/inf → None (JSON has neither);
    dataclasses (findings, anywhere in the tree) → dicts of their fields, as asdict makes them."""
    kind = type(obj)
    if kind is int or kind is bool or obj is None:  # most leaves: nothing to convert
        return obj
    if kind is float:
        return None if obj != obj or obj in (_INF, -_INF) else obj
    if isinstance(obj, str):  # endpoint URLs and server messages: never a credential
        return redact(obj)
    if isinstance(obj, dict):
        return {redact(str(k)): _jsonable(v) for k, v in obj.items()}  # keys too: endpoint URLs
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {redact(name): _jsonable(getattr(obj, name)) for name in _field_names(type(obj))}
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        obj = obj.item()
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return None
    return obj
