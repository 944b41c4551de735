"""The JSON decoder every file source uses: orjson (a declared dependency, several times faster
than the standard library on OTLP lines and Stormlog exports), else the standard ``json``."""

from __future__ import annotations

import json as _json
import re
from typing import Any

try:
    import orjson as _orjson

    _fast: Any = _orjson.loads
except ImportError:  # pragma: no cover - only a broken install lacks orjson
    _fast = _json.loads

#: orjson refuses documents nested deeper than this; the standard-library fallback is bounded by
#: the interpreter's recursion limit, and its RecursionError becomes a decode error here.
MAX_DEPTH = 1024

#: What :func:`loads` raises for invalid JSON (``orjson.JSONDecodeError`` is a ``ValueError``).
JSONDecodeError: tuple[type[Exception], ...] = (ValueError,)


def loads(data: bytes | memoryview | str) -> Any:
    """Decode JSON fast; fall back to the standard library for what orjson rejects but Python's
    ``json.dump`` writes (``NaN``, ``Infinity``), so such values reach the sources' validation
    and are counted, instead of the whole file being unreadable."""
    try:
        return _fast(data)
    except ValueError:
        try:
            return _json.loads(bytes(data) if isinstance(data, memoryview) else data)
        except RecursionError:
            raise ValueError("JSON nested too deeply (more than about "
                             f"{MAX_DEPTH} levels)") from None


_NOT_BLANK = re.compile(rb"[^ \t\n\r\x0b\x0c]")  # what bytes.strip() keeps


def first_byte(data: bytes | bytearray) -> bytes:
    """The first byte that is not whitespace (``b""`` for a blank file), without copying the
    file the way ``data.strip()`` does."""
    m = _NOT_BLANK.search(data)
    return bytes(m.group()) if m else b""


def looks_like_otlp_json(first_line: bytes) -> bool:
    """A request's keys near the start, or a bare ResourceMetrics/ResourceSpans line."""
    head = first_line[:200]
    return any(k in head for k in (b'"resourceMetrics"', b'"resourceSpans"', b'"resource_metrics"',
                                   b'"resource_spans"')) or \
        (first_line.lstrip()[:1] == b"{" and b'"resource"' in first_line and
         any(k in first_line for k in (b'"scopeMetrics"', b'"scopeSpans"')))
