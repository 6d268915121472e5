"""aclnnMishBackward: gradInput = gradOutput * mish'(x), mish(x) = x tanh(softplus(x)), x = self.

    mish'(x) = t + x (1 - t^2) sigmoid(x),  t = tanh(softplus(x)) = (e^2x + 2e^x) / (e^2x + 2e^x + 2)

(the doc, mish_grad/docs/aclnnMishBackward.md, gives no formula: this is PyTorch's mish_backward, which ops-nn's TTK
golden calls). With e = e^x, D = e^2 + 2e + 2 (x < 0) and n = e^-x, N = 1 + 2n + 2n^2 (x >= 0), every part is a ratio
of positive terms:

    x < 0:   f = e ((e + 2) / D + 4 x (1 + e) / D^2)         (t = e (e + 2) / D, 1 - t^2 = 4 (1 + e)^2 / D^2)
    x >= 0:  f = (1 + 2n) / N + 4 x n^2 (1 + n) / N^2        (t = (1 + 2n) / N, 1 - t^2 = 4 n^2 (1 + n)^2 / N^2)

so the float64 reference cancels only in the sum of the two terms for x < 0 (near f's zero at x = -1.1924), and
underflow leaves e (x < -745) as a zero of the right sign (f = e g, g ~ 1 + x).

On the 950 the op_api calls MishGradWithTanhX(gradOutput, self, nullptr) (op_api/aclnn_mish_backward.cpp): with no
tanhx the tiling picks MishGradDAG (mish_grad/op_kernel/arch35/mish_grad_dag.h), both inputs widened to float32:
    MishCustom (t):  x >= 0: a = 2 e^-x + 1 (Muls, Adds), b = 2 e^-2x + a, t = a / b;
                     x < 0:  m = e^2x + 2 e^x (Axpy: 2 e^x exact, one rounding), t = m / (m + 2);  Select on x < 0
    MishGradCustom:  s = (t * t - 1) * x; q = s / (e^-x + 1); g = t - q;  out = g * dy, cast RINT.
Past x = -87.34 e^x is subnormal in float32 and past -88.72 e^-x overflows (q = 0, g = t = e^x >= 0 while f < 0):
there verify also accepts the kernel's value (`edge`).
"""

from __future__ import annotations

import numpy as np

from .. import exact as X
from ..base import F64_UNIT as U, GRAD_RELATIVE_FLOOR, Contract, OpSpec, Reference, defect, grad_signature, legitimate
from ..base import products
from ..mathfns import exp
from ..registry import register

F32_LOG_TINY = float(np.log(np.float64(np.finfo(np.float32).tiny)))  # -87.336...: e^x below float32's normals
REL = 8 * X.F64_EXP_ULPS + 16  # float64 units of the terms: (7E + 14) derived below, rounded up


def _parts(x):
    """(f, terms, absolute error from a subnormal e) in float64. Error, in units U of the terms (positive parts,
    relative errors add), with exp within E = F64_EXP_ULPS: x < 0: (e + 2)/D 3E + 5, 4x(1 + e)/D^2 5E + 10, their
    sum + 1, f = e g E + 1 more: 6E + 13. x >= 0: t 3E + 5, 4 x n^2 (1 + n)/N^2 7E + 12, sum 7E + 13. The product
    by dy adds 1: REL covers both."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        neg = x < 0
        e = np.exp(np.where(neg, x, 0.0))
        d = e * e + 2 * e + 2
        a, b = (e + 2) / d, 4 * x * (1 + e) / (d * d)
        g = a + b
        n = np.exp(np.where(neg, 0.0, -x))
        nn = 1 + 2 * n + 2 * (n * n)
        t, w = (1 + 2 * n) / nn, 4 * x * (n * n) * (1 + n) / (nn * nn)
        f = np.where(neg, e * g, t + w)
        terms = np.where(neg, e * (a + np.abs(b)), t + w)
        sub = np.where(neg, np.abs(g) * 2.0**-1074, 0.0)  # (e's absolute error once it is a float64 subnormal)
    return f, terms, sub


def _reference(t):
    x, dy = t["self"], t["gradOutput"]
    f, terms, sub = _parts(x)
    abs_dy = np.abs(dy)
    bound = abs_dy * (REL * U * terms + sub) + 2.0**-1074 * (f != 0)  # (+ dy * f's underflow)
    return Reference(dy * f, bound, abs_dy * np.maximum(terms, GRAD_RELATIVE_FLOOR))


def _exact_factor(xq):
    """(f, terms) at the context's precision, x a Fraction, by the same ratios (the decimals are exact there)."""
    x = X.dec(xq)
    if x < 0:
        e = x.exp()
        d = e * e + 2 * e + 2
        a, b = (e + 2) / d, 4 * x * (1 + e) / (d * d)
        return e * (a + b), e * (a + abs(b))
    n = (-x).exp()
    nn = 1 + 2 * n + 2 * n * n
    f = (1 + 2 * n) / nn + 4 * x * n * n * (1 + n) / (nn * nn)
    return f, f


def exact_product(factor, x, dy, *args):
    """dy f to >= 48 significant digits, (f, terms) = factor(x, *args) at the context's precision (x a Fraction):
    60 digits plus those e^x scales x's rounding by, doubled while the terms cancel to fewer (near f's zero).
    Shared with aclnnMishGrad, whose factor with a given tanhx is another ratio of the same kind."""
    digits = X.PRECISION_DIGITS + 2 * len(str(abs(x.numerator) // x.denominator))
    while True:
        f, terms = X.evaluate_at(digits, factor, x, *args)
        if terms == 0 or (f != 0 and terms.adjusted() - f.adjusted() <= digits - 49) or digits > 4000:
            return X.evaluate_at(digits, lambda: X.dec(dy) * f)
        digits *= 2


def _exact(t):
    return exact_product(_exact_factor, t["self"], t["gradOutput"])


def _ieee(t):
    """Finite x: dy f(x) (an infinite dy gives the exact limit); x = +-inf or NaN: NaN, as the kernel (+inf: 0 * inf
    in (t^2 - 1) x; -inf: inf / inf in q) and PyTorch."""
    x, dy = t["self"], t["gradOutput"]
    finite = np.isfinite(x)
    f = _parts(np.where(finite, x, 0.0))[0]
    with np.errstate(invalid="ignore"):
        return dy * np.where(finite, f, np.nan)


def _tanh_softplus(x):
    """MishCustom in the inputs' float type: both branches, selected on x < 0."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        a = exp(x * -1.0) * 2.0 + 1.0
        b = exp(x * -2.0) * 2.0 + a
        pos = a / b
        m = exp(x) * 2.0 + exp(x * 2.0)
        neg = m / (m + 2.0)
        return np.where(x < 0, neg, pos)


def _grad(x, t, sigmoid_plus=False):
    """MishGradCustom: g = t - ((t*t - 1) * x) / (e^-x + 1)."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        s = (t * t - 1.0) * x
        q = s / (exp(x * -1.0) + 1.0)
        return t + q if sigmoid_plus else t - q


def _kernel(t, tanh_of=None, **grad_kw):
    """The 950 kernel in the inputs' float type (float32 for emulate): g(x, t(x)) * dy. The keywords make defects."""
    x, dy = t["self"], t["gradOutput"]
    tx = (tanh_of or _tanh_softplus)(x)
    with np.errstate(over="ignore", invalid="ignore"):
        return _grad(x, tx, **grad_kw) * dy


def _edge(t):
    """Where a correct float32 kernel stands off the exact result: e^x below float32's normals (x < -87.34; past
    -88.72 e^-x overflows and the kernel's g is e^x >= 0 where f ~ (1 + x) e^x < 0). The device value there is the
    kernel's."""
    x = np.asarray(t["self"])
    dy = np.asarray(t["gradOutput"])
    x32, dy32 = x.astype(np.float32), dy.astype(np.float32)
    where = (x32 < F32_LOG_TINY) & np.isfinite(x) & np.isfinite(dy)
    return where, _kernel({**t, "self": x32, "gradOutput": dy32}).astype(np.float64)


@defect
def _sign_slip(t):
    """Defect: t + q instead of t - q (the sech^2 term's sign)."""
    return _kernel(t, sigmoid_plus=True)


@defect
def _tanh_of_x(t):
    """Defect: tanh(x) for tanh(softplus(x)) (the softplus left out)."""
    return _kernel(t, tanh_of=np.tanh)


def _pos_branch(x):
    with np.errstate(over="ignore", invalid="ignore"):
        a = exp(x * -1.0) * 2.0 + 1.0
        return a / (exp(x * -2.0) * 2.0 + a)


@defect
def _one_branch(t):
    """Defect: the x >= 0 branch of MishCustom everywhere: e^-2x overflows below x = -44.36 (inf / inf = NaN)."""
    return _kernel(t, tanh_of=_pos_branch)


@defect
def _no_sigmoid(t):
    """Defect: x (1 - t^2) without the sigmoid (q = s, not s / (e^-x + 1))."""
    x, dy = t["self"], t["gradOutput"]
    tx = _tanh_softplus(x)
    with np.errstate(over="ignore", invalid="ignore"):
        return (tx - (tx * tx - 1.0) * x) * dy


@legitimate
def _sech_form(t):
    """Legitimate: PyTorch's CPU order, t = tanh(log1p(e^x)) and sigmoid(x) by the library, g = t + x s (1 - t^2)
    (with float32 tanh and log1p: the same values to a few ulps of the terms; NaN where the kernel has them)."""
    x, dy = t["self"], t["gradOutput"]
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        tx = np.tanh(np.log1p(exp(x)))
        s = 1.0 / (1.0 + exp(-x))
        return (tx + x * s * (1.0 - tx * tx)) * dy


VARIANTS = {"sign-slip": _sign_slip, "mish-tanh-of-x": _tanh_of_x, "mish-one-branch": _one_branch,
            "mish-no-sigmoid": _no_sigmoid, "mish-sech-form": _sech_form}


def _textbook(x, attrs, mp):
    """d/dx of x tanh(softplus(x)) for the tests' mpmath oracle: t + x sech^2(sp) sigmoid(x), sp = log(1 + e^x),
    sigmoid(x) = e^x / (1 + e^x)."""
    e = mp.exp(x)
    sp = mp.log1p(e)
    return mp.tanh(sp) + x * mp.sech(sp) ** 2 * e / (1 + e)


_ALL = ("950", "A3", "A2", "310P", "910")

SPEC = register(OpSpec(
    name="aclnnMishBackward",
    key="mish_backward",
    header="aclnnop/aclnn_mish_backward.h",
    summary="Gradient of Mish, x tanh(softplus(x)).",
    formula="gradInput = gradOutput * (t + x (1 - t^2) sigmoid(x)), t = tanh(log(1 + e^x)), x = self",
    tensors=grad_signature("gradInput"),
    products=products(*_ALL, overrides={"310P": ("float32", "float16"), "910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_ieee,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", broadcast_on=_ALL),
    special_values="self = +-inf or NaN gives NaN (the kernel's 0 * inf and inf / inf; PyTorch the same); NaN "
                   "gradOutput gives NaN; an infinite gradOutput gives +-inf (NaN where f underflows to 0). Where "
                   "e^self is below float32's normals (self < -87.34) verify also accepts the kernel's value.",
    textbook=_textbook,
))

CONTRACT_NOTES = """\
Phase-one rules of aclnnMishBackward (mish_grad/op_api/aclnn_mish_backward.cpp), in the source's order:
1. 161001: workspaceSize or executor null (OP_CHECK_COMM_INPUT); gradOutput, self or gradInput null.
2. 161002: self's dtype not castable to gradInput's (OP_CHECK_RESULT_DTYPE_CAST_FAILED: every float to every float
   passes); gradOutput's, self's, gradInput's dtype not in {FLOAT, FLOAT16} + BF16 on DAV_2201 (A2, A3) and DAV_3510
   (950). No dtype is compared with another: mixed inputs are cast to PromoteType(self, gradOutput).
3. 161002: gradOutput, self or gradInput of more than 8 dims; self and gradOutput do not broadcast; gradInput's
   shape is not the broadcast shape.
- Empty: self, gradOutput or gradInput empty -> SUCCESS, workspace 0 (the doc says empty tensors are not supported).
- Compute: the kernel runs in the promoted dtype (widened to float32 inside), its output l0op::Cast to gradInput's
  dtype: two float16 inputs into a float32 gradInput keep float16 precision.
"""
