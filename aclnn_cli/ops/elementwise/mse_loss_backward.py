"""aclnnMseLossBackward: out = gradOutput * (self - target) * 2 / N for reduction mean, else * 2.

N is numel(self), not the broadcast output's (the doc's x.numel(); the 950 tiling reads predict's
storage shape). The op has no reduction of its own: mean is one float32 scalar, so it is an
Elementwise op; its functions receive `reduction` (0 none, 1 mean, 2 sum) and the case values
`numel` (self's) and `numel_out` (the output's, only for the defect that divides by it).

The 950 kernel (loss/mse_loss_grad/op_kernel/arch35/mse_loss_grad_dag.h, MseLossGradDag and the
Scalar DAG for a one-element gradOutput): inputs cast to float32, d = x - y, t = d * cof, out = t * dy,
Cast RINT to the input dtype; cof = static_cast<float>(2.0 / double(N)) for mean, else 2.0f
(loss/mse_loss_grad/op_host/arch35/mse_loss_grad_tiling_arch35.cpp, CalcReduceMeanCof). The op_api
(loss/mse_loss_grad_v2/op_host/op_api/aclnn_mse_loss_backward.cpp) then Casts to out's dtype.

The result is rational in the inputs: the exact path is Fractions.
"""

from __future__ import annotations

import math

import numpy as np

from ..base import AttrSpec, Contract, F64_UNIT, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..registry import register
from .loss import mean_defects

MEAN = 1
REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
F32_MIN_NORMAL = 2.0**-126
F32 = np.float32


def _numels(shapes) -> dict[str, int]:
    """numel(self), the mean divisor; numel(out), which only the `mean-by-output-numel` defect reads."""
    return {"numel": math.prod(shapes["self"]), "numel_out": math.prod(shapes["out"])}


def _divisor(t) -> int:
    """N for mean, 1 otherwise (the exact formula's divisor)."""
    return int(t["numel"]) if int(t["reduction"]) == MEAN else 1


def _reference(t):
    """dy * ((x - y) * 2 / n) in float64, n = N for mean, else 1.

    At most three roundings (x - y, / n, dy * factor; * 2 is exact), and float32 inputs keep every
    intermediate in float64's normal range (|x - y| <= 2^129; a nonzero |dy (x - y) 2 / n| >=
    2^-149 * 2^-149 * 2^-62), so |value - exact| <= ((1 + u)^3 - 1) |exact| < 4 u |value| (u = 2^-53).
    n up to 2^53 converts exactly. scale = |value| + bound >= |exact|: no term cancels beyond the one
    exact subtraction, so a float32 kernel's error is proportional to the result itself.
    Exact zeros carry the kernel's IEEE sign: (x - y) is +0 where x == y, times dy.
    """
    factor = (t["self"] - t["target"]) * 2.0 / _divisor(t)
    value = t["gradOutput"] * factor
    bound = 4.0 * F64_UNIT * np.abs(value)
    return Reference(value, bound, np.abs(value) + bound)


def _exact(t):
    return t["gradOutput"] * (t["self"] - t["target"]) * 2 / _divisor(t)


def cof_950(t) -> float:
    """The 950 tiling's reduceMeanCof: static_cast<float>(2.0f / static_cast<double>(N)) for mean (a double
    quotient rounded to float32), 2.0f for none and sum. (N = 0 never launches: the op_api returns first.)"""
    if int(t["reduction"]) != MEAN:
        return 2.0
    n = int(t["numel"])
    return float(F32(2.0 / n)) if n else math.nan


def _kernel(t, cof: float | None = None):
    """The 950 DAG in the inputs' float type: (x - y) * cof, then * dy."""
    x = t["self"]
    ft = x.dtype.type
    with np.errstate(all="ignore"):
        return ((x - t["target"]) * ft(cof_950(t) if cof is None else cof)) * t["gradOutput"]


def _edge(t):
    """Where the kernel's float32 intermediates leave float32's normal range while the result may not.

    x - y overflows (x = 3e38, y = -3e38: inf, where dy = 1e-10 makes the exact result 1.2e29), d * cof
    overflows (sum, |d| > 2^127), or d * cof falls below 2^-126 (mean, tiny d) and loses bits that
    a large dy scales back up (or flushes to 0). The device value there is the float32 kernel's.
    """
    x, y, dy = (np.asarray(t[n]).astype(F32) for n in ("self", "target", "gradOutput"))
    with np.errstate(all="ignore"):
        d = x - y
        p = d * F32(cof_950(t))
        device = (p * dy).astype(np.float64)
    finite = np.isfinite(x) & np.isfinite(y) & np.isfinite(dy)
    lost = (np.abs(p) < F32_MIN_NORMAL) & (d != 0)
    return finite & (np.isinf(d) | np.isinf(p) | lost), device


@defect
def _sign_slip(t):
    """Defect: target - self: every nonzero result has the wrong sign (the flipped term)."""
    return _kernel({**t, "self": t["target"], "target": t["self"]})


@defect
def _factor_two_dropped(t):
    """Defect: the derivative's 2 left out (cof = 1/N, or 1): every result halved."""
    return _kernel(t, cof_950(t) / 2)


@defect
def _mean_by_output_numel(t):
    """Defect: the wrong mean divisor, numel of the broadcast output instead of self's (the doc's trap)."""
    return _kernel({**t, "numel": t["numel_out"]})


@defect
def _reduction_codes_swapped(t):
    """Defect: the API's int read with the tiling's own table ({none 0, sum 1, mean 2},
    mse_loss_grad_tiling_arch35.cpp STR_2_INT): mean (1) computed as sum and sum (2) as mean."""
    return _kernel({**t, "reduction": {1: 2, 2: 1}.get(int(t["reduction"]), int(t["reduction"]))})


@defect
def _integer_cof(t):
    """Defect: cof = 2 / N in integer arithmetic (int64 dimVal): 0 for N > 2, so mean gives zeros."""
    return _kernel(t, 2 // int(t["numel"]) if int(t["reduction"]) == MEAN and int(t["numel"]) else cof_950(t))


@defect
def _graph_input_order(t):
    """Defect: the graph op takes (predict, label, dout), the API (gradOutput, self, target); launched in
    the API's order it computes (dy - x) * cof * y."""
    return _kernel({**t, "self": t["gradOutput"], "target": t["self"], "gradOutput": t["target"]})


@legitimate
def _v2_cof(t):
    """Legitimate: the A2/A3/310P MseLossGradV2 tiling (loss/mse_loss_grad_v2/op_host/mse_loss_grad_v2_tiling.cpp):
    cof = (1.0f / N_f) * 2.0f with N_f the shape's product in float32 (here fl32(N): the same below 2^24)."""
    if int(t["reduction"]) != MEAN:
        return _kernel(t)
    return _kernel(t, float(F32(F32(1.0) / F32(int(t["numel"]))) * F32(2.0)))


@legitimate
def _aten_formula(t):
    """Legitimate: PyTorch's CPU mse_backward_cpu_kernel (aten/src/ATen/native/cpu/PointwiseOpsKernel.cpp),
    scalar_val * (self - target) * grad with scalar_val = (2. / numel, a double) .to<float>(): in float32
    the 950 kernel's values (the same roundings, the products commuted)."""
    x = t["self"]
    ft = x.dtype.type
    n = _divisor(t)
    norm = 2.0 / n if n else math.inf  # (C++: 2. / 0 is inf; an empty self never launches)
    with np.errstate(all="ignore"):
        return (ft(norm) * (x - t["target"])) * t["gradOutput"]


@legitimate
def _dy_first(t):
    """Legitimate: another float32 order, (dy * (x - y)) * cof: three roundings, as the kernel's.
    (Outside float32's range it parts from the kernel: dy (x - y) may overflow where the mean result does
    not; no bundled case has such inputs.)"""
    x = t["self"]
    ft = x.dtype.type
    with np.errstate(all="ignore"):
        return (t["gradOutput"] * (x - t["target"])) * ft(cof_950(t))


@defect
def _divide_last(t):
    """Defect (overflow): the doc's order in float32, ((x - y) * 2 * dy) / fl32(N): within 2 ulps on ordinary
    inputs, but (x - y) * 2 * dy overflows where the mean result is finite (x - y = 3e38, dy = 1e-5)."""
    x = t["self"]
    ft = x.dtype.type
    n = _divisor(t)
    with np.errstate(all="ignore"):
        return ((x - t["target"]) * ft(2.0) * t["gradOutput"]) / ft(n)


# (cof-in-half: the V2 kernel's native branch, Muls(..., static_cast<inType>(cof)), instantiated for half; the
# source takes it for float only)
_mean_forgotten, _cof_in_half = mean_defects(_kernel, cof_950, sum_cof=2.0)

VARIANTS = {
    "sign-slip": _sign_slip,
    "factor-two-dropped": _factor_two_dropped,
    "mean-forgotten": _mean_forgotten,
    "mean-by-output-numel": _mean_by_output_numel,
    "reduction-codes-swapped": _reduction_codes_swapped,
    "integer-cof": _integer_cof,
    "cof-in-half": _cof_in_half,
    "graph-input-order": _graph_input_order,
    "v2-cof": _v2_cof,
    "aten-formula": _aten_formula,
    "dy-first": _dy_first,
    "divide-last": _divide_last,
}


def _reduction_rule(a) -> str | None:
    """161002: reduction outside [0, 2] (CheckReduction)."""
    r = a["reduction"]
    return None if r in REDUCTIONS else f"reduction {r} is not 0 (none), 1 (mean) or 2 (sum)"


def _same_dtype_rule(descs, attrs) -> str | None:
    """161002: gradOutput or target of another dtype than self (OP_CHECK_DTYPE_NOT_SAME). Contract has no
    'inputs tied, output free' mode: "promote" frees the output and this ties the inputs."""
    x = descs["self"].dtype
    for name in ("gradOutput", "target"):
        if descs[name].dtype != x:
            return f"{name} dtype {descs[name].dtype.name} is not self's dtype {x.name}"
    return None


_ALL = ("950", "A3", "A2", "310P")

SPEC = register(OpSpec(
    name="aclnnMseLossBackward",
    key="mse_loss_backward",
    header="aclnnop/aclnn_mse_loss_backward.h",
    signature=("gradOutput", "self", "target", "reduction", "out"),
    summary="Gradient of the mean squared error loss: 2 (x - y) dy, divided by numel(x) for mean.",
    formula="out = gradOutput * (self - target) * 2 / numel(self) (reduction mean), "
            "gradOutput * (self - target) * 2 (none, sum)",
    tensors=(
        TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
        TensorSpec("self", "input", {"uniform": [-4.0, 4.0]}),
        TensorSpec("target", "input", {"uniform": [-4.0, 4.0]}),
        TensorSpec("out", "output", {"constant": 0}),
    ),
    attributes=(AttrSpec("reduction", "int", default=MEAN),),
    case_values=_numels,
    products=products(*_ALL, overrides={"310P": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", broadcast_on=_ALL, attribute_rule=_reduction_rule,
                      shape_rule=_same_dtype_rule),
    special_values="NaN in any input gives NaN; self or target +-inf gives +-inf times sign(gradOutput) "
                   "(NaN where gradOutput is 0, or self and target are the same infinity); gradOutput +-inf "
                   "gives +-inf (NaN where self == target). Exact zeros (self == target) carry gradOutput's "
                   "sign, as the kernel's ((self - target) * cof) * gradOutput gives them. Where self - target "
                   "or (self - target) * cof leaves float32's normal range but the result does not, the golden "
                   "is exact; verify also accepts the float32 kernel's value.",
))

CONTRACT_NOTES = """\
aclnnMseLossBackward phase one (loss/mse_loss_grad_v2/op_host/op_api/aclnn_mse_loss_backward.cpp), in order:
1. 161001: workspaceSize or executor null (OP_CHECK_COMM_INPUT); gradOutput, self, target or out null.
2. 161002: gradOutput's or target's dtype differs from self's; self's dtype not in {FLOAT, FLOAT16,
   BF16} (A2, A3, 950) or {FLOAT, FLOAT16} (other SoCs: 310P); out's dtype not in that list. out may be
   any listed dtype: the kernel rounds to self's dtype, a final l0op::Cast to out's (double rounding).
3. 161002: reduction outside [0, 2] (0 none, 1 mean, 2 sum).
4. 161002: gradOutput, self or target with more than 8 dims (0-d is accepted; the doc says 1-8);
   gradOutput and self do not broadcast, or target does not broadcast with their shape; out's shape
   is not the broadcast shape.
- Then an empty self, gradOutput or target -> ACLNN_SUCCESS, workspace 0, nothing launched (also for mean).
- Here rule 2's "tied inputs" is Contract.shape_rule (checked after rules 3 and 4: the status is the same).
- The doc lists no 910; the source would accept FLOAT/FLOAT16 there (no SoC check beyond the bf16 list).
- l0 (op_api/mse_loss_grad.cpp): MseLossGradV2 on 910B/910_93/310P when the three shapes and formats are
  equal (cof = fl32(1/N_f) * 2, N_f the float32 product of self's dims), else MseLossGrad (the 950's DAG;
  cof = fl32(2/N) from a double quotient). Both: d = x - y, d * cof, * dy in float32.
"""
