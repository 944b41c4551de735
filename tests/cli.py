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


def run_stormotel_here(command: str, *args: str, env: dict[str, str] | None = None
                       ) -> subprocess.CompletedProcess[str]:
    """``stormotel COMMAND ARGS…`` through the same entry point (``stormotel.cli.main``) in this
    process: the same argument parsing, exit code and output, without a fresh interpreter's
    ~0.4 s of CPU for imports. For suites that run the command dozens of times on inputs they
    built; each such suite keeps :func:`run_stormotel` where the start-up itself is tested.
    The output is captured by handing the command its own streams (``main(out=, err=)``, a
    command of ``stormotel.cli.STREAMED``), never by swapping ``sys.stdout``/``sys.stderr``:
    that swap is process-wide, so two runs in threads took each other's lines and a server
    thread's print landed in a run's output (tests/analyzers/test_in_process_streams.py).
    ``env`` is set in this process's environment for the run and put back after (process-wide
    too: runs given ``env`` must not run at once)."""
    import io

    from stormotel.cli import main

    before = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    out, err = io.StringIO(), io.StringIO()
    try:
        try:
            code = main([command, *args], out=out, err=err)
        except SystemExit as exc:  # argparse's usage errors, as the interpreter would exit
            code = exc.code if isinstance(exc.code, int) else 1
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return subprocess.CompletedProcess([command, *args], code, out.getvalue(), err.getvalue())
