"""The fuzz set's boundary: ``stormotel analyze`` run in-process (the same exception boundary
as the command line, ``stormotel.cli.main``), and the properties every generated input must
keep: a documented exit code (0, 1, 2, 3 — never 70), no traceback, no raw control character
and no secret in anything written."""

from __future__ import annotations

import functools
import io
import json
import re
import sys
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from stormotel import exitcodes
from stormotel.cli import main

DOCUMENTED = (exitcodes.OK, exitcodes.FINDINGS, exitcodes.USAGE, exitcodes.SOURCE_FAILURE)
#: Planted in generated input: none of it may reach any output.
SECRET = "hunter2-fuzz-secret"
SECRET_URL = f"http://admin:{SECRET}@tsdb.example:9090/x?token={SECRET}"


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


def analyze(*args: str) -> Result:
    """The run's output through the streams it is handed (no process-wide swap of
    ``sys.stdout``/``sys.stderr``: the fuzz set's stand-in servers print from their threads)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        code = main(["analyze", *args], out=out, err=err)
    except SystemExit as e:  # argparse
        code = int(e.code or 0)
    return Result(code, out.getvalue(), err.getvalue())


#: the Unicode categories no output may hold raw
_RAW_CATEGORIES = ("Cc", "Cf", "Zl", "Zp", "Cs")


@functools.cache
def _raw_code_points() -> tuple[int, ...]:
    """Every code point of :data:`_RAW_CATEGORIES`, by this Python's ``unicodedata``."""
    return tuple(cp for cp in range(sys.maxunicode + 1)
                 if unicodedata.category(chr(cp)) in _RAW_CATEGORIES)


@functools.cache
def _raw_class(allowed: str) -> re.Pattern[str]:
    """Those code points less ``allowed``, as one character class: searched in C, where asking
    ``unicodedata.category`` of each character of every report was most of the fuzz set's
    CPU."""
    ranges: list[list[int]] = []
    for cp in _raw_code_points():
        if chr(cp) in allowed:
            continue
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges) + "]")


def raw_controls(text: str, allowed: str = "\n") -> list[str]:
    """Control, format and line-separator characters other than ``allowed``."""
    return sorted(set(_raw_class(allowed).findall(text)))


def check(result: Result, *files: Path, codes: tuple[int, ...] = DOCUMENTED) -> None:
    """The properties: a documented code, no traceback, no secret, no raw control character
    in what was printed or written."""
    detail = f"exit {result.code}\n{result.stderr[-2000:]}"
    assert result.code in codes, detail
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, detail
    written = [p.read_text(encoding="utf-8", errors="replace") for p in files if p.exists()]
    for text in (result.stdout, result.stderr, *written):
        assert SECRET not in text, detail
        assert not raw_controls(text, "\n\t" if text is result.stdout else "\n"), detail


# --- generated values ---------------------------------------------------------------------
#: Text that attacks outputs: controls, bidi overrides, markup, a URL with credentials.
hostile_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["\x00", "\x1b[2J", "\u202e", "\u2028", "<!--<script>", "</script>",
                     SECRET_URL, "\r\nVerdict: healthy", "&amp;", "\ud7ff"]),
)
#: JSON scalars of every awkward kind: huge ints, floats beyond int64, NaN-like strings.
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(-2**80, 2**80),
    st.floats(allow_nan=False, allow_infinity=False), hostile_text,
    st.sampled_from(["NaN", "inf", "-Infinity", "1e400", "9" * 40, "", "0x10", " 7"]))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)


def mutate(doc: Any, data: st.DataObject, n_max: int = 4) -> Any:
    """``doc`` (a JSON tree) with up to ``n_max`` values replaced, keys dropped or lists cut."""
    doc = json.loads(json.dumps(doc))
    for _ in range(data.draw(st.integers(0, n_max), label="mutations")):
        paths = list(_paths(doc))
        if not paths:
            break
        parent, key = data.draw(st.sampled_from(paths), label="where")
        action = data.draw(st.sampled_from(["replace", "drop", "wrap"]), label="action")
        if action == "drop" and isinstance(parent, dict):
            del parent[key]
        elif action == "drop" and isinstance(parent, list):
            del parent[key:]
        elif action == "wrap":
            parent[key] = [parent[key]]
        else:
            parent[key] = data.draw(json_values, label="value")
    return doc


def _paths(node: Any) -> Iterator[tuple[Any, Any]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield node, k
            yield from _paths(v)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield node, i
            yield from _paths(v)


# --- a stub TSDB whose answers the test sets ------------------------------------------------
class StubTsdb:
    """A Prometheus HTTP API on loopback answering each path with what ``answers`` holds
    (``series``, ``query``, ``query_range``): generated answers decoded by the real client."""

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._answer()

            def _answer(self) -> None:
                kind = self.path.split("?")[0].rstrip("/").rsplit("/", 1)[-1]
                doc = stub.answers.get(kind, {"status": "success", "data": {
                    "resultType": "vector", "result": []}})
                body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
