"""The oracle's rounding: an mpf rounded to a 16-bit dtype by nearest-candidate search.

The formulas are the ops' declared textbook formulas (OpSpec.textbook, evaluated in mpmath at 200
bits); they share no code with aclnn_cli's stable float64 references, certified rounding or Decimal
exact paths, and this rounding shares none with its dtypes module.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np

PREC = 200


class Rounder:
    """Round an mpf to a 16-bit dtype by comparing with every representable neighbour exactly."""

    def __init__(self, np_dtype):
        bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        vals = bits.view(np_dtype).astype(np.float64)
        finite = np.isfinite(vals) & ~((vals == 0) & np.signbit(vals))
        order = np.argsort(vals[finite], kind="stable")
        self.values = vals[finite][order]
        self.bits = bits[finite][order]
        top = self.values[-1]
        self.overflow = top + (top - self.values[-2])  # where +inf sits on the grid (even significand)
        self.np_dtype = np_dtype

    def __call__(self, v) -> int:
        """Bit pattern of the nearest value, ties to even significand; signed zeros kept."""
        with mpmath.workprec(PREC):
            negative = v < 0
            a = -v if negative else v
            i = int(np.searchsorted(self.values, float(a)))
            cands = []
            for j in range(max(i - 2, 0), min(i + 2, len(self.values))):
                if self.values[j] >= 0:
                    cands.append((abs(mpmath.mpf(self.values[j]) - a), int(self.bits[j]) & 1, int(self.bits[j])))
            inf_bits = int(np.array(np.inf, dtype=np.float64).astype(self.np_dtype).view(np.uint16))
            cands.append((abs(mpmath.mpf(self.overflow) - a), 0, inf_bits))
            best = min(cands)[2]
            return best | 0x8000 if negative else best


def round_all(values: list, r: Rounder) -> np.ndarray:
    """Rounder's bits for every mpf. Where the float64 nearest v lies clearly off every midpoint of the
    16-bit grid (by more than 2^-50 relative; float(v) is within 2^-53) the float64 decides, else Rounder."""
    f = np.array([float(v) for v in values])
    a = np.abs(f)
    keep = r.values >= 0
    inf_bits = int(np.array(np.inf).astype(r.np_dtype).view(np.uint16))
    grid = np.append(r.values[keep], r.overflow)
    gbits = np.append(r.bits[keep].astype(np.int64), inf_bits)
    i = np.clip(np.searchsorted(grid, a), 1, grid.size - 1)
    mid = (grid[i - 1] + grid[i]) / 2
    bits = gbits[np.where(a < mid, i - 1, i)] | np.where(f < 0, 0x8000, 0)
    unsure = ~(np.abs(a - mid) > 2.0**-50 * a) | (a < 2.0**-1000)
    for k in np.flatnonzero(unsure):
        bits[k] = r(values[k])
    rng = np.random.default_rng(0)  # the shortcut agrees with Rounder itself on a sample
    for k in rng.choice(len(values), 300, replace=False):
        assert bits[k] == r(values[k])
    return bits


def rounded_bits(values: list, dtype) -> np.ndarray:
    """Each exact value (Fraction or mpf) rounded once to dtype, as its bit pattern."""
    if np.dtype(dtype.np_dtype) == np.float32:  # (float32: through mpmath at 24 bits, round half even)
        with mpmath.workprec(PREC):
            out = []
            for v in values:
                mv = mpmath.mpf(v.numerator) / v.denominator if isinstance(v, Fraction) else mpmath.mpf(v)
                with mpmath.workprec(24):
                    out.append(float(+mv))
        return np.array(out, np.float32).view(np.uint32)
    r = Rounder(dtype.np_dtype)
    with mpmath.workprec(PREC):
        return np.array([r(mpmath.mpf(v.numerator) / v.denominator if isinstance(v, Fraction) else v) for v in values],
                        np.uint16)
