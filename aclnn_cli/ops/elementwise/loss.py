"""What the elementwise loss gradients (L1, SoftMargin, BinaryCrossEntropy) share: the reduction codes, the
op_api's check of them, and the float32 mean factor most of their tilings compute."""

from __future__ import annotations

import math

import numpy as np

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
