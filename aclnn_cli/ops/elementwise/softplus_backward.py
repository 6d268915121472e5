"""aclnnSoftplusBackward: gradInput = dy * sigmoid(beta x) where beta x <= threshold, dy where beta x > threshold.

beta and threshold reach the device as float32 (`aclScalar::ToFloat`); every function here uses
fl32 of them. With float32-valued beta and x (<= 24 significant bits each) the product beta*x is
exact in float64, so the float64 reference decides the branch exactly like the exact path.

The 950 kernel (softplus_v2_grad/op_kernel/arch35/softplus_v2_grad_kernel.h), in float32:
T1 = x*beta; T5 = dy/(exp(-T1)+1); thr = (T1-T1)+threshold; out = (T1 > thr) ? dy : T5.
Its legitimate departures from the exact result (`_edge`): the branch is decided on fl32(beta*x),
so where beta*x > threshold but fl32(beta*x) == threshold the device takes the sigmoid branch
(a jump of dy*(1-sigmoid(threshold))); and exp(-T1) overflows float32 for T1 < -88.72, giving +-0.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .. import exact as X
from ..base import (AttrSpec, Contract, OpSpec, defect, grad_linear_reference, grad_signature, legitimate,
                    products, sigmoid_pair)
from ..mathfns import exp
from ..registry import register

EXP_OVERFLOW = 2.0**128 - 2.0**103  # float32 rounds values from here up to inf (the tie goes to the even 2^128)
# Error of dy * sigmoid(z) through sigmoid_pair, in F64_UNITs of the result: exp (measured < 0.7 ulp;
# allowed 4 ulps = 8 units), 1+e and 1/(1+e) (2 units, plus half of exp's through 1/(1+e)), e*inv and
# dy*factor (1 unit each): 8 + 6 + 1 + 1 = 16; doubled for safety (an overestimate only costs speed).
SIGMOID_UNITS = 32.0


def f32(v) -> float:
    """What the kernel receives of an aclScalar: ToFloat(), i.e. fl32 of its value."""
    return float(np.float32(float(v)))


def _attrs(t):
    return f32(t["beta"]), f32(t["threshold"])


def _reference(t):
    dy, x = t["gradOutput"], t["self"]
    beta, thr = _attrs(t)
    z = beta * x  # exact: both float32-valued
    linear = z > thr
    s, _ = sigmoid_pair(z)
    factor = np.where(linear, 1.0, s)
    return grad_linear_reference(dy, factor, factor, np.where(linear, 0.0, SIGMOID_UNITS))  # dy * 1.0 is exact


def _exact(t):
    """Branch on the exact rationals; sigmoid at 60 digits."""
    dy, x = t["gradOutput"], t["self"]
    beta, thr = (Fraction(v) if np.isfinite(v) else v for v in _attrs(t))
    z = beta * x
    if not isinstance(z, Fraction):  # (an infinite or NaN beta: the IEEE limits, as `_ieee` gives them)
        point = {**t, "gradOutput": np.float64(float(dy)), "self": np.float64(float(x))}
        return float(_ieee(point))
    if z > thr:
        return dy
    return X.evaluate(lambda: X.dec(dy) * X.sigmoid(X.dec(z)))


def _ieee(t):
    """The formula at inf/NaN inputs: the exact limits, which the 950 kernel also gives.

    x = +inf: dy (the kernel: thr = inf-inf = NaN, compare false, dy/(0+1)); x = -inf: dy*0 = +-0
    (NaN for dy = +-inf); x NaN or beta*x NaN (beta = 0, x = +-inf): NaN; dy = +-inf with finite x:
    +-inf (sigmoid > 0; where the kernel's exp overflows it gives NaN, which device_edges accepts).
    """
    dy, x = t["gradOutput"], t["self"]
    beta, thr = _attrs(t)
    with np.errstate(invalid="ignore"):
        z = beta * x
    s = np.where(np.isfinite(z), sigmoid_pair(np.where(np.isfinite(z), z, 0.0))[0], (z > 0).astype(float))
    s = np.where(np.isnan(z), np.nan, s)
    value = np.where(z > thr, dy, dy * s)
    return np.where(np.isinf(dy) & np.isfinite(z) & ~(z > thr), dy, value)


def _device(t, sigmoid_branch, compare="strict"):
    """The 950 kernel's frame in the inputs' float type (float32 on the device): T1 = x*beta;
    thr = (T1-T1)+threshold; dy where T1 > thr, else sigmoid_branch(dy, T1, ft).

    compare: "strict" (the device), "inclusive" (T1 >= thr), "on-x" (x > thr) or "none" (no branch).
    """
    x, dy = t["self"], t["gradOutput"]
    ft = x.dtype.type
    beta, thr = (ft(v) for v in _attrs(t))
    with np.errstate(all="ignore"):
        t1 = x * beta
        level = (t1 - t1) + thr
        linear = {"strict": lambda: t1 > level, "inclusive": lambda: t1 >= level,
                  "on-x": lambda: x > level, "none": lambda: np.zeros(t1.shape, dtype=bool)}[compare]()
        return np.where(linear, dy, sigmoid_branch(dy, t1, ft))


def _divide(dy, t1, ft, sign=1.0):
    return dy / (exp(ft(-sign) * t1) + ft(1))  # the device's T5 = dy/(exp(-T1)+1)


def _kernel(t):
    """The 950 kernel, op by op in the inputs' float type."""
    return _device(t, _divide)


@defect
def _sign_slip(t):
    """Defect: dy/(exp(+T1)+1) = dy*sigmoid(-beta x)."""
    return _device(t, lambda dy, t1, ft: _divide(dy, t1, ft, sign=-1.0))


@defect
def _no_threshold(t):
    """Defect: the threshold branch dropped: dy*sigmoid(beta x) everywhere (seen where threshold < ~17)."""
    return _device(t, _divide, "none")


@defect
def _inclusive_threshold(t):
    """Defect: beta x >= threshold gives dy (the doc's branch is beta x > threshold)."""
    return _device(t, _divide, "inclusive")


@defect
def _threshold_on_x(t):
    """Defect: the branch decided on x > threshold, beta forgotten there."""
    return _device(t, _divide, "on-x")


@defect
def _exp_overflow(t):
    """Defect: PyTorch's e = exp(beta x), dy*e/(e+1): inf/inf = NaN for 88.7 < beta x <= threshold."""
    return _device(t, lambda dy, t1, ft: dy * exp(t1) / (exp(t1) + ft(1)))


@legitimate
def _stable(t):
    """Legitimate: sigmoid from exp(-|T1|) (no overflow), multiplied into dy; the device's branch."""
    def branch(dy, t1, ft):
        e = exp(-np.abs(t1))
        return dy * np.where(t1 >= 0, ft(1) / (ft(1) + e), e / (ft(1) + e))
    return _device(t, branch)


@legitimate
def _multiply(t):
    """Legitimate: dy * (1/(exp(-T1)+1)), a reciprocal and a product instead of one division."""
    return _device(t, lambda dy, t1, ft: dy * (ft(1) / (exp(-t1) + ft(1))))


def _edge(t):
    """Where the float32 kernel legitimately departs from the exact result, and its value there.

    1. beta*x > threshold exactly but fl32(beta*x) == threshold: the device gives dy*sigmoid(beta x).
    2. exp(-fl32(beta x)) overflows float32 (beta x < -88.72) on the sigmoid branch: the device
       gives dy/inf = +-0 (NaN for infinite dy) where the exact result is dy*e^(beta x) != 0.
    """
    dy, x = t["gradOutput"], t["self"]
    beta, thr = _attrs(t)
    with np.errstate(all="ignore"):
        z = beta * x
        t1 = (np.float32(beta) * np.asarray(x).astype(np.float32)).astype(np.float64)
        # T1 = +inf: the kernel compares with inf - inf = NaN and takes dy/(0+1) = dy: the same value.
        device_linear = t1 > thr
        moved = device_linear != (z > thr)
        s, _ = sigmoid_pair(t1)  # the device's sigmoid(T1)
        overflow = ~device_linear & (exp(-t1) >= EXP_OVERFLOW)
        device = np.where(device_linear, dy, np.where(overflow, dy * 0.0, dy * s))
    where = (moved | overflow) & np.isfinite(x)
    return where, device


VARIANTS = {"sign-slip": _sign_slip, "no-threshold": _no_threshold, "inclusive-threshold": _inclusive_threshold,
            "threshold-on-x": _threshold_on_x, "exp-overflow": _exp_overflow,
            "stable-formula": _stable, "multiply-form": _multiply}


INTEGER_SELF = ("int64", "int32", "uint8", "int16", "int8")  # (and BOOL, which no case here expresses)


def _float_gradients(tensors) -> str | None:
    """self may be an integer (the op_api casts it to FLOAT); gradOutput and gradInput may not."""
    for name in ("gradOutput", "gradInput"):
        d = tensors[name]
        if not d.null and d.dtype.is_integer:
            return f"{name} dtype {d.dtype.name} is not supported (an integer is accepted for self only)"
    return None


def _textbook(x, attrs, mp):
    """The doc's factor: 1 if beta x > threshold, else 1/(1 + e^(-beta x)), for the tests' mpmath oracle."""
    z = mp.mpf(attrs["beta"]) * x
    return mp.mpf(1) if z > mp.mpf(attrs["threshold"]) else 1 / (1 + mp.exp(-z))


SPEC = register(OpSpec(
    name="aclnnSoftplusBackward",
    key="softplus_backward",
    header="aclnnop/aclnn_softplus_backward.h",
    summary="Gradient of softplus log(1 + e^(beta x))/beta, linear above the threshold.",
    formula="gradInput = gradOutput * sigmoid(beta * self) where beta * self <= threshold, "
            "gradOutput where beta * self > threshold",
    tensors=grad_signature("gradInput", self_range=(-25.0, 25.0)),
    attributes=(AttrSpec("beta", "scalar", default=1.0), AttrSpec("threshold", "scalar", default=20.0)),
    products=products("950", "A3", "A2", "910", overrides={"910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_ieee,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", also_accepts=("float64", *INTEGER_SELF), dtype_rule=_float_gradients),
    special_values="self = +inf gives gradOutput; self = -inf gives +-0 (NaN if gradOutput is +-inf); NaN in "
                   "either input, or beta = 0 with self = +-inf, gives NaN; gradOutput = +-inf with finite self "
                   "gives +-inf. beta and threshold are used as float32. The golden decides the branch on the "
                   "exact beta*self; verify also accepts the device's float32 decision (fl32(beta*self) == "
                   "threshold takes the sigmoid branch) and its +-0 where exp(-beta*self) overflows float32.",
    textbook=_textbook,
    oracle_attributes=({"beta": 1.0, "threshold": 20.0},
                       {"beta": float(np.float32(1.7)), "threshold": float(np.float32(1.2))}),
))

CONTRACT_NOTES = """\
Phase-one rules of aclnnSoftplusBackward (op_api/aclnn_softplus_backward.cpp) that Contract cannot express:
- 161001 only for gradOutput, self or gradInput null. beta/threshold nullptr: the doc says 161001, the
  source has no check and dereferences them (beta->ToFloat()): expect a host crash, not a status.
- 161002 when gradOutput or gradInput dtype is not in {FLOAT, FLOAT16, DOUBLE, BF16} (910: no BF16), or
  self dtype not in {INT8, INT16, INT32, INT64, UINT8, BOOL, FLOAT16, FLOAT, DOUBLE, BF16} (910: no BF16).
- DOUBLE is accepted (SUCCESS, not 161002) for all three tensors: Contract's generic all-float64
  rejection does not hold for this op.
- If gradOutput or self is outside {FLOAT, FLOAT16, BF16} (DOUBLE, integer, bool self) or their dtypes
  differ, both are l0op::Cast to FLOAT (a double or int32/int64 beyond 2^24 is rounded there) and the kernel
  runs in float32; the CanCast-to-FLOAT check this triggers never fails for the listed dtypes.
- gradInput's dtype is not checked against self (the doc's 'same dtype' is not enforced): any listed dtype
  is accepted and the kernel result is l0op::Cast to it (double rounding: fp32 compute into fp16/bf16;
  fp16 compute into bf16; fp16/bf16 compute into FLOAT or DOUBLE keeps 16-bit precision).
- Shapes: gradOutput, self and gradInput must be identical (no broadcast, whatever the doc says) -> 161002.
- Dims: each of the three at most 8 -> 161002. Order: null -> dtypes -> dims -> shapes; then any empty
  tensor -> SUCCESS with workspace 0.
- beta, threshold: any aclScalar dtype, no value check (beta = 0, negative, NaN/inf threshold accepted);
  the kernel sees ToFloat() of each.
"""
