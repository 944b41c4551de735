"""Prometheus recording and alerting rules, generated from :mod:`stormotel.schema` names.

Each alert is a *signal* (a quantity that exists whenever the job reports, e.g. the used
percentage) and a *condition* appended to it (``> 95``): the split lets the live-Prometheus test
prove every signal returns series on healthy data, while ``promtool test rules`` proves the full
expressions fire on faults and stay quiet on a healthy control.

Severity: ``critical`` pages (the job is about to die or has lost a rank), ``warning`` tickets.
Alerts about a rank are one alert per rank carrying the rank's identity and placement as labels
(``job_id``, ``rank``, ``host``, ``gpu``, ``namespace``/``cluster``, and ``gpu_uuid``/``pod`` joined
from its info series), so Alertmanager can route, group (one page per job: ``group_by:
[alertname, cluster, namespace, job_id]``) and inhibit on them; the analyzer's run-health alerts
stay per job. Every alert links its section of ``docs/runbook.md``.

Deadlines come first: a leak is predicted (``predict_linear`` over minutes, like the Kubernetes
mixin's ``KubePersistentVolumeFillingUp``) rather than waited out, and a rank is silent when its
samples stop without its tracker's clean-stop edge, judged on presence (a rank counts from its
first scrape) rather than ``increase()``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import yaml
from stormotel.dashboards import promql
from stormotel.dashboards.settings import Settings

from stormotel import schema

DEFAULT_RUNBOOK_URL = "https://github.com/stormotel/stormotel/blob/main/docs/runbook.md"
RULES_FILE = "stormotel-rules.yml"
GROUP_RECORDING = "stormotel.recording"
GROUP_ALERTS = "stormotel.alerts"
GROUP_DCGM = "stormotel.dcgm"


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
    return promql.by_identity("max", f"{promql.of(metric)}{off}")


def _increase(metric: schema.Metric, window: str) -> str:
    return promql.by_identity("sum", f"increase({promql.of(metric)}[{window}])")


def _thirds(window: str) -> tuple[str, str, str]:
    """Offsets splitting a PromQL duration into three equal parts: ``30m`` → 10m, 20m, 30m."""
    seconds = _seconds(window)
    first, second, third = (f"{round(seconds * k / 3)}s" for k in (1, 2, 3))
    return first, second, third


def _seconds(duration: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    return int(duration[:-1]) * units[duration[-1]]


def _grew_each_step(step: str, min_bytes_per_second: float,
                    metric: schema.Metric = schema.GAP) -> str:
    """``metric`` grew by more than the minimum rate in each of the last three ``step``s: a
    leak does, a one-time step (NCCL init, a cuDNN workspace) grows in one of them only."""
    seconds = _seconds(step)
    offsets = ["", f"{seconds}s", f"{2 * seconds}s", f"{3 * seconds}s"]
    bar = f"{min_bytes_per_second * seconds:.6g}"
    return f" and on ({RANK_KEY}) ".join(
        f"({_max(metric, newer)} - {_max(metric, older)} > {bar})"
        for newer, older in pairwise(offsets))


def _growth_over(metric: schema.Metric, horizon_s: int, window: str) -> str:
    """Growth of ``metric`` expected in ``horizon_s`` seconds (``predict_linear`` over
    ``window``)."""
    return (promql.by_identity("max", f"predict_linear({promql.of(metric)}[{window}], {horizon_s})")
            + f" - {_max(metric)}")


def _last(metric: schema.Metric, window: str) -> str:
    return promql.by_identity("max", f"last_over_time({promql.of(metric)}[{window}])")


def recording_rules(cfg: Settings) -> list[Recording]:
    """Per-rank quantities the dashboards and alerts share (order matters: later ones reuse)."""
    return [*_usage_rules(cfg), *_fill_rules(cfg), *_presence_rules(cfg), *_event_rules(cfg)]


def _usage_rules(cfg: Settings) -> list[Recording]:
    """How full each rank is, its gap's slope, and whether it is short of memory."""
    used, limit = _max(schema.DEVICE_USED), _max(schema.DEVICE_LIMIT)
    reserved, allocated = _max(schema.ALLOC_RESERVED), _max(schema.ALLOC_ALLOCATED)
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
    ]


def _fill_rules(cfg: Settings) -> list[Recording]:
    """Drift of the gap, and the gap or device used filling the device within each horizon."""
    gap = _max(schema.GAP)
    third_1, third_2, third_3 = _thirds(cfg.drift_window)
    step_bytes = cfg.drift_min_bytes_per_second * _seconds(third_1)
    grew = [f"({gap} - {_max(schema.GAP, third_1)} > {step_bytes:.6g})",
            f"({_max(schema.GAP, third_1)} - {_max(schema.GAP, third_2)} > {step_bytes:.6g})",
            f"({_max(schema.GAP, third_2)} - {_max(schema.GAP, third_3)} > {step_bytes:.6g})"]
    drift = cfg.drift_window
    used_slope = promql.by_identity(
        "max", f"deriv({promql.of(schema.DEVICE_USED)}[{cfg.drift_window}])")
    return [
        # Drift is growth in each third of the window: a one-time step (NCCL init) is not.
        Recording(schema.REC_RANK_GAP_DRIFT,
                  f"{schema.REC_GAP_SLOPE} > {cfg.drift_min_bytes_per_second:.6g}"
                  + "".join(f" and on ({RANK_KEY}) {g}" for g in grew), always=False),
        # Slow (warning): the drifting gap, extrapolated over the long window, outgrows the
        # headroom within the warning horizon.
        Recording(schema.REC_RANK_GAP_FILLS,
                  f"({promql.gap_growth_over(cfg.full_horizon_seconds, cfg.drift_window)})"
                  f" > {schema.REC_DEVICE_HEADROOM}"
                  f" and on ({RANK_KEY}) {schema.REC_RANK_GAP_DRIFT}",
                  always=False),
        # Fast (critical), KubePersistentVolumeFillingUp's shape: predict_linear over minutes,
        # guarded by growth in each of the last three steps at the minimum rate.
        Recording(schema.REC_RANK_GAP_FILLS_SOON,
                  f"({promql.gap_growth_over(cfg.fill_horizon_seconds, cfg.fill_window)})"
                  f" > {schema.REC_DEVICE_HEADROOM}"
                  f" and on ({RANK_KEY}) "
                  + _grew_each_step(cfg.fill_step, cfg.drift_min_bytes_per_second),
                  always=False),
        # The same two horizons on device used, for what grows inside the allocator (tensors
        # kept alive, a cache that never stops growing); left to the gap series when the gap
        # alone explains the growth.
        Recording(schema.REC_RANK_USED_FILLS,
                  f"({_growth_over(schema.DEVICE_USED, cfg.full_horizon_seconds, drift)})"
                  f" > {schema.REC_DEVICE_HEADROOM}"
                  f" and on ({RANK_KEY}) ({used_slope} > {cfg.drift_min_bytes_per_second:.6g})"
                  f" and on ({RANK_KEY}) "
                  + _grew_each_step(third_1, cfg.drift_min_bytes_per_second, schema.DEVICE_USED)
                  + f" unless on ({RANK_KEY}) {schema.REC_RANK_GAP_FILLS}", always=False),
        Recording(schema.REC_RANK_USED_FILLS_SOON,
                  f"({_growth_over(schema.DEVICE_USED, cfg.fill_horizon_seconds, cfg.fill_window)})"
                  f" > {schema.REC_DEVICE_HEADROOM}"
                  f" and on ({RANK_KEY}) "
                  + _grew_each_step(cfg.fill_step, cfg.drift_min_bytes_per_second,
                                    schema.DEVICE_USED)
                  + f" unless on ({RANK_KEY}) {schema.REC_RANK_GAP_FILLS_SOON}", always=False),
    ]


def _presence_rules(cfg: Settings) -> list[Recording]:
    """Which ranks report, were seen, stopped cleanly, or went silent."""
    presence = cfg.presence_window
    stopped = _last(schema.TRACKER_STOP, presence)
    started = _last(schema.TRACKER_START, presence)
    return [
        # A rank reports while its samples reach the TSDB: presence, not increase(), so a rank
        # counts from its first scrape (start-up never reads as silence).
        Recording(schema.REC_RANK_ACTIVE,
                  f"group by ({RANK_KEY}) (count_over_time({promql.of(schema.SAMPLES)}"
                  f"[{cfg.silent_window}]))"),
        Recording(schema.REC_RANK_SEEN,
                  f"group by ({RANK_KEY}) (last_over_time({promql.of(schema.SAMPLES)}"
                  f"[{presence}]))"),
        # The rank's latest run stopped cleanly: its stop edge is not older than its start.
        Recording(schema.REC_RANK_STOPPED,
                  f"{stopped} >= {started}",
                  always=False),
        # Silent: seen in the presence window, no sample now, and no clean stop. A rank back on
        # another host/GPU after a restart is the same rank (matched on the rank only).
        Recording(schema.REC_RANK_SILENT,
                  f"{schema.REC_RANK_SEEN} unless on ({RANK_ONLY}) {schema.REC_RANK_ACTIVE}"
                  f" unless on ({RANK_KEY}) {schema.REC_RANK_STOPPED}", always=False),
    ]


def _event_rules(cfg: Settings) -> list[Recording]:
    """Dropped samples, OOMs, stalls, and where each rank runs."""
    ooms = promql.of(schema.OOMS)
    # OTel counters may appear on their first increment (a sampler without an allocator OOM
    # count): a series new within the window and already above 0 counts too, read from the range
    # so a rank scraped once after its OOM and then gone (stale) still counts.
    new_ooms = promql.by_identity(
        "max", f"max_over_time({ooms}[{cfg.oom_window}]) > 0 unless {ooms} offset {cfg.oom_window}")
    taken10, dropped10 = _increase(schema.SAMPLES, "10m"), _increase(schema.SAMPLES_DROPPED, "10m")
    presence = cfg.presence_window
    info = promql.of(schema.RANK_INFO)
    place_keep = ", ".join((*schema.PLACEMENT_LABELS, schema.ATTR_JOB_ID, schema.ATTR_RANK,
                            schema.ATTR_GPU_UUID, schema.ATTR_POD))
    step = promql.of(schema.STEP)
    still = promql.by_identity("max", f"changes({step}[{cfg.stall_window}])")
    moved = promql.by_identity("max", f"changes({step}[{presence}])")
    info_now = f"max by ({place_keep}) ({info})"
    info_last = f"max by ({place_keep}) (last_over_time({info}[{presence}]))"
    return [
        Recording(schema.REC_RANK_DROP_RATIO,
                  f"{dropped10} / ({dropped10} + {taken10})"),
        Recording(schema.REC_RANK_OOMS,
                  f"{_increase(schema.OOMS, cfg.oom_window)} > 0 or"
                  f" {new_ooms}",
                  always=False),
        # The step stands still for the stall window while the tracker samples, after it moved
        # within the presence window.
        Recording(schema.REC_RANK_STALLED,
                  f"{_max(schema.STEP)}"
                  f" and on ({RANK_KEY}) ({still} == 0) and on ({RANK_KEY}) ({moved} > 0)"
                  f" and on ({RANK_KEY}) ({_increase(schema.SAMPLES, cfg.stall_window)} > 0)",
                  always=False),
        # GPU UUID and pod of each rank (its latest process, else the last one seen), one series
        # per rank so alert labels can be joined from it without many-to-many errors.
        Recording(schema.REC_RANK_PLACEMENT,
                  f"topk by ({RANK_ONLY}) (1, {info_now} or on ({RANK_ONLY}) {info_last})"),
    ]


def placed(expr: str) -> str:
    """``expr`` (one series per rank) with the rank's ``gpu_uuid`` and ``pod`` labels where its
    info series has them; unchanged where it has none."""
    labels = f"{schema.ATTR_GPU_UUID}, {schema.ATTR_POD}"
    return (f"(({expr}) * on ({RANK_ONLY}) group_left ({labels}) {schema.REC_RANK_PLACEMENT})"
            f" or on ({RANK_KEY}) ({expr})")


def _count(record: str, condition: str = "") -> str:
    return f"count by ({JOB_KEY}) ({record}{f' {condition}' if condition else ''})"


RANK = "{{ $labels.rank }}"
#: Where the rank runs, as the alert's description says it: host, GPU, its UUID and pod if known.
WHERE = ("{{ $labels.host }} GPU {{ $labels.gpu }}"
         "{{ with $labels.gpu_uuid }} ({{ . }}){{ end }}"
         "{{ with $labels.pod }}, pod {{ . }}{{ end }}")


def alerts(cfg: Settings) -> list[Alert]:
    return [*_memory_alerts(cfg), *_filling_alerts(cfg), *_tracker_alerts(cfg),
            *_analyzer_alerts(cfg)]


def _memory_alerts(cfg: Settings) -> list[Alert]:
    """Short of memory now: what the allocator cannot give back, with cache flushes."""
    pressure_desc = (
        f"Rank {RANK} of job {JOB} ({WHERE}) uses {{{{ $value | humanizePercentage }}}} of its"
        " GPU memory in memory the allocator cannot give back (more than {pct}%), and the"
        f" allocator had to flush its cache to satisfy an allocation in the last"
        f" {cfg.retry_window}. {{tail}}")
    return [
        Alert("StormotelGpuMemoryPressure", sev,
              placed(f"{schema.REC_RANK_MEMORY_PRESSURE} > {pct / 100:g}"),
              schema.REC_IN_USE_RATIO, for_,
              f"Job {JOB}: rank {RANK} short of GPU memory ({sev})",
              pressure_desc.replace("{pct}", f"{pct:g}").replace("{tail}", tail))
        for sev, pct, for_, tail in (
            ("warning", cfg.warning_percent, "5m",
             "Spikes now have little room."),
            ("critical", cfg.critical_percent, "2m",
             "The next allocation spike is likely to fail with an out-of-memory error."))]


def _fills_within(cfg: Settings, name: str, what: str, rules: tuple[str, str],
                  texts: tuple[str, str]) -> list[Alert]:
    """A warning (the long horizon) and a critical (the short one) that ``what`` fills the
    device, from the two recording ``rules``; ``texts``: their descriptions."""
    warn_h = f"{cfg.full_horizon_seconds / 3600:g}h"
    crit_h = f"{cfg.fill_horizon_seconds / 3600:g}h"
    return [Alert(name, sev, placed(rule), schema.REC_DEVICE_HEADROOM, for_,
                  f"Job {JOB}: rank {RANK}'s {what} fills the device within {horizon}", text)
            for sev, rule, for_, horizon, text in (
                ("warning", rules[0], cfg.drift_for, warn_h, texts[0]),
                ("critical", rules[1], cfg.fill_for, crit_h, texts[1]))]


def _filling_alerts(cfg: Settings) -> list[Alert]:
    """The gap, and device used, filling the device within each horizon (predict_linear)."""
    warn_h = f"{cfg.full_horizon_seconds / 3600:g}h"
    crit_h = f"{cfg.fill_horizon_seconds / 3600:g}h"
    gap = _fills_within(
        cfg, "StormotelGapDrift", "GPU memory gap",
        (schema.REC_RANK_GAP_FILLS, schema.REC_RANK_GAP_FILLS_SOON),
        (f"The gap between device memory used and the allocator's reservation on rank {RANK}"
         f" of job {JOB} ({WHERE}) has grown in each third of the last {cfg.drift_window}"
         f" and, at that slope, outgrows the free device memory within {warn_h}"
         " (predict_linear): memory is accumulating outside the framework allocator (NCCL"
         " buffers, cuDNN workspaces, other libraries).",
         f"The gap on rank {RANK} of job {JOB} ({WHERE}) grew in each of the last three"
         f" {cfg.fill_step} steps and, at its slope over {cfg.fill_window}, outgrows the"
         f" free device memory within {crit_h} (predict_linear): the rank will run out of"
         " memory."))
    filling = _fills_within(
        cfg, "StormotelGpuMemoryFillingUp", "GPU memory",
        (schema.REC_RANK_USED_FILLS, schema.REC_RANK_USED_FILLS_SOON),
        (f"Device memory used on rank {RANK} of job {JOB} ({WHERE}) has grown in each third"
         f" of the last {cfg.drift_window} and, at that slope, fills the device within"
         f" {warn_h} (predict_linear); the gap does not explain it: the allocator holds"
         " ever more (tensors kept alive, a growing cache).",
         f"Device memory used on rank {RANK} of job {JOB} ({WHERE}) grew in each of the"
         f" last three {cfg.fill_step} steps and, at its slope over {cfg.fill_window}, fills"
         f" the device within {crit_h} (predict_linear): the rank will run out of memory."))
    return [*gap, *filling]


def _tracker_alerts(cfg: Settings) -> list[Alert]:
    """What the tracker's own series say: OOMs, silence, abrupt ends, stalls, drops, estimate."""
    silent_peers = (f"{schema.REC_RANK_SILENT} and on ({JOB_KEY})"
                    f" ({_count(schema.REC_RANK_SILENT)} < {_count(schema.REC_RANK_ACTIVE)})")
    reports_stop = f"({_last(schema.TRACKER_STOP_REPORTED, cfg.presence_window)} == 1)"
    ended = (f"{schema.REC_RANK_SILENT} unless on ({JOB_KEY}) {schema.REC_RANK_ACTIVE}"
             f" and on ({RANK_KEY}) {reports_stop}")
    return [
        Alert("StormotelRankOutOfMemory", "critical", placed(schema.REC_RANK_OOMS),
              schema.REC_RANK_ACTIVE, "0m",
              f"Job {JOB}: out-of-memory error on rank {RANK}",
              f"The allocator (or capture_oom) on rank {RANK} of job {JOB} ({WHERE}) reported"
              f" an out-of-memory error in the last {cfg.oom_window}; the tracker's OOM span"
              " event points at the flight-recorder dump."),
        # Fewer silent ranks than reporting ones: one dead rank of 2048 pages; ranks leaving
        # one after another without a stop edge (older trackers) stay quiet.
        Alert("StormotelRankStoppedReporting", "critical", placed(silent_peers),
              schema.REC_RANK_ACTIVE, cfg.silent_for,
              f"Job {JOB}: rank {RANK} stopped reporting while its peers continue",
              f"Rank {RANK} of job {JOB} ({WHERE}) has sent no memory sample for more than"
              f" {cfg.silent_window} and did not stop cleanly (no stop timestamp), while most"
              " ranks of the job still report: the process died (killed, segfault, lost node),"
              " or its scrape target or tracker is broken."),
        Alert("StormotelJobEndedAbruptly", "critical", placed(ended),
              schema.REC_RANK_ACTIVE, cfg.silent_for,
              f"Job {JOB} ended abruptly: rank {RANK} stopped without a clean stop",
              f"No rank of job {JOB} has reported for {cfg.silent_window}, and rank {RANK}"
              f" ({WHERE}) ended without its tracker's clean-stop timestamp although it"
              " delivers one: the process was killed (SIGKILL, the kernel's OOM killer, a"
              " preempted or lost node) rather than finishing or failing with an error."),
        Alert("StormotelRankStalled", "warning", placed(schema.REC_RANK_STALLED),
              schema.REC_RANK_ACTIVE, cfg.stall_for,
              f"Job {JOB}: rank {RANK} makes no progress",
              f"Rank {RANK} of job {JOB} ({WHERE}) has stayed at step {{{{ $value }}}} for more"
              f" than {cfg.stall_window} while its tracker keeps sampling: it hangs (a"
              " collective waiting for a peer, a data loader, a deadlock). Run `stormotel"
              " analyze` with the Flight Recorder dumps and worker logs."),
        Alert("StormotelTrackerDroppingSamples", "warning",
              placed(f"{schema.REC_RANK_DROP_RATIO} > {cfg.drop_ratio:g}"),
              schema.REC_RANK_DROP_RATIO, "10m",
              f"Job {JOB}: the tracker on rank {RANK} drops samples",
              f"The memory tracker on rank {RANK} of job {JOB} ({WHERE}) lost"
              " {{ $value | humanizePercentage }} of its samples (dropped / attempted) over 10"
              f" minutes, more than {cfg.drop_ratio:.0%} (see the reason label on"
              f" {promql.name(schema.SAMPLES_DROPPED)}); its telemetry has holes."),
        Alert("StormotelPeakOverEstimate", "warning",
              placed(f"{schema.REC_ESTIMATE_RATIO} > {cfg.estimate_margin:g}"),
              schema.REC_ESTIMATE_RATIO, "5m",
              f"Job {JOB}: rank {RANK}'s peak memory is above its estimate",
              f"The allocator's peak over {cfg.estimate_window} on rank {RANK} of job {JOB} is"
              " {{ $value | humanize }} times the `stormotel estimate` prediction (margin"
              f" {cfg.estimate_margin - 1:.0%}): the estimate is stale or the job changed."),
    ]


def _analyzer_alerts(cfg: Settings) -> list[Alert]:
    """Whether the analyzer runs and succeeds for a job, and what it found."""
    job = schema.ATTR_JOB_ID
    lookback = cfg.analyzer_lookback
    confident = promql.matchers(**{schema.ANALYZER_LABEL_CONFIDENCE: "high|medium"})
    first_cause = promql.series(schema.AN_FIRST_CAUSE, confident)
    success = f"max by ({JOB_KEY}) (last_over_time({schema.AN_LAST_SUCCESS}[{lookback}]))"
    failure = f"max by ({JOB_KEY}) (last_over_time({schema.AN_LAST_FAILURE}[{lookback}]))"
    success_long = (f"max by ({JOB_KEY}) (last_over_time({schema.AN_LAST_SUCCESS}"
                    f"[{cfg.analyzer_stale_lookback}]))")
    running = f"group by ({job}) ({schema.REC_RANK_ACTIVE})"
    running_long_ago = (f"group by ({JOB_KEY}) ({promql.of(schema.SAMPLES)}"
                        f" offset {cfg.analyzer_stale_seconds}s)")
    deployed = (f"count(last_over_time({schema.AN_LAST_SUCCESS}"
                f"[{cfg.analyzer_presence_window}])) > 0")
    fresh_run = f"(time() - {success} < {_seconds(lookback)})"
    return [
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


def report_url_template(report_base_url: str) -> str:
    """The ``report_url`` annotation: ``<base>/jobs/<job_id>/``, the page where ``stormotel
    serve`` keeps the alerting job's latest analysis. The job id is ``urlquery``-escaped (the
    receiver decodes it as such), and an alert without a ``job_id`` label gets no link."""
    base = report_base_url.rstrip("/")
    return (f"{{{{ if $labels.{schema.ATTR_JOB_ID} }}}}{base}/jobs/"
            f"{{{{ $labels.{schema.ATTR_JOB_ID} | urlquery }}}}/{{{{ end }}}}")


def _alert_rule(alert: Alert, runbook_url: str, report_base_url: str | None = None
                ) -> dict[str, Any]:
    annotations = {"summary": alert.summary, "description": alert.description,
                   "runbook_url": f"{runbook_url}#{alert.runbook_anchor}"}
    if report_base_url:
        annotations[schema.ANNOTATION_REPORT_URL] = report_url_template(report_base_url)
    return {
        "alert": alert.name, "expr": alert.expr, "for": alert.for_,
        "labels": {"severity": alert.severity},
        "annotations": annotations,
    }


def rule_groups(cfg: Settings | None = None,
                runbook_url: str = DEFAULT_RUNBOOK_URL,
                report_base_url: str | None = None) -> dict[str, Any]:
    """The rules file as a dict (``{"groups": [...]}``), the shape Prometheus and the
    PrometheusRule CRD's ``spec`` both take. Groups set no ``interval``: they follow the
    Prometheus' own ``evaluation_interval``. With ``report_base_url`` every alert carrying a
    ``job_id`` links its job's report (``report_url``, docs/serve.md)."""
    cfg = cfg or Settings()
    return {"groups": [
        {"name": GROUP_RECORDING,
         "rules": [{"record": r.record, "expr": r.expr} for r in recording_rules(cfg)]},
        {"name": GROUP_ALERTS,
         "rules": [_alert_rule(a, runbook_url, report_base_url) for a in alerts(cfg)]},
        {"name": GROUP_DCGM,
         "rules": [{"record": r.record, "expr": r.expr} for r in dcgm_recording_rules()]},
    ]}


def dcgm_recording_rules() -> list[Recording]:
    """dcgm-exporter's framebuffer used in bytes per GPU and per job/rank, for every exporter
    generation at once (MiB up to 4.8, bytes from 4.9; names found by role, units by the values:
    docs/dcgm.md): dashboards and alerts read one series whichever is scraped."""
    by_rank = (f"{schema.REC_DCGM_FB_USED_GPU} * on({schema.DCGM_LABEL_UUID}) "
               f"group_left({promql.IDENTITY}) {promql.rank_info()}")
    # Empty where no dcgm-exporter is scraped: never required to return series.
    return [Recording(schema.REC_DCGM_FB_USED_GPU, promql.dcgm_used_per_gpu(), always=False),
            Recording(schema.REC_DCGM_FB_USED_RANK, by_rank, always=False)]


def header(source: str, naming: str = schema.DEFAULT_NAME_TRANSLATION) -> str:
    """The do-not-edit banner of a generated YAML file written from ``source``."""
    names = "" if naming == schema.DEFAULT_NAME_TRANSLATION else \
        f"# Series names as Prometheus 3 stores OTLP under translation_strategy: {naming}.\n"
    return (f"# Generated by `stormotel dashboards` from {source} and stormotel/schema.py.\n"
            "# Do not edit by hand: change the code and rebuild (make dashboards).\n" + names)


#: libyaml's emitter where PyYAML has it: the same bytes as the pure-Python one for these files
#: (tests/dashboards/test_build.py compares the committed files), a quarter of the CPU (the
#: promtool suite is 100 kB of YAML, written on every `stormotel dashboards`).
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump_yaml(data: dict[str, Any]) -> str:
    """Deterministic YAML (no key sorting, no line folding) for committed files."""
    return yaml.dump(data, Dumper=_DUMPER, sort_keys=False, width=10_000, allow_unicode=True)


def generated_yaml(source: str, build: Callable[[Settings, str, str | None], dict[str, Any]],
                   cfg: Settings | None, runbook_url: str, report_base_url: str | None) -> str:
    """A generated YAML file (the rules, their promtool tests): the banner naming ``source``,
    then what ``build`` makes of the settings, every series spelled under the settings' name
    translation."""
    cfg = cfg or Settings()
    with promql.naming(cfg.name_translation):
        return header(source, cfg.name_translation) + dump_yaml(
            build(cfg, runbook_url, report_base_url))


def rules_yaml(cfg: Settings | None = None, runbook_url: str = DEFAULT_RUNBOOK_URL,
               report_base_url: str | None = None) -> str:
    return generated_yaml("dashboards/rules.py", rule_groups, cfg, runbook_url,
                          report_base_url)
