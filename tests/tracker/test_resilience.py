"""The tracker never takes the training loop down: dead collectors, unwritable or full archive
destinations, busy ports and failing samplers become counted drops, logged once."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from stormotel import schema
from stormotel.samplers.base import Sample
from stormotel.tracker import MemoryTracker
from tests.servers import free_port
from tests.tracker.otlp_util import MetricsRequest, parse_lines, samples_archived


def _train(tracker: MemoryTracker, steps: int = 10, seconds: float = 0.6) -> int:
    """A stand-in training loop; returns the number of steps that completed."""
    done = 0
    for i in range(steps):
        with tracker.step(i), tracker.mark("nccl:all_reduce"):
            time.sleep(seconds / steps)
        done += 1
    return done


def _failures(tracker: MemoryTracker, destination: str) -> int:
    return sum(n for key, n in tracker.stats["export_failures"].items()
               if key.split("/")[0] == destination)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_otlp_endpoint_down(protocol: str, make_tracker: Callable[..., MemoryTracker],
                            tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    tracker = make_tracker(otlp_endpoint=dead, otlp_protocol=protocol, otlp_interval=0.1,
                           otlp_timeout=0.3, archive_dir=tmp_path / "a")
    tracker.start_tracking()
    assert _train(tracker, steps=10, seconds=0.8) == 10
    started = time.monotonic()
    tracker.stop_tracking()
    assert time.monotonic() - started < 15  # bounded by the export timeout, not hung
    assert _failures(tracker, schema.DEST_OTLP) >= 1
    # The other destination kept working throughout.
    archived = samples_archived(parse_lines(tracker.archive_files[0], MetricsRequest))
    assert archived == tracker.stats["samples"]


def test_archive_directory_unwritable(make_tracker: Callable[..., MemoryTracker],
                                      tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a regular file where the archive directory should be")
    caplog.set_level(logging.WARNING)
    tracker = make_tracker(archive_dir=blocker / "archive", prometheus_port=0,
                           prometheus_addr="127.0.0.1", archive_format=schema.ARCHIVE_FORMAT_LINES)
    tracker.start_tracking()
    assert _train(tracker) == 10
    tracker.stop_tracking()
    failures = tracker.stats["export_failures"]
    assert failures.get(f"{schema.DEST_ARCHIVE}/enotdir", 0) >= 1
    assert tracker.stats["samples"] >= 10
    # Every line lost while the directory stays blocked is counted, not one per retry: one
    # metrics line per sample (span batches to the same destination come on top).
    assert _failures(tracker, schema.DEST_ARCHIVE) >= tracker.stats["samples"]
    ours = [r for r in caplog.records if r.name == "stormotel.exporters"]
    assert len(ours) == 1 and "archive export failing (enotdir" in ours[0].getMessage()


def test_archive_disk_full(make_tracker: Callable[..., MemoryTracker], tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("/dev/full is not available to simulate a full disk")
    job_dir = tmp_path / "archive" / "t-job"
    job_dir.mkdir(parents=True)
    (job_dir / "rank-1.metrics.jsonl").symlink_to("/dev/full")  # every write: ENOSPC
    tracker = make_tracker(archive_dir=tmp_path / "archive",
                           archive_format=schema.ARCHIVE_FORMAT_LINES)  # the one-file format
    tracker.start_tracking()
    assert _train(tracker) == 10
    tracker.stop_tracking()
    # every lost batch counted with the errno's name, not raised into the SDK (no traceback)
    assert tracker.stats["export_failures"][f"{schema.DEST_ARCHIVE}/enospc"] >= 5
    assert (job_dir / "rank-1.traces.jsonl").stat().st_size > 0  # spans still written


def test_prometheus_port_busy(make_tracker: Callable[..., MemoryTracker]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        tracker = make_tracker(prometheus_port=port, prometheus_addr="127.0.0.1")
        tracker.start_tracking()
        assert _train(tracker, steps=3, seconds=0.1) == 3
        tracker.stop_tracking()
    assert tracker.stats["export_failures"][f"{schema.DEST_PROMETHEUS}/bind_failed"] == 1
    assert schema.DEST_PROMETHEUS not in tracker.destinations


class FlakySampler:
    """Fails every other reading, like an NVML call that intermittently errors."""

    name = "flaky"
    device_index = 0
    gpu_uuid = None
    gpu_name = None

    def __init__(self) -> None:
        self.calls = 0

    def sample(self) -> Sample:
        self.calls += 1
        if self.calls % 2:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return Sample(timestamp_ns=time.time_ns(), device_used=10, device_total=100)

    def close(self) -> None:
        pass


def test_sampler_errors_are_counted_and_logged_once(
        make_tracker: Callable[..., MemoryTracker], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    tracker = make_tracker(sampler=FlakySampler())
    tracker.start_tracking()
    assert _train(tracker) == 10
    tracker.stop_tracking()
    stats = tracker.stats
    assert stats["dropped"][schema.REASON_SAMPLER_ERROR] >= 5
    assert stats["samples"] >= 5
    logged = [r for r in caplog.records if "sampler failed" in r.getMessage()]
    assert len(logged) == 1 and "NVML_ERROR_GPU_IS_LOST" in logged[0].getMessage()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_stop_is_bounded_when_the_collector_hangs(protocol: str,
                                                  make_tracker: Callable[..., MemoryTracker]
                                                  ) -> None:
    """A collector that accepts connections and never answers: stop_tracking returns after
    ``shutdown_timeout`` (2 s), not after the exporters' timeouts and retries."""
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(64)  # the kernel completes handshakes; nobody ever reads or replies
        url = f"http://127.0.0.1:{hung.getsockname()[1]}"
        tracker = make_tracker(otlp_endpoint=url, otlp_protocol=protocol, otlp_interval=0.2,
                               otlp_timeout=30)
        tracker.start_tracking()
        assert _train(tracker, steps=3, seconds=0.6) == 3
        started = time.monotonic()
        tracker.stop_tracking()
        took = time.monotonic() - started
    assert took < 4.0, took  # 2 s bound + scheduling slack on a shared host
