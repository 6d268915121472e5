"""A chunk's error sums, and the precision each is taken to (compare.Metrics adds them chunk by chunk).

Relative and ulp errors are non-negative: summed in float32 where they are float32, pairwise, within (log2 n + 27) u
of the sum itself. The error balance's terms have both signs, and a cancelling sum has no relative bound: it is
summed in float64. Squares are summed in the work type where they do not overflow (NumPy's own loop, never BLAS,
whose order of addition depends on the CPU).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .compare import ElementErrors


def total64(x: np.ndarray) -> float:
    """sum(x) accumulated in float64: einsum's sequential sum, a tenth faster than np.add.reduce's cast and pairwise
    sum, with an error bound of n * 2^-53 of the sum of |x| (1e-11 for a chunk), far below any threshold. The error
    balance's sum (terms of both signs, whose sum may cancel far below the sum of |x|) is taken this way."""
    return float(np.einsum("i->", x.ravel(), dtype=np.float64))


def magnitude_sum(x: np.ndarray) -> float:
    """sum(x) of a chunk's non-negative errors (relative, ulp): NumPy's pairwise sum in float32 where they are float32
    (np.add.reduce: eight accumulators over blocks of 128, then halving), within (log2 n + 27) u of the sum itself
    (a chunk of 65,536: 2.6e-6 of it; chunks are added in float64), the precision of the MERE and the mean ulp error;
    half the time of total64, which a sum overflowing float32 and float64 errors take."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _magnitude_sum(x)


def _magnitude_sum(x: np.ndarray) -> float:
    """magnitude_sum, where the caller has floating-point warnings off."""
    x = x.ravel()
    if x.dtype == np.float32:
        s = float(np.add.reduce(x))
        if math.isfinite(s):
            return s
    return total64(x)


def sum_squares(x: np.ndarray) -> float:
    """sum(x^2), in the work type when that does not overflow, else in float64. NumPy's own loop (einsum), not
    BLAS's dot: BLAS picks its kernel, and so its order of addition, by the CPU (the same case's metrics would
    differ in the last bits from one machine to another)."""
    with np.errstate(over="ignore"):
        return _sum_squares(x)


def _sum_squares(x: np.ndarray) -> float:
    """sum_squares, where the caller has floating-point warnings off."""
    x = x.ravel()
    s = float(np.einsum("i,i->", x, x))
    if math.isfinite(s):
        return s
    w = x.astype(np.float64)
    return float(np.einsum("i,i->", w, w))


def error_sums(e: "ElementErrors") -> tuple[float, float, float, float]:
    """A chunk's sums of relative, signed, squared and ulp errors, as magnitude_sum, total64, sum_squares and
    magnitude_sum take them: one switch of NumPy's error state for the four (a switch costs as much as a sum of a
    few thousand elements, and Metrics.add runs once a chunk). Without ulp errors (not measured), the squares are
    not summed either: NaN for both."""
    with np.errstate(over="ignore", invalid="ignore"):
        if e.ulp is None:
            return _magnitude_sum(e.rel), total64(e.signed), math.nan, math.nan
        return _magnitude_sum(e.rel), total64(e.signed), _sum_squares(e.abs), _magnitude_sum(e.ulp)
