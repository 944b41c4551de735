"""Fixtures for tracker tests: a tracker on the simulated device writing to a temp archive."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stormotel.tracker import MemoryTracker


@pytest.fixture
def make_tracker(tmp_path: Path) -> Iterator[Callable[..., MemoryTracker]]:
    made: list[MemoryTracker] = []

    def make(**kwargs: Any) -> MemoryTracker:
        defaults: dict[str, Any] = {"sampler": "simulated", "sampling_interval": 0.02,
                                    "job_id": "t-job", "rank": 1, "local_rank": 1,
                                    "world_size": 2, "host": "node-a", "env": {}}
        if not any(k in kwargs for k in ("archive_dir", "otlp_endpoint", "prometheus_port")):
            defaults["archive_dir"] = tmp_path / "archive"
        tracker = MemoryTracker(**{**defaults, **kwargs})
        made.append(tracker)
        return tracker

    yield make
    for tracker in made:
        tracker.stop_tracking()
