"""aclnnSmoothL1LossBackward: gradInput = gradOut * (d / beta where |d| < beta, else sign(d)) / N, d = self - target.

The doc's formula (beta = 1) with the API's beta: the derivative of d^2 / (2 beta) inside (-beta, beta) and of
|d| - beta / 2 outside; at |d| = beta both give +-1, and beta = 0 is the L1 gradient, sign(0) = 0. N is numel of
self for mean (reduction 1), else 1: the 950 tiling (loss/smooth_l1_loss_grad_v2/op_host/arch35/
smooth_l1_loss_grad_v2_tiling.cpp, CalcReduceMeanCof) multiplies the dims of predict's storage shape, and the op_api
(loss/smooth_l1_loss_grad_v2/op_api/aclnn_smooth_l1_loss_backward.cpp) hands self to the kernel unbroadcast (a 0-d
self counts as [1]); PyTorch's smooth_l1_loss_backward also divides by input.numel(). Not the broadcast output's
numel, as L1LossBackward's. Elementwise; the functions receive `reduction`, `beta` (a C float: float32) and the case
values `numel` (self's), `numel_out` (only for the defect that divides by it), `cof` and `scalar_dy`.

The 950 kernel (loss/smooth_l1_loss_grad_v2/op_kernel/arch35/smooth_l1_loss_grad_v2_dag.h), all in float32 (16-bit
inputs Cast up): d = x - y; pos = d > sigma ? 1 : 0; neg = d < -sigma ? -1 : 0; in = |d| > sigma ? 0 : d * inv;
r = (pos + neg) + in; out = (r * dy) * cof, Cast RINT to the input dtype. When gradOut has one element
(doutIsScalar) the Scalar DAG runs instead, with >=, <= and |d| >= sigma: only the value at |d| = beta differs (+-1
instead of d * inv). The tiling: sigma = beta, inv = |sigma| < 1e-6 ? NaN : 1 / sigma (float32), cof =
(float)(1.0 / (double)N) for mean, else 1. With beta under 1e-6 every element left to the inside branch is NaN
on the device (d = 0 at beta = 0 in the tensor DAG), although the exact value is 0 or d / beta: an edge. The
op_api promotes the three inputs, runs the kernel in the promoted type and Casts to gradInput's dtype.

The result is rational in the inputs: the exact path is Fractions.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..base import AttrSpec, Contract, F64_UNIT, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..registry import register
from .loss import MEAN, is_mean as _mean, reduction_rule, mean_defects

F32 = np.float32
F32_MIN_NORMAL = 2.0**-126
TINY_SIGMA = F32(1e-6)  # the tiling's threshold: below it inv is NaN


def mean_cof(n: int) -> float:
    """The tiling's reduceMeanCof: static_cast<float>(1.0f / static_cast<double>(n)) (NaN for n = 0: an empty case
    never launches)."""
    return float(F32(1.0 / n)) if n else math.nan


def _case_values(shapes) -> dict:
    """numel(self), the mean divisor (a 0-d self is 1); the output's numel for the `mean-by-output-numel` defect;
    the tiling's cof; whether gradOut has one element (the Scalar DAG)."""
    n = math.prod(shapes["self"])
    return {"numel": n, "numel_out": math.prod(shapes["gradInput"]), "cof": mean_cof(n),
            "scalar_dy": int(math.prod(shapes["gradOut"]) == 1)}


def _divisor(t) -> int:
    return int(t["numel"]) if _mean(t) else 1


def _factor(d, beta: float):
    """sign(d) where |d| >= beta (pos + neg), plus d / beta inside, in float64: the derivative; +0 at d = +-0 (at
    beta = 0 the sign branch gives (1 + -1) + 0, as the kernel's sums give +0)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        pos = np.where(d >= beta, 1.0, 0.0)
        neg = np.where(d <= -beta, -1.0, 0.0)
        inside = np.where(np.abs(d) < beta, d / beta, 0.0) if beta > 0 else np.zeros_like(d)
    return (pos + neg) + inside


def _reference(t):
    """d = x - y, d / beta, * dy and / n round once each in float64 (4 u |value|); a d within u |d| of +-beta may take
    the other branch, where the two differ by under 2 u: 6 u |value| in all. No term cancels: scale = |value| +
    bound. (A d / beta is at least 2^-277, dy at least 2^-149, n at most 2^53: nothing underflows float64.)"""
    value = _factor(t["self"] - t["target"], float(t["beta"])) * t["gradOut"] / _divisor(t)
    bound = 6 * F64_UNIT * np.abs(value) + 2.0**-1070
    return Reference(value, bound, np.abs(value) + bound)


def _ieee(t):
    """At inf/NaN inputs: NaN in gives NaN (d NaN: the compares fail and d / beta is NaN); self or target infinite
    gives sign(d) dy / n; gradOut infinite gives +-inf, or NaN where the factor is 0."""
    with np.errstate(all="ignore"):
        d = t["self"] - t["target"]
        beta = float(t["beta"])
        f = _factor(d, beta)
        f = np.where(np.isnan(d), np.nan, f)
        return f * t["gradOut"] / _divisor(t)


def _exact(t):
    d = Fraction(t["self"]) - Fraction(t["target"])
    beta = Fraction(t["beta"])
    g = d / beta if abs(d) < beta else (d > 0) - (d < 0)
    return Fraction(t["gradOut"]) * g / _divisor(t)


def _cof(t) -> float:
    return float(t["cof"]) if _mean(t) else 1.0


def _kernel(t, cof: float | None = None, closed: bool | None = None, swap: bool = False, unit_beta: bool = False):
    """The 950 DAG in the inputs' float type (float32 for emulate): the tensor DAG's strict compares, or the Scalar
    DAG's closed ones where gradOut has one element (`closed` forces either)."""
    x, y, dy = t["self"], t["target"], t["gradOut"]
    ft = dy.dtype.type
    sigma = ft(1.0 if unit_beta else t["beta"])
    inv = ft(np.nan) if abs(sigma) < TINY_SIGMA else ft(1) / sigma
    closed = bool(int(t["scalar_dy"])) if closed is None else closed
    with np.errstate(all="ignore"):
        d = (y - x) if swap else (x - y)
        ad = np.abs(d)
        if closed:
            pos, neg, out = d >= sigma, d <= -sigma, ad >= sigma
        else:
            pos, neg, out = d > sigma, d < -sigma, ad > sigma
        r = (np.where(pos, ft(1), ft(0)) + np.where(neg, ft(-1), ft(0))) + np.where(out, ft(0), d * inv)
        return (r * dy) * ft(_cof(t) if cof is None else cof)


def _stages(t):
    """The kernel's float32 intermediates on float64 inputs: d, d * inv, r * dy, the result."""
    x, y, dy = (np.asarray(t[n]).astype(F32) for n in ("self", "target", "gradOut"))
    sigma = F32(t["beta"])
    inv = F32(np.nan) if abs(sigma) < TINY_SIGMA else F32(1) / sigma
    with np.errstate(all="ignore"):
        d = x - y
        q = d * inv
        out = _kernel({**t, "self": x, "target": y, "gradOut": dy})
        return d, q, out, sigma


def _edge(t):
    """Where the float32 kernel legitimately leaves the exact result: beta under 1e-6, where inv is NaN and the
    elements the inside branch keeps (|d| <= beta; |d| < beta in the Scalar DAG) are NaN; and where an intermediate
    falls below float32's normal range while the exact result is not 0 (d * inv, r * dy or the product with cof
    subnormal: fewer bits than the golden's rounding assumes). The device value there is the float32 kernel's."""
    d, q, out, sigma = _stages(t)
    dy = np.asarray(t["gradOut"]).astype(F32)
    finite = np.isfinite(t["self"]) & np.isfinite(t["target"]) & np.isfinite(t["gradOut"])
    closed = bool(int(t["scalar_dy"]))
    with np.errstate(all="ignore"):
        kept = (np.abs(d) < sigma) if closed else (np.abs(d) <= sigma)
        nan_branch = (abs(sigma) < TINY_SIGMA) & kept
        rd = np.where(np.abs(d) > sigma, np.sign(d), q) * dy
        lost = (((np.abs(q) < F32_MIN_NORMAL) & (d != 0) & kept)
                | ((np.abs(rd) < F32_MIN_NORMAL) & (rd != 0))
                | ((np.abs(out) < F32_MIN_NORMAL) & (dy != 0) & (d != 0)))
    return finite & (nan_branch | lost), out.astype(np.float64)


@defect
def _sign_slip(t):
    """Defect: d = target - self: every nonzero result has the wrong sign."""
    return _kernel(t, swap=True)


@defect
def _mean_by_output_numel(t):
    """Defect: the mean divisor numel of the broadcast output (L1LossBackward's rule) instead of self's: wrong
    wherever self is broadcast."""
    return _kernel(t, mean_cof(int(t["numel_out"])) if _mean(t) else 1.0)


@defect
def _beta_ignored(t):
    """Defect: beta dropped (the doc's formula at beta = 1: the switch at |d| = 1, slope 1 inside): wrong wherever
    beta != 1 and some |d| lies between beta and 1, or inside."""
    return _kernel(t, unit_beta=True)


@legitimate
def _closed_compares(t):
    """Legitimate: the Scalar DAG's closed compares for every gradOut (at |d| = beta, +-1 instead of d * inv:
    within a float32 ulp or two of each other)."""
    return _kernel(t, closed=True)


@legitimate
def _aten_order(t):
    """Legitimate: PyTorch's smooth_l1_backward kernel, x <= -beta ? -norm * grad : x >= beta ? norm * grad :
    norm * x * grad / beta, in float32 with norm = fl32(1 / numel(self)): the same roundings, another order. At
    beta = 0 PyTorch's smooth_l1_loss is l1_loss, whose gradient is sgn(d) * norm * grad."""
    x, y, dy = t["self"], t["target"], t["gradOut"]
    ft = dy.dtype.type
    beta, norm = ft(t["beta"]), ft(_cof(t))
    with np.errstate(all="ignore"):
        d = x - y
        if beta == 0:
            return np.sign(d) * (norm * dy)
        return np.where(d <= -beta, -norm * dy, np.where(d >= beta, norm * dy, norm * d * dy / beta))


_mean_forgotten, _cof_in_half = mean_defects(_kernel, _cof)

VARIANTS = {
    "sign-slip": _sign_slip,
    "mean-forgotten": _mean_forgotten,
    "mean-by-output-numel": _mean_by_output_numel,
    "beta-ignored": _beta_ignored,
    "cof-in-half": _cof_in_half,
    "closed-compares": _closed_compares,
    "aten-order": _aten_order,
}


def _rules(a) -> str | None:
    """161002: reduction outside [0, 2] (CheckReduction), then beta not >= 0 (CheckBeta: NaN fails it too)."""
    rule = reduction_rule(a)
    if rule:
        return rule
    return None if a["beta"] >= 0 else f"beta {a['beta']} is not >= 0"


_ALL = ("950", "A3", "A2", "910", "310P")

SPEC = register(OpSpec(
    name="aclnnSmoothL1LossBackward",
    key="smooth_l1_loss_backward",
    header="aclnnop/aclnn_smooth_l1_loss_backward.h",
    signature=("gradOut", "self", "target", "reduction", "beta", "gradInput"),
    summary="Gradient of the smooth L1 loss: (self - target) / beta inside (-beta, beta), else its sign; times "
            "gradOut, divided by numel(self) for mean.",
    formula="gradInput = gradOut * (|d| < beta ? d / beta : sign(d)) / (reduction == mean ? numel(self) : 1), "
            "d = self - target; beta = 0: sign(d), sign(0) = 0",
    tensors=(
        TensorSpec("gradOut", "input", {"normal": [0, 1]}),
        TensorSpec("self", "input", {"uniform": [-3.0, 3.0]}),
        TensorSpec("target", "input", {"uniform": [-3.0, 3.0]}),
        TensorSpec("gradInput", "output", {"constant": 0}),
    ),
    attributes=(AttrSpec("reduction", "int", default=MEAN), AttrSpec("beta", "float", default=1.0)),
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
    contract=Contract(dtypes="promote", broadcast_on=_ALL, attribute_rule=_rules),
    special_values="NaN in self or target gives NaN (d is NaN: no compare holds, d / beta is NaN); NaN in gradOut "
                   "gives NaN. self or target +-inf (the other finite) gives sign(d) * gradOut / N; both the same "
                   "infinity give NaN. gradOut +-inf gives +-inf, or NaN where the factor is 0 (self == target). "
                   "A zero result is +0 * gradOut (the kernel's (0 + 0) + 0). For beta under 1e-6 the 950 tiling "
                   "sets 1/beta to NaN: the elements of the inside branch (|d| <= beta; |d| < beta for a one-element "
                   "gradOut) are NaN on the device, and verify accepts it there (the golden is 0 or d / beta); also "
                   "where a float32 intermediate is subnormal.",
))

CONTRACT_NOTES = """\
aclnnSmoothL1LossBackward phase one (loss/smooth_l1_loss_grad_v2/op_api/aclnn_smooth_l1_loss_backward.cpp), in order:
1. 161001: workspaceSize or executor null (OP_CHECK_COMM_INPUT); gradOut, self, target or gradInput null.
2. 161002: gradOut, self, target or gradInput dtype not in {FLOAT, FLOAT16, BF16} (GetDtypeSupportListV2: A2, A3,
   950) or {FLOAT, FLOAT16} (910, 310P); each checked on its own.
3. 161002: gradOut, self or target with more than 8 dims (gradInput's are not checked, only its shape; 0-d accepted,
   the doc says 1-8).
4. 161002: reduction outside [0, 2]; then beta < 0 (a NaN beta fails beta >= 0 too).
5. 161002: PromoteType(gradOut, self, target) undefined or not in the list; the promoted type not castable to
   gradInput's.
6. 161002: gradOut and self do not broadcast, or target does not with their shape; gradInput's shape is not the
   broadcast shape.
- Then an empty gradOut, self or target -> ACLNN_SUCCESS, workspace 0, nothing launched (also for mean).
- The inputs are made contiguous and Cast to the promoted type, not broadcast: SmoothL1LossGradV2 (AI Core only)
  broadcasts in the kernel, its tiling divides by numel(self) for mean and picks the Scalar DAG for a one-element
  gradOut; the result is Cast to gradInput's dtype.
"""
