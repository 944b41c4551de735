"""Running a command as a user would, under hostile input: a subprocess with a memory ceiling
(RLIMIT_AS) and a wall-clock limit, and the checks every hostile case shares."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection
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
                         timeout: float = TIME_LIMIT_S, memory: int = MEMORY_LIMIT,
                         forked: Collection[int] = ()) -> list[Run]:
    """:func:`run_bounded` for each ``(args, env)`` at once: independent runs that mostly wait
    (a fixed ``--duration``) overlap instead of queueing. Every fresh child is started from this
    thread (``preexec_fn`` is not safe beside other threads), before anything starts a thread;
    threads only read their pipes. Each :class:`Run`'s seconds run from its own start to its own
    exit.

    ``forked``: indices of ``stormotel track`` cases forked from one interpreter that imported
    the tracker once (:mod:`tests.tracker_forks`) instead: each still a process of its own with
    the ceiling, its environment, its exit status and fds 1 and 2, the interpreter's own exit
    (atexit handlers, non-daemon threads joined), and whatever the command reads at its start
    read in that process (nothing the tracker imports reads a setting at
    import: a run that did would miss its variable and fail its check), without ~0.5 s of CPU
    importing per run. For modules that start many runs whose start-up is not what they test;
    each keeps at least one fresh run."""
    waits: dict[int, Callable[[], Run]] = {}
    for i, (args, env) in enumerate(cases):
        if i not in forked:
            waits[i] = _popen_bounded(args, env, timeout, memory)
    with contextlib.ExitStack() as stack:
        if forked:
            from tests.tracker_forks import Forks

            forks = stack.enter_context(Forks(env=_command((), None, None)[1]))
            folder = Path(tempfile.mkdtemp(prefix="stormotel-hostile-forks-"))
            for i in sorted(forked):
                args, env = cases[i]
                assert args[:1] == ("track",), args
                waits[i] = _fork_bounded(forks, args, env, timeout, memory, folder / str(i))
        with ThreadPoolExecutor(len(cases) or 1) as pool:
            return list(pool.map(lambda i: waits[i](), range(len(cases))))


def _popen_bounded(args: tuple[str, ...], env: dict[str, str], timeout: float, memory: int
                   ) -> Callable[[], Run]:
    """Start one fresh bounded run; returns what waits for it."""
    cmd, full_env = _command(args, env, None)
    begin = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=full_env, preexec_fn=_limit_memory(memory),
                            errors="replace")

    def finish() -> Run:
        try:
            out, err = proc.communicate(timeout=max(1.0, begin + timeout - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        return Run(proc.returncode, out, err, time.monotonic() - begin, time.time_ns())
    return finish


def _fork_bounded(forks: Any, args: tuple[str, ...], env: dict[str, str], timeout: float,
                  memory: int, stem: Path) -> Callable[[], Run]:
    """Fork one bounded ``stormotel track`` run from ``forks``; returns what waits for it."""
    out, err = stem.with_suffix(".out"), stem.with_suffix(".err")
    begin = time.monotonic()
    rank = forks.track(list(args[1:]), env, stdout=out, stderr=err, memory=memory,
                       interpreter_exit=True)

    def finish() -> Run:
        try:
            code = rank.wait(timeout=max(1.0, begin + timeout - time.monotonic()))
        except subprocess.TimeoutExpired:
            rank.kill()
            raise
        seconds, ended_ns = time.monotonic() - begin, time.time_ns()
        return Run(code, out.read_text(errors="replace"), err.read_text(errors="replace"),
                   seconds, ended_ns)
    return finish


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
