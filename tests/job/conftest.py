"""Helpers shared by the job tests: run ``stormotel analyze`` as a user would."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from tests.cli import run_stormotel_here

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``stormotel analyze ARGS`` through the command's entry point in this process
    (:func:`tests.cli.run_stormotel_here`: the same parsing, exit code, stdout and stderr): these
    suites test reading a TSDB, its faults, TLS and the sinks, not an interpreter's start (about
    0.35 s of CPU each, some forty runs); tests/analyzers/test_cli.py and the hostile suites
    start fresh interpreters. ``env`` is set in this process for the run and put back after."""
    return run_stormotel_here("analyze", *args, env=env)


def summary_line(stderr: str) -> dict[str, str]:
    """The one ``stormotel-analyze k=v …`` line, parsed (logfmt quoting via shlex)."""
    lines = [ln for ln in stderr.splitlines() if ln.startswith("stormotel-analyze ")]
    assert len(lines) == 1, stderr
    return dict(part.split("=", 1) for part in shlex.split(lines[0])[1:])


@pytest.fixture
def cli():
    return run_cli
