"""Exact sums of float64 values, as Fractions, without a Fraction per term.

Every finite float64 is m * 2^e with an integer m below 2^53. A row's terms are split into 26-bit halves of
their mantissas, grouped by (row, exponent) and summed by np.bincount (float64 sums of integers below 2^51:
exact), and the groups joined in Python integers: a few NumPy passes per call (many rows at once) instead of a
Fraction addition (with its gcd) per term. Used where an exact pass needs whole-row sums but only a few elements
(BatchNorm's gradInput: `exact_at`).
"""

from __future__ import annotations

import operator
from fractions import Fraction

import numpy as np

HALF = 26
PIECE = 1 << 25  # terms summed per bincount: each half below 2^26, so a piece's sums stay below 2^51, exact
GROUP = 1 << 22  # (row, exponent) bins, and terms, of one bincount: rows are summed together up to this many


def exact_row_sums(values: np.ndarray) -> list[Fraction]:
    """The exact sum of each row of a 2-D float64 array of finite values.

    One bincount sums many rows at once (each row's bins after the previous row's): a call on many short rows (a
    contraction's products, a run of a few terms) costs a few NumPy passes in all, not a few per row; then one
    Fraction per row, made from its integer numerator over its power of two."""
    values = np.asarray(values, np.float64)
    m, e = np.frexp(values)
    mant = np.ldexp(m, 53).astype(np.int64)  # (exact: m has 53 bits)
    exp = e.astype(np.int64) - 53
    floor = np.minimum(exp.min(axis=1, initial=0), 0)
    at = exp - floor[:, None]  # each term's exponent above its row's lowest (at most ~2,100)
    lo_part, hi_part = mant & ((1 << HALF) - 1), mant >> HALF  # (arithmetic shift: the sign stays in hi)
    rows, n = values.shape
    totals = [0] * rows
    span = int(at.max(initial=0)) + 1
    for c in range(0, n, PIECE):
        width = min(PIECE, n - c)
        sparse = span > width  # (more places than terms: bins only for the (row, place) keys that occur)
        step = max(1, GROUP // width)
        for r in range(0, rows, step):
            group = slice(r, r + step)
            count = min(step, rows - r)
            index = (at[group, c:c + width] + (np.arange(count) * span)[:, None]).reshape(-1)
            keys, index = np.unique(index, return_inverse=True) if sparse else (None, index)
            size = keys.size if sparse else count * span
            lo = np.bincount(index, weights=lo_part[group, c:c + width].reshape(-1), minlength=size)
            hi = np.bincount(index, weights=hi_part[group, c:c + width].reshape(-1), minlength=size)
            bins = np.flatnonzero((lo != 0) | (hi != 0))  # (float64 sums of integers below 2^51: exact)
            row, shift = np.divmod(keys[bins] if sparse else bins, span)
            for i, s, low, high in zip((row + r).tolist(), shift.tolist(), lo[bins].astype(np.int64).tolist(),
                                       hi[bins].astype(np.int64).tolist()):
                totals[i] += (low + (high << HALF)) << s
    return [Fraction(total, 1 << -f) for total, f in zip(totals, floor.tolist())]


_numerator = np.frompyfunc(operator.attrgetter("numerator"), 1, 1)
_denominator = np.frompyfunc(operator.attrgetter("denominator"), 1, 1)
as_fractions_of = np.frompyfunc(Fraction, 2, 1)
as_fractions_of.__doc__ = "num / den, element by element (broadcast object arrays of ints), as Fractions."


def over_common(q: np.ndarray, axis: int = 1) -> tuple[np.ndarray, np.ndarray] | None:
    """An object array of rationals (Fractions, ints) as (numerators, denominators), object arrays of Python ints
    with q == num / den, the denominator common along `axis` (kept, of length 1: the lcm, for float inputs the
    largest power of two); None where an element is not rational (a float inf or NaN: IEEE's arithmetic decides
    what it touches, in Fractions and floats).

    Why: an exact formula on whole rows in Fractions normalises a new rational (a gcd) at every step; on integers
    over a common denominator the steps are plain integer arithmetic, and one Fraction per result remains."""
    q = np.asarray(q, dtype=object)
    if not all(isinstance(v, (Fraction, int)) for v in q.flat):
        return None
    den = _denominator(q)
    common = np.lcm.reduce(den, axis=axis, keepdims=True, initial=1)
    return _numerator(q) * (common // den), common


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
