"""The receiver's HTTP side: the standard library's threading server with a bounded number of
connections, a read timeout, a body-size limit and optional TLS. Endpoints, exactly:

* ``POST /alertmanager`` — Alertmanager's webhook; 200 only once every job it names is queued
  on disk (:mod:`.queue`), 503 with ``Retry-After`` when the queue is full (Alertmanager
  retries), 400 for a body that is not a version-4 payload, 401 without the credential, 413
  over ``--max-body``;
* ``GET /jobs/<job_id>/`` and ``GET /jobs/<job_id>/report.json`` — the latest analysis (HTML,
  and the JSON ``stormotel analyze --format json`` writes); 404 for a job never analysed;
* ``GET /`` — recent analyses; ``GET /healthz`` — 200 when ready; ``GET /metrics``;
* anything else: 404 (405 for a known path with another method).

``<job_id>`` is one percent-encoded path segment; it is decoded, then mapped to a folder by
:func:`~stormotel.analyzers.sinks.outputs.safe_job_id`, so no id reaches outside ``--out``.
"""

from __future__ import annotations

import ssl
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from stormotel.analyzers.serve.auth import Auth
from stormotel.analyzers.serve.metrics import ServeMetrics
from stormotel.analyzers.serve.pages import CSP, index_page
from stormotel.analyzers.serve.queue import WorkQueue
from stormotel.analyzers.serve.store import REPORT_HTML, REPORT_JSON, Store
from stormotel.analyzers.serve.webhook import PayloadError, parse

from stormotel.textsafe import one_line

WEBHOOK_PATH = "/alertmanager"
#: The HTML report draws its charts with inline script; nothing may load from elsewhere.
REPORT_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
              "img-src data:")


@dataclass
class App:
    """What the handler needs, shared by every request thread."""

    queue: WorkQueue
    store: Store
    metrics: ServeMetrics
    auth: Auth
    max_body: int
    protect_reports: bool
    public_url: str
    ready: threading.Event
    retry_after_s: int = 30


class Handler(BaseHTTPRequestHandler):
    server_version = "stormotel-serve"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    #: Seconds a connection may sit idle or trickle a request (a slow client cannot hold a
    #: thread for ever).
    timeout = 30
    #: Headers and body go out in separate writes: with Nagle on, each answer waited for the
    #: client's delayed ACK (~40 ms a request, measured).
    disable_nagle_algorithm = True
    app: App  # set on the subclass the server makes

    # --- plumbing ---------------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:
        """No access log (request lines would repeat job ids at every probe); errors are
        counted in /metrics."""

    def _send(self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            # said, not only done: a client that is not told keeps the connection for its next
            # request, and on a busy host the close reached it after that request was sent
            # ("Server disconnected without sending a response" on a retried webhook)
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _text(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, (text + "\n").encode(), headers=headers)

    def _path(self) -> str:
        return urlsplit(self.path).path

    # --- routes -----------------------------------------------------------------------------
    def do_GET(self) -> None:
        path = self._path()
        app = self.app
        if path == "/healthz":
            ok = app.ready.is_set() and not app.queue.closed
            self._text(200 if ok else 503, "ok" if ok else "not ready")
        elif path == "/metrics":
            self._send(200, generate_latest(app.metrics.registry), CONTENT_TYPE_LATEST)
        elif path == WEBHOOK_PATH:
            self._text(405, "method not allowed: POST the Alertmanager webhook here",
                       {"Allow": "POST"})
        elif not self._reader_allowed():
            return
        elif path == "/":
            page = index_page(app.store.recent(), app.public_url)
            self._send(200, page.encode(), "text/html; charset=utf-8",
                       {"Content-Security-Policy": CSP})
        elif (job := _job_route(path)) is not None:
            self._job(*job)
        else:
            self._text(404, "not found")

    do_HEAD = do_GET

    def _no_analysis(self, job_id: str) -> str:
        """Why a job has nothing to show: never analysed, or its last run failed — said here,
        where the page's link lands, and not only in the receiver's log."""
        failed = self.app.store.failure(job_id)
        if failed is None:
            return "no analysis of this job"
        when = failed.get("analysed_at_ns")
        at = (datetime.fromtimestamp(when / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")
              if isinstance(when, int) else "unknown time")
        return one_line(f"no analysis of this job yet: the last run ({at}) wrote no report, "
                        f"outcome {failed.get('outcome')} (exit {failed.get('exit')}): "
                        f"{failed.get('reason') or 'no message'}; the receiver's log has the "
                        "rest, and the next page of this job runs it again", 2000)

    def _reader_allowed(self) -> bool:
        if not self.app.protect_reports or self.app.auth.allows(self.headers.get("Authorization")):
            return True
        self._text(401, "unauthorized", {"WWW-Authenticate": self.app.auth.challenge})
        return False

    def _job(self, job_id: str, name: str | None) -> None:
        if name is None:  # /jobs/<id> → /jobs/<id>/ (relative links in the report)
            self._send(301, b"", headers={"Location": self._path() + "/"})
            return
        found = self.app.store.file(job_id, name)
        if found is None:
            self._text(404, self._no_analysis(job_id))
            return
        try:
            data = Path(found).read_bytes()
        except OSError:
            self._text(404, "no analysis of this job")
            return
        meta = self.app.store.meta(job_id) or {}
        headers = {"X-Stormotel-Status": "final" if meta.get("final") else "firing"}
        if name == REPORT_JSON:
            self._send(200, data, "application/json", headers)
        else:
            self._send(200, data, "text/html; charset=utf-8",
                       {**headers, "Content-Security-Policy": REPORT_CSP})

    def do_POST(self) -> None:
        app = self.app
        if self._path() != WEBHOOK_PATH:
            self._text(404 if _job_route(self._path()) is None and self._path() not in (
                "/", "/healthz", "/metrics") else 405, "not found")
            return
        if not app.auth.allows(self.headers.get("Authorization")):
            app.metrics.webhooks.labels("unauthorized").inc()
            self.close_connection = True
            self._text(401, "unauthorized", {"WWW-Authenticate": app.auth.challenge})
            return
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            app.metrics.webhooks.labels("bad_request").inc()
            self.close_connection = True
            self._text(411, "Content-Length required")
            return
        if int(length) > app.max_body:
            app.metrics.webhooks.labels("too_large").inc()
            self.close_connection = True  # the body is not read
            self._text(413, f"body over the limit of {app.max_body} bytes")
            return
        body = self.rfile.read(int(length))
        try:
            delivery = parse(body)
        except PayloadError as e:
            app.metrics.webhooks.labels("bad_request").inc()
            self._text(400, str(e)[:300])
            return
        app.metrics.alerts.labels("false").inc(delivery.without_job)
        results = []
        for notice in delivery.jobs.values():
            app.metrics.alerts.labels("true").inc()
            results.append(app.queue.offer(notice))
        for r in results:
            app.metrics.webhooks.labels(r).inc()
        if "full" in results:
            self._text(503, "queue full; retry later",
                       {"Retry-After": str(app.retry_after_s)})
            return
        self._text(200, "queued: " + ", ".join(sorted(set(results))) if results
                   else "no alert carried a job_id label; nothing to analyse")


def _job_route(path: str) -> tuple[str, str | None] | None:
    """``/jobs/<enc>/`` → (id, index.html); ``/jobs/<enc>/report.json`` → (id, report.json);
    ``/jobs/<enc>`` → (id, None); anything else → None. The id is one raw segment, decoded
    after splitting (``%2F`` decodes into the id, never into the path)."""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "" or parts[1] != "jobs" or not parts[2]:
        return None
    job_id = unquote_plus(parts[2], errors="strict") if _decodable(parts[2]) else None
    if not job_id:
        return None
    if len(parts) == 3:
        return job_id, None
    if len(parts) == 4 and parts[3] in ("", REPORT_JSON):
        return job_id, REPORT_HTML if parts[3] == "" else REPORT_JSON
    return None


def _decodable(segment: str) -> bool:
    try:
        unquote_plus(segment, errors="strict")
    except UnicodeDecodeError:
        return False
    return True


class Server(ThreadingHTTPServer):
    """At most ``max_connections`` requests handled at once; the accept loop waits beyond."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], app: App, max_connections: int,
                 tls: ssl.SSLContext | None) -> None:
        handler = type("BoundHandler", (Handler,), {"app": app})
        super().__init__(addr, handler)
        self._slots = threading.BoundedSemaphore(max_connections)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True,
                                          do_handshake_on_connect=False)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed below HTTP (a reset, a failed TLS handshake, a read
        timeout) ends quietly: the standard handler prints a traceback for each."""

    def process_request(self, request: Any, client_address: Any) -> None:
        self._slots.acquire()
        try:
            super().process_request(request, client_address)
        except Exception:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server TLS context (TLS 1.2 or newer) from PEM files."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    return ctx


__all__ = ["WEBHOOK_PATH", "App", "Server", "tls_context"]
