"""``stormotel serve``: page-to-report latency from a real TSDB, and a storm.

    .venv/bin/python benchmarks/bench_serve.py --ranks 4 64 1024
    .venv/bin/python benchmarks/bench_serve.py --storm-jobs 200 --storm-alerts 5

**Latency.** A VictoriaMetrics (as the tests start it) gets, per size, a job of ``ranks`` ranks
with the 14 series a tracker exports per rank at a 15 s scrape interval over the last
``--minutes`` (the shape of ``bench_tsdb_scale.py``: staggered starts, per-rank scrape phases,
noise, a rank that rises first and one that leaks), ending now. A real ``stormotel serve``
(subprocess) gets one Alertmanager webhook for the job; the figure is the wall time from the
POST to ``/jobs/<job>/report.json`` answering 200 — the receiver's share of page-to-report
(Alertmanager's ``group_wait`` comes on top). Run once with ``--max-window`` equal to the data
(the job's first sample bounds the read) and once with the default 1d.

**Storm.** ``--storm-jobs`` jobs × ``--storm-alerts`` alerts, one notification per job (as
Alertmanager groups by ``job_id``) posted 8 at a time, then every notification again (the
retries): time to accept them all, time until the queue drained, analyses run, the receiver's
peak RSS. These jobs have no telemetry: each run is a real TSDB read that finds nothing (a
counted source failure), so the figures are the receiver's own overhead.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import benchmarks.bench_tsdb_scale as scale
from stormotel import schema
from tests import servers
from tests.serve import receiver as rx


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _analyses(recv: rx.Receiver) -> float:
    return sum(rx.metric(recv, "stormotel_serve_analyses_total", outcome=o)
               for o in ("ok", "findings", "source_failure", "sink_failure", "usage_error",
                         "internal_error"))


def _ingest_start_edges(url: str, ranks: int, minutes: float) -> None:
    """The tracker's start edge (``stormotel_tracker_start_timestamp_seconds``), which a real
    tracker exports and ``bench_tsdb_scale``'s 14 series leave out: the receiver bounds its
    window by it (analyzers/serve/window.py)."""
    n = int(minutes * 60_000 / scale.SCRAPE_MS)
    ts = ",".join(str(scale.START_MS + i * scale.SCRAPE_MS) for i in range(n))
    vals = ",".join([str(scale.START_MS / 1000)] * n)
    lines = [json.dumps({"metric": {"__name__": schema.TRACKER_START.prom,
                                    schema.ATTR_JOB_ID: scale.JOB, schema.ATTR_RANK: str(r)},
                         "values": [], "timestamps": []}).replace(
        '"values": [], "timestamps": []', f'"values": [{vals}], "timestamps": [{ts}]')
        for r in range(ranks)]
    httpx.post(url + "/api/v1/import", content="\n".join(lines) + "\n",
               timeout=600).raise_for_status()
    httpx.get(url + "/internal/force_flush", timeout=60)


def latency(tmp: Path, ranks: int, minutes: float, max_window: str) -> dict[str, object]:
    job = scale.JOB
    with servers.victoriametrics(tmp / f"vm-{ranks}-{max_window}") as vm:
        now_ms = int(time.time() * 1000)
        scale.START_MS = now_ms - int(minutes * 60_000)
        scale.ingest(vm.url, ranks, minutes / 60)
        _ingest_start_edges(vm.url, ranks, minutes)
        with rx.running(tmp / f"out-{ranks}-{max_window}", vm.url, "--max-window", max_window,
                        "--timeout", "5m") as recv:
            body = rx.payload([rx.alert(job, scale.LEAK_RANK, name="StormotelGapDrift")])
            started = time.monotonic()
            r = httpx.post(recv.url + "/alertmanager", content=body, timeout=30)
            accepted = time.monotonic() - started
            r.raise_for_status()
            while time.monotonic() - started < 600:
                got = httpx.get(f"{recv.url}/jobs/{job}/report.json", timeout=30)
                if got.status_code == 200:
                    break
                time.sleep(0.05)
            wall = time.monotonic() - started
            report = got.json()
            meta = json.loads((recv.out / "jobs" / job / "meta.json").read_text())
            return {"ranks": ranks, "minutes": minutes, "max_window": max_window,
                    "accepted_s": round(accepted, 3), "page_to_report_s": round(wall, 2),
                    "analysis_s": meta["duration_s"],
                    "participating": len(report["participating_ranks"]),
                    "lead": meta["headline"][:120], "peak_rss_mib": round(
                        _peak_rss_mib(recv.proc.pid))}


def storm(tmp: Path, jobs: int, alerts: int) -> dict[str, object]:
    with servers.prometheus(tmp / "prom-storm") as prom:
        names = [f"storm-{i:04d}" for i in range(jobs)]
        bodies = [rx.payload([rx.alert(j, r) for r in range(alerts)],
                             group_key=f'{{}}:{{job_id="{j}"}}') for j in names]
        with rx.running(tmp / "out-storm", prom.url, "--min-interval", "1h",
                        "--timeout", "20s") as recv:
            started = time.monotonic()
            # One keep-alive client, as Alertmanager's: a new httpx client per POST would time
            # the poster (~60 ms each), not the receiver.
            with ThreadPoolExecutor(8) as pool, httpx.Client(timeout=60) as client:
                codes = list(pool.map(lambda b: client.post(
                    recv.url + "/alertmanager", content=b).status_code, bodies + bodies))
            accepted = time.monotonic() - started
            while time.monotonic() - started < 900:
                if _analyses(recv) >= jobs and rx.metric(recv,
                                                         "stormotel_serve_queue_depth") == 0:
                    break
                time.sleep(0.2)
            drained = time.monotonic() - started
            time.sleep(1)
            return {"jobs": jobs, "alerts": jobs * alerts, "notifications": len(codes),
                    "http_200": codes.count(200), "accepted_s": round(accepted, 1),
                    "drained_s": round(drained, 1), "analyses": _analyses(recv),
                    "duplicates": rx.metric(recv, "stormotel_serve_webhooks_total",
                                            result="duplicate"),
                    "peak_rss_mib": round(_peak_rss_mib(recv.proc.pid))}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, nargs="*", default=[4, 64])
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--storm-jobs", type=int, default=0)
    p.add_argument("--storm-alerts", type=int, default=5)
    p.add_argument("--default-window", action="store_true",
                   help="also run each size with the default --max-window 1d")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as d:
        tmp = Path(d)
        for ranks in args.ranks:
            windows = [f"{int(args.minutes) + 5}m"] + (["1d"] if args.default_window else [])
            for w in windows:
                print(json.dumps(latency(tmp, ranks, args.minutes, w)), flush=True)
        if args.storm_jobs:
            print(json.dumps(storm(tmp, args.storm_jobs, args.storm_alerts)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
