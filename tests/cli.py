"""Run ``stormotel <command>`` as a user would: a fresh interpreter, text output captured.

One helper for every suite that tests a command at its boundary (exit code, stdout, the one
stderr line), so how a command is started is decided in one place.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_stormotel(command: str, *args: str, env: dict[str, str] | None = None,
                  timeout: float = 60, cwd: Path | None = REPO
                  ) -> subprocess.CompletedProcess[str]:
    """``python -m stormotel COMMAND ARGS…``; ``env`` is added to this process's environment."""
    return subprocess.run([sys.executable, "-m", "stormotel", command, *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else {**os.environ, **env})
