"""Byte quantities: both prefix families, fractions, and one-line errors for everything else."""

from __future__ import annotations

import pytest

from stormotel.units import UnitError, format_bytes, parse_bytes


@pytest.mark.parametrize(("text", "expected"), [
    ("80GiB", 80 * 2**30), ("512MB", 512 * 10**6), ("1073741824", 2**30), ("1.5 GiB", 3 * 2**29),
    ("40GB", 40 * 10**9), ("2KiB", 2048), ("7b", 7), ("1e3", 1000),
])
def test_parse_bytes(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize(("text", "fragment"), [
    ("80G", "GiB (binary) or GB (decimal)"), ("lots", "not a byte quantity"),
    ("-1GiB", "not a byte quantity"), ("12 parsecs", "unknown unit"), ("", "not a byte quantity"),
])
def test_parse_bytes_errors(text: str, fragment: str) -> None:
    with pytest.raises(UnitError) as info:
        parse_bytes(text)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_format_bytes() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 * 2**29) == "1.50 GiB"
    assert format_bytes(-2048) == "-2.00 KiB"
    assert format_bytes(None) == "-"
