"""aclnnLogSigmoidBackward: gradInput = dy / (1 + e^x). The buffer input is taken but never read."""

from __future__ import annotations

import numpy as np

from .. import exact as X
from ..base import (OpSpec, TensorSpec, defect, grad_linear_reference, grad_signature, legitimate, products,
                    sigmoid_pair)
from ..mathfns import exp
from ..registry import register


def _reference(t):
    _, factor = sigmoid_pair(t["self"])  # sigmoid(-x) = 1 / (1 + e^x)
    return grad_linear_reference(t["gradOutput"], factor, factor, 16.0)


def _ieee(t):
    return t["gradOutput"] / (1.0 + exp(t["self"]))


def _exact(t):
    return X.evaluate(lambda: X.dec(t["gradOutput"]) * X.sigmoid(-X.dec(t["self"])))


def _kernel(t):
    """The 950 kernel: e = exp(-|x|); dy * (x < 0 ? 1 : e) / (1 + e)."""
    x, dy = t["self"], t["gradOutput"]
    e = exp(-np.abs(x))
    return dy * (np.where(x < 0, 1.0, e) / (1.0 + e))


@defect
def _exp_overflow(t):
    """Defect: e^-x/(1+e^-x): inf/inf = NaN once e^-x overflows (x < -88.7 in float32)."""
    x, dy = t["self"], t["gradOutput"]
    return dy * (exp(-x) / (1.0 + exp(-x)))


def _sign_slip(t):
    return t["gradOutput"] / (1.0 + exp(-t["self"]))


@defect
def _reads_buffer(t):
    """Defect: takes sigmoid(-x) from the forward buffer, which the API says is not to be read."""
    return t["gradOutput"] * t["buffer"]


@legitimate
def _stable(t):
    """Legitimate: exp(-softplus(x)) = 1/(1+e^x) through logaddexp."""
    return t["gradOutput"] * exp(-np.logaddexp(0.0, t["self"]))


def _textbook(x, attrs, mp):
    """The doc's factor 1/(1 + e^x), for the tests' mpmath oracle."""
    return 1 / (1 + mp.exp(x))


SPEC = register(OpSpec(
    name="aclnnLogSigmoidBackward",
    key="log_sigmoid_backward",
    header="aclnnop/aclnn_logsigmoid_backward.h",
    summary="Gradient of log(sigmoid(x)).",
    formula="gradInput = gradOutput / (1 + e^self)   (buffer: not read)",
    tensors=grad_signature("gradInput", extra_inputs=(TensorSpec("buffer", "input", {"constant": 0}, read_by_kernel=False),)),
    products=products("A3", "A2"),
    dims=(1, 8),
    empty_ok=True,
    reference=_reference,
    ieee=_ieee,
    exact=_exact,
    kernel=_kernel,
    variants={"exp-overflow": _exp_overflow, "sign-slip": _sign_slip, "reads-buffer": _reads_buffer,
              "stable-formula": _stable},
    special_values="self = -inf gives gradOutput; self = +inf gives 0 (NaN if gradOutput is +-inf); "
                   "NaN in gradOutput or self gives NaN. buffer never affects the result.",
    textbook=_textbook,
))
