"""``python -m stormotel ARGS`` as a process of its own, forked from an interpreter that has
already imported the command's modules.

Why: the hostile suites run ``stormotel analyze`` a hundred times, each in its own
memory-limited process, and a fresh interpreter spends ~0.5 s of CPU importing the analyzer
(numpy, orjson, msgspec, ~150 of its own modules) before it reads the few bytes of each case.
A fork of an interpreter that imported them once starts in milliseconds. What these suites
check is still a real process's: its own address-space ceiling (``RLIMIT_AS``), its own
environment, working directory and empty stdin, its exit status as the kernel reports it (a
signal included), and everything written to its file descriptors 1 and 2 — a traceback printed
by the interpreter's shutdown or by a dying thread included. The child runs the command the way
``python -m stormotel`` does (``sys.exit(stormotel.cli.main())``, then the interpreter's normal
exit: atexit handlers, non-daemon threads joined, buffers flushed).

What a fork does not repeat is the import itself, so a module that fails at import, or reads
the environment at import, is not tested here: the suites keep fresh interpreters
(:func:`tests.hostile.harness.run_fresh`) for a run per command and exit path.

The server (``python -m tests.prefork``) reads one JSON request per line on stdin, forks, answers
``pid N`` and, when the child has been reaped, ``exit CODE`` (``-SIGNAL`` for a signal, as
:mod:`subprocess` reports it). It exits at end of input: the test process closing its end.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import importlib.util
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

#: What each command imports on any input (measured: ``sys.modules`` after one run); the rest
#: (the sources of one format, a sink, torch for ``--sampler cuda``) the child imports as a
#: fresh run would. A server preloads one command's modules only, so a run's address space
#: holds no more than that command's own.
PRELOAD: dict[str, tuple[str, ...]] = {
    "analyze": ("stormotel.cli", "stormotel.analyzers.cli.command", "stormotel.analyzers.run",
                "stormotel.analyzers.analyze", "stormotel.analyzers.report",
                "stormotel.analyzers.sources.loader", "stormotel.analyzers.sources.files",
                "stormotel.analyzers.sources.stormlog_fast",
                "stormotel.analyzers.stalls.render", "numpy", "orjson", "msgspec"),
    "track": ("stormotel.cli", "stormotel.track_cli", "stormotel.tracker", "numpy"),
}


#: ``sys.argv[0]`` of ``python -m stormotel``: its ``__main__`` module's path
MAIN = str(Path(importlib.util.find_spec("stormotel").origin).parent / "__main__.py")  # type: ignore[arg-type, union-attr]


@dataclass
class Forked:
    code: int
    stdout: str
    stderr: str


class PreforkServer:
    """One server process per test process, started on first use and stopped by PID at exit
    (or when this process's end of its stdin closes). One run at a time (a lock)."""

    def __init__(self, command: str, env: dict[str, str], cwd: Path) -> None:
        self._lock = threading.Lock()
        self._proc = subprocess.Popen([sys.executable, "-m", "tests.prefork", command], cwd=cwd,
                                      env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True)
        atexit.register(self.stop)
        assert self._proc.stdout is not None
        _count(float(_expect(self._proc.stdout, "ready")))

    def stop(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self._proc.pid, signal.SIGKILL)
                self._proc.wait()

    def run(self, args: list[str], *, env: dict[str, str], cwd: Path, memory: int | None,
            timeout: float) -> Forked:
        """``python -m stormotel ARGS`` forked, with ``env`` as its whole environment and at
        most ``memory`` bytes of address space (None: no ceiling); raises
        :class:`subprocess.TimeoutExpired` (after killing it) past ``timeout`` seconds."""
        with self._lock, tempfile.TemporaryDirectory(prefix="prefork-") as tmp:
            out, err = Path(tmp) / "out", Path(tmp) / "err"
            request = {"args": args, "env": env, "cwd": str(cwd), "memory": memory,
                       "out": str(out), "err": str(err)}
            stdin, stdout = self._proc.stdin, self._proc.stdout
            assert stdin is not None and stdout is not None
            stdin.write(json.dumps(request) + "\n")
            stdin.flush()
            pid = int(_expect(stdout, "pid"))
            killed = threading.Event()
            killer = threading.Timer(timeout, _kill, (pid, killed))
            killer.start()
            try:
                code, cpu = _expect(stdout, "exit").split()
            finally:
                killer.cancel()
            _count(float(cpu))
            if killed.is_set():
                raise subprocess.TimeoutExpired(["stormotel", *args], timeout)
            return Forked(int(code), out.read_text(errors="replace"),
                          err.read_text(errors="replace"))


#: CPU seconds of this process's forked runs and of its servers' start, which its own
#: ``RUSAGE_CHILDREN`` cannot see (the server reaps the runs and outlives the tests): added to
#: each test's CPU by tests/conftest.py, so STORMOTEL_SUITE_TIMES counts what the runs cost.
FORKED_CPU = [0.0]


def forked_cpu() -> float:
    return FORKED_CPU[0]


def _count(seconds: float) -> None:
    FORKED_CPU[0] += seconds


def _expect(stream: IO[str], word: str) -> str:
    line = stream.readline()
    if not line.startswith(word + " "):
        raise RuntimeError(f"prefork server: expected {word!r}, got {line!r}")
    return line.split(" ", 1)[1]


def _kill(pid: int, killed: threading.Event) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        killed.set()
    except ProcessLookupError:  # reaped already
        pass


def _child(request: dict[str, Any]) -> int:
    """In the forked child: become the requested process, then run the command."""
    if request["memory"] is not None:
        resource.setrlimit(resource.RLIMIT_AS, (request["memory"], request["memory"]))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, request["out"]), (2, request["err"])):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115  (the new fd 0: /dev/null)
    sys.argv = [MAIN, *request["args"]]  # as ``python -m stormotel`` sets it
    from stormotel.cli import main

    return main()


def _own_cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def serve(command: str) -> int:
    """Import ``command``'s modules, then read requests until end of input; each forks a child
    that returns from here with its exit code (the caller exits with it); the server itself
    returns 0 at end of input."""
    for name in PRELOAD[command]:
        importlib.import_module(name)
    # What the imports made is kept out of the cyclic collector's reach (``gc.freeze``, the
    # standard library's advice for a server that forks): a child's collections, and its
    # interpreter's exit, then skip the preloaded objects instead of walking them, which also
    # wrote their GC headers and so copied their pages into the child. A forked analyze run's
    # CPU fell by a third (files: 0.16-0.22 -> 0.09-0.13 s; Flight Recorder dumps: 0.32-0.44 ->
    # 0.23-0.36 s; docs/benchmarks.md, session 22). The objects are the modules' own, alive for
    # the process's life either way; what a run allocates is collected as before.
    gc.freeze()
    counted = _own_cpu()
    print(f"ready {counted}", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            return _child(request)
        print(f"pid {pid}", flush=True)
        _, status, usage = os.wait4(pid, 0)
        now = _own_cpu()  # the child's CPU, and the server's since its last answer (the fork)
        cpu, counted = usage.ru_utime + usage.ru_stime + now - counted, now
        print(f"exit {os.waitstatus_to_exitcode(status)} {cpu}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1]))
