"""aclnnLeakyReluBackward: out = dy where x > 0, dy * negativeSlope where x <= 0 (and where x is NaN).

negativeSlope reaches the kernel as float32 (`aclScalar::ToFloat`); every function here uses fl32
of it. selfIsResult only takes part in phase one (true with a negative slope -> 161002); it never
changes a result.

The 950 kernel (leaky_relu_grad/op_kernel/arch35/leaky_relu_grad_dag.h): m = fp32(dy) * slope (one
float32 rounding); out = (x > 0, strict, compared in the input dtype) ? fp32(dy) : m; cast back
with RINT. dy * slope of two float32 values is exact in float64, so the golden needs no exact
path; the kernel differs from the correctly rounded result only by double rounding (float32,
then float16/bfloat16) on the slope branch.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..base import AttrSpec, Contract, OpSpec, defect, grad_linear_reference, grad_signature, legitimate, products
from ..registry import register


def f32(v) -> float:
    """What the kernel receives of an aclScalar: ToFloat(), i.e. fl32 of its value."""
    return float(np.float32(float(v)))


def _positive(x):
    with np.errstate(invalid="ignore"):
        return x > 0  # NaN compares false: the slope branch, as on the device


def _reference(t):
    """Exact in float64: dy (<= 24 significant bits) times fl32(slope) (24 bits) needs <= 48 bits."""
    factor = np.where(_positive(t["self"]), 1.0, f32(t["negativeSlope"]))
    return grad_linear_reference(t["gradOutput"], factor, np.abs(factor), 0.0)


def _ieee(t):
    """x = +inf: dy; x = -inf, +-0 or NaN: dy*slope; dy = +-inf with slope 0: NaN (inf*0)."""
    dy = t["gradOutput"]
    with np.errstate(invalid="ignore"):
        return np.where(_positive(t["self"]), dy, dy * f32(t["negativeSlope"]))


def _exact(t):
    slope = f32(t["negativeSlope"])
    return t["gradOutput"] if t["self"] > 0 else t["gradOutput"] * Fraction(slope)


def _kernel(t, positive=_positive, slope_scale=1.0):
    """The 950 kernel in the inputs' float type: select(x > 0, dy, dy * slope)."""
    x, dy = t["self"], t["gradOutput"]
    ft = dy.dtype.type
    with np.errstate(invalid="ignore", over="ignore"):
        m = dy * ft(slope_scale * f32(t["negativeSlope"]))
        return np.where(positive(x), dy, m)


def _self_is_result_rule(a):
    """Phase one: selfIsResult with a negative slope is refused (the forward output cannot be inverted)."""
    if a["selfIsResult"] and a["negativeSlope"] is not None and a["negativeSlope"] < 0:
        return "selfIsResult is true with a negative negativeSlope"
    return None


@defect
def _swapped(t):
    """Defect: the branches swapped: dy*slope for x > 0, dy for x <= 0."""
    return _kernel(t, positive=lambda x: ~_positive(x))


@defect
def _inclusive_zero(t):
    """Defect: x >= 0 takes the dy branch (x = +-0 gives dy instead of dy*slope)."""
    def positive(x):
        with np.errstate(invalid="ignore"):
            return x >= 0
    return _kernel(t, positive=positive)


@legitimate
def _mask_multiply(t):
    """Legitimate: dy * where(x > 0, 1, slope): the same values (dy * 1 is exact)."""
    x, dy = t["self"], t["gradOutput"]
    ft = dy.dtype.type
    with np.errstate(invalid="ignore", over="ignore"):
        return dy * np.where(_positive(x), ft(1), ft(f32(t["negativeSlope"])))


@legitimate
def _blend(t):
    """Legitimate: dy * (slope + (1 - slope) * [x > 0]): within an ulp (1 - slope is rounded)."""
    x, dy = t["self"], t["gradOutput"]
    ft = dy.dtype.type
    slope = ft(f32(t["negativeSlope"]))
    with np.errstate(invalid="ignore", over="ignore"):
        return dy * (slope + (ft(1) - slope) * _positive(x).astype(dy.dtype))


@defect
def _zero_slope(t):
    """Defect: ReLU's gradient, the slope ignored (0 on the x <= 0 branch)."""
    return _kernel(t, slope_scale=0.0)


@defect
def _sign_slip(t):
    """Defect: dy * (-slope) on the x <= 0 branch."""
    return _kernel(t, slope_scale=-1.0)


VARIANTS = {"swapped-branches": _swapped, "inclusive-zero": _inclusive_zero, "zero-slope": _zero_slope,
            "sign-slip": _sign_slip, "mask-multiply": _mask_multiply, "blend-formula": _blend}

_ALL = ("950", "A3", "A2", "310P", "910")


def _textbook(x, attrs, mp):
    """The doc's factor: 1 where x > 0, else negativeSlope, for the tests' mpmath oracle."""
    return mp.mpf(1) if x > 0 else mp.mpf(attrs["negativeSlope"])


SPEC = register(OpSpec(
    name="aclnnLeakyReluBackward",
    key="leaky_relu_backward",
    header="aclnnop/aclnn_leaky_relu_backward.h",
    summary="Gradient of leaky ReLU: 1 for x > 0, negativeSlope for x <= 0.",
    formula="out = gradOutput where self > 0, gradOutput * negativeSlope where self <= 0",
    tensors=grad_signature("out"),
    attributes=(AttrSpec("negativeSlope", "scalar"), AttrSpec("selfIsResult", "bool", default=False)),
    products=products(*_ALL, overrides={"310P": ("float32", "float16"), "910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_ieee,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", broadcast_on=_ALL, also_accepts=("float64",), attribute_rule=_self_is_result_rule),
    special_values="self = +inf gives gradOutput; self = -inf, +-0 or NaN gives gradOutput * negativeSlope "
                   "(NaN self takes the slope branch, as in the 950 kernel and PyTorch); gradOutput = +-inf "
                   "with a zero slope on that branch gives NaN; NaN gradOutput gives NaN. negativeSlope is "
                   "used as float32; selfIsResult never changes the result.",
    textbook=_textbook,
    oracle_attributes=({"negativeSlope": float(np.float32(0.01)), "selfIsResult": False},
                       {"negativeSlope": float(np.float32(0.2)), "selfIsResult": False}),
))

CONTRACT_NOTES = """\
Phase-one rules of aclnnLeakyReluBackward (leaky_relu_grad/op_api/aclnn_leaky_relu_backward.cpp) that
Contract cannot express, in the source's order:
1. 161001: gradOutput, self, negativeSlope (the aclScalar) or out null.
2. 161002: gradOutput or self dtype not in {FLOAT, FLOAT16, DOUBLE, BF16} (910, 310P: no BF16);
   negativeSlope's scalar dtype not in {FLOAT, FLOAT16, DOUBLE, INT32, INT64, INT8, UINT8, BOOL, INT16,
   BF16} (910, 310P: no BF16), e.g. a UINT16/UINT32/UINT64 or COMPLEX scalar. out's dtype has no list.
   DOUBLE inputs are accepted (SUCCESS, not 161002; computed on AI CPU in double with the float32 slope):
   Contract's generic all-float64 rejection does not hold for this op.
3. 161002: gradOutput or self with more than 8 dims (out's dims are not checked, only its shape below).
4. 161002: gradOutput and self do not broadcast, or out's shape differs from the broadcast shape.
5. 161002: selfIsResult true and negativeSlope->ToDouble() < 0 (slope -0.0 or >= 0 passes; a negative
   double scalar too small for float32 is still rejected although the kernel would see -0.0).
6. 161002: PromoteType(gradOutput, self) not CanCast to out's dtype: an integer or bool out (float to
   integer/bool is not castable), despite the doc's 'supported via auto cast'. Float and complex outs pass.
- Empty: self empty -> SUCCESS, workspace 0, after all checks. An empty gradOutput with a non-empty self
  (broadcast to an empty out) goes on to the kernel launch.
- Compute dtype: both inputs are l0op::Cast to PromoteType(gradOutput, self) (fp16+bf16 -> FLOAT); the
  kernel output is l0op::Cast to out's dtype: double rounding where the promoted type is wider than out
  (FLOAT compute into fp16/bf16 out); a 16-bit promoted type into a FLOAT out keeps 16-bit precision.
- negativeSlope: no value check other than rule 5; the kernel sees ToFloat() of it (an int scalar
  converted, a double rounded to nearest float).
"""
