"""A lone rise just over a cascade window after another rank's scrape-timed rise, read from a
REAL Prometheus (``stormotel analyze --prometheus``): the earlier rise may have been read up
to a scrape interval after its stamp, so the later rank may have followed it and is not named
above low.

A scraper stamps a sample when its scrape starts; the exporter answers within the scrape
timeout, which Prometheus holds to at most the scrape interval (its config check: "scrape
timeout greater than scrape interval"). On a loaded host (``benchmarks/eval_blind_cap.py``'s
J = 10 s jobs) rank 0's crossing scrape was stamped 4 s before the memory it answered with
had risen, and rank 1, following 28 s later inside the 30 s cascade window, was first seen
high at a scrape whose previous one lay 30.2 s after rank 0's crossing stamp: just outside the
window by stamps. Each was judged alone — "only rank 0 rose", "only rank 1 rose" — both at
**high**, rank 1 the wrong rank (a control job of the calibration, no hole). The series below
are those stamps: 15 s scrapes, rank 0 high from its stamp at 300 s, rank 1 from 345.2 s (last
seen low at 330.2 s). The control: rank 1 rising 75 s later (last seen low 105.2 s after rank 0's
crossing, beyond a window and an interval) is still named alone at high.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.job.test_tracker_start_edge import _write, reports_of

pytestmark = pytest.mark.servers

SURE = ("high", "medium")
END_S = 600.0


def _job(url: str, job: str, *, epoch: float, rank1_rise_s: float) -> int:
    """Two ranks scraped every 15 s over a window cut into their run (no start gauge), flat
    at 5.52 GiB: rank 0 +2 GiB from its stamp at 300 s (phase 0), rank 1 +2 GiB from
    ``rank1_rise_s`` (phase 0.2 s)."""
    n = 0
    for rank, (phase, rise_s) in {0: (0.0, 300.0), 1: (0.2, rank1_rise_s)}.items():
        stamps = epoch + np.arange(phase, END_S, 15.0)
        used = np.where(stamps - epoch >= rise_s, 7.52, 5.52)
        n += _write(url, job, rank, stamps, used, None, world=2)
    return n


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Rank 1 last seen low 30.2 s after rank 0's crossing stamp (a follower by the read), and
    105.2 s after it (on its own)."""
    jobs = {"follower-by-the-read": {"rank1_rise_s": 345.0},
            "later-on-its-own": {"rank1_rise_s": 420.0}}
    return reports_of(tmp_path_factory.mktemp("lone-read-late"), _job, jobs, END_S, 5)


def _incidents(cross: dict[str, Any]) -> dict[int, tuple[str, str]]:
    """Leader → (kind, confidence) of every incident that names one."""
    return {i["leader"]: (i["kind"], i["confidence"]) for i in cross["incidents"]
            if i["leader"] is not None}


def test_a_lone_rise_within_a_window_of_an_earlier_rise_s_read_is_low(
        reports: dict[str, dict[str, Any]]) -> None:
    cross = reports["follower-by-the-read"]
    named = _incidents(cross)
    assert named.get(0) == ("single_rank", "high"), cross["incidents"]
    assert named.get(1) == ("single_rank", "low"), cross["incidents"]
    notes = " ".join(n for i in cross["incidents"] if i["leader"] == 1 for n in i["notes"])
    assert "ranks [0] rose within a cascade window before that" in notes, cross["incidents"]


def test_a_lone_rise_beyond_a_window_and_an_interval_is_still_named(
        reports: dict[str, dict[str, Any]]) -> None:
    named = _incidents(reports["later-on-its-own"])
    assert named.get(0) == ("single_rank", "high"), reports["later-on-its-own"]["incidents"]
    assert named.get(1) == ("single_rank", "high"), reports["later-on-its-own"]["incidents"]
