"""A pickle reader for untrusted Flight Recorder dumps that cannot execute anything.

Plain ``pickle.load`` imports and calls whatever globals a file names (``os.system`` via
``__reduce__`` is the classic), so a dump copied from a compromised or merely foreign machine
could run code in the analyzer job. Flight Recorder dumps only ever hold dicts, lists, tuples,
strings, numbers, booleans and None — all of which pickle encodes with opcodes that need no
global lookup — so this unpickler refuses *every* global and persistent id. A file that needs one
is not a dump we understand, and we say so instead of importing it.
"""

from __future__ import annotations

import contextlib
import io
import pickle
from collections.abc import Collection, Iterator
from typing import Any

from stormotel.errors import UsageError

#: Refuse pickles larger than this before reading them into memory (Flight Recorder dumps of a
#: 2000-entry ring buffer with stack frames are a few MB).
MAX_DUMP_BYTES = 512 * 1024 * 1024
#: Deepest container nesting accepted (a dump is dict → list → dict → list of frames: ~6).
MAX_DEPTH = 100
#: Memory one unpickling may take beyond what the process already uses: plain data costs a
#: small multiple of its pickle size; a memo bomb asks for gigabytes and gets MemoryError.
UNPICKLE_BUDGET = 512 * 1024 * 1024
UNPICKLE_FACTOR = 16


class UnsafePickleError(UsageError, pickle.UnpicklingError):
    """The pickle asked for something other than plain containers and scalars."""


class _PlainDataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickleError(
            f"refused global {module}.{name}: Flight Recorder dumps hold only plain "
            "containers and scalars, so nothing is imported or called")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("refused persistent id: not a plain-data pickle")


def loads_plain(data: bytes, *, opaque_keys: Collection[str] = ()) -> Any:
    """Unpickle ``data`` allowing only plain containers and scalars.

    Refusing every global is sufficient: the opcodes that build arbitrary objects (REDUCE,
    BUILD, INST, OBJ, NEWOBJ) need a class or callable, and the only way to get one onto the
    stack is a global lookup through :meth:`find_class`. So the result can only be made of
    dicts, lists, tuples, sets, strings, bytes, numbers, booleans and None.

    Raises :class:`pickle.UnpicklingError` (or its subclass :class:`UnsafePickleError`) with a
    one-line reason for truncated, corrupt or unsafe input; never imports a module.
    ``opaque_keys``: see :func:`check_depth`.
    """
    if not data:
        raise pickle.UnpicklingError("empty file")
    try:
        with _address_space_budget(UNPICKLE_BUDGET + UNPICKLE_FACTOR * len(data)):
            obj = _PlainDataUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError:
        raise
    except EOFError as exc:
        raise pickle.UnpicklingError("truncated pickle (ran out of data)") from exc
    except pickle.UnpicklingError as exc:
        if "truncated" in str(exc):
            raise pickle.UnpicklingError("truncated pickle (ran out of data)") from exc
        raise pickle.UnpicklingError(f"corrupt pickle: {exc}") from exc
    except (ValueError, TypeError, IndexError, KeyError, RecursionError,
            AttributeError, OverflowError, MemoryError, UnicodeDecodeError) as exc:
        raise pickle.UnpicklingError(f"corrupt pickle: {exc}") from exc
    check_depth(obj, opaque_keys=opaque_keys)
    return obj


@contextlib.contextmanager
def _address_space_budget(extra: int) -> Iterator[None]:
    """Lower this process's soft address-space limit to what it uses now plus ``extra`` for
    the duration of one unpickling, so a memo bomb (``LONG_BINPUT 0xFFFFFFF0`` makes the C
    unpickler grow its memo table to gigabytes) fails with MemoryError instead of exhausting
    the machine. The soft limit is restored after (raising it back up to the unchanged hard
    limit needs no privilege). A no-op where ``resource`` or ``/proc`` is missing."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        with open("/proc/self/statm") as fh:
            used = int(fh.read().split()[0]) * resource.getpagesize()
    except (ImportError, OSError, ValueError):
        yield
        return
    budget = used + extra
    if soft != resource.RLIM_INFINITY and soft <= budget:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (budget, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def check_depth(obj: Any, *, opaque_keys: Collection[str] = ()) -> None:
    """Refuse containers nested deeper than :data:`MAX_DEPTH` (built from plain APPEND/SETITEM
    opcodes they need no mark), iteratively, so the readers after us can recurse safely.

    ``opaque_keys``: keys of a top-level dict whose values are not walked, because their reader
    takes only scalars at a fixed depth from them and refuses anything else (a Flight Recorder
    dump's ``entries``: half a million dicts whose walk cost more than the unpickling)."""
    if opaque_keys and type(obj) is dict:
        obj = {k: v for k, v in obj.items() if k not in opaque_keys}
    containers = (dict, list, tuple, set, frozenset)
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise pickle.UnpicklingError(f"pickle nested deeper than {MAX_DEPTH} levels")
        children = item.values() if type(item) is dict else item
        stack.extend((c, depth + 1) for c in children if type(c) in containers)
