"""A warm-up climbs in steps: activations come and go while the allocator ramps up, so the
device-used series of a starting rank can dip and climb again within its first second. That
second climb is the same warm-up, not an incident. The shape below is rank 2 of a healthy
staggered 4-rank job (`stormotel track`, simulated sampler, compact archive) that was once
named the first cause at high confidence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from stormotel.analyzers.analyze import analyze
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
