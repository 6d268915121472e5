"""aclnnHardswishBackward: out = dy * g, g = 0 (x < -3), x/3 + 1/2 (-3 <= x <= 3, closed), 1 (x > 3).

The 950 kernel (hard_swish_grad/op_kernel/arch35/hard_swish_grad.h) computes g = x * 0.33333334f + 0.5f
(two float32 roundings, the constant itself 2^-25 high), so its float32 results are not correctly rounded:
near x = -1.5, where g crosses 0, they are thousands of float32 ulps off. The golden is the exact math;
`scale` = |dy| (|x|/3 + 1/2) (the terms of x/3 + 1/2) makes those errors ordinary (<= 2^-22 of the
scale) while it stays <= 1.5 |dy|, so a defect at the closed ends (relative error 1/3 at x = +-3) or a
wrong slope still fails. The ends are decided on the exact input (float32 holds +-3 exactly): no edge.
Verify also needs cases holding x = +-3 exactly: an open end differs from the kernel nowhere else.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..base import (Contract, GRAD_RELATIVE_FLOOR, OpSpec, Reference, defect, grad_linear_reference,
                    grad_signature, legitimate, products)
from ..registry import register


def _factor(x):
    """g(x) in float64: (2x + 3)/6 is two roundings of exact operations (2x is exact), relative error
    <= 2u + u^2 even where g crosses 0 (at x = -1.5 it is exactly 0). NaN x: 1 (the kernel's selects)."""
    with np.errstate(invalid="ignore", over="ignore"):
        g = np.where(x < -3.0, 0.0, np.where(x <= 3.0, (2.0 * x + 3.0) / 6.0, 1.0))
    return g


def _reference(t):
    x, dy = t["self"], t["gradOutput"]
    g = _factor(x)
    ref = grad_linear_reference(dy, g, np.abs(g), 4.0)  # g's 2u (+u^2), the product with dy
    terms = np.where(x < -3.0, 0.0, np.where(x <= 3.0, np.abs(x) / 3.0 + 0.5, 1.0))
    return Reference(ref.value, ref.bound, np.abs(dy) * np.maximum(terms, GRAD_RELATIVE_FLOOR))


def _ieee(t):
    """The kernel's special values: NaN x -> g = 1 (both compares false) -> dy; +inf -> dy; -inf -> 0 * dy."""
    with np.errstate(invalid="ignore"):
        return t["gradOutput"] * _factor(t["self"])


def _exact(t):
    x = t["self"]
    if x < -3:
        return Fraction(0)
    return t["gradOutput"] * (x / 3 + Fraction(1, 2) if x <= 3 else 1)


def _kernel(t, slope=1.0 / 3.0, offset=0.5, low_closed=True, high_closed=True, clamp_high=True):
    """Muls(x, 1/3) (0.33333334f), Adds 0.5, Select(x >= -3 ? g : 0), Select(x <= 3 ? g : 1), Mul(dy, g)."""
    x, dy = t["self"], t["gradOutput"]
    zero, one = x.dtype.type(0), x.dtype.type(1)
    with np.errstate(invalid="ignore"):
        g = x * slope + offset
        g = np.where(x >= -3.0 if low_closed else x > -3.0, g, zero)
        if clamp_high:
            g = np.where(x <= 3.0 if high_closed else x < 3.0, g, one)
        return dy * g


def _selects(x, g):
    zero, one = x.dtype.type(0), x.dtype.type(1)
    with np.errstate(invalid="ignore"):
        return np.where(x <= 3.0, np.where(x >= -3.0, g, zero), one)


@legitimate
def _stable(t):
    """Legitimate: g = (x + 1.5) / 3 with a true division (x + 1.5 is exact near -1.5: no cancellation)."""
    x = t["self"]
    with np.errstate(invalid="ignore"):
        return t["gradOutput"] * _selects(x, (x + 1.5) / 3.0)


@legitimate
def _true_division(t):
    """Legitimate: x / 3 + 0.5 with a true division instead of the rounded constant 0.33333334f."""
    x = t["self"]
    with np.errstate(invalid="ignore"):
        return t["gradOutput"] * _selects(x, x / 3.0 + 0.5)


@defect
def _exclusive_bounds(t):
    """Defect: open ends, -3 < x < 3: x = -3 gives 0 instead of -0.5 dy, x = 3 gives dy instead of 1.5 dy."""
    return _kernel(t, low_closed=False, high_closed=False)


@defect
def _sixth_slope(t):
    """Defect: hardsigmoid's slope, x/6 + 1/2."""
    return _kernel(t, slope=1.0 / 6.0)


@defect
def _sign_slip(t):
    """Defect: x/3 - 1/2."""
    return _kernel(t, offset=-0.5)


@defect
def _unclamped_top(t):
    """Defect: the x > 3 select dropped: x/3 + 1/2 grows past 1.5 above 3 (NaN x then gives 0)."""
    return _kernel(t, clamp_high=False)


VARIANTS = {"exclusive-bounds": _exclusive_bounds, "sixth-slope": _sixth_slope, "sign-slip": _sign_slip,
            "unclamped-top": _unclamped_top, "stable-formula": _stable, "true-division": _true_division}

_ALL = ("950", "A3", "A2", "910")

SPEC = register(OpSpec(
    name="aclnnHardswishBackward",
    key="hardswish_backward",
    header="aclnnop/aclnn_hardswish_backward.h",
    summary="Gradient of hardswish x * relu6(x + 3) / 6.",
    formula="out = gradOutput * (0 if self < -3; self/3 + 1/2 if -3 <= self <= 3; 1 if self > 3)",
    tensors=grad_signature("out", self_range=(-5.0, 5.0)),
    products=products(*_ALL, overrides={"910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_ieee,
    variants=VARIANTS,
    contract=Contract(),
    special_values="self = NaN gives gradOutput (both of the kernel's compares are false: the x > 3 branch, "
                   "as PyTorch); self = +inf gives gradOutput, -inf gives 0 * gradOutput (NaN if gradOutput "
                   "is +-inf); self = -1.5 gives 0 * gradOutput. NaN or inf gradOutput propagates.",
))

CONTRACT_NOTES = """\
Phase-one rules of aclnnHardswishBackward (hard_swish_grad/op_host/op_api/aclnn_hardswish_backward.cpp) that
Contract cannot express, in the source's order:
0. 161001: workspaceSize or executor null (OP_CHECK_COMM_INPUT), before everything else.
1. 161001: gradOutput, self or out null (CheckNotNull3Tensor; the doc lists only gradOutput and self).
2. 161002: self, then gradOutput, dtype not in {FLOAT, FLOAT16, BF16} (910: {FLOAT, FLOAT16}); gradOutput's
   dtype != self's; out's dtype != self's. out has no list of its own: it only has to equal self's.
3. 161002: gradOutput or self with more than 8 dims (out's dims are not checked, only its shape); gradOutput's
   shape != self's; out's shape != self's. No broadcast.
- Empty: gradOutput or self empty -> SUCCESS, workspace 0, after all checks (the shapes are equal by then).
- Compute: fp16/bf16 are cast to float32 exactly, computed in float32, cast back with CAST_RINT; the output
  dtype is the input dtype, so the result is rounded once.
"""
