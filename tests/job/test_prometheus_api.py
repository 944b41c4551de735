"""The typed fast decode of a raw (matrix) answer gives exactly what the general JSON path gives,
and hands every answer it cannot type to that path instead of guessing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from stormotel.analyzers.sources import prometheus_api as api


def _answer(series: list[dict]) -> bytes:
    return json.dumps({"status": "success",
                       "data": {"resultType": "matrix", "result": series}}).encode()


def _same(a: list[api.Series], b: list[api.Series]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.labels == y.labels
        assert (x.t_ns is None) == (y.t_ns is None)
        if x.t_ns is not None:
            np.testing.assert_array_equal(x.t_ns, y.t_ns)
            np.testing.assert_array_equal(x.v, y.v)


GOOD = [{"metric": {"__name__": "m", "rank": "0"},
         "values": [[1700000000.123, "1.5"], [1700000015, "21474836480"], [1700000030.9, "NaN"]]},
        {"metric": {"rank": "1"}, "values": []},
        {"metric": {"rank": "2"}, "values": [[1700000000, "-3"], [1700000001.001, "1e+10"]]}]


def test_fast_decode_matches_the_general_path() -> None:
    body = _answer(GOOD)
    fast = api._fast_matrix(body)
    assert fast is not None
    _same(fast, api.series_from_dicts(json.loads(body)["data"]["result"]))
    assert fast[0].t_ns.tolist() == [1700000000123000000, 1700000015000000000,
                                     1700000030900000000]
    assert not fast[0].clean  # a NaN value: the byte reader must see it and count it


def test_clean_only_when_every_value_is_a_finite_non_negative_number() -> None:
    body = _answer([{"metric": {"rank": "0"}, "values": [[1700000000, "5"], [1700000015, "7"]]}])
    fast = api._fast_matrix(body)
    assert fast is not None and fast[0].clean


@pytest.mark.parametrize("series", [
    [{"metric": {"rank": 1}, "values": [[1700000000, "1"]]}],  # a label that is not a string
    [{"metric": {"rank": "0"}, "values": [[1700000000, "+Inf"]]}],  # msgspec does not read "+Inf"
    [{"metric": {"rank": "0"}, "values": [[1700000000, "x"]]}],
    [{"metric": {"rank": "0"}}],  # no values
    ["not a series"],
], ids=["int-label", "plus-inf", "word", "no-values", "string-entry"])
def test_untyped_answers_take_the_general_path(series: list) -> None:
    assert api._fast_matrix(_answer(series)) is None


def test_a_bad_timestamp_marks_only_its_series() -> None:
    series = [{"metric": {"rank": "0"}, "values": [[-5, "1"]]},
              {"metric": {"rank": "1"}, "values": [[1700000000, "2"]]}]
    fast = api._fast_matrix(_answer(series))
    assert fast is not None
    assert fast[0].t_ns is None and fast[1].t_ns is not None
    _same(fast, api.series_from_dicts(series))


def test_trim_drops_what_the_previous_chunk_held() -> None:
    s = api.Series({"rank": "0"}, np.array([1000, 2000, 3000]) * 1_000_000,
                   np.array([1.0, 2.0, 3.0]), True)
    assert api._trim(s, 2000).t_ns.tolist() == [3000 * 1_000_000]
    assert api._trim(s, 500) is s


PLAIN = [{"metric": {"__name__": "m", "rank": "0"},
          "values": [[1700000000.123, "1.5"], [1700000015, "21474836480"],
                     ["1700000030.9", "-3"], [1700000045, 1e300]]},
         {"metric": {"rank": "1"}, "values": []},
         {"metric": {"rank": "2"}, "values": [[1700000000, "0"], [1700000001.001, "1e+10"],
                                               [1700000002, "0.1"], [1700000003, "5E-3"]]}]


def test_flat_read_gives_what_the_typed_read_gives() -> None:
    """The flat reading (no tuple per pair) and the typed one agree number for number, on
    plain values of every JSON shape (quoted or not, exponents, an empty series)."""
    body = _answer(PLAIN)
    flat, typed = api._flat_pairs(body), api._typed_pairs(body)
    assert flat is not None and typed is not None
    assert flat[0] == typed[0] and flat[1] == typed[1] == [4, 0, 4]
    np.testing.assert_array_equal(flat[2], typed[2])
    spaced = body.replace(b"], [", b"] , [ ").replace(b", \"", b" ,\"")  # whitespace is JSON
    again = api._flat_pairs(spaced)
    assert again is not None
    np.testing.assert_array_equal(again[2], typed[2])
    _same(api._fast_matrix(body), api.series_from_dicts(PLAIN))


@pytest.mark.parametrize("values", [
    [[1700000000, "NaN"]],  # not a JSON number once unquoted: the typed read takes it
    [[1700000000, "+Inf"], [1700000001, "1"]],
], ids=["nan", "plus-inf"])
def test_flat_read_leaves_special_values_to_the_typed_or_general_path(values: list) -> None:
    body = _answer([{"metric": {"rank": "0"}, "values": values}])
    assert api._flat_pairs(body) is None
    fast = api._fast_matrix(body)
    general = api.series_from_dicts([{"metric": {"rank": "0"}, "values": values}])
    if fast is not None:
        _same(fast, general)


@pytest.mark.parametrize("values", [
    [[1700000000, "1", "2"], [1700000001]],  # three numbers then one: four, unevenly paired
    [[1700000000, "1,5"]],  # a comma inside a string
    [[1700000000, "[3"]],  # a bracket inside a string
    [[1700000000, "1\\"]],  # an escape inside a string
    [[1700000000, ""]],
    [[[1700000000], "1"]],  # nested
    {"t": 1700000000},
], ids=["uneven", "comma", "bracket", "escape", "empty", "nested", "object"])
def test_flat_read_refuses_what_is_not_exactly_pairs(values: object) -> None:
    """Never a guess: an answer whose brackets and commas are not exactly pairs is refused
    by the flat reading, and the series reaches the general path, which counts it malformed."""
    series = [{"metric": {"rank": "0"}, "values": values},
              {"metric": {"rank": "1"}, "values": [[1700000000, "7"]]}]
    body = _answer(series)
    assert api._flat_pairs(body) is None
    assert api._fast_matrix(body) is None  # the typed read refuses it too
    general = api.series_from_dicts(series)
    assert general[0].t_ns is None and general[1].v is not None
