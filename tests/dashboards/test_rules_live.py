"""The shipped rules on a 2048-rank job in a REAL Prometheus, where promtool's unit-test engine
refuses the sample counts (it loads at most 10,000 samples per query).

Two 2048-rank jobs are remote-written into Prometheus 2.42 (55 minutes at one sample a minute,
about 1.4 million samples): ``big-ok`` is healthy (ranks start over 10 minutes, NCCL init adds 1
GiB of gap once 3 minutes after each start, ranks 1.. stop cleanly one after another from minute
30 to 35 with their stop timestamps while rank 0 writes a checkpoint until the end), ``big-bad``
fails (rank 1337 dies at minute 10, rank 99's gap drifts towards a full device within hours (a
warning, not a page), rank 7 has its first OOM at minute 50). The shipped file's recording
rules are evaluated at every minute the alerts are read and written back, as Prometheus' rule
manager records them (each once, where inlining them into every alert computed the gap and
device-usage chains once per alert and twice within each, at 2,048 ranks); each alert
expression of the file is then evaluated with the query API: for the healthy job at every
minute of its start, its stop and its tail (no alert even pending), for the failing one over
its own ``for:`` window (an alert fires when its expression held at every minute of it).
Counted by severity and job: the healthy job pages nobody, the failing one once per problem.

Each job lives in a Prometheus of its own, so every query reads one job's 2048 ranks, not both
jobs' (the suite's longest test took five minutes on a busy machine with both in one). The
healthy job's last window ends at the minute the failing job's alerts are read, so "no alert
of the healthy job even pending then" already says it fires nothing at that minute.
"""

from __future__ import annotations

import itertools
import struct
import time
from collections import Counter
from typing import Any

import httpx
import pytest
import yaml
from stormotel.analyzers.sinks import prompb, remote_write
from stormotel.analyzers.sources import remote_read as remote_read_source

from stormotel import schema
from tests import servers
from tests.dashboards.exprs import RULES_PATH

pytestmark = pytest.mark.servers
WORLD = 2048
MINUTES = 55
GiB = 1024**3
MiB = 1024**2
LIMIT = 80 * GiB
#: Minutes (first, last) at which no alert of the healthy job may even be pending: every minute
#: of its staggered start, of its staggered clean stop, and of the end of its checkpoint tail.
HEALTHY_WINDOWS = ((1, 13), (29, 38), (50, MINUTES - 1))
#: Series per remote-write request.
BATCH = 512
#: Seconds one range query may take, in Prometheus and in the client: a query over 2,048
#: ranks timed out at Prometheus' default 2 minutes on the shared machine at load 35.
QUERY_TIMEOUT_S = 400
#: Prometheus' staleness marker (``value.StaleNaN``): a series a rule stopped returning.
STALE_NAN = struct.unpack("<d", struct.pack("<Q", remote_read_source.STALE_NAN_BITS))[0]


def _labels(job: str, namespace: str, rank: int) -> dict[str, str]:
    return {schema.ATTR_JOB_ID: job, schema.ATTR_RANK: str(rank),
            schema.ATTR_LOCAL_RANK: str(rank % 8), schema.ATTR_WORLD_SIZE: str(WORLD),
            schema.ATTR_HOST: f"node-{rank // 8}", schema.ATTR_GPU: str(rank % 8),
            schema.LABEL_NAMESPACE: namespace}


def _rank_series(job: str, rank: int, t0_s: float
                 ) -> list[tuple[str, list[tuple[int, float]]]]:
    """(name, [(minute, value)]) for one rank of one job. ``big-ok`` starts staggered (rank r at
    minute r * 10 // 2048) and its ranks 1.. stop cleanly one after another from minute 30 to
    35, each leaving its stop timestamp in its last scrape."""
    bad = job == "big-bad"
    start = rank * 10 // WORLD if job == "big-ok" else 0
    stop = MINUTES
    if job == "big-ok" and rank != 0:
        stop = 30 + rank * 5 // WORLD  # staggered clean stop; rank 0 checkpoints on
    if bad and rank == 1337:
        stop = 10  # dies
    minutes = range(start, stop + 1)
    out: list[tuple[str, list[tuple[int, float]]]] = []
    out.append((schema.SAMPLES.prom, [(m, 600.0 * (m - start)) for m in minutes]))
    out.append((schema.TRACKER_START.prom, [(m, t0_s + 60.0 * start) for m in minutes]))
    out.append((schema.TRACKER_STOP_REPORTED.prom, [(m, 1.0) for m in minutes]))
    out.append((schema.STEP.prom, [(m, 30.0 * (m - start)) for m in minutes]))
    if job == "big-ok" and stop < MINUTES:
        out.append((schema.TRACKER_STOP.prom, [(stop, t0_s + 60.0 * stop)]))
    if bad and rank == 99:  # drifts 3 MiB/min: 2 hours of it exceed the headroom
        gap = [(m, GiB + 3 * MiB * m) for m in minutes]
        used = [(m, LIMIT - 440 * MiB + 3 * MiB * m) for m in minutes]
    else:  # NCCL init: +1 GiB once, 3 minutes after the rank's start
        gap = [(m, GiB if m < start + 3 else 2 * GiB) for m in minutes]
        used = [(m, 60 * GiB if m < start + 3 else 61 * GiB) for m in minutes]
    out += [(schema.GAP.prom, gap), (schema.DEVICE_USED.prom, used),
            (schema.DEVICE_LIMIT.prom, [(m, float(LIMIT)) for m in minutes])]
    if bad and rank == 7:  # its OOM counter appears, at 1, at minute 50
        out.append((schema.OOMS.prom, [(m, 1.0) for m in minutes if m >= 50]))
    else:
        out.append((schema.OOMS.prom, [(m, 0.0) for m in minutes]))
    return out


JOBS = (("big-ok", "train"), ("big-bad", "ml"))


def _write_job(url: str, job: str, namespace: str, t0_ms: int) -> int:
    """Remote-write one job, BATCH series per request; returns the sample count."""
    n = 0
    req = prompb.WriteRequest()
    with httpx.Client(timeout=60) as client:
        def flush() -> None:
            r = client.post(url, content=remote_write.compress(req.SerializeToString()),
                            headers=remote_write.HEADERS)
            assert r.status_code in (200, 204), r.text
            del req.timeseries[:]

        for rank in range(WORLD):
            for name, points in _rank_series(job, rank, t0_ms / 1000):
                ts = req.timeseries.add()
                for k, v in sorted({**_labels(job, namespace, rank),
                                    "__name__": name}.items()):
                    ts.labels.add(name=k, value=v)
                add = ts.samples.add  # in place: ~2x less CPU than building Sample objects
                for m, v in points:
                    add(value=v, timestamp=t0_ms + m * 60_000)
                n += len(points)
                if len(req.timeseries) >= BATCH:
                    flush()
        if req.timeseries:
            flush()
    return n


def _rules() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The shipped file's recording rules (in file order: each reads only those above it) and
    its alerts."""
    rules = [r for g in yaml.safe_load(RULES_PATH.read_text())["groups"] for r in g["rules"]]
    return [r for r in rules if "record" in r], [r for r in rules if "alert" in r]


def _record(client: httpx.Client, url: str, records: list[dict[str, Any]],
            windows: list[tuple[float, float]]) -> int:
    """Evaluate each recording rule at every minute of each window and write what it returned
    back under its name, with a staleness marker at the minute a series stops, as Prometheus'
    rule manager stores a rule's output (the alerts then read the recorded series, as they do
    in production). The alerts read recorded series only as instant vectors, at these same
    minutes, so each reads exactly what the rule returned there. Returns the series written."""
    assert all(b[0] - a[1] > 300 for a, b in itertools.pairwise(windows)), \
        "windows closer than the 5-minute lookback would read across the gap"
    written = 0
    for rule in records:
        req = prompb.WriteRequest()
        for start, end in windows:
            r = client.get(url + "/api/v1/query_range", params={
                "query": rule["expr"], "start": start, "end": end, "step": 60},
                timeout=QUERY_TIMEOUT_S)
            body = r.json()
            assert body["status"] == "success", (rule["record"], body)
            minutes = [round((start + 60 * i) * 1000) for i in range(int(end - start) // 60 + 1)]
            seen: set[tuple[tuple[str, str], ...]] = set()
            for found in body["data"]["result"]:
                labels = {**found["metric"], "__name__": rule["record"]}
                key = tuple(sorted(labels.items()))
                assert key not in seen, (rule["record"], labels)  # the rule manager refuses it
                seen.add(key)
                values = {round(float(t) * 1000): float(v) for t, v in found["values"]}
                ts = req.timeseries.add()
                for k, v in key:
                    ts.labels.add(name=k, value=v)
                before = False
                for t in minutes:
                    if t in values:
                        ts.samples.add(value=values[t], timestamp=t)
                    elif before:
                        ts.samples.add(value=STALE_NAN, timestamp=t)
                    before = t in values
        written += len(req.timeseries)
        if req.timeseries:
            w = client.post(url + "/api/v1/write", timeout=60, headers=remote_write.HEADERS,
                            content=remote_write.compress(req.SerializeToString()))
            assert w.status_code in (200, 204), w.text
    return written


def _seconds(duration: str) -> int:
    return int(duration[:-1]) * {"s": 1, "m": 60, "h": 3600}[duration[-1]]


def _firing(client: httpx.Client, url: str, alert: dict[str, Any], at_s: float
            ) -> list[dict[str, str]]:
    """Label sets for which the alert's expression held at every minute of its ``for``."""
    hold = _seconds(alert["for"])
    r = client.get(url + "/api/v1/query_range",
                   params={"query": alert["expr"], "start": at_s - hold, "end": at_s,
                           "step": 60}, timeout=QUERY_TIMEOUT_S)
    body = r.json()
    assert body["status"] == "success", (alert["alert"], body)
    steps = hold // 60 + 1
    return [s["metric"] for s in body["data"]["result"] if len(s["values"]) == steps]


def _ever_true(client: httpx.Client, url: str, alert: dict[str, Any], start_s: float,
               end_s: float, job: str) -> list[dict[str, str]]:
    """Label sets of ``job`` for which the alert's expression held at any minute: pending."""
    r = client.get(url + "/api/v1/query_range",
                   params={"query": alert["expr"], "start": start_s, "end": end_s,
                           "step": 60}, timeout=QUERY_TIMEOUT_S)
    body = r.json()
    assert body["status"] == "success", (alert["alert"], body)
    return [s["metric"] for s in body["data"]["result"]
            if s["metric"].get(schema.ATTR_JOB_ID) == job]


@pytest.mark.timeout(900)  # ~2 min alone; past the suite's 300 s while eight jobs share 2 cores
def test_2048_ranks_healthy_pages_nobody_failing_pages_once_per_problem(tmp_path) -> None:
    now_ms = int(time.time() * 1000) // 60_000 * 60_000
    t0_ms = now_ms - MINUTES * 60_000
    assert HEALTHY_WINDOWS[-1][1] == MINUTES - 1  # the healthy job's tail covers ``at``
    slow = [f"--query.timeout={QUERY_TIMEOUT_S}s"]
    with servers.prometheus(tmp_path / "ok", extra_args=slow) as ok, \
            servers.prometheus(tmp_path / "bad", extra_args=slow) as bad, httpx.Client() as client:
        samples = sum(_write_job(prom.url + "/api/v1/write", job, namespace, t0_ms)
                      for prom, (job, namespace) in zip((ok, bad), JOBS, strict=True))
        assert samples > 1_300_000
        at = (t0_ms + (MINUTES - 1) * 60_000) / 1000
        records, alerts = _rules()
        healthy = [(t0_ms / 1000 + 60 * first, t0_ms / 1000 + 60 * last)
                   for first, last in HEALTHY_WINDOWS]
        longest = max(_seconds(a["for"]) for a in alerts)
        assert _record(client, ok.url, records, healthy) > WORLD
        # Rank 5 stopped at minute 30: recorded active up to minute 32, then a staleness
        # marker, so at 36 it is gone (without the marker the lookback would still return it).
        active = {}
        for minute in (32, 36):
            active[minute] = client.get(ok.url + "/api/v1/query", params={
                "query": f'{schema.REC_RANK_ACTIVE}{{job_id="big-ok", rank="5"}}',
                "time": t0_ms / 1000 + 60 * minute}).json()["data"]["result"]
        assert len(active[32]) == 1 and active[36] == [], active
        assert _record(client, bad.url, records, [(at - longest, at)]) > WORLD
        fired: Counter[tuple[str, str, str]] = Counter()
        for alert in alerts:
            for first, last in HEALTHY_WINDOWS:  # start-up, wind-down, checkpoint tail
                pending = _ever_true(client, ok.url, alert, t0_ms / 1000 + 60 * first,
                                     t0_ms / 1000 + 60 * last, "big-ok")
                assert not pending, (alert["alert"], first, pending[:3])
            for labels in _firing(client, bad.url, alert, at):
                fired[(labels.get(schema.ATTR_JOB_ID, "?"), alert["alert"],
                       alert["labels"]["severity"])] += 1
                assert labels.get(schema.LABEL_NAMESPACE) == \
                    {"big-ok": "train", "big-bad": "ml"}[labels[schema.ATTR_JOB_ID]]
    assert fired == Counter({
        ("big-bad", "StormotelRankStoppedReporting", "critical"): 1,
        ("big-bad", "StormotelRankOutOfMemory", "critical"): 1,
        ("big-bad", "StormotelGapDrift", "warning"): 1,
    }), fired
