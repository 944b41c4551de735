"""``MemoryTracker``: one background sampling thread per rank, exported as OTel metrics and spans.

The training loop talks to the tracker through a few calls (``start_tracking``, ``step``,
``mark``, ``capture_oom``); everything else happens in a daemon thread that samples at
``sampling_interval``, feeds the ring buffer and the edge detectors, and drives the archive
export. Nothing the tracker does may raise into the training loop once it has started: sampler
errors, exporter outages and full disks are counted (``stormotel.tracker.samples.dropped``,
``stormotel.tracker.export.failures``) and logged once.

The training thread never waits for the device: ``step()``/``mark()`` read the latest sample the
sampling thread took, so a slow or hung sampler (NVML stuck in the driver) cannot slow or hang
training. Real launchers stop ranks with SIGTERM: the tracker flushes on it, then lets the signal
do what it did before. After an event (an OOM not yet scraped, SIGTERM, an uncaught exception) the
stop pushes first and keeps the Prometheus endpoint up until one scrape read the final state,
bounded by ``linger_after_event_s`` (:mod:`stormotel.scrape_watch` sees the scrapes). A forked
child (multiprocessing with fork) inherits a disarmed copy, so its exit never waits on the
parent's HTTP server or exporters. Stopping is bounded
(``shutdown_timeout``) even when a collector hangs.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import json
import logging
import math
import os
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource

from stormotel import environment, schema
from stormotel.config import (
    DEFAULT_ARCHIVE_DIR,
    ExportConfig,
    IdentityConfig,
    SamplingConfig,
    StallConfig,
    ThresholdConfig,
    TrackerConfig,
    gather,
    linger_seconds,
)
from stormotel.edges import LEVELS, FirstRiseDetector, ThresholdMonitor
from stormotel.event_end import ARCHIVE_CLOSE_S, EventEnd
from stormotel.exporters import install_log_once
from stormotel.identity import Identity, resolve_identity
from stormotel.ring import RingBuffer
from stormotel.samplers import SAMPLERS as SAMPLER_NAMES
from stormotel.samplers import Sample, Sampler, make_sampler
from stormotel.samplers.base import span_memory
from stormotel.sigterm import SigtermHandoff
from stormotel.stall_watch import stall_settings
from stormotel.stall_witness import StallWitness
from stormotel.stormlog_api import MemoryWatchdog, StormlogTrackerAPI, stormlog_arguments
from stormotel.stormlog_compat import AlertCallback, StormlogEvents, TrackingEvent
from stormotel.telemetry import RollingPeak, Telemetry, TrackerState
from stormotel.warn_once import WarnOnce

#: where snapshots go when asked for (stall_snapshots=True) without an archive or stall_dir
DEFAULT_STACKS_DIR = "stormotel-stacks"

__all__ = ["DEFAULT_ARCHIVE_DIR", "ExportConfig", "IdentityConfig", "MemoryTracker",
           "MemoryWatchdog", "SamplingConfig", "StallConfig", "ThresholdConfig", "TrackingEvent",
           "is_oom_error", "linger_seconds", "load_estimate"]

log = logging.getLogger("stormotel.tracker")

#: Longest ``start_tracking()`` waits for the first sample (a hung sampler must not hang it).
FIRST_SAMPLE_WAIT_S = 1.0

_LIVE: weakref.WeakSet[MemoryTracker] = weakref.WeakSet()


def _disarm_in_child() -> None:
    """After ``fork()``: the child's copies of live trackers must not stop what the parent owns."""
    for tracker in list(_LIVE):
        with contextlib.suppress(Exception):
            tracker._disarm_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_disarm_in_child)


def _vendor_of(sampler: Sampler) -> str | None:
    """``hw.vendor``: what the sampler says, else what its name or device name implies."""
    vendor = getattr(sampler, "gpu_vendor", None)
    if vendor:
        return str(vendor)
    name = (sampler.gpu_name or "").upper()
    if sampler.name == "nvml" or name.startswith(("NVIDIA", "TESLA", "QUADRO", "GEFORCE")):
        return "NVIDIA"
    if any(word in name for word in ("AMD", "RADEON", "INSTINCT")):
        return "AMD"
    return None


def is_oom_error(exc: BaseException) -> bool:
    """torch.OutOfMemoryError, or any RuntimeError whose text says "out of memory"."""
    torch = sys.modules.get("torch")
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def load_estimate(estimate: int | str | os.PathLike[str] | None) -> int | None:
    """``estimate_bytes``: an int, or a path to a JSON file with ``"peak_bytes"``."""
    if estimate is None:
        return None
    if isinstance(estimate, bool):  # an int to Python, never a size or a path
        raise TypeError(f"estimate_bytes={estimate!r} is neither a byte count nor a path")
    if isinstance(estimate, int):
        if estimate < 0:
            raise ValueError(f"estimate_bytes={estimate} must be >= 0")
        return estimate
    path = Path(estimate)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read the estimate JSON ({e})") from None
    value = data.get("peak_bytes") if isinstance(data, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{path}: 'peak_bytes' must be a non-negative integer, got {value!r}")
    return value


def _ending_badly(exc_type: type[BaseException] | None) -> bool:
    """An exception that ends the work abnormally (not Ctrl-C, not ``sys.exit(0)``)."""
    if exc_type is None or issubclass(exc_type, KeyboardInterrupt | GeneratorExit):
        return False
    return not issubclass(exc_type, SystemExit)


#: threshold level → its edge kind on the edge gauges.
_THRESHOLD_EDGE = {LEVELS[schema.THRESHOLD_WARNING]: schema.EDGE_THRESHOLD_WARNING,
                   LEVELS[schema.THRESHOLD_CRITICAL]: schema.EDGE_THRESHOLD_CRITICAL}


class _SpanPeak:
    """Highest memory seen by the sampling thread while a step/mark span is open."""

    __slots__ = ("peak",)

    def __init__(self, start: int | None) -> None:
        self.peak = start

    def update(self, value: int | None) -> None:
        if value is not None and (self.peak is None or value > self.peak):
            self.peak = value


class MemoryTracker(StormlogTrackerAPI):
    """Track one GPU of one rank. See docs/tracker.md for every parameter.

    ``sampler`` is ``"cuda"``, ``"nvml"``, ``"simulated"`` or any object implementing
    :class:`stormotel.samplers.Sampler`. The rest is configured as an OTel component is, by a
    few frozen objects (:mod:`stormotel.config`): ``identity=IdentityConfig(…)``,
    ``sampling=SamplingConfig(…)``, ``export=ExportConfig(…)`` (archive, OTLP — or the standard
    ``OTEL_*`` variables — and the Prometheus endpoint; with none of them the archive goes to
    ``./stormotel-archive``), ``thresholds=ThresholdConfig(…)`` and ``stall=StallConfig(…)``.
    Every ``STORMOTEL_*`` variable is in :mod:`stormotel.environment`.
    """

    def __init__(self, device: Any = None, sampler: str | Sampler | float | None = None,
                 sampling_interval: float | None = None, *,
                 identity: IdentityConfig | None = None, sampling: SamplingConfig | None = None,
                 export: ExportConfig | None = None,
                 thresholds: ThresholdConfig | Mapping[str, float] | None = None,
                 stall: StallConfig | None = None, env: Mapping[str, str] | None = None,
                 max_events: int = 10_000, enable_alerts: bool = True,
                 enable_oom_flight_recorder: bool = True,
                 oom_dump_dir: str | os.PathLike[str] | None = None, job_id: str | None = None,
                 rank: int | None = None, local_rank: int | None = None,
                 world_size: int | None = None, **options: Any) -> None:
        """Configure; nothing runs until ``start_tracking``. ``device``, ``sampler`` and the
        config objects are the tracker's own; ``sampling_interval``, ``max_events``,
        ``enable_alerts``, ``enable_oom_flight_recorder``, ``oom_dump_dir``, the identity
        keywords and ``**options`` such as ``oom_buffer_size`` are Stormlog's constructor
        arguments (each lands in its object's field), and the flat keywords of earlier releases
        (``archive_dir=``, ``prometheus_port=``…) still work, with a warning."""
        if isinstance(sampler, int | float) and not isinstance(sampler, bool):
            # Stormlog's positional order is (device, sampling_interval, max_events, ...).
            if sampling_interval is not None:
                max_events = int(sampling_interval)
            sampling_interval, sampler = float(sampler), None
        cfg, deprecated, stormlog_options = gather(
            identity, sampling, export, thresholds, stall, options,
            plain={"sampling_interval": sampling_interval, "oom_dump_dir": oom_dump_dir,
                   "job_id": job_id, "rank": rank, "local_rank": local_rank,
                   "world_size": world_size})
        if deprecated:
            warnings.warn(deprecated, DeprecationWarning, stacklevel=2)
        ring_size, dump_max_bytes = stormlog_arguments(
            stormlog_options, cfg.sampling.ring_size, cfg.export.dump_max_bytes)
        self.config = dataclasses.replace(
            cfg, sampling=dataclasses.replace(cfg.sampling, ring_size=ring_size),
            export=dataclasses.replace(cfg.export, dump_max_bytes=dump_max_bytes))
        self._env = env = os.environ if env is None else env
        self._build_sampler(device, sampler, self.config)
        self._configure_export(self.config)
        self._configure_detectors(self.config, max_events, enable_alerts)
        self.enable_oom_flight_recorder = enable_oom_flight_recorder  # accepted for Stormlog
        self._init_runtime()

    def _build_sampler(self, device: Any, sampler: Any,
                       cfg: TrackerConfig) -> None:
        """The identity (validated) and the sampler of this rank."""
        interval = 0.1 if cfg.sampling.interval_s is None else cfg.sampling.interval_s
        if not (isinstance(interval, int | float) and not isinstance(interval, bool)
                and 0 < interval < math.inf):
            raise ValueError(f"sampling_interval={interval!r} must be a positive number "
                             "of seconds")
        self.sampling_interval = float(interval)
        ident = cfg.identity
        identity = resolve_identity(ident.job_id, ident.rank, ident.local_rank,
                                    ident.world_size, ident.host, env=self._env)
        sampler = sampler if sampler is not None else environment.env_choice(
            self._env, environment.SAMPLER, SAMPLER_NAMES) or "cuda"
        if isinstance(sampler, bool):
            raise TypeError(f"sampler={sampler!r} is not a sampler")
        if isinstance(sampler, str):
            if sampler == "simulated" and device is None:
                device = identity.local_rank
            self.sampler: Sampler = make_sampler(sampler, device, rank=identity.rank,
                                                 faults=cfg.sampling.faults,
                                                 **dict(cfg.sampling.sampler_options or {}))
        else:
            self.sampler = sampler
        self.identity: Identity = dataclasses.replace(
            identity, gpu=str(self.sampler.device_index), gpu_uuid=self.sampler.gpu_uuid)

    def _configure_export(self, cfg: TrackerConfig) -> None:
        """Destinations (resolved against the environment), the ring and its dumps, stacks."""
        export = self.export_config = cfg.export.resolve(self._env)
        archive_dir = export.archive_dir
        self.ring = RingBuffer(cfg.sampling.ring_size)
        self.dump_max_bytes = export.dump_max_bytes
        oom_dump_dir = export.oom_dump_dir
        if oom_dump_dir is None:
            base = Path(archive_dir) / self.identity.job_id if archive_dir is not None else \
                Path("stormotel-oom")
            oom_dump_dir = base / "oom"
        self.oom_dump_dir = Path(oom_dump_dir)
        # Snapshots live in the archive (<archive_dir>/<job_id>/stacks); with no archive and no
        # directory they are off unless asked for: a job never litters its working directory.
        st = cfg.stall
        self.stall_config = stall_settings(
            self._env, st.enabled if archive_dir is not None or st.directory is not None
            else bool(st.enabled), st.multiple, st.floor_s, st.directory,
            Path(archive_dir if archive_dir is not None else DEFAULT_STACKS_DIR)
            / self.identity.job_id / schema.STACKS_DIR)
        # The linger for a last scrape comes on top of the final export's own bound (only
        # while a Prometheus endpoint is serving: see ``EventEnd.stop_bound_s``).
        self.shutdown_timeout = export.shutdown_timeout_s + (export.prometheus_linger_s or 0.0)
        self.linger_after_event_s = export.linger_after_event_s or 0.0
        self.handle_sigterm = export.handle_sigterm

    def _configure_detectors(self, cfg: TrackerConfig, max_events: int,
                             enable_alerts: bool) -> None:
        """Thresholds, the first-rise detector, the estimate, Stormlog's event log, the state."""
        th = cfg.thresholds
        self.estimate_bytes = load_estimate(th.estimate_bytes)
        self.thresholds = ThresholdMonitor(dict(th.levels or {}), th.hysteresis_percent)
        self.thresholds.check_order()
        self.stormlog = StormlogEvents(
            job_id=self.identity.job_id, rank=self.identity.rank,
            local_rank=self.identity.local_rank, world_size=self.identity.world_size,
            device_id=self.sampler.device_index, collector=f"stormotel.{self.sampler.name}",
            sampling_interval=self.sampling_interval, max_events=max_events,
            enable_alerts=enable_alerts)
        rearm = None if th.rise_rearm_s is None else max(
            1, math.ceil(float(th.rise_rearm_s) / self.sampling_interval))
        self.first_rise = FirstRiseDetector(th.warmup_samples, th.rise_bytes, rearm)
        self.state = TrackerState(estimate_bytes=self.estimate_bytes,
                                  peak=RollingPeak(cfg.sampling.peak_window_s),
                                  sampling_interval_s=self.sampling_interval)

    def _init_runtime(self) -> None:
        """What start/stop, the sampling thread and the process events share."""
        self.telemetry: Telemetry | None = None
        self._session: trace.Span | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._span_peaks: list[_SpanPeak] = []
        self._peaks_lock = threading.Lock()
        self._warn = WarnOnce(log)
        self._end = EventEnd(self.export_config.shutdown_timeout_s, self.shutdown_timeout,
                             self.linger_after_event_s, self._warn)
        self._stalls = StallWitness(self.stall_config, self.identity, self.state, self._env,
                                    self._warn, self.sampling_interval)
        self._sigterm = SigtermHandoff()
        self._step = 0
        self._lifecycle = threading.RLock()  # SIGTERM may arrive while stopping
        self._observe_lock = threading.Lock()
        self._first_sample = threading.Event()
        self._forked = False
        self._started_mono = 0.0
        #: monotonic time of the latest OOM the tracker saw (its own event or the counter)
        self._oom_mono: float | None = None
        #: capture_oom blocks open now: an OOM inside one is announced by capture_oom (with its
        #: dump), not by the sampling thread that sees the allocator's counter go up first.
        self._capturing = 0
        _LIVE.add(self)

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def attributes(self) -> dict[str, str]:
        """Data-point attributes on every series: the identity labels, ``hw.id`` and the
        ``hw.name``/``hw.model``/``hw.vendor`` the sampler knows."""
        attrs = {**self.identity.labels(),
                 schema.ATTR_HW_ID: self.identity.gpu_uuid or self.identity.gpu}
        if self.sampler.gpu_name:
            attrs[schema.ATTR_HW_NAME] = attrs[schema.ATTR_HW_MODEL] = self.sampler.gpu_name
        if vendor := _vendor_of(self.sampler):
            attrs[schema.ATTR_HW_VENDOR] = vendor
        return attrs

    def resource(self) -> Resource:
        extra = {schema.ATTR_SAMPLER: self.sampler.name}
        return Resource.create(self.identity.resource_attributes(self._env, extra))

    @property
    def archive_files(self) -> tuple[Path, Path] | None:
        """(metrics, traces) archive paths, when the archive destination is on."""
        return None if self.telemetry is None else self.telemetry.archive_files

    @property
    def destinations(self) -> list[str]:
        """Names of the active destinations (archive, otlp, prometheus)."""
        return [] if self.telemetry is None else [d.name for d in self.telemetry.destinations]

    @property
    def prometheus_address(self) -> tuple[str, int] | None:
        return None if self.telemetry is None else self.telemetry.prometheus_address

    def start_tracking(self) -> MemoryTracker:
        with self._lifecycle:
            if self._thread is not None:
                return self
            install_log_once()
            self.telemetry = Telemetry(self.resource(), self.attributes, self.state,
                                       self.export_config, self.identity.job_id,
                                       self.identity.rank, env=self._env)
            self._session = self.telemetry.tracer().start_span(
                schema.SPAN_SESSION, attributes={
                    schema.SPAN_ATTR_SAMPLER: self.sampler.name,
                    schema.SPAN_ATTR_SAMPLING_INTERVAL: self.sampling_interval})
            self._stalls.start(self._edge)
            self._stop.clear()
            self._first_sample.clear()
            self._started_mono = time.monotonic()
            self.stormlog.lifecycle("start", None, "Memory tracking started")
            self._thread = threading.Thread(target=self._run, name="stormotel-sampler",
                                            daemon=True)
            self._thread.start()
            # The thread samples at once; waiting (bounded) gives spans a value from the start.
            self._first_sample.wait(FIRST_SAMPLE_WAIT_S)
            atexit.register(self._stop_at_exit)
            if self.handle_sigterm:
                self._sigterm.install(functools.partial(self.stop_tracking, linger=True))
            return self

    def stop_tracking(self, *, linger: bool | None = None,
                      _uncaught: BaseException | None = None) -> None:
        """Stop sampling, export what is pending (final archive line, spans) and release all.

        Bounded by ``shutdown_timeout`` (default 2 s): a hung sampler or collector loses the
        final export instead of holding the process, and Ctrl-C interrupts the wait.

        After an event — an OOM no scrape has read yet, or ``linger=True`` (the process is
        ending on SIGTERM or an uncaught exception; the tracker passes it itself in those
        cases) — the final state is first pushed through every push destination and the
        Prometheus endpoint stays up until one scrape has read it, at most
        ``linger_after_event_s``. ``linger=False`` never waits; with nothing to report, or no
        Prometheus endpoint, there is no wait. (``_uncaught``: the exception ending the
        interpreter, from the exit handler.)
        """
        with self._lifecycle:
            if self._thread is None:
                return
            self._stop.set()
            self._thread.join(timeout=self._end.final_export_s / 2)
            sampler_stuck = self._thread.is_alive()
            self._thread = None
            atexit.unregister(self._stop_at_exit)
            self._sigterm.restore()
            # a deliberate stop (not SIGTERM, not an uncaught exception) is the rank's progress
            self._stalls.close(progressed=linger is not True and _uncaught is None)
            self._mark_stop_and_sample(sampler_stuck)
            if _uncaught is not None and self._oom_mono is None and is_oom_error(_uncaught):
                # An uncaught OOM no counter showed (e.g. nvml): the OOM event, with its dump.
                with contextlib.suppress(Exception):
                    self._on_oom(_uncaught, "uncaught at exit", tick=False, flush=False)
            self.stormlog.lifecycle("stop", self.state.latest, "Memory tracking stopped")
            lingered = False
            telemetry = self.telemetry
            if linger is not False and (
                    linger or self._end.oom_unscraped(telemetry, self._oom_mono)):
                # After SIGTERM or a failure the final state is what must be read; else the
                # OOM (a scrape of it may be finishing right now: it counts once it is sent).
                after = time.monotonic() if linger or self._oom_mono is None else self._oom_mono
                lingered = self._end.linger(telemetry, after, self._started_mono)
            session, self._session = self._session, None
            sampler = self.sampler
            bound = self._end.stop_bound_s(telemetry, lingered)
            deadline = time.monotonic() + bound
            archived = threading.Event()

            def finish() -> None:
                timeout_ms = int(self._end.final_export_s * 1000)
                try:
                    if session is not None:
                        session.end()
                    if telemetry is not None:
                        # The archive first: whatever the network destinations do, every
                        # sample taken before the stop is on disk.
                        telemetry.close_archive(timeout_millis=timeout_ms)
                        archived.set()
                        telemetry.shutdown(timeout_millis=timeout_ms, linger=not lingered)
                finally:
                    archived.set()
                if not sampler_stuck:
                    with contextlib.suppress(Exception):
                        sampler.close()

            worker = threading.Thread(target=finish, name="stormotel-shutdown", daemon=True)
            worker.start()
            # the archive first, with its own bound (a CPU-starved host took over 2 s to
            # write the last batch: within the stop's bound, that batch was lost)
            archived.wait(max(deadline - time.monotonic(), ARCHIVE_CLOSE_S))
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                self._warn("shutdown", "stormotel: the final %s did not finish within "
                           "%.1f s (collector unreachable?); continuing without it",
                           "export" if archived.is_set() else "archive write", bound)

    def _mark_stop_and_sample(self, sampler_stuck: bool) -> None:
        """The clean-stop edge, then a last sample so the archive ends at the stop time.

        The edge comes first: a ``lines`` archive writes that sample's line at once and no
        other after it, so the edge must be in it (the analyzer tells a rank that stopped from
        one that died by it); the scrape the linger waits for reads it too."""
        if self.telemetry is not None:
            self.telemetry.mark_stopped()
        if sampler_stuck:
            self._warn("stuck", "stormotel: the sampler did not return within %.1f s; "
                       "stopping without a final sample", self._end.final_export_s / 2)
            return
        try:
            self._tick()
        except Exception as e:
            log.debug("stormotel: final sample failed: %s", e)

    # -- the end after an event (pushed, and lingering until scraped: EventEnd) ------------
    def _stop_at_exit(self) -> None:
        """At interpreter exit: an uncaught exception is ending the process (Python leaves it in
        ``sys.last_value`` before the exit handlers run); an uncaught OOM the sampler did not
        see (no allocator counter, e.g. nvml) becomes an OOM event here."""
        exc = getattr(sys, "last_value", None)
        if not (isinstance(exc, BaseException) and _ending_badly(type(exc))):
            self.stop_tracking()
            return
        # The final sample (stop_tracking's, skipped when the sampler hangs) shows the
        # allocator's counter if it has one; only an OOM it did not show becomes an event.
        self.stop_tracking(linger=True, _uncaught=exc)

    # -- process events: fork and SIGTERM -------------------------------------------------
    def _disarm_after_fork(self) -> None:
        """In a forked child: forget the parent's thread, server, exporters and handlers."""
        self._forked = True
        self._stalls.forget_after_fork()  # the C watchdog thread is the parent's
        if self._thread is None:
            return
        self._thread = None
        atexit.unregister(self._stop_at_exit)
        self._session = None
        if self.telemetry is not None:
            self.telemetry.disarm_after_fork()
        self.telemetry = None
        self._sigterm.forget_after_fork()

    def __enter__(self) -> MemoryTracker:
        return self.start_tracking()

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.stop_tracking(linger=_ending_badly(exc_type) or None)

    @property
    def is_tracking(self) -> bool:
        return self._thread is not None

    # -- configuration --------------------------------------------------------------------
    def set_threshold(self, threshold_name: str, value: float) -> None:
        """``set_threshold(schema.THRESHOLD_WARNING, 75.0)``: percent of device memory.

        Stormlog's names work too: ``memory_leak_threshold`` (bytes of growth between samples
        that raise a "large allocation" alert) and ``fragmentation_threshold`` (inactive split /
        reserved). The warning line must stay below the critical one.
        """
        name = threshold_name  # Stormlog's parameter name
        if name in self.stormlog.thresholds:
            self.stormlog.set_threshold(name, value)
            return
        self.thresholds.set_ordered(name, value)

    # -- Stormlog-compatible event API ----------------------------------------------------
    def add_alert_callback(self, callback: AlertCallback) -> None:
        """Call ``callback(TrackingEvent)`` on every alert (warning, critical) — Stormlog API.

        Callbacks run in the sampling thread; an exception in one is logged at debug level."""
        self.stormlog.alert_callbacks.append(callback)

    def remove_alert_callback(self, callback: AlertCallback) -> None:
        if callback in self.stormlog.alert_callbacks:
            self.stormlog.alert_callbacks.remove(callback)

    def get_events(self, event_type: str | None = None, last_n: int | None = None,
                   since: float | None = None) -> list[TrackingEvent]:
        """The in-memory event log (last ``max_events``), filtered as Stormlog's is."""
        events = self.stormlog.snapshot()
        if event_type:
            events = [e for e in events if e.event_type == event_type]
        if since:
            events = [e for e in events if e.timestamp >= since]
        return events[-last_n:] if last_n else events

    def get_alerts(self, last_n: int | None = None) -> list[TrackingEvent]:
        alerts = [e for e in self.stormlog.snapshot() if e.event_type in
                  ("warning", "critical", "error")]
        return alerts[-last_n:] if last_n else alerts

    def clear_events(self) -> None:
        self.stormlog.clear()

    def export_events(self, filename: str | os.PathLike[str], format: str = "csv") -> None:
        """Write the event log as Stormlog v4 telemetry (``format="json"`` or ``"csv"``), the
        files Stormlog's ``export_events`` writes and ``stormotel analyze`` reads."""
        self.stormlog.export(filename, format)

    def set_estimate(self, estimate: int | str | os.PathLike[str] | None) -> None:
        self.estimate_bytes = load_estimate(estimate)
        self.state.estimate_bytes = self.estimate_bytes

    # -- sampling thread ------------------------------------------------------------------
    def _run(self) -> None:
        interval = self.sampling_interval
        try:
            self._tick()  # the first sample at once: start_tracking waits for it (bounded)
        finally:
            self._first_sample.set()
        next_at = time.monotonic() + interval
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            self._tick()
            next_at += interval
            behind = time.monotonic() - next_at
            if behind > interval:  # fell behind (slow sampler or exporter): skip, count
                skipped = int(behind // interval)
                self.state.count_drop(schema.REASON_OVERRUN, skipped)
                next_at += skipped * interval

    def _tick(self) -> None:
        started = time.perf_counter()
        self._stalls.poll()
        try:
            sample = self.sampler.sample()
        except Exception as e:
            self.state.count_drop(schema.REASON_SAMPLER_ERROR)
            self._warn("sampler", "stormotel: %s sampler failed (%s: %s); samples are "
                       "counted as dropped and this is not logged again",
                       self.sampler.name, type(e).__name__, e)
            return
        try:
            with self._observe_lock:  # the training thread may sample too (capture_oom)
                self._observe(sample, time.perf_counter() - started)
        except Exception as e:  # a bug here must not kill the sampling thread
            self.state.count_drop(type(e).__name__.lower())
            self._warn("observe", "stormotel: processing a sample failed (%s: %s)",
                       type(e).__name__, e)

    def _observe(self, sample: Sample, duration_s: float) -> None:
        self.ring.push(sample)
        previous = self.state.latest
        self.state.record(sample, duration_s)
        # How long before this sample an edge it shows may have happened (the real gap: longer
        # than the interval when the sampler ran late).
        gap_s = None if previous is None or sample.timestamp_ns <= previous.timestamp_ns \
            else round((sample.timestamp_ns - previous.timestamp_ns) / 1e9, 6)
        if (sample.num_ooms or 0) > ((previous.num_ooms or 0) if previous is not None else 0):
            # The allocator's own OOM counter went up: an OOM edge even without capture_oom,
            # announced as an event (capture_oom announces its own, with the dump) and pushed
            # at once: the rank usually exits within a second or two.
            self._oom_mono = time.monotonic()
            self.state.record_edge(schema.EDGE_OOM, sample.timestamp_ns, sample.device_used or 0,
                                   gap_s)
            if not self._capturing:
                oom_attrs: dict[str, Any] = {
                    schema.EVENT_ATTR_BYTES: sample.device_used or 0,
                    schema.EVENT_ATTR_CONTEXT: "allocator OOM counter",
                    schema.SPAN_ATTR_SAMPLING_INTERVAL: self.sampling_interval}
                if gap_s is not None:
                    oom_attrs[schema.EVENT_ATTR_SINCE_PREVIOUS] = gap_s
                self._edge(schema.EVENT_OOM, sample.timestamp_ns, oom_attrs)
                self._end.push_soon(self.telemetry)
        memory = span_memory(sample)
        with self._peaks_lock:
            for peak in self._span_peaks:
                peak.update(memory)
        util = sample.utilization
        if util is not None:
            for crossing in self.thresholds.update(util * 100.0):
                self.state.count_crossing(crossing.level)
                self.stormlog.threshold_crossed(crossing.level, crossing.percent, sample)
                self.state.record_edge(_THRESHOLD_EDGE[crossing.level], sample.timestamp_ns,
                                       sample.device_used or 0, gap_s)
                self._edge(schema.EVENT_THRESHOLD, sample.timestamp_ns, {
                    schema.EVENT_ATTR_LEVEL: crossing.level,
                    schema.EVENT_ATTR_PERCENT: round(crossing.percent, 3),
                    schema.EVENT_ATTR_BYTES: sample.device_used or 0,
                    schema.EVENT_ATTR_THRESHOLD: crossing.threshold_percent})
        series = "device_used" if sample.device_used is not None else "reserved"
        rise = self.first_rise.update(sample.timestamp_ns, getattr(sample, series),
                                      sample.device_total)
        if rise is not None:
            self.state.record_edge(schema.EDGE_FIRST_RISE, rise.timestamp_ns, rise.delta, gap_s)
            attrs: dict[str, Any] = {
                schema.EVENT_ATTR_SERIES: series, schema.EVENT_ATTR_BYTES: rise.value,
                schema.EVENT_ATTR_BASELINE: rise.baseline, schema.EVENT_ATTR_DELTA: rise.delta,
                schema.SPAN_ATTR_SAMPLING_INTERVAL: self.sampling_interval}
            if gap_s is not None:
                attrs[schema.EVENT_ATTR_SINCE_PREVIOUS] = gap_s
            self._edge(schema.EVENT_FIRST_RISE, rise.timestamp_ns, attrs)
        self.stormlog.observe(sample)
        if self.telemetry is not None:
            self.telemetry.after_sample()

    # -- spans ----------------------------------------------------------------------------
    def _parent_context(self) -> otel_context.Context | None:
        current = trace.get_current_span()
        if current.is_recording() or self._session is None:
            return None
        return trace.set_span_in_context(self._session)

    def _edge(self, event: str, timestamp_ns: int, attributes: dict[str, Any]) -> None:
        """A zero-length span carrying one event at the exact sample time (exported promptly)."""
        if self.telemetry is None:
            return
        ctx = trace.set_span_in_context(self._session) if self._session is not None else None
        span = self.telemetry.tracer().start_span(schema.SPAN_EDGE, context=ctx,
                                                  start_time=timestamp_ns,
                                                  attributes={schema.SPAN_ATTR_EDGE: event})
        span.add_event(event, attributes, timestamp=timestamp_ns)
        span.end(end_time=timestamp_ns)

    def _read_now(self) -> int | None:
        """The latest sample's memory: never the device, so a slow sampler costs nothing here."""
        return span_memory(self.state.latest)

    @contextlib.contextmanager
    def _memory_span(self, name: str, attributes: dict[str, Any]) -> Iterator[trace.Span]:
        if self.telemetry is None or self._session is None:  # not started, or stopped
            self._warn("not-tracking", "stormotel: %s used while the tracker is not "
                       "tracking (call start_tracking() first); no span recorded", name)
            yield trace.INVALID_SPAN
            return
        start = self._read_now()
        peak = _SpanPeak(start)
        with self._peaks_lock:
            self._span_peaks.append(peak)
        if start is not None:
            attributes[schema.SPAN_ATTR_MEM_START] = start
        tracer = self.telemetry.tracer()
        with tracer.start_as_current_span(name, context=self._parent_context(),
                                          attributes=attributes) as span:
            try:
                yield span
            except BaseException:
                self._stalls.pause()
                raise
            finally:
                end = self._read_now()
                peak.update(end)
                with self._peaks_lock:
                    self._span_peaks.remove(peak)
                if end is not None:
                    span.set_attribute(schema.SPAN_ATTR_MEM_END, end)
                if peak.peak is not None:
                    span.set_attribute(schema.SPAN_ATTR_MEM_PEAK, peak.peak)

    def step(self, n: int | None = None) -> contextlib.AbstractContextManager[trace.Span]:
        """A training-step span with memory at start/end and the peak within the step."""
        self._step = self._step + 1 if n is None else int(n)
        self.state.step = self._step
        self._stalls.progress(step=self._step)
        return self._memory_span(schema.SPAN_STEP, {schema.SPAN_ATTR_STEP: self._step,
                                                    schema.SPAN_ATTR_KIND: schema.SPAN_KIND_STEP})

    def mark(self, name: str) -> contextlib.AbstractContextManager[trace.Span]:
        """A named phase, e.g. ``tracker.mark("nccl:all_reduce")`` around a collective; the span
        is named by the mark itself (attribute ``stormotel.span.kind="mark"`` says what it is)."""
        text = str(name) or schema.SPAN_MARK
        self._stalls.progress(mark=text)
        return self._memory_span(text, {schema.SPAN_ATTR_MARK: text,
                                        schema.SPAN_ATTR_KIND: schema.SPAN_KIND_MARK})

    # -- OOM flight recorder --------------------------------------------------------------
    def dump(self, path: str | os.PathLike[str] | None = None, reason: str = "requested",
             extra: Mapping[str, Any] | None = None) -> Path:
        """Write the ring buffer (atomic, bounded) and return its path."""
        if path is None:
            path = self.oom_dump_dir / (f"{schema.ARCHIVE_RANK_PREFIX}{self.identity.rank}-"
                                        f"{reason}-{time.time_ns()}.ring.jsonl")
        header = {"reason": reason, **self.identity.labels(),
                  schema.ATTR_SAMPLER: self.sampler.name,
                  "sampling_interval_s": self.sampling_interval, **(extra or {})}
        return self.ring.dump(path, header, max_bytes=self.dump_max_bytes)

    @contextlib.contextmanager
    def capture_oom(self, context: str = "",
                    metadata: Mapping[str, Any] | None = None) -> Iterator[None]:
        """On an out-of-memory error: dump the ring buffer, emit an OOM span event pointing at
        the dump, flush, and re-raise. Other exceptions pass through untouched. ``metadata``
        (Stormlog's argument) goes into the Stormlog ``error`` event of the OOM."""
        with self._peaks_lock:
            self._capturing += 1
        try:
            yield
        except BaseException as exc:
            if is_oom_error(exc):
                self._on_oom(exc, context)
                self._stormlog_oom_event(exc, context, metadata)
            raise
        finally:
            with self._peaks_lock:
                self._capturing -= 1

    def _on_oom(self, exc: BaseException, context: str, tick: bool = True,
                flush: bool = True) -> None:
        """The OOM event with its ring dump; ``tick``/``flush``: sample and push now (at exit the
        final sample was taken and the linger pushes, bounded, so neither is done twice)."""
        with self.state.lock:
            self.state.caught_ooms += 1
        self._oom_mono = time.monotonic()
        if tick:
            with contextlib.suppress(Exception):
                self._tick()
        dump_path: str = ""
        try:
            dump_path = str(self.dump(reason="oom", extra={"context": context,
                                                           "error": str(exc)[:500]}))
        except Exception as e:
            self._warn("dump", "stormotel: OOM dump to %s failed (%s)",
                       self.oom_dump_dir, e)
        now_ns = time.time_ns()
        self.state.record_edge(schema.EDGE_OOM, now_ns, span_memory(self.state.latest) or 0)
        try:
            self._edge(schema.EVENT_OOM, now_ns, {
                schema.EVENT_ATTR_CONTEXT: context, schema.EVENT_ATTR_DUMP_PATH: dump_path,
                schema.EVENT_ATTR_MESSAGE: str(exc)[:500],
                schema.EVENT_ATTR_BYTES: span_memory(self.state.latest) or 0})
            if self.telemetry is not None and flush:
                self.telemetry.flush()
        except Exception as e:
            self._warn("oom-event", "stormotel: OOM event export failed (%s)", e)
        self.last_oom_dump = dump_path or None

    last_oom_dump: str | None = None

    # -- introspection --------------------------------------------------------------------
    @property
    def stats(self) -> dict[str, Any]:
        """Counters of the tracker itself (the self-telemetry series, as plain numbers);
        JSON-serialisable: export failures are keyed ``"<destination>/<reason>"``."""
        with self.state.lock:
            return {"samples": self.state.samples, "dropped": dict(self.state.dropped),
                    "export_failures": {f"{dest}/{reason}": n for (dest, reason), n
                                        in self.state.export_failures.items()},
                    "export_successes": dict(self.state.export_successes),
                    "threshold_crossings": dict(self.state.crossings),
                    "caught_ooms": self.state.caught_ooms,
                    "first_rise_ns": None if self.first_rise.fired is None else
                    self.first_rise.fired.timestamp_ns}
