"""exp that gives the same bits on every CPU: the emulated kernels' transcendental.

NumPy computes float32 (and float16) exp with code chosen at run time for the CPU (AVX-512, AVX2, baseline
SSE): their results differ in the last bit for some inputs, so the emulated device wrote other bytes on
another machine (and the refactor guard's digests failed there). Here a float32 exp is correctly rounded:
float64 exp rounded to float32, which is right unless the float64 value lies within 2^-50 of it from a
float32 rounding boundary (any float64 exp NumPy may use is far more accurate than that); those few elements
are recomputed with `decimal` (correctly rounded at 40 digits, the same everywhere) and rounded once. A
float16 exp is that float32 exp rounded to float16, as NumPy's float16 loop does. float64 arrays keep
np.exp (the goldens' references bound its error and certify their rounding).
"""

from __future__ import annotations

import decimal
from fractions import Fraction

import numpy as np

from ..tensor.dtypes import FLOAT32, round_fraction

_NEAR = 2.0**-50  # relative distance from a float32 rounding boundary below which float64 exp cannot decide
_CONTEXT = decimal.Context(prec=40)


def exp(x):
    """np.exp, but correctly rounded (so CPU-independent) for float32 and float16 arrays or scalars."""
    a = np.asarray(x)
    if a.dtype == np.float16:
        with np.errstate(over="ignore"):  # (a float32 exp past float16's range is its infinity, as IEEE says)
            return _exp32(a.astype(np.float32)).astype(np.float16)
    if a.dtype != np.float32:
        return np.exp(x)
    out = _exp32(a)
    return out if isinstance(x, np.ndarray) else out[()]


def _exp32(a: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        wide = np.exp(a.astype(np.float64))
        out = wide.astype(np.float32)
        # Near a float32 rounding boundary: within 2^-50 of itself, under 8 float64 ulps, of a midpoint. A midpoint
        # of two float32 values (the one between the largest and 2^128 too) is, in the binade of any float64 that
        # rounds to either, the value whose 29 bits below float32's are 1 followed by zeros: so the test is on the
        # bits, |those bits - 2^28| <= 8 (a superset of the distance test, which is what decides: an element it adds
        # is rounded by decimal to the same float32). A subnormal float32 result has a fixed spacing: those few take
        # the distance test itself (_near_by_distance).
        low = (wide.view(np.uint64) & np.uint64(_LOW_MASK)).view(np.int64) - _MIDPOINT_BITS
        normal = (wide >= _SMALLEST_NORMAL) & (wide < np.inf)
        near = normal & (np.abs(low) <= 8)
        tiny = (wide < _SMALLEST_NORMAL) & (wide > 0)
        if tiny.any():
            near[tiny] = _near_by_distance(wide[tiny], out[tiny])
    nan = np.isnan(a)
    if nan.any():  # (the input's NaN, bit for bit: what another path's exp gives a NaN differs in sign and payload)
        out = np.where(nan, a, out)
    if near.any():
        out = np.array(out, copy=True)
        flat, src = out.reshape(-1), a.reshape(-1)
        for i in np.flatnonzero(near.reshape(-1)):
            flat[i] = _exp_decimal(float(src[i]))
    return out


_OVERFLOW = float(np.finfo(np.float32).max) + 2.0**103  # exp above it rounds to inf
_LOW_MASK, _MIDPOINT_BITS = (1 << 29) - 1, 1 << 28  # a float64's bits below float32's precision; a midpoint's
_SMALLEST_NORMAL = 2.0**-126


def _near_by_distance(wide: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Whether each float64 value lies within 2^-50 of itself of the midpoint between its float32 rounding `out`
    and either neighbour of it, or of the boundary between the largest float32 and infinity."""
    with np.errstate(all="ignore"):
        up = np.nextafter(out, np.float32(np.inf)).astype(np.float64)
        down = np.nextafter(out, np.float32(-np.inf)).astype(np.float64)
        here = out.astype(np.float64)
        tol = np.abs(wide) * _NEAR
        near = np.isfinite(wide) & ((np.abs(wide - (here + up) / 2) < tol) | (np.abs(wide - (here + down) / 2) < tol))
        return near | (np.isfinite(wide) & (np.abs(wide - _OVERFLOW) < tol))


def _exp_decimal(x: float) -> np.float32:
    """exp(x) correctly rounded to float32, through decimal's correctly rounded exp at 40 digits."""
    return np.float32(round_fraction(Fraction(_CONTEXT.exp(decimal.Decimal(x))), FLOAT32))
