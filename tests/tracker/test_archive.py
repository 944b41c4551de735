"""The OTLP JSON-lines archive written by a tracker: valid OTLP, one line per sample, identity,
spans with memory, edges (first rise, thresholds, OOM) and the OOM flight-recorder dump."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stormotel import schema
from stormotel.samplers.simulated import SimulatedOutOfMemoryError, SimulatedSampler
from stormotel.tracker import MemoryTracker
from tests.tracker.otlp_util import (
    MetricsRequest,
    TraceRequest,
    attrs,
    metrics_files,
    metrics_requests,
    parse_lines,
    points,
    samples_archived,
    spans,
)

SCHEMA_NAMES = {m.name for m in schema.ALL_METRICS}


def _run_steps(tracker: MemoryTracker, n: int, seconds: float) -> None:
    for i in range(n):
        with tracker.step(i), tracker.mark("nccl:all_reduce"):
            time.sleep(seconds / n)


def test_archive_is_valid_otlp_one_line_per_sample(make_tracker: Callable[..., MemoryTracker],
                                                   tmp_path: Path) -> None:
    tracker = make_tracker(estimate_bytes=7 * 2**30, archive_format=schema.ARCHIVE_FORMAT_LINES)
    tracker.start_tracking()
    _run_steps(tracker, 5, 0.4)
    tracker.stop_tracking()
    metrics_path, traces_path = tracker.archive_files or (None, None)
    assert metrics_path == tmp_path / "archive" / "t-job" / "rank-1.metrics.jsonl"
    assert traces_path == tmp_path / "archive" / "t-job" / "rank-1.traces.jsonl"
    requests = parse_lines(metrics_path, MetricsRequest)
    assert len(requests) == tracker.stats["samples"] >= 10  # one export per sample
    res = attrs(requests[0].resource_metrics[0].resource.attributes)
    assert res[schema.RES_SERVICE_NAME] == "stormotel"
    assert res[schema.RES_SERVICE_INSTANCE_ID] == "t-job/rank-1"
    assert res[schema.RES_HOST_NAME] == "node-a"
    assert {k: res[k] for k in schema.IDENTITY_LABELS} == {
        "job_id": "t-job", "rank": "1", "local_rank": "1", "world_size": "2", "host": "node-a",
        "gpu": "1"}
    seen = Counter()
    for _res, name, point in points(requests):
        seen[name] += 1
        labels = attrs(point.attributes)
        assert labels[schema.ATTR_RANK] == "1" and labels[schema.ATTR_JOB_ID] == "t-job"
        assert set(schema.IDENTITY_LABELS) <= set(labels)
    # Every metric, zero-initialised counters included; edge gauges appear with the first edge.
    # The stop timestamp only in exports after the stop: here the last line (the final sample's,
    # taken once the stop is marked), so the analyzer tells this clean stop from a death.
    assert set(seen) == SCHEMA_NAMES - {schema.EDGE_TIMESTAMP.name, schema.EDGE_SIZE.name,
                                        schema.EDGE_GAP.name}
    assert seen[schema.TRACKER_STOP.name] == 1
    assert schema.TRACKER_STOP.name in {
        m.name for m in requests[-1].resource_metrics[0].scope_metrics[0].metrics}
    assert seen[schema.DEVICE_USED.name] == len(requests)
    # Per line: the peak since the previous line is never below the latest value.
    for req in requests:
        values = {m.name: (m.gauge.data_points or m.sum.data_points)[0]
                  for m in req.resource_metrics[0].scope_metrics[0].metrics
                  if not m.HasField("histogram")}
        durations = [m.histogram for m in req.resource_metrics[0].scope_metrics[0].metrics
                     if m.name == schema.SAMPLE_DURATION.name]
        assert durations and durations[0].data_points[0].count >= 1
        used = values[schema.DEVICE_USED.name].as_int
        assert values[schema.DEVICE_USED_PEAK.name].as_int >= used
        assert used <= values[schema.DEVICE_LIMIT.name].as_int
        assert values[schema.GAP.name].as_int == used - values[schema.ALLOC_RESERVED.name].as_int
        assert values[schema.ESTIMATE.name].as_int == 7 * 2**30


def test_step_and_mark_spans_carry_memory(make_tracker: Callable[..., MemoryTracker]) -> None:
    tracker = make_tracker()
    tracker.start_tracking()
    _run_steps(tracker, 3, 0.3)
    tracker.stop_tracking()
    all_spans = [s for _r, s in spans(parse_lines(tracker.archive_files[1], TraceRequest))]
    by_name = Counter(s.name for s in all_spans)
    assert by_name[schema.SPAN_SESSION] == 1
    # A mark's span is named by the mark; its kind attribute says it is a mark.
    assert by_name[schema.SPAN_STEP] == 3 and by_name["nccl:all_reduce"] == 3
    assert schema.SPAN_MARK not in by_name
    session = next(s for s in all_spans if s.name == schema.SPAN_SESSION)
    steps = {s.span_id: s for s in all_spans if s.name == schema.SPAN_STEP}
    for step in steps.values():
        a = attrs(step.attributes)
        assert step.parent_span_id == session.span_id
        assert a[schema.SPAN_ATTR_MEM_PEAK] >= max(a[schema.SPAN_ATTR_MEM_START],
                                                   a[schema.SPAN_ATTR_MEM_END])
    for mark in (s for s in all_spans if s.name == "nccl:all_reduce"):
        assert mark.parent_span_id in steps
        assert attrs(mark.attributes)[schema.SPAN_ATTR_KIND] == schema.SPAN_KIND_MARK
        assert attrs(mark.attributes)[schema.SPAN_ATTR_MARK] == "nccl:all_reduce"
    assert sorted(attrs(s.attributes)[schema.SPAN_ATTR_STEP] for s in steps.values()) == [0, 1, 2]


def test_first_rise_is_an_event_at_the_sample_time(make_tracker: Callable[..., MemoryTracker]
                                                   ) -> None:
    # Epoch 1 s ago: the simulated cache warm-up (first 0.6 s) is over before tracking starts.
    sampler = SimulatedSampler(rank=0, faults="rank=0:first_spike@t=1.5s,delta=2GiB",
                               epoch_ns=time.time_ns() - 1_000_000_000)
    tracker = make_tracker(sampler=sampler, rank=0, warmup_samples=5)
    tracker.start_tracking()
    deadline = time.monotonic() + 30  # a loaded host starts the sampling thread late
    while "first_rise_ns" not in tracker.stats or tracker.stats["first_rise_ns"] is None:
        assert time.monotonic() < deadline, "no first rise after 30 s"
        time.sleep(0.05)
    tracker.stop_tracking()
    events = [(s, e) for _r, s in spans(parse_lines(tracker.archive_files[1], TraceRequest))
              for e in s.events]
    rises = [(s, e) for s, e in events if e.name == schema.EVENT_FIRST_RISE]
    assert len(rises) == 1
    span, event = rises[0]
    assert span.name == schema.SPAN_EDGE and span.start_time_unix_nano == event.time_unix_nano
    a = attrs(event.attributes)
    assert a[schema.EVENT_ATTR_DELTA] >= 2 * 2**30 - 10 * 2**20
    assert event.time_unix_nano == tracker.stats["first_rise_ns"]
    t = (event.time_unix_nano - sampler.epoch_ns) / 1e9
    assert 1.5 <= t < 2.5  # the first sample after the rise (later only on a starved host)
    # Exact: the event's time is the sample's own timestamp (the device state at that instant).
    assert a[schema.EVENT_ATTR_BYTES] == sampler.reading_at(t).device_used


class _StallingSampler:
    """The simulated device, but the sampler stalls 0.6 s once just before the rise (a tracker
    starved of CPU): the rise is then seen by a sample long after the previous one."""

    def __init__(self, inner: SimulatedSampler) -> None:
        self.inner, self.stalled = inner, False
        self.name = inner.name

    def sample(self) -> Any:
        if not self.stalled and time.time_ns() - self.inner.epoch_ns > 1_400_000_000:
            self.stalled = True
            time.sleep(0.6)
        return self.inner.sample()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_first_rise_states_the_gap_since_the_previous_sample(
        make_tracker: Callable[..., MemoryTracker]) -> None:
    """The edge's resolution is the tracker's real gap before it, not its nominal interval: a
    starved sampler must not let the analyzer claim a 0.1 s precision it never had."""
    inner = SimulatedSampler(rank=0, faults="rank=0:first_spike@t=1.5s,delta=2GiB",
                             epoch_ns=time.time_ns() - 1_000_000_000)
    tracker = make_tracker(sampler=_StallingSampler(inner), rank=0, warmup_samples=5)
    tracker.start_tracking()
    time.sleep(1.5)
    tracker.stop_tracking()
    events = [e for _r, s in spans(parse_lines(tracker.archive_files[1], TraceRequest))
              for e in s.events if e.name == schema.EVENT_FIRST_RISE]
    assert len(events) == 1
    a = attrs(events[0].attributes)
    assert a[schema.EVENT_ATTR_SINCE_PREVIOUS] >= 0.55
    assert a[schema.EVENT_ATTR_SINCE_PREVIOUS] > 4 * a[schema.SPAN_ATTR_SAMPLING_INTERVAL]


def test_threshold_crossing_events_and_counter(make_tracker: Callable[..., MemoryTracker]) -> None:
    tracker = make_tracker(hysteresis_percent=2.0)
    tracker.set_threshold(schema.THRESHOLD_WARNING, 20.0)  # simulated baseline is ~35 %
    tracker.set_threshold(schema.THRESHOLD_CRITICAL, 99.0)
    tracker.start_tracking()
    time.sleep(0.5)
    tracker.stop_tracking()
    assert tracker.stats["threshold_crossings"] == {"warning": 1, "critical": 0}
    events = [e for _r, s in spans(parse_lines(tracker.archive_files[1], TraceRequest))
              for e in s.events if e.name == schema.EVENT_THRESHOLD]
    assert len(events) == 1 and attrs(events[0].attributes)[schema.EVENT_ATTR_LEVEL] == "warning"
    last = parse_lines(tracker.archive_files[0], MetricsRequest)[-1:]
    counts = {attrs(p.attributes)[schema.ATTR_LEVEL]: p.as_int
              for _r, n, p in points(last) if n == schema.THRESHOLD_CROSSINGS.name}
    assert counts == {"warning": 1, "critical": 0}


def test_capture_oom_dumps_ring_emits_event_and_reraises(
        make_tracker: Callable[..., MemoryTracker], tmp_path: Path) -> None:
    sampler = SimulatedSampler(rank=1, faults="rank=1:oom@t=0.3s")
    tracker = make_tracker(sampler=sampler, ring_size=8, oom_dump_dir=tmp_path / "oom")
    tracker.start_tracking()
    with pytest.raises(SimulatedOutOfMemoryError), tracker.capture_oom(context="train-loop"):
        for i in range(100):
            with tracker.step(i):
                time.sleep(0.02)
            sampler.raise_if_oom()
    dump = Path(tracker.last_oom_dump or "")
    assert dump.parent == tmp_path / "oom" and dump.is_file()
    head, *rows = [json.loads(x) for x in dump.read_text().splitlines()]
    assert head["schema"] == schema.RING_DUMP_SCHEMA and head["reason"] == "oom"
    assert head["context"] == "train-loop" and "out of memory" in head["error"]
    assert head["rank"] == "1" and len(rows) == 8  # bounded by the ring
    assert rows[-1]["num_ooms"] == 1 and rows[-1]["device_used"] == rows[-1]["device_total"]
    assert [p.name for p in dump.parent.iterdir()] == [dump.name]  # atomic: no temp left
    # The OOM event is on disk before the exception leaves capture_oom (flushed).
    events = [e for _r, s in spans(parse_lines(tracker.archive_files[1], TraceRequest))
              for e in s.events if e.name == schema.EVENT_OOM]
    assert len(events) == 1
    a = attrs(events[0].attributes)
    assert a[schema.EVENT_ATTR_DUMP_PATH] == str(dump)
    assert a[schema.EVENT_ATTR_CONTEXT] == "train-loop"
    tracker.stop_tracking()
    oom_counts = [p.as_int for _r, n, p in points(parse_lines(tracker.archive_files[0],
                                                              MetricsRequest)[-1:])
                  if n == schema.OOMS.name]
    assert oom_counts == [1]


def test_capture_oom_lets_other_errors_through(make_tracker: Callable[..., MemoryTracker],
                                               tmp_path: Path) -> None:
    tracker = make_tracker(oom_dump_dir=tmp_path / "oom")
    tracker.start_tracking()
    with pytest.raises(KeyError), tracker.capture_oom():
        raise KeyError("not memory")
    assert tracker.stats["caught_ooms"] == 0 and not (tmp_path / "oom").exists()


def test_estimate_from_file_and_errors(make_tracker: Callable[..., MemoryTracker],
                                       tmp_path: Path) -> None:
    est = tmp_path / "estimate.json"
    est.write_text(json.dumps({"peak_bytes": 123456789, "other": 1}))
    assert make_tracker(estimate_bytes=est).estimate_bytes == 123456789
    est.write_text(json.dumps({"peak_bytes": "big"}))
    with pytest.raises(ValueError, match="'peak_bytes' must be a non-negative integer"):
        make_tracker(estimate_bytes=est)
    with pytest.raises(ValueError, match="cannot read the estimate JSON"):
        make_tracker(estimate_bytes=tmp_path / "missing.json")


def test_explicit_dump_and_default_destination(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tracker = MemoryTracker(sampler="simulated", sampling_interval=0.02, job_id="d", env={})
    with tracker:
        time.sleep(0.1)
        path = tracker.dump(tmp_path / "now.jsonl")
    assert json.loads(path.read_text().splitlines()[0])["reason"] == "requested"
    files = metrics_files(tmp_path / "stormotel-archive" / "d", 0)  # the compact default
    assert [f.name for f in files] == ["rank-0.00000.metrics.jsonl.zst"]
    assert samples_archived(metrics_requests(files[0].parent, 0)) == tracker.stats["samples"] > 0


def test_step_outside_tracking_is_a_harmless_no_op(make_tracker: Callable[..., MemoryTracker],
                                                   caplog: pytest.LogCaptureFixture) -> None:
    tracker = make_tracker()
    for i in range(3):  # before start and after stop: the loop must not break
        with tracker.step(i), tracker.mark("x") as span:
            assert not span.is_recording()
    tracker.start_tracking()
    tracker.stop_tracking()
    with tracker.step(9):
        pass
    assert sum("not tracking" in r.getMessage() for r in caplog.records) == 1


def test_archive_interval_thins_lines_but_keeps_the_spike_between_them(
        make_tracker: Callable[..., MemoryTracker]) -> None:
    """--archive-interval: one line per N samples; the peak-since-last-line gauge still shows a
    spike that lived only between two lines."""
    tracker = make_tracker(sampling_interval=0.02, archive_interval=0.2,
                           faults="spike@t=0.5s,delta=1GiB,duration=0.06s",
                           archive_format=schema.ARCHIVE_FORMAT_LINES)
    tracker.start_tracking()
    time.sleep(1.2)
    tracker.stop_tracking()
    metrics_path, _ = tracker.archive_files or (None, None)
    requests = parse_lines(metrics_path, MetricsRequest)
    samples = tracker.stats["samples"]
    assert samples >= 30
    assert samples // 10 <= len(requests) <= samples // 10 + 1  # + the final partial window
    used, peak = [], []
    for req in requests:
        values = {m.name: (m.gauge.data_points or m.sum.data_points)[0].as_int
                  for m in req.resource_metrics[0].scope_metrics[0].metrics
                  if m.gauge.data_points or m.sum.data_points}
        used.append(values[schema.DEVICE_USED.name])
        peak.append(values[schema.DEVICE_USED_PEAK.name])
    baseline = min(used)
    assert max(peak) - baseline >= 2**30  # the spike survives in the peak gauge


def test_archive_interval_must_be_positive(make_tracker: Callable[..., MemoryTracker]) -> None:
    with pytest.raises(ValueError, match="archive_interval"):
        make_tracker(archive_interval=0)
