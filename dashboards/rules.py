"""Prometheus recording and alerting rules, generated from :mod:`stormotel.schema` names.

Each alert is a *signal* (a quantity that exists whenever the job reports, e.g. the used
percentage) and a *condition* appended to it (``> 95``): the split lets the live-Prometheus test
prove every signal returns series on healthy data, while ``promtool test rules`` proves the full
expressions fire on faults and stay quiet on a healthy control.

Severity: ``critical`` pages (the job is about to die or has lost a rank), ``warning`` tickets.
Every alert names the job and rank and links its section of ``docs/runbook.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from dashboards import promql
from dashboards.settings import Settings
from stormotel import schema

DEFAULT_RUNBOOK_URL = "https://github.com/stormotel/stormotel/blob/main/docs/runbook.md"
RULES_FILE = "stormotel-rules.yml"
GROUP_RECORDING = "stormotel.recording"
GROUP_ALERTS = "stormotel.alerts"


JOB = "{{ $labels.job_id }}"
RANK = "{{ $labels.rank }}"
WHERE = "rank {{ $labels.rank }} of job {{ $labels.job_id }} (host {{ $labels.host }}, GPU {{ $labels.gpu }})"  # noqa: E501


@dataclass(frozen=True)
class Alert:
    """One alerting rule: ``signal`` + ``condition`` is the expression."""

    name: str
    signal: str
    condition: str
    for_: str
    severity: str
    summary: str
    description: str

    @property
    def expr(self) -> str:
        return f"{self.signal} {self.condition}"

    @property
    def runbook_anchor(self) -> str:
        """The section of docs/runbook.md: a heading named exactly like the alert."""
        return self.name.lower()


@dataclass(frozen=True)
class Recording:
    record: str
    expr: str


def recording_rules(cfg: Settings) -> list[Recording]:
    """Per-rank quantities the dashboards and alerts share (order matters: later ones reuse)."""
    return [
        Recording(schema.REC_DEVICE_USED_RATIO, promql.used_ratio()),
        Recording(schema.REC_DEVICE_HEADROOM, promql.headroom()),
        Recording(schema.REC_GAP_SLOPE, promql.gap_slope(cfg.drift_window)),
        Recording(schema.REC_TIME_TO_FULL, promql.time_to_full()),
        Recording(schema.REC_ESTIMATE_RATIO, promql.peak_over_estimate(cfg.estimate_window)),
    ]


def _sampling(window: str) -> str:
    """Ranks whose sample counter advanced within ``window``."""
    return f"({promql.series(schema.SAMPLES.prom)}[{window}])"


def alerts(cfg: Settings) -> list[Alert]:
    samples = schema.SAMPLES.prom
    job_rank_host = f"{schema.ATTR_JOB_ID}, {schema.ATTR_RANK}, {schema.ATTR_HOST}"
    sampling_now = f"rate({samples}[{cfg.silent_window}]) > 0"
    horizon_h = f"{cfg.full_horizon_seconds / 3600:g}h"
    confident = promql.matchers(**{schema.ANALYZER_LABEL_CONFIDENCE: "high|medium"})
    first_cause = promql.series(schema.AN_FIRST_CAUSE, confident)
    return [
        Alert(
            "StormotelGapDrift", schema.REC_GAP_SLOPE,
            f"> {cfg.drift_min_bytes_per_second:.6g}", "15m", "warning",
            f"Job {JOB} rank {RANK}: GPU memory gap growing {{{{ $value | humanize1024 }}}}B/s",
            f"The gap between device memory used and the allocator's reservation on {WHERE}"
            f" has grown steadily over the last {cfg.drift_window}: memory is accumulating"
            " outside the framework allocator (NCCL buffers, cuDNN workspaces, other libraries)."),
        Alert(
            "StormotelGapFillsDevice",
            promql.gap_growth_over(cfg.full_horizon_seconds, cfg.drift_window),
            f"> {schema.REC_DEVICE_HEADROOM}", "10m", "critical",
            f"Job {JOB} rank {RANK}: gap growth fills the GPU within {horizon_h}",
            f"At its current slope the gap on {WHERE} grows by {{{{ $value | humanize1024 }}}}B"
            f" in the next {horizon_h} (predict_linear over {cfg.drift_window}), more than the"
            " device memory still free: the rank will run out of memory."),
        Alert(
            "StormotelMemoryWarning", f"100 * {schema.REC_DEVICE_USED_RATIO}",
            f"> {cfg.warning_percent:g}", "5m", "warning",
            f"Job {JOB} rank {RANK}: GPU memory {{{{ $value | printf \"%.1f\" }}}}% used",
            f"Device memory on {WHERE} has been above {cfg.warning_percent:g}% for 5 minutes."),
        Alert(
            "StormotelMemoryCritical", f"100 * {schema.REC_DEVICE_USED_RATIO}",
            f"> {cfg.critical_percent:g}", "2m", "critical",
            f"Job {JOB} rank {RANK}: GPU memory {{{{ $value | printf \"%.1f\" }}}}% used",
            f"Device memory on {WHERE} has been above {cfg.critical_percent:g}% for 2 minutes;"
            " the next allocation spike is likely to fail with an out-of-memory error."),
        Alert(
            "StormotelRankStoppedReporting",
            f"group by ({job_rank_host}) (max_over_time{_sampling('1h')})",
            f"unless on ({promql.JOB_RANK}) ({sampling_now})"
            f" and on ({schema.ATTR_JOB_ID}) ({sampling_now})", "2m", "critical",
            f"Job {JOB} rank {RANK} stopped reporting while its peers continue",
            f"Rank {RANK} of job {JOB} (host {{{{ $labels.host }}}}) took no memory samples in"
            f" the last {cfg.silent_window} although other ranks of the job did: the process"
            " died, hangs, or its tracker or scrape target is broken."),
        Alert(
            "StormotelTrackerDroppingSamples",
            f"{promql.or_zero(promql.rate_by(schema.SAMPLES_DROPPED, '10m'), '10m')}"
            f" / {promql.rate_by(schema.SAMPLES, '10m')}",
            f"> {cfg.drop_ratio:g}", "10m", "warning",
            f"Job {JOB} rank {RANK}: tracker drops {{{{ $value | humanizePercentage }}}}"
            " of its samples",
            f"The memory tracker on {WHERE} lost more than {cfg.drop_ratio:.0%} of its samples"
            " over 10 minutes (see the reason label on"
            f" {schema.SAMPLES_DROPPED.prom}); its telemetry has holes."),
        Alert(
            "StormotelAnalyzerFailing",
            f"sum by ({schema.ATTR_JOB_ID}) (increase("
            f"{promql.series(schema.AN_RUNS, promql.analyzer_failed_outcomes())}[1h]))",
            "> 0", "5m", "warning",
            f"stormotel analyzer runs for job {JOB} are failing",
            f"The analyzer job for {JOB} ended without a result at least once in the last hour"
            f" (the outcome label on {schema.AN_RUNS} says why: source or sink failure)."),
        Alert(
            "StormotelAnalyzerStale",
            f"time() - max by ({schema.ATTR_JOB_ID}) ({schema.AN_LAST_SUCCESS})",
            f"> {cfg.analyzer_stale_seconds} and on ({schema.ATTR_JOB_ID})"
            f" group by ({schema.ATTR_JOB_ID}) ({sampling_now})", "10m", "warning",
            f"stormotel analyzer has not succeeded for job {JOB} in"
            " {{ $value | humanizeDuration }}",
            f"Job {JOB} is still running but the analyzer's last successful run is older than"
            f" {cfg.analyzer_stale_seconds // 60} minutes: its CronJob is not scheduled, crashes,"
            " or cannot reach the TSDB."),
        Alert(
            "StormotelFirstCauseFinding",
            f"max by ({schema.ATTR_JOB_ID}, {schema.ATTR_RANK},"
            f" {schema.ANALYZER_LABEL_CONFIDENCE}) ({first_cause})",
            "> 0", "1m", "warning",
            f"Job {JOB}: rank {RANK} went wrong first",
            f"The analyzer found rank {RANK} of job {JOB} to be the first cause of the job's"
            " memory incident (confidence {{ $labels.confidence }}). Open the incident dashboard"
            " and the annotations tagged stormotel for the evidence."),
        Alert(
            "StormotelPeakOverEstimate", schema.REC_ESTIMATE_RATIO,
            f"> {cfg.estimate_margin:g}", "5m", "warning",
            f"Job {JOB} rank {RANK}: peak memory {{{{ $value | humanizePercentage }}}}"
            " of the estimate",
            f"The allocator's peak on {WHERE} over {cfg.estimate_window} exceeds the"
            f" `stormotel estimate` prediction by more than {cfg.estimate_margin - 1:.0%}: the"
            " estimate is stale or the job changed."),
    ]


def _alert_rule(alert: Alert, runbook_url: str) -> dict[str, Any]:
    return {
        "alert": alert.name, "expr": alert.expr, "for": alert.for_,
        "labels": {"severity": alert.severity},
        "annotations": {"summary": alert.summary, "description": alert.description,
                        "runbook_url": f"{runbook_url}#{alert.runbook_anchor}"},
    }


def rule_groups(cfg: Settings | None = None,
                runbook_url: str = DEFAULT_RUNBOOK_URL) -> dict[str, Any]:
    """The rules file as a dict (``{"groups": [...]}``), the shape Prometheus and the
    PrometheusRule CRD's ``spec`` both take. Groups set no ``interval``: they follow the
    Prometheus' own ``evaluation_interval``."""
    cfg = cfg or Settings()
    return {"groups": [
        {"name": GROUP_RECORDING,
         "rules": [{"record": r.record, "expr": r.expr} for r in recording_rules(cfg)]},
        {"name": GROUP_ALERTS,
         "rules": [_alert_rule(a, runbook_url) for a in alerts(cfg)]},
    ]}


def header(source: str) -> str:
    """The do-not-edit banner of a generated YAML file written from ``source``."""
    return (f"# Generated by `stormotel dashboards` from {source} and stormotel/schema.py.\n"
            "# Do not edit by hand: change the code and rebuild (make dashboards).\n")


def dump_yaml(data: dict[str, Any]) -> str:
    """Deterministic YAML (no key sorting, no line folding) for committed files."""
    return yaml.safe_dump(data, sort_keys=False, width=10_000, allow_unicode=True)


def rules_yaml(cfg: Settings | None = None, runbook_url: str = DEFAULT_RUNBOOK_URL) -> str:
    return header("dashboards/rules.py") + dump_yaml(rule_groups(cfg, runbook_url))
