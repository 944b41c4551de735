"""A real Prometheus scrapes every rank of a real multi-process torch job (gloo, CPU).

Each rank runs a MemoryTracker with a pull endpoint; Prometheus (the Debian package, started by
tests/servers.py) scrapes them every second while the job trains; ``/api/v1/query`` must then
return every stormotel metric for every rank, with the identity labels and sensible values.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from stormotel import schema
from stormotel.demo import run_job
from tests import servers
from tests.tracker.otlp_util import metrics_files

JOB = "promtest"
WORLD = 2
ESTIMATE = 9 * 2**30


def _by_rank(prom: servers.Server, metric: schema.Metric) -> dict[str, float]:
    rows = servers.query(prom, f'{metric.prom}{{job_id="{JOB}"}}')
    return {row["metric"]["rank"]: float(row["value"][1]) for row in rows}


@pytest.mark.slow
@pytest.mark.servers
def test_prometheus_scrapes_every_rank(tmp_path: Path) -> None:
    ports = [servers.free_port() for _ in range(WORLD)]
    with servers.prometheus(tmp_path / "prom", scrape_targets=[f"127.0.0.1:{p}" for p in ports],
                            scrape_interval="1s") as prom:
        runner = servers.BackgroundRun(lambda: run_job(
            tmp_path / "out", world_size=WORLD, duration_s=8.0, job_id=JOB,
            prometheus_ports=ports, estimate_bytes=ESTIMATE, quiet=True))
        running = [m for m in schema.ALL_METRICS if m is not schema.TRACKER_STOP]  # at stop only
        wanted = {(m.prom_series[-1], str(r)) for m in running for r in range(WORLD)}
        seen: set[tuple[str, str]] = set()
        while runner.is_alive() and not wanted <= seen:
            time.sleep(0.5)
            rows = servers.query(prom, f'count by (__name__, rank) ({{job_id="{JOB}"}})')
            seen = {(row["metric"]["__name__"], row["metric"]["rank"]) for row in rows}
        assert wanted <= seen, f"missing in Prometheus: {sorted(wanted - seen)}"
        # Values, read while the job is still being scraped (one scrape = one instant).
        labels = servers.query(prom, f'{schema.DEVICE_USED.prom}{{job_id="{JOB}"}}')
        for row in labels:
            m = row["metric"]
            assert m["world_size"] == str(WORLD) and m["local_rank"] == m["rank"]
            assert m["gpu"] == m["rank"] and m["host"] and m["hw_id"] == f"GPU-simulated-{m['gpu']}"
        used, limit = _by_rank(prom, schema.DEVICE_USED), _by_rank(prom, schema.DEVICE_LIMIT)
        peak, util = _by_rank(prom, schema.DEVICE_USED_PEAK), _by_rank(prom,
                                                                       schema.DEVICE_UTILIZATION)
        reserved, gap = _by_rank(prom, schema.ALLOC_RESERVED), _by_rank(prom, schema.GAP)
        allocated = _by_rank(prom, schema.ALLOC_ALLOCATED)
        for rank in map(str, range(WORLD)):
            assert 0 < used[rank] <= limit[rank] == 16 * 2**30
            assert peak[rank] >= used[rank]
            assert util[rank] == pytest.approx(used[rank] / limit[rank], abs=1e-9)
            assert 0 < allocated[rank] <= reserved[rank] < used[rank]
            assert gap[rank] == used[rank] - reserved[rank]
        assert set(_by_rank(prom, schema.ESTIMATE).values()) == {ESTIMATE}
        assert min(_by_rank(prom, schema.SAMPLES).values()) > 5
        assert set(_by_rank(prom, schema.OOMS).values()) == {0.0}
        out_dir = runner.join(timeout=120)
    assert metrics_files(out_dir, 1)[0].stat().st_size > 0
