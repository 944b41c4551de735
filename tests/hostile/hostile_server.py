"""A deliberately hostile HTTP server on loopback: the behaviours the red-team corpus used
against the analyzer's Prometheus and Grafana clients. The first path segment picks one:

- ``/trickle/...``: 200 headers, then one byte per second, forever;
- ``/huge/...``: a 200 body that never ends (far beyond any sane response);
- ``/echo/...``: 400 whose body repeats every request header (tokens included);
- ``/garbage/...``: Prometheus-shaped JSON with list-valued labels and non-numeric values;
- ``/deep/...``, ``/deep400/...``: a 200 nested 100,000 levels deep, a 400 nested 3,000 deep;
- ``/future/...``: a consistent Prometheus answer for two ranks whose last samples are stamped
  75 years ahead;
- ``/sched/...``: two healthy ranks of job ``j``, but a discovery answer that also holds a bare
  string and a numeric ``job_id``, and a window read-back answering ``NaN``, ``+Inf`` and a
  result without ``value``;
- ``/names/...``: two healthy ranks, plus a series whose ``__name__`` is a JSON list, and a
  native-interval probe (raw samples of a range selector) whose values are not numbers;
  ``/probe/...`` the same without the list-valued name;
- ``/multi/...``: three jobs found by discovery (``a``, ``b`` and ``../x``), two healthy ranks
  each.
- ``/echoauth/...``: a Prometheus error (422) whose message repeats the Basic credentials it
  was sent, decoded: the password, ``user:password`` and their base64, with no header name;
- ``/scalar/...``, ``/string/...``: two healthy ranks listed, but every read answered with a
  ``scalar`` (or ``string``) result;
- ``/manyranks/...``: a 4-rank job whose series listing holds ranks 0-3, while the label-values
  answer for ``rank`` names 10^6 ranks (``requests`` counts what the server was asked).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote_plus

from stormotel import schema

_CHUNK = b"0" * (1 << 20)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    body = b""

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(n) if n else b""
        self._serve()

    def _serve(self) -> None:
        mode = self.path.strip("/").split("/", 1)[0]
        with suppress(BrokenPipeError, ConnectionResetError):
            getattr(self, f"_{mode}")()

    def _trickle(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "1000000")
        self.end_headers()
        for _ in range(600):
            self.wfile.write(b" ")
            self.wfile.flush()
            time.sleep(1.0)

    def _huge(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(2 * 1024**3))
        self.end_headers()
        self.wfile.write(b'{"status":"success","data":{"result":[' + b" " * 100)
        for _ in range(2048):
            self.wfile.write(_CHUNK)

    def _echo(self) -> None:
        body = ("bad request; you sent:\n" + "".join(
            f"{k}: {v}\n" for k, v in self.headers.items())).encode()
        self.send_response(400)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _garbage(self) -> None:
        if "/series" in self.path:
            data: object = [{"__name__": "stormotel_memory_allocated_bytes", "job_id": "j",
                             "rank": ["0"], "world_size": "9" * 401},
                            {"__name__": "stormotel_memory_allocated_bytes", "job_id": "j",
                             "rank": "1", "world_size": "1e400"}]
        else:
            data = {"resultType": "matrix", "result": [
                {"metric": {"rank": ["0"], "job_id": "j"}, "values": [[1, "abc"]]},
                {"metric": {"rank": "1", "job_id": {"x": 1}}, "values": [["x", "1"], [2]]},
                {"metric": {"rank": "1"}, "values": [[1e300, "1e300"]]},
                {"metric": "oops", "values": "nope"}]}
        body = json.dumps({"status": "success", "data": data}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


    def _deep(self) -> None:
        body = b"[" * 100_000 + b"]" * 100_000
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _deep400(self) -> None:
        body = b"[" * 3000 + b"]" * 3000
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _future(self) -> None:
        name = schema.FIELD_METRICS["allocated"].prom_aliases[0]
        labels = [{"__name__": name, "job_id": "j", "rank": str(r), "world_size": "2"}
                  for r in range(2)]
        if "/series" in self.path:
            data: object = labels
        elif "/query_range" in self.path or "[" in unquote_plus(f"{self.path}?{self.body!r}"):
            # range queries, and instant queries of a range selector (raw samples) alike
            now = time.time()
            values = [[now - 300 + 15 * i, str(4 * 1024**3)] for i in range(18)]
            values += [[now + 75 * 365 * 86400 + 15 * i, str(70 * 1024**3)] for i in range(5)]
            data = {"resultType": "matrix",
                    "result": [{"metric": dict(m), "values": values} for m in labels]}
        else:
            data = {"resultType": "vector", "result": []}
        self._send_json({"status": "success", "data": data})

    def _sched(self) -> None:
        name = schema.FIELD_METRICS["allocated"].prom_aliases[0]
        labels = [{"__name__": name, "job_id": "j", "rank": str(r), "world_size": "2"}
                  for r in range(2)]
        query = unquote_plus(f"{self.path}?{self.body!r}")
        data: object
        if "/series" in self.path:
            data = labels
        elif "group by" in query:  # discovery
            data = {"resultType": "vector", "result": [
                "oops", {"metric": {"job_id": 7}, "value": [1, "1"]},
                {"metric": {"job_id": "j"}, "value": [1, "1"]}]}
        elif "timestamp(" in query:  # the previous window end, read back
            data = {"resultType": "vector", "result": [
                {"metric": {}, "value": [1, "NaN"]}, {"metric": {}, "value": [1, "+Inf"]},
                {"metric": {}}, ["x"]]}
        elif "/query_range" in self.path or "[" in query:
            now = time.time()
            values = [[now - 300 + 15 * i, str(4 * 1024**3)] for i in range(18)]
            data = {"resultType": "matrix",
                    "result": [{"metric": dict(m), "values": values} for m in labels]}
        else:
            data = {"resultType": "vector", "result": []}
        self._send_json({"status": "success", "data": data})

    def _names(self) -> None:
        name = schema.FIELD_METRICS["allocated"].prom_aliases[0]
        labels: list[dict[str, object]] = [
            {"__name__": name, "job_id": "j", "rank": str(r), "world_size": "2"}
            for r in range(2)]
        query = unquote_plus(f"{self.path}?{self.body!r}")
        now = time.time()
        data: object
        if "/series" in self.path:
            bad = [{"__name__": [name], "job_id": "j", "rank": "1"}]
            data = [*labels, *(bad if self.path.startswith("/names") else [])]
        elif re.search(r"\[\d+s\]", query) and "over_time" not in query:  # the interval probe
            values = [[now - 300 + 15 * i, "abc"] for i in range(18)]
            data = {"resultType": "matrix", "result": [{"metric": labels[0], "values": values}]}
        elif "/query_range" in self.path or "[" in query:
            values = [[now - 300 + 15 * i, str(4 * 1024**3)] for i in range(18)]
            data = {"resultType": "matrix",
                    "result": [{"metric": dict(m), "values": values} for m in labels]}
        else:
            data = {"resultType": "vector", "result": [{"metric": {}, "value": [now, "x"]}]}
        self._send_json({"status": "success", "data": data})

    def _multi(self) -> None:
        name = schema.FIELD_METRICS["allocated"].prom_aliases[0]
        query = unquote_plus(f"{self.path}?{self.body.decode(errors='replace')}")
        job = re.search(r'job_id="((?:[^"\\]|\\.)*)"', query)
        job_id = job.group(1).replace("\\\\", "\\") if job else "a"
        labels = [{"__name__": name, "job_id": job_id, "rank": str(r), "world_size": "2"}
                  for r in range(2)]
        data: object
        if "/series" in self.path:
            data = labels
        elif "group by" in query:
            data = {"resultType": "vector", "result": [
                {"metric": {"job_id": j}, "value": [1, "1"]} for j in ("a", "b", "../x")]}
        elif "/query_range" in self.path or "[" in query:
            now = time.time()
            values = [[now - 300 + 15 * i, str(4 * 1024**3)] for i in range(18)]
            data = {"resultType": "matrix",
                    "result": [{"metric": dict(m), "values": values} for m in labels]}
        else:
            data = {"resultType": "vector", "result": []}
        self._send_json({"status": "success", "data": data})

    _probe = _names  # the same without the list-valued name: only the probe is hostile

    def _echoauth(self) -> None:
        import base64

        auth = self.headers.get("Authorization", "")
        token = auth.split(" ", 1)[-1]
        try:
            pair = base64.b64decode(token).decode()
        except ValueError:
            pair = ""
        password = pair.split(":", 1)[-1]
        doc = {"status": "error", "errorType": "bad_data",
               "error": f"credentials {token} rejected: {pair} (password {password})"}
        body = json.dumps(doc).encode()
        self.send_response(422)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _scalar(self) -> None:
        name = schema.FIELD_METRICS["allocated"].prom_aliases[0]
        labels = [{"__name__": name, "job_id": "j", "rank": str(r), "world_size": "2"}
                  for r in range(2)]
        now = time.time()
        kind = self.path.strip("/").split("/", 1)[0]
        data: object
        if "/series" in self.path:
            data = labels
        elif "/label/" in self.path:
            data = sorted({m["__name__"] for m in labels}) if "__name__" in self.path \
                else ["0", "1"]
        else:
            data = {"resultType": kind, "result": [now, "1" if kind == "scalar" else "x"]}
        self._send_json({"status": "success", "data": data})

    _string = _scalar

    requests = 0

    def _manyranks(self) -> None:
        type(self).requests += 1
        name = schema.FIELD_METRICS["allocated"].prom_aliases[0]
        labels = [{"__name__": name, "job_id": "j", "rank": str(r), "world_size": "4"}
                  for r in range(4)]
        data: object
        if "/series" in self.path:
            data = labels
        elif "/label/__name__/" in self.path:
            data = [name]
        elif "/label/rank/" in self.path:
            data = [str(r) for r in range(10**6)]
        elif "/query_range" in self.path or "[" in unquote_plus(f"{self.path}?{self.body!r}"):
            now = time.time()
            values = [[now - 300 + 15 * i, str(4 * 1024**3)] for i in range(18)]
            data = {"resultType": "matrix",
                    "result": [{"metric": dict(m), "values": values} for m in labels]}
        else:
            data = {"resultType": "vector", "result": []}
        self._send_json({"status": "success", "data": data})

    def _send_json(self, doc: object) -> None:
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def requests_served() -> int:
    """How many requests the ``/manyranks`` mode has answered in this process."""
    return _Handler.requests


@contextmanager
def hostile_server() -> Iterator[str]:
    """``http://127.0.0.1:PORT``; stopped (threads are daemons) when the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
