"""A healthy job whose ranks load their model late and staggered, read from a REAL Prometheus:
no rank is named the first cause above low; and an incident after those loads is still named.

Real trackers start at process start; the model load waits on the file system or NCCL init, so
each rank's device sits at its CUDA context (0.5 GiB here) until a load 25-88 s after its
tracker's start, staggered 15-26 s between ranks, then holds 6 GiB more. The loads fall past
``warmup_s`` (20 s) from the start gauge, so the warm-up rules did not take them; rank 0's
load came first, rank 1's within the 30 s cascade window, and rank 0 was named the leader at
high (helper we; the same with real ``stormotel track`` processes, edges or not, archive or
Prometheus at 15 s — docs/benchmarks.md, "Late staggered warm-ups timed by edges"). Every
rank's first rise climbing from less than one threshold is now each one's load
(``first_cause._mark_loads_from_empty``). The control: rank 2 steps up 5 GiB at 130 s and the
others follow 20 s later — it is named at high, rank 0 is not.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.job.test_tracker_start_edge import _write, reports_of

pytestmark = pytest.mark.servers

SURE = ("high", "medium")
END_S = 200.0
OFFSETS_S = (0.0, 2.5, 1.0, 4.5)  # each tracker's start after the job's
LOADS_S = (25.0, 40.0, 62.0, 88.0)  # each load after its own tracker's start


def _job(url: str, job: str, *, epoch: float, incident: bool) -> int:
    """5 s scrapes; 0.5 GiB until each load, 6.5 GiB after; with ``incident`` rank 2 +5 GiB
    at 130 s, the others at 150 s."""
    n = 0
    for r, (off, load) in enumerate(zip(OFFSETS_S, LOADS_S, strict=True)):
        stamps = epoch + np.arange(off + 0.3 + 0.7 * r, END_S, 5.0)
        t = stamps - epoch
        used = np.where(t >= off + load, 6.5, 0.5) + 0.01 * np.sin(t)
        if incident:
            used = used + np.where(t >= (130.0 if r == 2 else 150.0), 5.0, 0.0)
        n += _write(url, job, r, stamps, used, epoch + off, world=4)
    return n


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return reports_of(tmp_path_factory.mktemp("late-load"), _job,
                      {"healthy": {"incident": False}, "incident": {"incident": True}},
                      END_S, 10)


def _named(cross: dict[str, Any]) -> set[tuple[int, str]]:
    return ({(s["rank"], s["confidence"]) for s in cross["first_cause_suspects"]
             if s["confidence"] in SURE}
            | {(i["leader"], i["confidence"]) for i in cross["incidents"]
               if i["confidence"] in SURE})


def test_late_staggered_model_loads_name_no_rank(reports: dict[str, dict[str, Any]]) -> None:
    cross = reports["healthy"]
    assert not _named(cross), cross["incidents"]


def test_an_incident_after_the_loads_is_still_named(reports: dict[str, dict[str, Any]]) -> None:
    cross = reports["incident"]
    assert {r for r, _ in _named(cross)} == {2}, cross["incidents"]
