"""Goldens of complex outputs: the op's complex formula evaluated exactly, each component rounded once.

A complex output's golden is the exact complex result on the (exactly representable) inputs, its real and imaginary
parts each rounded once to the component dtype (float32 for complex64, float64 for complex128). float64 cannot
hold it: a complex product's component is a sum of products that may cancel (SigmoidBackward's real part
Re(conj((1 - y) y) dy) is a degree-3 polynomial in the inputs' components), so float64 arithmetic misrounds a
complex128 result and, near a cancellation, a complex64 one. Every finite binary float is an integer times a power
of two, so the formula is evaluated on `Dyadic` numbers, (re + im i) / 2^k with re and im Python integers (object
arrays, one per element): sums, differences, products and conjugates of them are exact, and the result rounds once
(`round_ratio`, the integer rounding `round_fraction` uses). Faster than Fractions by far (no gcd, one shared
power of two): ops-nn's 1.46 M-element complex case takes seconds.

Elements with a non-finite input component follow the formula in IEEE complex128 arithmetic (standard formula) (the special values of
every other op: the textbook formula's IEEE result), an exact zero component the IEEE result's sign of zero.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..ops.base import OpSpec
from ..ops.complexparts import Parts
from ..tensor.dtypes import DType, canonical_nans, round_ratio


class Dyadic:
    """Complex numbers (re + im i) / 2^k, exactly: re and im object arrays of Python ints, k one shared exponent.

    The operations the AI CPU's complex formulas use: +, - (with each other or an integer), *, conj()."""

    __slots__ = ("re", "im", "k")

    def __init__(self, re: np.ndarray, im: np.ndarray, k: int) -> None:
        self.re, self.im, self.k = re, im, k

    def _same(self, other) -> tuple["Dyadic", "Dyadic"]:
        """Both at one exponent (the larger: the other's integers shifted up, exactly)."""
        if not isinstance(other, Dyadic):  # an integer constant (1 - y)
            if type(other) is not int:
                raise TypeError(f"Dyadic arithmetic takes Dyadic or int, got {type(other).__name__}")
            other = Dyadic(np.full(self.re.shape, other << self.k, dtype=object), np.zeros(self.re.shape, dtype=object),
                           self.k)
        a, b = (self, other) if self.k >= other.k else (other, self)
        d = a.k - b.k
        b = b if d == 0 else Dyadic(b.re * (1 << d), b.im * (1 << d), a.k)
        return (a, b) if a is self else (b, a)

    def __add__(self, other) -> "Dyadic":
        a, b = self._same(other)
        return Dyadic(a.re + b.re, a.im + b.im, a.k)

    __radd__ = __add__

    def __sub__(self, other) -> "Dyadic":
        a, b = self._same(other)
        return Dyadic(a.re - b.re, a.im - b.im, a.k)

    def __rsub__(self, other) -> "Dyadic":
        a, b = self._same(other)
        return Dyadic(b.re - a.re, b.im - a.im, a.k)

    def __mul__(self, other) -> "Dyadic":
        if not isinstance(other, Dyadic):
            other = self._same(other)[1]
        return Dyadic(self.re * other.re - self.im * other.im, self.re * other.im + self.im * other.re,
                      self.k + other.k)

    __rmul__ = __mul__

    def conj(self) -> "Dyadic":
        return Dyadic(self.re, -self.im, self.k)


def dyadic(values: np.ndarray, finite: np.ndarray) -> Dyadic:
    """Complex values (their finite elements; the others read as 0) as Dyadic, exactly: each component m 2^(e - 53)
    with m a 53-bit integer (frexp), over one power of two for the whole array (the smallest exponent's)."""
    v = np.where(finite, np.asarray(values, dtype=np.complex128), 0)
    parts = []
    for comp in (v.real, v.imag):
        m, e = np.frexp(comp)
        parts.append(((m * 2.0**53).astype(np.int64), e.astype(np.int64) - 53))
    nonzero = [e[m != 0] for m, e in parts if (m != 0).any()]
    k = max(0, -int(min(x.min() for x in nonzero))) if nonzero else 0
    re, im = (np.left_shift(m.astype(object), np.where(m != 0, e + k, 0).astype(object)) for m, e in parts)
    return Dyadic(re, im, k)


def complex_golden(op: OpSpec, inputs: Mapping[str, np.ndarray], out_dtype: DType,
                   attributes: Mapping[str, object]) -> tuple[np.ndarray, int]:
    """The correctly rounded complex result in out_dtype, and how many elements took the exact path (the finite
    ones). The op's `complex_formula` on Dyadic inputs is exact; each component is then rounded once."""
    names = [t.name for t in op.inputs if t.name in inputs]
    arrays = {n: np.asarray(inputs[n]).reshape(-1) for n in names}
    n = max((a.size for a in arrays.values()), default=0)
    arrays = {k: np.broadcast_to(a, (n,)) for k, a in arrays.items()}
    with np.errstate(all="ignore"):  # (in float64 parts, each operation as std::complex<double>: ops/complexparts.py)
        ieee = op.complex_formula({**{k: Parts.of(a.astype(np.complex128)) for k, a in arrays.items()}, **attributes})
        ieee = ieee.numpy() if isinstance(ieee, Parts) else np.asarray(ieee, dtype=np.complex128)
    finite = np.ones(n, dtype=bool)
    for a in arrays.values():
        finite &= np.isfinite(a.real) & np.isfinite(a.imag)
    exact = op.complex_formula({**{k: dyadic(a, finite) for k, a in arrays.items()}, **attributes})
    part = out_dtype.component
    out = ieee.astype(out_dtype.np_dtype)  # (the non-finite elements: the IEEE formula)
    den = 1 << exact.k
    at = np.flatnonzero(finite)
    re = np.array([round_ratio(int(x), den, part) for x in exact.re[at]], dtype=np.float64)
    im = np.array([round_ratio(int(x), den, part) for x in exact.im[at]], dtype=np.float64)
    with np.errstate(all="ignore"):  # (an exact zero: the IEEE result's sign of zero)
        re = np.where(re == 0, np.copysign(0.0, ieee.real[at]), re)
        im = np.where(im == 0, np.copysign(0.0, ieee.imag[at]), im)
    out.real[at], out.imag[at] = re, im  # (each already a value of the component dtype: stored exactly)
    return canonical_nans(out), int(at.size)
