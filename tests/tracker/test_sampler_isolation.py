"""The training thread never waits for the sampler: a slow (50 ms) or hung sampler must not
slow ``step()``/``mark()``, start or stop beyond a small bound. Bounds are generous (the host
is shared); costs are measured in benchmarks/bench_tracker.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from stormotel.samplers.base import Sample
from stormotel.tracker import MemoryTracker

GIB = 2**30


class SlowSampler:
    """A driver call that takes ``delay`` seconds (NVML under load), or never returns."""

    name = "slow"
    device_index = 0
    gpu_uuid = None
    gpu_name = None

    def __init__(self, delay: float, hang: threading.Event | None = None) -> None:
        self.delay = delay
        self.hang = hang
        self.calls = 0

    def sample(self) -> Sample:
        self.calls += 1
        if self.hang is not None and self.calls > 1:
            self.hang.wait()  # stuck until the test releases it
        time.sleep(self.delay)
        return Sample(timestamp_ns=time.time_ns(), allocated=GIB, reserved=2 * GIB,
                      device_used=3 * GIB, device_total=16 * GIB)

    def close(self) -> None:
        pass


def _step_times(tracker: MemoryTracker, n: int = 20) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        with tracker.step(i), tracker.mark("nccl:all_reduce"):
            pass
        out.append(time.perf_counter() - t0)
    return out


def test_slow_sampler_does_not_slow_steps(make_tracker: Callable[..., MemoryTracker]) -> None:
    sampler = SlowSampler(0.05)
    tracker = make_tracker(sampler=sampler, sampling_interval=0.02)
    tracker.start_tracking()
    times = _step_times(tracker)
    calls_during_steps = sampler.calls
    tracker.stop_tracking()
    # Synchronous sampling would cost 4 x 50 ms per step; reading the latest sample costs µs.
    assert sorted(times)[len(times) // 2] < 0.01, times
    assert sum(times) < 0.5, times
    assert calls_during_steps <= 1 + sum(times) / 0.05 + 2  # only the sampling thread sampled


def test_hung_sampler_never_blocks_training(make_tracker: Callable[..., MemoryTracker]) -> None:
    release = threading.Event()
    tracker = make_tracker(sampler=SlowSampler(0.0, hang=release), sampling_interval=0.02,
                           shutdown_timeout=1.0)
    try:
        t0 = time.monotonic()
        tracker.start_tracking()
        time.sleep(0.1)  # the sampling thread is now stuck in sample()
        assert time.monotonic() - t0 < 3.0
        times = _step_times(tracker)
        assert max(times) < 0.5 and sum(times) < 1.0, times
        t1 = time.monotonic()
        tracker.stop_tracking()
        assert time.monotonic() - t1 < 3.0  # shutdown_timeout 1 s plus scheduling slack
    finally:
        release.set()
    assert tracker.stats["samples"] == 1  # the one sample before the hang
