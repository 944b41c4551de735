"""Rank filter syntax: all | 0,2 | 0,4-7, with clear errors."""

import pytest
from stormotel.analyzers.rankspec import RankSpecError, format_rank_list, parse_rank_spec


@pytest.mark.parametrize("spec,expected", [
    ("all", None), ("", None), (None, None), ("0", {0}), ("0,2", {0, 2}),
    ("0,4-7", {0, 4, 5, 6, 7}), (" 3 - 4 , 1 ", {1, 3, 4}), ("2,2", {2}),
])
def test_parse(spec, expected):
    got = parse_rank_spec(spec)
    assert (got if got is None else set(got)) == expected


@pytest.mark.parametrize("spec,message", [
    ("a", "'a' is not a rank"), ("1,", "'' is not a rank"), ("-1", "'-1' is not a rank"),
    ("7-4", "reversed"), ("0-99999999", "larger than"),
])
def test_errors(spec, message):
    with pytest.raises(RankSpecError, match=message):
        parse_rank_spec(spec)


def test_format_round_trips():
    assert format_rank_list([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert format_rank_list([]) == "none"
    assert set(parse_rank_spec(format_rank_list({0, 4, 5, 6, 7}))) == {0, 4, 5, 6, 7}
