"""aclnnHardtanhBackward: out = gradOutput where min < self < max (strict) or self is NaN, else +0.

min and max reach the kernel as float32 (`aclScalar::ToFloat`, op_api/aclnn_hardtanh_backward.cpp); every function here
takes them as the float32 the case rounds them to. The 950 kernel (hardtanh_grad/op_kernel/arch35/hardtanh_grad_dag.h,
"torch.where((result <= min_val) | (result >= max_val), 0.0, grad)"): self widened to float32, mask = (x < max and
x > min) or x != x, out = Select(mask, gradOutput, 0) in the inputs' dtype: the result is gradOutput itself or +0, exact
(no rounding anywhere). The doc's formula passes gradOutput at x = min and x = max ("otherwise" 1); the source and
PyTorch give 0 there: the golden follows the source (decision 92). min > max gives 0 for every number.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..base import AttrSpec, Contract, OpSpec, Reference, defect, grad_signature, legitimate, products
from ..registry import register


def _bounds(t):
    return float(np.float32(t["min"])), float(np.float32(t["max"]))


def _mask(x, lo, hi, inclusive=False, nan_passes=True):
    with np.errstate(invalid="ignore"):
        inside = ((x >= lo) & (x <= hi)) if inclusive else ((x > lo) & (x < hi))
        return inside | np.isnan(x) if nan_passes else inside


def _reference(t):
    """Exact: gradOutput or +0 (bound 0)."""
    lo, hi = _bounds(t)
    dy = t["gradOutput"]
    value = np.where(_mask(t["self"], lo, hi), dy, 0.0)
    return Reference(value, np.zeros_like(value), np.abs(dy))


def _exact(t):
    x, dy = t["self"], t["gradOutput"]
    lo, hi = (Fraction(v) for v in _bounds(t))
    return dy if lo < x < hi else Fraction(0)


def _kernel(t, inclusive=False, nan_passes=True, swap=False):
    """The 950 kernel: Select((x < max) & (x > min) | (x != x), gradOutput, 0). The keywords make the defects."""
    x, dy = t["self"], t["gradOutput"]
    lo, hi = _bounds(t)
    if swap:
        lo, hi = hi, lo
    return np.where(_mask(x, lo, hi, inclusive, nan_passes), dy, dy.dtype.type(0))


@defect
def _inclusive(t):
    """Defect: the doc's window, closed at both ends (x = min or x = max passes gradOutput; PyTorch gives 0)."""
    return _kernel(t, inclusive=True)


@defect
def _nan_blocked(t):
    """Defect: the NaN term of the mask dropped: NaN self gives 0 instead of gradOutput."""
    return _kernel(t, nan_passes=False)


@defect
def _bounds_swapped(t):
    """Defect: min and max read in each other's place (the tiling's attribute order): every element 0."""
    return _kernel(t, swap=True)


@defect
def _zero_as_product(t):
    """Defect: out = gradOutput * mask (a multiply for the select): NaN or inf gradOutput outside the window gives
    NaN, and a negative gradOutput gives -0 instead of +0."""
    x, dy = t["self"], t["gradOutput"]
    lo, hi = _bounds(t)
    with np.errstate(invalid="ignore"):
        return dy * _mask(x, lo, hi).astype(dy.dtype)


@legitimate
def _clamp_compare(t):
    """Legitimate: the window tested as clamp(x, min, max) == x with x strictly away from both ends: the same
    elements (for min <= max; min > max leaves none either way)."""
    x, dy = t["self"], t["gradOutput"]
    lo, hi = _bounds(t)
    with np.errstate(invalid="ignore"):
        inside = (np.minimum(np.maximum(x, lo), hi) == x) & (x != lo) & (x != hi) & (lo <= hi)
        return np.where(inside | np.isnan(x), dy, dy.dtype.type(0))


VARIANTS = {"hardtanh-inclusive-window": _inclusive, "hardtanh-nan-blocked": _nan_blocked,
            "hardtanh-bounds-swapped": _bounds_swapped, "hardtanh-multiply-mask": _zero_as_product,
            "hardtanh-clamp-compare": _clamp_compare}


def _textbook(x, attrs, mp):
    """The factor PyTorch and the source give: 1 strictly inside (min, max), else 0 (the doc's "otherwise" 1 at the
    ends is the inclusive-window defect), for the tests' mpmath oracle."""
    return mp.mpf(1) if mp.mpf(attrs["min"]) < x < mp.mpf(attrs["max"]) else mp.mpf(0)


_ALL = ("950", "A3", "A2", "310P", "910")

SPEC = register(OpSpec(
    name="aclnnHardtanhBackward",
    key="hardtanh_backward",
    header="aclnnop/aclnn_hardtanh_backward.h",
    summary="Gradient of hardtanh (clamp to [min, max]): gradOutput strictly inside the window, else 0.",
    formula="out = gradOutput where min < self < max (or self is NaN), else +0",
    tensors=grad_signature("out", self_range=(-2.0, 2.0)),
    attributes=(AttrSpec("min", "scalar", default=-1.0), AttrSpec("max", "scalar", default=1.0)),
    products=products(*_ALL, overrides={"310P": ("float32", "float16"), "910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_kernel,
    variants=VARIANTS,
    contract=Contract(dtypes="same", out_checked=False),
    special_values="self = NaN gives gradOutput (the kernel's x != x term); self = +-inf gives +0 (for finite "
                   "bounds); self = min or max gives +0; outside the window the result is +0 whatever gradOutput is "
                   "(NaN and inf included); inside, NaN or inf gradOutput passes. min and max are used as float32.",
    textbook=_textbook,
    oracle_attributes=({"min": -1.0, "max": 1.0}, {"min": 0.0, "max": 6.0},
                       {"min": float(np.float32(-0.3)), "max": float(np.float32(0.7))}),
))

CONTRACT_NOTES = """\
Phase-one rules of aclnnHardtanhBackward (hardtanh_grad/op_api/aclnn_hardtanh_backward.cpp), in the source's order:
1. 161001: workspaceSize or executor null; self, gradOutput, out, min or max null.
2. 161002: gradOutput's, self's or out's dtype not in {FLOAT, FLOAT16, BF16} (BF16 on DAV_2201 = A2/A3 and regbase =
   950; 910 and 310P: FLOAT, FLOAT16); gradOutput's dtype not self's.
3. 161002: gradOutput or self with more than 8 dims; gradOutput's shape not self's.
- Not checked in phase one: out's dtype against the inputs' and out's shape (Contract.out_checked=False). The arch35
  tiling refuses an out of another dtype when the kernel is launched (phase two); the stub refuses both in phase one.
- min and max: no dtype or value check; ToFloat(). min > max is accepted (every number gives 0).
- Empty: gradOutput or self empty -> SUCCESS, workspace 0 (the doc says empty tensors are not supported; the source
  accepts them).
"""
