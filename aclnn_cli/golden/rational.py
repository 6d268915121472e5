"""An exact path for an op that declares none: its own float64 `reference` run on Fractions.

A golden is certified where the float64 value's bound clears every rounding boundary; elsewhere it needs the
exact value. Most backward formulas are rational in their inputs (products, sums, quotients, comparisons), and
a reference written with NumPy's arithmetic computes them exactly when handed object arrays of Fraction. The
result is trusted only if every value came back a Fraction (or int): a float constant, `np.exp` or a float64
cast anywhere in the reference makes a float appear, or raises, and those elements stay uncertified (counted,
recorded in the manifest and shown by verify: never silent).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping

import numpy as np

from ..errors import UserError
from ..ops.base import OpSpec, Reference


class NotRational(Exception):
    """The reference did not give exact values on Fractions."""


def _exact_values(v) -> np.ndarray:
    arr = np.asarray(v, dtype=object)
    for x in arr.reshape(-1):
        if isinstance(x, bool) or not isinstance(x, (Fraction, int)):
            raise NotRational(type(x).__name__)
    return arr


def through_reference(op: OpSpec, inputs: Mapping) -> dict[str, np.ndarray]:
    """{output: exact values} from op.reference on Fraction inputs (object arrays, as `exact` receives them);
    NotRational where they are not all exact."""
    try:
        with np.errstate(all="ignore"):
            got = op.by_output(op.reference(dict(inputs)))
    except (UserError, ArithmeticError, TypeError, ValueError, AttributeError) as exc:
        raise NotRational(str(exc)) from None
    return {name: _exact_values(r.value if isinstance(r, Reference) else r) for name, r in got.items()}
