"""``promtool test rules`` cases for every alert: each fires on a planted fault and stays quiet on
a healthy control, written with schema names so a renamed metric cannot leave them behind.

Written to ``dashboards/rules/tests/stormotel-rules.test.yml`` by ``stormotel dashboards``; the
expected annotation texts below are spelled out by hand (they are the specification of what an
operator reads), not rendered by the code under test.
"""

from __future__ import annotations

from typing import Any

from dashboards.rules import DEFAULT_RUNBOOK_URL, RULES_FILE, dump_yaml, header
from stormotel import schema

GiB = 1024**3
MiB = 1024**2
LIMIT = 80 * GiB
JOB = "train-42"
HOST = "node-a"
TESTS_FILE = "stormotel-rules.test.yml"


def _labels(rank: int, job: str = JOB, world: int = 3, **extra: str) -> dict[str, str]:
    return {schema.ATTR_JOB_ID: job, schema.ATTR_RANK: str(rank),
            schema.ATTR_LOCAL_RANK: str(rank), schema.ATTR_WORLD_SIZE: str(world),
            schema.ATTR_HOST: HOST, schema.ATTR_GPU: str(rank), **extra}


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def _flat(value: float, minutes: int = 120) -> str:
    return f"{value:.0f}+0x{minutes}"


def _rank_memory(rank: int, used: str, gap: str, job: str = JOB) -> list[dict[str, str]]:
    labels = _labels(rank, job)
    return [_series(schema.DEVICE_USED.prom, labels, used),
            _series(schema.DEVICE_LIMIT.prom, labels, _flat(LIMIT)),
            _series(schema.GAP.prom, labels, gap)]


def _runbook(alert: str) -> str:
    return f"{DEFAULT_RUNBOOK_URL}#{alert.lower()}"


def _where(rank: int) -> str:
    return f"rank {rank} of job {JOB} (host {HOST}, GPU {rank})"


def _fired(alert: str, severity: str, labels: dict[str, str], summary: str,
           description: str) -> dict[str, Any]:
    return {"exp_labels": {"severity": severity, **labels},
            "exp_annotations": {"summary": summary, "description": description,
                                "runbook_url": _runbook(alert)}}


def _memory_percent() -> dict[str, Any]:
    """Rank 0 at 50 % (control), rank 1 at 85 % (warning), rank 2 at 97 % (both)."""
    series = [*_rank_memory(0, _flat(0.50 * LIMIT), _flat(GiB)),
              *_rank_memory(1, _flat(0.85 * LIMIT), _flat(GiB)),
              *_rank_memory(2, _flat(0.97 * LIMIT), _flat(GiB))]
    warn_desc = "Device memory on {} has been above 80% for 5 minutes."
    crit_desc = ("Device memory on {} has been above 95% for 2 minutes; the next allocation spike"
                 " is likely to fail with an out-of-memory error.")
    return {"name": "memory warning and critical percent, sustained", "interval": "1m",
            "input_series": series, "alert_rule_test": [
                # Not yet sustained for `for:`: nothing fires.
                {"eval_time": "4m", "alertname": "StormotelMemoryWarning", "exp_alerts": []},
                {"eval_time": "1m", "alertname": "StormotelMemoryCritical", "exp_alerts": []},
                {"eval_time": "10m", "alertname": "StormotelMemoryWarning", "exp_alerts": [
                    _fired("StormotelMemoryWarning", "warning", _labels(1),
                           f"Job {JOB} rank 1: GPU memory 85.0% used", warn_desc.format(_where(1))),
                    _fired("StormotelMemoryWarning", "warning", _labels(2),
                           f"Job {JOB} rank 2: GPU memory 97.0% used", warn_desc.format(_where(2))),
                ]},
                {"eval_time": "10m", "alertname": "StormotelMemoryCritical", "exp_alerts": [
                    _fired("StormotelMemoryCritical", "critical", _labels(2),
                           f"Job {JOB} rank 2: GPU memory 97.0% used", crit_desc.format(_where(2))),
                ]},
            ]}


def _gap_drift() -> dict[str, Any]:
    """Rank 1's gap grows 2 MiB/min with plenty of room (drift, not full); rank 2 grows as fast
    with 200 MiB left (fills the device); rank 0 is flat (control for both)."""
    grow = 2 * MiB
    series = [*_rank_memory(0, _flat(40 * GiB), _flat(GiB)),
              *_rank_memory(1, f"{40 * GiB}+{grow}x120", f"{GiB}+{grow}x120"),
              *_rank_memory(2, f"{LIMIT - 200 * MiB}+{grow}x60", f"{GiB}+{grow}x60")]
    drift_desc = ("The gap between device memory used and the allocator's reservation on {} has"
                  " grown steadily over the last 30m: memory is accumulating outside the"
                  " framework allocator (NCCL buffers, cuDNN workspaces, other libraries).")
    full_desc = ("At its current slope the gap on {} grows by 240MiB in the next 2h"
                 " (predict_linear over 30m), more than the device memory still free: the rank"
                 " will run out of memory.")
    drift_summary = "Job {} rank {}: GPU memory gap growing 34.13kiB/s"
    return {"name": "gap drift slope and predicted time to full", "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                {"eval_time": "10m", "alertname": "StormotelGapDrift", "exp_alerts": []},
                {"eval_time": "40m", "alertname": "StormotelGapDrift", "exp_alerts": [
                    _fired("StormotelGapDrift", "warning", _labels(1),
                           drift_summary.format(JOB, 1), drift_desc.format(_where(1))),
                    _fired("StormotelGapDrift", "warning", _labels(2),
                           drift_summary.format(JOB, 2), drift_desc.format(_where(2))),
                ]},
                {"eval_time": "40m", "alertname": "StormotelGapFillsDevice", "exp_alerts": [
                    _fired("StormotelGapFillsDevice", "critical", _labels(2),
                           f"Job {JOB} rank 2: gap growth fills the GPU within 2h",
                           full_desc.format(_where(2))),
                ]},
            ],
            "promql_expr_test": [
                {"expr": f'{schema.REC_TIME_TO_FULL}{{rank="1"}}', "eval_time": "40m",
                 "exp_samples": [{"labels": _series_labels(schema.REC_TIME_TO_FULL, 1),
                                  "value": (LIMIT - 40 * GiB - 40 * grow) / (grow / 60)}]},
            ]}


def _series_labels(name: str, rank: int) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in _labels(rank).items())
    return f"{name}{{{inner}}}"


def _stopped_reporting() -> dict[str, Any]:
    """Rank 1 of the job vanishes at 20m, rank 2 is stuck, rank 0 keeps sampling; a finished
    job whose ranks all stopped is the control (peers gone too, so no alert)."""
    s = schema.SAMPLES.prom
    series = [_series(s, _labels(0), "0+600x60"), _series(s, _labels(1), "0+600x20"),
              _series(s, _labels(2), "5000+0x60"),
              _series(s, _labels(0, job="done-job", world=2), "0+600x20"),
              _series(s, _labels(1, job="done-job", world=2), "0+600x20")]
    only = {schema.ATTR_JOB_ID: JOB, schema.ATTR_HOST: HOST}
    desc = ("Rank {r} of job {j} (host {h}) took no memory samples in the last 5m although other"
            " ranks of the job did: the process died, hangs, or its tracker or scrape target is"
            " broken.")
    return {"name": "rank stopped reporting while its peers continue", "interval": "1m",
            "input_series": series, "alert_rule_test": [
                {"eval_time": "15m", "alertname": "StormotelRankStoppedReporting",
                 "exp_alerts": [_fired(
                     "StormotelRankStoppedReporting", "critical",
                     {**only, schema.ATTR_RANK: "2"},
                     f"Job {JOB} rank 2 stopped reporting while its peers continue",
                     desc.format(r=2, j=JOB, h=HOST))]},
                {"eval_time": "35m", "alertname": "StormotelRankStoppedReporting",
                 "exp_alerts": [_fired(
                     "StormotelRankStoppedReporting", "critical",
                     {**only, schema.ATTR_RANK: str(r)},
                     f"Job {JOB} rank {r} stopped reporting while its peers continue",
                     desc.format(r=r, j=JOB, h=HOST)) for r in (1, 2)]},
            ]}


def _dropping_samples() -> dict[str, Any]:
    """Rank 1 drops 10 % of its samples; rank 0 counts none, rank 2 never exported the drop
    counter at all (both controls)."""
    s, d = schema.SAMPLES.prom, schema.SAMPLES_DROPPED.prom
    series = [_series(s, _labels(0), "0+600x60"), _series(d, _labels(0), "0+0x60"),
              _series(s, _labels(1), "0+540x60"), _series(d, _labels(1), "0+60x60"),
              _series(s, _labels(2), "0+600x60")]
    desc = ("The memory tracker on {} lost more than 1% of its samples over 10 minutes (see the"
            f" reason label on {d}); its telemetry has holes.")
    return {"name": "tracker dropping samples", "interval": "1m", "input_series": series,
            "alert_rule_test": [
                {"eval_time": "30m", "alertname": "StormotelTrackerDroppingSamples",
                 "exp_alerts": [_fired(
                     "StormotelTrackerDroppingSamples", "warning", _labels(1),
                     f"Job {JOB} rank 1: tracker drops 11.11% of its samples",
                     desc.format(_where(1)))]},
            ]}


def _analyzer_health() -> dict[str, Any]:
    """train-42: failing runs and a last success 3 h old while it still samples (both fire);
    ok-job: healthy runs, fresh success; old-job: stale success but finished (no alert)."""
    runs, last = schema.AN_RUNS, schema.AN_LAST_SUCCESS
    out = schema.ANALYZER_LABEL_OUTCOME
    s = schema.SAMPLES.prom
    job = schema.ATTR_JOB_ID
    series = [
        _series(runs, {job: JOB, out: "source_failure"}, "0x10 1+0x200"),
        _series(runs, {job: JOB, out: schema.AN_OUTCOMES_SUCCESS[0]}, "0+0x200"),
        _series(runs, {job: "ok-job", out: schema.AN_OUTCOMES_SUCCESS[0]}, "0+1x200"),
        _series(runs, {job: "ok-job", out: schema.AN_OUTCOMES_SUCCESS[1]}, "0+1x200"),
        _series(last, {job: JOB}, "0+0x200"),
        _series(last, {job: "ok-job"}, "0+60x200"),
        _series(last, {job: "old-job"}, "0+0x200"),
        _series(s, _labels(0), "0+600x200"),
        _series(s, _labels(0, job="ok-job"), "0+600x200"),
    ]
    return {"name": "analyzer failing and stale", "interval": "1m", "input_series": series,
            "alert_rule_test": [
                {"eval_time": "5m", "alertname": "StormotelAnalyzerFailing", "exp_alerts": []},
                {"eval_time": "30m", "alertname": "StormotelAnalyzerFailing", "exp_alerts": [
                    {"exp_labels": {"severity": "warning", job: JOB},
                     "exp_annotations": {
                         "summary": f"stormotel analyzer runs for job {JOB} are failing",
                         "description": f"The analyzer job for {JOB} ended without a result at"
                                        " least once in the last hour (the outcome label on"
                                        f" {runs} says why: source or sink failure).",
                         "runbook_url": _runbook("StormotelAnalyzerFailing")}}]},
                {"eval_time": "1h", "alertname": "StormotelAnalyzerStale", "exp_alerts": []},
                {"eval_time": "3h", "alertname": "StormotelAnalyzerStale", "exp_alerts": [
                    {"exp_labels": {"severity": "warning", job: JOB},
                     "exp_annotations": {
                         "summary": f"stormotel analyzer has not succeeded for job {JOB} in"
                                    " 3h 0m 0s",
                         "description": f"Job {JOB} is still running but the analyzer's last"
                                        " successful run is older than 120 minutes: its CronJob"
                                        " is not scheduled, crashes, or cannot reach the TSDB.",
                         "runbook_url": _runbook("StormotelAnalyzerStale")}}]},
            ]}


def _first_cause() -> dict[str, Any]:
    """A high-confidence suspect fires; a low-confidence one does not."""
    name, conf = schema.AN_FIRST_CAUSE, schema.ANALYZER_LABEL_CONFIDENCE
    job, rank = schema.ATTR_JOB_ID, schema.ATTR_RANK
    series = [_series(name, {job: JOB, rank: "3", conf: "high"}, "1x30"),
              _series(name, {job: JOB, rank: "1", conf: "low"}, "1x30")]
    return {"name": "analyzer first-cause finding", "interval": "1m", "input_series": series,
            "alert_rule_test": [
                {"eval_time": "10m", "alertname": "StormotelFirstCauseFinding", "exp_alerts": [
                    {"exp_labels": {"severity": "warning", job: JOB, rank: "3", conf: "high"},
                     "exp_annotations": {
                         "summary": f"Job {JOB}: rank 3 went wrong first",
                         "description": f"The analyzer found rank 3 of job {JOB} to be the first"
                                        " cause of the job's memory incident (confidence high)."
                                        " Open the incident dashboard and the annotations tagged"
                                        " stormotel for the evidence.",
                         "runbook_url": _runbook("StormotelFirstCauseFinding")}}]},
            ]}


def _peak_over_estimate() -> dict[str, Any]:
    """Rank 1 peaks at 120 % of its estimate (fires); rank 0 at 105 % (within the margin)."""
    est, peak = schema.ESTIMATE.prom, schema.ALLOC_ALLOCATED_PEAK.prom
    series = [_series(est, _labels(0), _flat(10 * GiB)),
              _series(peak, _labels(0), _flat(10.5 * GiB)),
              _series(est, _labels(1), _flat(10 * GiB)),
              _series(peak, _labels(1), _flat(12 * GiB))]
    return {"name": "actual peak above estimate times margin", "interval": "1m",
            "input_series": series, "alert_rule_test": [
                {"eval_time": "20m", "alertname": "StormotelPeakOverEstimate", "exp_alerts": [
                    _fired("StormotelPeakOverEstimate", "warning", _labels(1),
                           f"Job {JOB} rank 1: peak memory 120% of the estimate",
                           f"The allocator's peak on {_where(1)} over 1h exceeds the"
                           " `stormotel estimate` prediction by more than 10%: the estimate is"
                           " stale or the job changed.")]},
            ]}


ALERT_NAMES_IN_HEALTHY = (
    "StormotelGapDrift", "StormotelGapFillsDevice", "StormotelMemoryWarning",
    "StormotelMemoryCritical", "StormotelRankStoppedReporting", "StormotelTrackerDroppingSamples",
    "StormotelAnalyzerFailing", "StormotelAnalyzerStale", "StormotelFirstCauseFinding",
    "StormotelPeakOverEstimate")


def _healthy_job() -> dict[str, Any]:
    """A healthy 3-rank job with every series present: no alert fires at any checked time."""
    series: list[dict[str, str]] = []
    job = schema.ATTR_JOB_ID
    for rank in range(3):
        labels = _labels(rank)
        series += _rank_memory(rank, _flat(50 * GiB), _flat(GiB))
        series += [_series(schema.SAMPLES.prom, labels, "0+600x240"),
                   _series(schema.SAMPLES_DROPPED.prom, labels, "0+0x240"),
                   _series(schema.ESTIMATE.prom, labels, _flat(40 * GiB, 240)),
                   _series(schema.ALLOC_ALLOCATED_PEAK.prom, labels, _flat(39 * GiB, 240))]
    series += [_series(schema.AN_LAST_SUCCESS, {job: JOB}, "0+60x240"),
               _series(schema.AN_RUNS, {job: JOB, schema.ANALYZER_LABEL_OUTCOME:
                                        schema.AN_OUTCOMES_SUCCESS[0]}, "0+1x240"),
               _series(schema.AN_FIRST_CAUSE, {job: JOB, schema.ATTR_RANK: "0",
                                               schema.ANALYZER_LABEL_CONFIDENCE: "low"}, "1x240")]
    checks = [{"eval_time": t, "alertname": name, "exp_alerts": []}
              for t in ("30m", "3h") for name in ALERT_NAMES_IN_HEALTHY]
    return {"name": "healthy control: nothing fires", "interval": "1m", "input_series": series,
            "alert_rule_test": checks}


def rule_tests() -> dict[str, Any]:
    return {"rule_files": [f"../{RULES_FILE}"], "evaluation_interval": "30s",
            "tests": [_healthy_job(), _memory_percent(), _gap_drift(), _stopped_reporting(),
                      _dropping_samples(), _analyzer_health(), _first_cause(),
                      _peak_over_estimate()]}


def rule_tests_yaml() -> str:
    return header("dashboards/rule_tests.py") + dump_yaml(rule_tests())
