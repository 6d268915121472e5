"""aclnnSoftMarginLossBackward: out = gradOutput * -target * sigmoid(-self * target) / N (mean), else without / N.

The gradient of log(1 + exp(-y x)) is -y exp(-xy) / (1 + exp(-xy)) = -y sigmoid(-xy). N is numel of the broadcast
output (the doc: "the sum is divided by the number of elements in the output"; the op_api broadcasts the three
inputs to it and the 950 tiling's total_num is the product of the broadcast shape). Elementwise; the functions
receive `reduction` (0 none, 1 mean, 2 sum) and the case values `numel`, `numel_self` and `cof`.

The 950 kernel (loss/soft_margin_loss_grad/op_kernel/arch35/soft_margin_loss_grad.h, Compute), all in float32
(16-bit inputs Cast up): xy = x * y; e = Exp(-xy); num = (-y) * e; den = e + 1; q = num / den (precise
division); g = dy * cof; out = q * g, Cast RINT to the input dtype. cof = 1.0f / float(total_num) for mean,
else 1.0f. The literal form is deliberate ("aligned with torch's golden: exp overflow -> NaN/inf"): where
-xy > 88.72 Exp overflows and inf / inf is NaN, although the exact result is -y dy / N. The op_api
(loss/soft_margin_loss_grad/op_api/aclnn_soft_margin_loss_backward.cpp) promotes the three inputs and Casts
the result to out's dtype.
"""

from __future__ import annotations

import math

import numpy as np

from .. import exact as X
from ..base import AttrSpec, Contract, OpSpec, TensorSpec, defect, grad_linear_reference, legitimate, products, sigmoid_pair
from ..mathfns import exp
from ..registry import register
from .loss import MEAN, cof32 as _cof32, is_mean as _mean, mean_defects

F32 = np.float32
F32_MIN_NORMAL = 2.0**-126


def _case_values(shapes) -> dict:
    """numel(out), the mean divisor; numel(self) for the `mean-by-self-numel` defect; the kernel's cof."""
    n = math.prod(shapes["out"])
    return {"numel": n, "numel_self": math.prod(shapes["self"]), "cof": _cof32(n)}


def _divisor(t) -> int:
    return int(t["numel"]) if _mean(t) else 1


def _reference(t):
    """-y sigmoid(-xy) / n: x y of two float32 values is exact in float64, sigmoid_pair is within 16 float64 ulps
    (as LogSigmoidBackward's reference takes it); * -y, / n and * dy add three roundings: 20 ulps of the factor."""
    x, y = t["self"], t["target"]
    _, s = sigmoid_pair(x * y)  # sigmoid(-xy)
    factor = (-y * s) / _divisor(t)
    return grad_linear_reference(t["gradOutput"], factor, np.abs(factor), 20.0)


def _ieee(t):
    """At inf/NaN inputs, the literal formula in float64 (as the kernel and PyTorch compute it): exp(-xy) = inf
    gives inf / inf = NaN (self = -inf with target > 0), exp(-xy) = 0 gives -0 * y."""
    x, y = t["self"], t["target"]
    with np.errstate(all="ignore"):
        e = np.exp(-(x * y))
        return (-y * e) / (1.0 + e) * (t["gradOutput"] / _divisor(t))


def _exact(t):
    x, y = X.dec(t["self"]), X.dec(t["target"])
    return X.evaluate(lambda: X.dec(t["gradOutput"]) * -y * X.sigmoid(-(x * y)) / _divisor(t))


def _cof(t) -> float:
    return float(t["cof"]) if _mean(t) else 1.0


def _kernel(t, cof: float | None = None, exp_sign: float = -1.0, y_sign: float = -1.0):
    """The 950 Compute in the inputs' float type (float32 for emulate)."""
    x, y, dy = t["self"], t["target"], t["gradOutput"]
    ft = dy.dtype.type
    with np.errstate(all="ignore"):
        e = exp(-(x * y) if exp_sign < 0 else x * y)
        q = (y * ft(y_sign) * e) / (e + ft(1.0))
        return q * (dy * ft(_cof(t) if cof is None else cof))


def _stages(t):
    """The kernel's float32 intermediates on float64 inputs: e, num, q, g, out."""
    x, y, dy = (np.asarray(t[n]).astype(F32) for n in ("self", "target", "gradOutput"))
    with np.errstate(all="ignore"):
        e = exp(-(x * y))
        num = -y * e
        q = num / (e + F32(1.0))
        g = dy * F32(_cof(t))
        return x, y, dy, e, num, q, g, q * g


def _edge(t):
    """Where a float32 intermediate leaves float32's normal range while the exact result may not: Exp overflows
    (-xy > 88.72: inf / inf is NaN) or falls below 2^-126 (-xy < -87.3: subnormal, then 0), (-y) e overflows or
    is subnormal, q or dy * cof is subnormal. The device value there is the float32 kernel's (NaN, +-inf, a value
    short of bits, or 0)."""
    x, y, dy, e, num, q, g, out = _stages(t)
    finite = np.isfinite(x) & np.isfinite(y) & np.isfinite(dy)
    with np.errstate(all="ignore"):
        lost = ((e < F32_MIN_NORMAL) | ((np.abs(num) < F32_MIN_NORMAL) & (y != 0))
                | ((np.abs(q) < F32_MIN_NORMAL) & (y != 0)) | ((np.abs(g) < F32_MIN_NORMAL) & (dy != 0)))
    broke = ~np.isfinite(e) | ~np.isfinite(num) | ~np.isfinite(q)
    return finite & (lost | broke), out.astype(np.float64)


@defect
def _sign_slip(t):
    """Defect: the derivative's minus dropped (+y sigmoid(-xy)): every nonzero result has the wrong sign."""
    return _kernel(t, y_sign=1.0)


@defect
def _exp_sign_flipped(t):
    """Defect: exp(+xy) for exp(-xy): -y sigmoid(+xy), the derivative at the mirrored margin."""
    return _kernel(t, exp_sign=1.0)


@defect
def _mean_by_self_numel(t):
    """Defect: the mean divisor numel(self) instead of the broadcast output's: wrong wherever self is broadcast."""
    return _kernel(t, _cof32(int(t["numel_self"])) if _mean(t) else 1.0)


@legitimate
def _aten_order(t):
    """Legitimate: PyTorch's soft_margin_loss_backward_out order, ((y * z) * -norm) / (1 + z) * grad with
    z = exp(-y x) and norm = fl32(1 / N): the same roundings, another order."""
    x, y, dy = t["self"], t["target"], t["gradOutput"]
    ft = dy.dtype.type
    with np.errstate(all="ignore"):
        z = exp(-(y * x))
        return (y * z) * ft(-_cof(t)) / (z + ft(1.0)) * dy


_mean_forgotten, _cof_in_half = mean_defects(_kernel, _cof)

VARIANTS = {
    "sign-slip": _sign_slip,
    "exp-sign-flipped": _exp_sign_flipped,
    "mean-forgotten": _mean_forgotten,
    "mean-by-self-numel": _mean_by_self_numel,
    "cof-in-half": _cof_in_half,
    "aten-order": _aten_order,
}

_ALL = ("950", "A3", "A2", "910")

SPEC = register(OpSpec(
    name="aclnnSoftMarginLossBackward",
    key="soft_margin_loss_backward",
    header="aclnnop/aclnn_soft_margin_loss_backward.h",
    signature=("gradOutput", "self", "target", "reduction", "out"),
    summary="Gradient of the soft margin loss log(1 + exp(-y x)): -y sigmoid(-x y) dy, / numel(out) for mean.",
    formula="out = gradOutput * -target * exp(-self * target) / (1 + exp(-self * target)) / numel(out) (mean), "
            "without / numel(out) (none, sum)",
    tensors=(
        TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
        TensorSpec("self", "input", {"uniform": [-4.0, 4.0]}),
        TensorSpec("target", "input", {"uniform": [-2.0, 2.0]}),
        TensorSpec("out", "output", {"constant": 0}),
    ),
    attributes=(AttrSpec("reduction", "int", default=MEAN),),
    case_values=_case_values,
    products=products(*_ALL, overrides={"910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_ieee,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", broadcast_on=_ALL),
    special_values="NaN in any input gives NaN. At infinite inputs the literal formula: exp(-self * target) = inf "
                   "(self = -inf with target > 0, ...) gives NaN, exp(...) = 0 gives -0 * target * gradOutput. For "
                   "finite inputs the golden is the exact value; where the kernel's float32 Exp overflows "
                   "(-self * target > 88.72: NaN, as PyTorch's formula) or an intermediate leaves float32's normal "
                   "range, verify also accepts the float32 kernel's value. reduction outside 0-2 is undefined "
                   "behaviour in the op_api (it indexes REDUCTION_STR unchecked): cases use 0, 1 and 2 only.",
))

CONTRACT_NOTES = """\
aclnnSoftMarginLossBackward phase one (loss/soft_margin_loss_grad/op_api/aclnn_soft_margin_loss_backward.cpp):
1. 161001: workspaceSize or executor null; gradOutput, self, target or out null.
2. 161002: gradOutput, self, target or out dtype not in {FLOAT, FLOAT16, BF16} (GetDtypeSupportListV2: A2, A3,
   950) or {FLOAT, FLOAT16} (910). Each is checked on its own: mixed dtypes are promoted (fp16 + bf16 -> FLOAT).
3. 161002: gradOutput, self or target with more than 8 dims (out's are not checked, only its shape); gradOutput
   and self do not broadcast, or target does not broadcast with their shape; out's shape is not the broadcast
   shape.
- No check of reduction: a value outside 0-2 indexes REDUCTION_STR out of bounds (undefined behaviour).
- Then an empty self -> ACLNN_SUCCESS, workspace 0. (An empty gradOutput or target beside a non-empty self goes on
  to a launch over an empty output.)
- The doc lists no 310P (and the op_api's 910 list is FLOAT/FLOAT16).
- The three inputs are Cast to the promoted type, broadcast to the output's shape, SoftMarginLossGrad (AI Core)
  runs in it, and the result is Cast to out's dtype.
"""
