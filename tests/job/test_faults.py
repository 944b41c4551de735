"""Every TSDB failure a cron job meets gives a clear, correct outcome — never a traceback.

The data comes from REAL Prometheus servers; :class:`tests.job.stubs.FaultProxy` only injects
what a real server cannot be asked to do on cue (503 bursts, slowness, malformed JSON).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stormotel import exitcodes
from tests import servers
from tests.job import planted
from tests.job.conftest import run_cli, summary_line
from tests.job.stubs import FaultProxy

pytestmark = pytest.mark.servers
JOB = "faulty-1"


@pytest.fixture(scope="module")
def two_clusters(tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[tuple[servers.Server, servers.Server, planted.Planted]]:
    """Two real Prometheus servers: ranks 0-1 in the first, ranks 2-3 (the culprit) in the
    second — one job spread over two clusters."""
    root = tmp_path_factory.mktemp("clusters")
    p, data = planted.make(job_id=JOB)
    with servers.prometheus(root / "a") as a, servers.prometheus(root / "b") as b:
        planted.write(a.url + "/api/v1/write", JOB, {k: v for k, v in data.items() if k[0] < 2})
        planted.write(b.url + "/api/v1/write", JOB, {k: v for k, v in data.items() if k[0] >= 2})
        yield a, b, p


def _window(p: planted.Planted) -> list[str]:
    return ["--job-id", JOB, "--start", str(p.start_ms / 1000 - 2),
            "--end", str(p.end_ms / 1000 + 2), "--format", "json", "--http-retries", "1"]


def _no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr


def test_two_endpoints_merge_into_one_timeline(two_clusters, tmp_path: Path) -> None:
    a, b, p = two_clusters
    out = tmp_path / "r.json"
    r = run_cli("--prometheus", a.url, "--prometheus", b.url, *_window(p), "-o", str(out))
    assert r.returncode == exitcodes.FINDINGS, r.stderr
    report = json.loads(out.read_text())
    assert report["participating_ranks"] == [0, 1, 2, 3]
    assert report["cross_rank"]["first_cause_suspects"][0]["rank"] == p.fault_rank


def test_one_of_two_endpoints_down_gives_a_partial_result(two_clusters, tmp_path: Path) -> None:
    """Partial problems are not failures (docs/exit-codes.md): the reachable cluster is
    analysed and reported, the down one is named, its ranks are reported missing."""
    a, _, p = two_clusters
    down = f"http://127.0.0.1:{servers.free_port()}"
    out = tmp_path / "r.json"
    r = run_cli("--prometheus", a.url, "--prometheus", down, *_window(p), "-o", str(out))
    _no_traceback(r.stderr)
    assert r.returncode in (exitcodes.OK, exitcodes.FINDINGS), r.stderr
    assert f"warning: endpoint {down} failed" in r.stderr and "connection failed" in r.stderr
    report = json.loads(out.read_text())  # what could be read is still analysed and reported
    assert report["participating_ranks"] == [0, 1]
    assert report["missing_ranks"] == [2, 3]  # world_size 4 from the identity labels
    assert any(down in n for n in report["notes"])
    assert report["extra"]["source"]["endpoints_failed"].keys() == {down}
    s = summary_line(r.stderr)
    assert s["partial"] == "true" and s["ranks"] == "2/4"


def test_endpoint_down(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{servers.free_port()}"
    r = run_cli("--prometheus", down, "--job-id", JOB, "--since", "10m", "--http-retries", "1")
    _no_traceback(r.stderr)
    assert r.returncode == exitcodes.SOURCE_FAILURE
    assert f"no Prometheus endpoint answered for job '{JOB}'" in r.stderr
    assert down in r.stderr
    assert summary_line(r.stderr)["outcome"] == "source_failure"


def test_5xx_then_success_is_retried(two_clusters) -> None:
    a, b, p = two_clusters
    with FaultProxy(b.url, fail_first=2) as proxy:
        r = run_cli("--prometheus", a.url, "--prometheus", proxy.url, *_window(p),
                    "--http-retries", "3")
    assert r.returncode == exitcodes.FINDINGS, r.stderr
    assert summary_line(r.stderr)["partial"] == "false"
    assert len(proxy.requests) > 2  # the two 503s were followed by the real answers


def test_slow_endpoint_past_timeout(two_clusters) -> None:
    _, b, p = two_clusters
    with FaultProxy(b.url, delay_s=3.0) as proxy:
        started = time.monotonic()
        r = run_cli("--prometheus", proxy.url, *_window(p), "--http-timeout", "0.5")
        elapsed = time.monotonic() - started
    _no_traceback(r.stderr)
    assert r.returncode == exitcodes.SOURCE_FAILURE
    assert "timed out after 0.5s" in r.stderr
    assert elapsed < 15


def test_run_deadline_bounds_the_whole_run(two_clusters) -> None:
    _, b, p = two_clusters
    with FaultProxy(b.url, delay_s=2.0, path_filter="/api/v1/query") as proxy:  # data reads
        r = run_cli("--prometheus", proxy.url, *_window(p), "--timeout", "1500ms",
                    "--http-timeout", "10")
    _no_traceback(r.stderr)
    assert r.returncode == exitcodes.SOURCE_FAILURE
    assert float(summary_line(r.stderr)["duration_s"]) < 4.0


def test_malformed_json(two_clusters) -> None:
    _, b, p = two_clusters
    with FaultProxy(b.url, malformed=True) as proxy:
        r = run_cli("--prometheus", proxy.url, *_window(p))
    _no_traceback(r.stderr)
    assert r.returncode == exitcodes.SOURCE_FAILURE
    assert f"{proxy.url}/api/v1/series: malformed JSON response" in r.stderr
