"""aclnnSwishBackward: gradInput = dy * s * (1 + beta x (1 - s)), s = sigmoid(beta x); betaOptional nullptr -> 1.0.

The swish family's f(z) (swish.py) at z = beta x, beta the float32 the aclScalar holds (`ToFloat()`).
The 950 kernel (swish_grad/op_kernel/arch35/swish_grad_dag.h), all in float32:
v = x*beta; s = 1/(exp(-v)+1); t = (1-s)*v; t = t*s + s (MulDstAdd); out = t*dy.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .. import exact as X
from ..base import AttrSpec, Contract, OpSpec, Reference, defect, grad_signature, legitimate, products
from ..mathfns import exp
from ..registry import register
from .swish import swish_grad_reference, swish_variants

BETA = "betaOptional"


def _beta(t, like: np.ndarray):
    """beta in x's float type: float32 on the device, float64 for the golden (fp16 for a native-fp16 defect)."""
    return np.asarray(t[BETA], dtype=np.asarray(like).dtype)


def _z(t):
    return t["self"] * _beta(t, t["self"])


def _reference(t):
    beta = float(t[BETA])
    if not math.isfinite(beta):  # inf * 0 inside the formula: NaN wherever the kernel gives NaN
        with np.errstate(all="ignore"):
            value = _kernel(t).astype(np.float64)
        return Reference(value, np.zeros_like(value), np.abs(value))
    # beta * x is exact in float64: beta is a float32 and x has at most 24 significant bits, so the
    # product has at most 48 and |beta x| lies in [2^-298, 2^256] (or is 0): z carries no error.
    return swish_grad_reference(t["gradOutput"], beta * t["self"])


def _fraction(v) -> Fraction:
    return v if isinstance(v, Fraction) else Fraction(float(v))


def _exact(t):
    return X.evaluate(lambda: X.dec(t["gradOutput"]) * X.swish_factor(X.dec(_fraction(t[BETA])) * X.dec(t["self"])))


def _kernel(t, sign: float = 1.0):
    """The 950 kernel, op by op in the inputs' float type: v = x*beta; s = 1/(exp(-v)+1); ((1-s)*v)*s + s; *dy."""
    v = _z(t)
    s = 1.0 / (exp(-v) + 1.0)
    r = sign * (1.0 - s) * v
    r = r * s + s
    return r * t["gradOutput"]


def _edge(t):
    """|beta x| beyond float32 max: the kernel's v = x*beta overflows to +-inf and its formula gives NaN.

    The golden is the exact limit there (gradOutput for beta x > 0, a tiny value of the other sign below).
    """
    x = np.asarray(t["self"])
    with np.errstate(over="ignore", invalid="ignore"):
        v = x.astype(np.float32) * np.float32(t[BETA])
    where = np.isinf(v) & np.isfinite(x)
    return where, np.full(where.shape, np.nan)


@defect
def _beta_ignored(t):
    """Defect: betaOptional never reaches the kernel; it runs with the graph attr's default scale = 1.0."""
    return _kernel({**t, BETA: 1.0})


@defect
def _beta_once(t):
    """Defect: the chain rule's beta dropped from the second term: s(1 + x(1-s)), s = sigmoid(beta x)."""
    x = t["self"]
    s = 1.0 / (exp(-_z(t)) + 1.0)
    return ((1.0 - s) * x * s + s) * t["gradOutput"]


@defect
def _y_as_output(t):
    """Defect: the doc's first form beta y + s(1 - beta y) with y read from the graph op SwishGrad's third
    input, documented as the forward output but filled with self by the op_api: dy (v + s (1 - v)), v = beta x."""
    v = _z(t)
    s = 1.0 / (exp(-v) + 1.0)
    return (v + s * (1.0 - v)) * t["gradOutput"]


@legitimate
def _fused(t):
    """Legitimate: MulDstAdd as a fused multiply-add, ((1-s) v) s + s with one rounding instead of two."""
    v = _z(t)
    s = 1.0 / (exp(-v) + 1.0)
    r = (1.0 - s) * v
    r = (r.astype(np.float64) * s + s).astype(r.dtype)
    return r * t["gradOutput"]


VARIANTS = {
    **swish_variants(_z),  # exp-overflow, expanded-formula (defects), stable-formula (legitimate)
    "sign-slip": lambda t: _kernel(t, sign=-1.0),
    "beta-ignored": _beta_ignored,
    "beta-once": _beta_once,
    "y-as-forward-output": _y_as_output,
    "fused-multiply-add": _fused,
}


def _textbook(x, attrs, mp):
    """The doc's factor s (1 + z (1 - s)), z = beta x, s = 1/(1 + e^-z), for the tests' mpmath oracle."""
    beta = attrs.get("betaOptional")
    z = (mp.mpf(1) if beta is None else mp.mpf(beta)) * x
    s = 1 / (1 + mp.exp(-z))
    return s * (1 + z * (1 - s))


SPEC = register(OpSpec(
    name="aclnnSwishBackward",
    key="swish_backward",
    header="aclnnop/aclnn_swish_backward.h",
    summary="Gradient of Swish x * sigmoid(beta x); betaOptional nullptr means beta = 1.0.",
    formula="gradInput = gradOutput * s * (1 + beta*self*(1 - s)), s = sigmoid(beta*self)",
    tensors=grad_signature("gradInput"),
    attributes=(AttrSpec(BETA, "scalar", default=1.0, optional=True),),
    products=products("950", "A3", "A2", "310P", "910",
                      overrides={"310P": ("float32", "float16"), "910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(),
    special_values="self = +inf or -inf gives NaN (0 * inf and -inf * 0 inside the kernel's formula); NaN in "
                   "either input gives NaN; gradOutput = +-inf gives +-inf times the factor. betaOptional = 0 "
                   "gives 0.5 * gradOutput for finite self; a non-finite betaOptional gives NaN. betaOptional is "
                   "used as the float32 it converts to. For finite |beta * self| > float32 max the golden is "
                   "the exact limit (gradOutput, or 0); verify also accepts the kernel's NaN there.",
    textbook=_textbook,
    oracle_attributes=({"betaOptional": 1.0}, {"betaOptional": float(np.float32(1.7))}, {"betaOptional": -0.75}),
))

CONTRACT_NOTES = """\
aclnnSwishBackward phase one (swish_grad/op_api/aclnn_swish_backward.cpp), beyond Contract():
- Order: workspaceSize or executor null -> 161001; gradOutput, self, gradInput null -> 161001
  (betaOptional may be null: beta = 1.0); gradOutput dtype, then self dtype not in {FLOAT16, FLOAT,
  BF16} -> 161002; betaOptional non-null and its dtype not CanCast to FLOAT (COMPLEX64, COMPLEX128)
  -> 161002; gradOutput dtype != gradInput dtype, then self dtype != gradInput dtype -> 161002;
  self BF16 on a SoC outside [ASCEND910B, ASCEND910E] (910, 310P) -> 161002; gradOutput, self or
  gradInput with more than 8 dims -> 161002; gradOutput or self view shape != gradInput's -> 161002
  (no broadcast); then an empty gradOutput or self -> ACLNN_SUCCESS, workspace 0.
- gradInput's dtype is never checked against the list itself, only for equality (same effect).
- betaOptional of any castable dtype (DOUBLE, INT*, BOOL, FLOAT16, ...) is converted with ToFloat():
  a DOUBLE beta is rounded to float32 (beyond float32 range: +-inf, the output is then NaN); the
  op functions receive that float32 value.
- 0-d tensors are accepted (dims 0-8).
"""
