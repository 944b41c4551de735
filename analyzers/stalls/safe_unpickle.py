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


def loads_plain(data: bytes) -> Any:
    """Unpickle ``data`` allowing only plain containers and scalars.

    Refusing every global is sufficient: the opcodes that build arbitrary objects (REDUCE,
    BUILD, INST, OBJ, NEWOBJ) need a class or callable, and the only way to get one onto the
    stack is a global lookup through :meth:`find_class`. So the result can only be made of
    dicts, lists, tuples, sets, strings, bytes, numbers, booleans and None.

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
    return obj
