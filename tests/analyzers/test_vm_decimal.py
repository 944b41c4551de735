"""The native decoder's floats against a line-by-line transcription of VictoriaMetrics'
``lib/decimal`` at v1.79.5 (the ``victoria-metrics`` this project installs;
``git show v1.79.5:lib/decimal/decimal.go``), scalar and in Go's arithmetic (int16 and int64
wrap-around, division truncating toward zero, ``math.Pow10`` from its two tables), so the
vectorised decoder is checked against the server's conversion, not against itself.

The second test is the mechanism behind the production fleet's 6,826,610,140.999999 through
the native export against 6,826,610,141.0 through the query API: not the decoder (it gives
what the server gives, bit for bit, on the same blocks: tests/job/test_vm_native.py), but the
server's own merge re-scaling a stored integer."""

from __future__ import annotations

import numpy as np
from stormotel.analyzers.sources import vm_native
from stormotel.analyzers.sources.prometheus.samples import whole_bytes

V_INF_POS, V_INF_NEG, V_STALE = (1 << 63) - 1, -(1 << 63), (1 << 63) - 2
V_MAX, V_MIN = (1 << 63) - 3, -(1 << 63) + 1
STALE_BITS = 0x7FF0000000000002
# Go's math.Pow10 tables (pow10tab, pow10postab32): literals, each the nearest float64
POW10TAB = [float(f"1e{i}") for i in range(32)]
POW10POSTAB32 = [float(f"1e{32 * i}") for i in range(10)]


def _i16(x: int) -> int:
    return (x + (1 << 15)) % (1 << 16) - (1 << 15)


def _i64(x: int) -> int:
    return (x + (1 << 63)) % (1 << 64) - (1 << 63)


def _special(v: int) -> bool:
    return v > V_MAX or v < V_MIN


def go_pow10(n: int) -> float:
    """``math.Pow10`` for n >= 0 (the decoder only asks that)."""
    if 0 <= n <= 308:
        return POW10POSTAB32[n // 32] * POW10TAB[n % 32]
    return float("inf")


def append_decimal_to_float(va: list[int], e: int) -> list[float]:
    """``decimal.AppendDecimalToFloat``, statement by statement."""
    if all(v == 0 for v in va):
        return [0.0] * len(va)
    if e == 0 and all(v == 1 for v in va):
        return [1.0] * len(va)
    out = []
    for v in va:
        if e == 0:
            f = float(v)  # Go's float64(int64): round to nearest, ties to even, as Python's
        elif e < 0:
            f = float(v) / go_pow10(-e)
        else:
            f = float(v) * go_pow10(e)
        if _special(v):
            f = (float("inf") if v == V_INF_POS else float("-inf") if v == V_INF_NEG
                 else np.array(STALE_BITS, np.uint64).view(np.float64).item())
        out.append(f)
    return out


def max_up_exponent(v: int) -> int:
    """``decimal.maxUpExponent``."""
    if v == 0 or _special(v):
        return 1024
    v = _i64(-v) if v < 0 else v
    if v < 0:
        return 0
    int64_max = (1 << 63) - 1
    for k in range(18, 0, -1):
        if v <= int64_max // 10 ** k:
            return k
    return 0


def calibrate_scale(a: list[int], ae: int, b: list[int], be: int
                    ) -> tuple[list[int], list[int], int]:
    """``decimal.CalibrateScale`` (what a merge of two blocks of one series does): the two
    mantissa lists rescaled to one exponent, and that exponent."""
    if ae == be or not a or not b:
        return a, b, ae if ae == be or not b else be
    swapped = ae < be
    if swapped:
        a, b, ae, be = b, a, be, ae
    up = _i16(ae - be)
    down = 0
    for v in a:
        if _i16(up - max_up_exponent(v)) > down:
            down = _i16(up - max_up_exponent(v))
    up = _i16(up - down)
    a = [v if _special(v) else _i64(v * 10 ** max(up, 0)) for v in a]
    if down > 0:
        b = [v if _special(v) else int(v / 10 ** down) if abs(v) < 1 << 53
             else _go_div(v, 10 ** down) for v in b]
    e = _i16(be + down)
    return (b, a, e) if swapped else (a, b, e)


def _go_div(v: int, d: int) -> int:
    """Go's int64 division: truncation toward zero."""
    q = abs(v) // d
    return q if v >= 0 else -q


def all_special_block_exponent(n: int) -> int:
    """The exponent ``AppendFloatToDecimal`` gives a block whose values are all special (a
    staleness marker alone): min over no value is int16 max, and the up-scaling check wraps."""
    min_exp = (1 << 15) - 1
    down = 0
    for _ in range(n):
        up = _i16(0 - min_exp)
        if _i16(up - 1024) > down:
            down = _i16(up - 1024)
    return _i16(min_exp + down)


def _decode(blocks: list[tuple[list[int], int]]) -> np.ndarray:
    v = np.array([x for va, _ in blocks for x in va], np.int64)
    scale = np.array([e for _, e in blocks], np.int64)
    rows = np.array([len(va) for va, _ in blocks], np.int64)
    return vm_native.decimal_to_float(v, scale, rows)


def _same_floats(got: np.ndarray, want: list[float]) -> bool:
    w = np.array(want, np.float64)
    nan = np.isnan(w)
    stale = w.view(np.uint64) == STALE_BITS
    return (np.array_equal(np.isnan(got), nan)
            and np.array_equal(got.view(np.uint64)[stale], w.view(np.uint64)[stale])
            and np.array_equal(got.view(np.uint64)[~nan], w.view(np.uint64)[~nan]))


def test_the_decoder_converts_as_victoriametrics_does_bit_for_bit() -> None:
    """Many mantissas (small, around 2^53 where float64 starts rounding, up to the special
    values, both signs) at every exponent a block can carry that matters (−330..330, where
    10^23 and beyond are not exact and 10^32+ come from Go's two tables, and the −1024 of a
    staleness-marker block), decoded all at once, equal the transcription's, block by block."""
    rng = np.random.default_rng(11)
    pools = [
        lambda k: rng.integers(-1000, 1000, k),
        lambda k: rng.integers(1 << 52, 1 << 55, k),
        lambda k: rng.integers(-(1 << 62), 1 << 62, k),
        lambda k: rng.integers(6_000_000_000, 9_000_000_000, k) * 10 ** 9,  # merged bytes
        lambda k: np.full(k, 6826610141 * 10 ** 9),
        lambda k: np.zeros(k, np.int64),
        lambda k: np.ones(k, np.int64),
        lambda k: rng.choice([V_INF_POS, V_INF_NEG, V_STALE, V_MAX, V_MIN, 0, 1, -1], k),
    ]
    exps = [*range(-40, 41), -330, -309, -308, -300, -1024, 300, 308, 309, 330]
    blocks = []
    for _ in range(3000):
        va = [int(x) for x in pools[int(rng.integers(len(pools)))](int(rng.integers(1, 6)))]
        blocks.append((va, int(rng.choice(exps))))
    got = _decode(blocks)
    want = [f for va, e in blocks for f in append_decimal_to_float(va, e)]
    assert _same_floats(got, want)
    at = 0
    for va, e in blocks:  # and one block at a time (the per-block masks see one kind)
        assert _same_floats(_decode([(va, e)]), append_decimal_to_float(va, e)), (va, e)
        at += len(va)
    assert at == got.size


def test_a_merge_with_a_staleness_marker_block_rescales_integers_one_ulp_off() -> None:
    """A block holding only a staleness marker gets exponent −1024 (int16 wrap-around in
    ``AppendFloatToDecimal``); merging it with a block of byte counts at exponent 0
    (``CalibrateScale``) multiplies them by 10^9 and the merged block reads 6,826,610,141 as
    6,826,610,140.999999 — through the server's conversion and the decoder alike. The
    analysis reads whole bytes, which gives the stored integer back."""
    assert all_special_block_exponent(1) == -1024
    ints = [6826610141, 6830804445, 7000000000]
    a, b, e = calibrate_scale(list(ints), 0, [V_STALE], -1024)
    assert e == -9 and a == [v * 10 ** 9 for v in ints] and b == [V_STALE]
    want = append_decimal_to_float(a + b, e)
    got = _decode([(a + b, e)])
    assert _same_floats(got, want)
    assert got[0] == 6826610140.999999 and got[0] != 6826610141.0
    assert np.array_equal(whole_bytes(got[:3]), np.array(ints, np.float64))
    # before the merge the integer block alone decodes exactly
    assert _decode([(ints, 0)]).tolist() == [float(v) for v in ints]
