"""High-precision scalar math for the elements whose float64 rounding cannot be certified.

Uses the standard library's decimal module at 60 significant digits (~199
bits). Only a handful of elements per million ever come here.
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from fractions import Fraction

PRECISION_DIGITS = 60


def dec(q: Fraction | float) -> Decimal:
    q = Fraction(q)
    return Decimal(q.numerator) / Decimal(q.denominator)


def sigmoid(z: Decimal) -> Decimal:
    """1/(1+e^-z) without overflow: exp is only ever taken of -|z|."""
    e = (-abs(z)).exp()
    return 1 / (1 + e) if z >= 0 else e / (1 + e)


def swish_factor(z: Decimal) -> Decimal:
    """d/dz [z * sigmoid(z)] = s * (1 + z * (1 - s))."""
    s = sigmoid(z)
    return s * (1 + z * sigmoid(-z))


def evaluate(fn, *args):
    """Run fn under a 60-digit decimal context."""
    with localcontext() as ctx:
        ctx.prec = PRECISION_DIGITS
        ctx.Emax, ctx.Emin = 10**9, -(10**9)
        return fn(*args)
