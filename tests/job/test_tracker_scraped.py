"""Telemetry of a REAL 4-rank tracked job (torch gloo, simulated GPUs), scraped by a REAL
Prometheus, analysed over the HTTP API by ``stormotel analyze --prometheus``.

Rank 2 is planted to rise 3 s before the others (well above the 1 s scrape interval, so the
claim is within the resolution the job can honestly state). The analysed window starts once
every rank is being scraped, as a cron window over a running job would: the start-up ramp of
each process (weights loaded, first activations) is not part of the incident.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from stormotel import exitcodes, schema
from stormotel.demo import run_job
from tests import servers
from tests.job.conftest import run_cli

JOB = "scraped-4"
WORLD = 4


@pytest.mark.slow
@pytest.mark.servers
def test_scraped_tracker_job_first_cause(tmp_path: Path) -> None:
    ports = [servers.free_port() for _ in range(WORLD)]
    with servers.prometheus(tmp_path / "prom", scrape_targets=[f"127.0.0.1:{p}" for p in ports],
                            scrape_interval="1s") as prom:
        runner = servers.BackgroundRun(lambda: run_job(
            tmp_path / "out", world_size=WORLD, duration_s=16.0, job_id=JOB,
            faults="rank=2:first_spike@t=9s,delta=2GiB,lead=3s", prometheus_ports=ports,
            quiet=True))
        start = None
        while runner.is_alive() and start is None:
            time.sleep(0.5)
            used = servers.query(prom, f'{schema.DEVICE_USED.prom}{{job_id="{JOB}"}}')
            if len(used) == WORLD:
                start = time.time() + 3.0  # past every rank's start-up ramp
        runner.join(timeout=120)
        assert start is not None, "the ranks never showed up in Prometheus"
        time.sleep(1.5)  # last scrape
        report = tmp_path / "report.json"
        trace = tmp_path / "trace.json"
        r = run_cli("--prometheus", prom.url, "--job-id", JOB, "--start", str(start),
                    "--end", str(time.time()), "--format", "json", "-o", str(report),
                    "--perfetto", str(trace))
    assert r.returncode == exitcodes.FINDINGS, r.stderr
    doc = json.loads(report.read_text())
    debug = json.dumps(doc["extra"]["first_rise_by_rank"])
    assert doc["participating_ranks"] == [0, 1, 2, 3] and doc["world_size"] == WORLD
    top = doc["cross_rank"]["first_cause_suspects"][0]
    assert top["rank"] == 2, debug
    assert 1.5 <= top["lead_ns"] / 1e9 <= 4.5  # 3 s planted, ±1 scrape interval each side
    assert any("rolling peak series" in n for n in doc["notes"])
    assert json.loads(trace.read_text())["traceEvents"]
