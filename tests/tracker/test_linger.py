"""The end after an event: the tracker keeps its Prometheus endpoint up until one scrape has read
the final state (bounded), and never waits when nothing happened.

Scrapes here are plain HTTP GETs of ``/metrics`` (what Prometheus sends); the live test with a
real Prometheus at the Helm chart's 15 s interval is test_linger_live.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from stormotel import environment, exitcodes, schema
from stormotel.samplers.simulated import SimulatedSampler
from stormotel.tracker import MemoryTracker, linger_seconds
from tests.tracker.otlp_util import HttpReceiver, points, spans

ROOT = Path(__file__).resolve().parents[2]
OOM_LINE = re.compile(rf"^{schema.OOMS.prom_series[-1]}\{{[^}}]*\}} (\S+)$", re.MULTILINE)


#: The trackers' linger here. A stop that must not wait is bounded by it: what such a test rules
#: out is a wait for a scrape, and with nobody scraping that wait lasts the whole linger. (It was
#: 1.5 s: the stop's own work, on a busy two-core machine, is CPU it waits its turn for.) How
#: long the stops take is a benchmark's business (docs/tracker.md, "Stopping").
LINGER_S = 10.0
#: The one warning a linger that ran out of time logs, with its bound in seconds.
RAN_OUT = "no Prometheus scrape within"


def _tracker(make_tracker: Callable[..., MemoryTracker], faults: str | None = None,
             linger: float = LINGER_S) -> MemoryTracker:
    return make_tracker(sampler=SimulatedSampler(rank=1, faults=faults), prometheus_port=0,
                        prometheus_addr="127.0.0.1", linger_after_event_s=linger)


def _scrape(tracker: MemoryTracker) -> str:
    host, port = tracker.prometheus_address or ("", 0)
    return httpx.get(f"http://{host}:{port}/metrics", timeout=5).text


def _ooms(body: str) -> float:
    match = OOM_LINE.search(body)
    assert match, body[-2000:]
    return float(match.group(1))


def _wait_for_oom_edge(tracker: MemoryTracker, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while schema.EDGE_OOM not in tracker.state.edges:
        assert time.monotonic() < deadline, "the simulated OOM never showed in the counter"
        time.sleep(0.02)


def _timed_stop(tracker: MemoryTracker, **kwargs: bool) -> float:
    started = time.monotonic()
    tracker.stop_tracking(**kwargs)
    return time.monotonic() - started


def test_nothing_happened_no_wait(make_tracker: Callable[..., MemoryTracker]) -> None:
    scraped = _tracker(make_tracker).start_tracking()
    assert _ooms(_scrape(scraped)) == 0
    never_scraped = _tracker(make_tracker).start_tracking()
    time.sleep(0.2)
    assert _timed_stop(scraped) < LINGER_S
    assert _timed_stop(never_scraped) < LINGER_S


def test_an_unscraped_oom_keeps_the_endpoint_until_one_scrape_read_it(
        make_tracker: Callable[..., MemoryTracker]) -> None:
    tracker = _tracker(make_tracker, faults="oom@t=0.1s").start_tracking()
    _wait_for_oom_edge(tracker)
    bodies: list[str] = []

    def scrape_later() -> None:
        time.sleep(1.5)
        bodies.append(_scrape(tracker))

    scraper = threading.Thread(target=scrape_later)
    scraper.start()
    took = _timed_stop(tracker)
    scraper.join(10)
    assert 1.4 < took < LINGER_S, took  # waited for the scrape, not for the 10 s bound
    assert len(bodies) == 1 and _ooms(bodies[0]) == 1
    with pytest.raises(httpx.HTTPError):  # and then stopped serving
        _scrape(tracker)


def test_an_oom_already_scraped_needs_no_wait(make_tracker: Callable[..., MemoryTracker]) -> None:
    tracker = _tracker(make_tracker, faults="oom@t=0.1s").start_tracking()
    _wait_for_oom_edge(tracker)
    assert _ooms(_scrape(tracker)) == 1
    assert _timed_stop(tracker) < LINGER_S


def test_the_wait_is_bounded_and_can_be_turned_off(
        make_tracker: Callable[..., MemoryTracker], caplog: pytest.LogCaptureFixture) -> None:
    """``bounded`` was scraped once, then stops as on SIGTERM (``linger=True``: the final state
    must be read) and nobody scrapes again. (It was an OOM'd tracker never scraped at all: once
    an endpoint has been up longer than the linger, the tracker rightly takes it for one nobody
    scrapes and does not wait -- on a busy machine the wait for three OOM edges outlasted the
    1 s linger, and the stop took 0.12 s. The OOM's own linger: the test above.)"""
    bounded = _tracker(make_tracker, linger=1.0).start_tracking()
    _scrape(bounded)
    off = _tracker(make_tracker, faults="oom@t=0.1s", linger=0.0).start_tracking()
    forced_off = _tracker(make_tracker, faults="oom@t=0.1s").start_tracking()
    for tracker in (off, forced_off):
        _wait_for_oom_edge(tracker, timeout=60.0)
    with caplog.at_level(logging.WARNING, logger="stormotel"):
        took = _timed_stop(bounded, linger=True)
    # nobody scraped since the stop: gave up at its 1 s bound (said so), not at another one
    assert 0.9 < took < LINGER_S, took
    assert [r.getMessage() for r in caplog.records if RAN_OUT in r.getMessage()] == [
        f"stormotel: {RAN_OUT} 1.0 s of the end (linger_after_event_s / "
        f"{environment.LINGER_S}); the last values may be missing from the TSDB"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="stormotel"):
        assert _timed_stop(off) < LINGER_S
        assert _timed_stop(forced_off, linger=False) < LINGER_S
    assert not [r for r in caplog.records if RAN_OUT in r.getMessage()]


def test_a_counter_oom_is_pushed_at_once(make_tracker: Callable[..., MemoryTracker]) -> None:
    """The rank may die within a second: the OOM goes out through OTLP (spans and metrics) when
    the counter shows it, not at the next 60 s export or at a stop that may never come."""
    rx = HttpReceiver()
    every_s = 60.0
    try:
        tracker = make_tracker(sampler=SimulatedSampler(rank=1, faults="oom@t=0.3s"),
                               otlp_endpoint=rx.url, otlp_protocol="http", otlp_interval=every_s)
        tracker.start_tracking()
        # What arrives before the first periodic export is due can only be the OOM's own push
        # (the stop's comes after the loop). It was 5 s: on a busy machine the push took longer.
        deadline = time.monotonic() + every_s / 2
        events: list[str] = []
        ooms: list[int] = []
        while time.monotonic() < deadline and not (events and ooms):
            time.sleep(0.1)
            with rx.got.lock:
                traces, metrics = list(rx.got.traces), list(rx.got.metrics)
            events = [e.name for _r, sp in spans(traces) for e in sp.events
                      if e.name == schema.EVENT_OOM]
            ooms = [p.as_int for _r, name, p in points(metrics) if name == schema.OOMS.name]
        tracker.stop_tracking(linger=False)
    finally:
        rx.close()
    assert events == [schema.EVENT_OOM]
    assert ooms and ooms[-1] == 1


def test_an_exception_leaving_the_with_block_lingers(
        make_tracker: Callable[..., MemoryTracker]) -> None:
    tracker = _tracker(make_tracker, linger=1.0)
    started = time.monotonic()
    with pytest.raises(ValueError), tracker:
        raise ValueError("training failed")
    assert time.monotonic() - started > 0.9


def test_linger_from_the_environment_and_bad_values() -> None:
    assert linger_seconds(None, {}) == schema.LINGER_AFTER_EVENT_S_DEFAULT
    assert linger_seconds(None, {environment.LINGER_S: "45"}) == 45.0
    assert linger_seconds(3, {environment.LINGER_S: "45"}) == 3.0
    for bad in ("soon", "-1", "inf", "1e10"):  # the deployment's value: warning and default
        assert linger_seconds(None, {environment.LINGER_S: bad}) == \
            schema.LINGER_AFTER_EVENT_S_DEFAULT
    with pytest.raises(ValueError, match="linger_after_event_s"):  # the code's: an error
        linger_seconds(-2.0, {})


# -- real processes: an uncaught OOM at exit, SIGTERM, the CLI -------------------------------
UNCAUGHT_OOM = """
import sys
from stormotel.samplers.simulated import SimulatedSampler
from stormotel.tracker import MemoryTracker
tracker = MemoryTracker(sampler=SimulatedSampler(rank=0), sampling_interval=0.05, job_id="x",
                        rank=0, world_size=1, prometheus_port=0, prometheus_addr="127.0.0.1",
                        linger_after_event_s=20, env={})
tracker.start_tracking()
print(tracker.prometheus_address[1], flush=True)
raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _port_line(proc: subprocess.Popen[str]) -> int:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip().isdigit(), (line, proc.stderr.read() if proc.stderr else "")
    return int(line)


@pytest.mark.slow  # a fresh interpreter
def test_an_uncaught_oom_at_exit_is_an_oom_and_waits_for_the_scrape(tmp_path: Path) -> None:
    """No allocator counter (the simulated device never ran out): the uncaught OOM exception
    itself becomes the OOM, and the process stays until a scrape has it."""
    proc = subprocess.Popen([sys.executable, "-c", UNCAUGHT_OOM], cwd=tmp_path, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = _port_line(proc)
        time.sleep(1.0)
        assert proc.poll() is None, "exited without waiting for a scrape"
        body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        proc.wait(timeout=10)
    finally:
        proc.kill()
        proc.wait()
    assert _ooms(body) == 1
    assert proc.returncode == 1  # the exception still ends the process as it would have
    assert "CUDA out of memory" in (proc.stderr.read() if proc.stderr else "")


#: The stop's own timestamp on a line of the exposition: the final state is being served.
STOP_LINE = re.compile(rf"^{schema.TRACKER_STOP.prom}[{{ ]", re.MULTILINE)
TRACK_LINGER_S = 20.0


@pytest.mark.slow  # a fresh interpreter
def test_sigterm_waits_for_one_scrape_then_exits(tmp_path: Path) -> None:
    """SIGTERM, no scrape for a second: still up. Then scraped every 0.2 s until it leaves: a
    scrape read the final state, and that scrape -- not the linger's bound -- ended the wait.

    One scrape 1 s after the SIGTERM (as this test did) was a race on a busy machine: the rank
    may not have reached its linger by then, a scrape that began earlier rightly does not count
    (scrape_watch: it began before the stop), and the rank waited out the 20 s bound."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormotel", "track", "--sampler", "simulated", "--job-id", "st",
         "--rank", "0", "--world-size", "1", "--interval", "0.05", "--prometheus-port", "0",
         "--prometheus-addr", "127.0.0.1", "--linger-s", f"{TRACK_LINGER_S:g}"],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bodies: list[str] = []
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        port = int(re.search(r"127\.0\.0\.1:(\d+)/metrics", banner).group(1))  # type: ignore[union-attr]
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        time.sleep(1.0)
        assert proc.poll() is None, "exited on SIGTERM without waiting for a scrape"
        # Past the linger's bound (plus the stop's own 3 s) the rank leaves whatever happens.
        while proc.poll() is None and time.monotonic() - sent < TRACK_LINGER_S + 10:
            with contextlib.suppress(httpx.HTTPError):  # the endpoint closes as it leaves
                bodies.append(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
            time.sleep(0.2)
        proc.wait(timeout=10)
        left_s = time.monotonic() - sent
    finally:
        proc.kill()
        _, err = proc.communicate()
    assert proc.returncode == exitcodes.OK, err[-2000:]
    assert any(STOP_LINE.search(b) for b in bodies), "no scrape read the final state"
    # the wait ended by a scrape: not by its bound (which warns), and before the bound could
    assert "no Prometheus scrape within" not in err, err[-2000:]
    assert left_s < TRACK_LINGER_S, f"left {left_s:.1f} s after SIGTERM: waited out the linger"


@pytest.mark.slow  # a fresh interpreter
def test_track_rejects_a_negative_linger(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "stormotel", "track", "--sampler", "simulated",
                          "--linger-s", "-1"], cwd=tmp_path, env=_env(), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == exitcodes.USAGE and "--linger-s" in out.stderr
    assert "Traceback" not in out.stderr
