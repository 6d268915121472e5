"""Complex arithmetic in T as a C++ std::complex<T> kernel writes it, the same bytes on every machine.

NumPy's complex multiply is not one fixed formula: NumPy 2.4 on an FMA-capable x86 computes the real part as
fma(ar, br, -(ai bi)), elsewhere as fl(fl(ar br) - fl(ai bi)); the emulated device would write different bytes on
different machines. `Parts` holds a complex array as its two component arrays (float32 for complex64) and makes
every product, sum and difference one NumPy float operation, rounded once: the standard formula
(ar br - ai bi, ar bi + ai br) of libgcc's __mulsc3 / __muldc3 for finite values, (x - y) componentwise, conj
exact. An op's `complex_formula` receives Parts in the emulated kernel (its variants too) and returns Parts.
"""

from __future__ import annotations

import numpy as np


class Parts:
    """A complex array in T as (re, im) component arrays; +, -, * and conj() as std::complex<T> computes them."""

    __slots__ = ("re", "im")
    __array_ufunc__ = None  # (NumPy never turns a Parts into an object array: its operators defer to ours)

    def __init__(self, re: np.ndarray, im: np.ndarray) -> None:
        self.re, self.im = re, im

    @classmethod
    def of(cls, z: np.ndarray) -> "Parts":
        z = np.asarray(z)
        return cls(z.real.copy(), z.imag.copy())

    def numpy(self) -> np.ndarray:
        """The complex array (complex64 of float32 parts), parts stored as they are."""
        out = np.empty(np.shape(self.re), dtype=np.result_type(self.re.dtype, np.complex64))
        out.real, out.imag = self.re, self.im
        return out

    @property
    def dtype(self) -> np.dtype:
        return np.result_type(self.re.dtype, np.complex64)

    @property
    def real(self) -> np.ndarray:
        return self.re

    def astype(self, dtype) -> "Parts":
        """Each part cast to the component of `dtype` (complex64: float32, rounded once)."""
        part = np.zeros(0, dtype=dtype).real.dtype
        return Parts(self.re.astype(part), self.im.astype(part))

    def _other(self, other) -> "Parts":
        if isinstance(other, Parts):
            return other
        if isinstance(other, (int, float)):  # T(c): (c, 0), as std::complex<T>(c)
            t = self.re.dtype.type
            return Parts(t(other), t(0))
        raise TypeError(f"Parts arithmetic takes Parts or a real number, got {type(other).__name__}")

    def __add__(self, other) -> "Parts":
        o = self._other(other)
        return Parts(self.re + o.re, self.im + o.im)

    __radd__ = __add__

    def __sub__(self, other) -> "Parts":
        o = self._other(other)
        return Parts(self.re - o.re, self.im - o.im)

    def __rsub__(self, other) -> "Parts":
        o = self._other(other)
        return Parts(o.re - self.re, o.im - self.im)

    def __mul__(self, other) -> "Parts":
        o = self._other(other)
        return Parts(self.re * o.re - self.im * o.im, self.re * o.im + self.im * o.re)

    __rmul__ = __mul__

    def conj(self) -> "Parts":
        return Parts(self.re, -self.im)
