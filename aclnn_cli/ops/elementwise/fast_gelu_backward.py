"""aclnnFastGeluBackward: dx = dy * s * (1 + 1.702 x (1 - s)), s = sigmoid(1.702 x)."""

from __future__ import annotations

from decimal import Decimal

import numpy as np

from .. import exact as X
from ..base import OpSpec, grad_signature, products
from ..mathfns import exp
from ..registry import register
from .swish import shared_variants, swish_grad_reference

ALPHA = 1.702


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
    d = 1.0 / (exp(m) + 1.0)
    return ((d - 1.0) * m + 1.0) * d * dy


def _sign_slip(t):
    x, dy = t["self"], t["gradOutput"]
    m = -ALPHA * x
    d = 1.0 / (exp(m) + 1.0)
    return ((1.0 - d) * m + 1.0) * d * dy


def _textbook(x, attrs, mp):
    """The doc's factor s (1 + z (1 - s)), z = 1.702 x, s = 1/(1 + e^-z), for the tests' mpmath oracle."""
    z = mp.mpf("1.702") * x
    s = 1 / (1 + mp.exp(-z))
    return s * (1 + z * (1 - s))


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
    exact=_exact,
    kernel=_kernel,
    variants={**shared_variants(lambda x: ALPHA * x), "sign-slip": _sign_slip,
              "half-constant": lambda t: _kernel(t, ALPHA / 2)},
    edge=_edge,
    special_values="self = +inf or -inf gives NaN (0 * inf in the doc formula, as the kernel computes it); "
                   "NaN in either input gives NaN. The constant is exactly 1.702 (decimal). For finite "
                   "|self| > 2.0e38 the golden is the exact limit (gradOutput, or 0); verify also accepts the "
                   "NaN that the float32 formula yields there (1.702 x overflows).",
    textbook=_textbook,
))
