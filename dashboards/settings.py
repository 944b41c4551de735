"""The tunable numbers shared by dashboards and rules, so a panel's red line is the alert's line.

Defaults come from ``schema.DEFAULT_THRESHOLDS`` and the issue's examples; ``stormotel dashboards``
exposes them as flags and the committed files are built with the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stormotel import schema


@dataclass(frozen=True)
class Settings:
    """Thresholds and windows for panels and alerts (all durations are PromQL durations)."""

    warning_percent: float = schema.DEFAULT_THRESHOLDS[schema.THRESHOLD_WARNING]
    critical_percent: float = schema.DEFAULT_THRESHOLDS[schema.THRESHOLD_CRITICAL]
    #: Window of the gap slope (``deriv``) and of ``predict_linear``.
    drift_window: str = "30m"
    #: Slope above which the gap counts as drifting: 1 MiB per minute.
    drift_min_bytes_per_second: float = 1024 * 1024 / 60
    #: Alert when the drifting gap would fill the device within this many seconds.
    full_horizon_seconds: int = 2 * 3600
    #: Alert when the actual peak exceeds the estimate by this factor.
    estimate_margin: float = 1.1
    #: Window over which the actual peak is taken for the estimate comparison.
    estimate_window: str = "1h"
    #: No analyzer success for this long: the analyzer is stale.
    analyzer_stale_seconds: int = 2 * 3600
    #: A rank with no new samples for this long while peers sample has stopped reporting.
    silent_window: str = "5m"
    #: Dropped / (taken + dropped) samples above this ratio: the tracker is losing data.
    drop_ratio: float = 0.01
    #: How long a minority of ranks must stay silent while the rest sample before paging: longer
    #: than a staggered exit (ranks leaving one after another at the end of a job).
    silent_for: str = "10m"
    #: Window of the allocator-retry and OOM counters: a retry within it means the allocator had
    #: to flush its cache to satisfy an allocation (real pressure, not a full but healthy cache).
    retry_window: str = "15m"
    oom_window: str = "10m"
    #: Lookback for series the analyzer writes once per run (remote write / Pushgateway):
    #: at least twice the CronJob schedule (default every 15 minutes), so one late run does not
    #: resolve an alert.
    analyzer_lookback: str = "1h"
    #: How far back the last success is looked for by the stale alert, and how long after its
    #: last success anywhere the analyzer counts as deployed (so users without it are not paged).
    analyzer_stale_lookback: str = "1d"
    analyzer_presence_window: str = "7d"

    def __post_init__(self) -> None:
        if not 0 < self.warning_percent < self.critical_percent <= 100:
            raise ValueError("need 0 < warning percent < critical percent <= 100, got "
                             f"{self.warning_percent:g} and {self.critical_percent:g}")
        if self.estimate_margin <= 0 or self.drop_ratio <= 0:
            raise ValueError("estimate margin and drop ratio must be positive")

    def percent_steps(self) -> list[dict[str, Any]]:
        """Grafana threshold steps for a 0..100 percentage panel."""
        return [{"color": "green", "value": None},
                {"color": "orange", "value": self.warning_percent},
                {"color": "red", "value": self.critical_percent}]
