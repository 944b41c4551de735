"""The flight recorder: the last N samples in a fixed-length list, dumped atomically as JSON lines.

Memory is bounded by construction: the list holds the last N :class:`Sample` objects the
sampler already made (about 0.5 KB each with their integers, 3 MB at the default 6,000), so a
push is one list store on the sampling thread; numpy columns are built only when a dump or
snapshot asks, which is rare (an OOM). A dump is written to a temporary file in the target
directory and renamed into place, so a reader never sees half a dump, and it is bounded both
in lines and in bytes.

Dump format (``schema.RING_DUMP_SCHEMA``): the first line is a header object
``{"schema", "reason", "written_ns", "samples", "dropped_for_size", ...identity/context}``; every
following line is one sample ``{"timestamp_ns": int, "allocated": int|null, ...}`` oldest first.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from stormotel import schema
from stormotel.atomic import write_atomic
from stormotel.samplers.base import SAMPLE_FIELDS, Sample

__all__ = ["RingBuffer"]

_VALUE_FIELDS = SAMPLE_FIELDS[1:]
_DTYPE = np.dtype([("timestamp_ns", np.int64), *((f, np.float64) for f in _VALUE_FIELDS)])


class RingBuffer:
    """Fixed-capacity ring of samples; thread-safe push and snapshot."""

    def __init__(self, capacity: int = 6000) -> None:
        if capacity < 1:
            raise ValueError(f"ring capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._data: list[Sample | None] = [None] * capacity
        self._next = 0
        self._count = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._count

    def push(self, sample: Sample) -> None:
        with self._lock:
            self._data[self._next] = sample
            self._next = (self._next + 1) % self.capacity
            if self._count < self.capacity:
                self._count += 1

    def snapshot(self) -> np.ndarray:
        """The held samples as a structured array (missing values NaN), oldest first."""
        with self._lock:
            held = self._data[:self._count] if self._count < self.capacity else \
                self._data[self._next:] + self._data[:self._next]
        return np.array([(s.timestamp_ns, *(math.nan if (v := getattr(s, f)) is None else v
                                            for f in _VALUE_FIELDS))
                         for s in held if s is not None], dtype=_DTYPE)

    def dump(self, path: str | os.PathLike[str], header: Mapping[str, Any] | None = None,
             max_lines: int | None = None, max_bytes: int = 16 * 2**20) -> Path:
        """Write the newest samples (≤ ``max_lines`` and ≤ ``max_bytes``) atomically to ``path``."""
        rows = self.snapshot()
        if max_lines is not None:
            rows = rows[-max_lines:] if max_lines > 0 else rows[:0]
        columns = {"timestamp_ns": rows["timestamp_ns"].tolist()}
        for name in _VALUE_FIELDS:  # one vectorised conversion per column, NaN → null
            col = rows[name]
            missing = np.isnan(col)
            values: list[int | None] = np.where(missing, 0, col).astype(np.int64).tolist()
            for i in np.flatnonzero(missing).tolist():
                values[i] = None
            columns[name] = values
        lines = [json.dumps(dict(zip(columns, vals, strict=True)), separators=(",", ":"))
                 for vals in zip(*columns.values(), strict=True)]
        head = {"schema": schema.RING_DUMP_SCHEMA, "written_ns": time.time_ns(),
                **(header or {})}
        budget = max_bytes - len(json.dumps(head)) - 200
        kept, size = 0, 0
        for line in reversed(lines):  # newest survive the byte bound
            if size + len(line) + 1 > budget:
                break
            size += len(line) + 1
            kept += 1
        lines = lines[len(lines) - kept:]
        head.update(samples=len(lines), dropped_for_size=len(rows) - len(lines))
        return write_atomic(path, "\n".join(
            [json.dumps(head, separators=(",", ":"), default=str), *lines]) + "\n")
