"""How a tracker's stop ends after an event, and how long a stop may take.

After an event — an OOM no scrape has read yet, SIGTERM, an uncaught exception — the rank is
about to die and its final state is what the TSDB must get: it is pushed at once through every
push destination (spans, OTLP, archive), and the Prometheus endpoint stays up until one scrape
that began after the event has been served, at most ``linger_after_event_s``
(:mod:`stormotel.scrape_watch` sees the scrapes). Every wait is bounded, and a collector that
black-holes or refuses never lengthens the stop (docs/tracker.md "Stopping").
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from stormotel import environment
from stormotel.warn_once import WarnOnce

if TYPE_CHECKING:
    from stormotel.telemetry import Telemetry

__all__ = ["EventEnd"]

log = logging.getLogger("stormotel.tracker")

#: how long a stop waits for the archive's last write at least: the archive is a local file
#: (every sample taken before the stop must be on it), so only a starved CPU or a hung disk
#: slows it, never a collector — the collectors keep the stop's own, shorter bound. Well
#: inside the launchers' SIGTERM-to-SIGKILL grace (torchrun and Kubernetes: 30 s).
ARCHIVE_CLOSE_S = 15.0


class EventEnd:
    """The stop's bounds and the push-and-linger after an event, for one tracker's telemetry
    (passed in: it is the session's, None before the first start and in a forked child)."""

    def __init__(self, final_export_s: float, shutdown_timeout_s: float,
                 linger_after_event_s: float, warn: WarnOnce) -> None:
        #: the final write and export's own bound (``shutdown_timeout_s``)
        self.final_export_s = final_export_s
        #: that bound plus the last-scrape linger (``prometheus_linger_s``)
        self.shutdown_timeout_s = shutdown_timeout_s
        self.linger_after_event_s = linger_after_event_s
        self._warn = warn
        self._push_thread: threading.Thread | None = None

    def stop_bound_s(self, telemetry: Telemetry | None, lingered: bool) -> float:
        """How long the stop waits for the final write and export (after the sampler's own
        half of ``shutdown_timeout_s``): ``shutdown_timeout_s``, plus the last-scrape linger
        only while a Prometheus endpoint serves and no event linger has already waited for a
        scrape."""
        serving = telemetry is not None and telemetry.scrape_watch is not None
        extra = self.shutdown_timeout_s - self.final_export_s
        return self.final_export_s + (extra if serving and not lingered else 0.0)

    @staticmethod
    def oom_unscraped(telemetry: Telemetry | None, oom_mono: float | None) -> bool:
        """An OOM was seen (at monotonic ``oom_mono``) and the Prometheus endpoint has not been
        scraped since."""
        watch = None if telemetry is None else telemetry.scrape_watch
        return oom_mono is not None and watch is not None and not watch.served_since(oom_mono)

    def push_soon(self, telemetry: Telemetry | None) -> None:
        """Flush every push destination (spans, OTLP, archive) in a helper thread, one at a
        time: the sampling thread must not wait on a collector."""
        if telemetry is None or (self._push_thread is not None and self._push_thread.is_alive()):
            return
        timeout_ms = int(self.shutdown_timeout_s * 1000)
        self._push_thread = threading.Thread(target=telemetry.flush, args=(timeout_ms,),
                                             name="stormotel-push", daemon=True)
        self._push_thread.start()

    def linger(self, telemetry: Telemetry | None, after_mono: float, started_mono: float
               ) -> bool:
        """Push the final state now, then keep the Prometheus endpoint serving until a scrape
        that began after ``after_mono`` has been served, at most ``linger_after_event_s``;
        True when it waited for a scrape.

        No wait (and no early push: the stop's own final export pushes, within its bound)
        without an endpoint, with the linger off (0), or when the endpoint has never been
        scraped though it has been up (since ``started_mono``) longer than the linger (nobody
        scrapes it)."""
        if telemetry is None or telemetry.scrape_watch is None:
            return False
        limit = self.linger_after_event_s
        if limit <= 0:
            return False
        deadline = time.monotonic() + limit
        timeout_ms = int(max(self.shutdown_timeout_s, 1.0) * 1000)
        pusher = threading.Thread(target=telemetry.flush, args=(timeout_ms,),
                                  name="stormotel-push", daemon=True)
        pusher.start()
        watch = telemetry.scrape_watch
        waited = True
        up_s = time.monotonic() - started_mono
        if watch.count == 0 and up_s > limit:
            log.info("stormotel: the Prometheus endpoint was never scraped in %.0f s; not "
                     "waiting for a scrape", up_s)
            waited = False
        elif watch.wait_served(after_mono, limit):
            log.info("stormotel: the final state was scraped; stopping")
        else:
            self._warn("linger", "stormotel: no Prometheus scrape within %.1f s of the "
                       "end (linger_after_event_s / %s); the last values may be "
                       "missing from the TSDB", limit, environment.LINGER_S)
        # The push shares the linger's bound.
        pusher.join(max(0.0, deadline - time.monotonic()))
        return waited
