"""aclnnFastGeluBackward: dx = dy * s * (1 + 1.702 x (1 - s)), s = sigmoid(1.702 x)."""

from __future__ import annotations

from decimal import Decimal

import numpy as np

from . import exact as X
from .base import OpSpec, grad_signature, products
from .registry import register
from .swish import swish_grad_reference

ALPHA = 1.702


def _ieee(t):
    m = -ALPHA * t["self"]
    d = 1.0 / (np.exp(m) + 1.0)
    return ((d - 1.0) * m + 1.0) * d * t["gradOutput"]


def _exact(t):
    return X.evaluate(lambda: X.dec(t["gradOutput"]) * X.swish_factor(Decimal("1.702") * X.dec(t["self"])))


def _edge(t):
    """|1.702 x| > float32 max (|x| > 2.0e38): the kernel's m = -1.702 x overflows and its formula gives NaN."""
    with np.errstate(over="ignore", invalid="ignore"):
        m = -ALPHA * t["self"].astype(np.float32)
    overflow = np.isinf(m) & np.isfinite(t["self"])
    return overflow, np.full(overflow.shape, np.nan)


def _kernel(t, alpha=ALPHA):
    """The 950 kernel: m = -1.702 x; d = 1/(exp(m)+1); ((d-1) m + 1) d dy."""
    x, dy = t["self"], t["gradOutput"]
    m = -alpha * x
    d = 1.0 / (np.exp(m) + 1.0)
    return ((d - 1.0) * m + 1.0) * d * dy


def _exp_overflow(t):
    """Defect: sigmoid(1.702 x) as e^z/(1+e^z): NaN once e^z overflows."""
    x, dy = t["self"], t["gradOutput"]
    z = ALPHA * x
    s = np.exp(z) / (1.0 + np.exp(z))
    return dy * s * (1.0 + z * (1.0 - s))


def _sign_slip(t):
    x, dy = t["self"], t["gradOutput"]
    m = -ALPHA * x
    d = 1.0 / (np.exp(m) + 1.0)
    return ((1.0 - d) * m + 1.0) * d * dy


def _expanded(t):
    """Defect: 1 + z(1-s) expanded to 1 + z - z s, which cancels to 0 for large |z|."""
    x, dy = t["self"], t["gradOutput"]
    z = ALPHA * x
    s = 1.0 / (1.0 + np.exp(-z))
    return dy * s * (1.0 + z - z * s)


def _stable(t):
    """Legitimate: sigmoid and complement of z = 1.702 x from exp(-|z|), as s + z s (1-s)."""
    x, dy = t["self"], t["gradOutput"]
    z = ALPHA * x
    e = np.exp(-np.abs(z))
    s = np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    c = np.where(z >= 0, e / (1.0 + e), 1.0 / (1.0 + e))
    return dy * (s + z * s * c)


SPEC = register(OpSpec(
    name="aclnnFastGeluBackward",
    key="fast_gelu_backward",
    summary="Gradient of FastGelu (x * sigmoid(1.702 x)).",
    formula="dx = dy * s * (1 + 1.702 x (1 - s)), s = sigmoid(1.702 x)",
    tensors=grad_signature("gradInput"),
    products=products("950", "A3", "A2"),
    dims=(0, 8),
    empty_ok=False,
    # 1.702 is not a binary fraction: z carries ~2 float64 units of relative error.
    reference=lambda t: swish_grad_reference(t["gradOutput"], ALPHA * t["self"], z_rel_err=2.0),
    ieee=_ieee,
    exact=_exact,
    kernel=_kernel,
    variants={"exp-overflow": _exp_overflow, "sign-slip": _sign_slip, "expanded-formula": _expanded,
              "half-constant": lambda t: _kernel(t, ALPHA / 2), "stable-formula": _stable},
    edge=_edge,
    special_values="self = +inf or -inf gives NaN (0 * inf in the doc formula, as the kernel computes it); "
                   "NaN in either input gives NaN. The constant is exactly 1.702 (decimal). For finite "
                   "|self| > 2.0e38 the golden is the exact limit (gradOutput, or 0); verify also accepts the "
                   "NaN that the float32 formula yields there (1.702 x overflows).",
))
