"""The tracker's configuration, as an OTel component takes it: a few typed, frozen objects.

``MemoryTracker(sampler=…, identity=IdentityConfig(…), sampling=SamplingConfig(…),
export=ExportConfig(…), thresholds=ThresholdConfig(…), stall=StallConfig(…))``: each object
groups what belongs together (who this rank is, how it samples, where telemetry goes, which
edges it detects, when it snapshots stacks) and can be built once and shared by a launcher's
ranks. ``None`` in a field means "not given here": the environment (:mod:`stormotel.environment`)
and then the default decide, when the tracker resolves the object (``ExportConfig.resolve``).

The flat keyword form of earlier releases (``MemoryTracker(archive_dir=…, prometheus_port=…)``)
still works for one release: :func:`from_keywords` maps each keyword onto its field and the
tracker warns (``DeprecationWarning``) naming the object to use. Stormlog's own constructor
arguments (``sampling_interval``, ``max_events``, ``enable_alerts``, ``oom_dump_dir``,
``job_id``/``rank``/``local_rank``/``world_size``, ``oom_buffer_size``…) are not deprecated: a
script written for Stormlog runs unchanged, and each lands in its object's field.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stormotel import environment, schema

__all__ = ["DEFAULT_ARCHIVE_DIR", "LEGACY_KEYWORDS", "PLAIN_ARGUMENTS", "ExportConfig",
           "IdentityConfig", "SamplingConfig", "StallConfig", "ThresholdConfig", "TrackerConfig",
           "from_keywords", "gather", "linger_seconds", "merge_argument"]

#: Where the archive goes when no destination at all is configured (the embedded default).
DEFAULT_ARCHIVE_DIR = "stormotel-archive"


def _positive(value: float | None, name: str) -> None:
    if value is not None and not (isinstance(value, int | float) and not isinstance(value, bool)
                                  and 0 < value < math.inf):
        raise ValueError(f"{name}={value!r} must be a positive number of seconds")


@dataclass(frozen=True)
class IdentityConfig:
    """Who this rank is; a ``None`` field comes from the launcher's environment
    (docs/tracker.md "Identity" gives the order), validated when the tracker is built."""

    job_id: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    host: str | None = None


@dataclass(frozen=True)
class SamplingConfig:
    """How the rank is sampled and what is kept in memory.

    ``interval_s``: seconds between samples (the ``sampling_interval`` argument says the same;
    default 0.1). ``ring_size``: samples the flight recorder keeps for an OOM dump.
    ``peak_window_s``: the rolling peak gauges' window. ``faults`` / ``sampler_options``: the
    simulated device's fault spec and options (size, UUID) for a sampler built by name."""

    interval_s: float | None = None
    ring_size: int = 6000
    peak_window_s: float = schema.PEAK_WINDOW_S
    faults: Any = None
    sampler_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ThresholdConfig:
    """The edges detected in-process: threshold crossings (``levels``: ``warning`` /
    ``critical`` in percent of device memory, ``hysteresis_percent`` to re-arm), the rank's
    first qualifying rise (``rise_bytes``, ``warmup_samples``, ``rise_rearm_s``) and the
    estimate the actual peak is compared with (``estimate_bytes``: bytes or a JSON file)."""

    levels: Mapping[str, float] = field(default_factory=dict)
    hysteresis_percent: float = 2.0
    rise_bytes: int | None = None
    warmup_samples: int = 20
    rise_rearm_s: float | None = 60.0
    estimate_bytes: int | str | os.PathLike[str] | None = None


@dataclass(frozen=True)
class StallConfig:
    """Stack snapshots when the rank stops making progress (docs/tracker.md "Stack snapshots");
    ``None``: ``STORMOTEL_STALL_*``, then the defaults (on where there is an archive)."""

    enabled: bool | None = None
    multiple: float | None = None
    floor_s: float | None = None
    directory: str | os.PathLike[str] | None = None


@dataclass(frozen=True)
class ExportConfig:
    """Where telemetry goes and how the end is reported. ``None`` means off, except OTLP,
    which also turns on when the standard ``OTEL_EXPORTER_OTLP_[METRICS_|TRACES_]ENDPOINT``
    variables are set; with no destination at all the archive goes to ``./stormotel-archive``.

    ``archive_interval_s``: the compact archive's batch length (default 1 s), or for
    ``archive_format="lines"`` one line per interval. ``prometheus_linger_s``: after a clean
    stop, keep the endpoint up until it has been scraped once more (at most this long; default
    0). ``linger_after_event_s``: the same after an OOM, SIGTERM or a failure (default 20 s).
    ``oom_dump_dir`` / ``dump_max_bytes``: where and how large the flight recorder's dumps are.
    ``shutdown_timeout_s`` bounds the final export; ``handle_sigterm`` flushes on SIGTERM."""

    archive_dir: str | os.PathLike[str] | None = None
    archive_interval_s: float | None = None
    archive_format: str | None = None
    otlp_endpoint: str | None = None
    otlp_protocol: str | None = None  # grpc | http/protobuf (http accepted); env, then http
    otlp_interval_s: float | None = None  # OTEL_METRIC_EXPORT_INTERVAL, then 10 s
    otlp_timeout_s: float | None = None  # OTEL_EXPORTER_OTLP_TIMEOUT, then 5 s
    prometheus_port: int | None = None
    prometheus_addr: str | None = None  # OTEL_EXPORTER_PROMETHEUS_HOST, then 0.0.0.0
    prometheus_linger_s: float | None = None
    linger_after_event_s: float | None = None
    oom_dump_dir: str | os.PathLike[str] | None = None
    dump_max_bytes: int = 16 * 2**20
    shutdown_timeout_s: float = 2.0
    handle_sigterm: bool = True

    # -- the OTLP destination, read through the OTEL_* variables ----------------------------
    def signal_enabled(self, signal: str, env: Mapping[str, str]) -> bool:
        return environment.otlp_signal_enabled(signal, self.otlp_endpoint, env)

    def otlp_enabled(self, env: Mapping[str, str]) -> bool:
        return self.signal_enabled("metrics", env) or self.signal_enabled("traces", env)

    def protocol(self, env: Mapping[str, str], signal: str = "") -> str:
        return environment.otlp_protocol(self.otlp_protocol, env, signal)

    def endpoint(self, signal: str, env: Mapping[str, str]) -> str | None:
        return environment.otlp_endpoint(self.otlp_endpoint, self.otlp_protocol, signal, env)

    def validate(self, env: Mapping[str, str]) -> None:
        environment.validate_otlp(self.otlp_endpoint, self.otlp_protocol, env)

    def resolve(self, env: Mapping[str, str]) -> ExportConfig:
        """Every ``None`` the environment or a default decides, decided; a bad value (ours or
        an OTLP endpoint/protocol) is a one-line ``ValueError`` before training starts."""
        port, addr = self.prometheus_port, self.prometheus_addr
        if port is None and (from_env := environment.prometheus_from_env(env)) is not None:
            port, addr = from_env[0], addr or from_env[1]
        archive_dir = self.archive_dir
        if archive_dir is None and self.otlp_endpoint is None and port is None and \
                not self.otlp_enabled(env):
            archive_dir = DEFAULT_ARCHIVE_DIR
        fmt = self.archive_format or environment.env_choice(
            env, environment.ARCHIVE_FORMAT, schema.ARCHIVE_FORMATS) or \
            schema.ARCHIVE_FORMAT_DEFAULT
        if fmt not in schema.ARCHIVE_FORMATS:
            raise ValueError(f"archive_format={fmt!r} must be one of "
                             f"{', '.join(schema.ARCHIVE_FORMATS)}")
        _positive(self.archive_interval_s, "archive_interval")
        _positive(self.shutdown_timeout_s, "shutdown_timeout")
        out = dataclasses.replace(
            self, archive_dir=archive_dir, archive_format=fmt, prometheus_port=port,
            prometheus_addr=addr or "0.0.0.0",
            prometheus_linger_s=environment.seconds(
                self.prometheus_linger_s, "prometheus_linger", env,
                environment.PROMETHEUS_LINGER, 0.0),
            linger_after_event_s=linger_seconds(self.linger_after_event_s, env))
        out.validate(env)
        return out


def linger_seconds(value: float | None, env: Mapping[str, str]) -> float:
    """``linger_after_event_s``: the argument, else ``STORMOTEL_LINGER_S``, else the default
    (20 s); 0 turns the linger off. A bad value is a usage error before training starts."""
    return environment.seconds(value, "linger_after_event_s", env, environment.LINGER_S,
                               schema.LINGER_AFTER_EVENT_S_DEFAULT)


#: The flat keywords of earlier releases → (config object, its field). Kept for one release.
LEGACY_KEYWORDS: dict[str, tuple[type, str]] = {
    "host": (IdentityConfig, "host"),
    "ring_size": (SamplingConfig, "ring_size"), "peak_window": (SamplingConfig, "peak_window_s"),
    "faults": (SamplingConfig, "faults"), "sampler_options": (SamplingConfig, "sampler_options"),
    "archive_dir": (ExportConfig, "archive_dir"),
    "archive_interval": (ExportConfig, "archive_interval_s"),
    "archive_format": (ExportConfig, "archive_format"),
    "otlp_endpoint": (ExportConfig, "otlp_endpoint"),
    "otlp_protocol": (ExportConfig, "otlp_protocol"),
    "otlp_interval": (ExportConfig, "otlp_interval_s"),
    "otlp_timeout": (ExportConfig, "otlp_timeout_s"),
    "prometheus_port": (ExportConfig, "prometheus_port"),
    "prometheus_addr": (ExportConfig, "prometheus_addr"),
    "prometheus_linger": (ExportConfig, "prometheus_linger_s"),
    "linger_after_event_s": (ExportConfig, "linger_after_event_s"),
    "dump_max_bytes": (ExportConfig, "dump_max_bytes"),
    "shutdown_timeout": (ExportConfig, "shutdown_timeout_s"),
    "handle_sigterm": (ExportConfig, "handle_sigterm"),
    "thresholds": (ThresholdConfig, "levels"),
    "hysteresis_percent": (ThresholdConfig, "hysteresis_percent"),
    "rise_bytes": (ThresholdConfig, "rise_bytes"),
    "warmup_samples": (ThresholdConfig, "warmup_samples"),
    "rise_rearm_s": (ThresholdConfig, "rise_rearm_s"),
    "estimate_bytes": (ThresholdConfig, "estimate_bytes"),
    "stall_snapshots": (StallConfig, "enabled"), "stall_multiple": (StallConfig, "multiple"),
    "stall_floor_s": (StallConfig, "floor_s"), "stall_dir": (StallConfig, "directory"),
}

#: MemoryTracker's parameter for each config object.
PARAMETER_OF: dict[type, str] = {IdentityConfig: "identity", SamplingConfig: "sampling",
                                 ExportConfig: "export", ThresholdConfig: "thresholds",
                                 StallConfig: "stall"}


def from_keywords(given: Mapping[type, Any], keywords: Mapping[str, Any]
                  ) -> tuple[dict[type, Any], str]:
    """Fold legacy ``keywords`` into the config objects (``given``: those passed as objects,
    by type), and the deprecation message naming what to write instead ("" when none was used).

    A keyword for an object that was also passed whole is a ``TypeError``: which one wins would
    be a guess."""
    fields: dict[type, dict[str, Any]] = {}
    for name, value in keywords.items():
        kind, attr = LEGACY_KEYWORDS[name]
        if given.get(kind) is not None:
            raise TypeError(f"MemoryTracker() got both {PARAMETER_OF[kind]}="
                            f"{kind.__name__}(...) and {name}=: pass {attr}= inside "
                            f"{kind.__name__}")
        fields.setdefault(kind, {})[attr] = value
    out = dict(given)
    for kind, values in fields.items():
        out[kind] = kind(**values)
    if not fields:
        return out, ""
    advice = ", ".join(
        f"{PARAMETER_OF[kind]}={kind.__name__}("
        + ", ".join(f"{attr}=…" for attr in values) + ")"
        for kind, values in fields.items())
    used = ", ".join(f"{k}=…" for k in keywords)
    names = ", ".join(sorted(kind.__name__ for kind in fields))
    return out, (f"MemoryTracker({used}) is deprecated and will be removed in the next "
                 f"release; pass {advice} (from stormotel import {names})")


@dataclass(frozen=True)
class TrackerConfig:
    """The five objects one tracker is built from (``gather`` fills in the missing ones)."""

    identity: IdentityConfig = field(default_factory=IdentityConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
    thresholds: ThresholdConfig = field(default_factory=ThresholdConfig)
    stall: StallConfig = field(default_factory=StallConfig)


#: Stormlog's plain constructor arguments that are fields of an object → (object, field).
PLAIN_ARGUMENTS: dict[str, tuple[type, str]] = {
    "sampling_interval": (SamplingConfig, "interval_s"),
    "oom_dump_dir": (ExportConfig, "oom_dump_dir"),
    **{name: (IdentityConfig, name) for name in ("job_id", "rank", "local_rank", "world_size")},
}


def gather(identity: IdentityConfig | None, sampling: SamplingConfig | None,
           export: ExportConfig | None, thresholds: ThresholdConfig | Mapping[str, float] | None,
           stall: StallConfig | None, options: Mapping[str, Any],
           plain: Mapping[str, Any] | None = None
           ) -> tuple[TrackerConfig, str, dict[str, Any]]:
    """The tracker's arguments → (its config, the deprecation message or "", the keywords that
    are neither config objects nor legacy keywords: Stormlog's, checked by the caller).

    ``thresholds`` given as a mapping of levels is the legacy form of
    ``ThresholdConfig(levels=…)``; ``plain``: Stormlog's arguments of :data:`PLAIN_ARGUMENTS`
    (``None``: not given), each set in its object's field."""
    legacy = {k: v for k, v in options.items() if k in LEGACY_KEYWORDS}
    rest = {k: v for k, v in options.items() if k not in LEGACY_KEYWORDS}
    if thresholds is not None and not isinstance(thresholds, ThresholdConfig):
        if not isinstance(thresholds, Mapping):
            raise TypeError(f"thresholds={thresholds!r} is neither a ThresholdConfig nor a "
                            "mapping of levels")
        legacy = {"thresholds": thresholds, **legacy}
        thresholds = None
    given: dict[type, Any] = {IdentityConfig: identity, SamplingConfig: sampling,
                              ExportConfig: export, ThresholdConfig: thresholds,
                              StallConfig: stall}
    for kind, value in given.items():
        if value is not None and not isinstance(value, kind):
            raise TypeError(f"{PARAMETER_OF[kind]}= takes a {kind.__name__}, got "
                            f"{type(value).__name__}")
    objects, message = from_keywords(given, legacy)
    made = {PARAMETER_OF[kind]: value for kind, value in objects.items() if value is not None}
    cfg = TrackerConfig(**made)
    for name, value in (plain or {}).items():
        kind, attr = PLAIN_ARGUMENTS[name]
        parameter = PARAMETER_OF[kind]
        cfg = dataclasses.replace(cfg, **{parameter: merge_argument(
            getattr(cfg, parameter), attr, value, name)})
    return cfg, message, rest


def merge_argument(config: Any, attr: str, value: Any, argument: str) -> Any:
    """``config`` with ``attr`` set from a plain argument of the same meaning (Stormlog's
    ``sampling_interval``, ``oom_dump_dir``); set in both is a ``TypeError``."""
    if value is None:
        return config
    if getattr(config, attr) is not None:
        raise TypeError(f"MemoryTracker() got both {argument}= and "
                        f"{type(config).__name__}({attr}=...)")
    return dataclasses.replace(config, **{attr: value})
