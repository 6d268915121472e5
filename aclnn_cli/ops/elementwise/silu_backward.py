"""aclnnSiluBackward: gradInput = dy * s(x) * (1 + x (1 - s(x))), s = sigmoid."""

from __future__ import annotations


from .. import exact as X
from ..base import Contract, OpSpec, grad_signature, products
from ..mathfns import exp
from ..registry import register
from .swish import shared_variants, swish_grad_reference


def _exact(t):
    return X.evaluate(lambda: X.dec(t["gradOutput"]) * X.swish_factor(X.dec(t["self"])))


def _kernel(t):
    """The device: s = 1/(1+exp(-x)), dy*s*(1+x*(1-s)), in the inputs' float type (float32 on device)."""
    x, dy = t["self"], t["gradOutput"]
    s = 1.0 / (1.0 + exp(-x))
    return dy * s * (1.0 + x * (1.0 - s))


def _sign_slip(t):
    x, dy = t["self"], t["gradOutput"]
    s = 1.0 / (1.0 + exp(-x))
    return dy * s * (1.0 - x * (1.0 - s))


def _textbook(x, attrs, mp):
    """The doc's factor s (1 + x (1 - s)), s = 1/(1 + e^-x), for the tests' mpmath oracle."""
    s = 1 / (1 + mp.exp(-x))
    return s * (1 + x * (1 - s))


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
    exact=_exact,
    kernel=_kernel,
    variants={**shared_variants(lambda x: x), "sign-slip": _sign_slip},
    contract=Contract(broadcast_on=("950",), mixed_fp32_on=("950",)),
    special_values="self = +inf or -inf gives NaN (0 * inf inside the formula, as in PyTorch and the kernel); "
                   "NaN in either input gives NaN; gradOutput = +-inf gives +-inf times the factor.",
    textbook=_textbook,
))
