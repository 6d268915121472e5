"""Shared math of the swish-family gradients: dy * f(z), f(z) = s(1 + z(1-s)), s = sigmoid(z), z = beta x.

f is d/dx [x sigmoid(beta x)] written in z. SiluBackward is beta = 1 (z = x), FastGeluBackward
beta = 1.702, SwishBackward any float32 beta (betaOptional).
"""

from __future__ import annotations

import numpy as np

from ..base import Reference, defect, grad_linear_reference, legitimate, sigmoid_pair
from ..mathfns import exp


def swish_grad_reference(dy: np.ndarray, z: np.ndarray, z_rel_err: float = 0.0) -> Reference:
    """dy * s(z) * (1 + z (1 - s(z))) in float64, with its error bound and term scale.

    z_rel_err: relative error already in z (in float64 units), which exp
    amplifies by |z|. With z exact the error is within 16 units of dy * terms: e = exp(-|z|)
    within 2 (1 ulp), 1 + e within 2, s and c = e s within 6 each, 1 + z c within 8 units of
    1 + |z| c, then two products; 32 doubles that. Underflow (|z| > 708) stays under the
    absolute 2^-1060 |dy| that grad_linear_reference adds.
    """
    s, c = sigmoid_pair(z)
    factor = s * (1.0 + z * c)
    terms = s * (1.0 + np.abs(z) * c)
    rel_bound = 32.0 + z_rel_err * 4.0 * (1.0 + np.abs(z)) ** 2
    return grad_linear_reference(dy, factor, terms, rel_bound)


# Kernel variants of dy * s(z) (1 + z (1 - s(z))), shared by the swish family
# (z = beta x); computed in the inputs' float type.

@defect
def exp_overflow_kernel(dy: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Defect: sigmoid as e^z/(1+e^z): inf/inf = NaN once e^z overflows (z > 88.7 in float32)."""
    s = exp(z) / (1.0 + exp(z))
    return dy * s * (1.0 + z * (1.0 - s))


@defect
def expanded_kernel(dy: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Defect: 1 + z(1-s) expanded to 1 + z - z s, which cancels to 0 once |z| >= 2^24."""
    s = 1.0 / (1.0 + exp(-z))
    return dy * s * (1.0 + z - z * s)


@legitimate
def stable_kernel(dy: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Legitimate: sigmoid and its complement from exp(-|z|), summed as s + z s (1-s)."""
    e = exp(-np.abs(z))
    s = np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    c = np.where(z >= 0, e / (1.0 + e), 1.0 / (1.0 + e))
    return dy * (s + z * s * c)


def swish_variants(z_of) -> dict:
    """The swish variants for an op whose z is z_of(t), t the op's whole input mapping (tensors and attributes)."""
    def bound(fn):
        variant = lambda t: fn(t["gradOutput"], z_of(t))  # noqa: E731
        variant.variant_kind = fn.variant_kind  # (the kind its kernel declares)
        return variant
    return {name: bound(fn) for name, fn in (("exp-overflow", exp_overflow_kernel), ("expanded-formula", expanded_kernel),
                                             ("stable-formula", stable_kernel))}


def shared_variants(z_of) -> dict:
    """The swish variants for an op whose z is z_of(self)."""
    return swish_variants(lambda t: z_of(t["self"]))
