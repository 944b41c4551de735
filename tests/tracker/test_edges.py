"""Threshold hysteresis and the first-rise detector."""

from __future__ import annotations

import pytest

from stormotel import schema
from stormotel.edges import FirstRiseDetector, ThresholdMonitor

MiB = 2**20


def test_hovering_at_the_line_crosses_once() -> None:
    mon = ThresholdMonitor({schema.THRESHOLD_WARNING: 75.0, schema.THRESHOLD_CRITICAL: 90.0},
                           hysteresis_percent=2.0)
    series = [70, 75.1, 74.9, 75.2, 74.0, 76.0, 72.5, 75.5, 91, 89, 91, 60, 80]
    events = [(i, c.level) for i, v in enumerate(series) for c in mon.update(v)]
    # 75.1 crosses; hovering within 2 points does not; 72.5 re-arms so 75.5 crosses again;
    # 91 crosses critical; 89/91 hover; 60 re-arms both; 80 crosses warning again.
    assert events == [(1, "warning"), (7, "warning"), (8, "critical"), (12, "warning")]


def test_threshold_validation() -> None:
    mon = ThresholdMonitor()
    with pytest.raises(ValueError, match="unknown threshold"):
        mon.set("memory_panic_percent", 50)
    with pytest.raises(ValueError, match=r"must be in \(0, 100\]"):
        mon.set(schema.THRESHOLD_WARNING, 120)


def test_first_rise_ignores_step_oscillation_and_fires_once() -> None:
    det = FirstRiseDetector(warmup_samples=4, rise_bytes=100 * MiB)
    base = [1000, 1300, 1000, 1300]  # MiB, a step's rise and fall inside the warm-up
    fired = [det.update(i, v * MiB) for i, v in enumerate(base)]
    fired += [det.update(10 + i, v * MiB) for i, v in enumerate([1000, 1300, 1350, 1450, 1500])]
    hits = [f for f in fired if f is not None]
    assert len(hits) == 1
    assert hits[0].timestamp_ns == 13 and hits[0].delta == 150 * MiB
    assert hits[0].baseline == 1300 * MiB


def test_first_rise_default_bar_scales_with_device() -> None:
    det = FirstRiseDetector(warmup_samples=1)
    det.update(0, 1000 * MiB, total=16 * 1024 * MiB)
    assert det.update(1, 1000 * MiB + 800 * MiB, total=16 * 1024 * MiB) is None  # < 5 %
    assert det.update(2, 1000 * MiB + 820 * MiB, total=16 * 1024 * MiB) is not None
