"""Exact sums of float64 values, as Fractions, without a Fraction per term.

Every finite float64 is m * 2^e with an integer m below 2^53. A row's terms are split into 26-bit halves of
their mantissas, grouped by exponent and summed by np.bincount (float64 sums of integers below 2^51: exact),
and the groups joined in Python integers: a few NumPy passes per row instead of a Fraction
addition (with its gcd) per term. Used where an exact pass needs whole-row sums but only a few elements
(BatchNorm's gradInput: `exact_at`).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

HALF = 26
PIECE = 1 << 25  # terms summed per bincount: each half below 2^26, so a piece's sums stay below 2^51, exact


def exact_row_sums(values: np.ndarray) -> list[Fraction]:
    """The exact sum of each row of a 2-D float64 array of finite values."""
    m, e = np.frexp(np.asarray(values, np.float64))
    mant = np.ldexp(m, 53).astype(np.int64)  # (exact: m has 53 bits)
    exp = e.astype(np.int64) - 53
    lo_part, hi_part = mant & ((1 << HALF) - 1), mant >> HALF  # (arithmetic shift: the sign stays in hi)
    sums = []
    for row_lo, row_hi, row_exp in zip(lo_part, hi_part, exp):
        floor = int(row_exp.min(initial=0))
        total = 0
        for s in range(0, row_exp.size, PIECE):
            at = row_exp[s:s + PIECE] - floor  # (bincount's float64 sums of integers below 2^51: exact)
            lo = np.bincount(at, weights=row_lo[s:s + PIECE])
            hi = np.bincount(at, weights=row_hi[s:s + PIECE])
            for shift in np.flatnonzero((lo != 0) | (hi != 0)).tolist():
                total += (int(lo[shift]) + (int(hi[shift]) << HALF)) << shift
        sums.append(Fraction(total) * Fraction(2) ** floor)
    return sums


NARROW_BITS = 24  # float32's significand: what `exact_row_dots` takes as its narrow factor
WIDE_HIGH = 53 - NARROW_BITS  # the wide factor's top bits, so each partial product fits float64's 53
NORMAL = 2.0**-1021  # a product of at most 53 bits at or above this is a normal float64: exact


def exact_row_dots(wide: np.ndarray, narrow: np.ndarray) -> list[Fraction] | None:
    """The exact sum of wide * narrow along each row of two 2-D float64 arrays, or None where the split below
    does not make every partial product exact (a narrow value wider than float32, a tiny or non-finite product).

    wide (any float64) is cut into its top 29 significand bits and the rest (at most 24 bits); each times a
    narrow value (at most 24 bits) has at most 53 bits, so float64 holds it exactly unless it falls below the
    normal range, and the products' row sums are exact_row_sums'."""
    wide, narrow = np.asarray(wide, np.float64), np.asarray(narrow, np.float64)
    with np.errstate(all="ignore"):
        if not (np.isfinite(wide).all() and np.isfinite(narrow).all()
                and (narrow.astype(np.float32).astype(np.float64) == narrow).all()):
            return None
        m, e = np.frexp(wide)
        high = np.ldexp(np.trunc(np.ldexp(m, WIDE_HIGH)), e - WIDE_HIGH)
        parts = np.concatenate([high * narrow, (wide - high) * narrow], axis=1)
    size = np.abs(parts)
    if not np.isfinite(parts).all() or ((size < NORMAL) & (size > 0)).any():
        return None
    return exact_row_sums(parts)


EXACT_SUM_UNITS = 2.0**52  # float64 sums of multiples of q stay exact while every partial is below 2^52 q


def quantum(values: np.ndarray) -> np.ndarray:
    """The largest power of two each float64 value is a whole multiple of (its lowest significand bit); inf where
    the value is 0 or not finite (no constraint: a zero adds nothing to round).

    Why: float64 additions of values that are all multiples of q, whose partial sums never exceed 2^52 q in
    magnitude, are exact in every order (each partial is a multiple of q held in 53 bits): a reference's sum of
    a few short terms (an embedding row hit twice) is then its exact value, and its rounding needs no exact pass."""
    v = np.asarray(values, np.float64)
    with np.errstate(all="ignore"):
        m, e = np.frexp(v)
        mant = np.where(np.isfinite(v), np.ldexp(np.abs(m), 53), 0).astype(np.int64)
        low = mant & -mant
        return np.where(mant != 0, np.ldexp(low.astype(np.float64), e - 53), np.inf)
