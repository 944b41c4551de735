"""The JSON decoder every file source uses: orjson (a declared dependency, several times faster
than the standard library on OTLP lines and Stormlog exports), else the standard ``json``."""

from __future__ import annotations

from typing import Any

try:
    import orjson as _orjson

    loads: Any = _orjson.loads
    JSONDecodeError: tuple[type[Exception], ...] = (_orjson.JSONDecodeError,)
except ImportError:  # pragma: no cover - only a broken install lacks orjson
    import json as _json

    loads = _json.loads
    JSONDecodeError = (ValueError,)
