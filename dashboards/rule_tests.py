"""``promtool test rules`` cases for every alert, in both directions and adversarially: each
alert fires on its fault and stays quiet on what a healthy job really does (a one-time gap step
at NCCL init, rank 0 writing a checkpoint after its peers exit, ranks leaving one after another,
an allocator using 96 % of its reservation, a restarted rank, a counter reset, a device limit of
0, NaN readings, sampler errors) and on analyzer series as they really arrive (one sample per
run, by remote write; or frozen in a Pushgateway after the job ended).

Written to ``dashboards/rules/tests/stormotel-rules.test.yml`` by ``stormotel dashboards``; the
expected annotation texts below are spelled out by hand (they are the specification of what an
operator reads), not rendered by the code under test. Series names come from the schema so a
renamed metric cannot leave them behind.
"""

from __future__ import annotations

from typing import Any

from stormotel.dashboards.rules import DEFAULT_RUNBOOK_URL, RULES_FILE, dump_yaml, header
from stormotel.dashboards.settings import Settings

from stormotel import schema

GiB = 1024**3
MiB = 1024**2
LIMIT = 80 * GiB
JOB = "train-42"
NAMESPACE = "ml"
HOST = "node-a"
TESTS_FILE = "stormotel-rules.test.yml"
#: Minutes of input per test (1-minute samples).
SPAN = 180


def _labels(rank: int, job: str = JOB, world: int = 4, host: str = HOST) -> dict[str, str]:
    return {schema.ATTR_JOB_ID: job, schema.ATTR_RANK: str(rank),
            schema.ATTR_LOCAL_RANK: str(rank % 8), schema.ATTR_WORLD_SIZE: str(world),
            schema.ATTR_HOST: host, schema.ATTR_GPU: str(rank % 8),
            schema.LABEL_NAMESPACE: NAMESPACE}


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def _flat(value: float, minutes: int = SPAN) -> str:
    return f"{value:.0f}+0x{minutes}"


def _counter(per_minute: int, minutes: int = SPAN, start: int = 0) -> str:
    return f"{start}+{per_minute}x{minutes}"


def _until(per_minute: int, stop: int) -> str:
    """A counter that advances until minute ``stop`` and then has no more samples (the
    process exited; its scrape target is gone)."""
    return f"0+{per_minute}x{stop}"


def _runs(values: dict[int, float], minutes: int = SPAN) -> str:
    """One sample per analyzer run (remote write): ``_`` everywhere else."""
    return " ".join(f"{values[m]:.0f}" if m in values else "_" for m in range(minutes + 1))


def _job(namespace: bool = True, job: str = JOB) -> dict[str, str]:
    out = {schema.ATTR_JOB_ID: job}
    if namespace:
        out[schema.LABEL_NAMESPACE] = NAMESPACE
    return out


def _runbook(alert: str) -> str:
    return f"{DEFAULT_RUNBOOK_URL}#{alert.lower()}"


def _fired(alert: str, severity: str, labels: dict[str, str], summary: str,
           description: str) -> dict[str, Any]:
    return {"exp_labels": {"severity": severity, **labels},
            "exp_annotations": {"summary": summary, "description": description,
                                "runbook_url": _runbook(alert)}}


def _quiet(alertname: str, *times: str) -> list[dict[str, Any]]:
    return [{"eval_time": t, "alertname": alertname, "exp_alerts": []} for t in times]


# --- memory pressure ----------------------------------------------------------------------------

def _rank_allocator(rank: int, used: float, reserved: float, allocated: float, retries: str,
                    limit: str = _flat(LIMIT), job: str = JOB) -> list[dict[str, str]]:
    labels = _labels(rank, job)
    return [_series(schema.DEVICE_USED.prom, labels, _flat(used)),
            _series(schema.DEVICE_LIMIT.prom, labels, limit),
            _series(schema.ALLOC_RESERVED.prom, labels, _flat(reserved)),
            _series(schema.ALLOC_ALLOCATED.prom, labels, _flat(allocated)),
            _series(schema.ALLOC_RETRIES.prom, labels, retries)]


def _pressure_fired(severity: str, count: int, pct: str, ratio: str, ranks: str) -> dict[str, Any]:
    tail = {"warning": "Spikes now have little room.",
            "critical": "The next allocation spike is likely to fail with an out-of-memory"
                        " error."}[severity]
    del ratio
    return _fired("StormotelGpuMemoryPressure", severity, _job(),
                  f"Job {JOB}: {count} rank(s) short of GPU memory ({severity})",
                  f"{count} rank(s) of job {JOB} use more than {pct}% of GPU memory that the"
                  " allocator cannot give back, and the allocator had to flush its cache to"
                  f" satisfy an allocation in the last 15m: ranks {ranks}. {tail}")


Reading = tuple[float, float, float]


def _pressure_levels(cfg: Settings) -> tuple[Reading, Reading]:
    """(used, reserved, allocated) fractions of the limit for rank 1 (in-use ratio between the
    warning and critical levels) and rank 2 (above critical). The defaults' readings (in use
    85 % and 98 %) are kept whenever they still bracket the configured levels, so the committed
    file does not move; other levels get readings placed between them (custom thresholds from
    ``stormotel dashboards --warning-percent/--critical-percent`` must still pass)."""
    def place(ratio: float, default: Reading) -> Reading:
        used0, reserved0, allocated0 = default
        if abs((used0 - reserved0 + allocated0) - ratio) < 1e-9:
            return default
        used = min(1.0, ratio + 0.02)  # 2 % reusable cache above what is in use
        reserved = 0.98 * used
        return used, reserved, ratio - used + reserved

    w, c = cfg.warning_percent / 100, cfg.critical_percent / 100
    r1 = 0.85 if w < 0.85 <= c else (w + c) / 2
    r2 = 0.98 if c < 0.98 else (c + 1) / 2
    return place(r1, (0.90, 0.88, 0.83)), place(r2, (0.99, 0.97, 0.96))


def _memory_pressure(cfg: Settings) -> dict[str, Any]:
    """Rank 0: device 97 % used, allocator at 96 % of its reservation, no retries (full but
    healthy: quiet). Rank 1: 85 % in use and retrying (warning). Rank 2: 98 % in use and
    retrying (warning and critical, one alert name). Rank 3: device limit 0 (unknown) while
    retrying: no +Inf, quiet. Rank 4: NaN readings while retrying: quiet. Rank 5: retries counter
    reset by a restart while full: the reset is not a retry (quiet). Rank 6: a limit of +Inf
    while retrying: ratio 0, quiet. (Ranks 1 and 2 move between the configured levels.)"""
    reserved0 = 0.95 * LIMIT
    (u1, r1, a1), (u2, r2, a2) = _pressure_levels(cfg)
    series = [
        *_rank_allocator(0, 0.97 * LIMIT, reserved0, 0.96 * reserved0, _flat(0)),
        *_rank_allocator(1, u1 * LIMIT, r1 * LIMIT, a1 * LIMIT, _counter(1)),
        *_rank_allocator(2, u2 * LIMIT, r2 * LIMIT, a2 * LIMIT, _counter(1)),
        *_rank_allocator(3, 0.99 * LIMIT, 0.97 * LIMIT, 0.96 * LIMIT, _counter(1),
                         limit=_flat(0)),
        *_rank_allocator(5, 0.99 * LIMIT, 0.97 * LIMIT, 0.96 * LIMIT, "7x30 0x150"),
        *_rank_allocator(6, 0.99 * LIMIT, 0.97 * LIMIT, 0.96 * LIMIT, _counter(1),
                         limit=f"Inf+0x{SPAN}"),
    ]
    nan = _labels(4)
    series += [_series(schema.DEVICE_USED.prom, nan, f"NaN+0x{SPAN}"),
               _series(schema.DEVICE_LIMIT.prom, nan, _flat(LIMIT)),
               _series(schema.ALLOC_RESERVED.prom, nan, f"NaN+0x{SPAN}"),
               _series(schema.ALLOC_ALLOCATED.prom, nan, f"NaN+0x{SPAN}"),
               _series(schema.ALLOC_RETRIES.prom, nan, _counter(1))]
    name = "StormotelGpuMemoryPressure"
    warn, crit = f"{cfg.warning_percent:g}", f"{cfg.critical_percent:g}"

    def fired() -> list[dict[str, Any]]:  # fresh dicts: the YAML has no anchors
        out = [_pressure_fired("warning", 2, warn, "", "2, 1")]
        if cfg.critical_percent < 100:  # nothing is ever more than 100 % in use
            out.append(_pressure_fired("critical", 1, crit, "", "2"))
        return out

    return {"name": "memory pressure: one name, two severities; full-but-healthy allocator,"
                    " limit 0, NaN and a counter reset stay quiet",
            "interval": "1m", "input_series": series, "alert_rule_test": [
                *_quiet(name, "1m"),
                {"eval_time": "30m", "alertname": name, "exp_alerts": fired()},
                {"eval_time": "2h", "alertname": name, "exp_alerts": fired()},
            ]}


# --- gap drift --------------------------------------------------------------------------------

def _gap_rank(rank: int, used: str, gap: str) -> list[dict[str, str]]:
    labels = _labels(rank)
    return [_series(schema.DEVICE_USED.prom, labels, used),
            _series(schema.DEVICE_LIMIT.prom, labels, _flat(LIMIT)),
            _series(schema.GAP.prom, labels, gap)]


def _gap_drift() -> dict[str, Any]:
    """Rank 0: a one-time +1 GiB step at minute 5 (NCCL init), flat after (quiet at every
    time). Rank 1: grows 2 MiB/min with plenty of room (warning). Rank 2: grows 3 MiB/min
    with 400 MiB left (critical, same alert name; its series end at minute 100). Rank 3:
    drifts, then restarts at minute 20 and its gap is flat (quiet). Rank 4: NaN gap readings
    (quiet)."""
    grow, fast = 2 * MiB, 3 * MiB
    step = f"{GiB}+0x4 {2 * GiB}+0x{SPAN - 5}"
    series = [*_gap_rank(0, f"{40 * GiB}+0x4 {41 * GiB}+0x{SPAN - 5}", step),
              *_gap_rank(1, f"{40 * GiB}+{grow}x{SPAN}", f"{GiB}+{grow}x{SPAN}"),
              *_gap_rank(2, f"{LIMIT - 400 * MiB}+{fast}x100", f"{GiB}+{fast}x100"),
              *_gap_rank(3, f"{40 * GiB}+{grow}x19 {40 * GiB}+0x{SPAN - 20}",
                         f"{GiB}+{grow}x19 {GiB}+0x{SPAN - 20}"),
              *_gap_rank(4, _flat(40 * GiB), f"NaN+0x{SPAN}")]
    name = "StormotelGapDrift"
    drift_desc = ("The gap between device memory used and the allocator's reservation has grown"
                  " in each third of the last 30m on ranks {ranks} of job " + JOB + ": memory"
                  " is accumulating outside the framework allocator (NCCL buffers, cuDNN"
                  " workspaces, other libraries).")
    full_desc = ("At its current slope the drifting gap on ranks {ranks} of job " + JOB
                 + " grows by more than the device memory still free within 2h (predict_linear"
                 " over 30m): the rank will run out of memory.")
    warning = _fired(name, "warning", _job(), f"Job {JOB}: GPU memory gap growing on 2 rank(s)",
                     drift_desc.format(ranks="2, 1"))
    critical = _fired(name, "critical", _job(),
                      f"Job {JOB}: gap growth fills the GPU within 2h on 1 rank(s)",
                      full_desc.format(ranks="2"))
    return {"name": "gap drift: sustained growth pages, a one-time step and a restart do not",
            "interval": "1m", "input_series": series,
            "alert_rule_test": [
                *_quiet(name, "5m", "10m", "20m", "30m"),
                {"eval_time": "60m", "alertname": name, "exp_alerts": [warning, critical]},
                {"eval_time": "150m", "alertname": name, "exp_alerts": [
                    _fired(name, "warning", _job(),
                           f"Job {JOB}: GPU memory gap growing on 1 rank(s)",
                           drift_desc.format(ranks="1"))]},
            ]}


# --- OOM --------------------------------------------------------------------------------------

def _oom() -> dict[str, Any]:
    """Rank 2's OOM counter first appears at 1 (OTel counters appear on their first increment):
    it must fire. Rank 0 counts none; rank 1 carries 3 old OOMs from before the window; rank 3
    restarts (counter reset 2 → 0) and then OOMs once more."""
    o = schema.OOMS.prom
    series = [_series(o, _labels(0), _flat(0)), _series(o, _labels(1), _flat(3)),
              _series(o, _labels(2), f"_x20 1+0x{SPAN - 20}"),
              _series(o, _labels(3), f"2+0x60 0+0x9 1+0x{SPAN - 70}")]
    name = "StormotelRankOutOfMemory"
    desc = ("The allocator (or capture_oom) reported an out-of-memory error in the last 10m on"
            " ranks {ranks} of job " + JOB + "; the tracker's OOM span event points at the"
            " flight-recorder dump.")

    def fired(ranks: str) -> dict[str, Any]:
        return _fired(name, "critical", _job(), f"Job {JOB}: out-of-memory error on 1 rank(s)",
                      desc.format(ranks=ranks))

    return {"name": "OOM on one rank: first appearance, old counts, counter reset",
            "interval": "1m", "input_series": series, "alert_rule_test": [
                *_quiet(name, "15m", "45m", "65m", "2h"),
                {"eval_time": "21m", "alertname": name, "exp_alerts": [fired("2")]},
                {"eval_time": "29m", "alertname": name, "exp_alerts": [fired("2")]},
                {"eval_time": "72m", "alertname": name, "exp_alerts": [fired("3")]},
            ]}


# --- stopped reporting --------------------------------------------------------------------------

def _stopped_reporting() -> dict[str, Any]:
    """dead: rank 3 of 4 stops at minute 20 while its peers sample (fires, one page naming
    rank 3). tail: ranks 1-3 exit at 20, rank 0 writes a checkpoint until 50 (quiet). staggered:
    ranks exit at 20, 22, 24, 26 (quiet). errors: rank 1's sampler fails from minute 10 (samples
    flat, dropped samples counted): it is alive, not stopped (quiet here). restarted: rank 1
    stops on node-a at 20 and is back on node-b at 23 (quiet)."""
    s, d = schema.SAMPLES.prom, schema.SAMPLES_DROPPED.prom
    series = []
    for r in range(4):
        series.append(_series(s, _labels(r, "dead"), _until(600, 20 if r == 3 else 90)))
        series.append(_series(s, _labels(r, "tail"), _until(600, 50 if r == 0 else 20)))
        series.append(_series(s, _labels(r, "staggered"), _until(600, 20 + 2 * r)))
        if r != 1:
            series.append(_series(s, _labels(r, "errors"), _until(600, 90)))
            series.append(_series(s, _labels(r, "restarted"), _until(600, 90)))
    series.append(_series(s, _labels(1, "errors"), "0+600x10 6000+0x80"))
    series.append(_series(d, {**_labels(1, "errors"), schema.ATTR_REASON:
                              schema.REASON_SAMPLER_ERROR}, "_x10 1+10x80"))
    series.append(_series(s, _labels(1, "restarted"), _until(600, 20)))
    series.append(_series(s, _labels(1, "restarted", host="node-b"), "_x23 0+600x67"))
    name = "StormotelRankStoppedReporting"
    fired = _fired(name, "critical", _job(job="dead"),
                   "Job dead: 1 rank(s) stopped reporting while most peers continue",
                   "Ranks 3 of job dead took no memory samples for more than 5m while most"
                   " ranks of the job still do: the processes died, hang, or their tracker or"
                   " scrape target is broken.")
    return {"name": "stopped reporting: a dead rank pages once; checkpoint tail, staggered exit,"
                    " sampler errors and a restarted rank do not",
            "interval": "1m", "input_series": series, "alert_rule_test": [
                *_quiet(name, "10m", "24m", "27m", "29m", "32m", "100m"),
                {"eval_time": "40m", "alertname": name, "exp_alerts": [fired]},
                {"eval_time": "80m", "alertname": name, "exp_alerts": [fired]},
            ]}


# --- dropped samples ----------------------------------------------------------------------------

def _dropping_samples() -> dict[str, Any]:
    """Rank 1 takes 540 and drops 60 samples a minute: 10 % of what it tried (not 60/540 =
    11.1 %). Rank 0 drops 3 of 600 (0.5 %, quiet); rank 2 never exported the drop counter."""
    s, d = schema.SAMPLES.prom, schema.SAMPLES_DROPPED.prom
    reason = {schema.ATTR_REASON: schema.REASON_OVERRUN}
    series = [_series(s, _labels(0), _counter(597)), _series(d, {**_labels(0), **reason},
                                                             _counter(3)),
              _series(s, _labels(1), _counter(540)), _series(d, {**_labels(1), **reason},
                                                             _counter(60)),
              _series(s, _labels(2), _counter(600))]
    name = "StormotelTrackerDroppingSamples"
    rec = schema.REC_RANK_DROP_RATIO
    rank1 = ", ".join(f'{k}="{v}"' for k, v in _labels(1).items())
    return {"name": "dropped samples over attempted samples", "interval": "1m",
            "input_series": series, "alert_rule_test": [
                *_quiet(name, "5m"),
                {"eval_time": "30m", "alertname": name, "exp_alerts": [_fired(
                    name, "warning", _job(), f"Job {JOB}: trackers on 1 rank(s) drop samples",
                    "The memory tracker lost more than 1% of its samples (dropped / attempted)"
                    f" over 10 minutes on ranks 1 of job {JOB} (see the reason label on {d});"
                    " its telemetry has holes.")]}],
            "promql_expr_test": [
                {"expr": f'{rec}{{rank="1"}}', "eval_time": "30m",
                 "exp_samples": [{"labels": f"{rec}{{{rank1}}}", "value": 0.1}]}]}


# --- estimate -----------------------------------------------------------------------------------

def _peak_over_estimate(cfg: Settings) -> dict[str, Any]:
    """Rank 1 peaks at 120 % of its estimate (fires); rank 0 at 105 % (within the margin).
    With another ``--estimate-margin``, halfway to the margin and 10 points beyond it."""
    est, peak = schema.ESTIMATE.prom, schema.ALLOC_ALLOCATED_PEAK.prom
    margin = cfg.estimate_margin
    within, beyond = (1.05, 1.2) if margin == Settings().estimate_margin else (
        1 + (margin - 1) / 2, margin + 0.1)
    series = [_series(est, _labels(0), _flat(10 * GiB)),
              _series(peak, _labels(0), _flat(within * 10 * GiB)),
              _series(est, _labels(1), _flat(10 * GiB)),
              _series(peak, _labels(1), _flat(beyond * 10 * GiB))]
    name = "StormotelPeakOverEstimate"
    return {"name": "actual peak above estimate times margin", "interval": "1m",
            "input_series": series, "alert_rule_test": [
                *_quiet(name, "3m"),
                {"eval_time": "20m", "alertname": name, "exp_alerts": [_fired(
                    name, "warning", _job(),
                    f"Job {JOB}: peak memory above the estimate on 1 rank(s)",
                    "The allocator's peak over 1h exceeds the `stormotel estimate` prediction"
                    f" by more than {margin - 1:.0%} on ranks 1: the estimate is stale or the"
                    " job changed.")]},
            ]}


# --- analyzer series: one sample per run --------------------------------------------------------

def _every(minutes: int, until: int = SPAN, start: int = 0) -> dict[int, float]:
    """Runs every ``minutes`` (a CronJob schedule): minute → its run time (unix seconds)."""
    return {m: m * 60.0 for m in range(start, until + 1, minutes)}


def _analyzer() -> dict[str, Any]:
    """Analyzer series as remote write delivers them: one sample per 15-minute run.

    failing: runs succeed until minute 30, fail at 45 and 60 (each failing run writes its
    failure time and a runs counter that starts at 0), succeed again at 75. stale: the CronJob
    dies after its run at 30 while the job trains on. never: the job trains but the analyzer
    never succeeded for it (it runs for other jobs). done: the job ends at 30, the analyzer's
    final run at 45. healthy: runs every 15 minutes throughout."""
    last, fail = schema.AN_LAST_SUCCESS, schema.AN_LAST_FAILURE
    runs, out = schema.AN_RUNS, schema.ANALYZER_LABEL_OUTCOME
    s = schema.SAMPLES.prom
    ok_runs = {m: t for m, t in _every(15).items() if m <= 30 or m >= 75}
    series = [
        _series(last, _job(False, "failing"), _runs(ok_runs)),
        _series(fail, _job(False, "failing"), _runs({45: 2700, 60: 3600})),
        _series(runs, {**_job(False, "failing"), out: "source_failure"},
                _runs({m: (0 if m < 45 else 1 if m < 60 else 2) for m in _every(15)})),
        _series(last, _job(False, "stale"), _runs(_every(15, until=30))),
        _series(last, _job(False, "done"), _runs(_every(15, until=45))),
        _series(last, _job(False, "healthy"), _runs(_every(15))),
    ]
    for job, stop in (("failing", SPAN), ("stale", SPAN), ("never", SPAN), ("done", 30),
                      ("healthy", SPAN)):
        series.append(_series(s, _labels(0, job), _until(600, stop)))
    failing = _fired("StormotelAnalyzerFailing", "warning", _job(False, "failing"),
                     "stormotel analyzer runs for job failing are failing",
                     "The analyzer's latest run for job failing ended without a result (outcome"
                     f" label on {runs} says why: source or sink failure); no success since.")
    stale_desc = ("Job {} is still running but the analyzer has not succeeded for it in 120"
                  " minutes or more (or never did): its CronJob is not scheduled, crashes, does"
                  " not select this job, or cannot reach the TSDB.")
    stale = _fired("StormotelAnalyzerStale", "warning", _job(False, "stale"),
                   "stormotel analyzer has not succeeded for job stale in 2h 20m 0s",
                   stale_desc.format("stale"))
    never = _fired("StormotelAnalyzerStale", "warning", _job(True, "never"),
                   "stormotel analyzer has not succeeded for job never in 1d 0h 0m 0s",
                   stale_desc.format("never"))
    return {"name": "analyzer failing and stale, read from one sample per run", "interval": "1m",
            "input_series": series, "alert_rule_test": [
                *_quiet("StormotelAnalyzerFailing", "30m", "44m", "75m", "80m", "2h"),
                {"eval_time": "46m", "alertname": "StormotelAnalyzerFailing",
                 "exp_alerts": [failing]},
                {"eval_time": "70m", "alertname": "StormotelAnalyzerFailing",
                 "exp_alerts": [failing]},
                *_quiet("StormotelAnalyzerStale", "30m", "90m", "2h"),
                {"eval_time": "170m", "alertname": "StormotelAnalyzerStale",
                 "exp_alerts": [stale, never]},
            ]}


def _first_cause() -> dict[str, Any]:
    """remote: the analyzer writes rank 3 (high) each run from minute 30 (one sample per run):
    it fires and keeps firing between runs. low: a low-confidence suspect never fires. pushed: a
    Pushgateway keeps serving a finished job's last push (scraped every minute, the last success
    frozen at the final run at minute 30): it stops firing once that run is older than the
    lookback."""
    fc, conf = schema.AN_FIRST_CAUSE, schema.ANALYZER_LABEL_CONFIDENCE
    last = schema.AN_LAST_SUCCESS
    rank = schema.ATTR_RANK
    series = [
        _series(fc, {**_job(False, "remote"), rank: "3", conf: "high"},
                _runs({m: 1 for m in _every(15, start=30)})),
        _series(last, _job(False, "remote"), _runs(_every(15))),
        _series(fc, {**_job(False, "low"), rank: "1", conf: "low"}, _runs(_every(15))),
        _series(last, _job(False, "low"), _runs(_every(15))),
        _series(fc, {**_job(False, "pushed"), rank: "5", conf: "medium"}, _flat(1)),
        _series(last, _job(False, "pushed"), f"0+60x30 1800+0x{SPAN - 31}"),
    ]
    name = "StormotelFirstCauseFinding"

    def fired(job: str, ranks: str) -> dict[str, Any]:
        return _fired(name, "warning", _job(False, job),
                      f"Job {job}: the analyzer found the rank that went wrong first",
                      f"The analyzer found ranks {ranks} of job {job} to be the first cause of"
                      " the job's memory incident (medium or high confidence). Open the"
                      " incident dashboard and the annotations tagged stormotel for the"
                      " evidence.")

    return {"name": "first-cause finding between runs, and after a Pushgateway job ended",
            "interval": "1m", "input_series": series, "alert_rule_test": [
                {"eval_time": "20m", "alertname": name, "exp_alerts": [fired("pushed", "5")]},
                {"eval_time": "40m", "alertname": name,
                 "exp_alerts": [fired("pushed", "5"), fired("remote", "3")]},
                {"eval_time": "100m", "alertname": name, "exp_alerts": [fired("remote", "3")]},
                {"eval_time": "172m", "alertname": name, "exp_alerts": [fired("remote", "3")]},
            ]}


# --- a healthy job ------------------------------------------------------------------------------

ALERT_NAMES = (
    "StormotelGpuMemoryPressure", "StormotelGapDrift", "StormotelRankOutOfMemory",
    "StormotelRankStoppedReporting", "StormotelTrackerDroppingSamples",
    "StormotelPeakOverEstimate", "StormotelAnalyzerFailing", "StormotelAnalyzerStale",
    "StormotelFirstCauseFinding")
#: Kept for callers that check every alert appears in the healthy control.
ALERT_NAMES_IN_HEALTHY = ALERT_NAMES


def healthy_series(world: int, minutes: int = SPAN, tail_until: int | None = None
                   ) -> list[dict[str, str]]:
    """A healthy ``world``-rank job as it really looks: NCCL init adds 1 GiB of gap at minute
    5 on every rank, the allocator holds 96 % of a reservation that fills the device, no
    retries or OOMs, drops well under 1 %, the analyzer succeeds every 15 minutes and finds a
    low-confidence suspect; with ``tail_until``, ranks 1.. exit at ``minutes - 30`` and rank 0
    writes a checkpoint until ``tail_until``."""
    series: list[dict[str, str]] = []
    end = minutes - 30 if tail_until else minutes
    gap = f"{GiB}+0x4 {2 * GiB}+0x{end - 5}"
    for rank in range(world):
        labels = _labels(rank, world=world, host=f"node-{rank // 8}")
        stop = tail_until if (tail_until and rank == 0) else end
        reserved = 0.95 * LIMIT
        series += [
            _series(schema.DEVICE_USED.prom, labels,
                    f"{0.96 * LIMIT:.0f}+0x4 {0.97 * LIMIT:.0f}+0x{stop - 5}"),
            _series(schema.DEVICE_LIMIT.prom, labels, _flat(LIMIT, stop)),
            _series(schema.ALLOC_RESERVED.prom, labels, _flat(reserved, stop)),
            _series(schema.ALLOC_ALLOCATED.prom, labels, _flat(0.96 * reserved, stop)),
            _series(schema.GAP.prom, labels, gap if stop == end else
                    f"{GiB}+0x4 {2 * GiB}+0x{stop - 5}"),
            _series(schema.ALLOC_RETRIES.prom, labels, _flat(0, stop)),
            _series(schema.OOMS.prom, labels, _flat(0, stop)),
            _series(schema.SAMPLES.prom, labels, _counter(600, stop)),
            _series(schema.SAMPLES_DROPPED.prom, {**labels, schema.ATTR_REASON:
                                                   schema.REASON_OVERRUN}, _counter(1, stop)),
            _series(schema.ESTIMATE.prom, labels, _flat(0.95 * LIMIT, stop)),
            _series(schema.ALLOC_ALLOCATED_PEAK.prom, labels, _flat(0.96 * reserved, stop)),
        ]
    job = _job(False)
    series += [
        _series(schema.AN_LAST_SUCCESS, job, _runs(_every(15, minutes), minutes)),
        _series(schema.AN_RUNS, {**job, schema.ANALYZER_LABEL_OUTCOME: "ok"},
                _runs({m: i for i, m in enumerate(_every(15, minutes))}, minutes)),
        _series(schema.AN_FIRST_CAUSE, {**job, schema.ATTR_RANK: "0",
                                        schema.ANALYZER_LABEL_CONFIDENCE: "low"},
                _runs(_every(15, minutes), minutes)),
    ]
    return series


def _healthy_job() -> dict[str, Any]:
    """A healthy 8-rank job through start-up, steady state and a checkpoint tail (rank 0 runs
    30 minutes after its peers exit): no alert fires at any checked time."""
    checks = [c for t in ("3m", "8m", "20m", "40m", "1h", "2h", "155m", "165m", "175m")
              for name in ALERT_NAMES for c in _quiet(name, t)]
    return {"name": "healthy control: start-up step, full allocator, checkpoint tail",
            "interval": "1m", "input_series": healthy_series(8, tail_until=SPAN),
            "alert_rule_test": checks}


def _with_runbook(node: Any, runbook_url: str) -> Any:
    """The expected ``runbook_url`` annotations under another ``--runbook-url``."""
    if isinstance(node, dict):
        return {k: (v.replace(DEFAULT_RUNBOOK_URL + "#", runbook_url + "#", 1)
                    if k == "runbook_url" and isinstance(v, str) else _with_runbook(v, runbook_url))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_with_runbook(v, runbook_url) for v in node]
    return node


def rule_tests(cfg: Settings | None = None,
               runbook_url: str = DEFAULT_RUNBOOK_URL) -> dict[str, Any]:
    """The promtool tests of the rules ``rules_yaml(cfg, runbook_url)`` writes: the levels,
    margin and runbook the rules were generated with are the ones the tests expect."""
    cfg = cfg or Settings()
    tests = {"rule_files": [f"../{RULES_FILE}"], "evaluation_interval": "1m",
             "tests": [_healthy_job(), _memory_pressure(cfg), _gap_drift(), _oom(),
                       _stopped_reporting(), _dropping_samples(), _peak_over_estimate(cfg),
                       _analyzer(), _first_cause()]}
    return tests if runbook_url == DEFAULT_RUNBOOK_URL else _with_runbook(tests, runbook_url)


def rule_tests_yaml(cfg: Settings | None = None,
                    runbook_url: str = DEFAULT_RUNBOOK_URL) -> str:
    return header("dashboards/rule_tests.py") + dump_yaml(rule_tests(cfg, runbook_url))
