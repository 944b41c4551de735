"""Integer data points parsed in C: exact numbers for canonical text, ``None`` for anything else.

Every refusal matters as much as the numbers: a body the parser accepted wrongly would become a
wrong sample read with full confidence, so each near-miss of the canonical text is listed here.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from stormotel.analyzers.sources.otlp_points import int_points


def _body(points: list[tuple[int, int]]) -> bytes:
    return json.dumps([{"timeUnixNano": str(t), "asInt": str(v)} for t, v in points],
                      separators=(",", ":")).encode()


def test_numbers_of_every_width_and_per_array_counts() -> None:
    rng = random.Random(7)
    widths = [1, 2, 7, 8, 9, 15, 16, 17, 18, 19]
    values = [rng.randrange(10 ** (w - 1), min(10**w, 9 * 10**18)) for w in widths]
    values += [0, 1, 10**8, 10**16, 8_999_999_999_999_999_999, 2**53 + 1]
    times = [1_795_399_956_705_379_155 + i for i in range(len(values))]
    pairs = list(zip(times, values, strict=True))
    bodies = [_body(pairs[:3]), _body(pairs[3:4]), _body(pairs[4:])]
    got = int_points(bodies)
    assert got is not None
    t, v, per_body = got
    assert t.dtype == v.dtype == np.int64
    assert t.tolist() == times and v.tolist() == values
    assert per_body.tolist() == [3, 1, len(pairs) - 4]


@pytest.mark.parametrize("body", [
    b'[{"timeUnixNano":"1","asInt":"2"},{"timeUnixNano":"3","asDouble":4.0}]',
    b'[{"timeUnixNano":"1","asInt":"2","attributes":[]}]',
    b'[{"attributes":[],"timeUnixNano":"1","asInt":"2"}]',
    b'[{"timeUnixNano":"1", "asInt":"2"}]',
    b'[ {"timeUnixNano":"1","asInt":"2"}]',
    b'[{"timeUnixNano":"1","asInt":"02"}]',
    b'[{"timeUnixNano":"1","asInt":"-2"}]',
    b'[{"timeUnixNano":"1","asInt":2}]',
    b'[{"timeUnixNano":1,"asInt":"2"}]',
    b'[{"timeUnixNano":"1","asInt":""}]',
    b'[{"timeUnixNano":"1"}]',
    b'[{"asInt":"2","timeUnixNano":"1"}]',
    b'[{"timeUnixNano":"1","asInt":"12345678901234567890"}]',  # 20 digits
    b'[{"timeUnixNano":"1","asInt":"9223372036854775808"}]',  # above int64
    b'[{"timeUnixNano":"1","asInt":"1.5"}]',
    b'[{"timeUnixNano":"1","asInt":"1e3"}]',
    b'[{"timeUnixNano":"1","asint":"2"}]',
    b'[{"time\\u0055nixNano":"1","asInt":"2"}]',
    b'[{"timeUnixNano":"1","asInt":"2"},{"timeUnixNano":"3","asInt":"4"},]',
    b'[{"timeUnixNano":"1","asInt":"2"}{"timeUnixNano":"3","asInt":"4"}]',
    b'[{"timeUnixNano":"1","asInt":"2"}],[{"timeUnixNano":"3","asInt":"4"}]',
    b'[]',
])
def test_anything_but_the_canonical_text_is_declined(body: bytes) -> None:
    good = _body([(5, 6)])
    assert int_points([body]) is None
    assert int_points([good, body]) is None
    assert int_points([body, good]) is None


def test_arrays_must_meet_where_the_bodies_meet() -> None:
    """Two arrays given as one body (or one split in two) is not what the caller asked for."""
    one = _body([(1, 2), (3, 4)])
    assert int_points([one]) is not None
    assert int_points([one[:17], one[17:]]) is None
    assert int_points([_body([(1, 2)]) + _body([(3, 4)])]) is None
    assert int_points([]) is None
