"""A pickle reader for untrusted Flight Recorder dumps that cannot execute anything.

Plain ``pickle.load`` imports and calls whatever globals a file names (``os.system`` via
``__reduce__`` is the classic), so a dump copied from a compromised or merely foreign machine
could run code in the analyzer job. Flight Recorder dumps only ever hold dicts, lists, tuples,
strings, numbers, booleans and None — all of which pickle encodes with opcodes that need no
global lookup — so this unpickler refuses *every* global and persistent id. A file that needs one
is not a dump we understand, and we say so instead of importing it.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

#: Refuse pickles larger than this before reading them into memory (Flight Recorder dumps of a
#: 2000-entry ring buffer with stack frames are a few MB).
MAX_DUMP_BYTES = 512 * 1024 * 1024


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asked for something other than plain containers and scalars."""


class _PlainDataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickleError(
            f"refused global {module}.{name}: Flight Recorder dumps hold only plain "
            "containers and scalars, so nothing is imported or called")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("refused persistent id: not a plain-data pickle")


_PLAIN_SCALARS = (str, bytes, int, float, bool, type(None))


def _check_plain(obj: Any, depth: int = 0) -> None:
    """Belt and braces: the result must be made of plain containers and scalars only."""
    if depth > 64:
        raise UnsafePickleError("nesting deeper than 64 levels")
    if isinstance(obj, _PLAIN_SCALARS):
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            _check_plain(k, depth + 1)
            _check_plain(v, depth + 1)
        return
    if isinstance(obj, list | tuple | set | frozenset):
        for v in obj:
            _check_plain(v, depth + 1)
        return
    raise UnsafePickleError(f"unexpected {type(obj).__name__} object")


def loads_plain(data: bytes) -> Any:
    """Unpickle ``data`` allowing only plain containers and scalars.

    Raises :class:`pickle.UnpicklingError` (or its subclass :class:`UnsafePickleError`) with a
    one-line reason for truncated, corrupt or unsafe input; never imports a module.
    """
    if not data:
        raise pickle.UnpicklingError("empty file")
    try:
        obj = _PlainDataUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError:
        raise
    except EOFError as exc:
        raise pickle.UnpicklingError("truncated pickle (ran out of data)") from exc
    except pickle.UnpicklingError as exc:
        if "truncated" in str(exc):
            raise pickle.UnpicklingError("truncated pickle (ran out of data)") from exc
        raise pickle.UnpicklingError(f"corrupt pickle: {exc}") from exc
    except (ValueError, TypeError, IndexError, KeyError,
            AttributeError, OverflowError, MemoryError, UnicodeDecodeError) as exc:
        raise pickle.UnpicklingError(f"corrupt pickle: {exc}") from exc
    _check_plain(obj)
    return obj
