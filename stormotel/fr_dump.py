"""Ask torch's Flight Recorder for a dump at the moment the tracker took a stack snapshot, so the
stacks and the communication state describe the same instant.

Only where the training process already imported torch and enabled the recorder
(``TORCH_NCCL_TRACE_BUFFER_SIZE`` or ``TORCH_FR_BUFFER_SIZE`` > 0): the tracker never imports
torch for this. The dump call is the one the installed torch offers — ``_dump_fr_trace``
(NCCL and gloo, recent releases) or ``_dump_nccl_trace`` (NCCL only, older releases); with
neither, nothing is written and the docs say which versions work (docs/stalls.md).

The dump leaves out the recorder's own stack traces (:func:`_call_without_stacks`): with them,
torch symbolises each entry's frames, and the first time that imports ``torch._dynamo`` and
``torch._inductor`` inside the rank (measured, torch 2.13 on gloo: about 1 s alone; with 20
hung ranks on 2 cores no dump was written in the 14 s before the launcher's SIGTERM: their
stack snapshots show the dump thread still inside that import, and in one CI run a rank's
tracker stopped sampling for 12 s meanwhile). Without them the dump takes under a
millisecond and is written in the middle of a gloo hang. The tracker's stack snapshot of the
same moment already says where every thread is.

The call still runs in a thread of its own (:func:`dump_in_background`), never on the tracker's
sampling thread: a recorder that blocks (a device call in NCCL's, a release that differs) then
costs one idle thread, not the tracker.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

log = logging.getLogger("stormotel")

#: torch's own precedence (FlightRecorder.hpp, torch 2.13 l.111: getCvarInt reads the list
#: backwards, so the newer TORCH_FR_ name wins when both are set)
BUFFER_VARIABLES = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
DUMP_FUNCTIONS = ("_dump_fr_trace", "_dump_nccl_trace")


def recorder_enabled(env: Mapping[str, str]) -> bool:
    """The buffer size torch itself reads decides: the first of :data:`BUFFER_VARIABLES` set
    (``TORCH_FR_BUFFER_SIZE=0`` beside an old non-zero one turns the recorder off)."""
    for var in BUFFER_VARIABLES:
        if var not in env:
            continue
        try:
            return int(env[var]) > 0
        except ValueError:
            return False
    return False


def dump_flight_recorder(directory: Path, rank: int,
                         env: Mapping[str, str] = os.environ) -> Path | None:
    """``directory/nccl_trace_rank_<rank>`` (the name torch's own dump-on-timeout uses), written
    atomically and overwritten by a later stall; None when the recorder is off or unavailable."""
    torch = sys.modules.get("torch")
    if torch is None or not recorder_enabled(env):
        return None
    c10d = getattr(getattr(torch, "_C", None), "_distributed_c10d", None)
    for name in DUMP_FUNCTIONS:
        fn = getattr(c10d, name, None)
        if fn is None:
            continue
        try:
            data = _call_without_stacks(fn)
        except Exception as e:  # no process group yet, or the recorder refused
            log.debug("stormotel: Flight Recorder dump (%s) failed: %s", name, e)
            return None
        if not isinstance(data, bytes | bytearray):
            return None
        path = Path(directory) / f"nccl_trace_rank_{rank}"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")  # beside it: the rename is atomic
        tmp.write_bytes(bytes(data))
        os.replace(tmp, path)
        return path
    return None


def _call_without_stacks(fn: Callable[..., object]) -> object:
    """The dump without the recorder's stack traces (the module docstring says why).
    Releases whose dump takes no arguments are called without them."""
    try:
        return fn(True, False, False)  # includeCollectives, includeStackTraces, onlyActive
    except TypeError:
        return fn()


_in_flight = threading.Lock()


def dump_in_background(directory: Path, rank: int, env: Mapping[str, str] = os.environ
                       ) -> threading.Thread | None:
    """:func:`dump_flight_recorder` in a daemon thread; at most one at a time (a dump still
    waiting on a hung collective is not joined by another). None when one is in flight or the
    recorder is off."""
    if sys.modules.get("torch") is None or not recorder_enabled(env):
        return None
    if not _in_flight.acquire(blocking=False):
        return None

    def run() -> None:
        try:
            dump_flight_recorder(directory, rank, env)
        except OSError as e:
            log.warning("stormotel: Flight Recorder dump failed (%s)", e)
        finally:
            _in_flight.release()

    thread = threading.Thread(target=run, name="stormotel-fr-dump", daemon=True)
    thread.start()
    return thread
