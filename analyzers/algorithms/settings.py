"""Thresholds for every algorithm, with low/medium/high sensitivity presets.

``medium`` is the default. ``low`` is a strict, narrow pass (fewer, surer findings — use it when
unrelated synchronised work makes noise); ``high`` is a broad, sensitive pass. Any threshold can be
overridden by name (``--set spike_z=5``), and the settings used go into the report.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from stormotel.errors import UsageError

MIB = 1024 * 1024
GIB = 1024 * MIB
SENSITIVITIES = ("low", "medium", "high")


class SettingsError(UsageError, ValueError):
    """Unknown preset or threshold name, or a value of the wrong kind."""


@dataclass(frozen=True)
class Settings:
    sensitivity: str = "medium"
    # --- cross-rank first cause (the seed's rule: >= 10% of the rank's peak and >= 64 MiB)
    rise_fraction: float = 0.10
    rise_floor_bytes: float = 64 * MIB
    #: Baseline = minimum over this trailing window (seconds); 0 = since the first sample.
    rise_window_s: float = 0.0
    #: A rank's first rise within this many seconds of its first sample is its own warm-up
    #: (model, optimizer, first steps), not an incident — whatever the ranks' start offsets.
    warmup_s: float = 20.0
    #: Rises of different ranks belong to one incident (a cascade) within this window; it is
    #: widened to two sampling intervals of the coarsest rank.
    cascade_window_s: float = 30.0
    #: How far apart two hosts' clocks may be (0 with --align wall on a synced cluster): a lead
    #: must exceed the evidence's own resolution by this before a leader is named.
    clock_tolerance_s: float = 0.0
    # --- gap analysis (per rank)
    min_samples: int = 10
    spike_z: float = 4.0  #: robust z-score (median/MAD) a gap sample must reach
    spike_min_bytes: float = 128 * MIB  #: ... and this many bytes above the baseline
    drift_min_r2: float = 0.8
    drift_min_growth_bytes: float = 256 * MIB  #: fitted growth over the window, or ...
    drift_horizon_s: float = 24 * 3600.0  #: ... the device would be full within this horizon
    drift_floor_bytes: float = 64 * MIB  #: (with at least this much growth observed)
    frag_ratio: float = 0.5  #: (reserved - allocated) / reserved
    frag_min_bytes: float = 512 * MIB  #: reserved - allocated
    frag_sustain: float = 0.6  #: fraction of samples that must be fragmented
    # --- collective attribution
    sync_window_s: float = 0.25  #: spikes this close (or 1.5 sampling intervals) are together
    min_sync_fraction: float = 0.5  #: of ranks with gap data
    confident_score: float = 0.8
    likely_score: float = 0.55
    suspect_score: float = 0.35

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_PRESETS: dict[str, dict[str, Any]] = {
    "low": dict(spike_z=6.0, spike_min_bytes=256 * MIB, drift_min_r2=0.9,
                drift_min_growth_bytes=1 * GIB, drift_horizon_s=6 * 3600.0,
                drift_floor_bytes=256 * MIB, frag_ratio=0.6, frag_min_bytes=1 * GIB,
                frag_sustain=0.75, sync_window_s=0.1, min_sync_fraction=0.75),
    "medium": {},
    "high": dict(spike_z=3.0, spike_min_bytes=32 * MIB, drift_min_r2=0.6,
                 drift_min_growth_bytes=64 * MIB, drift_horizon_s=7 * 24 * 3600.0,
                 drift_floor_bytes=16 * MIB, frag_ratio=0.35, frag_min_bytes=128 * MIB,
                 frag_sustain=0.5, sync_window_s=0.5, min_sync_fraction=0.25),
}


def settings_for(sensitivity: str = "medium", **overrides: Any) -> Settings:
    """The preset for ``sensitivity`` with ``overrides`` applied (names checked, values cast)."""
    if sensitivity not in _PRESETS:
        raise SettingsError(f"unknown sensitivity {sensitivity!r}; choose one of "
                            f"{', '.join(SENSITIVITIES)}")
    base = replace(Settings(), sensitivity=sensitivity, **_PRESETS[sensitivity])
    types = {f.name: f.type for f in fields(Settings)}
    cast: dict[str, Any] = {}
    for name, value in overrides.items():
        if name not in types or name == "sensitivity":
            known = ", ".join(n for n in types if n != "sensitivity")
            raise SettingsError(f"unknown threshold {name!r}; known: {known}")
        kind = int if types[name] in ("int", int) else float
        try:
            cast[name] = kind(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise SettingsError(f"threshold {name}={value!r} is not a valid {kind.__name__}"
                                ) from exc
        _check_range(name, value, cast[name])
    return replace(base, **cast)


#: Thresholds that are fractions (of a peak, of ranks, of samples) or scores: 0 to 1.
_UNIT_INTERVAL = ("rise_fraction", "drift_min_r2", "frag_ratio", "frag_sustain",
                  "min_sync_fraction", "confident_score", "likely_score", "suspect_score")
#: Larger than any real threshold (bytes, seconds, samples, z-scores): a typo, not a setting.
_MAX_VALUE = 1e18
#: Durations become int64 nanoseconds beside Unix times (~1.8e18 ns): ~3 years at most.
_MAX_SECONDS = 1e8
#: Thresholds the algorithms divide by (a score relative to them): 0 would be a crash.
_ABOVE_ZERO = ("spike_z", "drift_min_growth_bytes")


def _check_range(name: str, raw: str, value: float) -> None:
    """NaN compares false with everything, so ``rise_fraction=nan`` would silently disable a
    rule and turn a faulted job "healthy"; infinities and out-of-range values do the same."""
    if not math.isfinite(value):
        raise SettingsError(f"threshold {name}={raw!r} must be a finite number")
    if value < 0:
        raise SettingsError(f"threshold {name}={raw!r} must not be negative")
    if name in _UNIT_INTERVAL and value > 1:
        raise SettingsError(f"threshold {name}={raw!r} must be between 0 and 1")
    if value > _MAX_VALUE:
        raise SettingsError(f"threshold {name}={raw!r} is out of range (at most {_MAX_VALUE:g})")
    if name.endswith("_s") and value > _MAX_SECONDS:
        raise SettingsError(f"threshold {name}={raw!r} is out of range (at most "
                            f"{_MAX_SECONDS:g} seconds)")
    if name in _ABOVE_ZERO and value == 0:
        raise SettingsError(f"threshold {name}={raw!r} must be above 0")
    if name == "min_samples" and value < 2:
        raise SettingsError(f"threshold {name}={raw!r} must be at least 2")


def parse_overrides(items: list[str] | None) -> dict[str, str]:
    """``["spike_z=5", "frag_ratio=0.4"]`` → dict; a clear error for anything else."""
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise SettingsError(f"bad --set {item!r}: expected NAME=VALUE, e.g. spike_z=5")
        out[name.strip()] = value.strip()
    return out
