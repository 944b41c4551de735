"""Every environment variable the tracker reads: its own ``STORMOTEL_*`` names, each named here
and nowhere else, beside the OTel specification's ``OTEL_*`` variables it interprets.

A deployment configures a rank through its environment (a pod spec, an sbatch script) as much
as through code, so a reader looking for "what does this variable do" or "which variables are
there" has one module to open; docs/tracker.md lists the same set ("Environment variables", a
test keeps the two in step). The rules are those of an OTel component: an argument given in code
wins, then the variable, then the default. Every ``STORMOTEL_*`` value is validated once, when
the tracker is built (type, finiteness and a plausible range): a bad one is a clear warning and
the default, because a deployment's environment must neither stop the training nor raise later
inside ``step()``; a bad argument given in code is a one-line ``ValueError`` before training
starts. A bad ``OTEL_*`` value the SDK would tolerate is a logged, counted fallback (the caller
counts it). Launcher variables (torchrun, Slurm, Open MPI,
Kubernetes downward API) describe the identity and stay with it (``stormotel.identity``,
names in ``stormotel.schema``).

Importing this module costs nothing: the OTel SDK is imported only by the one function that
needs its instrument classes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import AggregationTemporality

__all__ = ["ARCHIVE_FORMAT", "DEBUG", "JOB_ID", "LINGER_S", "MAX_SECONDS", "PROMETHEUS_LINGER",
           "SAMPLER", "SIM_EPOCH_FILE", "SIM_EPOCH_NS", "SIM_FAULTS", "STALL_FLOOR_S",
           "STALL_MULTIPLE", "STALL_SNAPSHOTS", "VARIABLES", "check_endpoint", "env_choice",
           "env_epoch_ns", "env_flag", "env_number", "epoch_ns_from_text", "export_interval_ms",
           "exporters_selected", "otlp_endpoint", "otlp_protocol", "otlp_signal_enabled",
           "otlp_timeout_s", "prometheus_from_env", "seconds", "temporality_preference",
           "warn_default"]

_V = TypeVar("_V")

# --- stormotel's own variables ---------------------------------------------------------------
JOB_ID = "STORMOTEL_JOB_ID"
SAMPLER = "STORMOTEL_SAMPLER"
ARCHIVE_FORMAT = "STORMOTEL_ARCHIVE_FORMAT"
LINGER_S = "STORMOTEL_LINGER_S"
PROMETHEUS_LINGER = "STORMOTEL_PROMETHEUS_LINGER"
STALL_SNAPSHOTS = "STORMOTEL_STALL_SNAPSHOTS"
STALL_MULTIPLE = "STORMOTEL_STALL_MULTIPLE"
STALL_FLOOR_S = "STORMOTEL_STALL_FLOOR_S"
SIM_FAULTS = "STORMOTEL_SIM_FAULTS"
SIM_EPOCH_NS = "STORMOTEL_SIM_EPOCH_NS"
SIM_EPOCH_FILE = "STORMOTEL_SIM_EPOCH_FILE"
DEBUG = "STORMOTEL_DEBUG"

#: Each variable, the config field (or flag) it stands in for, and what it does.
VARIABLES: dict[str, str] = {
    JOB_ID: "IdentityConfig.job_id: the job id, before the launchers' own",
    SAMPLER: "sampler= when the code names none (else cuda); simulated runs a GPU script "
             "without a GPU",
    ARCHIVE_FORMAT: "ExportConfig.archive_format: compact (default) or lines",
    LINGER_S: "ExportConfig.linger_after_event_s: seconds to wait for a scrape after an event "
              "(default 20; 0: never)",
    PROMETHEUS_LINGER: "ExportConfig.prometheus_linger_s: seconds a clean stop waits for one "
                       "last scrape (default 0)",
    STALL_SNAPSHOTS: "StallConfig.enabled: 0/false/no/off turns stack snapshots off",
    STALL_MULTIPLE: "StallConfig.multiple: deadline = this x the median step interval",
    STALL_FLOOR_S: "StallConfig.floor_s: the deadline is never below this many seconds",
    SIM_FAULTS: "SamplingConfig.faults: the simulated device's fault spec",
    SIM_EPOCH_NS: "the simulated device's clock origin, shared by every rank",
    SIM_EPOCH_FILE: "a file that will hold the simulated clock's origin (ns, as "
                    "STORMOTEL_SIM_EPOCH_NS), written once every rank has started: the faults "
                    "wait for it",
    DEBUG: "stormotel CLI: 1 prints the traceback of an error",
}


#: The longest wait any setting may ask for (a day): far beyond any launcher's grace period
#: or stall deadline, far below what the platform's timers overflow on (faulthandler and
#: ``threading`` refuse timeouts near 2**63 ns; ``1e10`` s raised ``OverflowError`` inside
#: ``tracker.step()``).
MAX_SECONDS = 86_400.0

def warn_default(var: str, raw: str, expected: str, default: object) -> None:
    """A deployment's bad ``STORMOTEL_*`` value: one clear warning, then the default. The
    variable comes from a pod spec or an sbatch script the training code does not control,
    so it must neither stop the training nor fail later inside ``step()``."""
    import logging  # only when a value is bad: a files-only analyze run never loads logging

    shown = raw if len(raw) <= 60 else raw[:57] + "..."
    logging.getLogger("stormotel").warning(
        "stormotel: %s=%r is not %s; using the default (%s)", var, shown, expected, default)


def env_number(env: Mapping[str, str], var: str, default: float, low: float, high: float,
               *, low_open: bool = False) -> float:
    """``var`` as a finite number in ``[low, high]`` (``(low, high]`` with ``low_open``),
    else ``default`` with :func:`warn_default`. Unset or blank: the default, silently."""
    bracket = "(" if low_open else "["
    value = _env_value(env, var, float,
                       lambda v: (v > low if low_open else v >= low) and v <= high,  # NaN: no
                       f"a number in {bracket}{low:g}, {high:g}]", f"{default:g}")
    return default if value is None else value


def _env_value(env: Mapping[str, str], var: str, parse: Callable[[str], _V],
               ok: Callable[[_V], bool], expected: str, default_text: str) -> _V | None:
    """``var`` parsed, when it parses and is ``ok``; unset or blank: None, silently; anything
    else: None after :func:`warn_default` (saying ``expected`` and ``default_text``)."""
    raw = env.get(var, "").strip()
    if not raw:
        return None
    try:
        value: _V | None = parse(raw)
    except ValueError:
        value = None
    if value is None or not ok(value):
        warn_default(var, raw, expected, default_text)
        return None
    return value


def seconds(value: float | None, name: str, env: Mapping[str, str], var: str,
            default: float) -> float:
    """A number of seconds in [0, :data:`MAX_SECONDS`]: the argument (``name``; a bad one is
    a one-line ``ValueError``: the code is wrong), else ``var`` (a bad one is a warning and
    the default), else ``default``."""
    if value is None:
        return env_number(env, var, default, 0.0, MAX_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"{name}={value!r} must be a number of seconds in [0, {MAX_SECONDS:g}]")
    return float(value)


def env_choice(env: Mapping[str, str], var: str, choices: tuple[str, ...]) -> str | None:
    """``var`` when it is one of ``choices``; unset: None; anything else: a warning and None
    (the caller's default)."""
    raw = env.get(var, "").strip()
    if not raw:
        return None
    if raw not in choices:
        warn_default(var, raw, "one of " + ", ".join(choices), "unset")
        return None
    return raw


def env_flag(env: Mapping[str, str], var: str, default: bool) -> bool:
    """A yes/no variable (1/true/yes/on, 0/false/no/off); anything else: a warning and the
    default."""
    raw = env.get(var, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    warn_default(var, raw, "one of 1/true/yes/on, 0/false/no/off", "on" if default else "off")
    return default


#: The epoch a simulated device may be given: from 1970 to 2262 (an int64 of nanoseconds).
MAX_EPOCH_NS = 2**63 - 1


def env_epoch_ns(env: Mapping[str, str]) -> int | None:
    """``STORMOTEL_SIM_EPOCH_NS`` as an integer number of nanoseconds since 1970 that fits in
    int64; unset: None; anything else: a warning and None (the device's own clock)."""
    return _env_value(env, SIM_EPOCH_NS, int, lambda v: 0 <= v <= MAX_EPOCH_NS,
                      "an integer number of ns in [0, 2**63)", "own clock")


def epoch_ns_from_text(text: str) -> int | None:
    """An epoch file's content (``STORMOTEL_SIM_EPOCH_FILE``): the same integer number of ns
    ``STORMOTEL_SIM_EPOCH_NS`` holds, or None when it is not one."""
    try:
        value = int(text.strip())
    except ValueError:
        return None
    return value if 0 <= value <= MAX_EPOCH_NS else None


# --- the OTel specification's variables --------------------------------------------------------
OTLP_PROTOCOLS = ("grpc", "http/protobuf")
DEFAULT_PROTOCOL = "http/protobuf"  # the OTel specification's default
DEFAULT_EXPORT_INTERVAL_MS = 10_000.0
DEFAULT_OTLP_TIMEOUT_S = 5.0  # the SDK's 10 s with retries would hold shutdown after training
SIGNAL_PATH = {"metrics": "/v1/metrics", "traces": "/v1/traces"}


def exporters_selected(signal: str, env: Mapping[str, str]) -> set[str]:
    """``OTEL_METRICS_EXPORTER`` / ``OTEL_TRACES_EXPORTER`` as a set (default ``{"otlp"}``)."""
    raw = env.get(f"OTEL_{signal.upper()}_EXPORTER", "").strip().lower()
    return {part.strip() for part in raw.split(",") if part.strip()} if raw else {"otlp"}


def prometheus_from_env(env: Mapping[str, str]) -> tuple[int, str | None] | None:
    """``OTEL_METRICS_EXPORTER=prometheus``: (``OTEL_EXPORTER_PROMETHEUS_PORT``, default 9464;
    ``OTEL_EXPORTER_PROMETHEUS_HOST`` or None), else None. A bad port is a usage error."""
    if "prometheus" not in exporters_selected("metrics", env):
        return None
    raw = env.get("OTEL_EXPORTER_PROMETHEUS_PORT", "9464").strip()
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ValueError(f"OTEL_EXPORTER_PROMETHEUS_PORT={raw!r} is not a port number")
    return port, env.get("OTEL_EXPORTER_PROMETHEUS_HOST")


def otlp_signal_enabled(signal: str, endpoint: str | None, env: Mapping[str, str]) -> bool:
    """OTLP for ``signal`` ("metrics"/"traces"): an endpoint for it (the argument, the generic
    or the per-signal variable) and ``OTEL_<SIGNAL>_EXPORTER`` not ``none``."""
    if not (endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
            or env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")):
        return False
    return "otlp" in exporters_selected(signal, env)


def otlp_protocol(protocol: str | None, env: Mapping[str, str], signal: str = "") -> str:
    """The argument, else the per-signal then the generic ``…_PROTOCOL`` variable, else
    http/protobuf (``http`` is accepted for it); anything else is a ``ValueError``."""
    raw = (protocol
           or (env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL") if signal else None)
           or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or DEFAULT_PROTOCOL).strip()
    proto = "http/protobuf" if raw == "http" else raw
    if proto not in OTLP_PROTOCOLS:
        raise ValueError(f"OTLP protocol {raw!r} is not supported (grpc, http/protobuf)")
    return proto


def otlp_endpoint(endpoint: str | None, protocol: str | None, signal: str,
                  env: Mapping[str, str]) -> str | None:
    """The URL for one signal, as the spec builds it: a per-signal variable is used as is;
    a base (argument or ``OTEL_EXPORTER_OTLP_ENDPOINT``) gets ``/v1/<signal>`` over HTTP."""
    proto = otlp_protocol(protocol, env, signal)
    per_signal = env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    if endpoint is None and per_signal:
        return per_signal.strip()
    base = (endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "").strip()
    if not base:
        return None
    if proto == "grpc":
        return base
    base = base if "://" in base else f"http://{base}"
    path = urlparse(base).path.rstrip("/")
    for known in SIGNAL_PATH.values():  # a full per-signal URL given as the base
        if path.endswith(known):
            base = base.rstrip("/")[: -len(known)]
    return base.rstrip("/") + SIGNAL_PATH[signal]


def validate_otlp(endpoint: str | None, protocol: str | None, env: Mapping[str, str]) -> None:
    """Usage errors before training starts: every protocol and endpoint must be usable."""
    for signal in ("", "metrics", "traces"):
        otlp_protocol(protocol, env, signal)
    if endpoint is not None:
        check_endpoint(endpoint, "otlp_endpoint")
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        if env.get(var):
            check_endpoint(env[var], var)


def check_endpoint(value: str, name: str) -> str:
    """``value`` must be an http(s) URL (or ``host:port``); else a one-line ``ValueError``."""
    text = value.strip()
    parsed = urlparse(text if "://" in text else f"http://{text}")
    try:
        port_ok = parsed.port is None or 0 < parsed.port < 65536
    except ValueError:
        port_ok = False
    if parsed.scheme not in ("http", "https") or not parsed.hostname or not port_ok or \
            any(c.isspace() for c in text):
        raise ValueError(f"{name}={value!r} is not an OTLP endpoint URL (expected e.g. "
                         "http://collector:4318 for http/protobuf or http://collector:4317 "
                         "for grpc)")
    return text


def otlp_timeout_s(timeout_s: float | None, env: Mapping[str, str]) -> float | None:
    """The export timeout: the argument; else None when ``OTEL_EXPORTER_OTLP_TIMEOUT`` is set
    (the exporter reads it); else 5 s."""
    if timeout_s is None and not env.get("OTEL_EXPORTER_OTLP_TIMEOUT"):
        return DEFAULT_OTLP_TIMEOUT_S
    return timeout_s


def export_interval_ms(cfg_seconds: float | None, env: Mapping[str, str]
                       ) -> tuple[float, str | None]:
    """The OTLP metric interval: the argument, else ``OTEL_METRIC_EXPORT_INTERVAL`` (ms), else
    10 s; plus the bad variable value when it had to fall back."""
    if cfg_seconds:
        return cfg_seconds * 1000, None
    raw = env.get("OTEL_METRIC_EXPORT_INTERVAL", "").strip()
    if not raw:
        return DEFAULT_EXPORT_INTERVAL_MS, None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        return DEFAULT_EXPORT_INTERVAL_MS, raw
    return value, None


def temporality_preference(env: Mapping[str, str]
                           ) -> tuple[dict[type, AggregationTemporality], str | None]:
    """``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`` as the exporters' argument, and
    the bad value when it is not one of cumulative/delta/lowmemory (then: cumulative)."""
    from opentelemetry.sdk.metrics import (
        Counter,
        Histogram,
        ObservableCounter,
        ObservableGauge,
        ObservableUpDownCounter,
        UpDownCounter,
    )
    from opentelemetry.sdk.metrics.export import AggregationTemporality

    delta_kinds: dict[str, tuple[Any, ...]] = {
        "delta": (Counter, ObservableCounter, Histogram),
        "lowmemory": (Counter, Histogram),
    }
    raw = env.get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "").strip().lower()
    out: dict[type, AggregationTemporality] = {kind: AggregationTemporality.CUMULATIVE for kind in
           (Counter, UpDownCounter, Histogram, ObservableCounter, ObservableUpDownCounter,
            ObservableGauge)}
    if raw in ("", "cumulative"):
        return out, None
    if raw not in delta_kinds:
        return out, raw
    for kind in delta_kinds[raw]:
        out[kind] = AggregationTemporality.DELTA
    return out, None
