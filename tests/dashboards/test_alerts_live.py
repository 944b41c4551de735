"""The shipped alerting rules, generated with short windows, in a REAL Prometheus scraping REAL
``stormotel track`` processes: a rank killed mid-job (the simulator's ``crash`` fault, SIGKILL)
must reach *firing* as StormotelRankStoppedReporting with its rank and GPU UUID as labels, while
its peers page nothing; when the peers then stop cleanly (their endpoints linger for one last
scrape) the killed rank alone is named by StormotelJobEndedAbruptly. Scrape and evaluation every
second; the whole run stays under a minute.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from stormotel.dashboards import rules
from stormotel.dashboards.settings import Settings

from tests import servers
from tests.servers import loopback_client

pytestmark = pytest.mark.servers
WORLD = 3
DEAD = 1
#: The alert windows shrunk to the test's 1 s scrapes (same rules, other durations).
FAST = Settings(silent_window="4s", silent_for="2s", presence_window="10m", fill_window="20s",
                fill_step="4s", fill_for="2s", drift_window="30s", drift_for="5s",
                stall_window="30s", stall_for="5s", oom_window="30s")


def _track(port: int, rank: int) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "stormotel", "track", "--sampler", "simulated",
            "--job-id", "live", "--rank", str(rank), "--world-size", str(WORLD),
            "--interval", "0.2", "--duration", "55", "--prometheus-port", str(port),
            "--prometheus-addr", "127.0.0.1", "--gpu-uuid", f"GPU-live-{rank}",
            "--device-memory", "80GiB", "-q"]
    if rank == DEAD:
        argv += ["--fault", f"rank={DEAD}:crash@t=6s"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _alerts(url: str) -> list[dict[str, Any]]:
    body = loopback_client().get(url + "/api/v1/alerts", timeout=5).json()
    return list(body["data"]["alerts"])


def test_killed_rank_reaches_firing_with_its_labels(tmp_path: Path) -> None:
    rules_file = tmp_path / rules.RULES_FILE
    rules_file.write_text(rules.rules_yaml(FAST))
    ports = [servers.free_port() for _ in range(WORLD)]
    procs = [_track(port, rank) for rank, port in enumerate(ports)]
    started = time.monotonic()
    try:
        with servers.prometheus(tmp_path / "prom", [f"127.0.0.1:{p}" for p in ports], "1s",
                                rule_files=[rules_file]) as prom:
            firing: list[dict[str, Any]] = []
            while time.monotonic() - started < 50 and not firing:
                time.sleep(1)
                alerts = _alerts(prom.url)
                others = [a for a in alerts if a["labels"].get("rank") != str(DEAD)]
                assert not others, f"healthy ranks paged: {others}"
                firing = [a for a in alerts if a["state"] == "firing"
                          and a["labels"]["alertname"] == "StormotelRankStoppedReporting"]
            assert procs[DEAD].wait(timeout=5) < 0, "the crash fault must kill the rank"
            assert firing, f"no firing alert after {time.monotonic() - started:.0f} s"
            labels = firing[0]["labels"]
            assert labels["rank"] == str(DEAD) and labels["job_id"] == "live"
            assert labels["gpu_uuid"] == f"GPU-live-{DEAD}" and labels["severity"] == "critical"
            assert labels["gpu"] == str(DEAD) and labels["host"]
            assert all(p.poll() is None for i, p in enumerate(procs) if i != DEAD)
            # The peers stop cleanly (SIGTERM): each endpoint lingers for one last scrape, so
            # Prometheus sees their stop timestamps. The job has ended: the killed rank, and
            # only it, now reads as the abrupt end.
            for i, proc in enumerate(procs):
                if i != DEAD:
                    proc.terminate()
            assert all(p.wait(timeout=15) == 0 for i, p in enumerate(procs) if i != DEAD)
            ended: list[dict[str, Any]] = []
            while time.monotonic() - started < 58 and not ended:
                time.sleep(1)
                alerts = _alerts(prom.url)
                others = [a for a in alerts if a["labels"].get("rank") != str(DEAD)]
                assert not others, f"ranks that stopped cleanly paged: {others}"
                ended = [a for a in alerts if a["state"] == "firing"
                         and a["labels"]["alertname"] == "StormotelJobEndedAbruptly"]
            assert ended and ended[0]["labels"]["rank"] == str(DEAD), ended
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
