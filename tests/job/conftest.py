"""Helpers shared by the job tests: run ``stormotel analyze`` as a user would."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from tests.cli import run_stormotel

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60
            ) -> subprocess.CompletedProcess[str]:
    return run_stormotel("analyze", *args, env=env or {}, timeout=timeout)


def summary_line(stderr: str) -> dict[str, str]:
    """The one ``stormotel-analyze k=v …`` line, parsed (logfmt quoting via shlex)."""
    lines = [ln for ln in stderr.splitlines() if ln.startswith("stormotel-analyze ")]
    assert len(lines) == 1, stderr
    return dict(part.split("=", 1) for part in shlex.split(lines[0])[1:])


@pytest.fixture
def cli():
    return run_cli
