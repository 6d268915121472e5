"""The fills of a complex tensor: {complex: [REAL, IMAG]}, and what another fill means on one.

A complex tensor (complex64, complex128) is interleaved (real, imag) pairs of its component float; each part is a
fill of that component dtype, the imaginary part drawn from its own stream (slot + IMAG_SLOT), so a part's values
do not depend on the other's fill.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..files.text import show
from ..tensor.dtypes import DType
from . import fill as fills
from .fill import AllValues, Derived, Fill, RandInt, _Random


@dataclass(frozen=True)
class Complex(Fill):
    """{complex: [REAL, IMAG]}: a complex tensor's real and imaginary parts, each a fill of the component dtype
    (float32 of complex64), the imaginary part drawn from its own stream. Another fill on a complex tensor: a random
    one draws both parts from its range independently (ATK's [lo, hi] of a complex tensor), any other gives the real
    part with a zero imaginary part (a constant inf is inf + 0j, as torch.full and numpy make it)."""

    kind: ClassVar[str] = "complex"

    @classmethod
    def parse(cls, arg) -> Fill:
        if not isinstance(arg, (list, tuple)) or len(arg) != 2:
            raise ValueError(f"'complex' takes two fills [real, imag], got {show(arg)}")
        parts = tuple(fills.parse_fill(a) for a in arg)  # (defined after this module's import)
        if any(isinstance(p, (Complex, AllValues, Derived)) for p in parts):
            raise ValueError(f"'complex' parts are uniform, normal, constant, values or randint fills, got {show(arg)}")
        return cls(parts)

    def check(self, dtype: DType) -> str | None:
        if not dtype.is_complex:
            return f"'complex' fills a complex tensor, not {dtype.name}"
        return next((p for p in (f.check(dtype.component) for f in self.params) if p), None)

    def describe(self) -> dict:
        return {"complex": [f.describe() for f in self.params]}

    def generate(self, dtype: DType, seed: int, slot: int, start: int, stop: int) -> np.ndarray:
        return _pair(dtype, self.params[0].generate(dtype.component, seed, slot, start, stop),
                     self.params[1].generate(dtype.component, seed, slot + IMAG_SLOT, start, stop))


IMAG_SLOT = 1 << 20  # a complex tensor's imaginary parts are drawn as slot + IMAG_SLOT (no op has that many tensors)


def _pair(dtype: DType, real: np.ndarray, imag) -> np.ndarray:
    out = np.empty(real.shape, dtype=dtype.np_dtype)
    out.real, out.imag = real, imag
    return out


def on_complex(fill: Fill, dtype: DType, seed: int, slot: int, start: int, stop: int) -> np.ndarray:
    """A plain fill on a complex tensor (Complex's docstring): random parts both drawn, others a zero imaginary."""
    part = dtype.component
    real = fill.generate(part, seed, slot, start, stop)
    imag = fill.generate(part, seed, slot + IMAG_SLOT, start, stop) if isinstance(fill, (_Random, RandInt)) else 0
    return _pair(dtype, real, imag)
