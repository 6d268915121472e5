"""An op's exact values held to its own reference: a number within the float64 value's bound.

gen asks for an exact value only where the reference's bound leaves the rounding open, and writes it rounded
once. An exact value outside [value - bound, value + bound] means the declaration contradicts itself: the exact
function or the bound is wrong, and the goldens the bound certified elsewhere are not proven either. One that is
not a number (None, text, a Reference) cannot be rounded at all. Both are one line naming the op, the output,
the element and the module, instead of a wrong golden or a traceback.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence

import numpy as np

from ..errors import UserError
from ..ops.base import OpSpec
from ..ops.registry import DECLARED_IN


def check_exact(op: OpSpec, output: str, exact: Sequence, value, bound, positions=None) -> None:
    """Raise UserError unless each exact[i] is a number within bound[i] of value[i] (both float64, flat, as many
    as exact). positions: the elements' flat indices in the output, for the message (default 0, 1, ...).
    A non-finite value or bound proves nothing either way: only a finite pair is held to."""
    value = np.asarray(value, dtype=np.float64).reshape(-1)
    bound = np.broadcast_to(np.asarray(bound, dtype=np.float64), value.shape).reshape(-1)
    values, bounds = value.tolist(), bound.tolist()  # (Python floats, once: not a numpy scalar per element)
    for i, e in enumerate(exact):
        problem = _problem(e, values[i], bounds[i])
        if problem:
            at = int(positions[i]) if positions is not None else i
            raise UserError(f"op {op.name}: exact gives {output} element {at} {problem}",
                            where=DECLARED_IN.get(op.name, ""))


def _problem(e, v: float, b: float) -> str | None:
    kind = type(e)
    if (kind is Fraction or kind is int) and math.isfinite(v) and math.isfinite(b):
        # (the common case, in integers: |n/d - v| > b with v = pv/qv and b = pb/qb, all denominators positive;
        # a Fraction's every operation normalises by a gcd, and gen checks every exact value it asks for)
        n, d = e.numerator, e.denominator
        pv, qv = v.as_integer_ratio()
        pb, qb = b.as_integer_ratio()
        if abs(n * qv - pv * d) * qb > pb * d * qv:
            return _outside(Fraction(n, d), v, b)
        return None
    if isinstance(e, np.floating):
        e = float(e)
    try:
        q = Fraction(e)
    except (TypeError, ValueError, OverflowError):  # (None, text, a Reference; inf or NaN)
        if isinstance(e, float) and math.isfinite(v):
            return f"{e!r} where its reference gives the finite {v!r}"
        return None if isinstance(e, float) else f"as a {type(e).__name__} ({e!r:.40}): a number is needed"
    if not (math.isfinite(v) and math.isfinite(b)):
        return None
    if abs(q - Fraction(v)) > Fraction(b):
        return _outside(q, v, b)
    return None


def _outside(q: Fraction, v: float, b: float) -> str:
    try:
        shown = repr(float(q))
    except OverflowError:  # (beyond float64: its size in powers of two)
        shown = f"{'-' if q < 0 else ''}about 2^{abs(q.numerator).bit_length() - q.denominator.bit_length()}"
    return (f"{shown}, outside its reference's {v!r} +- {b!r} (the exact function or the bound is wrong; "
            "goldens are certified by the bound)")
