"""The small vectorised statistics, checked against plain-Python definitions."""

import numpy as np
import pytest
from stormotel.analyzers.algorithms.robust import linear_fit, robust_z, rolling_min, runs


@pytest.mark.parametrize("window", [1, 2, 3, 7, 64])
def test_rolling_min_matches_brute_force(window):
    x = np.random.default_rng(window).normal(size=300)
    expected = [min(x[max(0, i - window + 1): i + 1]) for i in range(x.size)]
    np.testing.assert_array_equal(rolling_min(x, window), expected)


def test_runs():
    starts, ends = runs(np.array([0, 1, 1, 0, 1, 0, 0, 1, 1, 1], bool))
    assert starts.tolist() == [1, 4, 7] and ends.tolist() == [2, 4, 9]


def test_linear_fit_and_robust_z():
    t = np.arange(100, dtype=float)
    fit = linear_fit(t, 3.0 * t + 7.0)
    assert fit.slope == pytest.approx(3.0) and fit.intercept == pytest.approx(7.0)
    assert fit.r2 == pytest.approx(1.0)
    x = np.full(1000, 5.0 * 2**20)
    x[500] += 200 * 2**20
    z, med, scale = robust_z(x)
    assert med == 5.0 * 2**20 and scale == 2**20  # MAD 0 → the 1 MiB floor
    assert z[500] == pytest.approx(200.0) and np.count_nonzero(z) == 1


def test_first_cause_with_a_trailing_window_ignores_slow_creep():
    from stormotel.analyzers.algorithms.first_cause import first_rise
    from stormotel.analyzers.algorithms.settings import settings_for

    from tests.analyzers.synth import GIB, healthy, plant_rise, to_timeline

    (d,) = healthy(1, 600, reserved_bytes=2 * GIB)
    d.device_used += np.linspace(0, 1 * GIB, 600)  # slow creep over 60 s
    plant_rise(d, 500, 512 * 2**20)
    series = to_timeline([d]).ranks[0]
    since_start = first_rise(series, settings_for())
    windowed = first_rise(series, settings_for(rise_window_s=5))
    assert since_start is not None and windowed is not None
    assert since_start.t_ns < int(d.t_ns[500])  # the creep alone crossed the threshold
    assert windowed.t_ns == int(d.t_ns[500])  # only the step rises within 5 s
