"""aclnnGeluBackwardV2: gradInput = dy * GELU'(x); approximate "none" (erf) or "tanh".

"none": f = Phi(x) + x phi(x) = 1/2 + 1/2 erf(x/sqrt2) + x e^(-x^2/2)/sqrt(2 pi).
"tanh": the derivative of 0.5 x (1 + tanh(u)), u = sqrt(2/pi)(x + 0.044715 x^3), with exact constants:
f = s (1 + w c), s = sigmoid(2u), c = sigmoid(-2u), w = x 2 sqrt(2/pi)(1 + 0.134145 x^2).

float64 reference with a derived error bound (exact.py's f64_* functions): "none" as 1/2 + x phi (S(x^2) + 1)
for |x| < 3 (S the positive series of Phi), else -phi (|x| - R) (x < 0) or 1 + phi (|x| - R) (x > 0), R the
Mills ratio by its continued fraction; "tanh" through sigmoid_pair. The exact path: exact.py's decimal
normal_cdf / sigmoid at 60 digits, doubled while the terms cancel to fewer than 48 significant digits.
`scale` for "none" is the doc formula's terms 1/2 + 1/2 |erf(x/sqrt2)| + |x| phi: the kernel's
cdf = 0.5 erf + 0.5 cancels for x < 0 (erf is -1.0f below x = -5.54, leaving x phi: 1/x^2 relative).
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np

from .. import exact as X
from ..base import (F64_UNIT as U, GRAD_RELATIVE_FLOOR, AttrSpec, Contract, OpSpec, Reference, defect,
                    grad_signature, legitimate, products, sigmoid_pair)
from ..mathfns import exp
from ..registry import register

TANH_BETA, TANH_A = 1.5957691216057308, 0.044715  # fl64(2 sqrt(2/pi)); the doc's cubic coefficient
# The 950 kernel's float32 constants (gelu_grad_v2_dag.h), as the literals it writes.
K_SQRT_HALF, K_INV_SQRT_2PI = 0.707106781, 0.3989422804
K_BETA, K_AN, K_A3 = 1.595769121605730711759, -0.0713548162726002527220, 0.2140644488178007


def _none(x):
    """(f, absolute error bound, magnitude of the terms the float64 sum cancels, scale of the doc formula)."""
    y = np.abs(x)
    phi, e_phi = X.f64_normal_pdf(x)
    f, err, terms, doc = (np.zeros_like(x) for _ in range(4))
    s = y < X.F64_SERIES_MAX
    if s.any():  # f = 1/2 + x phi (S + 1)
        xs, ps = x[s], phi[s]
        total, e_s, rem = X.f64_normal_series(xs * xs)
        p = ps * (total + 1)
        e_p = ps * (e_s * U * total + rem + U * (total + 1)) + p * (e_phi[s] + 1) * U
        f[s] = 0.5 + xs * p
        err[s] = np.abs(xs) * (e_p + U * p) + U * np.abs(f[s])
        terms[s] = doc[s] = 0.5 + np.abs(xs) * p
    c = ~s
    if c.any():  # g = phi (y - R) >= 0: f = 1 + g (x > 0), -g (x < 0)
        yc, pc = y[c], phi[c]
        r, e_r = X.f64_mills_ratio(yc)
        d = yc - r
        g = pc * d
        e_g = pc * (e_r + U * d) + g * (e_phi[c] + 1) * U
        pos = x[c] > 0
        f[c] = np.where(pos, 1 + g, -g)
        err[c] = e_g + U * np.abs(f[c])
        terms[c] = np.where(pos, 1 + g, g)
        doc[c] = 1 + g  # 1/2 + 1/2 |erf| + |x| phi: the kernel's cdf = 0.5 erf + 0.5 cancels for x < 0
    return f, err, terms, doc


def _tanh(x):
    """(f, absolute error bound, terms) of s (1 + w c); z = 2u carries <= 8 u, w <= 8 u."""
    with np.errstate(over="ignore", invalid="ignore"):
        x2 = x * x
        z = TANH_BETA * x * (1 + TANH_A * x2)
        w = TANH_BETA * x * (1 + 3 * TANH_A * x2)
        s, c = sigmoid_pair(z)
        big = X.F64_EXP_ULPS + 8 * np.abs(z)  # relative error of e^-|z|, in u
        e_s = 3 + big * np.where(z >= 0, c, 1 + s)
        e_c = 3 + big * np.where(z >= 0, 1 + c, s)
        f = s * (1 + w * c)
        err = 2 * U * (s * np.abs(w) * c * (8 + e_c + 1) + np.abs(f) * (e_s + 2))
    return f, err, s * (1 + np.abs(w) * c)


def _mode(t) -> str:
    return t.get("approximate", "none")


def _reference(t):
    x, dy = t["self"], t["gradOutput"]
    if _mode(t) == "tanh":
        f, err, terms = _tanh(x)
        doc = terms
    else:
        f, err, terms, doc = _none(x)
    abs_dy = np.abs(dy)  # bound: f's, the product with dy, and float64 underflow (as grad_linear_reference)
    bound = abs_dy * (err + 2 * U * np.abs(f)) + abs_dy * 2.0**-1060
    return Reference(dy * f, bound, abs_dy * np.maximum(doc, GRAD_RELATIVE_FLOOR))


def _factor(x, mode):
    return (_tanh(x) if mode == "tanh" else _none(x))[0]


def _ieee(t):
    """Finite x: dy f(x) (an infinite dy gives the exact limit, NaN where f underflows to 0). x = +-inf, NaN:
    the kernel's values: "none" NaN (0 * inf); "tanh" +inf -> 1, -inf -> 0 (its NaN -> 0 select)."""
    x, dy = t["self"], t["gradOutput"]
    finite = np.isfinite(x)
    f = _factor(np.where(finite, x, 0.0), _mode(t))
    special = np.where(x > 0, 1.0, 0.0) if _mode(t) == "tanh" else np.nan
    return dy * np.where(finite, f, np.where(np.isnan(x), np.nan, special))


def _exact_factor(xq, mode: str):
    """(f, terms) at the context's precision, x given as a Fraction."""
    x = X.dec(xq)
    if mode == "tanh":
        beta, a = 2 * (2 / X.pi()).sqrt(), Decimal("0.044715")
        z, w = beta * x * (1 + a * x * x), beta * x * (1 + 3 * a * x * x)
        s, c = X.sigmoid(z), X.sigmoid(-z)
        return s * (1 + w * c), s * (1 + abs(w) * c)
    cdf, pdf = X.normal_cdf(x), X.normal_pdf(x)
    return cdf + x * pdf, cdf + abs(x) * pdf


def _exact(t):
    """dy f(x) to >= 48 significant digits: 60-digit decimal plus the digits e^(x^2) or e^(x^3) scale the
    argument's rounding by, doubled while f's terms cancel to fewer (near its zero); 0 below decimal's range."""
    x = t["self"]
    digits = X.PRECISION_DIGITS + 3 * max(0, len(str(abs(x.numerator) // x.denominator)))
    while True:
        f, terms = X.evaluate_at(digits, _exact_factor, x, _mode(t))
        if terms == 0 or (f != 0 and terms.adjusted() - f.adjusted() <= digits - 49) or digits > 4000:
            return X.evaluate_at(digits, lambda: X.dec(t["gradOutput"]) * f)
        digits *= 2


def _none_parts(x, cdf_of=None, pdf_scale=-0.5, erf_scale=K_SQRT_HALF):
    """(cdf, pdf*x): e = Erf(x * 0.70710677f); cdf = e*0.5 + 0.5; pdf = exp((x*x)*-0.5) * 0.3989423f."""
    cdf = cdf_of(x) if cdf_of else X.f64_erf(x * erf_scale) * 0.5 + 0.5
    return cdf, exp((x * x) * pdf_scale) * K_INV_SQRT_2PI * x


def _tanh_parts(x, fused=False, a3=K_A3, nan_select=True):
    """(q, w): p = exp((x^2*AN + BETAN)*x) = e^-2u; r = (x^2*A3 + BETA)*x; q = 1/(p+1); w = ((p*q)*r)*q,
    NaN w -> 0. Axpy (x^2*AN + BETAN) as two float32 roundings; fused: one (an FMA)."""
    x2 = x * x
    if fused:
        def axpy(k, b):
            return (x2.astype(np.float64) * k + b).astype(x.dtype)
    else:
        def axpy(k, b):
            return x2 * k + b
    p = exp(axpy(K_AN, -K_BETA) * x)
    r = axpy(a3, K_BETA) * x
    q = 1.0 / (p + 1.0)
    w = ((p * q) * r) * q
    return q, np.where(np.isnan(w), x.dtype.type(0), w) if nan_select else w


def _run(t, combine=lambda a, b: a + b, none=None, tanh=None):
    """The kernel with its parts computed by the given (variant) functions, in the inputs' float type."""
    x, dy = t["self"], t["gradOutput"]
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        parts = (tanh or _tanh_parts)(x) if _mode(t) == "tanh" else (none or _none_parts)(x)
        return combine(*parts) * dy


def _kernel(t):
    """The 950 kernel (gelu_grad_v2_dag.h), float32: "none" (cdf + pdf*x) * dy; "tanh" dy * (w + q)."""
    return _run(t)


def _stable_tanh(x):
    m = (x * x * K_AN - K_BETA) * x  # -2u
    e = exp(-np.abs(m))
    inv = 1.0 / (1.0 + e)
    q, c = np.where(m <= 0, inv, e * inv), np.where(m <= 0, e * inv, inv)
    w = (x * x * K_A3 + K_BETA) * x * q * c
    return q, np.where((q == 0) | (c == 0), x.dtype.type(0), w)


def _exp_overflow(x):
    q, w = _tanh_parts(x)
    e = exp(-(x * x * K_AN - K_BETA) * x)  # e^2u: inf for x > 10.06
    return e / (1.0 + e), w


def _variant(doc: str, **parts):
    """A variant of this op's kernel with parts replaced; its kind declared by the first word of `doc`, a
    string this module passes (not a docstring: python -OO keeps it)."""
    def variant(t):
        return _run(t, **parts)
    variant.__doc__ = doc
    return legitimate(variant) if doc.startswith("Legitimate") else defect(variant)


VARIANTS = {
    "sign-slip": _variant("Defect: one term's sign flipped (cdf - x pdf; q - w).", combine=lambda a, b: a - b),
    "approximate-ignored": _variant('Defect: the attribute not passed on: "tanh" computes the erf form.',
                                    tanh=_none_parts),
    "pdf-missing-half": _variant('Defect ("none"): pdf = exp(-x^2) instead of exp(-x^2/2).',
                                 none=lambda x: _none_parts(x, pdf_scale=-1.0)),
    "erf-missing-sqrt2": _variant('Defect ("none"): erf(x) instead of erf(x/sqrt2).',
                                  none=lambda x: _none_parts(x, erf_scale=1.0)),
    "cubic-derivative": _variant('Defect ("tanh"): u\' with 0.044715 x^2 instead of 3 * 0.044715 x^2.',
                                 tanh=lambda x: _tanh_parts(x, a3=-K_AN)),
    "no-nan-select": _variant('Defect ("tanh"): the NaN -> 0 select dropped: NaN for x < -10.06 (p = inf, '
                              "inf * 0) and x = +inf.", tanh=lambda x: _tanh_parts(x, nan_select=False)),
    "exp-overflow": _variant('Defect ("tanh"): q = e^2u/(1+e^2u): inf/inf = NaN for x > 10.06.', tanh=_exp_overflow),
    "stable-formula": _variant('Legitimate: "none" cdf = Phi(x) without cancellation (as erfc would give); "tanh" '
                               "q and 1-q from e^-|2u| (no overflow, no NaN select needed).",
                               none=lambda x: _none_parts(x, cdf_of=X.f64_normal_cdf), tanh=_stable_tanh),
    "fused-axpy": _variant('Legitimate ("tanh"): Axpy fused, x^2*AN + BETAN rounded once (an FMA).',
                           tanh=lambda x: _tanh_parts(x, fused=True)),
}

_ALL = ("950", "A3", "A2", "310P", "910")

SPEC = register(OpSpec(
    name="aclnnGeluBackwardV2",
    key="gelu_backward_v2",
    header="aclnnop/aclnn_gelu_backward_v2.h",
    summary="Gradient of GELU: exact (erf) or its tanh approximation.",
    formula='gradInput = gradOutput * (Phi(x) + x phi(x)) ("none"); tanh form: s (1 + w (1 - s)), '
            "s = sigmoid(2u), u = sqrt(2/pi)(x + 0.044715 x^3), w = 2 sqrt(2/pi) x (1 + 0.134145 x^2)",
    tensors=grad_signature("gradInput"),
    attributes=(AttrSpec("approximate", "string", default="none", choices=("none", "tanh")),),
    products=products(*_ALL, overrides={"310P": ("float32", "float16"), "910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_ieee,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", broadcast_on=_ALL, out_is_promoted=True, checks_dims=False),
    special_values='"none": self = +-inf gives NaN (0 * inf in x pdf, as the 950 kernel and PyTorch); "tanh": '
                   "self = +inf gives gradOutput, -inf gives 0 * gradOutput (the kernel's NaN -> 0 select; "
                   "PyTorch gives NaN); NaN in either input gives NaN. The golden's constants are exact "
                   "(sqrt(2/pi), 0.044715); the device's are float32.",
))

CONTRACT_NOTES = """\
Phase-one rules of aclnnGeluBackwardV2 (gelu_grad_v2/op_api/aclnn_gelu_backward_v2.cpp, CheckPromoteTypeGeluBackward
in common/inc/op_api/level2_base.h) that Contract cannot express, in the source's order:
1. 161001: gradOutput, self, gradInput or approximate (char*) null.
2. 161002: PromoteType(gradOutput, self) undefined, or not in {FLOAT, FLOAT16, BF16}. There is no per-input
   dtype list: an INT32/INT8/UINT8/BOOL/... input with a float one promotes to that float and is ACCEPTED
   (then l0op::Cast); INT32 + INT32 (promotes to INT32) and any DOUBLE (promotes to DOUBLE) are rejected.
3. 161002: promoted type BF16 where NpuArch is neither DAV_2201 (A2/A3) nor regbase (950): bf16 + bf16 on 910
   and 310P. A bf16 input mixed with fp16/fp32 promotes to FLOAT and passes these checks there (whether
   l0op::Cast of bf16 then builds on 910/310P is not in ops-nn: an inner 5611xx error is possible).
4. 161002: the promoted type differs from gradInput's dtype (no cast of the result: fp16 + fp16 needs an fp16
   gradInput, fp16 + bf16 a FLOAT one). Contract(dtypes="promote") accepts any float output instead.
5. 161002: gradOutput and self do not broadcast, or gradInput's shape is not the broadcast shape.
6. 161002: approximate not exactly "none" or "tanh" (case-sensitive; checked last, after the shapes).
- workspaceSize / executor null: not checked by this op_api (no OP_CHECK_COMM_INPUT).
- Dims: the op_api checks none (the doc says 0-8; ops-nn's UT testcase_020 expects SUCCESS for 9 dims), so
  dims=(0, 8) follows the doc and a 9-dim call is accepted by the device, not rejected.
- Empty: self or gradOutput empty -> SUCCESS, workspace 0, after all checks above (the shapes must still
  broadcast to gradInput's).
- Compute dtype: both inputs are broadcast and l0op::Cast to the promoted type (fp16/bf16 -> FLOAT widening is
  exact); the kernel's output is in that type, which rule 4 makes gradInput's: no double rounding.
"""
