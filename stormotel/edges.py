"""In-process edge detection: threshold crossings with hysteresis, and a rank's first rise.

Exporters and scrapers see memory every 10-60 s; an incident unfolds within one sampling
interval. These detectors run on every sample in the sampling thread and report the exact sample
timestamp of an edge, which the tracker turns into a span event and into edge gauges (the time
and size of the latest edge of each kind; DESIGN.md "Resolution").
"""

from __future__ import annotations

from dataclasses import dataclass

from stormotel import schema

__all__ = ["LEVELS", "FirstRise", "FirstRiseDetector", "ThresholdCrossing", "ThresholdMonitor"]

#: threshold name → the ``level`` attribute value it produces.
LEVELS: dict[str, str] = {schema.THRESHOLD_WARNING: "warning",
                          schema.THRESHOLD_CRITICAL: "critical"}


@dataclass(frozen=True)
class ThresholdCrossing:
    level: str
    threshold_percent: float
    percent: float


class ThresholdMonitor:
    """Upward crossings of percent-of-device thresholds.

    After a crossing a level is disarmed until usage falls ``hysteresis_percent`` below its line,
    so a value hovering at the line produces one event, not one per sample.
    """

    def __init__(self, thresholds: dict[str, float] | None = None,
                 hysteresis_percent: float = 2.0) -> None:
        if hysteresis_percent < 0:
            raise ValueError(f"hysteresis_percent must be >= 0, got {hysteresis_percent}")
        self.hysteresis_percent = hysteresis_percent
        self.thresholds: dict[str, float] = {}
        self._armed: dict[str, bool] = {}
        for name, value in {**schema.DEFAULT_THRESHOLDS, **(thresholds or {})}.items():
            self.set(name, value)

    def set(self, name: str, percent: float) -> None:
        if name not in LEVELS:
            raise ValueError(f"unknown threshold {name!r} (one of {', '.join(LEVELS)})")
        if not 0.0 < float(percent) <= 100.0:
            raise ValueError(f"threshold {name}={percent!r} must be in (0, 100]")
        self.thresholds[name] = float(percent)
        self._armed[name] = True

    def check_order(self) -> None:
        """The warning line must stay below the critical one (a ``ValueError`` otherwise)."""
        warning = self.thresholds.get(schema.THRESHOLD_WARNING)
        critical = self.thresholds.get(schema.THRESHOLD_CRITICAL)
        if warning is not None and critical is not None and warning >= critical:
            raise ValueError(f"{schema.THRESHOLD_WARNING}={warning:g} must be below "
                             f"{schema.THRESHOLD_CRITICAL}={critical:g}")

    def set_ordered(self, name: str, percent: float) -> None:
        """:meth:`set`, undone (the old line back, re-armed) when it would put the warning
        line at or above the critical one."""
        old = dict(self.thresholds)
        self.set(name, percent)
        try:
            self.check_order()
        except ValueError:
            self.set(name, old[name])
            raise

    def update(self, percent: float) -> list[ThresholdCrossing]:
        out: list[ThresholdCrossing] = []
        for name, line in self.thresholds.items():
            if self._armed[name] and percent >= line:
                self._armed[name] = False
                out.append(ThresholdCrossing(LEVELS[name], line, percent))
            elif not self._armed[name] and percent < line - self.hysteresis_percent:
                self._armed[name] = True
        return out


@dataclass(frozen=True)
class FirstRise:
    timestamp_ns: int
    value: int
    baseline: int

    @property
    def delta(self) -> int:
        return self.value - self.baseline


class FirstRiseDetector:
    """The first sample that stands ``rise_bytes`` above the baseline: a qualifying rise.

    The baseline is the maximum over the first ``warmup_samples`` samples, so the periodic rise
    and fall of a training step is inside it and does not count as a rise; both a sudden spike
    and a slow leak qualify once they are ``rise_bytes`` above it. With ``rise_bytes=None`` the
    bar is ``max(64 MiB, 5 % of device total)``.

    After a rise the detector stays quiet for ``rearm_samples`` samples, then takes a new
    baseline the same way, so a later incident (after a warm-up that outlasted the baseline)
    still gets its edge. The quiet period keeps edges of one rank at least that far apart, so a
    scraper slower than the tracker never sees a rank's later edge in place of its first.
    ``rearm_samples=None`` never re-arms (one rise per session). ``fired`` is the first rise,
    ``latest`` the most recent one.
    """

    def __init__(self, warmup_samples: int = 20, rise_bytes: int | None = None,
                 rearm_samples: int | None = None) -> None:
        if warmup_samples < 1:
            raise ValueError(f"warmup_samples must be >= 1, got {warmup_samples}")
        if rearm_samples is not None and rearm_samples < 0:
            raise ValueError(f"rearm_samples must be >= 0, got {rearm_samples}")
        self.warmup_samples = warmup_samples
        self.rise_bytes = rise_bytes
        self.rearm_samples = rearm_samples
        self._seen = 0
        self._quiet_left: int | None = None  # samples until re-armed; None = armed
        self._baseline: int | None = None
        self.fired: FirstRise | None = None
        self.latest: FirstRise | None = None

    def update(self, timestamp_ns: int, value: int | None,
               total: int | None = None) -> FirstRise | None:
        if value is None or (self.latest is not None and self.rearm_samples is None):
            return None
        if self._quiet_left is not None:
            self._quiet_left -= 1
            if self._quiet_left <= 0:  # re-armed: a new baseline from the next samples
                self._quiet_left, self._seen, self._baseline = None, 0, None
            return None
        if self._seen < self.warmup_samples:
            self._seen += 1
            self._baseline = value if self._baseline is None else max(self._baseline, value)
            return None
        assert self._baseline is not None
        bar = self.rise_bytes if self.rise_bytes is not None else max(
            64 * 2**20, int(0.05 * total) if total else 0)
        if value - self._baseline >= bar:
            rise = FirstRise(timestamp_ns, value, self._baseline)
            self.fired = self.fired or rise
            self.latest = rise
            if self.rearm_samples is not None:
                self._quiet_left = self.rearm_samples
            return rise
        return None
