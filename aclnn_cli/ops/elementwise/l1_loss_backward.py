"""aclnnL1LossBackward: out = gradOutput * sign(self - target) / N for reduction mean, else * sign(self - target).

N is numel of the broadcast output (the doc: "the sum is divided by the number of elements in the output"; the
op_api broadcasts target to the output's shape before the kernel, and the 950 tiling divides by the product of
target's storage dims). The op has no reduction of its own: mean is one float32 scalar, so it is an Elementwise
op; its functions receive `reduction` (0 none, 1 mean, 2 sum) and the case values `numel` (the output's),
`numel_self` (only for the defect that divides by it) and `cof` (the 950 tiling's float32 1/N).

The 950 kernel (loss/l1_loss_grad/op_kernel/arch35/l1_loss_grad_dag.h, L1LossGradCast and the Scalar DAG for a
one-element gradOutput): sign = Select(x < y, -1, Select(x > y, 1, 0)), compared in the input dtype (no
subtraction: NaN, and x == y, inf == inf, give sign 0); g = fp32(dy) * cof; out = sign * g, Cast RINT to the
input dtype. cof = 1.0f for none and sum; for mean the tiling (loss/l1_loss_grad/op_host/arch35/
l1_loss_grad_tiling.cpp, CaluateReduceElts) divides a float 1.0 by each dim of target's shape in turn (a 0-d
target counts as [1]): cof = ((1.0f / d0) / d1) / ..., one float32 rounding per dim. The op_api
(loss/l1_loss_grad/op_api/aclnn_l1_loss_backward.cpp) promotes the three inputs (fp16 + bf16 -> float32), runs
the kernel in the promoted type and Casts to gradInput's dtype.

The result is rational in the inputs: the exact path is Fractions.
"""

from __future__ import annotations

import math

import numpy as np

from ..base import AttrSpec, Contract, F64_UNIT, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..registry import register
from .loss import MEAN, is_mean as _mean, reduction_rule, mean_defects

F32 = np.float32
F32_MIN_NORMAL = 2.0**-126


def tiling_cof(dims) -> float:
    """The 950 tiling's reduceElts for mean: float 1.0 divided by each dim in turn, in float32 (a 0-d shape is [1];
    an empty one never launches: the op_api returns first)."""
    c = F32(1.0)
    for d in dims or (1,):
        c = F32(c / F32(d)) if d else F32(math.nan)
    return float(c)


def _case_values(shapes) -> dict:
    """numel(out), the mean divisor; numel(self), which only the `mean-by-self-numel` defect reads; the 950 cof."""
    return {"numel": math.prod(shapes["gradInput"]), "numel_self": math.prod(shapes["self"]),
            "cof": tiling_cof(shapes["gradInput"])}


def _sign(x, y):
    """The kernel's select: -1 where x < y, 1 where x > y, else 0 (x == y, or either NaN)."""
    with np.errstate(invalid="ignore"):
        return np.where(x < y, -1.0, np.where(x > y, 1.0, 0.0))


def _reference(t):
    """sign(x - y) * (dy / n) in float64, n = N for mean, else 1: one rounding (dy / n), so |value - exact| <=
    u |value| (u = 2^-53; a float32 dy over n <= 2^53 stays in float64's normal range). Exact zeros carry the
    kernel's IEEE sign: +0 * dy. scale = |value| + bound >= |exact|: no term cancels."""
    n = int(t["numel"]) if _mean(t) else 1
    with np.errstate(invalid="ignore"):
        value = _sign(t["self"], t["target"]) * (t["gradOutput"] / n)
    bound = F64_UNIT * np.abs(value)
    return Reference(value, bound, np.abs(value) + bound)


def _ieee(t):
    """At inf/NaN: sign 0 for a NaN self or target and for self == target = +-inf; 0 * (+-inf dy) is NaN."""
    n = int(t["numel"]) if _mean(t) else 1
    with np.errstate(invalid="ignore"):
        return _sign(t["self"], t["target"]) * (t["gradOutput"] / n)


def _exact(t):
    x, y = t["self"], t["target"]
    s = 1 if x > y else (-1 if x < y else 0)
    return s * t["gradOutput"] / (int(t["numel"]) if _mean(t) else 1)


def _cof(t) -> float:
    return float(t["cof"]) if _mean(t) else 1.0


def _kernel(t, cof: float | None = None, sign=_sign):
    """The 950 DAG in the inputs' float type: sign(x, y) * (dy * cof)."""
    dy = t["gradOutput"]
    ft = dy.dtype.type
    with np.errstate(all="ignore"):
        g = dy * ft(_cof(t) if cof is None else cof)
        return sign(t["self"], t["target"]).astype(dy.dtype) * g


def _edge(t):
    """Where dy * cof falls below float32's normal range (mean over many elements, tiny dy): the float32 product
    keeps fewer bits than the golden's rounding assumes. The device value there is the float32 kernel's."""
    dy = np.asarray(t["gradOutput"]).astype(F32)
    with np.errstate(all="ignore"):
        g = dy * F32(_cof(t))
        device = (_sign(t["self"], t["target"]) * g.astype(np.float64))
    return np.isfinite(dy) & (np.abs(g) < F32_MIN_NORMAL) & (dy != 0), device


@defect
def _sign_slip(t):
    """Defect: sign(target - self): every nonzero result has the wrong sign."""
    return _kernel({**t, "self": t["target"], "target": t["self"]})


@defect
def _mean_by_self_numel(t):
    """Defect: the mean divisor numel(self) (MseLossBackward's rule) instead of the broadcast output's: wrong
    wherever self is broadcast."""
    return _kernel(t, tiling_cof((int(t["numel_self"]),)) if _mean(t) else 1.0)


def _sign_at_zero_positive(x, y):
    with np.errstate(invalid="ignore"):
        return np.where(x < y, -1.0, 1.0)


@defect
def _subgradient_one_at_zero(t):
    """Defect: the subgradient at self == target taken as +1 (a two-way select, x < y ? -1 : 1) instead of 0."""
    return _kernel(t, sign=_sign_at_zero_positive)


def _sign_of_difference(x, y):
    with np.errstate(invalid="ignore", over="ignore"):
        return np.sign(x - y)


@defect
def _nan_propagates(t):
    """Defect (special values): sign(x - y) from the difference: NaN for a NaN input and for inf - inf where the
    kernel's compares give 0 (and 0 where x - y underflows to 0 without flush: never for x != y)."""
    return _kernel(t, sign=_sign_of_difference)


@legitimate
def _reciprocal_once(t):
    """Legitimate: cof = fl32(1 / N) from one division (a TBE kernel's 1.0 / num, or the AICPU's): within a few
    float32 ulps of the 950's iterated division."""
    return _kernel(t, float(F32(1.0 / int(t["numel"]))) if _mean(t) else 1.0)


@legitimate
def _divide_by_n(t):
    """Legitimate: PyTorch's formula, sign(x - y) * dy / N with the division in float32 (correctly rounded)."""
    dy = t["gradOutput"]
    ft = dy.dtype.type
    n = int(t["numel"]) if _mean(t) else 1
    with np.errstate(all="ignore"):
        return _sign(t["self"], t["target"]).astype(dy.dtype) * (dy / ft(n))


_mean_forgotten, _cof_in_half = mean_defects(_kernel, _cof)

VARIANTS = {
    "sign-slip": _sign_slip,
    "mean-forgotten": _mean_forgotten,
    "mean-by-self-numel": _mean_by_self_numel,
    "subgradient-one-at-zero": _subgradient_one_at_zero,
    "nan-sign-propagates": _nan_propagates,
    "cof-in-half": _cof_in_half,
    "reciprocal-once": _reciprocal_once,
    "divide-by-n": _divide_by_n,
}


_ALL = ("950", "A3", "A2", "910", "310P")

SPEC = register(OpSpec(
    name="aclnnL1LossBackward",
    key="l1_loss_backward",
    header="aclnnop/aclnn_l1_loss_backward.h",
    signature=("gradOutput", "self", "target", "reduction", "gradInput"),
    summary="Gradient of the L1 loss: sign(x - y) dy, divided by the output's numel for mean.",
    formula="gradInput = gradOutput * sign(self - target) / numel(gradInput) (reduction mean), "
            "gradOutput * sign(self - target) (none, sum); sign(0) = 0",
    tensors=(
        TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
        TensorSpec("self", "input", {"uniform": [-4.0, 4.0]}),
        TensorSpec("target", "input", {"uniform": [-4.0, 4.0]}),
        TensorSpec("gradInput", "output", {"constant": 0}),
    ),
    attributes=(AttrSpec("reduction", "int", default=MEAN),),
    case_values=_case_values,
    products=products(*_ALL, overrides={"310P": ("float32", "float16"), "910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_ieee,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", broadcast_on=_ALL, attribute_rule=reduction_rule),
    special_values="sign(self - target) is the kernel's two compares: 0 where self == target (+-0 alike, and the "
                   "same infinity) and where self or target is NaN, so those results are +-0 (gradOutput's sign), "
                   "or NaN where gradOutput is +-inf or NaN; self or target +-inf otherwise gives +-gradOutput / N. "
                   "gradOutput +-inf gives +-inf where self != target. Where gradOutput * cof falls below float32's "
                   "normal range (mean), verify also accepts the float32 kernel's value.",
))

CONTRACT_NOTES = """\
aclnnL1LossBackward phase one (loss/l1_loss_grad/op_api/aclnn_l1_loss_backward.cpp), in order:
1. 161001: workspaceSize or executor null (OP_CHECK_COMM_INPUT); gradOutput, self, target or gradInput null.
2. 161002: reduction outside [0, 2].
3. 161002: PromoteType(gradOutput, self, target) undefined; the promoted type not castable to gradInput's
   (OP_CHECK_RESULT_DTYPE_CAST_FAILED: float to integer/bool); the promoted type not in {FLOAT, FLOAT16, BF16}
   on SoCs in [ASCEND910B, ASCEND910E] (A2, A3, 950), {FLOAT, FLOAT16} elsewhere (910, 310P). gradInput's own
   dtype has no list: the doc's FLOAT/FLOAT16/BF16 is what cases are generated in.
4. 161002: gradOutput, self, target or gradInput with more than 8 dims (0-d accepted; the doc says 1-8); self and
   gradOutput do not broadcast, or target does not broadcast with their shape; gradInput's shape is not the
   broadcast shape.
- Then an empty self, gradOutput or target -> ACLNN_SUCCESS, workspace 0, nothing launched (also for mean).
- Every input is made contiguous, broadcast to the output's shape (BroadcastTo; on the 950 a 0-d gradOutput is
  kept: the Scalar DAG), cast to the promoted type; L1LossGrad (AI Core only) returns the promoted type, Cast to
  gradInput's dtype (double rounding where gradInput is narrower).
- The mean divisor is numel of the broadcast output (target's storage shape after BroadcastTo), not self's.
"""
