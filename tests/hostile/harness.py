"""Running a command as a user would, under hostile input: a subprocess with a memory ceiling
(RLIMIT_AS) and a wall-clock limit, and the checks every hostile case shares."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.prefork import PreforkServer

ROOT = Path(__file__).resolve().parents[2]
GIB = 1024**3
#: Address-space ceiling of every hostile run: far below what the unbounded bugs needed (6 GiB
#: bombs, 3 GB memo bombs, per-rank allocation for 10**12 ranks).
MEMORY_LIMIT = 3 * GIB
TIME_LIMIT_S = 90.0


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    seconds: float
    #: wall clock (``time.time_ns``) when the run was seen to exit: set by
    #: :func:`run_bounded_together`, to time a run against its own archived sample times
    ended_ns: int = 0

    def json(self) -> dict[str, Any]:
        return json.loads(self.stdout)


def _limit_memory(limit: int) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def run_bounded(*args: str, timeout: float = TIME_LIMIT_S, memory: int = MEMORY_LIMIT,
                env: dict[str, str] | None = None, python: list[str] | None = None,
                fresh: bool = False) -> Run:
    """``python -m stormotel ARGS`` (or ``python`` + ``python`` args) in a child process that
    cannot use more than ``memory`` bytes of address space or ``timeout`` seconds.

    ``stormotel analyze`` runs are forked from an interpreter that imported the analyzer once
    (:mod:`tests.prefork`): still a process of their own, with the ceiling, the environment,
    the exit status and fds 1 and 2 of one, without ~0.5 s of CPU importing per case. ``fresh``
    starts a new interpreter instead: each module keeps such runs for the exit paths it tests,
    so the command's own start (its imports, ``python -m``) stays under test too."""
    if not fresh and python is None and args[:1] == ("analyze",):
        return _run_forked(args, env, memory, timeout)
    return run_fresh(*args, timeout=timeout, memory=memory, env=env, python=python)


def run_fresh(*args: str, timeout: float = TIME_LIMIT_S, memory: int = MEMORY_LIMIT,
              env: dict[str, str] | None = None, python: list[str] | None = None) -> Run:
    """:func:`run_bounded` in a new interpreter, whatever the command."""
    cmd, full_env = _command(args, env, python)
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                       env=full_env, preexec_fn=_limit_memory(memory), errors="replace")
    return Run(p.returncode, p.stdout, p.stderr, time.monotonic() - start)


_SERVER: list[PreforkServer] = []


def _run_forked(args: tuple[str, ...], env: dict[str, str] | None, memory: int,
                timeout: float) -> Run:
    _, full_env = _command(args, env, None)
    if not _SERVER:  # one per test process, its environment the runs' own without ``env``
        _SERVER.append(PreforkServer("analyze", _command((), None, None)[1], ROOT))
    start = time.monotonic()
    p = _SERVER[0].run(list(args), env=full_env, cwd=ROOT, memory=memory, timeout=timeout)
    return Run(p.code, p.stdout, p.stderr, time.monotonic() - start)


def _command(args: tuple[str, ...], env: dict[str, str] | None,
             python: list[str] | None) -> tuple[list[str], dict[str, str]]:
    full_env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                "PYTHONPATH": str(ROOT), **(env or {})}
    return [sys.executable, *(python or ["-m", "stormotel", *args])], full_env


def run_bounded_together(cases: list[tuple[tuple[str, ...], dict[str, str]]],
                         timeout: float = TIME_LIMIT_S, memory: int = MEMORY_LIMIT
                         ) -> list[Run]:
    """:func:`run_bounded` for each ``(args, env)`` at once: independent runs that mostly wait
    (a fixed ``--duration``) overlap instead of queueing. Every child is started from this
    thread (``preexec_fn`` is not safe beside other threads); threads only read their pipes.
    Each :class:`Run`'s seconds run from its own start to its own exit."""
    started = []
    for args, env in cases:
        cmd, full_env = _command(args, env, None)
        begin = time.monotonic()
        started.append((subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env=full_env, preexec_fn=_limit_memory(memory), errors="replace"), begin))

    def finish(item: tuple[subprocess.Popen[str], float]) -> Run:
        proc, begin = item
        try:
            out, err = proc.communicate(timeout=max(1.0, begin + timeout - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        return Run(proc.returncode, out, err, time.monotonic() - begin, time.time_ns())

    with ThreadPoolExecutor(len(started) or 1) as pool:
        return list(pool.map(finish, started))


def assert_clean(run: Run, code: int | tuple[int, ...], *, message: str | None = None,
                 within_s: float = TIME_LIMIT_S) -> None:
    """The documented exit code, no traceback, at most one error line (naming ``message``
    when given), finished within the bound."""
    codes = (code,) if isinstance(code, int) else code
    detail = f"exit {run.code}\nstderr:\n{run.stderr[-3000:]}"
    assert run.code in codes, detail
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout, detail
    errors = [ln for ln in run.stderr.splitlines() if ": error: " in ln or "internal error" in ln]
    assert len(errors) <= 1, detail
    if run.code not in (0, 1):
        assert len(errors) == 1, detail
    if message is not None:
        assert errors and message in errors[0], detail
    assert run.seconds < within_s, f"took {run.seconds:.1f}s"
