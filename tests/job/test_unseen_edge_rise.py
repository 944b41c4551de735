"""A rise only the tracker's first-rise edge gauge shows, read from a REAL Prometheus
(``stormotel analyze --prometheus``): another rank's later rise is not named alone at high.

The tracker sets ``stormotel_edge_timestamp_seconds{edge="first_rise"}`` on its own samples
(every 100 ms) and keeps it after the memory falls back; a scraper every 15 s can miss the
rise itself. On the calibration jobs of ``benchmarks/eval_blind_cap.py`` read as the tracker
exports them (``--tracker-reads``), the planted leader's 4 GiB rise fell back within half an
interval, between two of its scrapes (and behind missed ones, past the 30 s peak gauge), so
its follower was the only rank seen rising and was named "only rank 1 rose" at **high** — the
wrong rank; the leader's edge gauge held its rise time all along. Here: two ranks scraped
every 15 s, flat at 5.52 GiB; rank 0's edge gauge reads a first rise at 300.05 s from its next
scrape on (its samples never show it); rank 1 rises 2 GiB at 310 s and stays. The controls:
the same without the edge gauge (rank 1 named alone at high, as before), and the edge 100 s
before rank 1's rise (beyond the cascade window: rank 1 still high).
"""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest
from stormotel.analyzers.sinks import remote_write

from stormotel import schema
from tests.job import planted
from tests.job.test_lone_rise_read_late import _incidents
from tests.job.test_tracker_start_edge import _write, reports_of

pytestmark = pytest.mark.servers

END_S = 600.0
RISE1_S = 310.0


def _job(url: str, job: str, *, epoch: float, edge_s: float | None) -> int:
    """Rank 0 flat, its first-rise edge at ``edge_s`` (None: no edge gauge) read from the
    first scrape after it; rank 1 +2 GiB from ``RISE1_S``. Phases 0 and 0.2 s."""
    n = 0
    for rank, phase in ((0, 0.0), (1, 0.2)):
        stamps = epoch + np.arange(phase, END_S, 15.0)
        rise = RISE1_S if rank == 1 else END_S + 1
        n += _write(url, job, rank, stamps, np.where(stamps - epoch >= rise, 7.52, 5.52),
                    None, world=2)
        if rank == 0 and edge_s is not None:
            seen = stamps - epoch >= edge_s
            t_ms = np.rint(stamps[seen] * 1000).astype(np.int64)
            labels = {**planted.labels_for(job, rank), schema.ATTR_WORLD_SIZE: "2",
                      schema.ATTR_EDGE: schema.EDGE_FIRST_RISE}
            body = remote_write.encode_arrays(schema.EDGE_TIMESTAMP.prom, labels, t_ms,
                                              np.full(t_ms.shape, round(epoch + edge_s, 3)))
            with httpx.Client(timeout=30) as client:
                resp = client.post(url + "/api/v1/write", content=body,
                                   headers=remote_write.HEADERS)
            assert resp.status_code in (200, 204), (resp.status_code, resp.text)
            n += 1
    return n


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Rank 0's edge 9.95 s before rank 1's rise, none, and 100 s before it."""
    return reports_of(tmp_path_factory.mktemp("unseen-edge"), _job,
                      {"edge-before": {"edge_s": RISE1_S - 9.95}, "no-edge-gauge": {"edge_s": None},
                       "edge-long-before": {"edge_s": RISE1_S - 100.0}}, END_S, 5)


def test_a_lone_rise_after_another_rank_s_unseen_edge_is_low(
        reports: dict[str, dict[str, Any]]) -> None:
    cross = reports["edge-before"]
    assert _incidents(cross) == {1: ("single_rank", "low")}, cross["incidents"]
    notes = " ".join(n for i in cross["incidents"] for n in i["notes"])
    assert "the trackers of ranks [0] set a first-rise edge" in notes, cross["incidents"]


def test_without_the_edge_gauge_the_lone_rise_is_named_as_before(
        reports: dict[str, dict[str, Any]]) -> None:
    cross = reports["no-edge-gauge"]
    assert _incidents(cross) == {1: ("single_rank", "high")}, cross["incidents"]


def test_an_edge_beyond_the_cascade_window_takes_nothing(
        reports: dict[str, dict[str, Any]]) -> None:
    cross = reports["edge-long-before"]
    assert _incidents(cross) == {1: ("single_rank", "high")}, cross["incidents"]
