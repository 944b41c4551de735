"""The fused per-rank passes against the plain, unfused definitions they replaced.

The algorithms read each rank a few times, into reused work arrays, with exact screens (a rise
cannot exceed max − min; a tail fit without growth needs no R²) and selections instead of
sorts. Each reference below is the straightforward formulation — full-length masks, copies,
``np.median``, one running minimum over everything — and the fused result must equal it
**exactly** (bit for bit, not approximately) on random series with NaNs, ties, flat tops,
several rises, rises past the first block of the running minimum, and drifts.
"""

from __future__ import annotations

import numpy as np
import pytest
from stormotel.analyzers.algorithms.first_cause import RISE_BLOCK, rises_of
from stormotel.analyzers.algorithms.gap import fragmentation_finding, prepare_gap
from stormotel.analyzers.algorithms.robust import (
    ROBUST_SAMPLE,
    all_finite,
    finite_ends,
    linear_fit,
    linear_slope,
    median_in_place,
    rolling_min,
)
from stormotel.analyzers.algorithms.scratch import Scratch
from stormotel.analyzers.algorithms.settings import Settings, settings_for
from stormotel.analyzers.timeline import RankIdentity, RankSeries

MIB = 2.0**20
GIB = 2.0**30
T0 = 1_700_000_000_000_000_000


def _series(rng: np.random.Generator, n: int, *, nan_share: float = 0.0) -> RankSeries:
    """Steps up and down, noise quantised to 1 MiB (so minima and peaks tie), spikes with flat
    tops, sometimes a drift in the gap, sometimes NaN holes, sometimes an idle pool."""
    t = T0 + np.cumsum(rng.choice([100_000_000, 100_000_000, 250_000_000], n)).astype(np.int64)
    reserved = np.full(n, 8 * GIB)
    for at in rng.integers(0, n, int(rng.integers(0, 5))):
        reserved[at:] += float(rng.choice([-1, 1, 2])) * rng.choice([64, 900, 3000]) * MIB
    noise = np.round(rng.normal(0, 3, n)) * MIB
    gap = 512 * MIB + noise
    for at in rng.integers(0, n, int(rng.integers(0, 6))):
        gap[at:at + int(rng.integers(1, 6))] += float(rng.choice([200, 600, 2000])) * MIB
    if rng.random() < 0.4:
        gap += np.linspace(0, float(rng.choice([50, 400, 3000])) * MIB, n)
    used = reserved + gap
    allocated = reserved * float(rng.choice([0.9, 0.45, 0.2])) + noise
    values = {"allocated": allocated, "reserved": reserved, "device_used": used,
              "device_total": np.full(n, 80 * GIB)}
    if nan_share:
        for name in ("device_used", "reserved", "allocated"):
            values[name][rng.random(n) < nan_share] = np.nan
    return RankSeries(RankIdentity(rank=0, job_id="fused"), t, values)


# --- references: the unfused definitions --------------------------------------------------------
def _ref_rises(series: RankSeries, settings: Settings) -> list[tuple]:
    x = series.values["device_used"]
    ok = np.isfinite(x)
    out: list[tuple] = []
    after = None
    for _ in range(16):
        t, v = series.t_ns[ok], x[ok]
        if t.shape[0] < 2:
            break
        peak = float(v.max())
        if after is not None:
            keep = t > after
            t, v = t[keep], v[keep]
            if t.shape[0] < 2:
                break
        threshold = max(settings.rise_fraction * peak, settings.rise_floor_bytes)
        if settings.rise_window_s > 0:
            interval = max(int(np.median(np.diff(t))), 1)
            base = rolling_min(v, max(2, int(np.ceil(settings.rise_window_s * 1e9 / interval)) + 1))
        else:
            base = np.minimum.accumulate(v)
        hit = np.flatnonzero(v - base >= threshold)
        if hit.size == 0:
            break
        i = int(hit[0])
        at_base = np.flatnonzero(v[: i + 1] == base[i])
        j = int(at_base[-1]) if at_base.size else 0
        level = float(np.median(v[max(0, j - 4): j + 1]))
        slow = np.flatnonzero(np.diff(v[i:]) < 0.1 * threshold)
        settled = int(t[i + int(slow[0])]) if slow.size else int(t[-1])
        hole = int(t[i] - t[i - 1]) if i > 0 else 0
        out.append((int(t[i]), float(v[i] - level), threshold, int(t[j]), level, peak, settled,
                    hole))
        after = max(settled, int(t[i]), after or 0)
    return out


def _ref_runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = np.diff(np.concatenate(([False], mask, [False])).astype(np.int8))
    return np.flatnonzero(d == 1), np.flatnonzero(d == -1) - 1


def _ref_episodes(series: RankSeries, settings: Settings) -> dict[str, np.ndarray] | None:
    g = series.values["device_used"] - series.values["reserved"]
    ok = np.isfinite(g)
    t, g = series.t_ns[ok], g[ok]
    if t.shape[0] < settings.min_samples:
        return None
    ts = (t - t[0]) / 1e9
    fit = _ref_fit(ts, g)
    resid = g - (fit[0] * ts + fit[1]) if fit[2] >= settings.drift_min_r2 else g
    sub = resid[:: max(1, resid.shape[0] // ROBUST_SAMPLE)]
    med = float(np.median(sub))
    scale = max(1.4826 * float(np.median(np.abs(sub - med))), MIB)
    z = (resid - med) / scale
    excess = resid - med
    starts, ends = _ref_runs((z >= settings.spike_z) & (excess >= settings.spike_min_bytes))
    peaks = [s + int(np.argmax(excess[s:e + 1])) for s, e in zip(starts, ends, strict=True)]
    return {"start_ns": t[starts], "end_ns": t[ends], "peak_ns": t[peaks],
            "peak_excess_bytes": excess[peaks], "peak_gap_bytes": g[peaks], "peak_z": z[peaks],
            "recovered": ends < g.shape[0] - 1}


def _ref_fit(t: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    tm, ym = t.mean(), y.mean()
    dt, dy = t - tm, y - ym
    sxx = float(np.einsum("i,i->", dt, dt))
    if sxx == 0.0:
        return 0.0, float(ym), 0.0
    slope = float(np.einsum("i,i->", dt, dy)) / sxx
    ss_tot = float(np.einsum("i,i->", dy, dy))
    resid = dy - slope * dt
    r2 = 1.0 - float(np.einsum("i,i->", resid, resid)) / ss_tot if ss_tot > 0 else 0.0
    return slope, float(ym - slope * tm), r2


def _ref_fragmented_share(series: RankSeries, settings: Settings) -> float | None:
    res = series.values["reserved"]
    idle_all = res - series.values["allocated"]
    ok = np.isfinite(res) & np.isfinite(idle_all) & (res > 0)
    if int(ok.sum()) < settings.min_samples:
        return None
    idle, r = idle_all[ok], res[ok]
    frag = (idle / r >= settings.frag_ratio) & (idle >= settings.frag_min_bytes)
    return float(frag.mean())


# --- the checks ---------------------------------------------------------------------------------
SHAPES = [(40, 0.0), (300, 0.0), (3 * RISE_BLOCK + 7, 0.0), (2_000, 0.05), (9_000, 0.0),
          (700, 0.5), (20_000, 0.001), (12, 0.0), (5_000, 0.0), (RISE_BLOCK + 1, 0.0)]
#: (seed, samples, share of NaN samples): every shape under three seeds.
CASES = [(seed, *SHAPES[seed % len(SHAPES)]) for seed in range(3 * len(SHAPES))]


@pytest.mark.parametrize(("seed", "n", "nan_share"), CASES)
@pytest.mark.parametrize("sensitivity", ["medium", "high"])
def test_rises_equal_the_unfused_running_minimum(seed, n, nan_share, sensitivity):
    rng = np.random.default_rng(seed)
    series = _series(rng, n, nan_share=nan_share)
    for settings in (settings_for(sensitivity), settings_for(sensitivity, rise_window_s=30)):
        got = [(fr.t_ns, fr.delta_bytes, fr.threshold_bytes, fr.baseline_ns, fr.baseline_bytes,
                fr.peak_bytes, fr.settled_ns, fr.hole_ns)
               for fr in rises_of(series, settings, Scratch())]
        assert got == _ref_rises(series, settings)


def test_a_rise_past_the_first_block_is_found_where_one_accumulation_finds_it():
    rng = np.random.default_rng(99)
    series = _series(rng, 3 * RISE_BLOCK, nan_share=0.0)
    used = series.values["device_used"]
    used[:] = 10 * GIB + np.round(rng.normal(0, 2, used.shape[0])) * MIB
    used[2 * RISE_BLOCK + 5:] += 4 * GIB
    got = rises_of(series, settings_for())
    assert [fr.t_ns for fr in got] == [r[0] for r in _ref_rises(series, settings_for())]
    assert got[0].t_ns == int(series.t_ns[2 * RISE_BLOCK + 5])


@pytest.mark.parametrize(("seed", "n", "nan_share"), CASES)
@pytest.mark.parametrize("sensitivity", ["low", "medium", "high"])
def test_spike_episodes_equal_full_length_z_scores(seed, n, nan_share, sensitivity):
    series = _series(np.random.default_rng(seed), n, nan_share=nan_share)
    settings = settings_for(sensitivity)
    work = Scratch()
    prepare_gap(_series(np.random.default_rng(seed + 1), n), settings, work)  # dirty the arrays
    rg = prepare_gap(series, settings, work)
    want = _ref_episodes(series, settings)
    if want is None:
        assert rg is None
        return
    assert rg is not None
    assert (rg.fit.slope, rg.fit.intercept, rg.fit.r2) == _ref_fit(
        (rg.t_ns - rg.t_ns[0]) / 1e9, rg.gap)
    for name, expected in want.items():
        np.testing.assert_array_equal(getattr(rg.episodes, name), expected, err_msg=name)


@pytest.mark.parametrize(("seed", "n", "nan_share"), CASES)
def test_fragmented_share_equals_the_mask_mean(seed, n, nan_share):
    series = _series(np.random.default_rng(seed), n, nan_share=nan_share)
    for settings in (settings_for(), settings_for(frag_sustain=0.0, frag_ratio=0.5)):
        want = _ref_fragmented_share(series, settings)
        got = fragmentation_finding(series, settings, Scratch())
        if got is not None:
            assert want is not None
            if got.evidence["window_share"] == 1.0:
                assert got.evidence["fragmented_share"] == want
        elif want is not None:
            assert want < settings.frag_sustain or want == 0.0


@pytest.mark.parametrize("n", [1, 2, 3, 8, 9, 100, 8_193, 9_000])
def test_small_statistics_equal_numpy(n):
    rng = np.random.default_rng(n)
    for x in (rng.normal(5e8, 2e6, n), np.round(rng.normal(0, 2, n)), np.full(n, 7.0)):
        assert median_in_place(x.copy()) == np.median(x)
        t = np.sort(rng.uniform(0, 3600, n))
        fit = linear_fit(t, x, Scratch())
        assert (fit.slope, fit.intercept, fit.r2) == _ref_fit(t, x)
        assert linear_slope(t, x) == fit.slope
        assert all_finite(x) and finite_ends(x) == (0, n - 1)
    holes = rng.normal(size=n + 3)
    holes[[0, -1]] = [np.nan, np.inf]
    assert not all_finite(holes) and finite_ends(holes) == (1, n + 1)
    assert np.isnan(median_in_place(np.array([1.0, np.nan, 3.0])))
