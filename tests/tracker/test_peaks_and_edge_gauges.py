"""Peaks every reader sees, and edges as gauges, through the real Prometheus pull endpoint."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from stormotel import schema
from stormotel.samplers.simulated import SimulatedSampler
from stormotel.telemetry import RollingPeak
from stormotel.tracker import MemoryTracker
from tests.tracker.otlp_util import TraceRequest, attrs, parse_lines, spans

GiB = 2**30


def test_rolling_peak_is_not_reset_by_reads_and_rolls_with_sample_time() -> None:
    peak = RollingPeak(window_s=10.0, buckets=10)
    s = 10**9
    peak.update(0, np.array([5.0, 1.0, 1.0, 1.0]))
    peak.update(1 * s, np.array([9.0, 1.0, 1.0, 1.0]))  # the spike
    peak.update(2 * s, np.array([5.0, 1.0, 1.0, 1.0]))
    assert [peak.peak(0) for _ in range(3)] == [9.0, 9.0, 9.0]  # reads never reset it
    peak.update(12 * s, np.array([5.0, 1.0, 1.0, 1.0]))  # the spike is > 10 s old now
    assert peak.peak(0) == 5.0


def _scrape(port: int) -> str:
    return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text


def _value(text: str, name: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_two_readers_see_the_same_peak_and_the_exact_edge_time(
        make_tracker: Callable[..., MemoryTracker], tmp_path: Path) -> None:
    """A 1 GiB, 300 ms spike on this rank: two scrapes in a row (an HA pair, or a curl while
    debugging) both see the peak, and the edge gauge holds the first-rise event's exact time."""
    # Warmed up from the first sample (an hour into the simulated clock); the spike is far ahead
    # until the detector has its baseline, then brought to 1 s from now.
    sampler = SimulatedSampler(rank=1, faults="rank=1:spike@t=7200s,delta=1GiB,duration=300ms",
                               epoch_ns=time.time_ns() - 3600 * 10**9)
    tracker = make_tracker(sampler=sampler, archive_dir=tmp_path / "archive", prometheus_port=0,
                           prometheus_addr="127.0.0.1", peak_window=30.0, warmup_samples=10)
    tracker.start_tracking()
    port = (tracker.prometheus_address or ("", 0))[1]
    deadline = time.monotonic() + 60  # a loaded host starves the sampling thread
    while tracker.state.samples < 15:  # the detector's baseline is taken
        assert time.monotonic() < deadline, "the tracker is not sampling"
        time.sleep(0.05)
    sampler.epoch_ns = time.time_ns() - 7199 * 10**9  # the spike comes 1 s from now
    while _value(_scrape(port), schema.EDGE_TIMESTAMP.prom) is None:
        assert time.monotonic() < deadline, "no edge gauge after 60 s"
        time.sleep(0.2)
    # Until the spike is over on the tracker's own clock (its samples, not the wall clock).
    while sampler.elapsed_s(tracker.state.latest.timestamp_ns) < 7200.6:  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the tracker never sampled past the spike"
        time.sleep(0.2)
    first, second = _scrape(port), _scrape(port)
    tracker.stop_tracking()
    used = _value(first, schema.DEVICE_USED.prom)
    peaks = [_value(t, schema.DEVICE_USED_PEAK.prom) for t in (first, second)]
    assert used is not None and peaks[0] is not None
    assert peaks[0] == peaks[1] >= used + 0.9 * GiB  # neither read stole the spike
    edge_s = _value(first, schema.EDGE_TIMESTAMP.prom, edge=schema.EDGE_FIRST_RISE)
    size = _value(first, schema.EDGE_SIZE.prom, edge=schema.EDGE_FIRST_RISE)
    interval = _value(first, schema.SAMPLING_INTERVAL.prom)
    assert edge_s is not None and size is not None and 0.9 * GiB <= size <= 1.1 * GiB
    assert interval is not None and abs(interval - tracker.sampling_interval) < 1e-9
    traces = parse_lines(tracker.archive_files[1], TraceRequest)  # type: ignore[index]
    events = [ev for _r, sp in spans(traces) for ev in sp.events
              if ev.name == schema.EVENT_FIRST_RISE]
    assert len(events) == 1
    assert abs(events[0].time_unix_nano / 1e9 - edge_s) < 1e-3  # the same instant, to the ms
    assert attrs(events[0].attributes)[schema.SPAN_ATTR_SAMPLING_INTERVAL] == \
        tracker.sampling_interval
    assert re.search(r"^stormotel_edge_timestamp_seconds\{", first, re.MULTILINE)
    # The edge's real gap since the previous sample, the same on the gauge and the event.
    gap = _value(first, schema.EDGE_GAP.prom, edge=schema.EDGE_FIRST_RISE)
    assert gap is not None and gap > 0
    assert gap == attrs(events[0].attributes)[schema.EVENT_ATTR_SINCE_PREVIOUS]
