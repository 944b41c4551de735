"""The tracker's start and clean-stop edges, and the Prometheus endpoint that waits for one last
scrape after a clean stop so the stop timestamp reaches the alert rules (a rank that stopped is
then never taken for one that died)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from stormotel import archive_writer, environment, schema
from stormotel.tracker import MemoryTracker
from tests.tracker.otlp_util import metrics_requests, samples_archived


def _values(body: str) -> dict[str, float]:
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name.split("{", 1)[0]] = float(value)
    return out


def _tracker(linger: float) -> MemoryTracker:
    return MemoryTracker(sampler="simulated", job_id="edges", rank=0, world_size=1,
                         prometheus_port=0, prometheus_addr="127.0.0.1",
                         prometheus_linger=linger, handle_sigterm=False)


def _url(tracker: MemoryTracker) -> str:
    host, port = tracker.prometheus_address or ("", 0)
    return f"http://{host}:{port}/metrics"


def test_a_lingering_endpoint_serves_the_stop_timestamp_once_more() -> None:
    tracker = _tracker(linger=10).start_tracking()
    url = _url(tracker)
    before = _values(httpx.get(url, timeout=5).text)
    assert before[schema.TRACKER_START.prom] == pytest.approx(time.time(), abs=30)
    assert before[schema.TRACKER_STOP_REPORTED.prom] == 1
    assert schema.TRACKER_STOP.prom not in before
    after: list[str] = []

    def scrape_later() -> None:
        time.sleep(1.0)
        after.append(httpx.get(url, timeout=5).text)

    scraper = threading.Thread(target=scrape_later)
    scraper.start()
    stopped_at = time.time()
    began = time.monotonic()
    tracker.stop_tracking()
    took = time.monotonic() - began
    scraper.join(10)
    values = _values(after[0])
    assert values[schema.TRACKER_STOP.prom] == pytest.approx(stopped_at, abs=0.5)
    assert values[schema.TRACKER_STOP.prom] >= values[schema.TRACKER_START.prom]
    assert 0.9 < took < 5, "waits for that scrape, and no longer"


def test_the_stop_waits_until_the_scrape_that_read_it_was_served() -> None:
    """The linger ends when a scrape that began after the stop has been *served*, not when it
    began: the process exits right after, and a response cut off then never reaches the TSDB.
    Here each collection, past the scrape counter, takes 1.5 s -- a serving thread starved of
    CPU, as beside two CPU-bound neighbours. The stop waited a quarter second after such a
    scrape began, then closed the endpoint; a rank that exits then stopped cleanly but reads
    as dead to the alert rules (tests/serve/test_serve_live.py: the healthy job paged)."""
    tracker = _tracker(linger=10).start_tracking()
    url = _url(tracker)
    httpx.get(url, timeout=5)  # scraped once: the stop owes Prometheus a scrape
    telemetry = tracker.telemetry
    assert telemetry is not None
    counter = telemetry.scrapes
    plain = counter.collect
    served: list[tuple[int, float]] = []  # (wall ns the collection began, monotonic end)

    def starved() -> Any:
        began = time.time_ns()
        out = plain()
        time.sleep(1.5)
        served.append((began, time.monotonic()))
        return out

    counter.collect = starved  # type: ignore[method-assign]
    bodies: list[str] = []
    done = threading.Event()

    def scrape_until_done() -> None:
        while not done.is_set():
            with contextlib.suppress(httpx.HTTPError):  # the endpoint closes as it stops
                bodies.append(httpx.get(url, timeout=10).text)
            time.sleep(0.2)

    scraper = threading.Thread(target=scrape_until_done)
    scraper.start()
    try:
        tracker.stop_tracking()
        returned = time.monotonic()
    finally:
        done.set()
        scraper.join(15)
    stopped_ns = telemetry.state.stopped_ns
    assert stopped_ns is not None
    after = [end for began, end in served if began >= stopped_ns]
    assert after, ("no scrape began after the stop", served, stopped_ns)
    assert returned >= after[0], (f"the stop returned {after[0] - returned:.2f} s before the "
                                  "scrape that read it was served")
    assert any(schema.TRACKER_STOP.prom in _values(b) for b in bodies), "the stop was not served"


def test_no_linger_when_nobody_scrapes_or_none_asked() -> None:
    unscraped = _tracker(linger=30).start_tracking()
    began = time.monotonic()
    unscraped.stop_tracking()
    assert time.monotonic() - began < 3, "never scraped: nothing to wait for"
    plain = _tracker(linger=0).start_tracking()
    assert _values(httpx.get(_url(plain), timeout=5).text)[
        schema.TRACKER_STOP_REPORTED.prom] == 0, "a pull endpoint without linger cannot promise"
    plain.stop_tracking()


def test_linger_must_be_a_non_negative_number() -> None:
    with pytest.raises(ValueError, match="prometheus_linger"):
        _tracker(linger=-1)
    # the deployment's variable: a warning and the default (docs/tracker.md)
    t = MemoryTracker(sampler="simulated", job_id="edges", rank=0, world_size=1,
                      prometheus_port=0, env={environment.PROMETHEUS_LINGER: "soon"})
    assert t.export_config.prometheus_linger_s == 0.0


def test_the_deployment_sets_the_linger_in_the_environment() -> None:
    tracker = MemoryTracker(sampler="simulated", job_id="edges", rank=0, world_size=1,
                            prometheus_port=0, prometheus_addr="127.0.0.1",
                            handle_sigterm=False, env={environment.PROMETHEUS_LINGER: "30"})
    assert tracker.export_config.prometheus_linger_s == 30


class _DriverOnly:
    """A sampler that, like NVML, sees device memory but no allocator OOM count."""

    name = "driver-only"
    device_index = 0
    gpu_uuid = None
    gpu_name = None

    def sample(self) -> object:
        from stormotel.samplers import Sample

        return Sample(timestamp_ns=time.time_ns(), device_used=2**30, device_total=2**34)

    def close(self) -> None:
        """Nothing to release."""


def test_the_oom_counter_exists_from_the_start_at_zero() -> None:
    """So one scrape after an OOM shows 0 -> 1 to increase(), whatever the sampler counts."""
    tracker = MemoryTracker(sampler=_DriverOnly(), job_id="edges", rank=0,  # type: ignore[arg-type]
                            world_size=1, prometheus_port=0, prometheus_addr="127.0.0.1",
                            handle_sigterm=False).start_tracking()
    try:
        assert _values(httpx.get(_url(tracker), timeout=5).text)[schema.OOMS.prom] == 0
    finally:
        tracker.stop_tracking()


def test_a_slow_archive_write_is_waited_for_past_the_collectors_bound(
        make_tracker: Callable[..., MemoryTracker], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The archive is local: a stop waits for its last write beyond the collectors' bound
    (up to event_end.ARCHIVE_CLOSE_S), so every sample taken is on disk. A CPU-starved host
    took over 2 s to write the last batch; the stop gave up at its 2 s bound and lost it
    (helper fl, load 20 with two CPU hogs). Here the write is made 1.5 s slow against a
    0.3 s bound: main lost the batch and warned about the "archive write"."""
    real_close = archive_writer.CompactArchiveWriter.close

    def slow_close(self: archive_writer.CompactArchiveWriter) -> None:
        time.sleep(1.5)
        real_close(self)

    monkeypatch.setattr(archive_writer.CompactArchiveWriter, "close", slow_close)
    tracker = make_tracker(shutdown_timeout=0.3, archive_format="compact")
    tracker.start_tracking()
    while tracker.stats["samples"] < 10:
        time.sleep(0.02)
    with caplog.at_level(logging.WARNING, logger="stormotel"):
        tracker.stop_tracking()
    taken = tracker.stats["samples"]
    assert samples_archived(metrics_requests(tmp_path / "archive" / "t-job", 1)) == taken
    assert "archive write" not in caplog.text, caplog.text
