"""Checks run over all ranks at once (10,000 ranks from a TSDB) give each rank what the
rank-by-rank code gives: the impossible-data check of the Timeline builder and the order,
finiteness and counter checks of TSDB marker series."""

from __future__ import annotations

import numpy as np
from stormotel.analyzers.sources.prometheus.markers import StepNames, markers_from_series
from stormotel.analyzers.timeline import FIELDS, TimelineBuilder

GIB = 2.0**30
NOW = 10**18


def _rank_columns(rng: np.random.Generator, rank: int) -> tuple[np.ndarray, dict]:
    """One rank's chunk: usually possible; sometimes a value above the device total, a stamp
    from the future, no total at all, out of order, or empty."""
    n = int(rng.integers(1, 9))
    t = np.cumsum(rng.integers(1, 4, n)).astype(np.int64) * 10**9 + rank
    cols = {f: rng.uniform(0, 8, n) * GIB for f in FIELDS}
    cols["device_total"] = np.full(n, 8 * GIB)
    kind = rank % 9
    if kind == 1:
        cols["reserved"][n // 2] = 9 * GIB  # above the total
    elif kind == 2:
        t[-1] = NOW + 2 * 24 * 3600 * 10**9  # stamped two days after now
    elif kind == 3:
        cols["device_total"][:] = np.nan  # total unknown: nothing to compare
    elif kind == 4:
        cols["device_total"][0] = np.nan  # total unknown at one stamp only
        cols["active"][0] = 100 * GIB
    elif kind == 5 and n > 1:
        t = t[::-1].copy()  # out of order: the rank-by-rank path
    elif kind == 6:
        cols["inactive_split"][:] = np.nan
        cols["device_used"][-1] = 8.05 * GIB  # within the 1 % slack
    elif kind == 7:
        t, cols = t[:0], {f: a[:0] for f, a in cols.items()}
    return t, cols


def test_builder_batch_check_equals_each_ranks_own() -> None:
    rng = np.random.default_rng(11)
    batch = TimelineBuilder()
    chunks = {}
    for rank in range(3000):  # more than one batch of ranks
        t, cols = _rank_columns(rng, rank)
        chunks[rank] = (t, cols)
        batch.add_samples(rank, t, **cols)
        if rank % 13 == 0:  # a second chunk: the rank-by-rank path
            batch.add_samples(rank, t + 1, **cols)
    got = batch.build(now_ns=NOW)
    ref = TimelineBuilder()
    horizon = NOW + 24 * 3600 * 10**9
    for rank in range(3000):
        t, cols = chunks[rank]
        parts = [(t, dict(cols))] + ([(t + 1, dict(cols))] if rank % 13 == 0 else [])
        want_t, want = ref._drop_impossible(rank, *ref._merge_chunks(parts), horizon)
        s = got.ranks[rank]
        assert np.array_equal(s.t_ns, want_t), rank
        for f in FIELDS:
            assert np.array_equal(s.values[f], want[f], equal_nan=True), (rank, f)
    assert got.skipped == ref.skipped
    assert got.skipped["above_device_total"] > 0 and got.skipped["future_timestamp"] > 0
    assert got.notes == ref.notes


def _counter(rng: np.random.Generator, rank: int) -> list[tuple[np.ndarray, np.ndarray]]:
    n = int(rng.integers(0, 10))
    t = np.cumsum(rng.integers(1, 4, n)).astype(np.int64) * 10**9
    v = np.cumsum(rng.integers(0, 2, n) * (rank % 3 == 0)).astype(np.float64)  # most flat
    kind = rank % 6
    if kind == 1 and n > 1:
        t = t[::-1].copy()
    elif kind == 2 and n:
        v[0] = np.nan
    elif kind == 4 and n > 2:
        return [(t[: n // 2], v[: n // 2]), (t[n // 2:], v[n // 2:])]  # two chunks
    return [(t, v)]


def test_marker_series_checked_at_once_equal_each_series_alone() -> None:
    """OOM counters and steps, in order or not, with NaN, in two chunks, empty, flat or
    rising: markers of all ranks at once are those of each rank read alone."""
    rng = np.random.default_rng(5)
    series = {}
    for rank in range(400):
        series[("oom", rank)] = _counter(rng, rank)
        step = _counter(rng, rank + 1)
        series[("step", rank)] = [(t, v * 3) for t, v in step]
    many = markers_from_series(series, StepNames())
    assert any(len(m) and "oom" in m.kinds for m in many.values())
    assert any(len(m) and "step" in m.kinds for m in many.values())
    for rank in range(400):
        alone = markers_from_series({k: v for k, v in series.items() if k[1] == rank},
                                    StepNames())
        assert (rank in many) == (rank in alone), rank
        if rank not in many:
            continue
        a, b = many[rank], alone[rank]
        assert a.start_ns.tolist() == b.start_ns.tolist(), rank
        assert a.end_ns.tolist() == b.end_ns.tolist(), rank
        assert a.name.tolist() == b.name.tolist(), rank
        assert a.kind.tolist() == b.kind.tolist(), rank
        assert a.attrs == b.attrs, rank
