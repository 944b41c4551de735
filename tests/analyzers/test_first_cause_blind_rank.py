"""A leader is not named above low while another rank was blind where its rise would have come
first (:func:`stormotel.analyzers.algorithms.read_lag.blind_gaps`).

A leader is named because every other rank was *seen* low until after it. A rank with no sample
over part of that span (its tracker stopped: a starved host) was not seen; it could have risen
there first, or risen and fallen back and shown no rise at all. The real case (helper cf's kept
runs): ``test_oom_counter``'s job with rank 1's tracker SIGSTOPped 0.6–3.2 s after the epoch —
rank 1's leak and OOM fell in the hole, and rank 3's later rise was listed as ``single_rank``
at **high**. Each case here is run with and without the hole: the same input on schedule keeps
its leader at high (true positives stay named).
"""

from __future__ import annotations

import numpy as np
from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.report import CrossRank

from tests.analyzers.synth import GIB, INTERVAL, T0, RankData, healthy, plant_rise, to_timeline
from tests.analyzers.test_first_cause_oom_warmup import EPOCH, S
from tests.analyzers.test_first_cause_oom_warmup import _rank as oom_rank

SURE = ("high", "medium")


def _drop(d: RankData, from_ns: int, to_ns: int) -> RankData:
    """The rank's samples in ``[from_ns, to_ns)`` never taken (its tracker stopped)."""
    keep = (d.t_ns < from_ns) | (d.t_ns >= to_ns)
    return RankData(d.rank, d.t_ns[keep], d.allocated[keep], d.reserved[keep],
                    d.device_used[keep], d.device_total[keep], d.markers)


def _cross(data: list[RankData]) -> CrossRank:
    return analyze(to_timeline(data)).cross_rank


def _sure(cr: CrossRank) -> list[tuple[str, int]]:
    return [(i["kind"], i["leader"]) for i in cr.incidents
            if i["leader"] is not None and i["confidence"] in SURE]


def _job(*, followers: bool) -> list[RankData]:
    """Rank 2 rises 2 GiB at 40 s (10 Hz, 60 s); ranks 0 and 1 follow 3 s later or never."""
    data = healthy(4, 600)
    plant_rise(data[2], 400, 2 * GIB)
    if followers:
        plant_rise(data[0], 430, 2 * GIB)
        plant_rise(data[1], 430, 2 * GIB)
    return data


def _at(seconds: float) -> int:
    return T0 + int(seconds * S)


def test_a_leader_is_not_high_while_another_rank_was_blind_over_its_rise() -> None:
    on_time = _cross(_job(followers=True))
    assert _sure(on_time) == [("leader", 2)], on_time.incidents
    blind = _job(followers=True)
    blind[3] = _drop(blind[3], _at(37.5), _at(41.5))  # rank 3: no sample 37.4–41.5 s
    cr = _cross(blind)
    assert _sure(cr) == [], cr.incidents
    assert [(s.rank, s.confidence) for s in cr.first_cause_suspects] == [(2, "low")]
    note = " ".join(cr.incidents[0]["notes"])
    assert "rank 3 from" in note and "4.1 s" in note and "archives" in note, note


def test_a_lone_rise_is_not_high_while_another_rank_was_blind_before_it() -> None:
    alone = _cross(_job(followers=False))
    assert _sure(alone) == [("single_rank", 2)], alone.incidents
    blind = _job(followers=False)
    blind[1] = _drop(blind[1], _at(35.0), _at(39.0))  # blind before rank 2's rise, back after
    cr = _cross(blind)
    assert _sure(cr) == [], cr.incidents
    assert "rank 1 from" in " ".join(cr.incidents[0]["notes"])


def test_holes_that_are_not_blindness_or_not_before_the_rise_keep_the_leader() -> None:
    """Two missed samples (a busy tracker) and a hole more than a cascade window before the
    rise, or after it, do not hide a rise that would have come first."""
    for lo, hi in ((39.0, 39.3), (2.0, 8.0), (41.0, 50.0)):
        data = _job(followers=True)
        data[3] = _drop(data[3], _at(lo), _at(hi))
        cr = _cross(data)
        assert _sure(cr) == [("leader", 2)], (lo, hi, cr.incidents)


def test_the_oom_job_with_rank_1_stopped_over_its_leak_names_no_rank_at_high() -> None:
    """cf's kept run (os.ahSA): rank 1's tracker stopped 0.6–3.2 s after the epoch. On
    schedule the same job names rank 1 at high; stopped, no incident names any rank above low
    (before: rank 3's OOM fill-up listed as single_rank at high)."""
    on_time = analyze(to_timeline([oom_rank(r) for r in range(4)], job_id="oomcount")).cross_rank
    assert (on_time.first_cause_suspects[0].rank,
            on_time.first_cause_suspects[0].confidence) == (1, "high"), on_time.incidents
    data = [oom_rank(r) for r in range(4)]
    data[1] = _drop(data[1], EPOCH + int(0.6 * S), EPOCH + int(3.2 * S))
    assert np.diff(data[1].t_ns).max() > 25 * INTERVAL
    cr = analyze(to_timeline(data, job_id="oomcount")).cross_rank
    assert [(i["kind"], i["leader"], i["confidence"]) for i in cr.incidents
            if i["confidence"] in SURE] == [], cr.incidents


def _long_job(late: int | None = None) -> list[RankData]:
    """Rank 2 rises 2 GiB at 40 s, ranks 0 and 1 follow at 43 s (10 Hz, 120 s); ``late``: one
    more rank, 3, rises at ``late`` s on its own."""
    data = healthy(4, 1200)
    plant_rise(data[2], 400, 2 * GIB)
    for r in (0, 1):
        plant_rise(data[r], 430, 2 * GIB)
    if late is not None:
        plant_rise(data[3], int(late * 10), 2 * GIB)
    return data


def test_a_rank_seen_late_through_its_own_hole_is_not_a_lone_first_cause() -> None:
    """Rank 1 follows rank 2 at 43 s, but its tracker is stopped 35–80 s: its rise is first
    seen at 80 s, beyond the cascade window, so it was judged on its own — "only rank 1 rose",
    a ``single_rank`` first cause at high (found by benchmarks/eval_blind_cap.py: an innocent
    follower down 300 s over the incident, 53 of 120 jobs at 15 s). Its rise lies anywhere in
    its 45 s hole, within the window of ranks 2 and 0's: at most low, with a note."""
    on_time = _cross(_long_job())
    assert _sure(on_time) == [("leader", 2)], on_time.incidents
    data = _long_job()
    data[1] = _drop(data[1], _at(35.0), _at(80.0))
    cr = _cross(data)
    assert _sure(cr) == [], cr.incidents
    lone = [i for i in cr.incidents if i["kind"] == "single_rank"]
    assert [(i["leader"], i["confidence"]) for i in lone] == [(1, "low")], cr.incidents
    assert "ranks [0, 2] rose within a cascade window before" in " ".join(lone[0]["notes"])


def test_a_follower_seen_late_does_not_lead_a_later_incident() -> None:
    """The same follower, rank 0, seen first at 80 s through its own hole, ahead of rank 3's
    rise at 85 s: a second incident "led" by rank 0 at high, though rank 0 followed rank 2.
    Now a tie at low; rank 3's rise on its own, with no hole, still leads nothing wrongly."""
    data = _long_job(late=85.0)
    data[0] = _drop(data[0], _at(35.0), _at(80.0))
    cr = _cross(data)
    assert _sure(cr) == [], cr.incidents
    assert any("rank 0 may have followed them" in n for i in cr.incidents for n in i["notes"])
