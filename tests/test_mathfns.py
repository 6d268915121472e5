"""mathfns.exp for float32 is correctly rounded (so the same bits on every CPU), checked against mpmath at 100 bits
with its own nearest-even choice between the two float32 values around the exact result: on a stride through every
float32 whose exp is finite, on the inputs whose float64 exp lies nearest a float32 rounding boundary (where the
float64 value cannot decide and the decimal path must), in the subnormal results, and at the overflow boundary."""

from __future__ import annotations

import mpmath
import numpy as np

from aclnn_cli.ops.mathfns import exp

F32 = np.float32
mpmath.mp.prec = 100


def _correctly_rounded(x: float) -> np.float32:
    """exp(x) rounded to nearest even float32, from mpmath's value and the exact distances to the two float32 values
    that enclose it (no float64 step between)."""
    v = mpmath.exp(mpmath.mpf(x))
    guess = F32(float(v)) if v < mpmath.mpf(2) ** 128 else F32(np.inf)
    lo, hi = (guess, np.nextafter(guess, F32(np.inf))) if mpmath.mpf(float(guess)) <= v else \
        (np.nextafter(guess, F32(0)), guess)
    if np.isinf(hi):  # (above the largest float32: infinity from its midpoint with 2^128 on)
        return F32(np.inf) if v >= mpmath.mpf(float(lo)) + mpmath.mpf(2) ** 103 else lo
    d_lo, d_hi = v - mpmath.mpf(float(lo)), mpmath.mpf(float(hi)) - v
    if d_lo != d_hi:
        return lo if d_lo < d_hi else hi
    return lo if int(lo.view(np.uint32)) % 2 == 0 else hi


def _check(xs: np.ndarray) -> None:
    got = exp(xs.astype(F32))
    want = np.array([_correctly_rounded(float(x)) for x in xs], F32)
    bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert not bad.size, [(float(xs[i]), float(got[i]), float(want[i])) for i in bad[:5]]


def _floats(lo: float, hi: float, step: int) -> np.ndarray:
    """Every step-th float32 of [lo, hi] (same sign)."""
    a, b = sorted(int(F32(v).view(np.uint32)) for v in (lo, hi))
    return np.arange(a, b + 1, step, dtype=np.uint64).astype(np.uint32).view(F32)


def test_a_stride_through_every_finite_result():
    xs = np.concatenate([_floats(0.0, 88.72, 150_001), _floats(-0.0, -103.9, 150_001)])
    _check(xs)


def test_the_inputs_nearest_a_rounding_boundary():
    """The 2,000 inputs (of four million) whose float64 exp is nearest a float32 midpoint: its 29 bits below
    float32's closest to 1 followed by zeros."""
    xs = np.concatenate([_floats(-87.0, -0.0, 977), _floats(0.0, 88.0, 977)])
    wide = np.exp(xs.astype(np.float64))
    low = (wide.view(np.uint64) & np.uint64((1 << 29) - 1)).astype(np.int64) - (1 << 28)
    _check(xs[np.argsort(np.abs(low), kind="stable")[:2000]])


def test_subnormal_results_and_the_overflow_boundary():
    edge = F32(np.log(np.float64(np.finfo(F32).max)))  # (88.72284: the largest input with a finite float32 exp)
    around = [np.nextafter(edge, F32(-np.inf)), edge, np.nextafter(edge, F32(np.inf))]
    _check(np.concatenate([_floats(-103.97, -87.34, 4_001), np.array(around, F32)]))


def test_nan_inputs_keep_their_bits_and_float16_rounds_the_float32_exp():
    nans = np.array([0x7FC00001, 0xFFC00000, 0x7F800001], np.uint32).view(F32)
    assert np.array_equal(exp(nans).view(np.uint32), nans.view(np.uint32))
    assert exp(F32(np.inf)) == np.inf and exp(F32(-np.inf)) == 0
    h = np.arange(0, 1 << 16, 7, dtype=np.uint32).astype(np.uint16).view(np.float16)
    h = h[np.isfinite(h)]
    with np.errstate(over="ignore"):  # (exp past float16's range: infinity)
        assert np.array_equal(exp(h).view(np.uint16), exp(h.astype(F32)).astype(np.float16).view(np.uint16))
