"""The builder drops what cannot be: samples from the future, bytes above the device total.

Exact counts and the NaNs left, with the cases the one-comparison shortcut must not miss: a
value above the cap while the other fields are NaN at that stamp, the cap unknown (NaN total)
at some stamps, values exactly at the 1 % slack."""

from __future__ import annotations

import numpy as np
from stormotel.analyzers.timeline import TOTAL_SLACK, TimelineBuilder

GiB = 2**30


def _built(t: list[int], now_ns: int = 10**12, **cols: list[float]):
    b = TimelineBuilder()
    b.add_samples(0, np.array(t, np.int64), **{k: np.array(v, float) for k, v in cols.items()})
    return b.build(now_ns=now_ns)


def test_a_value_above_the_total_goes_even_where_every_other_field_is_nan() -> None:
    nan = float("nan")
    tl = _built([1, 2, 3, 4],
                device_total=[80 * GiB, 80 * GiB, nan, 80 * GiB],
                allocated=[nan, 90 * GiB, 90 * GiB, 80 * GiB * TOTAL_SLACK],
                reserved=[80.5 * GiB, nan, nan, 10 * GiB],
                device_used=[nan, nan, 95 * GiB, nan])
    s = tl.ranks[0]
    # stamp 2: allocated above; stamp 3: no total known, nothing judged; stamp 4: at the slack.
    assert np.isnan(s.values["allocated"][1]) and s.values["allocated"][2] == 90 * GiB
    assert s.values["allocated"][3] == 80 * GiB * TOTAL_SLACK
    assert s.values["reserved"][0] == 80.5 * GiB  # within the 1 % slack of 80 GiB
    assert s.values["device_used"][2] == 95 * GiB
    assert tl.skipped["above_device_total"] == 1
    assert any("above the device's total" in n for n in tl.notes)


def test_nothing_above_the_total_and_nothing_late_leaves_the_rank_as_it_came() -> None:
    tl = _built([1, 2, 3], device_total=[80 * GiB] * 3, allocated=[1.0, 2.0, 3.0])
    assert tl.skipped["above_device_total"] == 0 and tl.skipped["future_timestamp"] == 0
    assert tl.ranks[0].values["allocated"].tolist() == [1.0, 2.0, 3.0]


def test_samples_past_the_horizon_are_dropped_and_counted() -> None:
    day = 86_400 * 10**9
    now = 10 * day
    tl = _built([1, now + 2 * day, 2, now + 3 * day], now_ns=now,
                device_total=[80 * GiB] * 4, allocated=[1.0, 2.0, 3.0, 4.0])
    assert tl.ranks[0].t_ns.tolist() == [1, 2]
    assert tl.ranks[0].values["allocated"].tolist() == [1.0, 3.0]
    assert tl.skipped["future_timestamp"] == 2
