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
from stormotel.dashboards import promql
from stormotel.dashboards.settings import Settings

from stormotel import schema

DEFAULT_RUNBOOK_URL = "https://github.com/stormotel/stormotel/blob/main/docs/runbook.md"
RULES_FILE = "stormotel-rules.yml"
GROUP_RECORDING = "stormotel.recording"
GROUP_ALERTS = "stormotel.alerts"


JOB = "{{ $labels.job_id }}"
#: Per-job alerts aggregate by these labels: the job, and where it runs.
JOB_KEY = ", ".join((*schema.PLACEMENT_LABELS, schema.ATTR_JOB_ID))
#: Per-rank problem series keep the identity and placement labels.
RANK_KEY = promql.IDENTITY
#: A rank is the same rank after a restart on another host/GPU: match on these only.
RANK_ONLY = ", ".join((*schema.PLACEMENT_LABELS, schema.ATTR_JOB_ID, schema.ATTR_RANK))
#: Ranks listed by name in an alert's description (a 2048-rank job lists the first few).
LISTED_RANKS = 16


def ranks_of(name: str, cond: str = "", *, match: str = "", over: str = "") -> str:
    """Template text naming the ranks of this alert's job that have series ``name`` (passing
    ``cond``; ``over`` reads it with ``last_over_time`` over that window), highest value first,
    at most LISTED_RANKS: one page per job that still says which ranks."""
    inner = ", ".join(p for p in (match, f"{schema.ATTR_JOB_ID}=%q") if p)
    sel = f"{name}{{{inner}}}"
    if over:
        sel = f"last_over_time({sel}[{over}])"
    query = f"printf `sort_desc({sel}{f' {cond}' if cond else ''})` $labels.{schema.ATTR_JOB_ID}"
    return (f"{{{{ range $i, $s := query ({query}) }}}}{{{{ if lt $i {LISTED_RANKS} }}}}"
            "{{ if $i }}, {{ end }}{{ $s.Labels.rank }}{{ end }}{{ end }}")


@dataclass(frozen=True)
class Alert:
    """One alerting rule. ``signal`` is a per-job quantity that exists whenever the job (or the
    analyzer) reports, so the live-Prometheus test can prove the expression's inputs are there on
    healthy data; ``expr`` is the full condition. Several rules may share one name with different
    ``severity`` (warning and critical), so Alertmanager's standard inhibition applies."""

    name: str
    severity: str
    expr: str
    signal: str
    for_: str
    summary: str
    description: str

    @property
    def runbook_anchor(self) -> str:
        """The section of docs/runbook.md: a heading named exactly like the alert."""
        return self.name.lower()


@dataclass(frozen=True)
class Recording:
    record: str
    expr: str
    #: False for per-rank *problem* series, which are empty on a healthy job.
    always: bool = True


def _max(metric: schema.Metric, offset: str = "") -> str:
    off = f" offset {offset}" if offset else ""
    return promql.by_identity("max", f"{metric.prom}{off}")


def _increase(metric: schema.Metric, window: str) -> str:
    return promql.by_identity("sum", f"increase({metric.prom}[{window}])")


def _thirds(window: str) -> tuple[str, str, str]:
    """Offsets splitting a PromQL duration into three equal parts: ``30m`` → 10m, 20m, 30m."""
    seconds = _seconds(window)
    return tuple(f"{round(seconds * k / 3)}s" for k in (1, 2, 3))  # type: ignore[return-value]


def _seconds(duration: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    return int(duration[:-1]) * units[duration[-1]]


def recording_rules(cfg: Settings) -> list[Recording]:
    """Per-rank quantities the dashboards and alerts share (order matters: later ones reuse)."""
    used, limit = _max(schema.DEVICE_USED), _max(schema.DEVICE_LIMIT)
    reserved, allocated = _max(schema.ALLOC_RESERVED), _max(schema.ALLOC_ALLOCATED)
    gap = _max(schema.GAP)
    third_1, third_2, third_3 = _thirds(cfg.drift_window)
    step_bytes = cfg.drift_min_bytes_per_second * _seconds(third_1)
    grew = [f"({gap} - {_max(schema.GAP, third_1)} > {step_bytes:.6g})",
            f"({_max(schema.GAP, third_1)} - {_max(schema.GAP, third_2)} > {step_bytes:.6g})",
            f"({_max(schema.GAP, third_2)} - {_max(schema.GAP, third_3)} > {step_bytes:.6g})"]
    samples, dropped = _increase(schema.SAMPLES, cfg.silent_window), \
        _increase(schema.SAMPLES_DROPPED, cfg.silent_window)
    ooms = schema.OOMS.prom
    new_ooms = promql.by_identity("max", f"{ooms} > 0 unless {ooms} offset {cfg.oom_window}")
    taken10, dropped10 = _increase(schema.SAMPLES, "10m"), _increase(schema.SAMPLES_DROPPED, "10m")
    return [
        Recording(schema.REC_DEVICE_USED_RATIO, promql.used_ratio()),
        Recording(schema.REC_DEVICE_HEADROOM, promql.headroom()),
        Recording(schema.REC_GAP_SLOPE, promql.gap_slope(cfg.drift_window)),
        Recording(schema.REC_TIME_TO_FULL, promql.time_to_full()),
        Recording(schema.REC_ESTIMATE_RATIO, promql.peak_over_estimate(cfg.estimate_window)),
        # What the allocator could not hand back (its cache is reusable), or device used where
        # the rank reports no allocator series (NVML-only sampler).
        Recording(schema.REC_IN_USE_RATIO,
                  f"({used} - {reserved} + {allocated}) / ({limit} > 0)"
                  f" or {schema.REC_DEVICE_USED_RATIO}"),
        Recording(schema.REC_RANK_MEMORY_PRESSURE,
                  f"{schema.REC_IN_USE_RATIO} and on ({RANK_KEY})"
                  f" ({_increase(schema.ALLOC_RETRIES, cfg.retry_window)} > 0)", always=False),
        # Drift is growth in each third of the window: a one-time step (NCCL init) is not.
        Recording(schema.REC_RANK_GAP_DRIFT,
                  f"{schema.REC_GAP_SLOPE} > {cfg.drift_min_bytes_per_second:.6g}"
                  + "".join(f" and on ({RANK_KEY}) {g}" for g in grew), always=False),
        Recording(schema.REC_RANK_GAP_FILLS,
                  f"({promql.gap_growth_over(cfg.full_horizon_seconds, cfg.drift_window)})"
                  f" > {schema.REC_DEVICE_HEADROOM}"
                  f" and on ({RANK_KEY}) {schema.REC_RANK_GAP_DRIFT}",
                  always=False),
        # A rank is alive while its tracker ticks: samples taken or dropped (a sampler error is
        # a dropped sample, not a dead rank).
        Recording(schema.REC_RANK_ACTIVE,
                  f"group by ({RANK_KEY}) ({samples} > 0 or {dropped} > 0)"),
        Recording(schema.REC_RANK_SILENT,
                  f"group by ({RANK_KEY}) (max_over_time({schema.SAMPLES.prom}[1h]))"
                  f" unless on ({RANK_ONLY}) {schema.REC_RANK_ACTIVE}", always=False),
        Recording(schema.REC_RANK_DROP_RATIO,
                  f"{dropped10} / ({dropped10} + {taken10})"),
        # OTel counters appear on their first increment: a series that is new within the window
        # and already above 0 counts too (increase() alone misses a first OOM).
        Recording(schema.REC_RANK_OOMS,
                  f"{_increase(schema.OOMS, cfg.oom_window)} > 0 or"
                  f" {new_ooms}",
                  always=False),
    ]


def _count(record: str, condition: str = "") -> str:
    return f"count by ({JOB_KEY}) ({record}{f' {condition}' if condition else ''})"


def alerts(cfg: Settings) -> list[Alert]:
    horizon_h = f"{cfg.full_horizon_seconds / 3600:g}h"
    job = schema.ATTR_JOB_ID
    lookback = cfg.analyzer_lookback
    confident = promql.matchers(**{schema.ANALYZER_LABEL_CONFIDENCE: "high|medium"})
    first_cause = promql.series(schema.AN_FIRST_CAUSE, confident)
    success = f"max by ({JOB_KEY}) (last_over_time({schema.AN_LAST_SUCCESS}[{lookback}]))"
    failure = f"max by ({JOB_KEY}) (last_over_time({schema.AN_LAST_FAILURE}[{lookback}]))"
    success_long = (f"max by ({JOB_KEY}) (last_over_time({schema.AN_LAST_SUCCESS}"
                    f"[{cfg.analyzer_stale_lookback}]))")
    running = f"group by ({job}) ({schema.REC_RANK_ACTIVE})"
    running_long_ago = (f"group by ({JOB_KEY}) ({schema.SAMPLES.prom}"
                        f" offset {cfg.analyzer_stale_seconds}s)")
    deployed = (f"count(last_over_time({schema.AN_LAST_SUCCESS}"
                f"[{cfg.analyzer_presence_window}])) > 0")
    fresh_run = f"(time() - {success} < {_seconds(lookback)})"
    ranks_count = _count(schema.REC_IN_USE_RATIO)
    pressure_desc = (
        "{{ $value }} rank(s) of job " + JOB + " use more than {pct}% of GPU memory that the"
        " allocator cannot give back, and the allocator had to flush its cache to satisfy an"
        f" allocation in the last {cfg.retry_window}: ranks "
        + ranks_of(schema.REC_RANK_MEMORY_PRESSURE, "> {ratio}") + ". {tail}")
    memory = [
        Alert("StormotelGpuMemoryPressure", sev,
              _count(schema.REC_RANK_MEMORY_PRESSURE, f"> {pct / 100:g}"), ranks_count, for_,
              f"Job {JOB}: {{{{ $value }}}} rank(s) short of GPU memory ({sev})",
              pressure_desc.replace("{pct}", f"{pct:g}").replace("{ratio}", f"{pct / 100:g}")
              .replace("{tail}", tail))
        for sev, pct, for_, tail in (
            ("warning", cfg.warning_percent, "5m",
             "Spikes now have little room."),
            ("critical", cfg.critical_percent, "2m",
             "The next allocation spike is likely to fail with an out-of-memory error."))]
    gap = [
        Alert("StormotelGapDrift", "warning", _count(schema.REC_RANK_GAP_DRIFT),
              _count(schema.REC_GAP_SLOPE), "15m",
              f"Job {JOB}: GPU memory gap growing on {{{{ $value }}}} rank(s)",
              "The gap between device memory used and the allocator's reservation has grown in"
              f" each third of the last {cfg.drift_window} on ranks "
              + ranks_of(schema.REC_RANK_GAP_DRIFT) + f" of job {JOB}: memory is accumulating"
              " outside the framework allocator (NCCL buffers, cuDNN workspaces, other"
              " libraries)."),
        Alert("StormotelGapDrift", "critical", _count(schema.REC_RANK_GAP_FILLS),
              _count(schema.REC_DEVICE_HEADROOM), "10m",
              f"Job {JOB}: gap growth fills the GPU within {horizon_h} on {{{{ $value }}}}"
              " rank(s)",
              "At its current slope the drifting gap on ranks "
              + ranks_of(schema.REC_RANK_GAP_FILLS) + f" of job {JOB} grows by more than the"
              f" device memory still free within {horizon_h} (predict_linear over"
              f" {cfg.drift_window}): the rank will run out of memory."),
    ]
    tracker = [
        Alert("StormotelRankOutOfMemory", "critical", _count(schema.REC_RANK_OOMS),
              _count(schema.REC_RANK_ACTIVE), "0m",
              f"Job {JOB}: out-of-memory error on {{{{ $value }}}} rank(s)",
              "The allocator (or capture_oom) reported an out-of-memory error in the last"
              f" {cfg.oom_window} on ranks " + ranks_of(schema.REC_RANK_OOMS) + f" of job {JOB};"
              " the tracker's OOM span event points at the flight-recorder dump."),
        # Fewer silent ranks than active ones: one dead rank of 2048 pages, rank 0 writing a
        # checkpoint after its peers exited (or a job ending) does not.
        Alert("StormotelRankStoppedReporting", "critical",
              f"{_count(schema.REC_RANK_SILENT)} < {_count(schema.REC_RANK_ACTIVE)}",
              _count(schema.REC_RANK_ACTIVE), cfg.silent_for,
              f"Job {JOB}: {{{{ $value }}}} rank(s) stopped reporting while most peers continue",
              "Ranks " + ranks_of(schema.REC_RANK_SILENT) + f" of job {JOB} took no memory"
              f" samples for more than {cfg.silent_window} while most ranks of the job still"
              " do: the processes died, hang, or their tracker or scrape target is broken."),
        Alert("StormotelTrackerDroppingSamples", "warning",
              _count(schema.REC_RANK_DROP_RATIO, f"> {cfg.drop_ratio:g}"),
              _count(schema.REC_RANK_DROP_RATIO), "10m",
              f"Job {JOB}: trackers on {{{{ $value }}}} rank(s) drop samples",
              "The memory tracker lost more than"
              f" {cfg.drop_ratio:.0%} of its samples (dropped / attempted) over 10 minutes on"
              " ranks " + ranks_of(schema.REC_RANK_DROP_RATIO, f"> {cfg.drop_ratio:g}")
              + f" of job {JOB} (see the reason label on {schema.SAMPLES_DROPPED.prom});"
              " its telemetry has holes."),
        Alert("StormotelPeakOverEstimate", "warning",
              _count(schema.REC_ESTIMATE_RATIO, f"> {cfg.estimate_margin:g}"),
              _count(schema.REC_ESTIMATE_RATIO), "5m",
              f"Job {JOB}: peak memory above the estimate on {{{{ $value }}}} rank(s)",
              f"The allocator's peak over {cfg.estimate_window} exceeds the `stormotel estimate`"
              f" prediction by more than {cfg.estimate_margin - 1:.0%} on ranks "
              + ranks_of(schema.REC_ESTIMATE_RATIO, f"> {cfg.estimate_margin:g}")
              + ": the estimate is stale or the job changed."),
    ]
    analyzer = [
        # The latest run failed (a failing run writes its failure time; a success after it
        # resolves the alert).
        Alert("StormotelAnalyzerFailing", "warning", f"{failure} > ({success} or 0 * {failure})",
              f"{success} or {failure}", "0m",
              f"stormotel analyzer runs for job {JOB} are failing",
              f"The analyzer's latest run for job {JOB} ended without a result (outcome label on"
              f" {schema.AN_RUNS} says why: source or sink failure); no success since."),
        Alert("StormotelAnalyzerStale", "warning",
              f"(time() - {success_long} > {cfg.analyzer_stale_seconds}"
              f" and on ({job}) {running})"
              f" or ({_seconds(cfg.analyzer_stale_lookback)} * ({running_long_ago}"
              f" and on ({job}) {running} unless on ({job}) {success_long})"
              f" and on () ({deployed}))", success_long, "10m",
              f"stormotel analyzer has not succeeded for job {JOB} in"
              " {{ $value | humanizeDuration }}",
              f"Job {JOB} is still running but the analyzer has not succeeded for it in"
              f" {cfg.analyzer_stale_seconds // 60} minutes or more (or never did): its CronJob"
              " is not scheduled, crashes, does not select this job, or cannot reach the TSDB."),
        Alert("StormotelFirstCauseFinding", "warning",
              f"count by ({JOB_KEY}) (last_over_time({first_cause}[{lookback}]))"
              f" and on ({job}) {fresh_run}", success, "1m",
              f"Job {JOB}: the analyzer found the rank that went wrong first",
              "The analyzer found ranks "
              + ranks_of(schema.AN_FIRST_CAUSE, match=confident, over=lookback)
              + f" of job {JOB} to be the first cause of the job's memory incident (medium or"
              " high confidence). Open"
              " the incident dashboard and the annotations tagged stormotel for the evidence."),
    ]
    return [*memory, *gap, *tracker, *analyzer]


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
