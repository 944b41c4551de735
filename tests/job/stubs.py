"""Small local HTTP servers for the job tests.

* :class:`FaultProxy` sits in front of a REAL Prometheus and injects the failures a real server
  cannot be asked to produce on cue (5xx bursts, slowness, malformed JSON); everything else is
  forwarded unchanged, so the data still comes from the real TSDB.
* :class:`GrafanaStub` stands in for Grafana (no Grafana server can be installed here): it
  implements the annotation and dashboard endpoints the sink uses, checks the bearer token, and
  records every request so tests can assert payloads and idempotence.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from tests import servers


class _Server:
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class FaultProxy(_Server):
    """Forward to ``upstream``; ``fail_first`` 503s, then optional ``delay_s`` / ``malformed``;
    every request whose body holds ``fail_body`` is answered 503 (a read that keeps failing
    while the others pass). ``meet``: the first request waits there until every party's has
    come (proxies sharing one barrier hold their runs' first reads until all are in flight).
    ``max_range_ms``: a raw read (``selector[Nms]``) over that range is refused as Prometheus
    refuses one over ``--query.max-samples``, so the reader splits it in time (the server's own
    limit would refuse discovery's queries first)."""

    def __init__(self, upstream: str, *, fail_first: int = 0, delay_s: float = 0.0,
                 malformed: bool = False, path_filter: str = "", fail_body: bytes = b"",
                 meet: threading.Barrier | None = None, max_range_ms: int = 0) -> None:
        super().__init__(_ProxyHandler)
        self.upstream = upstream
        self.meet = meet
        self.fail_first = fail_first
        self.fail_body = fail_body
        self.delay_s = delay_s
        self.malformed = malformed
        self.path_filter = path_filter
        self.max_range_ms = max_range_ms
        #: How many raw reads ``max_range_ms`` refused.
        self.refused = 0
        self.requests: list[str] = []
        #: Each request's headers (names lower-cased) and ``path``, as the proxy got them.
        self.headers_seen: list[dict[str, str]] = []
        self.lock = threading.Lock()


#: Prometheus's answer to a query over ``--query.max-samples``.
_TOO_MANY_SAMPLES = json.dumps({
    "status": "error", "errorType": "execution",
    "error": "query processing would load too many samples into memory in query execution"},
).encode()


def _raw_range_ms(path: str, body: bytes) -> int:
    """The range of a raw read's ``selector[Nms]`` (GET or form POST); 0 for anything else."""
    query = parse_qs(urlsplit(path).query).get("query", [])
    query += parse_qs(body.decode("utf-8", "replace")).get("query", [])
    ranges = [int(m) for q in query for m in re.findall(r"\[(\d+)ms\]", q)]
    return max(ranges, default=0)


class _ProxyHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _handle(self, method: str) -> None:
        proxy: FaultProxy = self.server.owner  # type: ignore[attr-defined]
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with proxy.lock:
            proxy.requests.append(self.path)
            proxy.headers_seen.append({**{k.lower(): v for k, v in self.headers.items()},
                                       "path": self.path.split("?")[0]})
            n = len(proxy.requests)
        if proxy.meet is not None and n == 1:
            proxy.meet.wait(60)
        applies = proxy.path_filter in self.path
        if proxy.fail_body and proxy.fail_body in body:
            return self._send(503, b"upstream overloaded", "text/plain")
        if proxy.max_range_ms and _raw_range_ms(self.path, body) > proxy.max_range_ms:
            with proxy.lock:
                proxy.refused += 1
            return self._send(422, _TOO_MANY_SAMPLES, "application/json")
        if applies and n <= proxy.fail_first:
            return self._send(503, b"upstream overloaded", "text/plain")
        if applies and proxy.delay_s:
            time.sleep(proxy.delay_s)
        if applies and proxy.malformed:
            return self._send(200, b'{"status": "success", "data": {"resu', "application/json")
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() in ("content-type", "content-encoding")}
        try:
            # One shared loopback client: ``httpx.request`` built a TLS context per forwarded
            # request (~50 ms of CPU; a chunked read forwards hundreds).
            r = servers.loopback_client().request(method, proxy.upstream + self.path,
                                                  content=body, headers=headers, timeout=30)
        except httpx.HTTPError as e:  # a delayed request waking after its test stopped the
            # upstream (its client gave up long before): a 502, not a traceback on this
            # process's stderr (an in-process run once captured that stderr by swapping it and
            # read the traceback as its own; runs now print to streams of their own)
            return self._send(502, f"upstream: {e}".encode(), "text/plain")
        self._send(r.status_code, r.content, r.headers.get("content-type", "application/json"))

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")


class GrafanaStub(_Server):
    """Annotations and dashboards in memory; every request checked for ``Bearer <token>``."""

    def __init__(self, token: str) -> None:
        super().__init__(_GrafanaHandler)
        self.token = token
        self.annotations: list[dict[str, Any]] = []
        self.dashboards: dict[str, dict[str, Any]] = {}
        self.dashboard_saves = 0
        self.log: list[tuple[str, str, Any]] = []
        self.bad_auth = 0
        #: Answer this many annotation POSTs with 500 *after* storing them (what a Grafana
        #: behind a proxy that times out does): a client that re-posts blindly duplicates.
        self.fail_after_store = 0
        #: folderUid each dashboard was saved into (None: General).
        self.folders: dict[str, str | None] = {}
        self.lock = threading.Lock()


class _GrafanaHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _json(self, status: int, doc: Any) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _route(self, method: str) -> None:
        g: GrafanaStub = self.server.owner  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        payload = json.loads(raw) if raw else None
        url = urlsplit(self.path)
        with g.lock:
            g.log.append((method, url.path, payload))
            if self.headers.get("Authorization") != f"Bearer {g.token}":
                g.bad_auth += 1
                return self._json(401, {"message": "Unauthorized"})
            if url.path == "/api/annotations" and method == "GET":
                q = parse_qs(url.query)
                tags = set(q.get("tags", []))
                lo, hi = int(q["from"][0]), int(q["to"][0])
                hits = [a for a in g.annotations if tags <= set(a["tags"])
                        and a["time"] <= hi and a.get("timeEnd", a["time"]) >= lo]
                return self._json(200, hits)
            if url.path == "/api/annotations" and method == "POST":
                assert isinstance(payload, dict)
                for k in ("time", "timeEnd", "tags", "text"):
                    if k not in payload:
                        return self._json(400, {"message": f"missing {k}"})
                ann = {**payload, "id": len(g.annotations) + 1}
                g.annotations.append(ann)
                if g.fail_after_store > 0:
                    g.fail_after_store -= 1
                    return self._json(500, {"message": "upstream timed out"})
                return self._json(200, {"message": "Annotation added", "id": ann["id"]})
            if url.path.startswith("/api/annotations/") and method == "PATCH":
                ann_id = int(url.path.rsplit("/", 1)[1])
                for a in g.annotations:
                    if a["id"] == ann_id:
                        a.update(payload or {})
                        return self._json(200, {"message": "Annotation patched"})
                return self._json(404, {"message": "not found"})
            if url.path.startswith("/api/dashboards/uid/") and method == "GET":
                uid = url.path.rsplit("/", 1)[1]
                if uid in g.dashboards:
                    return self._json(200, {"dashboard": g.dashboards[uid], "meta": {}})
                return self._json(404, {"message": "Dashboard not found"})
            if url.path == "/api/dashboards/db" and method == "POST":
                assert isinstance(payload, dict) and payload.get("overwrite") is True
                board = dict(payload["dashboard"])
                g.dashboard_saves += 1
                board["version"] = g.dashboard_saves
                g.dashboards[board["uid"]] = board
                g.folders[board["uid"]] = payload.get("folderUid")
                return self._json(200, {"status": "success", "uid": board["uid"]})
            return self._json(404, {"message": f"no route {method} {url.path}"})

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PATCH(self) -> None:
        self._route("PATCH")
