"""Estimate vs. actual on a synthetic multi-rank Timeline."""

from __future__ import annotations

import numpy as np
import pytest
from stormotel.analyzers.algorithms.estimate_ratio import estimate_ratios, estimate_section
from stormotel.analyzers.timeline import RankIdentity, Timeline, TimelineBuilder

GIB = 2**30


def _timeline() -> Timeline:
    b = TimelineBuilder()
    t = np.arange(0, 10_000_000_000, 1_000_000_000, dtype=np.int64)  # 10 samples, 1 s apart
    ramp = np.linspace(0.5, 1.0, t.size)
    b.add_samples(0, t, allocated=ramp * 10 * GIB, reserved=ramp * 12 * GIB)  # peak 10 GiB
    b.add_samples(1, t, allocated=ramp * 13 * GIB)  # 30 % over a 10 GiB estimate
    b.add_samples(2, t, reserved=ramp * 9 * GIB)  # no allocated: falls back to reserved
    spike = np.full(t.size, 4.0 * GIB)
    spike[6] = np.nan  # a missing sample is ignored, not a zero
    b.add_samples(3, t, allocated=spike)
    for r in range(4):
        b.set_identity(RankIdentity(rank=r, world_size=5))
    return b.build()


def test_ratio_per_rank_with_one_estimate_for_all() -> None:
    ratios, notes = estimate_ratios(_timeline(), 10 * GIB, margin=0.1)
    by_rank = {r.rank: r for r in ratios}
    assert by_rank[0].ratio == pytest.approx(1.0)
    assert by_rank[0].field == "allocated" and by_rank[0].peak_ns == 9_000_000_000
    assert not by_rank[0].over_estimate
    assert by_rank[1].ratio == pytest.approx(1.3) and by_rank[1].over_estimate
    assert by_rank[2].field == "reserved" and by_rank[2].ratio == pytest.approx(0.9)
    assert by_rank[3].ratio == pytest.approx(0.4)
    assert any("rank 2: actual peak from reserved" in n for n in notes)


def test_estimates_from_timeline_meta_and_missing_ranks() -> None:
    tl = _timeline()
    tl.meta["estimate_bytes"] = {0: 8 * GIB, 1: 0, 4: GIB}
    ratios, notes = estimate_ratios(tl)
    by_rank = {r.rank: r for r in ratios}
    assert by_rank[0].ratio == pytest.approx(1.25) and by_rank[0].over_estimate
    assert by_rank[1].ratio is None and by_rank[2].estimate_bytes is None
    assert "rank 1: estimate 0 B is not positive; no ratio" in notes
    assert "rank 2: no estimate" in notes
    assert "rank 4: estimate given but no samples" in notes
    est = estimate_section(ratios, notes)
    assert est is not None and est.ratio_by_rank() == {0: pytest.approx(1.25)}
    section = est.extra_entries()  # the JSON contract's keys
    assert section["estimate_ratio"] == {0: pytest.approx(1.25)}
    assert section["estimate_vs_actual"]["ranks"][0]["actual_peak_bytes"] == 10 * GIB
    assert [r.rank for r in est.over()] == [0]


def test_no_estimate_leaves_the_report_unchanged() -> None:
    ratios, _ = estimate_ratios(_timeline())
    assert all(r.ratio is None for r in ratios)
    assert estimate_section(*estimate_ratios(_timeline())) is None


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="margin"):
        estimate_ratios(_timeline(), GIB, margin=-1)
    with pytest.raises(TypeError, match="mapping rank -> bytes"):
        estimate_ratios(_timeline(), "10GiB")  # type: ignore[arg-type]
