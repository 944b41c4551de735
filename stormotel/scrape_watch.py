"""Knowing when the Prometheus pull endpoint was last scraped, so an ending rank can wait for it.

A rank whose OOM ends the job exits about a second after the OOM; with a 15 s scrape interval
the OOM counter is then usually never scraped and nothing pages. The tracker therefore keeps its
endpoint up, at the end, until one scrape has *read* the final state (bounded). To know that,
it must see scrapes happen — prometheus-client's HTTP server says nothing about them — so:

* :class:`WatchedRegistry` notes, in the serving thread, the moment a request started
  collecting the registry (``collect`` is what every exposition format calls);
* :func:`watch_server` wraps the server's ``finish_request`` (one call per HTTP request, in its
  own thread, returning after the response was written to the socket): a request that
  collected counts as a scrape served, stamped with the moment its collection began.

A scrape whose collection began after the event therefore carried the event's values all the
way to the scraper. Any client counts (a Prometheus HA pair, a person's ``curl``): the endpoint
cannot tell them apart, and each one of them has the event.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

__all__ = ["ScrapeWatch", "WatchedRegistry", "watch_server"]


class ScrapeWatch:
    """Scrapes served so far: how many, and when the latest one started collecting (monotonic
    seconds). Thread-safe; :meth:`wait_served` blocks (bounded) until a scrape newer than a
    given moment has been served."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._local = threading.local()
        self.count = 0
        #: monotonic time at which the latest served scrape began collecting (None: none yet)
        self.latest_start: float | None = None

    # -- called by the serving threads -------------------------------------------------------
    def collecting(self) -> None:
        """A request in this thread started collecting the registry (keeps the first stamp)."""
        if getattr(self._local, "started", None) is None:
            self._local.started = time.monotonic()

    def request_begins(self) -> None:
        self._local.started = None

    def request_done(self) -> None:
        started = getattr(self._local, "started", None)
        self._local.started = None
        if started is None:  # not a scrape (a HEAD, /favicon.ico, a client that hung up early)
            return
        with self._cond:
            self.count += 1
            if self.latest_start is None or started > self.latest_start:
                self.latest_start = started
            self._cond.notify_all()

    # -- called by the tracker ------------------------------------------------------------------
    def served_since(self, moment: float) -> bool:
        """Has a scrape that began collecting at or after ``moment`` been served?"""
        with self._cond:
            return self.latest_start is not None and self.latest_start >= moment

    def wait_served(self, moment: float, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a scrape that began at or after ``moment``; True when
        one was served. Signals still interrupt the wait (it is a timed condition wait)."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        with self._cond:
            while self.latest_start is None or self.latest_start < moment:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.5))
            return True


class WatchedRegistry(CollectorRegistry):
    """A registry that tells its :class:`ScrapeWatch` when a request starts collecting it."""

    def __init__(self, watch: ScrapeWatch, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.watch = watch

    def collect(self) -> Iterable[Metric]:
        self.watch.collecting()
        yield from super().collect()


def watch_server(server: Any, watch: ScrapeWatch) -> None:
    """Count each HTTP request ``server`` (a ``socketserver`` server, as prometheus-client's
    ``start_http_server`` returns) finished after collecting the registry. ``finish_request``
    is looked up on the instance by the request thread, so wrapping it there is enough."""
    original = server.finish_request

    def finish_request(request: Any, client_address: Any) -> None:
        watch.request_begins()
        try:
            original(request, client_address)
        finally:
            watch.request_done()

    server.finish_request = finish_request
