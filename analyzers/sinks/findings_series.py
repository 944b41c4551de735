"""A Report as Prometheus samples, so alert rules and dashboards can act on findings.

One function turns a :class:`~stormotel.analyzers.report.Report` into a flat list of
:class:`SeriesPoint` named from ``stormotel.schema.AN_*``; the remote-write and Pushgateway sinks
only differ in how they ship that list. Finding series are stamped with the analysed window's
end, so re-analysing the same window writes the very same samples again (a TSDB keeps one sample
per series and timestamp: nothing is added twice); run-level series (last success, duration,
run counter) are stamped with the run's own time.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from stormotel.analyzers.algorithms.estimate_ratio import EstimateVsActual
from stormotel.analyzers.locations import labels_of
from stormotel.analyzers.report import (
    CollectiveAttribution,
    GapFinding,
    Report,
    StallFinding,
    Suspect,
)

from stormotel import schema

#: Evidence keys the gap-analysis findings use for slope and time-to-full (first match wins).
SLOPE_KEYS = ("slope_bytes_per_s", "slope_bytes_per_second", "slope")
TIME_TO_FULL_KEYS = ("time_to_full_s", "time_to_full_seconds", "seconds_to_full")
#: Value of the rank label on stall series whose culprit is undecided.
NO_RANK = "none"


@dataclass(frozen=True)
class SeriesPoint:
    """One sample of one series: a name, its labels, a value, a timestamp (ms since epoch)."""

    name: str
    labels: Mapping[str, str]
    value: float
    timestamp_ms: int
    #: "gauge" or "counter", for exposition formats that care (Pushgateway).
    kind: str = "gauge"
    help: str = field(default="", compare=False)

    def label_items(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(self.labels.items()))

    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return (self.name, self.label_items())


HELP = {
    schema.AN_LAST_SUCCESS: "Unix time of the analyzer's last successful run for this job.",
    schema.AN_LAST_FAILURE: "Unix time of the analyzer's last failed run for this job.",
    schema.AN_DURATION: "Wall time of the analyzer's last run.",
    schema.AN_RUNS: "Analyzer runs by outcome.",
    schema.AN_FINDINGS: "Findings in the last analysed window by kind and severity.",
    schema.AN_FIRST_CAUSE: "1 for each rank suspected to have gone wrong first.",
    schema.AN_FIRST_CAUSE_LEAD: "How long the suspect rank rose before the cluster onset.",
    schema.AN_GAP_DRIFT_SLOPE: "Slope of a persistent gap drift.",
    schema.AN_GAP_TIME_TO_FULL: "Seconds until the device is full at the drift's slope.",
    schema.AN_COLLECTIVE_CONFIDENCE: "Highest collective-attribution confidence per rank.",
    schema.AN_STALL: "1 per stuck-collective finding and culprit rank.",
    schema.AN_ESTIMATE_RATIO: "Actual peak / pre-run estimate per rank.",
    schema.AN_MISSING_RANKS: "Ranks expected but without telemetry in the window.",
}


def _number(evidence: Mapping[str, object], keys: tuple[str, ...]) -> float | None:
    for k in keys:
        v = evidence.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


def findings_samples(report: Report, *, job_id: str | None = None,
                     timestamp_ms: int | None = None) -> list[SeriesPoint]:
    """Finding series for ``report``; timestamp defaults to the window end (idempotent)."""
    jid = job_id or report.job_id or "unknown"
    if timestamp_ms is None:
        if report.window_end_ns is None:
            raise ValueError("report has no window_end_ns; pass timestamp_ms")
        timestamp_ms = report.window_end_ns // 1_000_000
    ts = timestamp_ms
    base = {schema.ATTR_JOB_ID: jid}
    out: list[SeriesPoint] = []

    def add(name: str, value: float, **labels: str) -> None:
        where = labels_of(report, labels[schema.ATTR_RANK],
                          schema.FINDING_ATTRIBUTION_LABELS) if schema.ATTR_RANK in labels else {}
        out.append(SeriesPoint(name, {**base, **where, **labels}, float(value), ts,
                               help=HELP[name]))

    kinds: Counter[tuple[str, str]] = Counter()
    best: dict[int, float] = {}
    stall_keys: set[tuple[str, str]] = set()
    for f in report.findings():
        if f.family == "oom":  # OOMs have the tracker's own edge series
            continue
        kinds[(f.kind, f.severity)] += 1
        rec = f.record
        if isinstance(rec, Suspect):
            add(schema.AN_FIRST_CAUSE, 1.0, rank=str(rec.rank),
                **{schema.ANALYZER_LABEL_CONFIDENCE: rec.confidence})
            add(schema.AN_FIRST_CAUSE_LEAD, rec.lead_ns / 1e9, rank=str(rec.rank))
        elif isinstance(rec, GapFinding) and rec.classification == "persistent_drift":
            slope = _number(rec.evidence, SLOPE_KEYS)
            if slope is not None:
                add(schema.AN_GAP_DRIFT_SLOPE, slope, rank=str(rec.rank))
            ttf = _number(rec.evidence, TIME_TO_FULL_KEYS)
            if ttf is not None:
                add(schema.AN_GAP_TIME_TO_FULL, ttf, rank=str(rec.rank))
        elif isinstance(rec, CollectiveAttribution):
            best[rec.rank] = max(best.get(rec.rank, 0.0), float(rec.confidence))
        elif isinstance(rec, StallFinding):
            stall_keys.update((rec.kind, r) for r in [str(r) for r in rec.ranks] or [NO_RANK])
    for rank, conf in sorted(best.items()):
        add(schema.AN_COLLECTIVE_CONFIDENCE, conf, rank=str(rank))
    for stall_kind, stall_rank in sorted(stall_keys):
        add(schema.AN_STALL, 1.0, rank=stall_rank, **{schema.ANALYZER_LABEL_KIND: stall_kind})
    for (kind, severity), n in sorted(kinds.items()):
        add(schema.AN_FINDINGS, n, **{schema.ANALYZER_LABEL_KIND: kind,
                                      schema.ANALYZER_LABEL_SEVERITY: severity})
    estimate = report.section(EstimateVsActual)
    ratios = estimate.ratio_by_rank() if estimate is not None else {}
    for rank, ratio in sorted(ratios.items(), key=lambda kv: str(kv[0])):
        if math.isfinite(ratio):
            add(schema.AN_ESTIMATE_RATIO, ratio, rank=str(rank))
    add(schema.AN_MISSING_RANKS, len(report.missing_ranks))
    return out


#: Every outcome a run can have; the run counter carries all of them from the first run (at 0),
#: so a first failure is an increase from 0, not a series that appears at 1.
#: Outcome label values (AN_RUNS); schema.AN_OUTCOMES_SUCCESS lists the successful ones.
OUTCOME_OK = "ok"
OUTCOME_FINDINGS = "findings"
OUTCOME_SOURCE_FAILURE = "source_failure"
OUTCOME_SINK_FAILURE = "sink_failure"
RUN_OUTCOMES: tuple[str, ...] = (*schema.AN_OUTCOMES_SUCCESS, OUTCOME_SOURCE_FAILURE,
                                 OUTCOME_SINK_FAILURE)


def run_samples(*, job_id: str, duration_s: float, now_ms: int,
                runs_by_outcome: Mapping[str, int], success: bool) -> list[SeriesPoint]:
    """Run-level series: duration, runs counter by outcome (every outcome, 0 when it never
    happened) and the run's time as last success or, for a failed run, as last failure."""
    base = {schema.ATTR_JOB_ID: job_id}
    out = [SeriesPoint(schema.AN_DURATION, dict(base), duration_s, now_ms,
                       help=HELP[schema.AN_DURATION])]
    counts = {oc: 0 for oc in RUN_OUTCOMES} | dict(runs_by_outcome)
    for oc, n in sorted(counts.items()):
        out.append(SeriesPoint(schema.AN_RUNS, {**base, schema.ANALYZER_LABEL_OUTCOME: oc},
                               float(n), now_ms, kind="counter", help=HELP[schema.AN_RUNS]))
    stamp = schema.AN_LAST_SUCCESS if success else schema.AN_LAST_FAILURE
    out.append(SeriesPoint(stamp, dict(base), now_ms / 1000.0, now_ms, help=HELP[stamp]))
    return out


def render_text(points: list[SeriesPoint]) -> str:
    """Exposition-like lines for ``--dry-run`` output."""
    lines = []
    for p in points:
        labels = ",".join(f'{k}="{v}"' for k, v in p.label_items())
        lines.append(f"{p.name}{{{labels}}} {p.value:g} {p.timestamp_ms}")
    return "\n".join(lines)


def outcome_of(report: Report) -> str:
    """A completed run's outcome label: findings, or ok."""
    return OUTCOME_FINDINGS if report.has_findings() else OUTCOME_OK


@dataclass(frozen=True)
class RunSeries:
    """What the run-level series of one scheduled run are computed from: the job, when the
    run started (``time.monotonic()``) and its clock, and the state file's run counters before
    this run (None without a state file: a counter that restarts every run would mislead
    ``increase()``, so none is written)."""

    job_id: str
    started: float
    now_ns: int
    runs_before: Mapping[str, int] | None

    def points(self, outcome: str, success: bool) -> list[SeriesPoint]:
        """The run series for a run that ended as ``outcome``; a run whose sinks failed
        (``success`` False) counts as a sink failure, never as a success."""
        counts: dict[str, int] = {}
        if self.runs_before is not None:
            counts = dict(self.runs_before)
            counts[outcome] = counts.get(outcome, 0) + 1
        if not success and counts:
            counts[outcome] -= 1
            counts[OUTCOME_SINK_FAILURE] = counts.get(OUTCOME_SINK_FAILURE, 0) + 1
        return run_samples(job_id=self.job_id, duration_s=time.monotonic() - self.started,
                           now_ms=self.now_ns // 1_000_000, runs_by_outcome=counts,
                           success=success)
