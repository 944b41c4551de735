"""Several endpoints merge to the same series in any order (HA pairs, one TSDB per cluster)."""

from __future__ import annotations

import itertools

import numpy as np
from stormotel.analyzers.sources.prometheus import merge_parts


def test_merge_is_order_independent_drops_duplicates_and_counts_conflicts() -> None:
    a = (np.array([1, 2, 3], np.int64), np.array([10.0, 20.0, 30.0]))
    b = (np.array([2, 3, 4], np.int64), np.array([20.0, 35.0, 40.0]))  # 3: a conflict
    c = (np.array([1], np.int64), np.array([10.0]))  # an exact duplicate of a's first sample
    results = []
    for parts in itertools.permutations([a, b, c]):
        t, v, dups, conflicts = merge_parts(list(parts))
        results.append((t.tolist(), v.tolist(), dups, conflicts))
    assert all(r == results[0] for r in results)
    assert results[0] == ([1, 2, 3, 4], [10.0, 20.0, 35.0, 40.0], 2, 1)
