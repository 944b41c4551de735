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
    #: Window of the gap slope (``deriv``) and of the slow ``predict_linear`` (warning).
    drift_window: str = "30m"
    #: Slope above which the gap counts as drifting: 1 MiB per minute (the absolute guard: a
    #: flat gap, however full the device, never pages).
    drift_min_bytes_per_second: float = 1024 * 1024 / 60
    #: Warning: the drifting gap would fill the device within this many seconds.
    full_horizon_seconds: int = 12 * 3600
    drift_for: str = "15m"
    #: Critical, fast: ``predict_linear`` over this short window, and growth in each of the
    #: last three ``fill_step`` steps (a one-time step grows in one of them only).
    fill_window: str = "5m"
    fill_step: str = "1m"
    #: Critical: the gap would fill the device within this many seconds.
    fill_horizon_seconds: int = 3600
    fill_for: str = "3m"
    #: Alert when the actual peak exceeds the estimate by this factor.
    estimate_margin: float = 1.1
    #: Window over which the actual peak is taken for the estimate comparison.
    estimate_window: str = "1h"
    #: No analyzer success for this long: the analyzer is stale.
    analyzer_stale_seconds: int = 2 * 3600
    #: A rank with no sample for this long (and no clean-stop edge) is silent; how long it must
    #: stay silent before paging. Together they are the dead-rank deadline (< 5 minutes).
    silent_window: str = "2m"
    silent_for: str = "1m"
    #: A rank counts as part of its job for this long after its last sample.
    presence_window: str = "1h"
    #: Dropped / (taken + dropped) samples above this ratio: the tracker is losing data.
    drop_ratio: float = 0.01
    #: A rank whose step has not advanced for this long while its tracker samples is stalled.
    stall_window: str = "10m"
    stall_for: str = "5m"
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
    #: Which series names the tracker's data carries in the TSDB: one of
    #: ``schema.NAME_TRANSLATIONS``, Prometheus 3's OTLP ``translation_strategy`` names
    #: (docs/prometheus3.md). The default also fits the pull exporter and a collector.
    name_translation: str = schema.DEFAULT_NAME_TRANSLATION

    def __post_init__(self) -> None:
        if not 0 < self.warning_percent < self.critical_percent <= 100:
            raise ValueError("need 0 < warning percent < critical percent <= 100, got "
                             f"{self.warning_percent:g} and {self.critical_percent:g}")
        if self.name_translation not in schema.NAME_TRANSLATIONS:
            raise ValueError(f"unknown name translation {self.name_translation!r}: expected one"
                             f" of {', '.join(schema.NAME_TRANSLATIONS)}")
        if self.estimate_margin <= 0 or self.drop_ratio <= 0:
            raise ValueError("estimate margin and drop ratio must be positive")

    def percent_steps(self) -> list[dict[str, Any]]:
        """Grafana threshold steps for a 0..100 percentage panel."""
        return [{"color": "green", "value": None},
                {"color": "orange", "value": self.warning_percent},
                {"color": "red", "value": self.critical_percent}]
