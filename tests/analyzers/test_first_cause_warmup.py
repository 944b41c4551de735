"""A warm-up climbs in steps: activations come and go while the allocator ramps up, so the
device-used series of a starting rank can dip and climb again within its first second. That
second climb is the same warm-up, not an incident. The shape below is rank 2 of a healthy
staggered 4-rank job (`stormotel track`, simulated sampler, compact archive) that was once
named the first cause at high confidence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.report import CrossRank
from stormotel.analyzers.sources import load_paths

from tests.analyzers.synth import GIB, INTERVAL, RankData, to_timeline

#: Device used (GB) of the rank's first samples, as archived, then flat at the plateau.
STEPPED_WARMUP_GB = (4.231, 4.772, 5.309, 5.846, 5.288, 5.825, 5.927)
PLATEAU = 5.927e9


def _rank(rank: int, start_ns: int, end_ns: int, warmup_gb: tuple[float, ...]) -> RankData:
    t = np.arange(start_ns, end_ns, INTERVAL, dtype=np.int64)
    used = np.full(t.shape, PLATEAU)
    used[: len(warmup_gb)] = np.asarray(warmup_gb) * 1e9
    reserved = used - 0.5 * GIB
    return RankData(rank, t, 0.75 * reserved, reserved, used, np.full(t.shape, 80.0 * GIB))


def test_a_warm_up_that_dips_and_climbs_again_is_not_an_incident():
    t0 = 1_795_396_800_000_000_000
    end = t0 + 90 * 10**9
    starts = (0.0, 1.9, 2.9, 4.6)  # staggered starts, seconds
    data = [_rank(r, t0 + int(s * 1e9), end,
                  STEPPED_WARMUP_GB if r == 2 else (4.2, 4.8, 5.4, 5.927))
            for r, s in enumerate(starts)]
    report = analyze(to_timeline(data))
    assert report.cross_rank.first_cause_suspects == [], report.cross_rank.notes
    assert not report.has_findings()


DEMO = Path(__file__).resolve().parent / "data" / "demo_warmup_steps"


def test_a_noisy_first_sample_does_not_make_the_warm_up_an_incident() -> None:
    """The archive of a real ``make demo`` run (4 ranks, rank 2 rises 0.5 s before the others at
    +4.3 s and leaks). Rank 0's first sample stands 1.2 GiB above the dip that follows, then the
    warm-up climbs to the plateau every rank reaches: measured against that first sample alone,
    the climb looked like an incident and rank 0 was named the first cause at high — 3.8 s
    before the real one. Against the plateau the other ranks' warm-ups reach, it is warm-up."""
    timeline = load_paths([str(DEMO)])
    cr = analyze(timeline).cross_rank
    top = cr.first_cause_suspects[0]
    assert (top.rank, top.confidence) == (2, "high")
    assert not [s.rank for s in cr.first_cause_suspects
                if s.rank != 2 and s.confidence in ("high", "medium")]


#: Device used / allocator reserved / allocated (bytes) per rank as Prometheus stored them (15 s
#: scrapes), from a production-suite run (`warm-up-then-incident`: ranks 2 and 3 start 20 s
#: after 0 and 1; rank 0 leads a 1 GiB rise at +82 s). Seconds after 1795415500.
SCRAPED = {
    0: ([28.897, 43.897, 58.897, 73.897, 88.897, 103.904],
        [5926551552] * 4 + [7000293376] * 2, [5389680640] * 4 + [6463422464] * 2,
        [4576199403, 4576368426, 4576278414, 4577226277, 5648917235, 5667163411]),
    1: ([30.078, 45.078, 60.078, 75.078, 90.078, 105.078],
        [5926551552] * 4 + [7000293376] * 2, [5389680640] * 4 + [6463422464] * 2,
        [4629144428, 4628815364, 4628879957, 4625378937, 5702467161, 5699519247]),
    2: ([31.907, 46.907, 61.907, 76.907, 91.907],
        [5160068759, 5926551552, 5926551552, 5926551552, 7000293376],
        [4623197847, 5389680640, 5389680640, 5389680640, 6463422464],
        [4623197847, 4623335463, 4623182406, 4617268644, 5696495056]),
    3: ([34.23, 49.23, 64.23, 79.23, 94.23],
        [5926551552] * 4 + [7000293376], [5389680640] * 4 + [6463422464],
        [3903983470, 3903215740, 3902921054, 3899403731, 4980978706]),
}


def test_a_warm_up_scraped_soon_after_the_window_start_is_not_an_incident() -> None:
    """The query window began at +5.4 s; rank 2's first scrape (+31.9 s) came mid-warm-up
    (4.8 GiB), the next one 15 s later at the plateau every rank holds. A rank was taken for
    one running before the window when its data began within three scrapes of the start (46 s
    here), so its warm-up was not looked for and its climb became a one-rank incident named at
    high, 36 s before the real one. A rank running before the window has a sample within one
    interval of its start; rank 2 had none for 26.5 s, so it started inside it."""
    data = []
    for r, (secs, used, reserved, allocated) in SCRAPED.items():
        t = 1_795_415_500_000_000_000 + (np.asarray(secs) * 1e9).astype(np.int64)
        data.append(RankData(r, t, np.asarray(allocated, float), np.asarray(reserved, float),
                             np.asarray(used, float), np.full(t.shape, 16.0 * GIB)))
    timeline = to_timeline(data)
    timeline.meta["prometheus"] = {"window_start_ns": 1_795_415_505_369_000_000}
    cr = analyze(timeline).cross_rank
    sure = [(i["leader"], i["kind"]) for i in cr.incidents
            if i["confidence"] in ("high", "medium")]
    assert all(leader != 2 for leader, _ in sure), (sure, cr.notes)
    assert not [s.rank for s in cr.first_cause_suspects
                if s.rank == 2 and s.confidence in ("high", "medium")]
    assert any("warm-up of ranks" in n and "2" in n for n in cr.notes), cr.notes


def _scraped(first_s: dict[int, float], low_gb: dict[int, float], high_gb: float,
             window_start_s: float) -> list[str | int]:
    """Four ranks scraped every 15 s; each rank's first scrape at ``first_s``, at
    ``low_gb`` (mid warm-up) when given, then at ``high_gb``; the query window starts at
    ``window_start_s``. Returns the ranks named at high or medium."""
    data = []
    for r, first in first_s.items():
        secs = first + 15.0 * np.arange(6)
        used = np.full(secs.shape, PLATEAU)
        if r in low_gb:
            used[0] = low_gb[r] * 1e9
            used[1:] = high_gb * 1e9
        t = 1_795_415_500_000_000_000 + (secs * 1e9).astype(np.int64)
        data.append(RankData(r, t, 0.75 * (used - 0.5 * GIB), used - 0.5 * GIB, used,
                             np.full(t.shape, 16.0 * GIB)))
    timeline = to_timeline(data)
    timeline.meta["prometheus"] = {
        "window_start_ns": 1_795_415_500_000_000_000 + int(window_start_s * 1e9)}
    cr = analyze(timeline).cross_rank
    return [s.rank for s in cr.first_cause_suspects if s.confidence in ("high", "medium")]


def test_a_rank_first_scraped_mid_warm_up_at_the_window_start_is_catching_up() -> None:
    """The production suite's healthy job, Prometheus path (2026-11-25): rank 3 started last,
    its first scrape (4.77 GB) came within 1.5 intervals of the window start, so it could not
    be told from a rank cut by the window; the next scrape showed the 5.93 GB every rank already
    held. It was named the first cause at high. Climbing from its very first sample to no more
    than the others hold is catching up, not leading."""
    firsts = {0: 3.0, 1: 4.0, 2: 5.0, 3: 9.0}
    assert _scraped(firsts, {3: 4.77}, PLATEAU / 1e9, window_start_s=0.0) == []


def test_a_rank_that_climbs_above_what_the_others_hold_still_leads() -> None:
    """The same shape, but the climb from the first sample goes 2 GB above the level every
    other rank holds: that is not catching up, and the rule above must not hide it."""
    firsts = {0: 3.0, 1: 4.0, 2: 5.0, 3: 9.0}
    assert _scraped(firsts, {3: 4.77}, PLATEAU / 1e9 + 2.0, window_start_s=0.0) == [3]


def _production_run(firsts: dict[int, float], spike_at: dict[int, int],
                    late: tuple[int, float], window_start_ns: int,
                    scrapes: dict[int, int] | None = None) -> CrossRank:
    """A production-suite job as Prometheus scraped it every 15 s: each rank's first scrape at
    ``firsts`` (s into the window), 5.52 GiB held, 6.52 GiB from the scrape ``spike_at`` (the
    planted incident); the ``late`` rank's first scrape caught mid warm-up at that many GiB.
    Six scrapes a rank unless ``scrapes`` says more. Returns the cross-rank section."""
    gib = float(GIB)
    data = []
    for r, first in firsts.items():
        secs = first + 15.0 * np.arange((scrapes or {}).get(r, 6))
        used = np.full(secs.shape, 5.52 * gib)
        used[spike_at[r]:] = 6.52 * gib
        if r == late[0]:
            used[0] = late[1] * gib
        t = window_start_ns + (secs * 1e9).astype(np.int64)
        data.append(RankData(r, t, 0.75 * (used - 0.5 * gib), used - 0.5 * gib, used,
                             np.full(t.shape, 16.0 * gib)))
    timeline = to_timeline(data)
    timeline.meta["prometheus"] = {"window_start_ns": window_start_ns}
    return analyze(timeline).cross_rank


def test_catching_up_is_judged_on_the_climb_not_on_the_rank_s_later_peak() -> None:
    """The production suite's lead-1s job, Prometheus path (a clean-clone `make test`,
    2026-11-27): the same catching up as above — rank 3's first scrape at 4.40 GiB, 11.3 s into
    the window, then the 5.52 GiB every rank held — but a minute later the planted spike took
    every rank to 6.52 GiB, and the catching-up test compared the rank's overall peak (6.52)
    with what the others held (5.52). Rank 3's warm-up became a single-rank incident at high.
    The scrape times and levels are that run's."""
    cr = _production_run(firsts={0: 23.082, 1: 13.092, 2: 24.395, 3: 11.315},
                         spike_at={0: 4, 1: 5, 2: 4, 3: 5}, late=(3, 4.399),
                         window_start_ns=1_795_786_464_434_000_128)
    sure = [(i["kind"], i["leader"]) for i in cr.incidents
            if i.get("confidence") in ("high", "medium")]
    assert not [k for k in sure if k[1] == 3], cr.incidents
    assert any("warm-up of ranks [3]" in n for n in cr.notes), cr.notes


def test_the_first_rank_scraped_mid_warm_up_catches_up_with_the_only_rank_scraped() -> None:
    """The production suite's warm-up-then-incident job, Prometheus path (a clean-clone `make
    test`, 2026-11-29): rank 1 was scraped first, 6.2 s into the window (0.07 s after its start)
    at 3.63 GiB (mid warm-up), the next at the 5.52 GiB rank 0 already held — ranks 2 and 3 not
    yet scraped.
    Catching up was judged only against two or more ranks holding data, so rank 1's warm-up
    became a single-rank incident at high. The scrape times and levels are that run's."""
    cr = _production_run(firsts={0: 18.6, 1: 6.2, 2: 30.1, 3: 38.4},
                         spike_at={0: 4, 1: 5, 2: 4, 3: 3}, late=(1, 3.63),
                         window_start_ns=1_795_984_536_900_000_000, scrapes={1: 7})
    sure = [(i["kind"], i["leader"]) for i in cr.incidents
            if i.get("confidence") in ("high", "medium")]
    assert not [k for k in sure if k[1] == 1], cr.incidents
    assert any("warm-up of ranks" in n and "1" in n for n in cr.notes), cr.notes


LATE_START_OOM = Path(__file__).resolve().parent / "data" / "oom_after_late_start"


def test_a_rise_that_ends_in_an_oom_is_never_a_warm_up() -> None:
    """A real 4-rank archive (data/oom_after_late_start/CASE.md): rank 1's leak began at the
    same delay after its late start as rank 0's warm-up did, and ended in an OOM 1 s before
    rank 3's. Set aside as warm-up, it let rank 3 be named the first cause at high while the OOM
    section said rank 1 ran out first. An OOM ends any warm-up: rank 1 leads, at high."""
    report = analyze(load_paths([str(LATE_START_OOM)]))
    forensics = report.oom_forensics
    assert forensics is not None and forensics.first_rank == 1
    top = report.cross_rank.first_cause_suspects[0]
    assert (top.rank, top.confidence) == (1, "high")
    assert not [s.rank for s in report.cross_rank.first_cause_suspects
                if s.rank != 1 and s.confidence in ("high", "medium")]
