"""``stormotel serve`` as users run it: a subprocess on a loopback port, stopped by PID, plus
the payloads Alertmanager 0.25 sends (for the tests that post without an Alertmanager)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests import servers
from tests.cli import HANG_GUARD_S
from tests.tracker_forks import Forks, Rank

#: Set by a module that starts many receivers (tests/serve/test_serve.py's module fixture): each
#: ``stormotel serve`` is then forked from that interpreter, which has loaded the command and
#: its analysis (tests/tracker_forks.py: ~0.8 s of CPU of imports per start saved); a process
#: of its own all the same, on its port, stopped and killed by pid. None: a fresh interpreter.
FORKS: Forks | None = None


@dataclass
class Receiver:
    url: str
    proc: subprocess.Popen[bytes] | Rank
    log: Path
    out: Path

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def kill(self) -> None:
        """SIGKILL: nothing may be flushed or finished on the way out."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        return int(self.proc.returncode)


def start(out: Path, prometheus_url: str, *extra: str, port: int | None = None,
          env: dict[str, str] | None = None) -> Receiver:
    """Start the receiver and wait until /healthz answers 200."""
    port = port or servers.free_port()
    out.mkdir(parents=True, exist_ok=True)
    log = out.parent / f"{out.name}-serve-{port}.log"
    argv = ["--listen", f"127.0.0.1:{port}", "--out", str(out), "--prometheus", prometheus_url,
            "--http-retries", "0", "--timeout", "60s", *extra]
    proc: subprocess.Popen[bytes] | Rank
    if FORKS is not None:
        proc = FORKS.run("serve", argv, env, stdout=log, stderr=log)
    else:
        with open(log, "ab") as fh:
            proc = subprocess.Popen([sys.executable, "-m", "stormotel", "serve", *argv],
                                    stdout=fh, stderr=subprocess.STDOUT,
                                    env={**os.environ, **(env or {})})
    scheme = "https" if "--tls-cert-file" in extra else "http"
    receiver = Receiver(f"{scheme}://127.0.0.1:{port}", proc, log, out)
    # A hang guard, not a speed bound: a fresh interpreter beside two CPU-bound neighbours (load
    # 32) was not up after 60 s; one that never answers is still named before pytest's timeout
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"stormotel serve exited {proc.returncode}:\n"
                                 f"{receiver.logs()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(receiver.url + "/healthz", timeout=1, verify=False).status_code == 200:
                return receiver
        time.sleep(0.2)
    receiver.terminate()
    raise AssertionError(f"stormotel serve not ready after {HANG_GUARD_S:g} s:\n"
                         f"{receiver.logs()}")


def refused_url() -> str:
    """A loopback port nothing listens on: connection refused at once (a Prometheus that is
    down, for tests that need none)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def running(out: Path, prometheus_url: str, *extra: str,
            env: dict[str, str] | None = None) -> Iterator[Receiver]:
    receiver = start(out, prometheus_url, *extra, env=env)
    try:
        yield receiver
    finally:
        receiver.terminate()


def payload(alerts: list[dict[str, Any]], *, group_key: str = '{}:{job_id="x"}',
            status: str = "firing") -> bytes:
    """A version-4 webhook body as Alertmanager 0.25 sends it (fields per its
    notify/webhook/webhook.go: Message{*template.Data, Version, GroupKey, TruncatedAlerts})."""
    return json.dumps({
        "receiver": "stormotel", "status": status, "alerts": alerts,
        "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093", "version": "4", "groupKey": group_key,
        "truncatedAlerts": 0}).encode()


def alert(job_id: str, rank: int = 0, *, name: str = "StormotelRankStoppedReporting",
          status: str = "firing", fingerprint: str | None = None) -> dict[str, Any]:
    return {"status": status,
            "labels": {"alertname": name, "job_id": job_id, "rank": str(rank),
                       "severity": "critical"},
            "annotations": {"summary": "x"}, "startsAt": "2026-11-28T19:00:00Z",
            "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "http://prometheus/graph",
            "fingerprint": fingerprint or f"{abs(hash((job_id, rank, name))):016x}"}


def metric(receiver: Receiver, name: str, **labels: str) -> float:
    """One sample of the receiver's /metrics (0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(receiver.url + "/metrics", timeout=5, verify=False).text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0
