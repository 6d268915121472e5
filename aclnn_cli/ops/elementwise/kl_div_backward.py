"""aclnnKlDivBackward: out = -gradOutput * target / N (logTarget false), -gradOutput * exp(target) / N (true).

The gradient of KL(target || exp(self)) with respect to self: self itself is never read (only its shape).
N is numel(self) for reduction mean (1), self's first dim for batchmean (3), 1 for none (0), sum (2) and any other
value (the op_api's GetReductionStr maps it to "none"; nothing checks it). self is the broadcast shape here (see
CONTRACT_NOTES): the tiling's divisor comes from the kernel's `input`, self broadcast to target's shape.
Elementwise: the functions receive `reduction`, `logTarget` and the case values `numel`, `batch` (self's) and
`numel_target`, `batch_target` (only for the defect that reads the divisor from target).

The 950 kernel (loss/kl_div_loss_grad/op_kernel/arch35/kl_div_loss_grad_dag.h; one DAG per logTarget, the tiling
key), in float32 (16-bit inputs Cast up): e = Exp(target) (logTarget) or target; p = e * grad; q = p * -1;
out = q * cof (the Var scalar), Cast RINT to the input dtype. `input` is only copied through (CalcInput): self's
values, NaN included, never reach the result. cof = static_cast<float>(1.0 / double(N)), N from input's storage
shape (0-d as [1]) (op_host/arch35/kl_div_loss_grad_tiling.cpp, CalcReductionCof). The op_api
(op_api/aclnn_kl_div_backward.cpp) runs the kernel in float16 when the three inputs are float16, else Casts them to
float32; then Casts the result to out's dtype.

For logTarget false the result is rational in the inputs (the exact path is Fractions); for true, exp in Decimal.
"""

from __future__ import annotations

import math

import numpy as np

from .. import exact as X
from ..base import AttrSpec, Contract, F64_UNIT, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..families import Elementwise, broadcast_shape
from ..graphops import GraphOp, boolean, reduction
from ..mathfns import exp
from ..registry import register
from ...tensor import dtypes as D
from .loss import cof32, mean_defects

F32 = np.float32
F32_MIN_NORMAL = 2.0**-126
MEAN, BATCHMEAN = 1, 3
JUDGED = (D.FLOAT16, D.BFLOAT16, D.FLOAT32)  # (the dtypes whose overflow threshold a result may cross)


def _case_values(shapes) -> dict:
    """self's numel and first dim (0-d: [1], EnsureNotScalar), the divisors; target's, for the defect reading them."""
    x, y = shapes["self"] or (1,), shapes["target"] or (1,)
    return {"numel": math.prod(x), "batch": x[0], "numel_target": math.prod(y), "batch_target": y[0]}


def divisor(t) -> int:
    """N: numel for mean, the first dim for batchmean, else 1 (the exact formula's divisor)."""
    r = int(t["reduction"])
    return int(t["numel"]) if r == MEAN else int(t["batch"]) if r == BATCHMEAN else 1


def cof_950(t) -> float:
    """The tiling's reducationCof: static_cast<float>(1.0 / static_cast<double>(N)), a double quotient rounded to
    float (NaN for N = 0: an empty self never launches)."""
    n = divisor(t)
    return float(F32(1.0 / n)) if n else math.nan


def _factor(t):
    """target, or exp(target) for logTarget, in the inputs' float type (mathfns.exp: float32's the same bits on
    every CPU, float64's np.exp)."""
    return exp(t["target"]) if t["logTarget"] else t["target"]


def _reference(t):
    """-(e * dy) / n in float64, e = target (exact) or np.exp(target) (within 1 float64 ulp): at most three
    roundings, 4 u |value| (5 u taken), plus |dy| 2^-1060 where exp falls below float64's normal range (target <
    -708: the exact result is then far below any dtype's smallest subnormal). No terms cancel: scale = |value| + bound.
    Past target = 709.78 float64's exp overflows: the exact result, |dy| e^709.78 / n > 10^244 for any float32 dy != 0
    and n <= 2^63, rounds to an infinity in every dtype, the value's (bound 0); dy = +-0 gives the exact signed zero."""
    dy = t["gradOutput"]
    n = divisor(t)
    with np.errstate(all="ignore"):
        e = _factor(t)
        value = -(e * dy) / n
        value = np.where(np.isinf(e) & (dy == 0), -dy, value)
        bound = np.where(np.isfinite(value), 5 * F64_UNIT * np.abs(value) + np.abs(dy) * 2.0**-1060, 0.0)
    return Reference(value, bound, np.where(np.isfinite(value), np.abs(value) + bound, 0.0))


def _ieee(t):
    """The kernel's formula in float64 where an input is inf or NaN (self is not read): exp(+inf) * 0 is NaN,
    exp(-inf) = 0 gives a signed zero."""
    with np.errstate(all="ignore"):
        return -(_factor(t) * t["gradOutput"]) / divisor(t)


def _exact(t):
    dy, y, n = t["gradOutput"], t["target"], divisor(t)
    if not t["logTarget"]:
        return -dy * y / n
    return X.evaluate(lambda: -X.dec(dy) * X.dec(y).exp() / n)


def _kernel(t, cof: float | None = None, log: bool | None = None, sign: float = -1.0):
    """The 950 DAG in the inputs' float type: Mul(e, grad), Muls(-1), Muls(cof); the keywords make the defects."""
    dy = t["gradOutput"]
    ft = dy.dtype.type
    with np.errstate(all="ignore"):
        e = _factor(t if log is None else {**t, "logTarget": log})
        return ((e * dy) * ft(sign)) * ft(cof_950(t) if cof is None else cof)


def _edge(t):
    """Where a float32 intermediate leaves float32's normal range while the exact result may not: Exp overflows
    (target > 88.72: +-inf, NaN for dy = 0) or falls below 2^-126 (target < -87.34: subnormal, then 0); e * dy
    overflows (the mean's result may be finite) or is subnormal. Also where the float32 result and the exact one
    round to opposite sides of a dtype's overflow threshold. The device value there is the float32 kernel's."""
    y, dy = (np.asarray(t[n]).astype(F32) for n in ("target", "gradOutput"))
    with np.errstate(all="ignore"):
        e = _factor({**t, "target": y})
        p = e * dy
        device = ((p * F32(-1.0)) * F32(cof_950(t))).astype(np.float64)
        value = _reference(t).value
        lost = (np.abs(p) < F32_MIN_NORMAL) & (e != 0) & (dy != 0)
        if t["logTarget"]:
            lost |= ~np.isfinite(e) | (e < F32_MIN_NORMAL)
        crosses = np.zeros(np.shape(device), dtype=bool)
        for d in JUDGED:
            crosses |= np.isinf(D.round_from_f64(value, d)) != np.isinf(D.round_from_f64(device, d))
    finite = np.isfinite(y) & np.isfinite(dy)
    return finite & (lost | ~np.isfinite(p) | crosses), device


@defect
def _sign_slip(t):
    """Defect: the Muls by -1 dropped: every nonzero result has the wrong sign."""
    return _kernel(t, sign=1.0)


@defect
def _log_target_swapped(t):
    """Defect: the tiling key's two DAGs exchanged: exp(target) where logTarget is false, target where true."""
    return _kernel(t, log=not t["logTarget"])


@defect
def _batchmean_as_mean(t):
    """Defect: batchmean divided by numel (PyTorch's reduction='mean' trap, which batchmean exists to avoid)."""
    return _kernel({**t, "reduction": MEAN} if int(t["reduction"]) == BATCHMEAN else t)


@defect
def _reduction_codes_swapped(t):
    """Defect: the API's int read with the tiling's own table (STR_2_INT {none 0, sum 1, mean 2, batchmean 3}): mean
    (1) computed as sum and sum (2) as mean."""
    return _kernel({**t, "reduction": {1: 2, 2: 1}.get(int(t["reduction"]), int(t["reduction"]))})


@defect
def _divisor_from_target(t):
    """Defect: N read from target's shape (the kernel's input 2) instead of input's (1): wrong where target
    broadcasts."""
    return _kernel({**t, "numel": t["numel_target"], "batch": t["batch_target"]})


@defect
def _positive_target_mask(t):
    """Defect: PyTorch's old kl_div_backward, -target * grad only where target > 0, else 0: this API masks nothing
    (its DAG has no select; log-space and negative targets give -target * grad)."""
    out = _kernel(t)
    if t["logTarget"]:
        return out
    return np.where(t["target"] > 0, out, out.dtype.type(0))


@legitimate
def _float_cof(t):
    """Legitimate: the experimental kernel's tiling (experimental/loss/kl_div_loss_grad/op_host/
    kl_div_loss_grad_tiling.cpp), cof = 1.0f / N in float arithmetic: fl32(1 / fl32(N)), the same below 2^24."""
    return _kernel(t, cof32(divisor(t)))


@legitimate
def _aten_order(t):
    """Legitimate: PyTorch autograd's order, mean's backward first (dy / N, a division) then kl_div's -target * g
    (or -exp(target) * g): three roundings, another order."""
    dy = t["gradOutput"]
    ft = dy.dtype.type
    with np.errstate(all="ignore"):
        return -(_factor(t) * (dy / ft(divisor(t))))


_mean_forgotten, _cof_in_half = mean_defects(_kernel, cof_950)

VARIANTS = {
    "kl-sign-slip": _sign_slip,
    "kl-log-target-swapped": _log_target_swapped,
    "kl-batchmean-as-mean": _batchmean_as_mean,
    "kl-reduction-codes-swapped": _reduction_codes_swapped,
    "kl-divisor-from-target": _divisor_from_target,
    "kl-positive-target-mask": _positive_target_mask,
    "mean-forgotten": _mean_forgotten,
    "cof-in-half": _cof_in_half,
    "kl-float-cof": _float_cof,
    "kl-aten-order": _aten_order,
}


def _shape_rule(d, attrs) -> str | None:
    """161002 (CheckShape): self and target do not broadcast; gradOutput does not broadcast to their shape without
    widening it; out is not self's shape."""
    x, y, dy, out = (tuple(d[n].shape) for n in ("self", "target", "gradOutput", "out"))
    wide = broadcast_shape(x, y)
    if wide is None:
        return f"self {list(x)} and target {list(y)} do not broadcast"
    if broadcast_shape(dy, wide) != wide:
        return f"gradOutput {list(dy)} does not broadcast to {list(wide)}"
    if out != x:
        return f"out shape {list(out)} is not self's shape {list(x)}"
    return None


def graph_reduction(value) -> int:
    """KlDivLossGrad's reduction string -> the API's int64: 'batchmean' 3, the others as every loss's (graphops)."""
    if str(value).strip().lower() == "batchmean":
        return BATCHMEAN
    try:
        return reduction(value)
    except ValueError:
        raise ValueError(f"reduction {value!r} is not none, mean, sum or batchmean") from None


# the doc's products (the op_api also lists FLOAT, FLOAT16 for 910 and 310P, which the doc does not support); the
# OpDef configures ascend950 only: A2 and A3 run a KlDivLossGrad kernel ops-nn does not hold, judged by the same golden
_ALL = ("950", "A3", "A2")

SPEC = register(OpSpec(
    name="aclnnKlDivBackward",
    key="kl_div_backward",
    header="aclnnop/aclnn_kl_div_backward.h",
    signature=("gradOutput", "self", "target", "reduction", "logTarget", "out"),
    summary="Gradient of the KL divergence loss with respect to self (log-probabilities): -target dy "
            "(-exp(target) dy for logTarget), divided by numel(self) for mean, by self's first dim for batchmean.",
    formula="out = -gradOutput * (logTarget ? exp(target) : target) / N, N = numel(self) (reduction 1, mean), "
            "self.shape[0] (3, batchmean), else 1",
    tensors=(
        TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
        TensorSpec("self", "input", {"uniform": [-4.0, 0.0]}, read_by_kernel=False),
        TensorSpec("target", "input", {"uniform": [0.0, 1.0]}),
        TensorSpec("out", "output", {"constant": 0}),
    ),
    attributes=(AttrSpec("reduction", "int", default=MEAN), AttrSpec("logTarget", "bool", default=False)),
    case_values=_case_values,
    products=products(*_ALL),
    dims=(0, 8),
    empty_ok=True,
    family=Elementwise(inputs_broadcast=False, output_like="self"),  # (phase one's broadcast rules: _shape_rule)
    aliases={"grad_output": "gradOutput", "input": "self", "log_target": "logTarget"},
    graph_ops={"KlDivLossGrad": GraphOp("aclnnKlDivBackward", ("grad", "input", "target"),
                                        to_inputs=("gradOutput", "self", "target"), outputs=("y",),
                                        to_outputs=("out",), attrs={"reduction": ("reduction", graph_reduction),
                                                                    "log_target": ("logTarget", boolean)})},
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_ieee,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", shape_rule=_shape_rule),
    special_values="self is not read: its NaN or inf changes nothing. NaN in gradOutput or target gives NaN; target "
                   "+-inf (logTarget false) gives -+inf times sign(gradOutput) (NaN where it is 0); logTarget: "
                   "target +inf gives -inf * sign(gradOutput) (NaN at 0), -inf gives a zero of sign -sign(gradOutput); "
                   "gradOutput +-inf gives -+inf where the factor is nonzero. Exact zeros carry the sign of "
                   "-(factor * gradOutput). Where Exp or e * gradOutput leaves float32's normal range (target > 88.72 "
                   "or < -87.34) but the result does not, or the two sides of an overflow threshold, the golden is "
                   "exact; verify also accepts the float32 kernel's value. reduction values other than 1, 2, 3 are "
                   "none (the op_api checks nothing).",
))

CONTRACT_NOTES = """\
aclnnKlDivBackward phase one (loss/kl_div_loss_grad/op_api/aclnn_kl_div_backward.cpp), in order:
1. 161001: workspaceSize or executor null (OP_CHECK_COMM_INPUT); gradOutput, self, target or out null.
2. 161002: self's dtype not castable to out's (any float to any float is); gradOutput, self, target or out not in
   {FLOAT, FLOAT16, BF16} (A2, A3, 950; the list for 910 and 310P is FLOAT, FLOAT16, but the doc supports neither).
   The doc's "self and out of one dtype" is not checked: out may be any listed dtype (a final l0op::Cast).
3. 161002: gradOutput, self, target or out with more than 8 dims (0-d is accepted; the doc says 1-8); self and target
   do not broadcast; gradOutput does not broadcast to their shape B without widening it; out's shape is not self's.
- No check of reduction: GetReductionStr maps any value but 1, 2, 3 to "none".
- Then an empty self -> ACLNN_SUCCESS, workspace 0, nothing launched.
- Inputs made contiguous; unless all three are FLOAT16, Cast to FLOAT (bf16 and mixed dtypes run in float32, one
  rounding to out's dtype; here a bf16 self, target and gradOutput round through bf16 first: the same bits for a bf16
  out, a coarser judge for another); self BroadcastTo B; KlDivLossGrad (AI Core); ReduceSum of the gradient to out's
  shape where B is wider than self; Cast to out's dtype.
- Not modelled: target widening self (B != self's shape): phase one accepts it and the op_api sums the gradient over
  the widened axes; a case of such shapes is refused when it loads (Elementwise's output_like), not claimed as a
  status.
"""
