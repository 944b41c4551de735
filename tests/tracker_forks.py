"""``stormotel track`` ranks forked from one interpreter that has imported the tracker once.

The server- and job-backed suites start dozens of simulated-sampler trackers (the production
fleet 36, the OOM-counter jobs 8, the serve tests 19): each fresh interpreter paid ~0.7-0.85 s of
CPU for the same imports (numpy, the OTel SDK, prometheus_client, the tracker) before its first
sample. Here one interpreter (``python -m tests.tracker_forks``) imports them, then forks one
child per rank on request; each child runs ``stormotel track ARGV`` through the command's own
entry point (:func:`stormotel.cli.main`, what ``python -m stormotel track`` calls) with its own
environment, stdio and pid, and exits with the command's exit code. Each rank is still a process
of its own with its own endpoint, archive and signals (SIGSTOP/SIGCONT, SIGTERM, SIGKILL reach it
by pid); what it shares is the import, copy-on-write. Suites that test the command's start-up
itself keep a fresh interpreter. ``python -m tests.tracker_forks serve`` loads ``stormotel
serve`` and its analysis instead (:data:`SERVE_PRELOAD`), for the receivers of
tests/serve/test_serve.py.

Nothing the preloaded modules do at import reads the environment a rank is given or starts a
thread (the child sets its environment before the command runs); ``random`` reseeds itself in
every fork, so span and trace ids differ per rank as before.

Protocol (one JSON object a line): to the server ``{"id", "argv", "env", "stdout", "stderr",
"memory", "interpreter_exit"}`` (file paths or null for /dev/null; an ``RLIMIT_AS`` ceiling in
bytes or null; whether the child ends through the interpreter's exit, :func:`_child`); from
it ``started ID PID`` and, once the server has reaped the rank, ``exit ID CODE`` (a negative
code: killed by that signal, as ``Popen.returncode``). The server reaps every rank it
forked, so their CPU time reaches the caller's ``RUSAGE_CHILDREN``
once the caller reaps the server (:meth:`Forks.close`).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: The modules ``stormotel track --sampler simulated --archive ... --prometheus-port ...``
#: imports on its way to its first sample (stormotel.cli imports the command module only when
#: run; track_cli imports the tracker only where it builds one). A module missing here is only
#: loaded by each rank after its fork, at the cost of a later first sample.
PRELOAD = ("stormotel.cli", "stormotel.track_cli", "stormotel.tracker", "stormotel.telemetry",
           "stormotel.exporters", "stormotel.archive_writer", "stormotel.archive_spans",
           "stormotel.scrape_watch", "stormotel.samplers.simulated", "prometheus_client.core",
           "opentelemetry.exporter.prometheus",
           "opentelemetry.exporter.otlp.json.file.metric_exporter",
           "opentelemetry.exporter.otlp.json.file.trace_exporter", "importlib.metadata",
           "xxhash", "zstandard")

#: What ``stormotel serve`` imports to start and to run its first analysis of a Prometheus
#: job (``python -m tests.tracker_forks serve``); the rest loads in the child on first use.
SERVE_PRELOAD = ("stormotel.cli", "stormotel.analyzers.serve.cli",
                 "stormotel.analyzers.serve.auth", "stormotel.analyzers.serve.http",
                 "stormotel.analyzers.serve.metrics", "stormotel.analyzers.serve.queue",
                 "stormotel.analyzers.serve.store", "stormotel.analyzers.serve.worker",
                 "stormotel.analyzers.scheduled.job", "stormotel.analyzers.scheduled.run",
                 "stormotel.analyzers.run", "stormotel.analyzers.sources.prometheus",
                 "stormotel.analyzers.sources.remote_read",
                 "stormotel.analyzers.sinks.report_sink")
PRELOADS = {"track": PRELOAD, "serve": SERVE_PRELOAD}

READY = "ready"


# ---------------------------------------------------------------------------------------------
# The server (its own interpreter)


def _child(order: dict[str, Any]) -> int:
    """In the forked rank: its stdio and environment, then the command. Ends the process with
    ``os._exit`` (no interpreter exit), or, for an order with ``"interpreter_exit"``, returns
    the command's exit code for the caller to raise as ``SystemExit`` out of the server, so the
    interpreter ends as ``python -m stormotel`` does: atexit handlers run and non-daemon
    threads are joined (a thread left running would hold the process as it holds a fresh one)."""
    code = 1
    try:
        for fd, path, mode in ((0, None, os.O_RDONLY),
                               (1, order.get("stdout"), os.O_WRONLY | os.O_CREAT | os.O_APPEND),
                               (2, order.get("stderr"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)):
            new = os.open(path or os.devnull, mode, 0o644)
            os.dup2(new, fd)
            os.close(new)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if order.get("memory"):  # the address-space ceiling a hostile run gets (RLIMIT_AS)
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (int(order["memory"]),) * 2)
        os.environ.update({str(k): str(v) for k, v in order.get("env", {}).items()})
        command = str(order.get("command", "track"))
        sys.argv = ["stormotel", command, *order["argv"]]
        from stormotel import cli

        code = cli.main([command, *order["argv"]])
    except SystemExit as exc:  # argparse's usage errors, as the interpreter would exit
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    if order.get("interpreter_exit"):
        return code
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve(kind: str = "track") -> int:
    """Import the command's modules (:data:`PRELOADS`), say ``ready``, fork a child per order
    line until stdin ends and every child has been reaped."""
    import gc
    import importlib

    for name in PRELOADS[kind]:
        importlib.import_module(name)
    gc.freeze()  # as tests/prefork.py: the ranks' collections skip the preloaded objects
    out = sys.stdout
    print(READY, file=out, flush=True)
    children: dict[int, str] = {}
    pending = b""  # read raw from fd 0: a buffered reader could hold lines select cannot see
    stdin_open = True
    with selectors.DefaultSelector() as sel:
        sel.register(0, selectors.EVENT_READ)
        while stdin_open or children:
            if stdin_open and sel.select(timeout=0.05):
                chunk = os.read(0, 1 << 16)
                if not chunk:
                    stdin_open = False
                    sel.unregister(0)
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in filter(bytes.strip, lines):
                    order = json.loads(line)
                    pid = os.fork()
                    if pid == 0:
                        sel.close()
                        raise SystemExit(_child(order))
                    children[pid] = str(order["id"])
                    print(f"started {order['id']} {pid}", file=out, flush=True)
            elif not stdin_open:
                time.sleep(0.05)
            while children:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                code = os.waitstatus_to_exitcode(status)
                print(f"exit {children.pop(pid)} {code}", file=out, flush=True)
    return 0


# ---------------------------------------------------------------------------------------------
# The caller's side


class Rank:
    """One forked ``stormotel track`` rank, with the part of ``subprocess.Popen`` the suites
    use: ``pid``, ``poll``, ``wait``, ``returncode``, ``send_signal``/``terminate``/``kill``, and
    its captured stderr (:meth:`stderr_text`)."""

    def __init__(self, forks: Forks, rid: str, argv: list[str], stderr: Path | None,
                 command: str = "track") -> None:
        self.args = ["stormotel", command, *argv]
        self.pid = 0
        self.returncode: int | None = None
        self._forks = forks
        self._id = rid
        self._stderr = stderr
        self._started = threading.Event()
        self._done = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Signal the rank while the server has not reported it reaped (its pid is still its
        own until then: the server reaps it only after it exits)."""
        self._started.wait(30)
        if self.returncode is None and self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def stderr_text(self) -> str:
        try:
            return self._stderr.read_text(errors="replace") if self._stderr else ""
        except OSError:
            return ""


class Forks:
    """The fork server for one suite's ranks: ``with Forks() as forks: r = forks.track(argv)``.
    Leaving the block (or :meth:`close`) ends its input, waits for every rank to exit (killing
    those still running after ``close``'s timeout) and reaps the server."""

    def __init__(self, env: dict[str, str] | None = None, ready_timeout_s: float = 300.0,
                 kind: str = "track") -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="stormotel-forks-"))
        base = {**os.environ, **(env or {})}
        base["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), base.get("PYTHONPATH", "")) if p)
        self._server_err = open(self._dir / "server.err", "wb")  # noqa: SIM115
        self._proc = subprocess.Popen([sys.executable, "-m", "tests.tracker_forks", kind],
                                      cwd=ROOT,
                                      env=base, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._server_err)
        self._ranks: dict[str, Rank] = {}
        self._lock = threading.Lock()
        self._next = 0
        assert self._proc.stdout is not None
        line = self._readline_within(ready_timeout_s)
        if line.strip() != READY:
            self._proc.kill()
            self._proc.wait()
            raise AssertionError(f"tracker fork server exited {self._proc.returncode} before "
                                 f"it was ready: {self._server_stderr()[-2000:]}")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _readline_within(self, timeout_s: float) -> str:
        assert self._proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self._proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout=timeout_s):
                self._proc.kill()
                self._proc.wait()
                raise AssertionError(f"tracker fork server not loaded after {timeout_s:g} s")
        return self._proc.stdout.readline().decode()

    def _server_stderr(self) -> str:
        try:
            return (self._dir / "server.err").read_text(errors="replace")
        except OSError:
            return ""

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            kind, rid, value = raw.decode().split()
            rank = self._ranks[rid]
            if kind == "started":
                rank.pid = int(value)
                rank._started.set()
            elif kind == "exit":
                rank.returncode = int(value)
                rank._started.set()
                rank._done.set()

    def track(self, argv: list[str], env: dict[str, str] | None = None, *,
              stdout: Path | None = None, stderr: Path | bool = True,
              memory: int | None = None, interpreter_exit: bool = False) -> Rank:
        """Fork one rank running ``stormotel track ARGV`` with ``env`` added to the server's
        environment; ``stderr``: a file, True for one of the fork server's own (read with
        :meth:`Rank.stderr_text`), False for /dev/null; ``stdout`` likewise a file or null;
        ``memory``: an address-space ceiling (``RLIMIT_AS``, bytes) set in the child;
        ``interpreter_exit``: the child ends as a fresh interpreter does (:func:`_child`)."""
        return self.run("track", argv, env, stdout=stdout, stderr=stderr, memory=memory,
                        interpreter_exit=interpreter_exit)

    def run(self, command: str, argv: list[str], env: dict[str, str] | None = None, *,
            stdout: Path | None = None, stderr: Path | bool = True,
            memory: int | None = None, interpreter_exit: bool = False) -> Rank:
        """:meth:`track` for any ``stormotel COMMAND`` (a server started with that command's
        ``kind`` has its modules loaded)."""
        with self._lock:
            rid = str(self._next)
            self._next += 1
            err = (self._dir / f"{rid}.err" if stderr is True else
                   None if stderr is False else stderr)
            rank = Rank(self, rid, argv, err if isinstance(err, Path) else None, command)
            self._ranks[rid] = rank
            order = {"id": rid, "command": command, "argv": argv, "env": env or {},
                     "stdout": str(stdout) if stdout else None,
                     "stderr": str(err) if isinstance(err, Path) else None,
                     "memory": memory, "interpreter_exit": interpreter_exit}
            assert self._proc.stdin is not None
            self._proc.stdin.write(json.dumps(order).encode() + b"\n")
            self._proc.stdin.flush()
        if not rank._started.wait(60):
            raise AssertionError(f"tracker fork server did not fork {argv}: "
                                 f"{self._server_stderr()[-2000:]}")
        return rank

    def close(self, timeout_s: float = 180.0) -> None:
        """End the server's input, wait for every rank (SIGKILL to any still running after
        ``timeout_s``) and reap the server: the ranks' CPU then counts as this process's
        children's."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            for rank in self._ranks.values():
                rank.kill()
            self._proc.wait(timeout=30)
        self._reader.join(timeout=10)
        self._server_err.close()

    def __enter__(self) -> Forks:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is not None:
            for rank in self._ranks.values():
                rank.kill()
        self.close()


if __name__ == "__main__":
    sys.exit(serve(*sys.argv[1:2]))
