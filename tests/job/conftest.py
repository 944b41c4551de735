"""Helpers shared by the job tests: run ``stormotel analyze`` as a user would."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stormotel", "analyze", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def summary_line(stderr: str) -> dict[str, str]:
    """The one ``stormotel-analyze k=v …`` line, parsed (logfmt quoting via shlex)."""
    lines = [ln for ln in stderr.splitlines() if ln.startswith("stormotel-analyze ")]
    assert len(lines) == 1, stderr
    return dict(part.split("=", 1) for part in shlex.split(lines[0])[1:])


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def pushgateway_server(tmp_path: Path):
    """A Pushgateway that keeps metrics in memory only.

    Debian's build persists to /var/lib/prometheus/pushgateway.data by default, which would
    leak pushed groups from one test (and run) into the next; ``--persistence.file=`` off.
    """
    from tests import servers

    binary = servers.require_binary("prometheus-pushgateway")
    port = servers.free_port()
    argv = [binary, f"--web.listen-address=127.0.0.1:{port}", "--persistence.file="]
    server = servers._start("pushgateway", argv, tmp_path / "pushgateway", port, "/-/ready")
    try:
        yield server
    finally:
        server.stop()
