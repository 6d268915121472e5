"""Goldens of integer outputs: the op's exact integer, never a rounding.

A float output's golden is the exact value rounded once (rounding.py). An integer output has no rounding to make:
the golden is the integer the op's formula gives, and verify demands it element for element (standard `exact`).
Integer inputs reach the op's reference as they are: float64 holds int64 only up to 2^53, so a widened
gradOutput of 2^60 + 1 would come back 2^60, a golden off by one that nothing downstream could see. A reference
that gives floats must give integers of the output dtype, certain to the unit (bound < 1/2): anything else is the
op's error (a formula that is not integer-valued has no integer golden), reported in one line.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..errors import UserError
from ..ops.base import OpSpec
from ..tensor.dtypes import DType


def integer_golden(op: OpSpec, inputs: Mapping[str, np.ndarray], out_dtype: DType,
                   attributes: Mapping[str, object]) -> np.ndarray:
    """The exact integer result in out_dtype; UserError where the reference's value is not one."""
    native = {k: _as_given(v) for k, v in inputs.items()}
    with np.errstate(all="ignore"):
        ref = op.golden_f64({**native, **attributes})
    value = np.asarray(ref.value)
    lo, hi = out_dtype.int_range
    if value.dtype.kind in "iu":
        bad = (value < lo) | (value > hi)
    else:
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(value) | (np.rint(value) != value) | ~(np.asarray(ref.bound) < 0.5)
            bad |= (value < lo) | (value > hi)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise UserError(f"{op.name}'s {op.output.name} is {out_dtype.name}, but its reference gives {value.flat[i].item()!r} "
                        f"(bound {np.asarray(ref.bound).flat[i].item()!r}) at element {i}: not an exact integer of the dtype")
    return value.astype(out_dtype.np_dtype)


def _as_given(v) -> np.ndarray:
    """An integer input as it is (exact); any other as float64, as the float goldens take it."""
    a = np.asarray(v)
    return a if a.dtype.kind in "iu" else a.astype(np.float64)
