"""What the elementwise loss gradients (L1, MSE, SmoothL1, SoftMargin, BinaryCrossEntropy with and without logits)
share: the reduction codes, the op_api's check of them, the float32 mean factor most of their tilings compute, and
the two ways a kernel gets that factor wrong."""

from __future__ import annotations

import math

import numpy as np

from ..base import defect

REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
MEAN = 1


def reduction_rule(a) -> str | None:
    """161002: reduction outside [0, 2] (the op_api's CheckReduction)."""
    r = a["reduction"]
    return None if r in REDUCTIONS else f"reduction {r} is not 0 (none), 1 (mean) or 2 (sum)"


def cof32(n: int) -> float:
    """1.0f / static_cast<float>(n): the mean factor in float32 (NaN for n = 0: an empty case never launches)."""
    return float(np.float32(np.float32(1.0) / np.float32(n))) if n else math.nan


def is_mean(t) -> bool:
    return int(t["reduction"]) == MEAN


def mean_defects(kernel, cof, sum_cof: float = 1.0):
    """(mean-forgotten, cof-in-half): the defects of a loss kernel's mean factor, for `kernel(t, cof)` and the op's
    `cof(t)` (the factor its kernel multiplies by: 1/N, MSE's 2/N; sum_cof, the factor of sum)."""

    @defect
    def mean_forgotten(t):
        """Defect: mean computed like sum (the factor of sum): results N times too large."""
        return kernel(t, sum_cof)

    @defect
    def cof_in_half(t):
        """Defect: the mean factor held in float16 (a half Muls operand): up to 2^-11 off, subnormal past N = 2^14
        (2^15 for 2/N), 0 past 2^25 (2^26)."""
        return kernel(t, float(np.float16(cof(t))))

    return mean_forgotten, cof_in_half
