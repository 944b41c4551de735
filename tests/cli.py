"""Run ``stormotel <command>`` as a user would: a fresh interpreter, text output captured.

One helper for every suite that tests a command at its boundary (exit code, stdout, the one
stderr line), so how a command is started is decided in one place.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.prefork import PreforkServer

REPO = Path(__file__).resolve().parents[1]
#: The wall-clock guard of one command run: a hang detector only (no test times a command;
#: timings are benchmarks), so the bound is the one the suite already keeps, pytest-timeout's
#: per test (pyproject.toml), less a margin so a hung run is reported with its command before
#: pytest stops the whole test. It was 60 s: on the busy 2-core machine (load 20, two CPU hogs)
#: ``stormotel track --sampler cuda``, which imports torch (4.6 s of CPU), took 90 s of wall,
#: and test_track_cli's bad-input case timed out on a run that was only waiting for a CPU.
HANG_GUARD_S = 0.8 * float(tomllib.loads((REPO / "pyproject.toml").read_text())
                           ["tool"]["pytest"]["ini_options"]["timeout"])


def run_stormotel(command: str, *args: str, env: dict[str, str] | None = None,
                  timeout: float = HANG_GUARD_S, cwd: Path | None = REPO
                  ) -> subprocess.CompletedProcess[str]:
    """``python -m stormotel COMMAND ARGS…``; ``env`` is added to this process's environment."""
    return subprocess.run([sys.executable, "-m", "stormotel", command, *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else {**os.environ, **env})


_SERVERS: dict[str, PreforkServer] = {}


def run_stormotel_forked(command: str, *args: str, env: dict[str, str] | None = None,
                         timeout: float = HANG_GUARD_S, cwd: Path | None = REPO
                         ) -> subprocess.CompletedProcess[str]:
    """:func:`run_stormotel`, the process forked from an interpreter that imported the
    command's modules once (:mod:`tests.prefork`): a process of its own — its exit status, fds
    1 and 2, environment (``env`` added to this process's), working directory — without a
    fresh interpreter's ~0.5 s of CPU importing. For suites that run a command dozens of times
    on bad input; each keeps a :func:`run_stormotel` run where the start itself is tested."""
    if command not in _SERVERS:
        _SERVERS[command] = PreforkServer(command, dict(os.environ), REPO)
    run = _SERVERS[command].run([command, *args], env={**os.environ, **(env or {})},
                                cwd=cwd or Path.cwd(), memory=None, timeout=timeout)
    return subprocess.CompletedProcess([command, *args], run.code, run.stdout, run.stderr)


class _EnvScope:
    """Who may change ``os.environ`` while commands run in this process: any number of runs
    given no ``env`` at once (threads of one test), or one run given an ``env`` alone — it
    waits for the runs in flight and holds off new ones until its variables are put back, so
    no other in-process run (nor a server thread of the test reading the environment) sees
    them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._alone = False

    @contextmanager
    def held(self, alone: bool) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._alone and (not alone or not self._shared))
            if alone:
                self._alone = True
            else:
                self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                if alone:
                    self._alone = False
                else:
                    self._shared -= 1
                self._cond.notify_all()


_ENV_SCOPE = _EnvScope()


@contextmanager
def _scoped_environ(env: dict[str, str] | None) -> Iterator[None]:
    """``env`` added to ``os.environ`` for the block, and the environment as it was before put
    back after it — what ``env`` set and what the command itself set (``analyze`` sets
    ``OPENBLAS_NUM_THREADS`` for its own process) — so no run leaks a variable into the
    tests, or the subprocesses, that come after it in this worker."""
    with _ENV_SCOPE.held(alone=bool(env)):
        before = dict(os.environ)
        os.environ.update(env or {})
        try:
            yield
        finally:
            if env:  # alone: no other run's variables to keep
                os.environ.clear()
                os.environ.update(before)
            else:  # beside other env-less runs: put back only what differs from before
                for key in set(os.environ) - set(before):
                    os.environ.pop(key, None)
                for key, value in before.items():
                    if os.environ.get(key) != value:
                        os.environ[key] = value


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
    ``env`` is added to this process's environment for the run only (:func:`_scoped_environ`:
    a run given one runs alone among in-process runs, and the environment is put back after
    every run)."""
    import io

    from stormotel.cli import main

    out, err = io.StringIO(), io.StringIO()
    with _scoped_environ(env):
        try:
            code = main([command, *args], out=out, err=err)
        except SystemExit as exc:  # argparse's usage errors, as the interpreter would exit
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess([command, *args], code, out.getvalue(), err.getvalue())
