"""The analyzer against a real VictoriaMetrics at cluster scale, beside the TSDB's own time.

    .venv/bin/python benchmarks/bench_tsdb_scale.py --ranks 1024 --hours 6
    .venv/bin/python benchmarks/bench_tsdb_scale.py --ranks 10000 --hours 1

A VictoriaMetrics (as the test fixture starts it: ``GOMAXPROCS=1``, ``-search.latencyOffset=0s``,
default limits otherwise) gets ``ranks`` x ``hours`` of the 14 series a tracker exports per rank
at a 15 s scrape interval (9 memory gauges incl. the rolling peaks, step, OOM counter, sampling
interval, estimate, rank info), with realistic differences: staggered starts, per-rank scrape
offsets, noise, one rank that leaks, one rank that rises first. Ingest is the JSON-lines import
(``/api/v1/import``) in parallel; the data dir is cached under ``benchmarks/out/`` (fixed
timestamps, so the cache stays valid).

Then ``load_prometheus`` + ``analyze`` + the text summary (what ``stormotel analyze`` prints by
default) run in this process (wall, CPU, peak RSS; the JSON report's serialisation, for
``--format json``, is timed beside it as ``json_report_cpu_s``), every HTTP
request they make is recorded, and the recorded requests are replayed with the same concurrency
by a plain client that only reads the bodies: the TSDB's own time to answer the same queries,
once on the VictoriaMetrics the analyzer warmed (``tsdb_s``) and once on a freshly started one
(``tsdb_fresh_s``: the state the analyzer's first run met). The analyzer runs twice: first
against the fresh TSDB (``analyzer_wall_s``, like for like with ``tsdb_fresh_s``), then again
on the warmed one (``analyzer_warm_wall_s``, like for like with ``tsdb_s``).

Bulk reads (issue 41): by default the analyzer reads raw series through the bulk API the TSDB
offers (``read_api`` in the output: ``vm_native``, ``vm_export`` or ``remote_read``). The
baseline stays the query API: a second run with ``--tsdb-read query`` records the query API's
requests for the same job, and those are what ``tsdb_s``/``tsdb_fresh_s`` replay
(``tsdb_bulk_requests_s``: the bulk run's own requests replayed); the two runs must read the
same Timeline. ``--tsdb prometheus`` runs a real Prometheus 2.42 instead (ingest by remote
write, 20 minutes of every series at a time, ending at the time of ingest: its head takes recent
samples only).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import pickle
import resource
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.http import HttpSettings, make_client
from stormotel.analyzers.sinks import prompb, remote_write
from stormotel.analyzers.sources.bulk_read import READ_APIS
from stormotel.analyzers.sources.prometheus import (
    DEFAULT_CONCURRENCY,
    LoadOutcome,
    QueryWindow,
    load_prometheus,
)
from stormotel.analyzers.summary import render_summary
from stormotel.analyzers.timeline import Timeline

from stormotel import schema
from tests import servers

OUT = Path(__file__).resolve().parent / "out"
#: Fixed data start (2026-11-01T00:00:00Z) so a cached data dir answers the same window.
START_MS = 1_793_491_200_000
SCRAPE_MS = 15_000
JOB = "bench-scale"
GiB = 2**30
LEAK_RANK, FIRST_RANK = 7, 3


def _series_of_rank(rank: int, ranks: int, n: int) -> list[bytes]:
    """The 14 JSON lines of one rank (``/api/v1/import`` format)."""
    return [_json_line(name, labels, t, v)
            for name, labels, t, v in _columns_of_rank(rank, ranks, n)]


def _json_line(name: str, labels: dict[str, str], t: np.ndarray, v: np.ndarray) -> bytes:
    metric = json.dumps({"__name__": name, **labels}, separators=(",", ":"))
    return (f'{{"metric":{metric},"values":[{",".join(map(str, v.tolist()))}],'
            f'"timestamps":[{",".join(map(str, t.tolist()))}]}}'.encode())


def _columns_of_rank(rank: int, ranks: int, n: int, start_ms: int = START_MS
                     ) -> list[tuple[str, dict[str, str], np.ndarray, np.ndarray]]:
    """The 14 series of one rank as (name, labels, t_ms, values)."""
    rng = np.random.default_rng(rank)
    stagger = (rank % 16) * SCRAPE_MS  # ranks start up to 4 min apart
    offset = (rank * 977) % SCRAPE_MS  # each target scraped at its own phase
    k = n - rank % 16
    t = start_ms + stagger + offset + SCRAPE_MS * np.arange(k, dtype=np.int64)
    rel = (t - start_ms) / 1000.0  # the job's clock: every rank started together
    # Steady training (the job began before the data), then every rank's memory rises by
    # 4 GiB 21 minutes in, one rank a minute before the others (the planted first cause).
    alloc = 30 * GiB + rng.normal(0, 64 * 2**20, k)
    rise_at = 1200.0 if rank == FIRST_RANK else 1260.0
    alloc += np.where(rel >= rise_at, 4 * GiB, 0.0)
    if rank == LEAK_RANK:
        alloc += rel * (20 * GiB / max(rel[-1], 1.0))
    alloc = np.maximum(alloc, 0).astype(np.int64)
    reserved = alloc + 2 * GiB
    used = reserved + GiB
    total = np.full(k, 80 * GiB, np.int64)
    step = (rel // 2.0).astype(np.int64)
    labels = {schema.ATTR_JOB_ID: JOB, schema.ATTR_RANK: str(rank),
              schema.ATTR_LOCAL_RANK: str(rank % 8), schema.ATTR_WORLD_SIZE: str(ranks),
              schema.ATTR_HOST: f"node-{rank // 8}", schema.ATTR_GPU: str(rank % 8),
              "job": "stormotel", "instance": f"node-{rank // 8}:{9400 + rank % 8}"}
    cols: dict[str, np.ndarray] = {
        schema.FIELD_METRICS["allocated"].prom: alloc,
        schema.FIELD_PEAK_METRICS["allocated"].prom: alloc + 2**20,
        schema.FIELD_METRICS["reserved"].prom: reserved,
        schema.FIELD_PEAK_METRICS["reserved"].prom: reserved + 2**20,
        schema.FIELD_METRICS["active"].prom: alloc - 2**20,
        schema.FIELD_METRICS["device_used"].prom: used,
        schema.FIELD_PEAK_METRICS["device_used"].prom: used + 2**20,
        schema.FIELD_METRICS["device_total"].prom: total,
        schema.FIELD_METRICS["device_free"].prom: total - used,
        schema.STEP.prom: step,
        schema.OOMS.prom: np.zeros(k, np.int64),
        schema.SAMPLING_INTERVAL.prom: np.full(k, 1, np.int64),
        schema.ESTIMATE.prom: np.full(k, 40 * GiB, np.int64),
        schema.RANK_INFO.prom: np.ones(k, np.int64),
    }
    return [(name, labels, t, v) for name, v in cols.items()]


def ingest_prometheus(url: str, ranks: int, hours: float, start_ms: int) -> int:
    """Remote write into Prometheus, 20 minutes of every series at a time (the head only takes
    samples within an hour of its newest)."""
    n = int(hours * 3600_000 / SCRAPE_MS)
    per_hour = 1200_000 // SCRAPE_MS
    cols = {r: _columns_of_rank(r, ranks, n, start_ms) for r in range(ranks)}
    with httpx.Client(timeout=600) as client:
        for h in range(math.ceil(hours * 3)):
            def post(first: int, h: int = h) -> None:
                req = prompb.WriteRequest()
                for r in range(first, min(ranks, first + 64)):
                    for name, labels, t, v in cols[r]:
                        lo, hi = np.searchsorted(t, [start_ms + h * per_hour * SCRAPE_MS,
                                                     start_ms + (h + 1) * per_hour * SCRAPE_MS])
                        ts = req.timeseries.add()
                        for k, x in sorted({**labels, "__name__": name}.items()):
                            ts.labels.add(name=k, value=x)
                        ts.samples.extend(prompb.Sample(value=float(x), timestamp=int(y))
                                          for y, x in zip(t[lo:hi].tolist(),
                                                          v[lo:hi].tolist(), strict=True))
                client.post(url + "/api/v1/write", content=remote_write.compress(
                    req.SerializeToString()), headers=remote_write.HEADERS).raise_for_status()
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(post, range(0, ranks, 64)))
    return n


def ingest(url: str, ranks: int, hours: float, workers: int = 2) -> int:
    n = int(hours * 3600_000 / SCRAPE_MS)
    batch = 64

    def post(first: int) -> int:
        lines = [ln for r in range(first, min(ranks, first + batch))
                 for ln in _series_of_rank(r, ranks, n)]
        body = b"\n".join(lines) + b"\n"
        httpx.post(url + "/api/v1/import", content=body, timeout=600).raise_for_status()
        return sum(ln.count(b",") for ln in lines)

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(post, range(0, ranks, batch)))
    httpx.get(url + "/internal/force_flush", timeout=60)
    return n


def data_dir(ranks: int, hours: float, tsdb: str = "victoriametrics") -> Path:
    return OUT / f"{'vm' if tsdb == 'victoriametrics' else 'prom'}-{ranks}x{hours:g}h"


def start_tsdb(kind: str, work: Path) -> contextlib.AbstractContextManager[servers.Server]:
    """The TSDB as the tests start it (VictoriaMetrics' rollup cache off: the replay must not
    be answered from what the analyzer's run cached)."""
    if kind == "prometheus":
        return servers.prometheus(work)
    return servers.victoriametrics(work, ["-search.disableCache"])


Call = tuple[str, str, bytes, str]


def _replay(url: str, calls: list[Call], concurrency: int) -> float:
    """The recorded requests again (with the ``Accept-Encoding`` the analyzer sent: a gzip
    answer costs the TSDB more than half of its time), bodies read but never decoded: the
    TSDB's own time."""
    with httpx.Client(timeout=600, limits=httpx.Limits(max_connections=concurrency)) as c:
        def one(call: Call) -> int:
            method, target, body, encoding = call
            headers = {"accept-encoding": encoding}
            if body:
                headers["content-type"] = "application/x-www-form-urlencoded"
            r = c.request(method, target, content=body, headers=headers)
            return len(r.content)

        t0 = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            size = sum(pool.map(one, calls))
        took = time.perf_counter() - t0
    print(f"replayed {len(calls)} requests, {size / 2**20:.0f} MiB of answers", flush=True)
    return took


def cpu_of(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timeline_digest(timeline: Timeline, notes: bool = True) -> str:
    """A hash of every rank's samples, fields and markers: two versions of the reader that give
    the same digest built the same Timeline (taken after the timed run)."""
    h = hashlib.sha256()
    for rank in timeline.rank_ids:
        s = timeline.ranks[rank]
        h.update(repr((rank, s.identity)).encode())
        h.update(s.t_ns.tobytes())
        for name in sorted(s.values):
            h.update(name.encode())
            h.update(np.ascontiguousarray(s.values[name]).tobytes())
        m = s.markers
        h.update(m.start_ns.tobytes())
        h.update(m.end_ns.tobytes())
        h.update(repr((m.name.tolist(), m.kind.tolist(), m.attrs)).encode())
    h.update(repr((sorted(timeline.skipped.items()), timeline.notes if notes else ())).encode())
    return h.hexdigest()


@dataclass
class _Run:
    timeline: Timeline
    outcome: LoadOutcome
    report: Any
    digest: str
    load_s: float
    wall: float
    cpu: float
    rss_load: float
    ru: resource.struct_rusage


def _analyzer_run(url: str, window: QueryWindow, settings: HttpSettings, concurrency: int,
                  calls: list[Call], read_api: str = "auto") -> _Run:
    """``load_prometheus`` + ``analyze`` timed in this process, each request appended to
    ``calls`` (to be replayed)."""
    client = make_client(settings)
    timings: list[tuple[float, str]] = []
    client.event_hooks["request"] = [lambda r: calls.append(
        (r.method, str(r.url), r.read(), r.headers.get("accept-encoding", ""))
    ) or r.extensions.setdefault("t0", time.monotonic())]
    client.event_hooks["response"] = [lambda r: timings.append(
        (time.monotonic() - r.request.extensions["t0"],
         r.request.read().decode(errors="replace")[:200]))]
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    timeline, outcome = load_prometheus([url], window, settings=settings, client=client,
                                        concurrency=concurrency, read_api=read_api)
    t_load = time.perf_counter() - t0
    rss_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report = analyze(timeline)
    render_summary(report)  # what `stormotel analyze` prints by default (--format text)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    client.close()
    cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    slow = sorted(timings, reverse=True)[:5]
    print(f"analyzer run ({read_api}): {wall:.2f} s wall, {cpu:.2f} s CPU; slowest requests:",
          [(round(d, 2), u[:90]) for d, u in slow], flush=True)
    return _Run(timeline, outcome, report, timeline_digest(timeline), t_load, wall, cpu,
                rss_load, ru1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--hours", type=float, default=6.0)
    ap.add_argument("--tsdb", choices=("victoriametrics", "prometheus"),
                    default="victoriametrics")
    ap.add_argument("--read-api", choices=READ_APIS, default="auto",
                    help="auto: the bulk API the TSDB offers (remote read, native export, "
                    "export), or one forced (export: the JSON export, as before the native "
                    "reader); the baseline is always the query API's own requests, replayed")
    ap.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    ap.add_argument("--reingest", action="store_true", help="drop the cached data dir first")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--encoding", choices=("gzip", "identity"), default="gzip",
                    help="gzip: answers compressed, as the analyzer asks a remote TSDB (the "
                    "deployed case); identity: uncompressed, as it asks one on loopback")
    ap.add_argument("--report", type=Path, help="write the analysis report (JSON) here, to "
                    "compare two versions' answers")
    ap.add_argument("--save-timeline", type=Path, help="pickle the Timeline read here (the "
                    "input of benchmarks/bench_analyze_scale.py)")
    args = ap.parse_args()
    work = data_dir(args.ranks, args.hours, args.tsdb)
    if args.reingest and work.exists():
        shutil.rmtree(work)
    fresh = not (work / "ingested").exists()
    n = int(args.hours * 3600_000 / SCRAPE_MS)
    with start_tsdb(args.tsdb, work) as db:
        if fresh:
            t0 = time.perf_counter()
            if args.tsdb == "prometheus":  # the head takes recent samples only: ends now
                start_ms = (int(time.time() * 1000) - (n + 40) * SCRAPE_MS) // 60_000 * 60_000
                ingest_prometheus(db.url, args.ranks, args.hours, start_ms)
            else:
                start_ms = START_MS
                ingest(db.url, args.ranks, args.hours)
            (work / "ingested").write_text(f"{start_ms}\n")
            print(f"ingested in {time.perf_counter() - t0:.1f} s", flush=True)
        text = (work / "ingested").read_text().strip()
        start_ms = int(text) if text.isdigit() else START_MS
        window = QueryWindow(JOB, (start_ms - 60_000) * 10**6,
                             (start_ms + (n + 40) * SCRAPE_MS) * 10**6)
        calls: list[Call] = []
        # The TSDB runs on loopback here; a deployed analyzer reads a remote TSDB.
        settings = HttpSettings(timeout_s=600, identity_on_loopback=args.encoding == "identity")
        db_cpu0 = cpu_of(db.proc.pid)
        run = _analyzer_run(db.url, window, settings, args.concurrency, calls, args.read_api)
        db_cpu_run = cpu_of(db.proc.pid) - db_cpu0
        # The baseline: the query API's own requests for the same job (recorded from a run
        # that reads through it), answered by the TSDB with nothing decoded.
        qcalls = calls
        query_run = run
        if args.read_api != "query":
            qcalls = []
            query_run = _analyzer_run(db.url, window, settings, args.concurrency, qcalls,
                                      "query")
            if timeline_digest(query_run.timeline, notes=False) != \
                    timeline_digest(run.timeline, notes=False):
                print("the bulk API read a different Timeline than the query API",
                      file=sys.stderr)
                return 1
        db_cpu0 = cpu_of(db.proc.pid)
        tsdb = _replay(db.url, qcalls, args.concurrency)
        tsdb_cpu = cpu_of(db.proc.pid) - db_cpu0
        tsdb_bulk = _replay(db.url, calls, args.concurrency) if qcalls is not calls else tsdb
        # Like for like with the warm replay: the analyzer once more, on the TSDB it warmed.
        warm = _analyzer_run(db.url, window, settings, args.concurrency, [], args.read_api)
        if warm.digest != run.digest:
            print("the warm run read a different Timeline than the fresh one", file=sys.stderr)
            return 1
        timeline, outcome, report = run.timeline, run.outcome, run.report
        digest, wall, cpu, ru1 = run.digest, run.wall, run.cpu, run.ru
        t_load, rss_load = run.load_s, run.rss_load
        t_json = time.process_time()
        report_json = report.to_json()  # --format json: the whole report, beside the total
        t_json = time.process_time() - t_json
        if args.report:
            args.report.write_text(report_json)
        if args.save_timeline:
            with args.save_timeline.open("wb") as f:
                pickle.dump(timeline, f, protocol=5)
        size = sum(f.stat().st_size for f in (work / "data").rglob("*") if f.is_file())
        run_url = db.url
    # The analyzer's first run met a freshly started TSDB (its caches empty); the replay above
    # met one warmed by that run. The same queries once more against a fresh start give the
    # like-for-like figure for the first run.
    with start_tsdb(args.tsdb, work) as db:
        db_cpu0 = cpu_of(db.proc.pid)
        fresh_calls = [(m, db.url + url.removeprefix(run_url), body, enc)
                       for m, url, body, enc in qcalls]
        tsdb_fresh = _replay(db.url, fresh_calls, args.concurrency)
        tsdb_fresh_cpu = cpu_of(db.proc.pid) - db_cpu0
    rss = ru1.ru_maxrss / 1024
    leaders = sorted({(i["leader"], i["confidence"]) for i in report.cross_rank.incidents
                      if i.get("leader") is not None})
    encodings = sorted({c[3] for c in calls})
    present = len(timeline.rank_ids)
    row = {"tsdb": args.tsdb, "read_api": timeline.meta["prometheus"]["read_api"],
           "ranks": args.ranks, "ranks_present": present, "hours": args.hours,
           "series": args.ranks * 14, "load": os.getloadavg()[0],
           "encoding": args.encoding, "accept_encoding_sent": encodings,
           "samples_read": timeline.total_samples(), "requests": len(calls),
           "query_api_requests": len(qcalls),
           "queries": outcome.queries, "partial": outcome.partial,
           "load_s": round(t_load, 2), "analyzer_wall_s": round(wall, 2),
           "query_api_analyzer_wall_s": round(query_run.wall, 2),
           "json_report_cpu_s": round(t_json, 2),
           "analyzer_warm_wall_s": round(warm.wall, 2),
           "analyzer_warm_cpu_s": round(warm.cpu, 2),
           "ratio_wall_warm": round(warm.wall / tsdb, 2),
           "ratio_cpu_warm": round(warm.cpu / tsdb_cpu, 2),
           "analyzer_cpu_s": round(cpu, 2), "tsdb_s": round(tsdb, 2),
           "tsdb_bulk_requests_s": round(tsdb_bulk, 2),
           "tsdb_cpu_s": round(tsdb_cpu, 2), "tsdb_cpu_during_run_s": round(db_cpu_run, 2),
           "ratio_wall": round(wall / tsdb, 2), "ratio_cpu": round(cpu / tsdb_cpu, 2),
           "tsdb_fresh_s": round(tsdb_fresh, 2), "tsdb_fresh_cpu_s": round(tsdb_fresh_cpu, 2),
           "ratio_wall_fresh": round(wall / tsdb_fresh, 2),
           "ratio_cpu_fresh": round(cpu / tsdb_fresh_cpu, 2),
           "peak_rss_mib": round(rss), "peak_rss_after_load_mib": round(rss_load),
           "data_mib": round(size / 2**20, 1), "incident_leaders": leaders,
           "leak_rank": LEAK_RANK, "first_rank": FIRST_RANK, "timeline_sha256": digest}
    print(json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps(row, indent=2))
    return 0 if present == args.ranks else 1


if __name__ == "__main__":
    sys.exit(main())
