"""From page to report with every real part: simulated ranks (``stormotel track``) scraped by a
REAL Prometheus evaluating the shipped rules (written with ``report_base_url``), a REAL
Alertmanager 0.25 routing every alert to ``stormotel serve`` (bearer token, as its
``http_config`` sends it) and to a second webhook standing in for Slack. Three failing jobs side
by side with a healthy one: a rank killed by SIGKILL (the dead rank), a rank that runs out of
memory, a rank whose memory outside the allocator leaks. Each page must lead, within 60 s, to
``/jobs/<job_id>/report.json`` naming the planted rank with no other rank at high, and the
report must lead with the page's question; the notification's ``report_url`` answers with the
HTML report; the healthy job gets no report. The receiver is SIGKILLed and restarted while the
incidents are on and still delivers. Scrape and evaluation every second; the run stays near a
minute.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from stormotel.dashboards import promql, rules
from stormotel.dashboards.settings import Settings

from stormotel import schema
from tests import servers
from tests.cli import HANG_GUARD_S
from tests.serve import receiver as rx
from tests.tracker_forks import Forks, Rank

pytestmark = pytest.mark.servers
#: The loopback client the tests' plain-HTTP requests share (``httpx.get`` builds a TLS
#: context per call: tens of ms of CPU each, in loops that poll).
_http = servers.loopback_client
FAST = Settings(silent_window="4s", silent_for="2s", presence_window="10m", fill_window="20s",
                fill_step="4s", fill_for="2s", drift_window="30s", drift_for="5s",
                stall_window="30s", stall_for="5s", oom_window="30s")
WORLD = 3
#: job → (planted rank, fault) ; the healthy job has none.
JOBS: dict[str, tuple[int | None, str | None]] = {
    "dead-job": (1, None),  # SIGKILLed by the test once Prometheus has scraped it (_kill_seen)
    "oom-job": (2, "oom@t=8s,exit=1.5s"),
    "leak-job": (0, "leak@t=4s,rate=48MiB/s"),
    "calm-job": (None, None),
}
TOKEN = "s3cret-token-for-test"
#: Scrapes of the dead rank Prometheus holds before the test SIGKILLs it: about the 8 s of data
#: a crash planted at t=8s left on a quiet machine.
SCRAPES_BEFORE_KILL = 8


def _track(forks: Forks, job: str, rank: int, port: int) -> Rank:
    """One rank's ``stormotel track``, forked from the test's pre-imported interpreter
    (tests/tracker_forks.py: a process of its own with its own endpoint)."""
    planted, fault = JOBS[job]
    argv = ["--sampler", "simulated", "--job-id", job, "--rank", str(rank),
            "--world-size", str(WORLD), "--interval", "0.25", "--duration", "90",
            "--prometheus-port", str(port),
            "--prometheus-addr", "127.0.0.1", "--gpu-uuid", f"GPU-{job}-{rank}",
            "--device-memory", "16GiB", "-q"]
    # The lingers are the product's defaults (after an event 20 s, after a clean stop 60 s),
    # not short ones: each ends at the first scrape served after it (about 1 s here), so it
    # costs nothing on a quiet machine, while on a busy one a 2 s linger ended before the 1 s
    # scrape came and the OOM never reached the TSDB (the report then led with "dead rank",
    # load 24) -- and a clean stop never scraped reads as a rank that died
    if fault and rank == planted:
        argv += ["--fault", f"rank={rank}:{fault}"]
    return forks.track(argv, stderr=False)


class _Slack:
    """The second receiver: records every notification Alertmanager sends it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.bodies.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def report_urls(self) -> dict[str, str]:
        return {a["labels"]["job_id"]: a["annotations"].get("report_url", "")
                for b in self.bodies for a in b["alerts"] if a["status"] == "firing"}


def _am_config(serve_url: str, slack_url: str, token_file: Path) -> str:
    return f"""
route:
  receiver: slack
  group_by: [job_id]
  group_wait: 1s
  group_interval: 2s
  repeat_interval: 1h
  routes:
    - receiver: stormotel
      continue: true
    - receiver: slack
receivers:
  - name: stormotel
    webhook_configs:
      - url: {serve_url}/alertmanager
        send_resolved: true
        http_config:
          authorization:
            credentials_file: {token_file}
  - name: slack
    webhook_configs:
      - url: {slack_url}
"""


def _names(report: dict[str, Any], rank: int) -> bool:
    """The report names ``rank`` the way the page needs: top suspect, a gap finding, a root
    stall finding, a missing rank or the first OOM."""
    suspects = report["cross_rank"]["first_cause_suspects"]
    oom = (report.get("extra") or {}).get("oom_forensics") or {}
    return bool((suspects and suspects[0]["rank"] == rank)
                or any(g["rank"] == rank for g in report["gap_findings"])
                or any(rank in s["ranks"] for s in report["stall_findings"]
                       if s.get("consequence_of") is None)
                or rank in report["missing_ranks"] or oom.get("first_rank") == rank)


def _high_elsewhere(report: dict[str, Any], rank: int) -> list[Any]:
    return ([s for s in report["cross_rank"]["first_cause_suspects"]
             if s["confidence"] == "high" and s["rank"] != rank]
            + [s for s in report["stall_findings"]
               if s["confidence"] == "high" and set(s["ranks"]) - {rank}])


def test_pages_lead_to_reports_naming_the_planted_rank(tmp_path: Path) -> None:
    ports = {(job, r): servers.free_port() for job in JOBS for r in range(WORLD)}
    serve_port = servers.free_port()
    serve_url = f"http://127.0.0.1:{serve_port}"
    rules_file = tmp_path / rules.RULES_FILE
    rules_file.write_text(rules.rules_yaml(FAST, report_base_url=serve_url))
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    slack = _Slack()
    forks = Forks()
    procs: dict[tuple[str, int], Rank] = {}
    out = tmp_path / "out"
    try:
        with servers.alertmanager(tmp_path / "am", _am_config(serve_url, slack.url, token)) as am, \
                servers.prometheus(tmp_path / "prom", [f"127.0.0.1:{p}" for p in ports.values()],
                                   "1s", rule_files=[rules_file],
                                   alertmanagers=[am.url.removeprefix("http://")]) as prom:
            # Forked once Prometheus is up (a fork starts sampling at once, tracker_forks.py)
            procs.update({key: _track(forks, key[0], key[1], port)
                          for key, port in ports.items()})
            _kill_seen(prom, procs[("dead-job", 1)], "dead-job", 1)
            recv = rx.start(out, prom.url, "--webhook-token-file", str(token),
                            "--min-interval", "5s", "--public-url", serve_url,
                            port=serve_port)
            paged: dict[str, float] = {}
            named: dict[str, float] = {}
            restarted = False
            started = time.monotonic()
            try:
                while time.monotonic() - started < 100 and len(named) < 3:
                    time.sleep(1)
                    alerts = _http().get(am.url + "/api/v2/alerts", timeout=5).json()
                    for a in alerts:
                        paged.setdefault(a["labels"]["job_id"], time.monotonic())
                    assert "calm-job" not in paged, ("the healthy job paged", [
                        a["labels"] for a in alerts if a["labels"].get("job_id") == "calm-job"])
                    if paged and not restarted:  # kill the receiver mid-incident
                        recv.kill()
                        recv = rx.start(out, prom.url, "--webhook-token-file", str(token),
                                        "--min-interval", "5s", "--public-url", serve_url,
                                        port=serve_port)
                        restarted = True
                    for job in paged.keys() - named.keys():
                        rank = JOBS[job][0]
                        assert rank is not None
                        r = _http().get(f"{serve_url}/jobs/{job}/report.json", timeout=5)
                        if r.status_code == 200 and _names(r.json(), rank):
                            assert not _high_elsewhere(r.json(), rank), r.text[:3000]
                            named[job] = time.monotonic()
                assert set(named) == {"dead-job", "oom-job", "leak-job"}, (
                    f"paged {sorted(paged)}, named {sorted(named)}\n{_scraped(prom)}\n"
                    f"{recv.logs()}")
                for job in named:
                    assert named[job] - paged[job] < 60, (job, named[job] - paged[job])
                print("page → report naming the rank (s):",
                      {j: round(named[j] - paged[j], 1) for j in named},
                      "first page after (s):", round(min(paged.values()) - started, 1))
                # The notification carries the link; the link answers with the HTML report.
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline and set(slack.report_urls()) < set(named):
                    time.sleep(0.5)
                urls = slack.report_urls()
                for job in named:
                    assert urls[job] == f"{serve_url}/jobs/{job}/", urls
                    page = _http().get(urls[job], timeout=5)
                    assert page.status_code == 200 and "<html" in page.text.lower()
                assert _http().get(f"{serve_url}/jobs/calm-job/report.json",
                                 timeout=5).status_code == 404
                index = _http().get(serve_url + "/", timeout=5).text
                assert "dead-job" in index and "oom-job" in index and TOKEN not in index
                # Each report leads with the page's question (analyzers/headline.py).
                print("leads:", re.findall(r"<td>((?:OOM|dead rank|leak): [^<]*)</td>", index))
                assert "OOM: rank 2 ran out of memory first" in index, index
                assert "dead rank: rank 1 stopped reporting at" in index, index
                assert "leak: rank 0 grows" in index and "device full in" in index, index
                dead = _http().get(f"{serve_url}/jobs/dead-job/report.json", timeout=5).json()
                stop = [s for s in dead["stall_findings"]
                        if s["evidence"].get("category") == "stopped_reporting"]
                assert stop and stop[0]["ranks"] == [1] and stop[0]["evidence"]["stopped_at"]
                assert TOKEN not in recv.logs()
            finally:
                _stop(list(procs.values()))  # while Prometheus still scrapes their last state
                assert recv.terminate() == 0, recv.logs()
    finally:
        _stop(list(procs.values()))
        forks.close()
        slack.server.shutdown()


def _samples(job: str, rank: int | None = None) -> str:
    labels = {schema.ATTR_JOB_ID: job,
              **({schema.ATTR_RANK: str(rank)} if rank is not None else {})}
    return promql.of(schema.SAMPLES, promql.matchers(**labels))


def _kill_seen(prom: servers.Server, proc: Rank, job: str, rank: int) -> None:
    """SIGKILL ``rank`` of ``job`` — a dead rank as a crash leaves it, no stop edge — once
    Prometheus holds :data:`SCRAPES_BEFORE_KILL` scrapes of it. No rule can page about a rank
    Prometheus never saw: a crash planted at t=8 s of the rank's own clock came, beside two
    CPU-bound neighbours (load 10-14), before the rank had been scraped, and the dead job never
    paged in 100 s."""
    deadline = time.monotonic() + HANG_GUARD_S
    expr = f"count_over_time({_samples(job, rank)}[10m])"
    while (got := servers.query(prom, expr)) == [] or float(
            got[0]["value"][1]) < SCRAPES_BEFORE_KILL:
        assert proc.poll() is None, (job, rank, "left before it was killed", proc.poll())
        assert time.monotonic() < deadline, (expr, got, "not scraped in", HANG_GUARD_S)
        time.sleep(0.25)
    proc.kill()


def _scraped(prom: servers.Server) -> dict[str, object]:
    """Per job, how many scrapes of each rank Prometheus holds (what a failure should say)."""
    return {job: {r["metric"].get(schema.ATTR_RANK): r["value"][1] for r in servers.query(
        prom, f"count_over_time({_samples(job)}[10m])")} for job in JOBS}


def _stop(procs: list[Rank]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
