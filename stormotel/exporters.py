"""Exporter guards: the official OTel exporters, wrapped so that failures are counted, not raised.

A tracker must never take a training job down. Each wrapper builds its inner exporter lazily
(so an archive directory that cannot be created is retried later instead of failing start-up),
turns every failure into ``FailureSink(destination, reason)`` — which feeds the
``stormotel.tracker.export.failures`` counter — and logs the first failure per destination once.
The exporters' own log lines are de-duplicated by :class:`LogOnce`, which the tracker installs.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar, cast

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
_R = TypeVar("_R")

#: How the OTLP exporters begin the lines they log on each retry and on giving up; the
#: tracker's own warning (with the likely cause, stormotel/otlp_hint.py) replaces them.
RETRY_LINES = ("Transient error", "Failed to export")
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
            if str(record.msg).startswith(RETRY_LINES):
                # The exporter's own retry chatter ("Transient error … retrying in 1.07s"):
                # the tracker's one warning names the cause from it, so it is kept, not shown.
                self.suppressed += 1
                return False
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

    def export(self, send: Callable[[Any], _R], ok: _R, failed: _R) -> _R:
        """``send(inner)`` through the exporter, counted: ``failed`` when there is none yet or
        it raised; its own result otherwise (a success counted as one when it is ``ok``)."""
        inner = self.inner()
        if inner is None:
            return failed
        try:
            result = send(inner)
        except Exception as e:
            self.fail(_reason(e), str(e))
            return failed
        if result is ok:
            self.succeed()
        else:
            self.fail("export_failed")
        return result


class GuardedMetricExporter(MetricExporter):
    """A metric exporter that counts failures instead of raising them."""

    def __init__(self, destination: str, factory: Callable[[], MetricExporter],
                 on_failure: FailureSink, retry_s: float = 5.0,
                 warned: set[str] | None = None,
                 preferred_temporality: dict[type, AggregationTemporality] | None = None,
                 on_success: Callable[[str], None] | None = None,
                 hint: Callable[[], str] | None = None,
                 add: Callable[[MetricsData], MetricsData | None] | None = None) -> None:
        # The reader asks the exporter it is given (this wrapper) for the temporality, so the
        # inner exporter's preference must be declared here too.
        super().__init__(preferred_temporality=preferred_temporality)
        self._guard = _Guard(destination, factory, on_failure, retry_s, warned, on_success,
                             hint)
        #: what each export gains on its way out (the sample-duration histogram's point)
        self._add = add

    @property
    def failures(self) -> int:
        return self._guard.failures

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        def send(inner: MetricExporter) -> MetricExportResult:
            data = metrics_data if self._add is None else self._add(metrics_data) or metrics_data
            return inner.export(data, timeout_millis=timeout_millis)

        return self._guard.export(send, MetricExportResult.SUCCESS, MetricExportResult.FAILURE)

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
        return self._guard.export(lambda inner: inner.export(spans), SpanExportResult.SUCCESS,
                                  SpanExportResult.FAILURE)

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
    """One archive file the official file exporters append to: whole lines or nothing.

    The exporters take a ``stream``; this one buffers what they ``write`` and appends it with
    one ``os.write`` loop on ``flush`` (they flush after every batch). When the disk is full
    the file is truncated back to where the batch began, so no half line is left in the middle
    of the file once space returns, and the batch is counted as lost (``on_drop`` with the
    errno's name, e.g. ``enospc``) and logged once — not raised, so the SDK does not log a
    traceback per batch. Opening it ourselves also lets an unwritable directory fail inside
    the exporter guard (counted, retried) rather than in a constructor.
    """

    def __init__(self, path: Path, on_drop: Callable[[str], None] | None = None) -> None:
        self.path = path
        self._on_drop = on_drop
        self._fd: int | None = None
        self._buf: list[str] = []
        self._warned = False
        self.closed = False
        self.dropped = 0

    def open(self) -> IO[str]:
        """This stream, its file opened (the exporters' ``stream`` argument)."""
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.closed = False
        return cast("IO[str]", self)

    def write(self, text: str) -> int:
        self._buf.append(text)
        return len(text)

    def flush(self) -> None:
        if not self._buf:
            return
        data = "".join(self._buf).encode("utf-8")
        self._buf.clear()
        start: int | None = None
        try:
            self.open()
            fd = self._fd
            assert fd is not None
            start = os.fstat(fd).st_size
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError as e:
            if start is not None and self._fd is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, start)  # no partial line left behind
            self._drop(e)

    def _drop(self, e: OSError) -> None:
        self.dropped += 1
        if self._on_drop is not None:
            self._on_drop(_reason(e))
        if not self._warned:
            self._warned = True
            log.warning("stormotel: cannot append to %s (%s); lost batches are counted in "
                        "stormotel.tracker.export.failures and not logged again", self.path,
                        e.strerror or e)

    def close(self) -> None:
        if self._fd is not None:
            self.flush()
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        self.closed = True
