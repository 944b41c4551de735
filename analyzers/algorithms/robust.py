"""Small vectorised statistics shared by the algorithms (no per-sample Python loops)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from stormotel.analyzers.algorithms.scratch import Scratch

#: MAD → standard deviation for normal data.
MAD_SCALE = 1.4826
#: Never divide by less than this (bytes): flat series have MAD 0, and the byte floors guard them.
SCALE_FLOOR = 1024.0 * 1024.0


#: Median and MAD are estimated on an evenly strided subsample of at most this many points:
#: the estimate's error is negligible (standard error ~1% of the spread) and two full
#: partitions per rank were the analyzer's largest cost on 1,024 ranks × 36,000 samples.
ROBUST_SAMPLE = 8192


def robust_z(x: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(z, median, scale) with scale = 1.4826·MAD floored at 1 MiB."""
    med, scale = robust_center(x)
    return (x - med) / scale, med, scale


def robust_center(x: np.ndarray, scratch: Scratch | None = None) -> tuple[float, float]:
    """(median, scale) of :func:`robust_z` without the z array: callers that need z only
    where the excess is already large compute it there. Each median partitions a work array
    in place; the deviations are taken from the subsample in its own order (a partitioned
    order is a slow case for the selection)."""
    step = max(1, x.shape[0] // ROBUST_SAMPLE)
    sub = (scratch or Scratch()).floats("robust_sample", len(range(0, x.shape[0], step)))
    np.copyto(sub, x[::step])
    med = median_in_place(sub)
    np.abs(np.subtract(x[::step], med, out=sub), out=sub)
    mad = median_in_place(sub)
    return med, max(MAD_SCALE * mad, SCALE_FLOOR)


def median_in_place(a: np.ndarray) -> float:
    """``np.median(a)``, reordering ``a``: for finite values one selection of the upper middle
    element and the maximum below it (the lower middle one, for an even size) — the same two
    values np.median averages, without its second selection and its sort of NaNs to the end;
    their mean as np.mean takes it (its reduction starts from ``0.0 +`` the second value)."""
    n = a.shape[0]
    if n == 0 or not all_finite(a):
        return float(np.median(a, overwrite_input=True))
    mid = n // 2
    a.partition(mid)
    if n % 2:
        return float(a[mid])
    return (float(a[:mid].max()) + (0.0 + float(a[mid]))) / 2


#: Up to this many values, :func:`median_of` sorts a Python list instead of calling numpy.
SMALL_MEDIAN = 16


def median_of(a: np.ndarray) -> float:
    """``np.median(a)`` of a small slice, leaving it untouched (float np.median also imports
    numpy.ma on first use, a tenth of a short run's start-up). A few finite non-zero values
    (a rise's baseline level: five samples per rank) are sorted as Python floats: the same
    middle values np.median selects (zeros go to numpy, whose order of 0.0 and -0.0 a sort
    need not keep)."""
    n = a.shape[0]
    if 0 < n <= SMALL_MEDIAN:
        vals = sorted(float(x) for x in a.tolist())
        if all(x != 0.0 and math.isfinite(x) for x in vals):
            mid = n // 2
            return vals[mid] if n % 2 else (vals[mid - 1] + (0.0 + vals[mid])) / 2
    return median_in_place(np.array(a, dtype=np.float64))


def all_finite(x: np.ndarray) -> bool:
    """True when every value is finite, in one reduction and no temporary: a NaN or an
    infinity makes the sum non-finite, and a finite sum cannot contain one. A sum that
    overflows answers False, which callers treat as "check each value": never a wrong True."""
    return math.isfinite(np.add.reduce(x)) if x.shape[0] else True


def finite_samples(t_ns: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The samples where ``x`` is finite: the arrays themselves (no copy) when all are."""
    if all_finite(x):
        return t_ns, x
    ok = np.isfinite(x)
    return t_ns[ok], x[ok]


def finite_ends(x: np.ndarray) -> tuple[int, int]:
    """Indices of the first and last finite values of ``x``, which must have one; without a
    pass over the array when both ends are finite."""
    n = x.shape[0]
    if n and np.isfinite(x[0]) and np.isfinite(x[n - 1]):
        return 0, n - 1
    ok = np.flatnonzero(np.isfinite(x))
    return int(ok[0]), int(ok[-1])


@dataclass(frozen=True)
class LinearFit:
    slope: float  # units per second
    intercept: float
    r2: float


def linear_fit(t_s: np.ndarray, y: np.ndarray, scratch: Scratch | None = None) -> LinearFit:
    """Ordinary least squares y = a·t + b with R²; t in seconds (centred for precision)."""
    if t_s.shape[0] < 2:
        return LinearFit(0.0, float(y.mean()) if y.size else 0.0, 0.0)
    n = t_s.shape[0]
    work = scratch or Scratch()
    tm, ym, dt, dy, slope = _slope(t_s, y, work)
    if slope is None:
        return LinearFit(0.0, float(ym), 0.0)
    ss_tot = float(np.einsum("i,i->", dy, dy))
    resid = np.subtract(dy, np.multiply(dt, slope, out=work.floats("fit_resid", n)),
                        out=work.floats("fit_resid", n))
    r2 = 1.0 - float(np.einsum("i,i->", resid, resid)) / ss_tot if ss_tot > 0 else 0.0
    return LinearFit(slope, float(ym - slope * tm), r2)


def linear_slope(t_s: np.ndarray, y: np.ndarray, scratch: Scratch | None = None) -> float:
    """The slope of :func:`linear_fit` (the same arithmetic) without R²: enough to rule a
    fit out when only a rising line would matter."""
    if t_s.shape[0] < 2:
        return 0.0
    return _slope(t_s, y, scratch or Scratch())[4] or 0.0


def _slope(t_s: np.ndarray, y: np.ndarray, work: Scratch
           ) -> tuple[float, float, np.ndarray, np.ndarray, float | None]:
    """(mean t, mean y, centred t, centred y, slope or None when t does not vary)."""
    n = t_s.shape[0]
    # Element-wise sums, not ``@``: a BLAS dot spins up its thread pool, which on a busy
    # shared machine costs far more than the arithmetic (measured: 100x slower under load).
    tm, ym = np.add.reduce(t_s) / n, np.add.reduce(y) / n  # x.mean()'s arithmetic, unwrapped
    dt = np.subtract(t_s, tm, out=work.floats("fit_dt", n))
    dy = np.subtract(y, ym, out=work.floats("fit_dy", n))
    sxx = float(np.einsum("i,i->", dt, dt))
    if sxx == 0.0:
        return tm, ym, dt, dy, None
    return tm, ym, dt, dy, float(np.einsum("i,i->", dt, dy)) / sxx


def runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (inclusive) indices of the True runs of a boolean mask."""
    m = np.concatenate(([False], mask.astype(bool), [False]))
    d = np.diff(m.astype(np.int8))
    starts = np.flatnonzero(d == 1)
    ends = np.flatnonzero(d == -1) - 1
    return starts, ends


def rolling_min(x: np.ndarray, window: int) -> np.ndarray:
    """Trailing minimum over ``window`` samples in O(N log window) by doubling spans."""
    out = x.copy()
    span = 1
    while span < window:
        step = min(span, window - span)
        shifted = np.empty_like(out)
        shifted[:step] = np.inf
        shifted[step:] = out[:-step]
        np.minimum(out, shifted, out=out)
        span += step
    return out
