"""aclnnHardsigmoidBackward: out = dy / 6 where -3 < x < 3, else 0."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..base import Contract, OpSpec, Reference, grad_linear_reference, grad_signature, legitimate, products
from ..registry import register

ALPHA, BETA = 1.0 / 6.0, 0.5  # rounded to the compute type, as the kernel's float32 constants are


def _inside(x):
    with np.errstate(invalid="ignore"):
        return (x > -3.0) & (x < 3.0)  # NaN compares false: 0


def _reference(t):
    inside = _inside(t["self"])
    factor = np.where(inside, 1.0 / 6.0, 0.0)
    ref = grad_linear_reference(t["gradOutput"], factor, factor, 1.0)
    # Outside the window the kernel selects a literal +0, whatever the sign of gradOutput.
    return Reference(np.where(inside, ref.value, 0.0), ref.bound, ref.scale)


def _exact(t):
    return t["gradOutput"] / 6 if -3 < t["self"] < 3 else Fraction(0)


def _device_window(x32, inclusive=False):
    """The kernel's test: t = x/6 + 1/2 in float32, pass where 0 < t < 1."""
    with np.errstate(invalid="ignore"):
        t = x32 * ALPHA + BETA
        return (t >= 0) & (t <= 1) if inclusive else (t > 0) & (t < 1)


def _kernel(t, inclusive=False, sign=1.0):
    return np.where(_device_window(t["self"], inclusive), sign * (t["gradOutput"] * ALPHA), 0.0).astype(t["self"].dtype)


@legitimate
def _stable(t):
    """Legitimate: the exact window -3 < x < 3 and a true division by 6 (also the golden at inf/NaN)."""
    x = t["self"]
    return np.where(_inside(x), t["gradOutput"] / 6.0, 0.0).astype(x.dtype)


def _edge(t):
    """Near +-3 the float32 window differs from the exact one (x = 2.9999998 gives 0 on the device)."""
    x = t["self"]
    device = _device_window(x.astype(np.float32))
    return device != _inside(x), np.where(device, t["gradOutput"] / 6.0, 0.0)


def _textbook(x, attrs, mp):
    """The doc's factor: 1/6 inside (-3, 3), else 0, for the tests' mpmath oracle."""
    return mp.mpf(1) / 6 if -3 < x < 3 else mp.mpf(0)


SPEC = register(OpSpec(
    name="aclnnHardsigmoidBackward",
    key="hardsigmoid_backward",
    summary="Gradient of hardsigmoid max(0, min(1, x/6 + 1/2)).",
    formula="out = gradOutput / 6 where -3 < self < 3 (strict), else 0",
    tensors=grad_signature("out", self_range=(-4.0, 4.0)),
    products=products("A3", "A2"),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    ieee=_stable,
    exact=_exact,
    kernel=_kernel,
    variants={"inclusive-bounds": lambda t: _kernel(t, inclusive=True), "sign-slip": lambda t: _kernel(t, sign=-1.0),
              "stable-formula": _stable},
    special_values="self = +-inf or NaN gives 0 (whatever gradOutput is); inside (-3, 3) NaN or inf in "
                   "gradOutput propagates. Golden takes the exact window: float32 self = 2.9999998 gives "
                   "gradOutput/6; the device's float32 test gives 0 there, which verify also accepts.",
    cast_mode={"bfloat16": "round"},
    edge=_edge,
    contract=Contract(dtypes="promote"),
    textbook=_textbook,
))
