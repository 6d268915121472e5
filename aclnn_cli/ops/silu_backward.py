"""aclnnSiluBackward: gradInput = dy * s(x) * (1 + x (1 - s(x))), s = sigmoid."""

from __future__ import annotations

import numpy as np

from . import exact as X
from .base import Contract, OpSpec, grad_signature, products
from .registry import register
from .swish import swish_grad_reference


def _ieee(t):
    s = 1.0 / (1.0 + np.exp(-t["self"]))
    return t["gradOutput"] * s * (1.0 + t["self"] * (1.0 - s))


def _exact(t):
    return X.evaluate(lambda: X.dec(t["gradOutput"]) * X.swish_factor(X.dec(t["self"])))


def _kernel(t):
    """The device: s = 1/(1+exp(-x)), dy*s*(1+x*(1-s)), in the inputs' float type (float32 on device)."""
    x, dy = t["self"], t["gradOutput"]
    s = 1.0 / (1.0 + np.exp(-x))
    return dy * s * (1.0 + x * (1.0 - s))


def _exp_overflow(t):
    """Defect: sigmoid as e^x/(1+e^x): inf/inf = NaN once e^x overflows (x > 88.7 in float32)."""
    x, dy = t["self"], t["gradOutput"]
    s = np.exp(x) / (1.0 + np.exp(x))
    return dy * s * (1.0 + x * (1.0 - s))


def _sign_slip(t):
    x, dy = t["self"], t["gradOutput"]
    s = 1.0 / (1.0 + np.exp(-x))
    return dy * s * (1.0 - x * (1.0 - s))


def _expanded(t):
    """Defect: 1 + x(1-s) expanded to 1 + x - x s, which cancels to 0 once |x| >= 2^24."""
    x, dy = t["self"], t["gradOutput"]
    s = 1.0 / (1.0 + np.exp(-x))
    return dy * s * (1.0 + x - x * s)


def _stable(t):
    """Legitimate: sigmoid and its complement from exp(-|x|), summed as s + x s (1-s)."""
    x, dy = t["self"], t["gradOutput"]
    e = np.exp(-np.abs(x))
    s = np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    c = np.where(x >= 0, e / (1.0 + e), 1.0 / (1.0 + e))
    return dy * (s + x * s * c)


SPEC = register(OpSpec(
    name="aclnnSiluBackward",
    key="silu_backward",
    summary="Gradient of SiLU (x * sigmoid(x)).",
    formula="gradInput = gradOutput * s * (1 + self * (1 - s)), s = sigmoid(self)",
    tensors=grad_signature("gradInput"),
    products=products("950", "A3", "A2", "910", overrides={"910": ("float32", "float16")}),
    dims=(1, 8),
    empty_ok=True,
    reference=lambda t: swish_grad_reference(t["gradOutput"], t["self"]),
    ieee=_ieee,
    exact=_exact,
    kernel=_kernel,
    variants={"exp-overflow": _exp_overflow, "sign-slip": _sign_slip, "expanded-formula": _expanded,
              "stable-formula": _stable},
    contract=Contract(broadcast_on=("950",), mixed_fp32_on=("950",)),
    special_values="self = +inf or -inf gives NaN (0 * inf inside the formula, as in PyTorch and the kernel); "
                   "NaN in either input gives NaN; gradOutput = +-inf gives +-inf times the factor.",
))
