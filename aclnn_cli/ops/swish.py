"""Shared math of SiluBackward and FastGeluBackward: both are dy * f(z) with f(z) = s(1 + z(1-s)).

SiluBackward uses z = x; FastGeluBackward uses z = 1.702 x.
"""

from __future__ import annotations

import numpy as np

from .base import Reference, grad_linear_reference, sigmoid_pair


def swish_grad_reference(dy: np.ndarray, z: np.ndarray, z_rel_err: float = 0.0) -> Reference:
    """dy * s(z) * (1 + z (1 - s(z))) in float64, with its error bound and term scale.

    z_rel_err: relative error already in z (in float64 units), which exp
    amplifies by |z|.
    """
    s, c = sigmoid_pair(z)
    factor = s * (1.0 + z * c)
    terms = s * (1.0 + np.abs(z) * c)
    rel_bound = 32.0 + z_rel_err * 4.0 * (1.0 + np.abs(z)) ** 2
    return grad_linear_reference(dy, factor, terms, rel_bound)
