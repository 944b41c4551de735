"""``stormotel analyze --help`` shows an example for every source and output a first-hour user
reaches for, and every example parses with the real parser (a renamed flag fails here)."""

from __future__ import annotations

import shlex

import pytest
from stormotel.analyzers.cli.flags import EPILOG, build_parser

EXAMPLES = [line.strip().split("  #")[0] for line in EPILOG.splitlines()
            if line.strip().startswith("stormotel analyze")]


@pytest.mark.parametrize("flag", ["--prometheus", "--logs", "--flight-recorder", "--html",
                                  "--dcgm", "--format"])
def test_help_has_an_example_for(flag: str) -> None:
    assert any(flag in shlex.split(e, comments=True) for e in EXAMPLES), f"no example: {flag}"


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_help_example_parses(example: str) -> None:
    args = shlex.split(example, comments=True)[2:]
    build_parser().parse_args(args)  # SystemExit(2) on an unknown flag fails the test
