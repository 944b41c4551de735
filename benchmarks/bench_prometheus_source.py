"""How fast the analyzer job reads a job back from a real Prometheus over the HTTP API.

    .venv/bin/python benchmarks/bench_prometheus_source.py [--ranks 16,64,256] [--minutes 30]
        [--interval-ms 1000] [--repeats 3] [--json out.json]

For each rank count, a fresh Prometheus 2.42 (as the test fixture starts it, ``GOMAXPROCS=1``)
gets ``minutes`` of 4 memory fields per rank at ``interval-ms`` by remote write (recent
timestamps: Prometheus refuses samples older than its head block). Then ``load_prometheus``
(discovery, step probe, concurrent chunked ``query_range``, Timeline build) is timed, median of
``repeats``, followed by the analyzer facade on the result. Results and the command are recorded
in docs/benchmarks.md ("Analyzer job: Prometheus source").
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.http import HttpSettings
from stormotel.analyzers.sinks import remote_write
from stormotel.analyzers.sources.prometheus import QueryWindow, load_prometheus

from stormotel import schema
from tests import servers

FIELDS = ("allocated", "reserved", "device_used", "device_total")


def plant(url: str, job_id: str, ranks: int, minutes: float, interval_ms: int) -> tuple[int, int]:
    end = int(time.time() * 1000) - 5000
    n = int(minutes * 60_000 / interval_ms)
    t = end - interval_ms * np.arange(n)[::-1]
    rng = np.random.default_rng(0)
    with httpx.Client(timeout=60) as client:
        for rank in range(ranks):
            base = 20 * 2**30 + rng.normal(0, 2**20, n)
            labels = {schema.ATTR_JOB_ID: job_id, schema.ATTR_RANK: str(rank),
                      schema.ATTR_WORLD_SIZE: str(ranks), schema.ATTR_HOST: f"node-{rank // 8}",
                      schema.ATTR_GPU: str(rank % 8)}
            for f in FIELDS:
                v = np.full(n, 80.0 * 2**30) if f == "device_total" else base + FIELDS.index(f)
                body = remote_write.encode_arrays(schema.FIELD_METRICS[f].prom, labels, t, v)
                r = client.post(url + "/api/v1/write", content=body, headers=remote_write.HEADERS)
                r.raise_for_status()
    return int(t[0]) * 1_000_000, int(t[-1]) * 1_000_000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="16,64,256")
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--interval-ms", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    print("| ranks | samples | queries | step | load (median) | samples/s | analyze | max RSS "
          "| load, gzip on loopback |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for ranks in (int(x) for x in args.ranks.split(",")):
        with tempfile.TemporaryDirectory() as d, servers.prometheus(Path(d) / "prom") as prom:
            start_ns, end_ns = plant(prom.url, "bench", ranks, args.minutes, args.interval_ms)
            window = QueryWindow("bench", start_ns - 10**9, end_ns + 10**9)
            times, gzip_times = [], []
            for _ in range(args.repeats):  # alternate, so machine noise hits both alike
                t0 = time.perf_counter()
                load_prometheus([prom.url], window,
                                settings=HttpSettings(identity_on_loopback=False))
                gzip_times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                timeline, outcome = load_prometheus([prom.url], window)
                times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            analyze(timeline)
            t_an = time.perf_counter() - t0
        load = statistics.median(times)
        samples = timeline.total_samples() * len(FIELDS)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        row = {"ranks": ranks, "samples": samples, "queries": outcome.queries,
               "step_s": outcome.step_s, "load_s": round(load, 3),
               "samples_per_s": round(samples / load), "analyze_s": round(t_an, 3),
               "max_rss_mib": round(rss),
               "load_gzip_s": round(statistics.median(gzip_times), 3)}
        rows.append(row)
        print(f"| {ranks} | {samples:,} | {outcome.queries} | {outcome.step_s:g} s | "
              f"{load:.2f} s | {samples / load:,.0f} | {t_an:.2f} s | {rss:.0f} MiB | "
              f"{row['load_gzip_s']:.2f} s |",
              flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
