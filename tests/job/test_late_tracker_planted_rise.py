"""A planted first cause soon after late-started trackers, read from a REAL Prometheus
(``stormotel analyze --prometheus``): a lone rise just after another rank's rise that was set
aside as warm-up is not named above low.

``stormotel rehearse`` plants rank 1's rise at a fixed instant of a shared clock, 25 s after it
launches the ranks. On a loaded host (helper fa's audit, load 21) the trackers started so late
that the rise came 6 s after rank 1's tracker start, at its second scrape: inside its warm-up
window (a quarter of what it observed) and climbing from its first sample (its leak keeps the
running minimum there), so it was set aside as warm-up. Rank 0's same rise, 3 s later, fell
just outside rank 0's window and was judged alone: "only rank 0 rose; the others never reached
their threshold" — rank 0 named at **high** here (timed by samples only; with the edge
gauges the real run said low), the wrong rank. The series below are what that Prometheus
stored in a reproduction with the trackers started 12 s into the shared clock (2 s scrapes,
start gauges 3.4 s before the first scrape, rank 1 leaking 16 MiB/s).

Which rank led cannot be told here without trusting the warm-up rule (a staggered warm-up step
looks the same): the answer is low, with a note naming rank 1. The control: the same step made
by both ranks inside their warm-up windows is set aside on both — no rank named.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.job.test_tracker_start_edge import _write, reports_of

pytestmark = pytest.mark.servers

SURE = ("high", "medium")
END_S = 33.0


def _job(url: str, job: str, *, epoch: float, rank0_rise_s: float) -> int:
    """Rank 0 scraped at 0.58 + 2k s, flat at 5.52 GiB, +2 GiB from ``rank0_rise_s``; rank 1
    at 2k s, 5.66 GiB leaking 16 MiB/s, +2 GiB from 2.73 s; trackers started at -3.4 s."""
    n = 0
    for rank, (phase, rise_s) in {0: (0.58, rank0_rise_s), 1: (0.0, 2.73)}.items():
        stamps = epoch + np.arange(phase, END_S, 2.0)
        t = stamps - epoch
        used = np.where(t >= rise_s, 7.52, 5.52) if rank == 0 else \
            5.66 + t * 16 / 1024 + np.where(t >= rise_s, 2.0, 0.0)
        n += _write(url, job, rank, stamps, used, epoch - 3.4, world=2)
    return n


JOBS = {"planted-after-late-start": 5.76, "both-inside-their-warm-up": 3.5}


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return reports_of(tmp_path_factory.mktemp("late-tracker"), _job,
                      {job: {"rank0_rise_s": rise} for job, rise in JOBS.items()}, END_S, 60)


def _named(cross: dict[str, Any]) -> set[tuple[int, str]]:
    return {(s["rank"], s["confidence"]) for s in cross["first_cause_suspects"]}


def test_a_lone_rise_just_after_another_rank_s_set_aside_rise_is_not_named(
        reports: dict[str, dict[str, Any]]) -> None:
    cross = reports["planted-after-late-start"]
    assert not {s for s in _named(cross) if s[1] in SURE}, cross
    notes = " ".join(n for i in cross["incidents"] for n in i["notes"])
    assert "ranks [1] rose within a cascade window before rank 0" in notes, cross["incidents"]


def test_the_same_step_inside_both_ranks_warm_up_names_no_rank(
        reports: dict[str, dict[str, Any]]) -> None:
    cross = reports["both-inside-their-warm-up"]
    assert not {s for s in _named(cross) if s[1] in SURE}, cross
    assert any("warm-up of ranks [0, 1]" in n for n in cross["notes"]), cross["notes"]
