"""``stormotel serve`` at its boundaries (HTTP, files, signals) against a REAL Prometheus:
retries are one analysis, queued work survives SIGKILL, a storm of 1,000 alerts from 200 jobs
analyses each job once in bounded memory, credentials are checked and never shown, job ids
cannot reach outside ``--out`` or run in a page, a resolved group's final analysis is marked.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests import servers
from tests.serve import receiver as rx
from tests.tracker_forks import Forks, Rank

pytestmark = pytest.mark.servers
#: The loopback client the tests' plain-HTTP requests share (``httpx.get`` builds a TLS
#: context per call: tens of ms of CPU each, in loops that poll).
_http = servers.loopback_client
#: A job id that would run in a page if it were not escaped (a tracker refuses "/" in ids).
SCRIPT_JOB = 'x"><img src=x onerror=alert(1)><script>alert(2)<'

TINY = "tiny"


def _track(forks: Forks, job: str, rank: int, world: int, port: int) -> Rank:
    """One rank's ``stormotel track``, forked from the fixture's pre-imported interpreter
    (tests/tracker_forks.py: a process of its own with its own endpoint)."""
    return forks.track(
        ["--sampler", "simulated", "--job-id", job,
         "--rank", str(rank), "--world-size", str(world), "--interval", "0.5", "--duration",
         "300", "--prometheus-port", str(port), "--prometheus-addr", "127.0.0.1",
         "--linger-s", "1", "--prometheus-linger", "1", "-q"], stderr=False)


@pytest.fixture(scope="module", autouse=True)
def _serve_forks() -> Iterator[None]:
    """Every receiver of this module forked from one interpreter that has loaded ``stormotel
    serve`` (tests/serve/receiver.FORKS); closed with the module, so the receivers' CPU is
    the module's."""
    with Forks(kind="serve") as forks:
        rx.FORKS = forks
        try:
            yield
        finally:
            rx.FORKS = None


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.Server]:
    """Prometheus scraping a healthy 2-rank job and a 1-rank job named like a script."""
    ranks = [(TINY, 0, 2), (TINY, 1, 2), (SCRIPT_JOB, 0, 1)]
    ports = [servers.free_port() for _ in ranks]
    forks = Forks()
    procs = [_track(forks, j, r, w, p) for (j, r, w), p in zip(ranks, ports, strict=True)]
    try:
        with servers.prometheus(tmp_path_factory.mktemp("prom"),
                                [f"127.0.0.1:{p}" for p in ports], "1s") as server:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(servers.query(
                    server, 'count by (job_id, rank) ({__name__=~"stormotel_.+", '
                            'job_id!=""})')) < len(ranks):
                time.sleep(0.5)
            time.sleep(3)  # a few samples each
            yield server
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        forks.close()


def _post(recv: rx.Receiver, body: bytes, headers: dict[str, str] | None = None
          ) -> httpx.Response:
    return _http().post(recv.url + "/alertmanager", content=body, timeout=30,
                      headers={"Content-Type": "application/json", **(headers or {})})


def _analyses(recv: rx.Receiver) -> float:
    return sum(rx.metric(recv, "stormotel_serve_analyses_total", outcome=o)
               for o in ("ok", "findings", "source_failure", "sink_failure", "usage_error",
                         "internal_error"))


def _wait(cond: object, timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_retry_is_one_analysis_and_the_report_is_the_analyze_json(
        prom: servers.Server, tmp_path: Path) -> None:
    with rx.running(tmp_path / "out", prom.url, "--min-interval", "10m") as recv:
        body = rx.payload([rx.alert(TINY, 0), rx.alert(TINY, 1)])
        assert _post(recv, body).status_code == 200
        assert _post(recv, body).status_code == 200  # Alertmanager's retry
        _wait(lambda: _analyses(recv) >= 1 and rx.metric(
            recv, "stormotel_serve_queue_depth") == 0, what="the analysis")
        assert _post(recv, body).status_code == 200  # repeat_interval within --min-interval
        time.sleep(2)
        assert _analyses(recv) == 1
        assert rx.metric(recv, "stormotel_serve_webhooks_total", result="duplicate") == 2
        r = _http().get(f"{recv.url}/jobs/{TINY}/report.json", timeout=5)
        assert r.status_code == 200
        report = r.json()
        assert report["schema"] == "stormotel.report/v1" and report["job_id"] == TINY
        assert sorted(report["participating_ranks"]) == [0, 1]
        page = _http().get(f"{recv.url}/jobs/{TINY}/", timeout=5)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert _http().get(f"{recv.url}/jobs/{TINY}", timeout=5,
                         follow_redirects=False).status_code == 301
        # The same analysis as `stormotel analyze --format json` over the same window.
        cli = subprocess.run(
            [sys.executable, "-m", "stormotel", "analyze", "--prometheus", prom.url,
             "--job-id", TINY, "--since", "10m", "--settle", "0s", "--format", "json", "-q"],
            capture_output=True, text=True, timeout=120)
        assert cli.returncode in (0, 1), cli.stderr
        direct = json.loads(cli.stdout)
        assert set(direct) == set(report)
        assert direct["participating_ranks"] == report["participating_ranks"]


def _blackhole() -> tuple[socket.socket, str]:
    """A TCP port that accepts and never answers: a Prometheus that hangs."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s, f"http://127.0.0.1:{s.getsockname()[1]}"


def test_queued_work_survives_sigkill(prom: servers.Server, tmp_path: Path) -> None:
    out = tmp_path / "out"
    hole, hole_url = _blackhole()
    try:
        recv = rx.start(out, hole_url)
        assert _post(recv, rx.payload([rx.alert(TINY, 1)])).status_code == 200
        # 200 means on disk: the queue file is there before any analysis could finish.
        queued = list((out / "queue").glob("*.json"))
        assert [p.name for p in queued] == [f"{TINY}.json"]
        time.sleep(1)  # the run is in flight, hanging on the silent "Prometheus"
        recv.kill()
    finally:
        hole.close()
    assert [p.name for p in (out / "queue").glob("*.json")] == [f"{TINY}.json"]
    with rx.running(out, prom.url) as again:
        _wait(lambda: _analyses(again) >= 1, what="the queued analysis after restart")
        _wait(lambda: _http().get(f"{again.url}/jobs/{TINY}/report.json",
                                timeout=5).status_code == 200, what="the report")
        assert not list((out / "queue").glob("*.json"))
        assert "queued from before: 1" in again.logs()


def _vm_hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def test_storm_of_1000_alerts_from_200_jobs(prom: servers.Server, tmp_path: Path) -> None:
    """Alertmanager groups by job: 200 notifications carrying 5 alerts each, posted 8 at a time
    and then all retried. Each job is analysed once (no telemetry for these ids: each run is a
    quick source failure, counted), the queue drains, the receiver's memory stays bounded."""
    jobs = [f"storm-{i:03d}" for i in range(200)]
    bodies = [rx.payload([rx.alert(j, r) for r in range(5)], group_key=f'{{}}:{{job_id="{j}"}}')
              for j in jobs]
    with rx.running(tmp_path / "out", prom.url, "--min-interval", "10m", "--workers", "2",
                    "--timeout", "20s") as recv:
        started = time.monotonic()
        # One client, connections kept alive, as Alertmanager's Go client does (a new httpx
        # client per POST costs the poster ~60 ms of its own, which is not the receiver's).
        with ThreadPoolExecutor(8) as pool, httpx.Client(timeout=60) as client:
            codes = list(pool.map(lambda b: client.post(recv.url + "/alertmanager",
                                                        content=b).status_code, bodies + bodies))
        posted = time.monotonic() - started
        assert codes.count(200) == len(codes), codes
        _wait(lambda: _analyses(recv) >= 200 and rx.metric(
            recv, "stormotel_serve_queue_depth") == 0, timeout=240, what="the storm to drain")
        drained = time.monotonic() - started
        time.sleep(1)
        assert _analyses(recv) == 200
        assert rx.metric(recv, "stormotel_serve_alerts_total", with_job="true") == 400
        hwm = _vm_hwm_kib(recv.proc.pid)
        print(f"storm: posted 400 notifications in {posted:.1f} s, drained in {drained:.1f} s,"
              f" peak RSS {hwm / 1024:.0f} MiB")
        assert hwm < 400 * 1024, f"receiver peak RSS {hwm} KiB"


def test_auth_is_checked_and_secrets_never_shown(prom: servers.Server, tmp_path: Path) -> None:
    token, password = "tok-9f8e7d6c5b4a", "pw-1a2b3c4d5e6f"
    (tmp_path / "pw").write_text(password)
    with rx.running(tmp_path / "out", prom.url, "--webhook-user", "am",
                    "--webhook-password-file", str(tmp_path / "pw"), "--protect-reports",
                    env={"STORMOTEL_SERVE_TOKEN": token}) as recv:
        body = rx.payload([rx.alert(TINY, 0)])
        basic = "Basic " + base64.b64encode(f"am:{password}".encode()).decode()
        wrong = "Basic " + base64.b64encode(b"am:nope").decode()
        assert _post(recv, body).status_code == 401
        assert _post(recv, body, {"Authorization": wrong}).status_code == 401
        assert _post(recv, body, {"Authorization": "Bearer nope"}).status_code == 401
        assert _post(recv, body, {"Authorization": "Basic !!!"}).status_code == 401
        r = _post(recv, body, {"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        assert _post(recv, body, {"Authorization": basic}).status_code == 200
        assert _http().get(recv.url + "/", timeout=5).status_code == 401
        assert _http().get(recv.url + "/", timeout=5,
                         headers={"Authorization": basic}).status_code == 200
        assert _http().get(recv.url + "/healthz", timeout=5).status_code == 200
        metrics = _http().get(recv.url + "/metrics", timeout=5).text
        assert rx.metric(recv, "stormotel_serve_webhooks_total", result="unauthorized") == 4
        _wait(lambda: _analyses(recv) >= 1, what="the analysis")
        seen = metrics + recv.logs() + _http().get(
            recv.url + f"/jobs/{TINY}/report.json", timeout=5,
            headers={"Authorization": basic}).text
        seen += "".join(p.read_text(errors="replace") for p in recv.out.rglob("*") if p.is_file()
                        and p.suffix in (".json", ".html"))
        assert token not in seen and password not in seen


def test_limits_paths_and_script_job_ids(prom: servers.Server, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with rx.running(out, prom.url, "--max-body", "64KiB", "--min-interval", "1s") as recv:
        assert _post(recv, b"x" * 70_000).status_code == 413
        assert _post(recv, b"{not json").status_code == 400
        assert _post(recv, rx.payload([rx.alert(TINY)]).replace(b'"4"', b'"3"')
                     ).status_code == 400
        assert _http().get(recv.url + "/alertmanager", timeout=5).status_code == 405
        for path in ("/nope", "/jobs/", "/jobs/x/y/z", "/jobs/never/report.json",
                     "/jobs/never/", "/jobs/../../etc/passwd", "/jobs/..%2F..%2Fetc/report.json",
                     "/jobs/%2e%2e/report.json"):
            assert _http().get(recv.url + path, timeout=5).status_code == 404, path
        evil = ["../../etc", "..", "a/../../b", SCRIPT_JOB]
        r = _post(recv, rx.payload([rx.alert(j) for j in evil]))
        assert r.status_code == 200, r.text
        _wait(lambda: _analyses(recv) >= 4, what="the four analyses")
        # Nothing was written outside --out; every file is inside its two folders.
        for p in out.rglob("*"):
            assert p.resolve().is_relative_to(out.resolve())
            rel = p.relative_to(out).parts
            assert rel[0] in ("queue", "jobs") and ".." not in rel
        assert not (tmp_path / "etc").exists() and not (tmp_path.parent / "etc").exists()
        # The script-named job has telemetry: its report is served, and no page runs it.
        from urllib.parse import quote

        _wait(lambda: _http().get(f"{recv.url}/jobs/{quote(SCRIPT_JOB, safe='')}/report.json",
                                timeout=5).status_code == 200,
              what=f"the script job's report\n{recv.logs()}")
        index = _http().get(recv.url + "/", timeout=5)
        assert "<script>" not in index.text and "<img" not in index.text
        assert "&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;" in index.text
        assert "script-src" not in index.headers["content-security-policy"]
        page = _http().get(f"{recv.url}/jobs/{quote(SCRIPT_JOB, safe='')}/", timeout=5)
        assert page.status_code == 200 and SCRIPT_JOB not in page.text
        assert "default-src 'none'" in page.headers["content-security-policy"]


def test_resolved_gives_a_final_analysis(prom: servers.Server, tmp_path: Path) -> None:
    with rx.running(tmp_path / "out", prom.url, "--min-interval", "10m") as recv:
        assert _post(recv, rx.payload([rx.alert(TINY, 0)])).status_code == 200
        _wait(lambda: _analyses(recv) >= 1, what="the first analysis")
        resolved = rx.payload([rx.alert(TINY, 0, status="resolved")], status="resolved")
        assert _post(recv, resolved).status_code == 200
        _wait(lambda: _analyses(recv) >= 2, what="the final analysis (not held by "
                                                  "--min-interval)")
        _wait(lambda: _http().get(f"{recv.url}/jobs/{TINY}/report.json", timeout=5
                                ).headers.get("x-stormotel-status") == "final",
              what="the final mark")
        assert "final (resolved)" in _http().get(recv.url + "/", timeout=5).text


def test_sigterm_stops_cleanly(prom: servers.Server, tmp_path: Path) -> None:
    recv = rx.start(tmp_path / "out", prom.url)
    assert recv.terminate(timeout=40) == 0
    assert "stopped" in recv.logs()



def test_tls(prom: servers.Server, tmp_path: Path) -> None:
    openssl = servers.require_binary("openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True,
                   timeout=60)
    ca = ssl.create_default_context(cafile=str(cert))
    with rx.running(tmp_path / "out", prom.url, "--tls-cert-file", str(cert),
                    "--tls-key-file", str(key)) as recv:
        assert recv.url.startswith("https://")
        assert httpx.get(recv.url + "/healthz", verify=ca, timeout=5).status_code == 200
        r = httpx.post(recv.url + "/alertmanager", content=rx.payload([rx.alert(TINY)]),
                       verify=ca, timeout=30)
        assert r.status_code == 200
        with pytest.raises(httpx.HTTPError):  # plain HTTP to the TLS port is refused
            httpx.get(recv.url.replace("https://", "http://") + "/healthz", timeout=5)
        assert httpx.get(recv.url + "/healthz", verify=ca, timeout=5).status_code == 200


def test_a_run_reads_from_the_jobs_first_sample(prom: servers.Server, tmp_path: Path) -> None:
    """The window starts at the trackers' start edge (minus a minute), not --max-window ago;
    a job without it (or a TSDB that does not answer) reads the whole --max-window."""
    from stormotel.analyzers.serve.options import build_parser, options_from_args
    from stormotel.analyzers.serve.window import MARGIN_NS, window_start_ns

    opts = options_from_args(build_parser().parse_args(
        ["--out", str(tmp_path), "--prometheus", prom.url]))
    now = time.time_ns()
    start = window_start_ns(opts.base.job, TINY, now, 86400)
    started = servers.query(prom, f'min(stormotel_tracker_start_timestamp_seconds{{'
                                  f'job_id="{TINY}"}})')
    assert start == int(float(started[0]["value"][1]) * 1e9) - MARGIN_NS
    assert now - start < 600e9  # the fixture's trackers started minutes ago, not a day
    assert window_start_ns(opts.base.job, "no-such-job", now, 3600) == now - int(3600e9)
    hole, url = _blackhole()
    hole.close()
    down = options_from_args(build_parser().parse_args(
        ["--out", str(tmp_path), "--prometheus", url, "--http-retries", "0"]))
    assert window_start_ns(down.base.job, TINY, now, 3600) == now - int(3600e9)
