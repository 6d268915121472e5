"""aclnnMishGrad: the graph op MishGrad (hicann/ops-nn activation/mish_grad) through its generated API, whose optional
tanhx stands in for tanh(softplus(x)).

ops-nn has no op_api for it: CANN generates aclnnMishGrad(grad, x, tanhxOptional, xGrad, workspaceSize, executor)
from the OpDef (op_host/mish_grad_def.cpp: inputs grad, x, tanhx OPTIONAL, output x_grad, each BF16, FLOAT16 or
FLOAT, ascend950 only), header aclnnop/aclnn_mish_grad.h (the generated one: no public header to compare).

    tanhx given (t, an input: any value, not tanh(softplus(x))):  xGrad = grad * (t - (t^2 - 1) x sigmoid(x))
    tanhx null:  xGrad = grad * mish'(x), aclnnMishBackward's function (its module's reference, exact path, kernel,
                 edge and special values, called with grad and x as gradOutput and self)

(ops-nn's golden, tests/assets/golden.py, writes the given-tanhx form grad * (t + x / (1 + e^-x) * (1 - t^2)), the
same function.) The tiling (op_host/arch35/mish_grad_tiling_arch35.cpp) picks MishGradFullDAG when tanhx is given,
MishGradDAG when not (op_kernel/mish_grad_apt.cpp, TPL_*_FULL). MishGradFullDAG (op_kernel/arch35/mish_grad_dag.h,
lines 145-164) widens the three inputs to float32 (CAST_MODE_NONE, exact) and runs MishGradCustom (lines 63-72) on
x and t, in float32 one rounding a step:
    w = t * t; w = w + -1; w = w * x;  e = x * -1; e = Exp(e); e = e + 1;  q = w / e;  g = t - q
then Mul(g, grad) and the output cast CAST_MODE_RINT: mish_backward._grad with the given t, the very code the no-tanhx
kernel runs on MishCustom's t.

Allowance (the Elementwise family's: verify judges an element whose relative error reaches T against max(|golden|,
scale), `scale` the magnitude of the terms the kernel computes): scale = |grad| (|t| + |x| s (t^2 + 1)), s =
sigmoid(x). A float32 kernel in the order above, Exp within E ulps: fl(t t) - 1 is off by u (2 t^2 + 1), times x one
u |w x|, 1 + e^-x relatively (E + 1) u, the quotient u: |q| off by (E + 5) u |x| s (t^2 + 1) at most; g and the
product by grad one u each of |grad| (|t| + |q|): (E + 7) u scale in all, 7.5 u for a correctly rounded Exp, far
inside every dtype's T (2^-13 for float32); then the output rounding, which the standard judges. The test measures
it (tests/test_op_mish_grad.py).
"""

from __future__ import annotations

import numpy as np

from .. import exact as X
from ..base import F64_UNIT as U, GRAD_RELATIVE_FLOOR, Contract, OpSpec, Reference, TensorSpec, defect, legitimate
from ..base import products
from ..mathfns import exp
from ..registry import register
from . import mish_backward as B

DY, X_, T, OUT = "grad", "x", "tanhxOptional", "xGrad"
# float64 units of |grad| (|t| + |q|), E = F64_EXP_ULPS: s = sigmoid(x) from e^-|x| within (2E + 2) u, q = (t t - 1)
# x s (t t exact: t has at most 24 significant bits) (2E + 5) u, g = t - q one u, the product by grad one: 2E + 7.
REL = 2 * X.F64_EXP_ULPS + 8


def _backward(t):
    """The case without tanhx in aclnnMishBackward's names: its functions compute it."""
    return {**t, "gradOutput": t[DY], "self": t[X_]}


def _sigmoid64(x):
    """sigmoid(x) in float64 from e^-|x| (never overflows)."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _reference(t):
    if T not in t:
        return B._reference(_backward(t))
    x, dy, th = t[X_], t[DY], t[T]
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        s = _sigmoid64(x)
        w = th * th - 1.0
        q = w * x * s
        value = dy * (th - q)
        abs_dy = np.abs(dy)
        # (e^-|x| a float64 subnormal past |x| = 708: absolute 2^-1074 in s, so |x w| 2^-1074 in q; a few more
        # underflowing products)
        sub = (np.abs(x * w) + 4.0) * 2.0**-1074
        bound = abs_dy * (REL * U * (np.abs(th) + np.abs(q)) + sub) + 2.0**-1074 * (value != 0)
        scale = abs_dy * np.maximum(np.abs(th) + np.abs(x) * s * (th * th + 1.0), GRAD_RELATIVE_FLOOR)
    return Reference(value, bound, scale)


def _given_factor(xq, tq):
    """(t - (t^2 - 1) x s, |t| + |x| s (t^2 + 1)) at the context's precision; s from e^-|x|, as the reference."""
    x, th = X.dec(xq), X.dec(tq)
    e = (-abs(x)).exp()
    s = 1 / (1 + e) if x >= 0 else e / (1 + e)
    f = th - (th * th - 1) * x * s
    return f, abs(th) + abs(x) * s * (th * th + 1)


def _exact(t):
    if T not in t:
        return B._exact(_backward(t))
    return B.exact_product(_given_factor, t[X_], t[DY], t[T])


def _kernel(t, tanh_of=None, **grad_kw):
    """MishGradFullDAG with tanhx, MishGradDAG without (B._kernel); `tanh_of` and the keywords make defects."""
    if T not in t or tanh_of is not None:
        return B._kernel(_backward(t), tanh_of=tanh_of, **grad_kw)
    with np.errstate(over="ignore", invalid="ignore"):
        return B._grad(t[X_], t[T], **grad_kw) * t[DY]


def _ieee(t):
    """Without tanhx, aclnnMishBackward's (NaN at x = +-inf); with it, the kernel's order in float64, what the
    DAG's IEEE arithmetic gives: x = -inf inf / inf = NaN, x = +inf -(t^2 - 1) inf, t infinite inf - inf = NaN."""
    if T not in t:
        return B._ieee(_backward(t))
    return _kernel(t)


def _edge(t):
    """Without tanhx, aclnnMishBackward's. With it, where a float32 intermediate overflows and the exact result does
    not: e^-x past x = -88.72 (q = 0 where the exact q ~ (1 - t^2) x e^x still is a float32, which shows when t is 0
    or tiny), t t, (t t - 1) x or g (16-bit inputs past 2^64 in bfloat16, float32 ones past 1.8e19). The device
    value there is the kernel's."""
    if T not in t:
        return B._edge(_backward(t))
    x, dy, th = (np.asarray(t[n]) for n in (X_, DY, T))
    x32, dy32, t32 = (a.astype(np.float32) for a in (x, dy, th))
    with np.errstate(over="ignore", invalid="ignore"):
        w = t32 * t32
        g = B._grad(x32, t32)
    finite = np.isfinite(x) & np.isfinite(dy) & np.isfinite(th)
    where = finite & (~np.isfinite(exp(x32 * -1.0)) | ~np.isfinite(w) | ~np.isfinite((w - 1.0) * x32) | ~np.isfinite(g))
    return where, _kernel({**t, X_: x32, DY: dy32, T: t32}).astype(np.float64)


@defect
def _tanhx_ignored(t):
    """Defect: the given tanhx ignored and tanh(softplus(x)) computed (MishGradDAG taken whatever the inputs)."""
    return _kernel({k: v for k, v in t.items() if k != T})


@defect
def _sign_slip(t):
    """Defect: t + q instead of t - q (the x (1 - t^2) sigmoid(x) term's sign)."""
    return _kernel(t, sigmoid_plus=True)


@defect
def _exp_of_x(t):
    """Defect: e^x for e^-x in the quotient (sigmoid(-x) for sigmoid(x))."""
    x = t[X_]
    th = t[T] if T in t else B._tanh_softplus(x)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return (th - ((th * th - 1.0) * x) / (exp(x) + 1.0)) * t[DY]


@legitimate
def _sigmoid_form(t):
    """Legitimate: ops-nn's golden order in float32, g = t + x / (1 + e^-x) * (1 - t^2) (x's quotient first, 1 - t^2
    added, not t^2 - 1 subtracted): within a few u of the terms."""
    x = t[X_]
    th = t[T] if T in t else B._tanh_softplus(x)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return (th + x / (exp(x * -1.0) + 1.0) * (1.0 - th * th)) * t[DY]


VARIANTS = {"mishgrad-tanhx-ignored": _tanhx_ignored, "mishgrad-sign-slip": _sign_slip,
            "mishgrad-exp-of-x": _exp_of_x, "mishgrad-sigmoid-form": _sigmoid_form}

SPEC = register(OpSpec(
    name="aclnnMishGrad",
    key="mish_grad",
    header="aclnnop/aclnn_mish_grad.h",
    summary="The graph op MishGrad through its generated aclnn API: Mish's gradient, from a given tanhx in place of "
            "tanh(softplus(x)) when one is passed.",
    formula="xGrad = grad * (t - (t^2 - 1) * x * sigmoid(x)), t = tanhxOptional if given, else tanh(log(1 + e^x))",
    tensors=(
        TensorSpec(DY, "input", {"normal": [0, 1]}),
        TensorSpec(X_, "input", {"uniform": [-8.0, 8.0]}),
        TensorSpec(T, "input", {"uniform": [-1.0, 1.0]}, optional=True),
        TensorSpec(OUT, "output", {"constant": 0}),
    ),
    products=products("950"),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_ieee,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="same"),
    special_values="Without tanhxOptional, aclnnMishBackward's: x = +-inf or NaN gives NaN; below x = -87.34 verify "
                   "also accepts the kernel's value. With it, the kernel's order in IEEE arithmetic: x = -inf gives "
                   "NaN (inf / inf), x = +inf -(t^2 - 1) inf * grad (NaN at |t| = 1), an infinite tanhx NaN "
                   "(inf - inf); NaN in gives NaN. Where a float32 intermediate overflows and the exact result does "
                   "not (e^-x below x = -88.72, t * t, (t * t - 1) * x) verify also accepts the kernel's value.",
))

CONTRACT_NOTES = """\
aclnnMishGrad phase one: no op_api; the aclnn is generated from the OpDef (op_host/mish_grad_def.cpp), the checks are
the OpDef's and the tiling's (op_host/arch35/mish_grad_tiling_arch35.cpp; 561002 on the device, 161002 here, as for
the other generated APIs).
- Nulls -> 161001 (grad, x, xGrad; tanhxOptional may be null: tanh(softplus(x)) is computed).
- grad, x, tanhxOptional (given) and xGrad one dtype, BF16, FLOAT16 or FLOAT (the OpDef's three rows; the tiling's
  CalcInputDtype, CalcOutputDtype) -> else 161002. ascend950 only (the OpDef's one AddConfig).
- Shapes: the proto's elementwise op, every tensor one shape (the tiling checks xGrad against grad; x and tanhx are
  read as grad's length) -> else 161002; 0 to 8 dims. Empty tensors: an empty output, SUCCESS.
"""
