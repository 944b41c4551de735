"""``stormotel analyze --fr-pipe PREFIX``: every rank on this host dumps its Flight Recorder now.

torch's ProcessGroupNCCL creates a named pipe per rank when ``TORCH_NCCL_DEBUG_INFO_PIPE_FILE``
is set and the recorder is on (``DumpPipe`` in ProcessGroupNCCL.cpp: the file is
``<TORCH_NCCL_DEBUG_INFO_PIPE_FILE><rank>.pipe``, made with ``mkfifo``, opened
``O_RDONLY | O_NONBLOCK``); the watchdog's heartbeat monitor polls it and, when anything was
written, dumps the recorder through its ``DebugInfoWriter`` to
``<TORCH_FR_DUMP_TEMP_FILE><rank>`` (older releases: ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``;
default ``/tmp/nccl_trace_rank_``). The pipe variable (and ``TORCH_NCCL_DUMP_ON_TIMEOUT``) kept
its ``TORCH_NCCL_`` name in every release we found; the buffer and temp-file variables gained
``TORCH_FR_*`` spellings, read before the old ones (:data:`DUMP_FILE_VARIABLES`,
:data:`BUFFER_VARIABLES`; torch 2.13's FlightRecorder.hpp l.111).

The trigger writes one byte to each pipe it finds (non-blocking: a pipe nobody reads is
reported, not waited on), then waits — bounded — for each rank's dump file to be rewritten
and to stop growing, and copies the fresh dumps to a folder of their own named
``nccl_trace_rank_<r>`` (the next poke overwrites the originals), where the ordinary loader
(:func:`.fr_loader.load_dump_dir`) reads them.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: where a rank writes its dump: the newer name first (torch 2.13 reads both)
DUMP_FILE_VARIABLES = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
DEFAULT_DUMP_PREFIX = "/tmp/nccl_trace_rank_"
PIPE_VARIABLE = "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"
BUFFER_VARIABLES = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
DEFAULT_TIMEOUT_S = 30.0


def env_value(names: tuple[str, ...], env: Mapping[str, str]) -> str | None:
    """The first of ``names`` set (non-empty) in ``env``: new ``TORCH_FR_*`` before old."""
    for n in names:
        if env.get(n):
            return env[n]
    return None


def dump_prefix(env: Mapping[str, str] = os.environ) -> str:
    return env_value(DUMP_FILE_VARIABLES, env) or DEFAULT_DUMP_PREFIX


def find_pipes(prefix: str) -> dict[int, Path]:
    """``PREFIX<rank>.pipe`` files that are FIFOs, by rank."""
    base = Path(prefix)
    folder, stem = (base, "") if prefix.endswith(os.sep) else (base.parent, base.name)
    pat = re.compile(re.escape(stem) + r"(\d{1,7})\.pipe$")
    out: dict[int, Path] = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return out
    for name in names:
        m = pat.fullmatch(name)
        if not m:
            continue
        p = folder / name
        try:
            if stat.S_ISFIFO(p.stat().st_mode):
                out[int(m.group(1))] = p
        except OSError:
            continue
    return out


@dataclass
class TriggerResult:
    """The fresh dumps (copied to ``folder``), and what happened per rank."""

    folder: Path | None
    dumped: list[int] = field(default_factory=list)
    not_listening: list[int] = field(default_factory=list)  #: no reader on the pipe
    no_dump: list[int] = field(default_factory=list)  #: poked, no fresh dump in time
    pipes: dict[int, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _stamp(path: Path) -> tuple[float, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime, st.st_size


def poke(pipe: Path) -> bool:
    """Write one byte without blocking; False when no process reads the pipe."""
    try:
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.ENOENT, errno.EACCES):
            return False
        raise
    try:
        os.write(fd, b"1")
    except BlockingIOError:
        pass  # a full pipe was already poked
    finally:
        os.close(fd)
    return True


def trigger(prefix: str, *, env: Mapping[str, str] = os.environ,
            timeout_s: float | None = None, out_dir: Path | None = None) -> TriggerResult:
    """Poke every rank's pipe under ``prefix`` and collect the dumps written since."""
    pipes = find_pipes(prefix)
    res = TriggerResult(None, pipes={r: str(p) for r, p in pipes.items()})
    if not pipes:
        res.notes.append(
            f"--fr-pipe {prefix}: no pipe {prefix}<rank>.pipe on this host (torch makes one "
            f"per rank only with {PIPE_VARIABLE} set and the recorder on: "
            f"{' or '.join(BUFFER_VARIABLES)} > 0, on ProcessGroupNCCL)")
        return res
    dprefix = dump_prefix(env)
    before = {r: _stamp(Path(f"{dprefix}{r}")) for r in pipes}
    poked: list[int] = []
    for r, p in sorted(pipes.items()):
        try:
            ok = poke(p)
        except OSError as exc:
            res.notes.append(f"could not write to {p}: {exc.strerror or exc}")
            ok = False
        (poked if ok else res.not_listening).append(r)
    deadline = time.monotonic() + (timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S)
    waiting = set(poked)
    seen: dict[int, tuple[float, int]] = {}
    fresh: set[int] = set()
    while waiting and time.monotonic() < deadline:
        for r in sorted(waiting):
            now = _stamp(Path(f"{dprefix}{r}"))
            if now is None or now == before[r] or now[1] == 0:
                continue
            if seen.get(r) == now:  # rewritten and unchanged since the last look: complete
                fresh.add(r)
            seen[r] = now
        waiting -= fresh
        if waiting:
            time.sleep(0.2)
    res.no_dump = sorted(waiting)
    if fresh:
        folder = out_dir or Path(tempfile.mkdtemp(prefix="stormotel-fr-live-"))
        folder.mkdir(parents=True, exist_ok=True)
        for r in sorted(fresh):
            shutil.copyfile(f"{dprefix}{r}", folder / f"nccl_trace_rank_{r}")
        res.folder, res.dumped = folder, sorted(fresh)
    if res.not_listening:
        res.notes.append(f"no process reads the Flight Recorder pipe of rank(s) "
                         f"{res.not_listening} (the rank exited, or its process group is gone)")
    if res.no_dump:
        res.notes.append(
            f"rank(s) {res.no_dump} were poked but wrote no dump to {dprefix}<rank> in time: "
            f"the dump folder may differ (set {DUMP_FILE_VARIABLES[0]} or "
            f"{DUMP_FILE_VARIABLES[1]} here as the job has it), or the rank's watchdog thread "
            "is itself blocked; take its stack (py-spy dump)")
    return res
