"""aclnnBinaryCrossEntropyBackward: out = gradOutput * weight * (x - y) / max(x (1 - x), eps) / N (mean), else no / N.

The doc's formula is weight (x - target) / (x (1 - x)) times gradOutput, / numel for mean; the kernel (as PyTorch's
binary_cross_entropy_backward) clamps the denominator at eps = fl32(1e-12), so x = 0 or 1 gives a finite value and x
outside [0, 1] (a negative product) divides by eps: the golden takes that clamp. out has self's shape; gradOutput,
target and weightOptional broadcast to it (a null weight is ones). N = numel(out) = numel(self). The functions
receive `reduction` and the case values `numel` and `cof`.

The 950 kernel (loss/binary_cross_entropy_grad/op_kernel/arch35/binary_cross_entropy_grad_dag.h), in float32:
d = x - y; p = (1 - x) * x; m = Maxs(p, 1e-12f); r = (dy * d) / m; then * w (a weight given), then * cof (mean),
Cast RINT to the input dtype. cof = 1.0f / float(numel(out)) (binary_cross_entropy_grad_tiling_arch35.cpp,
CalcMeanCof). The op_api (loss/binary_cross_entropy_grad/op_api/aclnn_binary_cross_entropy_backward.cpp)
promotes the four inputs and Casts the result to out's dtype.

The result is rational in the inputs: the exact path is Fractions.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..base import AttrSpec, Contract, OpSpec, TensorSpec, defect, grad_linear_reference, legitimate, products
from ..registry import register
from .loss import MEAN, cof32 as _cof32, is_mean as _mean, reduction_rule, mean_defects

F32 = np.float32
EPS = float(F32(1e-12))  # MAKE_CONST(float, 1e-12); PyTorch's clamp_min(EPSILON) on a float tensor
F32_MIN_NORMAL = 2.0**-126
W = "weightOptional"


def _case_values(shapes) -> dict:
    n = math.prod(shapes["out"])
    return {"numel": n, "cof": _cof32(n)}


def _divisor(t) -> int:
    return int(t["numel"]) if _mean(t) else 1


def _reference(t):
    """w (x - y) / max((1 - x) x, eps) / n in float64. x - y, 1 - x, (1 - x) x: one rounding each (relative); the
    clamp is 1-Lipschitz and only raises the denominator, so its relative error stays within the product's; / m,
    * w, / n and * dy add four: 8 ulps, 10 taken."""
    x, y = t["self"], t["target"]
    with np.errstate(all="ignore"):
        m = np.maximum((1.0 - x) * x, EPS)
        factor = t.get(W, 1.0) * (x - y) / m / _divisor(t)
    return grad_linear_reference(t["gradOutput"], factor, np.abs(factor), 10.0)


def _ieee(t):
    x, y = t["self"], t["target"]
    with np.errstate(all="ignore"):
        m = np.maximum((1.0 - x) * x, EPS)  # (NaN x: NaN; x = +-inf: -inf, clamped to eps)
        return t["gradOutput"] * (x - y) / m * t.get(W, 1.0) / _divisor(t)


def _exact(t):
    x = t["self"]
    m = max((1 - x) * x, Fraction(EPS))
    return t["gradOutput"] * (x - t["target"]) / m * t.get(W, 1) / _divisor(t)


def _cof(t) -> float:
    return float(t["cof"]) if _mean(t) else 1.0


def _kernel(t, cof: float | None = None, eps: float | None = EPS, weighted: bool = True, flip: bool = False):
    """The 950 DAG in the inputs' float type: ((dy * (x - y)) / max((1 - x) * x, eps)) [* w] [* cof]."""
    x, y, dy = t["self"], t["target"], t["gradOutput"]
    ft = dy.dtype.type
    with np.errstate(all="ignore"):
        d = (y - x) if flip else (x - y)
        p = (ft(1.0) - x) * x
        m = p if eps is None else np.maximum(p, ft(eps))
        r = (dy * d) / m
        if weighted and W in t:
            r = r * t[W]
        c = _cof(t) if cof is None else cof
        return r * ft(c) if _mean(t) or cof is not None else r


def _stages(t):
    x, y, dy = (np.asarray(t[n]).astype(F32) for n in ("self", "target", "gradOutput"))
    w = np.asarray(t.get(W, 1.0)).astype(F32)
    with np.errstate(all="ignore"):
        d = x - y
        p = (F32(1.0) - x) * x
        m = np.maximum(p, F32(EPS))
        g = dy * d
        r = g / m
        rw = r * w
        out = rw * F32(_cof(t))
        p64 = (1.0 - x.astype(np.float64)) * x.astype(np.float64)
    return x, y, dy, w, d, p, p64, g, r, rw, out


def _edge(t):
    """Where a correct float32 kernel parts from the exact value: the clamp decided on fl32((1 - x) x) on the other
    side of eps than the exact product, or an intermediate (x - y, dy (x - y), the quotient, * w) that overflows or
    falls below 2^-126 while the result may not. The device value there is the float32 kernel's."""
    x, y, dy, w, d, p, p64, g, r, rw, out = _stages(t)
    finite = np.isfinite(x) & np.isfinite(y) & np.isfinite(dy) & np.isfinite(w)
    with np.errstate(all="ignore"):
        clamp = (np.minimum(p, p64) <= EPS) & (np.maximum(p, p64) >= EPS)
        nonzero = (dy != 0) & (x != y) & (w != 0)  # (the exact result is nonzero: a 0 here is an underflow)
        small = nonzero & ((np.abs(d) < F32_MIN_NORMAL) | (np.abs(g) < F32_MIN_NORMAL) | (np.abs(r) < F32_MIN_NORMAL)
                           | (np.abs(rw) < F32_MIN_NORMAL))
        broke = ~np.isfinite(d) | ~np.isfinite(g) | ~np.isfinite(r) | ~np.isfinite(rw)
    where = finite & (clamp | small | broke)
    dev = (rw if not _mean(t) else out) if W in t else (r if not _mean(t) else r * F32(_cof(t)))
    return where, np.broadcast_to(np.asarray(dev, np.float64), np.shape(where))


@defect
def _sign_slip(t):
    """Defect: (target - self) for (self - target): every nonzero result has the wrong sign."""
    return _kernel(t, flip=True)


@defect
def _weight_ignored(t):
    """Defect: weightOptional not applied (the no-weight DAG taken with a weight given)."""
    return _kernel(t, weighted=False)


@defect
def _epsilon_dropped(t):
    """Defect: no clamp at 1e-12: x = 0 or 1 divides by 0 (inf, NaN), x outside [0, 1] by a negative product."""
    return _kernel(t, eps=None)


@legitimate
def _aten_divide(t):
    """Legitimate: PyTorch's CPU order, dy * (x - y) / max((1 - x) x, eps), * weight, then / N (a float32 division
    for mean): within an ulp of the kernel's * fl32(1 / N) at each step."""
    x, y, dy = t["self"], t["target"], t["gradOutput"]
    ft = dy.dtype.type
    with np.errstate(all="ignore"):
        r = dy * (x - y) / np.maximum((ft(1.0) - x) * x, ft(EPS))
        if W in t:
            r = r * t[W]
        return r / ft(int(t["numel"])) if _mean(t) else r


_mean_forgotten, _cof_in_half = mean_defects(_kernel, _cof)

VARIANTS = {
    "sign-slip": _sign_slip,
    "mean-forgotten": _mean_forgotten,
    "weight-ignored": _weight_ignored,
    "epsilon-dropped": _epsilon_dropped,
    "cof-in-half": _cof_in_half,
    "aten-divide": _aten_divide,
}


def _shape_rule(descs, attrs) -> str | None:
    """161002: out's shape is not self's (OP_CHECK_SHAPE_NOT_EQUAL); gradOutput, target or weightOptional do not
    broadcast to self's shape (the broadcast of each with self must be self's)."""
    s = descs["self"].shape
    if 0 in s:
        return None  # (CheckShape returns early for an empty self)
    if descs["out"].shape != s:
        return f"out shape {list(descs['out'].shape)} is not self's {list(s)}"
    for name in ("target", W, "gradOutput"):
        d = descs[name]
        if d.null:
            continue
        if len(d.shape) > len(s) or any(a != b and a != 1 for a, b in zip(d.shape[::-1], s[::-1])):
            return f"{name} shape {list(d.shape)} does not broadcast to self's {list(s)}"
    return None


_ALL = ("950", "A3", "A2", "910", "310P")

SPEC = register(OpSpec(
    name="aclnnBinaryCrossEntropyBackward",
    key="binary_cross_entropy_backward",
    header="aclnnop/aclnn_binary_cross_entropy_backward.h",
    signature=("gradOutput", "self", "target", W, "reduction", "out"),
    summary="Gradient of binary cross entropy: weight (x - y) / (x (1 - x)) dy (denominator clamped at 1e-12), "
            "/ numel for mean.",
    formula="out = gradOutput * weightOptional * (self - target) / max(self * (1 - self), 1e-12) / numel(self) "
            "(mean), without / numel(self) (none, sum); a null weightOptional is ones",
    tensors=(
        TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
        TensorSpec("self", "input", {"uniform": [0.02, 0.98]}),
        TensorSpec("target", "input", {"uniform": [0.0, 1.0]}),
        TensorSpec(W, "input", {"uniform": [0.25, 2.0]}, optional=True),
        TensorSpec("out", "output", {"constant": 0}),
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
    contract=Contract(dtypes="promote", broadcast_on=_ALL, attribute_rule=reduction_rule, shape_rule=_shape_rule),
    special_values="NaN in any input gives NaN; self = +-inf gives +-inf times the sign of gradOutput * weight (the "
                   "product (1 - self) self is -inf, clamped to 1e-12); self = 0 or 1 divides by 1e-12 (the clamp), "
                   "finite. Where the clamp's float32 decision or an intermediate leaves float32's normal range, "
                   "verify also accepts the float32 kernel's value.",
))

CONTRACT_NOTES = """\
aclnnBinaryCrossEntropyBackward phase one (loss/binary_cross_entropy_grad/op_api/aclnn_binary_cross_entropy_backward.cpp):
1. 161001: gradOutput, self, target or out null (weightOptional may be null: ones).
2. 161002: more than 8 dims (the template's aclTensor* test matches out only, a non-const pointer: the inputs'
   dims are held by the shape checks below).
3. 161002: gradOutput, self, target, out or a given weight not in {FLOAT16, FLOAT, BF16} (A2, A3, 950) or
   {FLOAT16, FLOAT} (910, 310P).
4. 161002: self and target (and weight) of different storage formats (ND here always).
5. 161002 unless self is empty: out's shape not self's; target, weight or gradOutput not broadcasting to self's
   shape (their broadcast with self must be self's shape: a 0-d self with a larger gradOutput is refused).
6. 161002: reduction outside [0, 2].
7. 161002: PromoteType(self, target, gradOutput, weight) undefined or not castable to out's dtype.
- Then an empty self -> ACLNN_SUCCESS, workspace 0. (The contract here still requires the inputs to broadcast to
  out's shape for an empty self, where the op_api skips its shape checks: no case tests that corner.)
- The four inputs (a null weight: OnesLike(self)) are Cast to the promoted type; BinaryCrossEntropyGrad runs in it
  and its result is Cast to out's dtype.
"""
