"""aclnnEluBackward: gradInput = gradOutput * f(x), x = selfOrResult.

    f(x) = scale                                  x > 0 (and x NaN: the kernel's x <= 0 is false)
         = inputScale * (x + alpha * scale)       x <= 0, isResult (x is the forward's output)
         = inputScale * alpha * scale * exp(x * inputScale)   x <= 0, not isResult (x the forward's input)

alpha, scale and inputScale reach the kernel as float32 (`aclScalar::ToFloat`, op_api/aclnn_elu_backward.cpp);
every function here takes them as the float32 the case rounds them to. The 950 kernel
(elu_grad_v2/op_kernel/arch35/elu_grad_v2_dag.h; its tiling makes negcoef = alpha * scale in float32), all in
float32 after widening the inputs:

    isResult:      neg = (dy * inputScale) * (x + negcoef)
    not isResult:  neg = ((dy * inputScale) * negcoef) * exp(x * inputScale)
    out = (x <= 0) ? neg : dy * scale, cast to the inputs' dtype (RINT), then l0op::Cast to gradInput's dtype.

The graph op EluGrad (activation/elu_grad, arch35/elu_grad_dag.h: (activation < 0) ? grads * (activation + 1) :
grads) is this op at alpha = scale = inputScale = 1 with isResult: x = 0 gives dy either way (graphops.py).
"""

from __future__ import annotations

import numpy as np

from .. import exact as X
from ..base import (F64_UNIT, AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, legitimate, products)
from ..mathfns import exp
from ..registry import register

SIGNATURE = ("gradOutput", "alpha", "scale", "inputScale", "isResult", "selfOrResult", "gradInput")
F32_TINY = float(np.finfo(np.float32).tiny)


def _attrs(t, ft=np.float64):
    return ft(t["alpha"]), ft(t["scale"]), ft(t["inputScale"])


def _reference(t):
    """float64, with a bound in units of F64_UNIT times the terms:
    x > 0: dy * scale is exact (two 24-bit significands).
    isResult: alpha * scale is exact (48 bits); x + alpha*scale rounds once (1 unit of |x| + |alpha*scale|), the
      products by inputScale and dy once each: 3 units of |dy inputScale| (|x| + |alpha scale|); 4 taken.
    not isResult: p = dy * inputScale * (alpha * scale) rounds once (dy * inputScale and alpha * scale are exact);
      z = x * inputScale is exact (48 bits), exp(z / 2) is within 1 ulp and is taken twice so that no finite
      result overflows early; two more products: 1 + 2 * 2 + 2 = 7 units of |result|; 8 taken, and 2^-1070
      absolute for an underflow into float64 subnormals (|exp(z/2)| <= 1 there, so it is not amplified).
      z / 2 > 709 makes exp(z/2) inf: then |p e^z| > 2^-600 e^1418 > float64's max, the exact value is an
      infinity of the output dtype (p != 0) or 0 (p = 0: kept as p's signed zero).
    The scale (what verify forgives rounding in proportion to) adds the device's float32 z: its relative error
    2^-24 becomes |z| 2^-24 in exp(z), so the exp branch's terms are |result| (1 + |z|)."""
    x, dy = t["selfOrResult"], t["gradOutput"]
    a, s, i = _attrs(t)
    neg = x <= 0
    if t["isResult"]:
        factor = np.where(neg, i * (x + a * s), s)
        terms = np.where(neg, abs(i) * (np.abs(x) + abs(a * s)), abs(s))
        value = dy * factor
        bound = F64_UNIT * 4.0 * np.abs(dy) * terms
        return Reference(value, bound, np.abs(dy) * terms)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        z = np.where(neg, x * i, 0.0)
        h = np.exp(z / 2)
        p = dy * i * (a * s)
        tail = np.where(p == 0, p, (p * h) * h)
    value = np.where(neg, tail, dy * s)
    magnitude = np.abs(value)
    bound = np.where(neg, F64_UNIT * 8.0 * magnitude + 2.0**-1070, 0.0)
    return Reference(value, bound, magnitude * (1.0 + np.abs(z)))


def _exact(t):
    """One element (Fractions in): rational where no exp enters, exp in Decimal (60 digits) elsewhere."""
    x, dy, a, s, i = t["selfOrResult"], t["gradOutput"], t["alpha"], t["scale"], t["inputScale"]
    if x > 0:
        return dy * s
    if t["isResult"]:
        return dy * i * (x + a * s)
    return X.evaluate(lambda: X.dec(dy * i * a * s) * X.dec(x * i).exp())


def _kernel(t, alpha_only=False, exp_input_scale=True, positive_scale=True, strict=False, result_formula=True):
    """The 950 kernel in the inputs' float type (float32 for emulate): negcoef = alpha * scale once, Muls, Mul,
    Exp, Compare(x <= 0), Select. The keywords make the defects."""
    x, dy = t["selfOrResult"], t["gradOutput"]
    ft = x.dtype.type
    a, s, i = _attrs(t, ft)
    negcoef = a if alpha_only else a * s
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        if t["isResult"] and result_formula:
            neg = (dy * i) * (x + negcoef)
        else:
            neg = ((dy * i) * negcoef) * exp(x * i if exp_input_scale else x)
        pos = dy * s if positive_scale else dy
        take = (x < 0) if strict else (x <= 0)
        return np.where(take, neg, pos)


def _edge(t):
    """Where a correct float32 kernel stands off the exact result: on the x <= 0 branch an intermediate overflows
    (dy * inputScale, its product by negcoef, x + negcoef, exp(x * inputScale) beyond float32's max) or
    exp(x * inputScale) falls below float32's smallest normal (subnormal or 0: its significand is gone). The
    device value there is the kernel's."""
    x = np.asarray(t["selfOrResult"])
    dy = np.asarray(t["gradOutput"])
    x32, dy32 = x.astype(np.float32), dy.astype(np.float32)
    a, s, i = _attrs(t, np.float32)
    with np.errstate(all="ignore"):
        negcoef = a * s
        parts = [dy32 * i]
        if t["isResult"]:
            parts += [x32 + negcoef, parts[0] * (x32 + negcoef)]
        else:
            e = exp(x32 * i)
            parts += [parts[0] * negcoef, e, parts[0] * negcoef * e]
            small = (e < F32_TINY) & (dy32 != 0) & (negcoef != 0) & (i != 0)
        bad = np.zeros(x.shape, dtype=bool)
        for p in parts:
            bad |= ~np.isfinite(p)
        if not t["isResult"]:
            bad |= small
        where = bad & (x32 <= 0) & np.isfinite(x) & np.isfinite(dy)
        return where, _kernel({**t, "selfOrResult": x32, "gradOutput": dy32}).astype(np.float64)


@defect
def _scale_dropped(t):
    """Defect: x > 0 passes gradOutput through (scale left out of the positive branch)."""
    return _kernel(t, positive_scale=False)


@defect
def _exp_without_input_scale(t):
    """Defect: exp(x) instead of exp(x * inputScale) (inputScale kept only as the outer factor)."""
    return _kernel(t, exp_input_scale=False)


@defect
def _negcoef_alpha(t):
    """Defect: negcoef = alpha (the tiling forgets the scale: PyTorch's elu_backward without scale)."""
    return _kernel(t, alpha_only=True)


@defect
def _result_ignored(t):
    """Defect: isResult ignored: the exp formula on the forward's output too."""
    return _kernel(t, result_formula=False)


@defect
def _strict_zero(t):
    """Defect: the negative branch for x < 0 only (x = +-0 gives dy * scale instead of dy * inputScale * ...)."""
    return _kernel(t, strict=True)


@legitimate
def _factor_first(t):
    """Legitimate: the factor first, then one product by dy: dy * (inputScale * negcoef * exp(x inputScale)), dy *
    (inputScale * (x + negcoef)): the same roundings in another order (within the scale)."""
    x, dy = t["selfOrResult"], t["gradOutput"]
    ft = x.dtype.type
    a, s, i = _attrs(t, ft)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        factor = i * (x + a * s) if t["isResult"] else (i * (a * s)) * exp(x * i)
        return dy * np.where(x <= 0, factor, s)


VARIANTS = {"elu-scale-dropped": _scale_dropped, "elu-exp-without-input-scale": _exp_without_input_scale,
            "elu-negcoef-alpha-only": _negcoef_alpha, "elu-result-ignored": _result_ignored,
            "elu-strict-zero": _strict_zero, "elu-factor-first": _factor_first}


def _alpha_rule(attrs):
    """161002: isResult with alpha->ToFloat() < 0 (-0.0 passes)."""
    return "alpha < 0 with isResult" if attrs["isResult"] and attrs["alpha"] < 0 else None


def _same_dtype(descs, attrs):
    """161002: selfOrResult of another dtype than gradOutput (OP_CHECK_DTYPE_NOT_SAME, before the dtype list)."""
    a, b = descs["gradOutput"], descs["selfOrResult"]
    if a.null or b.null or a.dtype == b.dtype:
        return None
    return f"selfOrResult dtype {b.dtype.name} is not gradOutput's {a.dtype.name}"


def _textbook(x, attrs, mp):
    """The doc's factor (both isResult forms), for the tests' mpmath oracle."""
    a, s, i = mp.mpf(attrs["alpha"]), mp.mpf(attrs["scale"]), mp.mpf(attrs["inputScale"])
    if x > 0:
        return s
    return i * (x + a * s) if attrs["isResult"] else i * a * s * mp.exp(x * i)


_ALL = ("950", "A3", "A2", "310P", "910")
_SELU = {"alpha": float(np.float32(1.6732632)), "scale": float(np.float32(1.050701)),
         "inputScale": float(np.float32(0.75))}

SPEC = register(OpSpec(
    name="aclnnEluBackward",
    key="elu_backward",
    header="aclnnop/aclnn_elu_backward.h",
    summary="Gradient of ELU with scale and inputScale, from its input or (isResult) its output.",
    formula="x > 0: gradOutput * scale; x <= 0: gradOutput * inputScale * (x + alpha * scale) (isResult), "
            "gradOutput * inputScale * alpha * scale * exp(x * inputScale) (else); x = selfOrResult",
    tensors=(TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
             TensorSpec("selfOrResult", "input", {"uniform": [-6, 3]}),
             TensorSpec("gradInput", "output", {"constant": 0})),
    attributes=(AttrSpec("alpha", "scalar", default=1.0), AttrSpec("scale", "scalar", default=1.0),
                AttrSpec("inputScale", "scalar", default=1.0), AttrSpec("isResult", "bool", default=False)),
    signature=SIGNATURE,
    products=products(*_ALL, overrides={"310P": ("float32", "float16"), "910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", attribute_rule=_alpha_rule, shape_rule=_same_dtype),
    special_values="selfOrResult NaN gives gradOutput * scale (the kernel's x <= 0 is false, the positive branch); "
                   "+inf gives gradOutput * scale; -inf gives +-0 (inputScale > 0), +-inf (inputScale < 0) or NaN "
                   "(inputScale = 0: -inf * 0) without isResult, gradOutput * inputScale * -inf with it; NaN "
                   "gradOutput gives NaN; +-inf gradOutput times a zero factor gives NaN. alpha, scale and "
                   "inputScale are used as float32. Where the kernel's float32 exp(x * inputScale) overflows or "
                   "leaves the normal range, or an intermediate overflows, verify also accepts the kernel's value.",
    textbook=_textbook,
    oracle_attributes=({"alpha": 1.0, "scale": 1.0, "inputScale": 1.0, "isResult": False},
                       {**_SELU, "isResult": False},
                       {**_SELU, "isResult": True}),
))

CONTRACT_NOTES = """\
Phase-one rules of aclnnEluBackward (elu_grad_v2/op_api/aclnn_elu_backward.cpp), in the source's order:
1. 161001: workspaceSize or executor null (OP_CHECK_COMM_INPUT); gradOutput, alpha, scale, inputScale,
   selfOrResult or gradInput null.
2. 161002: selfOrResult's dtype differs from gradOutput's (checked first); gradOutput's dtype not in
   {FLOAT, FLOAT16, BF16} (BF16 only on DAV_2201 = A2/A3 and regbase = 950: 910 and 310P have FLOAT, FLOAT16);
   alpha, scale or inputScale of a dtype not CanCast to FLOAT (a complex scalar); gradOutput's dtype not
   castable to gradInput's (an integer or bool gradInput; any float gradInput passes, FLOAT64 included).
3. 161002: selfOrResult's or gradInput's shape differs from gradOutput's (no broadcasting); gradOutput has
   more than 8 dims (the others equal its shape).
4. 161002: isResult and alpha->ToFloat() < 0 (-0.0 passes; a negative double too small for float32 passes).
- Empty: gradOutput empty -> SUCCESS, workspace 0, after all checks.
- Compute: the kernel runs in gradOutput's dtype (widened to float32 inside), its output l0op::Cast to gradInput's
  dtype: a float16 input into a float32 gradInput keeps float16 precision (double rounding the other way).
"""
