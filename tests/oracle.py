"""The oracle's rounding: an mpf rounded to a 16-bit dtype by nearest-candidate search.

The formulas are the ops' declared textbook formulas (OpSpec.textbook, evaluated at 200 bits on arb
balls by tests/arbmp.py, in mpmath where arb cannot vouch for a value and on a sample); they share no
code with aclnn_cli's stable float64 references, certified rounding or Decimal exact paths, and this
rounding shares none with its dtypes module.
"""

from __future__ import annotations

import functools
import math

import mpmath
import ml_dtypes
import numpy as np

from exactq import RATIONAL, Fraction

D_NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}

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


@functools.lru_cache(maxsize=None)
def rounder(np_dtype) -> Rounder:
    """The Rounder of a 16-bit dtype, made once: making one sorts all 65,536 values (it was most of the oracle's
    time where a few values are rounded at a time)."""
    return Rounder(np_dtype)


# (precision with the hidden bit, the smallest normal exponent, the largest exponent) of each float dtype
_FORMATS = {"float32": (24, -126, 127), "float16": (11, -14, 15), "bfloat16": (8, -126, 127)}


def fraction_bits(v: Fraction, name: str) -> int:
    """The bit pattern of the rational v rounded once to the float dtype `name`, nearest, ties to even: in integers
    (q = v / quantum by divmod, the remainder against half the denominator), sharing nothing with mpmath or the
    tool. Zero is +0 (an exact value carries no sign); beyond the largest finite value's half ulp, infinity."""
    p, emin, emax = _FORMATS[name]
    negative, a = v < 0, abs(Fraction(v))
    if a == 0:
        value = 0.0
    else:
        n, d = a.numerator, a.denominator
        e = n.bit_length() - d.bit_length()  # 2^e <= a < 2^(e+1), after the correction below
        if (n << max(0, -e)) < (d << max(0, e)):
            e -= 1
        shift = p - 1 - max(e, emin)  # a * 2^shift in units of the quantum (a subnormal's is fixed at emin's)
        q, r = divmod(n << shift, d) if shift >= 0 else divmod(n, d << -shift)
        den = d if shift >= 0 else d << -shift
        if 2 * r > den or (2 * r == den and q & 1):
            q += 1
        value = float("inf") if q and (q.bit_length() - 1 - shift) > emax else math.ldexp(q, -shift)
    value = -value if negative else value
    if name == "float32":
        return int(np.array(value, np.float32).view(np.uint32))
    return int(np.array(value, np.float64).astype(D_NP[name]).view(np.uint16))


def rounded_bits(values: list, dtype) -> np.ndarray:
    """Each exact value (Fraction or mpf) rounded once to dtype, as its bit pattern. Fractions go through
    fraction_bits, checked against mpmath's own rounding on a sample of them; mpf values through mpmath."""
    name = np.dtype(dtype.np_dtype).name
    fractions = all(isinstance(v, (*RATIONAL, int)) for v in values)
    if fractions:
        bits = np.array([fraction_bits(v, name) for v in values], np.uint32 if name == "float32" else np.uint16)
        rng = np.random.default_rng(len(values))
        sample = rng.choice(len(values), min(64, len(values)), replace=False) if len(values) else []
        assert all(bits[k] == _mpmath_bits([values[k]], dtype)[0] for k in sample)
        return bits
    return _mpmath_bits(values, dtype)


def _mpmath_bits(values: list, dtype) -> np.ndarray:
    wide = max((v.numerator.bit_length() + v.denominator.bit_length() for v in values if isinstance(v, RATIONAL)),
               default=0)  # (a quotient exact enough that rounding it again to 24 bits cannot round twice)
    if np.dtype(dtype.np_dtype) == np.float32:  # (float32: through mpmath at 24 bits, round half even)
        with mpmath.workprec(PREC + wide):
            out = []
            for v in values:
                mv = mpmath.mpf(v.numerator) / v.denominator if isinstance(v, RATIONAL) else mpmath.mpf(v)
                lead = int(mpmath.frexp(mv)[1]) - 1 if mv else 0  # 2^lead <= |mv| < 2^(lead + 1)
                bits = 24 - max(0, -126 - lead)  # (a subnormal keeps fewer: rounded there once, not twice)
                if bits < 1:  # (under 2^-149: half the smallest subnormal or more rounds up to it, a tie to 0)
                    half = mpmath.mpf(2) ** -150
                    out.append(math.copysign(2.0**-149 if abs(mv) > half else 0.0, float(mv)))
                    continue
                with mpmath.workprec(bits):
                    out.append(float(+mv))
        return np.array(out, np.float32).view(np.uint32)
    r = rounder(dtype.np_dtype)
    with mpmath.workprec(PREC + wide):
        return np.array([r(mpmath.mpf(v.numerator) / v.denominator if isinstance(v, RATIONAL) else v) for v in values],
                        np.uint16)
