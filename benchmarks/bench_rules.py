"""Cost of the stormotel recording rules, and what they save the dashboards, at cluster scale.

A real Prometheus gets ``--minutes`` of tracker series for ``--ranks`` ranks (remote write, one
sample per ``--interval`` seconds, rank 0 leaking), loads ``dashboards/rules/stormotel-rules.yml``
and evaluates it every second. Reported: each rule group's evaluation time (Prometheus' own
``evaluationTime``, median over evaluations) and the median latency of the heavier dashboard
queries written raw vs. reading the recorded series.

    .venv/bin/python benchmarks/bench_rules.py [--ranks 64,512] [--minutes 45] [--json out.json]

Results and the exact command are recorded in docs/benchmarks.md ("Dashboards and rules").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cramjam
import httpx
import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stormotel.analyzers.sinks import prompb, remote_write
from stormotel.dashboards import promql

from stormotel import schema
from tests import servers

RULES = Path(__file__).resolve().parents[1] / "dashboards" / "rules" / "stormotel-rules.yml"
GiB = 2**30
QUERIES = {  # name: (raw, recorded)
    "used percent": (f"100 * ({promql.used_ratio()})", f"100 * {schema.REC_DEVICE_USED_RATIO}"),
    "top ranks by gap growth": (f"topk(5, {promql.gap_slope('30m')})",
                                f"topk(5, {schema.REC_GAP_SLOPE})"),
    "time until full": (f"({promql.headroom()}) / ({promql.gap_slope('30m')} > 0)",
                        schema.REC_TIME_TO_FULL),
    "peak / estimate": (promql.peak_over_estimate("1h"), schema.REC_ESTIMATE_RATIO),
}


def _series_for(rank: int, world: int, t_ms: np.ndarray) -> list[tuple[str, dict[str, str],
                                                                     np.ndarray]]:
    labels = {schema.ATTR_JOB_ID: "bench", schema.ATTR_RANK: str(rank),
              schema.ATTR_LOCAL_RANK: str(rank % 8), schema.ATTR_WORLD_SIZE: str(world),
              schema.ATTR_HOST: f"node-{rank // 8}", schema.ATTR_GPU: str(rank % 8)}
    n = len(t_ms)
    leak = np.linspace(0, 4 * GiB, n) if rank == 0 else np.zeros(n)
    gap = 2 * GiB + leak
    used = 50 * GiB + leak
    return [(schema.DEVICE_USED.prom, labels, used),
            (schema.DEVICE_LIMIT.prom, labels, np.full(n, 80.0 * GiB)),
            (schema.GAP.prom, labels, gap),
            (schema.ALLOC_ALLOCATED_PEAK.prom, labels, np.full(n, 40.0 * GiB)),
            (schema.ESTIMATE.prom, labels, np.full(n, 42.0 * GiB)),
            (schema.SAMPLES.prom, labels, np.arange(n) * 150.0)]


def _write(url: str, ranks: int, minutes: int, interval_s: int) -> int:
    now_ms = int(time.time() * 1000)
    t_ms = np.arange(now_ms - minutes * 60_000, now_ms + 1, interval_s * 1000, dtype=np.int64)
    sent = 0
    with httpx.Client(timeout=60) as client:
        for start in range(0, ranks, 16):
            req = prompb.WriteRequest()
            for rank in range(start, min(ranks, start + 16)):
                for name, labels, values in _series_for(rank, ranks, t_ms):
                    ts = req.timeseries.add()
                    for k, v in sorted({**labels, "__name__": name}.items()):
                        ts.labels.add(name=k, value=v)
                    ts.samples.extend(prompb.Sample(value=float(v), timestamp=int(t))
                                      for t, v in zip(t_ms.tolist(), values.tolist(),
                                                      strict=True))
                    sent += len(t_ms)
            body = bytes(cramjam.snappy.compress_raw(req.SerializeToString()))
            client.post(f"{url}/api/v1/write", content=body,
                        headers=remote_write.HEADERS).raise_for_status()
    return sent


def _load_rules(server: servers.Server) -> None:
    path = server.workdir / "prometheus.yml"
    config = yaml.safe_load(path.read_text())
    config["rule_files"] = [str(RULES)]
    path.write_text(yaml.safe_dump(config))
    httpx.post(f"{server.url}/-/reload", timeout=30).raise_for_status()


def _group_eval_ms(url: str, evaluations: int) -> dict[str, float]:
    seen: dict[str, dict[str, float]] = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and \
            (len(seen) < 2 or min(len(v) for v in seen.values()) < evaluations):
        for g in httpx.get(f"{url}/api/v1/rules", timeout=30).json()["data"]["groups"]:
            if g["lastEvaluation"].startswith("0001"):
                continue
            seen.setdefault(g["name"], {})[g["lastEvaluation"]] = g["evaluationTime"] * 1000
        time.sleep(0.5)
    return {name: statistics.median(v.values()) for name, v in seen.items()}


def _query_ms(client: httpx.Client, url: str, expr: str, repeats: int) -> tuple[float, int]:
    times, n = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        body = client.get(f"{url}/api/v1/query", params={"query": expr}).json()
        times.append((time.perf_counter() - t0) * 1000)
        if body["status"] != "success":
            raise SystemExit(f"query failed: {expr}: {body.get('error')}")
        n = len(body["data"]["result"])
    return statistics.median(times), n


def run(ranks: int, minutes: int, interval_s: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, \
            servers.prometheus(Path(tmp), scrape_interval="1s") as prom:
        t0 = time.perf_counter()
        samples = _write(prom.url, ranks, minutes, interval_s)
        write_s = time.perf_counter() - t0
        print(f"  {ranks} ranks: wrote {samples:,} samples in {write_s:.1f}s", file=sys.stderr)
        _load_rules(prom)
        groups = _group_eval_ms(prom.url, evaluations=5)
        queries = {}
        with httpx.Client(timeout=60) as client:
            for name, (raw, recorded) in QUERIES.items():
                raw_ms, raw_n = _query_ms(client, prom.url, raw, repeats)
                rec_ms, rec_n = _query_ms(client, prom.url, recorded, repeats)
                queries[name] = {"raw_ms": round(raw_ms, 2), "recorded_ms": round(rec_ms, 2),
                                 "series": [raw_n, rec_n]}
        return {"ranks": ranks, "samples": samples, "group_eval_ms":
                {k: round(v, 2) for k, v in groups.items()}, "queries": queries}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", default="64,512", help="comma-separated rank counts")
    p.add_argument("--minutes", type=int, default=45, help="history per series (max ~55)")
    p.add_argument("--interval", type=int, default=15, help="seconds between samples")
    p.add_argument("--repeats", type=int, default=15, help="runs per query (median)")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    results = []
    for ranks in (int(r) for r in args.ranks.split(",")):
        res = run(ranks, args.minutes, args.interval, args.repeats)
        results.append(res)
        print(f"ranks={ranks} samples={res['samples']:,} rule groups (median eval): "
              + ", ".join(f"{k} {v} ms" for k, v in res["group_eval_ms"].items()))
        for name, q in res["queries"].items():
            print(f"  {name:<24} raw {q['raw_ms']:>8} ms   recorded {q['recorded_ms']:>7} ms"
                  f"   series {q['series']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
