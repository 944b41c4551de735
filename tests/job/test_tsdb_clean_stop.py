"""The tracker's clean stop read from a REAL TSDB (Prometheus, VictoriaMetrics): a rank whose
samples end with its stop timestamp scraped (``stormotel_tracker_stop_timestamp_seconds``, what
a lingering endpoint serves after ``stop_tracking`` or SIGTERM) while its three peers go on is
no dead rank (its peers' step gauge goes on: the job went on working without it) —
``stormotel analyze --prometheus`` exits 0 with a note — and the same silence without it, from a
tracker that says it delivers its stop (``stop.reported`` 1), is named.

The memory series are :mod:`tests.job.planted`'s ranks and times with flat values, so the exit
status is the dead-rank verdict alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stormotel.analyzers.sinks import remote_write

from stormotel import exitcodes, schema
from tests.job import planted
from tests.job.conftest import run_cli
from tests.servers import loopback_client

pytestmark = pytest.mark.servers
SILENT = 3  # the rank that stops 40 s before its peers


def _gauge(url: str, job_id: str, rank: int, name: str, t_ms: np.ndarray,
           v: np.ndarray) -> None:
    body = remote_write.encode_arrays(name, planted.labels_for(job_id, rank), t_ms, v)
    r = loopback_client().post(url + "/api/v1/write", content=body, headers=remote_write.HEADERS,
                               timeout=30)
    assert r.status_code in (200, 204), (r.status_code, r.text)


def _plant(url: str, job_id: str, *, stop_edge: bool) -> planted.Planted:
    """Four ranks for two minutes, stepping every 2 s, rank ``SILENT`` cut 40 s early; every
    tracker says it delivers its stop; ``stop_edge``: rank ``SILENT``'s last scrape carries
    its stop time."""
    p, data = planted.make(job_id=job_id, minutes=2, fault_rank=-1)
    for (rank, fname), (t, v) in list(data.items()):
        v = np.full(v.shape, v[0])  # flat: nothing but the silence to find
        data[(rank, fname)] = (t[:-40], v[:-40]) if rank == SILENT else (t, v)
    planted.write(url + "/api/v1/write", job_id, data)
    series = len(data)
    for rank in range(4):
        t = data[(rank, "reserved")][0]
        _gauge(url, job_id, rank, schema.TRACKER_STOP_REPORTED.prom, t, np.ones(t.shape))
        # the training step, one every 2 s: the peers go on working after rank SILENT left
        _gauge(url, job_id, rank, schema.STEP.prom, t, ((t - t[0]) // 2000).astype(float))
        series += 2
    if stop_edge:
        last = data[(SILENT, "reserved")][0][-1:]
        _gauge(url, job_id, SILENT, schema.TRACKER_STOP.prom, last, last / 1000.0 - 0.05)
        series += 1
    planted.wait_visible(url, job_id, series)
    return p


def _analyze(url: str, p: planted.Planted, tmp_path: Path) -> tuple[int, dict[str, Any]]:
    out = tmp_path / f"{p.job_id}.json"
    r = run_cli("--prometheus", url, "--job-id", p.job_id,
                "--start", str((p.start_ms - 2000) / 1000), "--end", str((p.end_ms + 2000) / 1000),
                "--format", "json", "--output", str(out))
    assert r.returncode in (exitcodes.OK, exitcodes.FINDINGS), r.stderr
    return r.returncode, json.loads(out.read_text())


def _dead(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["stall_findings"]
            if f["evidence"].get("category") == "stopped_reporting"]


@pytest.mark.parametrize("server", ["prometheus_server", "victoriametrics_server"])
def test_a_clean_stop_in_the_tsdb_is_no_dead_rank_and_a_silent_one_is(
        server: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url = request.getfixturevalue(server).url
    clean = _plant(url, "stopped-cleanly", stop_edge=True)
    died = _plant(url, "died", stop_edge=False)
    code, report = _analyze(url, clean, tmp_path)
    assert not _dead(report), report["stall_findings"]
    assert code == exitcodes.OK, (report["gap_findings"], report["notes"])
    assert any("stopped cleanly" in n and f"rank {SILENT} at" in n for n in report["notes"])
    code, report = _analyze(url, died, tmp_path)
    assert code == exitcodes.FINDINGS
    [f] = _dead(report)
    assert f["ranks"] == [SILENT] and f["confidence"] == "medium"
    assert f["evidence"]["stop_edge"] == "expected_missing", f["evidence"]
