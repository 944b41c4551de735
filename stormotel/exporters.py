"""Exporter guards: the official OTel exporters, wrapped so that failures are counted, not raised.

A tracker must never take a training job down. Each wrapper builds its inner exporter lazily
(so an archive directory that cannot be created is retried later instead of failing start-up),
turns every failure into ``FailureSink(destination, reason)`` — which feeds the
``stormotel.tracker.export.failures`` counter — and logs the first failure per destination once.
The exporters' own log lines are de-duplicated by :class:`LogOnce`, which the tracker installs.
"""

from __future__ import annotations

import collections
import errno
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["EXPORTER_LOGGERS", "ArchiveStream", "FailureSink", "GuardedMetricExporter",
           "GuardedSpanExporter", "LogOnce", "install_log_once", "last_exporter_log"]

log = logging.getLogger("stormotel.exporters")

#: Loggers of the OTel SDK and exporters that log on every failed export.
EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.json.file.metric_exporter",
    "opentelemetry.exporter.otlp.json.file.trace_exporter",
    "opentelemetry.sdk.metrics._internal.export",
    "opentelemetry.sdk.trace.export",
    "opentelemetry.sdk._shared_internal",
)


class FailureSink(Protocol):
    def __call__(self, destination: str, reason: str) -> None: ...


#: messages kept per exporter logger for :func:`last_exporter_log`
LAST_MESSAGES = 4


class LogOnce(logging.Filter):
    """Let the first record per (logger, message template) through; drop the repeats."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self.suppressed = 0
        #: The latest messages of each logger, repeats included (read for a failure's cause:
        #: a few, since a final flush's "connection reset" must not hide the reply that
        #: showed the cause).
        self.last: dict[str, collections.deque[str]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        with self._lock:
            try:
                text = record.getMessage()[:2000]
            except Exception:  # a bad format string in someone's log call
                text = str(record.msg)[:2000]
            self.last.setdefault(record.name, collections.deque(maxlen=LAST_MESSAGES)
                                 ).append(text)
            if key in self._seen:
                self.suppressed += 1
                return False
            self._seen.add(key)
        return True


_LOG_ONCE = LogOnce()


def last_exporter_log() -> str:
    """The exporter loggers' latest messages, joined (for :func:`otlp_hint.likely_cause`)."""
    with _LOG_ONCE._lock:
        return "\n".join(m for messages in _LOG_ONCE.last.values() for m in messages)


def install_log_once() -> LogOnce:
    """Attach the process-wide :class:`LogOnce` filter to the exporter loggers (idempotent)."""
    for name in EXPORTER_LOGGERS:
        logger = logging.getLogger(name)
        if _LOG_ONCE not in logger.filters:
            logger.addFilter(_LOG_ONCE)
    return _LOG_ONCE


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return errno.errorcode.get(exc.errno, "oserror").lower()
    return type(exc).__name__.lower()


class _Guard:
    """Shared lazy-build / count / log-once logic of the two guarded exporters."""

    def __init__(self, destination: str, factory: Callable[[], Any], on_failure: FailureSink,
                 retry_s: float = 5.0, warned: set[str] | None = None,
                 on_success: Callable[[str], None] | None = None,
                 hint: Callable[[], str] | None = None) -> None:
        self.destination = destination
        self._on_success = on_success
        self._hint = hint
        self._warned_destinations = set() if warned is None else warned  # shared per tracker
        self._factory = factory
        self._on_failure = on_failure
        self._retry_s = retry_s
        self._inner: Any = None
        self._next_try = 0.0
        self._lock = threading.Lock()
        self.failures = 0
        self.successes = 0
        self.last_reason = "unavailable"

    def fail(self, reason: str, detail: str = "") -> None:
        self.failures += 1
        self.last_reason = reason
        self._on_failure(self.destination, reason)
        if self.destination not in self._warned_destinations:
            self._warned_destinations.add(self.destination)
            hint = ""
            if self._hint is not None:
                try:
                    hint = self._hint()
                except Exception:  # a hint is advice; never raise into the tracker
                    hint = ""
            log.warning("stormotel: %s export failing (%s%s)%s; further failures are counted in "
                        "stormotel.tracker.export.failures and not logged again",
                        self.destination, reason, f": {detail}" if detail else "",
                        f"; {hint}" if hint else "")

    def succeed(self) -> None:
        self.successes += 1
        if self._on_success is not None:
            self._on_success(self.destination)

    def inner(self) -> Any:
        """The exporter, built on first use. While it cannot be built (retried every
        ``retry_s``) every export it would have made is counted as lost, with the last reason,
        so the counter equals the lines/batches lost rather than the retries."""
        with self._lock:
            if self._inner is None:
                if time.monotonic() < self._next_try:
                    self.fail(self.last_reason)
                    return None
                try:
                    self._inner = self._factory()
                except Exception as e:  # never raise into the tracker
                    self._next_try = time.monotonic() + self._retry_s
                    self.fail(_reason(e), str(e))
                    return None
            return self._inner


class GuardedMetricExporter(MetricExporter):
    """A metric exporter that counts failures instead of raising them."""

    def __init__(self, destination: str, factory: Callable[[], MetricExporter],
                 on_failure: FailureSink, retry_s: float = 5.0,
                 warned: set[str] | None = None,
                 preferred_temporality: dict[type, AggregationTemporality] | None = None,
                 on_success: Callable[[str], None] | None = None,
                 hint: Callable[[], str] | None = None) -> None:
        # The reader asks the exporter it is given (this wrapper) for the temporality, so the
        # inner exporter's preference must be declared here too.
        super().__init__(preferred_temporality=preferred_temporality)
        self._guard = _Guard(destination, factory, on_failure, retry_s, warned, on_success,
                             hint)

    @property
    def failures(self) -> int:
        return self._guard.failures

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        inner = self._guard.inner()
        if inner is None:
            return MetricExportResult.FAILURE
        try:
            result = inner.export(metrics_data, timeout_millis=timeout_millis)
        except Exception as e:
            self._guard.fail(_reason(e), str(e))
            return MetricExportResult.FAILURE
        if result is MetricExportResult.SUCCESS:
            self._guard.succeed()
        else:
            self._guard.fail("export_failed")
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        inner = self._guard._inner
        return True if inner is None else bool(inner.force_flush(timeout_millis))

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        inner = self._guard._inner
        if inner is not None:
            try:
                inner.shutdown(timeout_millis=timeout_millis)
            except Exception as e:
                log.debug("stormotel: %s exporter shutdown failed: %s", self._guard.destination, e)


class GuardedSpanExporter(SpanExporter):
    """A span exporter that counts failures instead of raising them."""

    def __init__(self, destination: str, factory: Callable[[], SpanExporter],
                 on_failure: FailureSink, retry_s: float = 5.0,
                 warned: set[str] | None = None,
                 on_success: Callable[[str], None] | None = None,
                 hint: Callable[[], str] | None = None) -> None:
        self._guard = _Guard(destination, factory, on_failure, retry_s, warned, on_success,
                             hint)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        inner = self._guard.inner()
        if inner is None:
            return SpanExportResult.FAILURE
        try:
            result = inner.export(spans)
        except Exception as e:
            self._guard.fail(_reason(e), str(e))
            return SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self._guard.succeed()
        else:
            self._guard.fail("export_failed")
        return result

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        inner = self._guard._inner
        return True if inner is None else bool(inner.force_flush(timeout_millis))

    def shutdown(self) -> None:
        inner = self._guard._inner
        if inner is not None:
            try:
                inner.shutdown()
            except Exception as e:
                log.debug("stormotel: %s exporter shutdown failed: %s", self._guard.destination, e)


class ArchiveStream:
    """Opens one archive file for appending, creating its directory; shared by an exporter.

    The official file exporters take a ``stream``; opening it ourselves lets an unwritable
    directory fail inside the guard (counted, retried) rather than in a constructor.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None

    def open(self) -> IO[str]:
        if self._fh is None or self._fh.closed:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - owned here
        return self._fh

    def close(self) -> None:
        if self._fh is not None and not self._fh.closed:
            try:
                self._fh.close()
            except OSError as e:  # e.g. ENOSPC on the final flush
                log.debug("stormotel: closing %s failed: %s", self.path, e)

