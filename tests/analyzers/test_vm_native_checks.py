"""The vectorised marshal-type rule of :mod:`stormotel.analyzers.sources.vm_native_checks`
against a line-by-line transcription of VictoriaMetrics' ``lib/encoding/encoding.go``
(v1.79.5: ``marshalInt64Array``'s ``isConst`` / ``isDeltaConst`` / ``isGauge``), on blocks of
every shape the rule tells apart: constants, constant steps, counters with 0-40 resets,
falls just above and below ``prev >> 3``, negative values, int64 extremes (steps that wrap)."""

from __future__ import annotations

import numpy as np
from stormotel.analyzers.sources import vm_native_checks as c

I64 = 1 << 64


def _wrap(x: int) -> int:
    return (x + (1 << 63)) % I64 - (1 << 63)


def _is_const(a: list[int]) -> bool:
    return len(a) > 0 and all(v == a[0] for v in a)


def _is_delta_const(a: list[int]) -> bool:
    if len(a) < 2:
        return False
    d1 = _wrap(a[1] - a[0])
    prev = a[1]
    for nxt in a[2:]:
        if _wrap(nxt - prev) != d1:
            return False
        prev = nxt
    return True


def _is_gauge(a: list[int]) -> bool:
    if len(a) < 2:
        return False
    resets = 0
    v_prev = a[0]
    if v_prev < 0:
        return True
    for v in a[1:]:
        if v < v_prev:
            if v < 0:
                return True
            if v > (v_prev >> 3):
                return True
            resets += 1
        v_prev = v
    if resets <= 2:
        return False
    return resets > (len(a) >> 3)


def _go_type(a: list[int]) -> int:
    if _is_const(a):
        return c.CONST
    if _is_delta_const(a):
        return c.DELTA_CONST
    return c.ND if _is_gauge(a) else c.ND2


def _blocks(rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for _ in range(400):
        n = int(rng.choice([1, 2, 3, 8, 9, 17, 64, 300]))
        kind = rng.integers(0, 8)
        if kind == 0:
            a = np.full(n, rng.integers(-5, 5))
        elif kind == 1:
            a = rng.integers(-10, 10) + np.arange(n) * rng.integers(-3, 4)
        elif kind == 2:  # a counter with resets to a small value
            a = np.cumsum(rng.integers(0, 100, n))
            for at in rng.integers(0, n, rng.integers(0, 41)):
                a[at:] -= a[at] - rng.integers(0, 3)
        elif kind == 3:  # falls to just above / below prev >> 3
            a = np.cumsum(rng.integers(0, 1000, n)) + 800
            at = int(rng.integers(1, n)) if n > 1 else 0
            if at:
                a[at] = (a[at - 1] >> 3) + rng.integers(-1, 2)
        elif kind == 4:
            a = rng.integers(-1000, 1000, n)
        elif kind == 5:  # int64 extremes: steps that wrap
            a = rng.choice(np.array([-(1 << 63), (1 << 63) - 1, 0, 1, -1], np.int64), n)
        elif kind == 6:  # scrape timestamps with jitter
            a = 1_700_000_000_000 + np.arange(n) * 15_000 + rng.integers(0, 40, n)
        else:
            a = np.sort(rng.integers(0, 50, n))
        out.append(np.asarray(a, np.int64))
    return out


def test_the_marshal_type_rule_is_the_servers() -> None:
    blocks = _blocks(np.random.default_rng(11))
    rows = np.array([b.size for b in blocks], np.int64)
    got = c.canonical_types(rows, np.concatenate(blocks))
    want = [_go_type([int(v) for v in b]) for b in blocks]
    assert got.tolist() == want
    assert set(want) == {c.CONST, c.DELTA_CONST, c.ND, c.ND2}
