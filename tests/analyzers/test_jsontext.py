"""The indented JSON writer is json.dumps(obj, indent=N), byte for byte."""

from __future__ import annotations

import enum
import json
import random

import pytest
from stormotel.analyzers.jsontext import dumps_indented

STRINGS = ["", "plain", "quote \" backslash \\ slash /", "tab\tnew\nline\r", "\x00\x1f\x7f",
           "é ü ß", "日本語", "emoji 😀", "\u2028\u2029 bidi \u202e", "http://u:p@h/?token=x"]
FLOATS = [0.0, -0.0, 1.5, -2.25, 1e16, 1e-7, 5e-324, 1.7976931348623157e308, 0.1 + 0.2,
          float("nan"), float("inf"), float("-inf"), 3.0]
INTS = [0, -1, 7, 2**53 + 1, -(2**63), 10**30]


class Level(enum.IntEnum):
    HIGH = 2


class Text(str):
    pass


def _tree(rng: random.Random, depth: int) -> object:
    pick = rng.randrange(10 if depth < 5 else 6)
    if pick == 0:
        return rng.choice(STRINGS)
    if pick == 1:
        return rng.choice(FLOATS)
    if pick == 2:
        return rng.choice(INTS)
    if pick == 3:
        return rng.choice([None, True, False, Level.HIGH, Text("sub")])
    if pick in (4, 5):
        return rng.choice([[], {}, ()])
    if pick in (6, 7):
        items = [_tree(rng, depth + 1) for _ in range(rng.randrange(1, 5))]
        return items if pick == 6 else tuple(items)
    keys = [rng.choice([*STRINGS, 0, -3, 1.5, float("nan"), True, False, None, Text("k")])
            for _ in range(rng.randrange(1, 5))]
    return {k: _tree(rng, depth + 1) for k in keys}


@pytest.mark.parametrize("indent", [0, 1, 2, 4])
def test_same_text_as_json_dumps(indent):
    rng = random.Random(indent)
    for _ in range(3000):
        obj = _tree(rng, 0)
        assert dumps_indented(obj, indent) == json.dumps(obj, indent=indent)


def test_a_real_report_is_written_as_json_dumps_writes_it():
    from stormotel.analyzers.analyze import analyze

    from tests.analyzers.synth import GIB, healthy, plant_rise, to_timeline

    data = healthy(4, 300, reserved_bytes=2 * GIB)
    plant_rise(data[2], 150, GIB)
    d = analyze(to_timeline(data)).to_dict()
    assert dumps_indented(d, 2) == json.dumps(d, indent=2)


@pytest.mark.parametrize("bad", [{1, 2}, object(), b"bytes", {(1, 2): "tuple key"},
                                 [1, {"k": {3}}]])
def test_what_json_refuses_is_refused(bad):
    with pytest.raises(TypeError):
        json.dumps(bad, indent=2)
    with pytest.raises(TypeError):
        dumps_indented(bad, 2)
