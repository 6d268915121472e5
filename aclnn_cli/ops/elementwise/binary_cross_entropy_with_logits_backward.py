"""aclnnBinaryCrossEntropyWithLogitsBackward: out = gradOutput * w * ((1 + (pw - 1) y) sigmoid(x) - pw y) / N.

The gradient of -w [pw y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))] in x (self), y = target, w =
weightOptional, pw = posWeightOptional (a null one is ones), / numel(self) for mean. out has self's shape and
target's dtype; gradOutput and the two weights broadcast to self's shape. The functions receive `reduction` and
the case values `numel` and `cof`.

The 950 kernel (loss/sigmoid_cross_entropy_with_logits_grad_v2/op_kernel/arch35/
sigmoid_cross_entropy_with_logits_grad_v2_dag.h, SigmoidCrossEntropyWithLogitsGradV2Impl), all in float32 (16-bit
inputs Cast up): s = 1 / (Exp(x * -1) + 1); t = pw * y; g = ((t + 1) - y) * s - t; g = g * dy; g = g * w; for
mean g = g * scale, Cast RINT to the input dtype. The op_api (op_api/aclnn_binary_cross_entropy_with_logits_
backward.cpp) passes OnesLike(self) for a null weight or posWeight, so the DAG with both weights always runs;
it promotes the five inputs and Casts the result to out's dtype. scale = 1.0f / max(1.0f, (float)numel(predict))
(op_host/arch35/..._tiling.cpp, GetScale), predict being self. PyTorch's binary_cross_entropy_with_logits_backward
has the same form: (t + 1 - y) * sigmoid(x) - t.

The golden is the exact value (Decimal): sigmoid(x) (1 - y) - t sigmoid(-x), times dy w / N. It cancels near
the loss's minimum and where sigmoid(x) rounds to 1 in float32; a float32 kernel's error is proportional to the
kernel form's terms, (1 + |t| + |y|) sigmoid(x) + |t|, which is the `scale`.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np

from .. import exact as X
from ..base import AttrSpec, Contract, F64_UNIT, OpSpec, Reference, TensorSpec, defect, legitimate, products, sigmoid_pair
from ..mathfns import exp
from ..registry import register
from .loss import MEAN, cof32 as _cof32, is_mean as _mean, reduction_rule, mean_defects

F32 = np.float32
F32_MIN_NORMAL = 2.0**-126
W, PW = "weightOptional", "posWeightOptional"


def _case_values(shapes) -> dict:
    n = math.prod(shapes["self"])
    return {"numel": n, "cof": _cof32(n)}


def _divisor(t) -> int:
    return int(t["numel"]) if _mean(t) else 1


def _reference(t):
    """sigmoid(x) (1 - y) - t sigmoid(-x), t = pw y (exact in float64), with sigmoid_pair's two values (16 ulps
    each, no overflow): each product within 18 ulps of its term, the difference one more, * dy, * w and / n three:
    22 ulps of the terms, 24 taken. scale: the kernel form's terms."""
    x, y, dy = t["self"], t["target"], t["gradOutput"]
    w, pw = t.get(W, 1.0), t.get(PW, 1.0)
    s_pos, s_neg = sigmoid_pair(x)
    p = pw * y
    wn = np.abs(w * dy) / _divisor(t)
    value = (s_pos * (1.0 - y) - p * s_neg) * w * dy / _divisor(t)
    bound = 24 * F64_UNIT * wn * (s_pos * np.abs(1.0 - y) + np.abs(p) * s_neg) + wn * 2.0**-1060
    scale = np.maximum(wn * ((1.0 + np.abs(p) + np.abs(y)) * s_pos + np.abs(p)), np.abs(value) + bound)
    return Reference(value, bound, scale)


def _ieee(t):
    """At inf/NaN inputs, the kernel's form in float64: x = -inf gives sigmoid 0, so -pw y dy w; x = +inf gives
    1 - y; an infinite target, weight or gradOutput carries through (inf - inf or 0 * inf: NaN)."""
    x, y, dy = t["self"], t["target"], t["gradOutput"]
    with np.errstate(all="ignore"):
        s = 1.0 / (np.exp(-x) + 1.0)
        p = t.get(PW, 1.0) * y
        return (((p + 1.0) - y) * s - p) * dy * t.get(W, 1.0) / _divisor(t)


TINY = Fraction(1, 10**2000)  # stands in for a sigmoid(-|x|) under SMALL (|x| > 2300)
SMALL = Decimal("1e-1000")


def _exact(t):
    """A rational part plus one transcendental term, added in Fractions: with a = 1 + (pw - 1) y and p = pw y,
    x >= 0: (1 - y) - a sigmoid(-x); x < 0: a sigmoid(x) - p (sigmoid(x) = 1 - sigmoid(-x)). The term is Decimal to 60
    digits of its own size, so however small it is against the rational part (a 16-bit target's 1 - y lies on a
    rounding tie of the output dtype, ops-nn's fp16 cases at x = 137), the sum falls on the right side: a Decimal
    sum of the two would round the term away and leave the tie. A term under 10^-1000 is TINY: any value
    under 10^-1000 of the rational part's scale rounds alike (the rational part lies on a rounding boundary
    or at least 2^-600 of its scale away)."""
    x, y = Fraction(t["self"]), Fraction(t["target"])
    pw = Fraction(t[PW]) if PW in t else Fraction(1)
    w = Fraction(t[W]) if W in t else Fraction(1)
    a, p = 1 + (pw - 1) * y, pw * y
    s = X.evaluate(lambda: X.sigmoid(-abs(X.dec(x))))  # sigmoid(-|x|), in (0, 1/2]
    s = Fraction(s) if s > SMALL else TINY  # (Decimal's e^-x for x past 2.3e9 is 0 or at its Etiny, 1e-1000000059)
    g = (1 - y) - a * s if x >= 0 else a * s - p
    return Fraction(t["gradOutput"]) * w * g / _divisor(t)


def _cof(t) -> float:
    return float(t["cof"]) if _mean(t) else 1.0


def _kernel(t, cof: float | None = None, pos: bool = True, weighted: bool = True, exp_sign: float = -1.0,
            minus_t: bool = True):
    """The 950 DAG in the inputs' float type (float32 for emulate)."""
    x, y, dy = t["self"], t["target"], t["gradOutput"]
    ft = dy.dtype.type
    one = ft(1.0)
    with np.errstate(all="ignore"):
        s = one / (exp(x * ft(exp_sign)) + one)
        p = t[PW] * y if (pos and PW in t) else y * one
        g = ((p + one) - y) * s - (p if minus_t else y)
        g = g * dy
        if weighted and W in t:
            g = g * t[W]
        c = _cof(t) if cof is None else cof
        return g * ft(c) if (_mean(t) or cof is not None) else g


def _edge(t):
    """Where the float32 kernel legitimately parts from the exact value beyond its terms' scale: Exp overflows or
    sigmoid falls below 2^-126 (x < -87.3: s is 0 or short of bits where the exact tmp * sigmoid(x) is all the
    result, pw y = 0), and a product (g * dy, * w, * scale) below float32's normal range. The device value there is
    the float32 kernel's."""
    x, y, dy = (np.asarray(t[n]).astype(F32) for n in ("self", "target", "gradOutput"))
    w = np.asarray(t.get(W, 1.0)).astype(F32)
    pw = np.asarray(t.get(PW, 1.0)).astype(F32)
    finite = np.isfinite(x) & np.isfinite(y) & np.isfinite(dy) & np.isfinite(w) & np.isfinite(pw)
    with np.errstate(all="ignore"):
        s = F32(1) / (exp(-x) + F32(1))
        p = pw * y
        g = ((p + F32(1)) - y) * s - p
        gd = g * dy
        gw = gd * w
        out = gw * F32(_cof(t)) if _mean(t) else gw
        small_s = (np.abs(s) < F32_MIN_NORMAL) & (p == 0) & (y != 1)
        small = ((np.abs(g) < F32_MIN_NORMAL) | (np.abs(gd) < F32_MIN_NORMAL) | (np.abs(gw) < F32_MIN_NORMAL)
                 | (np.abs(out) < F32_MIN_NORMAL)) & (dy != 0) & (w != 0)
    where = finite & (small_s | small)
    return where, np.broadcast_to(out.astype(np.float64), np.shape(where))


@defect
def _pos_weight_ignored(t):
    """Defect: posWeightOptional not applied (the DAG without it taken with one given): s - y."""
    return _kernel(t, pos=False)


@defect
def _weight_ignored(t):
    """Defect: weightOptional not applied."""
    return _kernel(t, weighted=False)


@defect
def _sigmoid_of_minus_x(t):
    """Defect: sigmoid(-x) for sigmoid(x) (Exp(x) for Exp(-x)): the gradient at the mirrored logit."""
    return _kernel(t, exp_sign=1.0)


@defect
def _pos_weight_on_both_terms(t):
    """Defect: - y for - pw y (the positive weight kept in the sigmoid's factor only): wrong wherever pw != 1."""
    return _kernel(t, minus_t=False)


@legitimate
def _aten_divide(t):
    """Legitimate: PyTorch's order, (((t + 1) - y) * sigmoid(x) - t) * grad * weight, then / N (a float32 division
    for mean), with sigmoid as 1 / (1 + exp(-x)): within an ulp of the kernel at each step."""
    x, y, dy = t["self"], t["target"], t["gradOutput"]
    ft = dy.dtype.type
    with np.errstate(all="ignore"):
        s = ft(1) / (ft(1) + exp(-x))
        p = t[PW] * y if PW in t else y * ft(1)
        g = (((p + ft(1)) - y) * s - p) * dy
        if W in t:
            g = g * t[W]
        return g / ft(int(t["numel"])) if _mean(t) else g


_mean_forgotten, _cof_in_half = mean_defects(_kernel, _cof)

VARIANTS = {
    "pos-weight-ignored": _pos_weight_ignored,
    "weight-ignored": _weight_ignored,
    "sigmoid-of-minus-x": _sigmoid_of_minus_x,
    "pos-weight-on-both-terms": _pos_weight_on_both_terms,
    "mean-forgotten": _mean_forgotten,
    "cof-in-half": _cof_in_half,
    "aten-divide": _aten_divide,
}


def _dtype_rule(descs) -> str | None:
    """161002: out's dtype not target's (OP_CHECK_DTYPE_NOT_MATCH(out, target))."""
    out, target = descs["out"], descs["target"]
    if out.null or target.null or out.dtype == target.dtype:
        return None
    return f"out dtype {out.dtype.name} is not target's {target.dtype.name}"


def _shape_rule(descs, attrs) -> str | None:
    """161002 unless self is empty: target's or out's shape not self's (OP_CHECK_SHAPE_NOT_EQUAL); gradOutput,
    weightOptional or posWeightOptional not broadcasting to self's shape."""
    s = descs["self"].shape
    if 0 in s:
        return None
    for name in ("target", "out"):
        if descs[name].shape != s:
            return f"{name} shape {list(descs[name].shape)} is not self's {list(s)}"
    for name in ("gradOutput", W, PW):
        d = descs[name]
        if d.null:
            continue
        if len(d.shape) > len(s) or any(a != b and a != 1 for a, b in zip(d.shape[::-1], s[::-1])):
            return f"{name} shape {list(d.shape)} does not broadcast to self's {list(s)}"
    return None


_ALL = ("950", "A3", "A2", "910", "310P")

SPEC = register(OpSpec(
    name="aclnnBinaryCrossEntropyWithLogitsBackward",
    key="binary_cross_entropy_with_logits_backward",
    header="aclnnop/aclnn_binary_cross_entropy_with_logits_backward.h",
    signature=("gradOutput", "self", "target", W, PW, "reduction", "out"),
    summary="Gradient of binary cross entropy with logits: w ((1 + (pw - 1) y) sigmoid(x) - pw y) dy, / numel(self) "
            "for mean.",
    formula="out = gradOutput * weightOptional * ((posWeightOptional * target + 1 - target) * sigmoid(self) - "
            "posWeightOptional * target) / numel(self) (mean), without / numel(self) (none, sum); null weights are ones",
    tensors=(
        TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
        TensorSpec("self", "input", {"uniform": [-6.0, 6.0]}),
        TensorSpec("target", "input", {"uniform": [0.0, 1.0]}),
        TensorSpec(W, "input", {"uniform": [0.25, 2.0]}, optional=True),
        TensorSpec(PW, "input", {"uniform": [0.5, 3.0]}, optional=True),
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
    contract=Contract(dtypes="promote", broadcast_on=_ALL, attribute_rule=reduction_rule, shape_rule=_shape_rule,
                      dtype_rule=_dtype_rule),
    special_values="NaN in any input gives NaN. self = -inf gives sigmoid 0: -posWeight * target * gradOutput * weight "
                   "(-0 * ... at target 0); self = +inf gives (1 - target) * gradOutput * weight. For finite inputs the "
                   "golden is the exact value; where the kernel's Exp overflows or sigmoid(self) leaves float32's "
                   "normal range (self < -87.3) and posWeight * target is 0, or a product is subnormal, verify also "
                   "accepts the float32 kernel's value.",
))

CONTRACT_NOTES = """\
aclnnBinaryCrossEntropyWithLogitsBackward phase one (loss/sigmoid_cross_entropy_with_logits_grad_v2/op_api/
aclnn_binary_cross_entropy_with_logits_backward.cpp), in order:
1. 161001: gradOutput, self, target or out null (weightOptional and posWeightOptional may be null: ones).
2. 161002: more than 8 dims (CheckInputDimension's aclTensor* test matches out only, a non-const pointer: the inputs'
   dims are held by the shape checks below).
3. 161002: gradOutput, self, target, a given weight or posWeight, or out not in {FLOAT16, FLOAT, BF16} (A2, A3,
   950: 910B, 910_93, regbase) or {FLOAT16, FLOAT} (910, 310P); out's dtype not target's.
4. 161002: self's storage format not target's or out's (ND here always).
5. 161002 unless self is empty: target's or out's shape not self's; gradOutput, weight or posWeight not
   broadcasting to self's shape.
6. 161002: reduction outside [0, 2].
- Then an empty self -> ACLNN_SUCCESS, workspace 0, nothing launched.
- 161002 (after the empty check): PromoteType(self, target, gradOutput, weight, posWeight) undefined or not castable
  to out's dtype (never for these float dtypes).
- The inputs (a null weight or posWeight: OnesLike(self)) are Cast to the promoted type;
  SigmoidCrossEntropyWithLogitsGradV2 (AI Core) runs in it with both weights, and its result is Cast to out's dtype.
"""
