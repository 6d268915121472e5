"""An independent oracle: the textbook formulas in mpmath at 200 bits, rounded by nearest-candidate search.

Shares no code with aclnn_cli: not its stable formulas, not its rounding.
"""

from __future__ import annotations

import mpmath
import numpy as np

PREC = 200


def _silu(x):
    s = 1 / (1 + mpmath.exp(-x))
    return s * (1 + x * (1 - s))


def _fast_gelu(x):
    z = mpmath.mpf("1.702") * x
    s = 1 / (1 + mpmath.exp(-z))
    return s * (1 + z * (1 - s))


def _log_sigmoid(x):
    return 1 / (1 + mpmath.exp(x))


def _hardsigmoid(x):
    return mpmath.mpf(1) / 6 if -3 < x < 3 else mpmath.mpf(0)


# d(loss)/d(x) = dy * FACTOR(x) for all four ops.
FACTORS = {
    "aclnnSiluBackward": _silu,
    "aclnnFastGeluBackward": _fast_gelu,
    "aclnnLogSigmoidBackward": _log_sigmoid,
    "aclnnHardsigmoidBackward": _hardsigmoid,
}


def factors(op_name: str, xs: np.ndarray) -> list:
    """FACTOR(x) as 200-bit mpf for every finite float64 x (None for non-finite)."""
    fn = FACTORS[op_name]
    with mpmath.workprec(PREC):
        return [fn(mpmath.mpf(float(x))) if np.isfinite(x) else None for x in xs]


class Rounder:
    """Round an mpf to a 16-bit dtype by comparing with every representable neighbour exactly."""

    def __init__(self, np_dtype):
        bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        vals = bits.view(np_dtype).astype(np.float64)
        finite = np.isfinite(vals) & ~((vals == 0) & np.signbit(vals))
        order = np.argsort(vals[finite], kind="stable")
        self.values = vals[finite][order]
        self.bits = bits[finite][order]
        top = self.values[-1]
        self.overflow = top + (top - self.values[-2])  # where +inf sits on the grid (even significand)
        self.np_dtype = np_dtype

    def __call__(self, v) -> int:
        """Bit pattern of the nearest value, ties to even significand; signed zeros kept."""
        with mpmath.workprec(PREC):
            negative = v < 0
            a = -v if negative else v
            i = int(np.searchsorted(self.values, float(a)))
            cands = []
            for j in range(max(i - 2, 0), min(i + 2, len(self.values))):
                if self.values[j] >= 0:
                    cands.append((abs(mpmath.mpf(self.values[j]) - a), int(self.bits[j]) & 1, int(self.bits[j])))
            inf_bits = int(np.array(np.inf, dtype=np.float64).astype(self.np_dtype).view(np.uint16))
            cands.append((abs(mpmath.mpf(self.overflow) - a), 0, inf_bits))
            best = min(cands)[2]
            return best | 0x8000 if negative else best
