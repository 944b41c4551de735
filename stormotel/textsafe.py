"""Making untrusted text safe to print and to log: no control characters, no credentials.

Job ids, file names, server bodies and exception messages come from input the analyzer does not
control. Printed raw, an escape sequence can recolour or erase a terminal and a newline can forge
a second ``Verdict:`` or logfmt summary line; a URL with ``user:password@`` or a server that
echoes request headers would put a secret into logs. Every line the commands print about input
goes through :func:`one_line` (or :func:`printable` for values inside a line).
"""

from __future__ import annotations

import html
import json
import re
import unicodedata

#: Longest message line printed for one error (the rest is cut with a marker).
MAX_LINE_CHARS = 500

#: RFC 3986 userinfo: everything between ``scheme://`` and the *last* ``@`` of the authority
#: (which ends at the first ``/``, ``?`` or ``#``), as URL parsers (urllib, httpx) split it —
#: a password holding a raw ``@`` is removed whole, not printed from its ``@`` on.
_USERINFO = re.compile(r'(?<=://)[^\s/?#"<>]*@')
#: Query parameters, logfmt/JSON keys and headers whose *name* says they hold a secret.
_SECRET_NAME = (r"[\w.-]*(?:token|secret|passw|pwd|api[_-]?key|apikey|auth|signature|"
                r"credential|session|cookie|private[_-]?key)[\w.-]*")
_SECRET_QUERY = re.compile(rf"(?i)([?&;]{_SECRET_NAME}=)[^&#;\s\"'<>]*")
_SECRET_HEADER = re.compile(
    r"(?i)\b(authorization|proxy-authorization|cookie|set-cookie|"
    r"[\w-]*(?:token|api[-_]?key|secret|passw(?:or)?d))"
    r"(\"?\s*[:=]\s*\"?)(?!<redacted>)(?:(?:bearer|basic|token)\s+)?[^\s\",;}&]+")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
#: Userinfo without a well-formed ``scheme://`` before it: a URL typed without a scheme
#: (``admin:pw@tsdb:9090``), with a mistyped one (``http:/``, ``http//``, ``http:``), or a bare
#: ``//``. A token (from a space, quote, bracket or ``/``) up to its last ``@`` before a host
#: character; it is userinfo to remove when it holds a ``:`` or another ``@`` (a bare
#: ``user@host`` names no secret). One pass, no nested quantifiers: linear in the text.
_LOOSE_USERINFO = re.compile(r"(?:^|(?<=[\s'\"<>/(\[,=`]))[^\s'\"<>/`]+@(?=[\w\[])")
REDACTED = "<redacted>"


def _loose(match: re.Match[str]) -> str:
    info = match.group(0)[:-1]
    return f"{REDACTED}@" if (":" in info or "@" in info) and info != REDACTED else match.group(0)


def redact(text: str) -> str:
    """``text`` with URL credentials, secret query parameters and auth headers replaced.

    The one redaction every output applies (error lines, the text summary, logfmt, the JSON
    report's keys and values, the HTML report)."""
    if "@" not in text and "=" not in text and ":" not in text and " " not in text:
        return text
    text = _USERINFO.sub(f"{REDACTED}@", text)
    if "@" in text:
        text = _LOOSE_USERINFO.sub(_loose, text)
    text = _SECRET_QUERY.sub(rf"\1{REDACTED}", text)
    text = _SECRET_HEADER.sub(rf"\1\2{REDACTED}", text)
    return _BEARER.sub(rf"\1 {REDACTED}", text)


def redact_url(url: str) -> str:
    """A URL safe to log: no ``user:password@``, no ``?token=`` values."""
    url = _USERINFO.sub("", url)
    if "@" in url:
        url = _LOOSE_USERINFO.sub(_loose, url)
    return _SECRET_QUERY.sub(rf"\1{REDACTED}", url)


_UNPRINTABLE = ("Cc", "Cf", "Zl", "Zp", "Cs")


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if ch == "\t":
        return "\\t"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
        else f"\\U{code:08x}"


def printable(value: object, limit: int = MAX_LINE_CHARS) -> str:
    """``str(value)`` with control and format characters (ESC, CR, LF, bidi overrides)
    escaped, so it cannot move the cursor or start a new line, and cut at ``limit``."""
    s = str(value)
    if len(s) > limit:
        s = s[:limit] + f"...[{len(s) - limit} more chars]"
    if s.isprintable():
        return s
    return "".join(_escape(c) if unicodedata.category(c) in _UNPRINTABLE else c for c in s)


def one_line(value: object, limit: int = MAX_LINE_CHARS) -> str:
    """One printable, redacted line for a message about untrusted input."""
    return printable(redact(str(value)), limit)


def html_text(value: object) -> str:
    """``value`` for an HTML page: redacted, control and format characters (NUL, ESC, bidi
    overrides) shown escaped, then HTML-escaped. The HTML report's only escape function."""
    s = redact(str(value))
    if not s.isprintable():
        s = "".join(_escape(c) if unicodedata.category(c) in _UNPRINTABLE else c for c in s)
    return html.escape(s)


def script_json(data: object) -> str:
    """JSON safe inside ``<script type="application/json">``: ``<``, ``>``, ``&`` and U+2028/9
    as ``\\u`` escapes (as Django's ``json_script`` does), so no ``</script`` or ``<!--<script``
    in a string can end the element or put the parser into its escaped-script state; strings
    redacted. NaN and infinities are refused (JSON has neither)."""
    text = json.dumps(redact_tree(data), separators=(",", ":"), allow_nan=False)
    return text.translate(_SCRIPT_ESCAPES)


_SCRIPT_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026",
                   0x2028: "\\u2028", 0x2029: "\\u2029"}


def redact_tree(obj: object) -> object:
    """A JSON-able tree with every string, keys included, redacted (the file sinks: Perfetto
    trace, incident dashboard)."""
    return _redact_tree(obj, {})


#: Leaves :func:`_redact_tree` returns as they are, tested by exact type (not ``isinstance``:
#: a ``str`` subclass such as a ``StrEnum`` member must still take the string branch).
_PLAIN = frozenset({int, float, bool, type(None)})


def _redact_tree(obj: object, seen: dict[str, str]) -> object:
    """:func:`redact_tree` with the strings already redacted in this tree remembered: a trace
    repeats the same few keys and names on every one of its events.

    A container's plain leaves (str, int, float, bool, None: all of a Perfetto counter event
    but its nested ``args``) are handled in the container's own loop, not by a call each: a
    trace of 65,000 events took 0.65 s of CPU with a call per node, 0.3 s so (~20 % of a
    scheduled analysis's CPU in tests/job/test_shards.py was this walk). The output is the
    same: each inlined branch is the one the call would take for that exact type."""
    if isinstance(obj, str):
        out = seen.get(obj)
        if out is None:
            out = seen[obj] = redact(obj)
        return out
    if isinstance(obj, dict):
        tree: dict[str, object] = {}
        for k, v in obj.items():
            key = k if type(k) is str else str(k)
            rk = seen.get(key)
            if rk is None:
                rk = seen[key] = redact(key)
            t = type(v)
            if t is str:
                rv = seen.get(v)
                tree[rk] = rv if rv is not None else seen.setdefault(v, redact(v))
            else:
                tree[rk] = v if t in _PLAIN else _redact_tree(v, seen)
        return tree
    if isinstance(obj, list | tuple):
        items: list[object] = []
        for v in obj:
            t = type(v)
            if t is str:
                rv = seen.get(v)
                items.append(rv if rv is not None else seen.setdefault(v, redact(v)))
            else:
                items.append(v if t in _PLAIN else _redact_tree(v, seen))
        return items
    return obj
