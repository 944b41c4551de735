"""A warm-up is not un-set-aside by an OOM that a later rise of the same rank ran into.

Shape of ``tests/analyzers/test_oom_counter.py``'s job (real ``stormotel track`` ranks on the
simulated device, 10 Hz, a 10 s lead-in; replayed from a run that kept its archive): every rank
warms up just after its start; rank 1 leaks from 0.5 s after the epoch and runs out at 2 s;
rank 3 spikes at 2.5 s and runs out at 3 s. A rise that ends in an OOM within the warm-up
window (20 s) was taken out of the warm-ups, so rank 3's own warm-up — settled ~10 s before —
became an "incident" ahead of rank 1's leak: the verdict led with "rank 3: first cause" (low
when another rank's warm-up overlapped, **high** when none did), beside an OOM section saying
rank 1 ran out first. The OOM belongs to the rise that was climbing when it came.
"""

from __future__ import annotations

import numpy as np
from stormotel.analyzers.analyze import analyze
from stormotel.analyzers.timeline import KIND_OOM

from tests.analyzers.synth import GIB, INTERVAL, T0, RankData, to_timeline

S = 1_000_000_000
EPOCH = T0 + 10 * S
STARTS_S = {0: 0.13, 1: 0.0, 2: 0.06, 3: 0.23}  # after the first rank's start (the real run's)


def _rank(rank: int) -> RankData:
    start = T0 + int(STARTS_S[rank] * S)
    t = np.arange(start, EPOCH + int(4.5 * S), INTERVAL, dtype=np.int64)
    since = (t - start) / S
    used = 4.0 * GIB + 1.5 * GIB * np.clip(since / 0.6, 0.0, 1.0)  # the warm-up, ~0.6 s
    markers = []
    at = (t - EPOCH) / S
    if rank == 1:  # leaks 8 GiB/s from 0.5 s, out of memory at 2 s (its memory freed): its
        # peak puts its rise threshold above its warm-up, which then shows no rise at all
        used = used + np.where((at >= 0.5) & (at < 2.0), 8 * GIB * (at - 0.5), 0.0)
        oom = EPOCH + 2 * S
        markers.append((oom, oom, "oom", KIND_OOM))
    if rank == 3:  # a 2 GiB spike at 2.5 s, 7 GiB held when it runs out at 3 s
        used = used + np.where((at >= 2.5) & (at < 3.0), 2 * GIB, 0.0) \
            + np.where((at >= 2.9) & (at < 3.0), 5 * GIB, 0.0)
        oom = EPOCH + 3 * S
        markers.append((oom, oom, "oom", KIND_OOM))
    reserved = used - 0.5 * GIB
    return RankData(rank, t, 0.75 * reserved, reserved, used, np.full(t.shape, 80.0 * GIB),
                    markers)


def test_a_settled_warm_up_is_not_the_rise_a_later_oom_ended() -> None:
    cr = analyze(to_timeline([_rank(r) for r in range(4)], job_id="oomcount")).cross_rank
    sure = [(s.rank, s.confidence) for s in cr.first_cause_suspects]
    assert sure[0] == (1, "high"), (sure, cr.incidents)
    assert not [s.rank for s in cr.first_cause_suspects
                if s.rank != 1 and s.confidence in ("high", "medium")]


def test_a_warm_up_that_ran_out_is_still_an_incident() -> None:
    """What the OOM rule is for: rank 3's rise that climbs from its warm-up straight into its
    OOM (no other rise between) stays an incident — here the only one."""
    data = [_rank(r) for r in range(4)]
    d = data[3]
    at = (d.t_ns - T0) / S
    climb = (at >= 0.23) & (at < 5.0)
    d.device_used = np.where(climb, d.device_used + 0.8 * GIB * (at - 0.23), d.device_used)
    d.markers = [(T0 + 5 * S, T0 + 5 * S, "oom", KIND_OOM)]
    data[1] = _rank(0)
    data[1].rank = 1
    cr = analyze(to_timeline(data, job_id="oomcount")).cross_rank
    assert [s.rank for s in cr.first_cause_suspects] == [3], cr.incidents
