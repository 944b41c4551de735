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
from urllib.parse import quote_plus

from stormotel.dashboards import promql
from stormotel.dashboards.rules import DEFAULT_RUNBOOK_URL, RULES_FILE, generated_yaml
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
    text = promql.series(name, inner)  # a dotted UTF-8 name becomes {__name__="…", …}
    return {"series": text if text.endswith("}") else text + "{}", "values": values}


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


# --- per-rank alerts: labels and texts ----------------------------------------------------------

def _where(labels: dict[str, str]) -> str:
    """What the alerts' WHERE template renders for a rank (spelled out: the specification)."""
    text = f"{labels[schema.ATTR_HOST]} GPU {labels[schema.ATTR_GPU]}"
    if schema.ATTR_GPU_UUID in labels:
        text += f" ({labels[schema.ATTR_GPU_UUID]})"
    if schema.ATTR_POD in labels:
        text += f", pod {labels[schema.ATTR_POD]}"
    return text


def _rank_fired(alert: str, severity: str, labels: dict[str, str], summary: str,
                description: str) -> dict[str, Any]:
    return _fired(alert, severity, labels, summary, description)


def _info(labels: dict[str, str], uuid: str, pod: str, values: str) -> dict[str, str]:
    """The rank's info series (what the tracker exports), with a GPU UUID and pod."""
    return _series(promql.name(schema.RANK_INFO), {**labels, schema.ATTR_GPU_UUID: uuid,
                                           schema.ATTR_POD: pod}, values)


def _placed(labels: dict[str, str], uuid: str, pod: str) -> dict[str, str]:
    return {**labels, schema.ATTR_GPU_UUID: uuid, schema.ATTR_POD: pod}


# --- memory pressure ----------------------------------------------------------------------------

def _rank_allocator(rank: int, used: float, reserved: float, allocated: float, retries: str,
                    limit: str = _flat(LIMIT), job: str = JOB) -> list[dict[str, str]]:
    labels = _labels(rank, job)
    return [_series(promql.name(schema.DEVICE_USED), labels, _flat(used)),
            _series(promql.name(schema.DEVICE_LIMIT), labels, limit),
            _series(promql.name(schema.ALLOC_RESERVED), labels, _flat(reserved)),
            _series(promql.name(schema.ALLOC_ALLOCATED), labels, _flat(allocated)),
            _series(promql.name(schema.ALLOC_RETRIES), labels, retries)]


def _pct(ratio: float) -> str:
    """Prometheus' humanizePercentage."""
    return f"{ratio * 100:.4g}%"


def _memory_pressure(cfg: Settings) -> dict[str, Any]:
    """Ranks are placed between the configured lines (``--warning-percent``/``--critical-percent``
    change the series as well as the expectations). Rank 0: device 97 % used, allocator at 96 %
    of its reservation, no retries (full but healthy: quiet). Rank 1: between warning and
    critical and retrying (warning). Rank 2: above critical and retrying (warning and critical,
    one alert name). Rank 3: device limit 0 (unknown) while retrying: no +Inf, quiet. Rank 4:
    NaN readings while retrying: quiet. Rank 5: retries counter reset by a restart while full:
    the reset is not a retry (quiet). Rank 6: a limit of +Inf while retrying: ratio 0, quiet."""
    w, c = cfg.warning_percent / 100, cfg.critical_percent / 100
    r1, r2 = (w + c) / 2, (c + 1) / 2

    def at(ratio: float) -> float:
        return round(ratio * LIMIT)

    reserved0 = 0.95 * LIMIT
    series = [
        *_rank_allocator(0, 0.97 * LIMIT, reserved0, 0.96 * reserved0, _flat(0)),
        *_rank_allocator(1, at(r1), at(r1), at(r1), _counter(1)),
        *_rank_allocator(2, at(r2), at(r2), at(r2), _counter(1)),
        *_rank_allocator(3, 0.99 * LIMIT, 0.97 * LIMIT, 0.96 * LIMIT, _counter(1),
                         limit=_flat(0)),
        *_rank_allocator(5, 0.99 * LIMIT, 0.97 * LIMIT, 0.96 * LIMIT, "7x30 0x150"),
        *_rank_allocator(6, 0.99 * LIMIT, 0.97 * LIMIT, 0.96 * LIMIT, _counter(1),
                         limit=f"Inf+0x{SPAN}"),
    ]
    nan = _labels(4)
    series += [_series(promql.name(schema.DEVICE_USED), nan, f"NaN+0x{SPAN}"),
               _series(promql.name(schema.DEVICE_LIMIT), nan, _flat(LIMIT)),
               _series(promql.name(schema.ALLOC_RESERVED), nan, f"NaN+0x{SPAN}"),
               _series(promql.name(schema.ALLOC_ALLOCATED), nan, f"NaN+0x{SPAN}"),
               _series(promql.name(schema.ALLOC_RETRIES), nan, _counter(1))]
    name = "StormotelGpuMemoryPressure"
    tails = {"warning": "Spikes now have little room.",
             "critical": "The next allocation spike is likely to fail with an out-of-memory"
                         " error."}

    def fired(rank: int, severity: str, ratio: float) -> dict[str, Any]:
        labels = _labels(rank)
        pct = {"warning": cfg.warning_percent, "critical": cfg.critical_percent}[severity]
        return _rank_fired(
            name, severity, labels, f"Job {JOB}: rank {rank} short of GPU memory ({severity})",
            f"Rank {rank} of job {JOB} ({_where(labels)}) uses {_pct(ratio)} of its GPU memory"
            f" in memory the allocator cannot give back (more than {pct:g}%), and the allocator"
            f" had to flush its cache to satisfy an allocation in the last 15m. {tails[severity]}")

    at30 = [fired(1, "warning", at(r1) / LIMIT), fired(2, "warning", at(r2) / LIMIT)]
    if c < 1:
        at30.append(fired(2, "critical", at(r2) / LIMIT))
    return {"name": "memory pressure per rank: one name, two severities; full-but-healthy"
                    " allocator, limit 0, NaN and a counter reset stay quiet",
            "interval": "1m", "input_series": series, "alert_rule_test": [
                *_quiet(name, "1m"),
                {"eval_time": "30m", "alertname": name, "exp_alerts": at30}]}


# --- leaks: fast (critical) and slow (warning) ---------------------------------------------------

def _gap_rank(rank: int, used: str, gap: str, job: str = JOB) -> list[dict[str, str]]:
    labels = _labels(rank, job)
    return [_series(promql.name(schema.DEVICE_USED), labels, used),
            _series(promql.name(schema.DEVICE_LIMIT), labels, _flat(LIMIT, 310)),
            _series(promql.name(schema.GAP), labels, gap)]


def _gap_fired(severity: str, rank: int, job: str = JOB) -> dict[str, Any]:
    labels = _labels(rank, job)
    if severity == "critical":
        return _rank_fired(
            "StormotelGapDrift", "critical", labels,
            f"Job {job}: rank {rank}'s GPU memory gap fills the device within 1h",
            f"The gap on rank {rank} of job {job} ({_where(labels)}) grew in each of the last"
            " three 1m steps and, at its slope over 5m, outgrows the free device memory within"
            " 1h (predict_linear): the rank will run out of memory.")
    return _rank_fired(
        "StormotelGapDrift", "warning", labels,
        f"Job {job}: rank {rank}'s GPU memory gap fills the device within 12h",
        "The gap between device memory used and the allocator's reservation on rank"
        f" {rank} of job {job} ({_where(labels)}) has grown in each third of the last 30m and,"
        " at that slope, outgrows the free device memory within 12h (predict_linear): memory is"
        " accumulating outside the framework allocator (NCCL buffers, cuDNN workspaces, other"
        " libraries).")


#: Samples per minute in the fast tests (a 15 s scrape).
PER_MIN = 4


def _fast_leak() -> dict[str, Any]:
    """15 s samples. Rank 1 starts leaking 6 MiB/s at minute 20 with 30 minutes of headroom left
    (the device is full at minute 50): critical by minute 30, 10 minutes after the leak began,
    long before the OOM. Rank 4 leaks the same inside the allocator (device used grows, the gap
    does not): StormotelGpuMemoryFillingUp, critical, by minute 30. Rank 0: a one-time 3 GiB
    step of its gap at minute 20 with 2 GiB left (a caching allocator at 96 % and NCCL init):
    quiet. Rank 2: the gap climbs 1 GiB over two minutes and stays (lazy communicator init):
    quiet. Rank 3: NaN gap: quiet. Rank 5: the caching allocator warms up by 6 GiB over two
    minutes to 96 % of the device and holds it: quiet."""
    n = 120 * PER_MIN
    start = 20 * PER_MIN
    leak = 6 * MiB * 15  # per sample
    headroom = 30 * 60 * 6 * MiB
    used0 = LIMIT - headroom
    series = [
        *_gap_rank(0, f"{LIMIT - 5 * GiB}+0x{start} {LIMIT - 2 * GiB}+0x{n - start - 1}",
                   f"{GiB}+0x{start} {4 * GiB}+0x{n - start - 1}"),
        *_gap_rank(1, f"{used0}+0x{start} {used0 + leak}+{leak}x{n - start - 1}",
                   f"{2 * GiB}+0x{start} {2 * GiB + leak}+{leak}x{n - start - 1}"),
        *_gap_rank(2, f"{LIMIT - 4 * GiB}+0x{start} {LIMIT - 4 * GiB}+{128 * MiB}x8"
                   f" {LIMIT - 3 * GiB}+0x{n - start - 10}",
                   f"{GiB}+0x{start} {GiB}+{128 * MiB}x8 {2 * GiB}+0x{n - start - 10}"),
        *_gap_rank(3, f"{LIMIT - 4 * GiB}+0x{n}", f"NaN+0x{n}"),
        # Rank 4: the allocator leaks (tensors kept alive): device used grows, the gap does not.
        *_gap_rank(4, f"{used0}+0x{start} {used0 + leak}+{leak}x{n - start - 1}",
                   f"{2 * GiB}+0x{n}"),
        # Rank 5: the caching allocator warms up, +6 GiB over two minutes, then holds 96 %.
        *_gap_rank(5, f"{LIMIT - 9 * GiB}+0x{start} {LIMIT - 9 * GiB}+{384 * MiB}x16"
                   f" {0.96 * LIMIT:.0f}+0x{n - start - 18}", f"{GiB}+0x{n}"),
    ]
    name = "StormotelGapDrift"
    filling = "StormotelGpuMemoryFillingUp"
    return {"name": "fast leak pages critical within 10 minutes of its start; a one-time step"
                    " and a short climb do not",
            "interval": "15s", "input_series": series, "alert_rule_test": [
                *_quiet(name, "19m", "21m", "23m", "25m"),
                {"eval_time": "30m", "alertname": name, "exp_alerts": [_gap_fired("critical", 1)]},
                *_quiet(filling, "19m", "21m", "23m", "25m"),
                {"eval_time": "30m", "alertname": filling,
                 "exp_alerts": [_used_fired("critical", 4)]},
            ],
            "promql_expr_test": [_no_alerts_for("rank", "0|2|3|5", "30m"),
                                 _no_alerts_for("rank", "0|2|3|5", "60m")]}


def _used_fired(severity: str, rank: int, job: str = JOB) -> dict[str, Any]:
    labels = _labels(rank, job)
    name = "StormotelGpuMemoryFillingUp"
    if severity == "critical":
        return _rank_fired(
            name, "critical", labels,
            f"Job {job}: rank {rank}'s GPU memory fills the device within 1h",
            f"Device memory used on rank {rank} of job {job} ({_where(labels)}) grew in each of"
            " the last three 1m steps and, at its slope over 5m, fills the device within 1h"
            " (predict_linear): the rank will run out of memory.")
    return _rank_fired(
        name, "warning", labels,
        f"Job {job}: rank {rank}'s GPU memory fills the device within 12h",
        f"Device memory used on rank {rank} of job {job} ({_where(labels)}) has grown in each"
        " third of the last 30m and, at that slope, fills the device within 12h"
        " (predict_linear); the gap does not explain it: the allocator holds ever more (tensors"
        " kept alive, a growing cache).")


def _slow_leak() -> dict[str, Any]:
    """1-minute samples over 2 hours. Rank 1 leaks 3 MiB a minute with 1.5 GiB left (full in
    about 8.5 hours): a warning within the hour, never a page. Rank 5 leaks as fast with 600
    MiB left: warned as early, and at 2 hours, 80 minutes from full, still no page (the page's
    horizon is 1 hour: 180 MiB more at this slope; it would page 20 minutes later). Rank 0:
    flat at 96 %. Rank 3 drifts, then restarts at minute 20 and its gap is flat (quiet).

    Two hours, not more: every rule is evaluated every 15 s up to the last check, and past
    the hour each leak is one straight line (the page's margin only shrinks, as rank 5 shows
    at its closest)."""
    n = 125
    grow = 3 * MiB
    series = [*_gap_rank(0, _flat(0.96 * LIMIT, n), _flat(GiB, n)),
              *_gap_rank(1, f"{LIMIT - 1.5 * GiB:.0f}+{grow}x{n}", f"{GiB}+{grow}x{n}"),
              *_gap_rank(3, f"{40 * GiB}+{2 * MiB}x19 {40 * GiB}+0x{n - 20}",
                         f"{GiB}+{2 * MiB}x19 {GiB}+0x{n - 20}"),
              # Rank 4: the allocator's share grows 3 MiB a minute, the gap stays flat.
              *_gap_rank(4, f"{LIMIT - 1.5 * GiB:.0f}+{grow}x{n}", _flat(GiB, n)),
              *_gap_rank(5, f"{LIMIT - 600 * MiB:.0f}+{grow}x{n}", f"{GiB}+{grow}x{n}")]
    name = "StormotelGapDrift"
    filling = "StormotelGpuMemoryFillingUp"
    warned = [_gap_fired("warning", 1), _gap_fired("warning", 5)]
    return {"name": "slow leak warns hours ahead and never pages critical",
            "interval": "1m", "input_series": series, "alert_rule_test": [
                *_quiet(name, "5m", "20m", "30m"),
                {"eval_time": "60m", "alertname": name, "exp_alerts": warned},
                {"eval_time": "120m", "alertname": name, "exp_alerts": warned},
                *_quiet(filling, "5m", "20m", "30m"),
                {"eval_time": "60m", "alertname": filling,
                 "exp_alerts": [_used_fired("warning", 4)]},
            ]}


def _no_alerts_for(label: str, regex: str, at: str) -> dict[str, Any]:
    """No alert, pending or firing, for these series: promtool stores ALERTS like Prometheus."""
    return {"expr": f'ALERTS{{{label}=~"{regex}"}}', "eval_time": at, "exp_samples": []}


# --- OOM --------------------------------------------------------------------------------------

def _oom() -> dict[str, Any]:
    """15 s samples. Rank 0 counts none. Rank 1 carries 3 old OOMs from before the window.
    Rank 2's counter exists from its start at 0 and reads 1 in exactly one scrape after its OOM,
    then the process is gone (stale): it must fire. Rank 3's counter first appears at 1 (a
    pipeline that drops zero counters), in one scrape, then stale: it must fire too. Rank 4
    restarts (counter reset 2 → 0) and OOMs nowhere: quiet."""
    o = promql.name(schema.OOMS)
    m = PER_MIN
    series = [_series(o, _labels(0), _flat(0, 60 * m)), _series(o, _labels(1), _flat(3, 60 * m)),
              _series(o, _labels(2), f"0+0x{20 * m} 1 stale"),
              _series(o, _labels(3), f"_x{20 * m + 1} 1 stale"),
              _series(o, _labels(4), f"2+0x{20 * m} 0+0x{40 * m}")]
    name = "StormotelRankOutOfMemory"

    def fired(rank: int) -> dict[str, Any]:
        labels = _labels(rank)
        return _rank_fired(name, "critical", labels,
                           f"Job {JOB}: out-of-memory error on rank {rank}",
                           f"The allocator (or capture_oom) on rank {rank} of job {JOB}"
                           f" ({_where(labels)}) reported an out-of-memory error in the last 10m;"
                           " the tracker's OOM span event points at the flight-recorder dump.")

    return {"name": "OOM from a single post-event scrape: counter from 0, first seen at 1; old"
                    " counts and a reset stay quiet",
            "interval": "15s", "input_series": series, "alert_rule_test": [
                *_quiet(name, "15m", "20m", "35m"),
                {"eval_time": "20m30s", "alertname": name, "exp_alerts": [fired(2), fired(3)]},
                {"eval_time": "29m", "alertname": name, "exp_alerts": [fired(2), fired(3)]},
            ]}


# --- rank lifecycle: start/stop edges, dead ranks, abrupt ends, stalls ---------------------------

def _rank_run(rank: int, job: str, start: int, stop: int, *, clean: bool, minutes: int,
              host: str = HOST, reported: bool = True, step_until: int | None = None,
              world: int = 4, info: tuple[str, str] | None = None) -> list[dict[str, str]]:
    """One rank's tracker from minute ``start`` to ``stop`` at 15 s samples: samples, start
    edge, stop edge in its last scrape when ``clean`` (the lingering endpoint), steps until
    ``step_until``; nothing after ``stop`` (stale)."""
    m = PER_MIN
    labels = _labels(rank, job, world=world, host=host)
    lead = f"_x{start * m} " if start else ""
    k = (stop - start) * m  # samples after the first
    tail = " stale" if stop < minutes else ""
    t0 = start * 60
    out = [_series(promql.name(schema.SAMPLES), labels, f"{lead}0+150x{k}{tail}"),
           _series(promql.name(schema.TRACKER_START), labels, f"{lead}{t0}+0x{k}{tail}"),
           _series(promql.name(schema.TRACKER_STOP_REPORTED), labels,
                   f"{lead}{int(reported)}+0x{k}{tail}")]
    if clean:
        out.append(_series(promql.name(schema.TRACKER_STOP), labels,
                           f"_x{stop * m} {stop * 60}{tail}"))
    if step_until is not None:
        moving = (step_until - start) * m
        out.append(_series(promql.name(schema.STEP), labels,
                           f"{lead}0+1x{moving} {moving}+0x{k - moving}{tail}"))
    if info is not None:
        out.append(_info(labels, *info, f"{lead}1+0x{k}{tail}"))
    return out


def _silent_desc(rank: int, job: str, labels: dict[str, str]) -> str:
    return (f"Rank {rank} of job {job} ({_where(labels)}) has sent no memory sample for more than"
            " 2m and did not stop cleanly (no stop timestamp), while most ranks of the job still"
            " report: the process died (killed, segfault, lost node), or its scrape target or"
            " tracker is broken.")


def _lifecycle() -> dict[str, Any]:
    """15 s samples, 4 ranks per job, 60 minutes.

    dead: rank 3 (GPU UUID and pod known) is killed at minute 20 while its peers go on: pages
    within 5 minutes, with the rank's labels; keeps its UUID and pod after it is gone.
    killed: every rank dies at minute 20 without a stop edge: an abrupt end, one alert per rank.
    legacy: the same, from trackers that cannot report their stop (stop_reported 0): quiet.
    clean: every rank stops cleanly at 20: quiet. tail: ranks 1-3 stop cleanly at 20, rank 0
    writes a checkpoint until 50: quiet. staggered: ranks start at minutes 0, 1, 2, 3 and stop
    cleanly at 20, 24, 28, 32: quiet, never pending. restarted: rank 1 is killed on node-a at 20
    and back on node-b at 21: quiet."""
    minutes = 60
    series: list[dict[str, str]] = []
    run = _rank_run
    for r in range(4):
        info = ("GPU-3a", "train-3") if r == 3 else None
        series += run(r, "dead", 0, 20 if r == 3 else minutes, clean=False, minutes=minutes,
                      info=info)
        series += run(r, "killed", 0, 20, clean=False, minutes=minutes)
        series += run(r, "legacy", 0, 20, clean=False, minutes=minutes, reported=False)
        series += run(r, "clean", 0, 20, clean=True, minutes=minutes)
        series += run(r, "tail", 0, 50 if r == 0 else 20, clean=True, minutes=minutes)
        series += run(r, "staggered", r, 20 + 4 * r, clean=True, minutes=minutes)
        if r != 1:
            series += run(r, "restarted", 0, minutes, clean=False, minutes=minutes)
    series += run(1, "restarted", 0, 20, clean=False, minutes=minutes)
    series += run(1, "restarted", 21, minutes, clean=False, minutes=minutes, host="node-b")
    dead = _labels(3, "dead")
    placed = _placed(dead, "GPU-3a", "train-3")
    stopped = _rank_fired("StormotelRankStoppedReporting", "critical", placed,
                          "Job dead: rank 3 stopped reporting while its peers continue",
                          _silent_desc(3, "dead", placed))

    def abrupt(rank: int) -> dict[str, Any]:
        labels = _labels(rank, "killed")
        return _rank_fired("StormotelJobEndedAbruptly", "critical", labels,
                           f"Job killed ended abruptly: rank {rank} stopped without a clean stop",
                           "No rank of job killed has reported for 2m, and rank"
                           f" {rank} ({_where(labels)}) ended without its tracker's clean-stop"
                           " timestamp although it delivers one: the process was killed (SIGKILL,"
                           " the kernel's OOM killer, a preempted or lost node) rather than"
                           " finishing or failing with an error.")

    quiet_jobs = "legacy|clean|tail|staggered|restarted"
    return {"name": "lifecycle: a dead rank pages within 5 minutes, an abrupt end pages; start-up,"
                    " clean stops, a checkpoint tail, a staggered exit and a restart never do",
            "interval": "15s", "input_series": series, "alert_rule_test": [
                *_quiet("StormotelRankStoppedReporting", "1m", "10m", "21m", "22m"),
                {"eval_time": "25m", "alertname": "StormotelRankStoppedReporting",
                 "exp_alerts": [stopped]},
                {"eval_time": "55m", "alertname": "StormotelRankStoppedReporting",
                 "exp_alerts": [stopped]},
                *_quiet("StormotelJobEndedAbruptly", "1m", "10m", "21m", "22m"),
                {"eval_time": "25m", "alertname": "StormotelJobEndedAbruptly",
                 "exp_alerts": [abrupt(r) for r in range(4)]},
            ],
            "promql_expr_test": [_no_alerts_for("job_id", quiet_jobs, t)
                                 for t in ("1m", "3m", "20m15s", "21m", "22m", "25m", "30m",
                                           "35m", "52m", "55m")]}


def _stalled() -> dict[str, Any]:
    """15 s samples. Rank 2's step stops at minute 20 while its tracker samples on: a warning
    once it has stood still for the stall window and the alert's for. Rank 0's steps go on;
    rank 1 (a tracker beside an uninstrumented job) has no step at all: quiet."""
    minutes = 60
    series = (_rank_run(0, JOB, 0, minutes, clean=False, minutes=minutes, step_until=minutes)
              + _rank_run(1, JOB, 0, minutes, clean=False, minutes=minutes)
              + _rank_run(2, JOB, 0, minutes, clean=False, minutes=minutes, step_until=20))
    labels = _labels(2)
    name = "StormotelRankStalled"
    fired = _rank_fired(name, "warning", labels, f"Job {JOB}: rank 2 makes no progress",
                        f"Rank 2 of job {JOB} ({_where(labels)}) has stayed at step 80 for more"
                        " than 10m while its tracker keeps sampling: it hangs (a collective"
                        " waiting for a peer, a data loader, a deadlock). Run `stormotel analyze`"
                        " with the Flight Recorder dumps and worker logs.")
    return {"name": "a stalled rank: samples go on, the step does not",
            "interval": "15s", "input_series": series, "alert_rule_test": [
                *_quiet(name, "10m", "25m", "33m"),
                {"eval_time": "36m", "alertname": name, "exp_alerts": [fired]},
            ]}


# --- dropped samples ----------------------------------------------------------------------------

def _dropping_samples() -> dict[str, Any]:
    """Rank 1 takes 540 and drops 60 samples a minute: 10 % of what it tried (not 60/540 =
    11.1 %). Rank 0 drops 3 of 600 (0.5 %, quiet); rank 2 never exported the drop counter."""
    s, d = promql.name(schema.SAMPLES), promql.name(schema.SAMPLES_DROPPED)
    reason = {schema.ATTR_REASON: schema.REASON_OVERRUN}
    series = [_series(s, _labels(0), _counter(597)), _series(d, {**_labels(0), **reason},
                                                             _counter(3)),
              _series(s, _labels(1), _counter(540)), _series(d, {**_labels(1), **reason},
                                                             _counter(60)),
              _series(s, _labels(2), _counter(600))]
    name = "StormotelTrackerDroppingSamples"
    rec = schema.REC_RANK_DROP_RATIO
    rank1 = ", ".join(f'{k}="{v}"' for k, v in _labels(1).items())
    labels = _labels(1)
    return {"name": "dropped samples over attempted samples", "interval": "1m",
            "input_series": series, "alert_rule_test": [
                *_quiet(name, "5m"),
                {"eval_time": "30m", "alertname": name, "exp_alerts": [_rank_fired(
                    name, "warning", labels, f"Job {JOB}: the tracker on rank 1 drops samples",
                    f"The memory tracker on rank 1 of job {JOB} ({_where(labels)}) lost 10% of"
                    " its samples (dropped / attempted) over 10 minutes, more than 1% (see the"
                    f" reason label on {d}); its telemetry has holes.")]}],
            "promql_expr_test": [
                {"expr": f'{rec}{{rank="1"}}', "eval_time": "30m",
                 "exp_samples": [{"labels": f"{rec}{{{rank1}}}", "value": 0.1}]}]}


# --- estimate -----------------------------------------------------------------------------------

def _peak_over_estimate(cfg: Settings) -> dict[str, Any]:
    """Rank 1 peaks 10 points above the margin (default: at 120 % of its estimate; fires);
    rank 0 halfway to the margin (105 %; quiet). ``--estimate-margin`` moves both."""
    est, peak = promql.name(schema.ESTIMATE), promql.name(schema.ALLOC_ALLOCATED_PEAK)
    over, within = round(cfg.estimate_margin + 0.1, 6), 1 + (cfg.estimate_margin - 1) / 2
    series = [_series(est, _labels(0), _flat(10 * GiB)),
              _series(peak, _labels(0), _flat(within * 10 * GiB)),
              _series(est, _labels(1), _flat(10 * GiB)),
              _series(peak, _labels(1), _flat(over * 10 * GiB))]
    name = "StormotelPeakOverEstimate"
    labels = _labels(1)
    return {"name": "actual peak above estimate times margin", "interval": "1m",
            "input_series": series, "alert_rule_test": [
                *_quiet(name, "3m"),
                {"eval_time": "20m", "alertname": name, "exp_alerts": [_rank_fired(
                    name, "warning", labels,
                    f"Job {JOB}: rank 1's peak memory is above its estimate",
                    f"The allocator's peak over 1h on rank 1 of job {JOB} is {over:.4g} times the"
                    f" `stormotel estimate` prediction (margin {cfg.estimate_margin - 1:.0%}):"
                    " the estimate is stale or the job changed.")]},
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
    s = promql.name(schema.SAMPLES)
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
    "StormotelGpuMemoryPressure", "StormotelGapDrift", "StormotelGpuMemoryFillingUp",
    "StormotelRankOutOfMemory",
    "StormotelRankStoppedReporting", "StormotelJobEndedAbruptly", "StormotelRankStalled",
    "StormotelTrackerDroppingSamples", "StormotelPeakOverEstimate", "StormotelAnalyzerFailing",
    "StormotelAnalyzerStale", "StormotelFirstCauseFinding")
#: Kept for callers that check every alert appears in the healthy control.
ALERT_NAMES_IN_HEALTHY = ALERT_NAMES


def healthy_series(world: int, minutes: int = SPAN, tail_until: int | None = None,
                   stagger: int = 0) -> list[dict[str, str]]:
    """A healthy ``world``-rank job as it really looks: ranks start ``stagger`` minutes apart
    (rank r at minute ``r * stagger // world``) and step every sample; NCCL init adds 1 GiB of
    gap at minute 5 after each rank's start; the allocator holds 96 % of a reservation that
    fills the device; no retries or OOMs; drops well under 1 %; the analyzer succeeds every 15
    minutes and finds a low-confidence suspect. With ``tail_until``, ranks 1.. stop cleanly
    one after another over the ``stagger`` minutes before ``minutes - 30`` and rank 0 writes a
    checkpoint until ``tail_until``, each leaving its stop edge in its last scrape."""
    series: list[dict[str, str]] = []
    end = minutes - 30 if tail_until else minutes
    reserved = 0.95 * LIMIT
    for rank in range(world):
        labels = _labels(rank, world=world, host=f"node-{rank // 8}")
        begin = rank * stagger // max(world, 1)
        stop = tail_until if (tail_until and rank == 0) else \
            (end - stagger + rank * stagger // max(world, 1) if tail_until else end)
        k = stop - begin
        lead = f"_x{begin} " if begin else ""
        tail = " stale" if stop < minutes else ""

        def flat(value: float) -> str:
            return f"{lead}{value:.0f}+0x{k}{tail}"  # noqa: B023 - used in this iteration only

        series += [
            _series(promql.name(schema.DEVICE_USED), labels,
                    f"{lead}{0.96 * LIMIT:.0f}+0x4 {0.97 * LIMIT:.0f}+0x{k - 5}{tail}"),
            _series(promql.name(schema.DEVICE_LIMIT), labels, flat(LIMIT)),
            _series(promql.name(schema.ALLOC_RESERVED), labels, flat(reserved)),
            _series(promql.name(schema.ALLOC_ALLOCATED), labels, flat(0.96 * reserved)),
            _series(promql.name(schema.GAP), labels, f"{lead}{GiB}+0x4 {2 * GiB}+0x{k - 5}{tail}"),
            _series(promql.name(schema.ALLOC_RETRIES), labels, flat(0)),
            _series(promql.name(schema.OOMS), labels, flat(0)),
            _series(promql.name(schema.SAMPLES), labels, f"{lead}0+600x{k}{tail}"),
            _series(promql.name(schema.SAMPLES_DROPPED), {**labels, schema.ATTR_REASON:
                                                   schema.REASON_OVERRUN},
                    f"{lead}0+1x{k}{tail}"),
            _series(promql.name(schema.ESTIMATE), labels, flat(0.95 * LIMIT)),
            _series(promql.name(schema.ALLOC_ALLOCATED_PEAK), labels, flat(0.96 * reserved)),
            _series(promql.name(schema.STEP), labels, f"{lead}0+60x{k}{tail}"),
            _series(promql.name(schema.TRACKER_START), labels, flat(begin * 60)),
            _series(promql.name(schema.TRACKER_STOP_REPORTED), labels, flat(1)),
        ]
        if stop < minutes:
            series.append(_series(promql.name(schema.TRACKER_STOP), labels,
                                  f"_x{stop} {stop * 60} stale"))
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


HEALTHY_TIMES = ("1m", "3m", "8m", "20m", "40m", "1h", "2h", "140m", "145m", "150m", "155m",
                 "165m", "175m")


def _healthy_job() -> dict[str, Any]:
    """A healthy 8-rank job through a staggered start, steady state, a staggered clean stop
    and a checkpoint tail (rank 0 runs 30 minutes after its peers stop): no alert fires, and
    none is even pending, at any checked time."""
    checks = [c for t in HEALTHY_TIMES for name in ALERT_NAMES for c in _quiet(name, t)]
    return {"name": "healthy control: staggered start and stop, start-up step, full allocator,"
                    " checkpoint tail",
            "interval": "1m", "input_series": healthy_series(8, tail_until=SPAN, stagger=8),
            "alert_rule_test": checks,
            "promql_expr_test": [{"expr": "ALERTS", "eval_time": t, "exp_samples": []}
                                 for t in HEALTHY_TIMES]}


def _dcgm_generations() -> dict[str, Any]:
    """One per-job/rank GPU memory series, in bytes, whichever dcgm-exporter generation is
    scraped: rank 0's GPU behind a legacy exporter (MiB, ``Hostname``), rank 1's behind 4.9 /
    DCGM 4.7 (bytes, ``hostname``, same names), rank 2's behind an exporter whose fields were
    renamed (``…_BYTES``, the shape the 4.9 rename may take); rank 1's GPU is shared by two pods
    (the exporter repeats it: one series, never a sum); a "not supported" code is no value."""
    used_mib, free_mib, reserved_mib = 30_000, 50_000, 512
    uuids = {0: "GPU-legacy", 1: "GPU-new", 2: "GPU-renamed"}
    series = []
    for rank, uuid in uuids.items():
        info = {**_labels(rank, world=3), schema.ATTR_GPU_UUID: uuid}
        series.append(_series(promql.name(schema.RANK_INFO), info, "1x10"))
    legacy = {"UUID": uuids[0], "gpu": "0", "Hostname": "node-a"}
    series += [_series(schema.DCGM_FB_USED, legacy, f"{used_mib}x10"),
               _series(schema.DCGM_FB_FREE, legacy, f"{free_mib}x10"),
               _series(schema.DCGM_FB_RESERVED, legacy, f"{reserved_mib}x10")]
    for pod in ("trainer-1", "sidecar"):
        new = {"UUID": uuids[1], "gpu": "1", "hostname": "node-a", "pod": pod}
        series += [_series(schema.DCGM_FB_USED, new, f"{used_mib * MiB}x10"),
                   _series(schema.DCGM_FB_FREE, new, f"{free_mib * MiB}x10")]
    renamed = {"UUID": uuids[2], "gpu": "2", "hostname": "node-a"}
    series += [_series("DCGM_FI_DEV_FB_USED_BYTES", renamed,
                       f"{used_mib * MiB}x3 {schema.DCGM_INT64_NOT_SUPPORTED} "
                       f"{used_mib * MiB}x5"),
               _series("DCGM_FI_DEV_FB_FREE_BYTES", renamed, f"{free_mib * MiB}x10")]
    per_rank = []
    for rank, uuid in uuids.items():
        labels = {k: v for k, v in _labels(rank, world=3).items()
                  if k != schema.LABEL_NAMESPACE}
        per_rank.append({"labels": _series(schema.REC_DCGM_FB_USED_RANK,
                                           {**labels, "UUID": uuid}, "")["series"],
                         "value": used_mib * MiB})
    per_gpu = [{"labels": f'{schema.REC_DCGM_FB_USED_GPU}{{UUID="{u}"}}', "value": used_mib * MiB}
               for u in uuids.values()]
    return {"name": "DCGM framebuffer per job/rank in bytes for legacy (MiB, Hostname), 4.9 "
                    "(bytes, hostname) and renamed exporters; shared GPU once; sentinel dropped",
            "interval": "1m", "input_series": series, "alert_rule_test": [],
            "promql_expr_test": [
                {"expr": schema.REC_DCGM_FB_USED_RANK, "eval_time": "3m",
                 "exp_samples": per_rank},
                {"expr": schema.REC_DCGM_FB_USED_GPU, "eval_time": "3m", "exp_samples": per_gpu},
                # At 4m rank 2's exporter said "not supported": no value, not 8 EiB.
                {"expr": f'{schema.REC_DCGM_FB_USED_GPU}{{UUID="{uuids[2]}"}}',
                 "eval_time": "4m", "exp_samples": []}]}


def rule_tests(cfg: Settings | None = None,
               runbook_url: str = DEFAULT_RUNBOOK_URL,
               report_base_url: str | None = None) -> dict[str, Any]:
    """The promtool test file for the rules built from ``cfg``, ``runbook_url`` and
    ``report_base_url`` (the flags users give ``stormotel dashboards`` move the series and
    expectations along: with a base, every alert with a ``job_id`` expects its report link)."""
    cfg = cfg or Settings()
    tests = [_healthy_job(), _memory_pressure(cfg), _fast_leak(), _slow_leak(), _oom(),
             _lifecycle(), _stalled(), _dropping_samples(), _peak_over_estimate(cfg),
             _analyzer(), _first_cause(), _dcgm_generations()]
    for test in tests:
        for case in test["alert_rule_test"]:
            for alert in case["exp_alerts"]:
                link = alert["exp_annotations"]["runbook_url"]  # (a dict may recur)
                if link.startswith(DEFAULT_RUNBOOK_URL + "#"):
                    alert["exp_annotations"]["runbook_url"] = runbook_url + link.removeprefix(
                        DEFAULT_RUNBOOK_URL)
                job_id = alert.get("exp_labels", {}).get(schema.ATTR_JOB_ID)
                if report_base_url and job_id:
                    alert["exp_annotations"][schema.ANNOTATION_REPORT_URL] = (
                        f"{report_base_url.rstrip('/')}/jobs/{quote_plus(job_id)}/")
    return {"rule_files": [f"../{RULES_FILE}"], "evaluation_interval": "15s", "tests": tests}


def rule_tests_yaml(cfg: Settings | None = None, runbook_url: str = DEFAULT_RUNBOOK_URL,
                    report_base_url: str | None = None) -> str:
    return generated_yaml("dashboards/rule_tests.py", rule_tests, cfg, runbook_url,
                          report_base_url)
