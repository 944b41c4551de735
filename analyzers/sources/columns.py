"""Turning parsed columns into validated numpy arrays in one vectorised pass.

Parsers collect plain Python lists per column (no per-sample objects), or whole numpy arrays
where they parse in C; these helpers convert a whole column at once and fall back to an
element-wise pass only when the fast conversion fails, so one wrong-typed value costs a counted
skip, not the file. Arrays get the same checks as lists (the same skips, counted the same way).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
from stormotel.analyzers.sources.base import LoadContext

#: No accelerator has a petabyte of memory: a byte value above this is an input error (a
#: 1e300 sample must never become the high-confidence first cause).
MAX_PLAUSIBLE_BYTES = float(2**50)
INT64_MAX = 2**63 - 1
#: A parsed column: Python values, or an array already parsed.
Column: TypeAlias = Sequence[object] | np.ndarray


def _slow_float(values: Column, ctx: LoadContext, where: str, name: str
                ) -> tuple[np.ndarray, np.ndarray]:
    out = np.empty(len(values), dtype=np.float64)
    wrong = np.zeros(len(values), dtype=bool)
    bad = 0
    first = None
    for i, v in enumerate(values):
        if v is None:
            out[i] = np.nan
            continue
        try:
            if isinstance(v, bool | dict | list):
                raise TypeError(type(v).__name__)
            out[i] = float(v)
        except (TypeError, ValueError):
            out[i] = np.nan
            wrong[i] = True
            bad += 1
            if first is None:
                first = f"{name}={v!r} is not a number"
    if bad:
        ctx.skip("wrong_type", where, first or name, bad)
    return out, wrong


def bytes_column(values: Column, ctx: LoadContext, where: str, name: str) -> np.ndarray:
    """A byte-count column as float64; None → NaN (not reported); NaN/inf/negative → counted.

    Invalid values become NaN so the rest of the sample survives; the timeline treats NaN as
    "not reported".
    """
    wrong: np.ndarray | None = None
    try:
        arr = np.asarray(values, dtype=np.float64)
        if arr.ndim != 1:
            raise TypeError("nested value")
    except (TypeError, ValueError):
        arr, wrong = _slow_float(values, ctx, where, name)
    nonfinite = ~np.isfinite(arr)
    if nonfinite.any():
        # None means "not reported" (Stormlog v4 nullable counters), not a bad value; NaN from a
        # failed conversion was already counted as wrong_type.
        if not isinstance(values, np.ndarray):
            nonfinite &= np.fromiter((v is not None for v in values), bool, len(values))
        if wrong is not None:
            nonfinite &= ~wrong
    n_bad = int(nonfinite.sum())
    if n_bad:
        ctx.skip("nan_bytes", where, f"{name} is NaN or infinite", n_bad)
        arr[nonfinite] = np.nan
    neg = arr < 0
    n_neg = int(neg.sum())
    if n_neg:
        ctx.skip("negative_bytes", where, f"{name} is negative", n_neg)
        arr[neg] = np.nan
    huge = arr > MAX_PLAUSIBLE_BYTES
    n_huge = int(huge.sum())
    if n_huge:
        ctx.skip("impossible_bytes", where,
                 f"{name} above {MAX_PLAUSIBLE_BYTES} bytes (no device has that much memory)",
                 n_huge)
        arr[huge] = np.nan
    return arr


def time_column(values: Column, ctx: LoadContext, where: str, name: str
                ) -> tuple[np.ndarray, np.ndarray]:
    """Nanosecond timestamps as int64 plus a mask of the valid ones (positive integers)."""
    try:
        arr = np.asarray(values, dtype=np.int64)
        if arr.ndim != 1:  # [[t]] for every row converts to 2-D: read one by one instead
            raise TypeError("nested value")
        ok = arr > 0
    except (TypeError, ValueError, OverflowError):
        arr = np.zeros(len(values), dtype=np.int64)
        ok = np.zeros(len(values), dtype=bool)
        for i, v in enumerate(values):
            try:
                if isinstance(v, bool) or v is None:
                    raise TypeError
                iv = int(v)
            except (TypeError, ValueError, OverflowError):
                continue
            if 0 < iv <= INT64_MAX:
                arr[i], ok[i] = iv, True
    n_bad = int((~ok).sum())
    if n_bad:
        ctx.skip("bad_timestamp", where, f"{name} is missing, not an integer or not positive",
                 n_bad)
    return arr, ok
