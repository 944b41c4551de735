"""Making untrusted text safe to print and to log: no control characters, no credentials.

Job ids, file names, server bodies and exception messages come from input the analyzer does not
control. Printed raw, an escape sequence can recolour or erase a terminal and a newline can forge
a second ``Verdict:`` or logfmt summary line; a URL with ``user:password@`` or a server that
echoes request headers would put a secret into logs. Every line the commands print about input
goes through :func:`one_line` (or :func:`printable` for values inside a line).
"""

from __future__ import annotations

import re
import unicodedata

#: Longest message line printed for one error (the rest is cut with a marker).
MAX_LINE_CHARS = 500

_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
_SECRET_QUERY = re.compile(
    r"(?i)([?&](?:access_token|token|api_key|apikey|password|passwd|secret|auth)=)[^&#\s]*")
_SECRET_HEADER = re.compile(
    r"(?i)\b(authorization|proxy-authorization|x-api-key|x-auth-token|cookie|set-cookie)"
    r"(\"?\s*[:=]\s*\"?)(?:(?:bearer|basic|token)\s+)?[^\s\",;}]+")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")


def redact(text: str) -> str:
    """``text`` with URL credentials, secret query parameters and auth headers replaced."""
    text = _USERINFO.sub("<redacted>@", text)
    text = _SECRET_QUERY.sub(r"\1<redacted>", text)
    text = _SECRET_HEADER.sub(r"\1\2<redacted>", text)
    return _BEARER.sub(r"\1 <redacted>", text)


def redact_url(url: str) -> str:
    """A URL safe to log: no ``user:password@``, no ``?token=`` values."""
    return _SECRET_QUERY.sub(r"\1<redacted>", _USERINFO.sub("", url))


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
    return "".join(_escape(c) if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")
                   else c for c in s)


def one_line(value: object, limit: int = MAX_LINE_CHARS) -> str:
    """One printable, redacted line for a message about untrusted input."""
    return printable(redact(str(value)), limit)
