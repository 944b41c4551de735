"""Real Prometheus-family servers for tests: started on loopback with temp storage, stopped by PID.

Installed by ``scripts/bootstrap.sh servers`` (Debian packages). A test that needs a binary that
is missing is skipped with the reason, never silently passed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback port nothing listens on and this process has not handed out before: the kernel
    may give the same ephemeral port to two ``bind(0)`` calls once the first socket is closed,
    and a fleet of trackers asks for dozens before any of them binds (two trackers on one port:
    one rank silently missing from the scrape)."""
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no unused loopback port after 1000 tries")


def require_binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (run `scripts/bootstrap.sh servers`)")
    return path


@dataclass
class Server:
    name: str
    url: str
    proc: subprocess.Popen[bytes]
    workdir: Path
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@functools.cache
def loopback_client() -> httpx.Client:
    """One client for the tests' plain-HTTP loopback requests: ``httpx.get`` builds a client per
    call, and with it a TLS context from certifi's bundle (about 60 ms of CPU, 0.6 s a second
    when polling a starting server at 10 Hz), though these URLs are never ``https://``."""
    return httpx.Client()


def _wait_ready(server: Server, path: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.proc.returncode}:\n"
                               f"{server.logs()}")
        try:
            r = loopback_client().get(server.url + path, timeout=1.0)
            if r.status_code == 200:
                return
            last = f"HTTP {r.status_code}"
        except httpx.HTTPError as e:
            last = repr(e)
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"{server.name} not ready after {timeout}s ({last}):\n{server.logs()}")


def _start(name: str, argv: list[str], workdir: Path, port: int, ready_path: str) -> Server:
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"{name}.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, cwd=workdir,
                                env={**os.environ, "GOMAXPROCS": "1"})
    server = Server(name, f"http://127.0.0.1:{port}", proc, workdir, log)
    _wait_ready(server, ready_path)
    return server


@contextlib.contextmanager
def prometheus(workdir: Path, scrape_targets: list[str] | None = None,
               scrape_interval: str = "1s", extra_args: list[str] | None = None,
               rule_files: list[Path] | None = None,
               alertmanagers: list[str] | None = None) -> Iterator[Server]:
    """Prometheus with remote-write receiver on; optional static scrape targets (host:port),
    rule files (evaluated every ``scrape_interval``) and Alertmanagers (host:port) to send
    alerts to."""
    binary = require_binary("prometheus")
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    lines = ["global:", f"  scrape_interval: {scrape_interval}",
             f"  evaluation_interval: {scrape_interval}"]
    if rule_files:
        lines += ["rule_files:", *(f"  - {str(path)!r}" for path in rule_files)]
    if alertmanagers:
        lines += ["alerting:", "  alertmanagers:", "    - static_configs:",
                  f"        - targets: [{', '.join(repr(t) for t in alertmanagers)}]"]
    if scrape_targets:
        lines += ["scrape_configs:", "  - job_name: stormotel", "    static_configs:",
                  f"      - targets: [{', '.join(repr(t) for t in scrape_targets)}]"]
    config.write_text("\n".join(lines) + "\n")
    argv = [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--web.enable-remote-write-receiver",
            "--web.enable-lifecycle", "--storage.tsdb.retention.time=30d",
            "--query.lookback-delta=5m", *(extra_args or [])]
    server = _start("prometheus", argv, workdir, port, "/-/ready")
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def victoriametrics(workdir: Path, extra_args: list[str] | None = None) -> Iterator[Server]:
    binary = require_binary("victoria-metrics")
    port = free_port()
    argv = [binary, f"-storageDataPath={workdir / 'data'}", f"-httpListenAddr=127.0.0.1:{port}",
            "-search.latencyOffset=0s", "-retentionPeriod=100y", "-loggerLevel=ERROR",
            *(extra_args or [])]
    server = _start("victoria-metrics", argv, workdir, port, "/health")
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def alertmanager(workdir: Path, config: str) -> Iterator[Server]:
    """Alertmanager (Debian's ``prometheus-alertmanager``, 0.25) with ``config`` (YAML), its
    own storage, and clustering off (a lone instance sends at once instead of waiting for
    peers)."""
    binary = shutil.which("alertmanager") or require_binary("prometheus-alertmanager")
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "alertmanager.yml"
    path.write_text(config)
    argv = [binary, f"--config.file={path}", f"--storage.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
            "--log.level=warn"]
    server = _start("alertmanager", argv, workdir, port, "/-/ready")
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def pushgateway(workdir: Path) -> Iterator[Server]:
    binary = require_binary("prometheus-pushgateway")
    port = free_port()
    # Debian's build persists to /var/lib/prometheus/pushgateway.data by default, which would
    # leak pushed series between tests and runs: in-memory only (empty persistence file).
    argv = [binary, f"--web.listen-address=127.0.0.1:{port}", "--persistence.file="]
    server = _start("pushgateway", argv, workdir, port, "/-/ready")
    try:
        yield server
    finally:
        server.stop()


def query(server: Server, promql: str, *, timeout: float = 5.0) -> list[dict[str, Any]]:
    """An instant query's result list; a non-success answer fails the test loudly."""
    r = loopback_client().get(f"{server.url}/api/v1/query", params={"query": promql},
                              timeout=timeout)
    r.raise_for_status()
    return list(r.json()["data"]["result"])


class BackgroundRun:
    """Runs ``fn`` in a daemon thread (e.g. a tracked job while Prometheus scrapes it); the
    result or the exception is handed to the test thread by :meth:`join`."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._fn = fn
        self._outcome: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._outcome["result"] = self._fn()
        except BaseException as e:  # re-raised in the test thread
            self._outcome["error"] = e

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float = 120.0) -> Any:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"background run still going after {timeout}s")
        if "error" in self._outcome:
            raise self._outcome["error"]
        return self._outcome.get("result")
