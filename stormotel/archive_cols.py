"""The compact archive's columnar companion, written: :class:`ColumnsFile` beside each JSON file.

The layout (frames, header, digest, bounds) lives in :mod:`stormotel.archive_format`, which the
analyzer reads too; this module is the writer thread's side only: gathering a span's samples and
context lines and writing them as one frame after the JSON frame they cover is complete on disk,
so a writer killed at any instant leaves only complete frames that describe JSON that is there.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from stormotel.archive_format import (
    COLUMN_METRICS,
    MAX_FRAME_SAMPLES,
    MAX_TEXT_BYTES,
    VERSION,
    Column,
    Dtype,
    Header,
    encode_frame,
    frame_digest,
    plane,
)

__all__ = ["ColumnsFile"]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _column(values: list[Any]) -> tuple[Dtype, bool, list[bytes], int, bool] | None:
    """(dtype, delta, arrays, count, mask) of one gauge's values in a span; ``None`` for a value
    the companion does not hold exactly (the JSON stays the only record from there on)."""
    present = values
    mask = None
    if None in values:
        flags = [v is not None for v in values]
        present = [v for v in values if v is not None]
        mask = np.packbits(np.array(flags, dtype=bool)).tobytes()
    if all(type(v) is int for v in present):
        if present and not (min(present) >= _INT64_MIN and max(present) <= _INT64_MAX):
            return None
        arr = np.array(present, dtype=np.int64)
        body = plane(np.diff(arr, prepend=np.int64(0)).astype("<i8"))
        delta = True
        dtype: Dtype = "<i8"
    elif all(type(v) in (int, float) for v in present) and \
            all(math.isfinite(v) for v in present):
        if any(type(v) is int and not -(2**53) <= v <= 2**53 for v in present):
            return None  # the JSON's integer text would round differently
        body = plane(np.array(present, dtype="<f8"))
        delta, dtype = False, "<f8"
    else:
        return None
    return dtype, delta, ([mask] if mask is not None else []) + [body], len(present), \
        mask is not None


class ColumnsFile:
    """The companion being written beside one JSON file (writer thread only).

    Samples and context lines gather in lists until :meth:`frame` writes them as one zstd
    frame; once a value cannot be held exactly (:func:`_column`) or a write fails, the file
    stops growing (``broken``) and readers take the rest from the JSON.
    """

    def __init__(self, path: Path, rank: int, seq: int, level: int) -> None:
        import zstandard

        self.path = path
        self.rank = rank
        self.seq = seq
        self._cctx = zstandard.ZstdCompressor(level=level, write_checksum=True)
        # Truncated, not exclusive: a companion left without its JSON file (deleted) is stale.
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self.size = 0
        self.broken = False
        self.json_start = 0
        self.started = time.monotonic()
        self._t: list[int] = []
        self._values: dict[str, list[Any]] = {m.name: [] for m in COLUMN_METRICS}
        self._context: list[bytes] = []
        self.context_size = 0

    @property
    def pending(self) -> int:
        return len(self._t)

    def add(self, stamps: list[Any], columns: dict[str, list[Any]]) -> None:
        """One batch's samples (``columns``: metric name -> values, one per stamp)."""
        if self.broken:
            return
        if not all(type(t) is int for t in stamps):
            self.broken = True
            return
        self._t.extend(stamps)
        for name, values in self._values.items():
            values.extend(columns[name])

    def add_context(self, line: bytes) -> None:
        if not self.broken:
            self._context.append(line)
            self.context_size += len(line)

    def full(self, frame_samples: int) -> bool:
        """Whether a frame must end now to stay within what readers accept."""
        return self.pending >= min(frame_samples, MAX_FRAME_SAMPLES) or \
            self.context_size >= MAX_TEXT_BYTES // 2

    def frame(self, json_end: int, json_tail: bytes, resource: bytes,
              json_digest: tuple[str, Any] | None = None) -> None:
        """Write what gathered since the last frame, covering the JSON file's compressed bytes
        ``[json_start, json_end)`` (complete on disk before this is called); ``json_digest``:
        (algorithm, hasher fed exactly those bytes), from :func:`new_json_digest`. Without it
        the frame carries no digest, and readers do not use it."""
        t, self._t = self._t, []
        values = self._values
        self._values = {name: [] for name in values}
        context = b"".join(self._context)
        self._context = []
        self.context_size = 0
        self.started = time.monotonic()
        if self.broken:
            return
        if t and not (min(t) >= _INT64_MIN and max(t) <= _INT64_MAX):
            self.broken = True
            return
        arrays: list[bytes] = []
        cols: list[Column] = []
        tarr = np.array(t, dtype=np.int64)
        arrays.append(plane(np.diff(tarr, prepend=np.int64(0)).astype("<i8")))
        for name, vals in values.items():
            if all(v is None for v in vals):
                continue
            col = _column(vals)
            if col is None:
                self.broken = True
                return
            dtype, delta, bodies, count, mask = col
            cols.append(Column(name, dtype, delta, count, mask))
            arrays.extend(bodies)
        alg, hasher = json_digest if json_digest is not None else ("", None)
        header = Header(VERSION, self.rank, self.seq, len(t), t[0] if t else 0,
                        t[-1] if t else 0, self.json_start, json_end, json_tail.hex(),
                        len(resource), len(context), cols, alg, "")
        if hasher is not None:
            digest = frame_digest(hasher, header=header, payload=[resource, context, *arrays])
            header = msgspec.structs.replace(header, digest=digest or "")
        out = self._cctx.compress(encode_frame(header, resource, context, arrays))
        self.json_start = json_end
        try:
            os.write(self._fd, out)
        except OSError:
            self.broken = True
            raise
        self.size += len(out)

    def close(self) -> None:
        os.close(self._fd)
