"""Correctly rounded goldens: float64 evaluation, certified rounding, exact fallback.

For each element the op gives a float64 value v and a bound b on |v - exact|.
If v - b and v + b round to the same output value, that value is the correctly
rounded exact result. The rare elements where they do not (exact result too
close to a rounding boundary, or heavy cancellation) are recomputed one by
one at ~199 bits with the decimal module and rounded exactly (Ziv's strategy).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Mapping, NamedTuple

import numpy as np

from ..tensor.dtypes import DType, canonical_nans, round_fraction, round_from_f64
from ..ops.base import OpSpec
from .complexes import complex_golden
from .integers import integer_golden
from .exactcheck import check_exact
from .rational import NotRational, through_reference


class ExactPath(NamedTuple):
    """How a golden's uncertain elements were settled: `exact` of them exactly (the op's `exact`, or its reference
    on Fractions), `uncertified` left as the float64 value rounded once (an op without `exact` whose reference is
    not rational there). Two counts, since a case can have both. Adds up across chunks and outputs."""

    exact: int = 0
    uncertified: int = 0

    def __add__(self, other):
        return ExactPath(self.exact + other.exact, self.uncertified + other.uncertified)

    def __radd__(self, other):  # (sum()'s start, 0)
        return self if other == 0 else NotImplemented


def golden(op: OpSpec, inputs: Mapping[str, np.ndarray], out_dtype: DType,
           attributes: Mapping[str, object] | None = None) -> tuple[np.ndarray, ExactPath]:
    """The correctly rounded result in out_dtype, and how its uncertain elements were settled (ExactPath).

    attributes: the op's attribute values (see AttrSpec), passed to its functions beside the inputs.
    """
    attributes = dict(attributes or {})
    if out_dtype.is_integer:  # (exact, no rounding: integers.py)
        return integer_golden(op, inputs, out_dtype, attributes), ExactPath()
    if out_dtype.is_complex:  # (every finite element exactly: complexes.py)
        result, exact = complex_golden(op, inputs, out_dtype, attributes)
        return result, ExactPath(exact)
    with np.errstate(all="ignore"):
        wide = {k: np.asarray(v).astype(np.float64) for k, v in inputs.items()}
        ref = op.golden_f64({**wide, **attributes})
        rounded = round_from_f64(ref.value, out_dtype)
        as64 = rounded.astype(np.float64)
        lo = round_from_f64(ref.value - ref.bound, out_dtype).astype(np.float64)
        hi = round_from_f64(ref.value + ref.bound, out_dtype).astype(np.float64)
        uncertain = np.isfinite(ref.value) & ((lo != as64) | (hi != as64))
        # A tiny nonzero value that rounds to zero: its sign is uncertain when the bound straddles zero.
        uncertain |= (as64 == 0) & (ref.value != 0) & (ref.bound >= np.abs(ref.value))
    rounded = canonical_nans(rounded)  # (which NaN an IEEE formula gives depends on the CPU's code path)
    hard = np.flatnonzero(uncertain)
    if op.exact is None:  # a user op with only a float64 reference: exact through it on Fractions, if rational
        return _through_reference(op, wide, attributes, hard, rounded, out_dtype)
    if hard.size:
        rounded = rounded.copy()
        names = [t.name for t in op.inputs if t.name in wide]  # (a null optional input is absent)
        exact_attrs = {k: _exact_number(v) for k, v in attributes.items()}
        # (each distinct point once: integer or 16-bit inputs repeat points, and `exact` costs a millisecond)
        bits = np.stack([np.ascontiguousarray(wide[n][hard], dtype=np.float64).view(np.uint64) for n in names], axis=1)
        _, first, inverse = np.unique(bits, axis=0, return_index=True, return_inverse=True)
        values = np.empty(first.size)
        bound = np.broadcast_to(ref.bound, np.shape(ref.value))
        for j, i in enumerate(hard[first]):
            point = {n: _exact_number(float(wide[n][i])) for n in names}
            v = op.exact({**point, **exact_attrs})  # (a float: an IEEE limit, kept with its sign)
            check_exact(op, op.output.name, [v], [ref.value.flat[i]], [bound.flat[i]], [i])
            values[j] = v if isinstance(v, float) else round_fraction(Fraction(v), out_dtype)
        rounded[hard] = values[inverse.reshape(-1)]
    return rounded, ExactPath(int(hard.size))


def _exact_number(v):
    """A finite float as a Fraction; anything else (an infinity, NaN, an int, a list) as it is: IEEE decides
    what a non-finite value touches, as in the float64 reference (golden/rows.py does the same)."""
    return Fraction(v) if isinstance(v, float) and math.isfinite(v) else v


def _through_reference(op: OpSpec, wide: dict, attributes: dict, hard: np.ndarray, rounded: np.ndarray,
                       out_dtype: DType) -> tuple[np.ndarray, ExactPath]:
    """Uncertain elements of an op without `exact`, through its reference on Fractions (golden/rational.py): all
    of them exactly, or (its reference not rational there) all left uncertified."""
    if not hard.size:
        return rounded, ExactPath()
    frac = {n: np.array([_exact_number(float(x)) for x in wide[n][hard]] + [None], dtype=object)[:-1] for n in wide}
    exact_attrs = {k: _exact_number(v) for k, v in attributes.items()}
    try:
        exact = through_reference(op, {**frac, **exact_attrs})[op.output.name].reshape(-1)
    except NotRational:
        return rounded, ExactPath(0, int(hard.size))
    rounded = rounded.copy()
    rounded[hard] = [round_fraction(Fraction(v), out_dtype) for v in exact]
    return rounded, ExactPath(int(hard.size))
