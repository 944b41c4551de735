"""What the bulk readers (:mod:`.remote_read`, :mod:`.vm_native`, :mod:`.vm_export`) share.

Each bulk reader is one API's request and one decoder. What is not theirs is here, so the three
cannot drift apart on it: the endpoint they read and the counters the load reports
(:class:`~stormotel.analyzers.sources.bulk_read.BulkReader`), how a read asks the endpoint (one
request through :func:`stormotel.analyzers.http.request` on the endpoint's own client: its TLS,
auth, tenant headers, retries and deadline; 200 only), how the window is widened to whole
milliseconds (the end rounded up, so no stored sample at the edge is lost; the decoders cut the
samples back to that window), and how an answer in another format is told apart.
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Any

from stormotel.analyzers.http import request

if TYPE_CHECKING:
    import httpx
    from stormotel.analyzers.sources.prometheus_api import PrometheusAPI


def ms_window(start_s: float, end_s: float) -> tuple[int, int]:
    """``[start_s, end_s]`` in whole milliseconds, widened (the end rounded up)."""
    return int(start_s * 1000), math.ceil(end_s * 1000)


def other_format(resp: httpx.Response, content_type: str, what: str) -> str | None:
    """None when ``resp`` came as ``content_type``; else what it was, said against ``what``
    the reader reads (a proxy's HTML page, a server without the API)."""
    kind = resp.headers.get("content-type", "")
    if kind.startswith(content_type):
        return None
    return f"answered {kind or 'no content type'!r}, not {what}"


class RawReader:
    """The part of a bulk reader that is not its API's: see the module's docstring."""

    #: Each reader's class says these (what :class:`~.bulk_read.BulkReader` asks for).
    name: str
    label: str
    #: Samples one read may bring back (sizes the rank batches, as for the query API).
    samples_per_read: int
    #: The API's path under the endpoint's URL.
    path: str

    def __init__(self, api: PrometheusAPI) -> None:
        self.api = api
        #: Chunks passed over (another encoding, or bits that could not be read).
        self.skipped_chunks = 0
        #: What the reads met that the report should say (a fallback taken, ...).
        self.notes: list[str] = []
        self._lock = threading.Lock()  # reads run on several threads

    @property
    def url(self) -> str:
        return self.api.url + self.path

    def ask(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """One request to the endpoint, as every query of it is made; EndpointError unless it
        answers 200."""
        return request(self.api.client, method, url, settings=self.api.settings,
                       deadline=self.api.deadline, ok_statuses=(200,), **kwargs)
