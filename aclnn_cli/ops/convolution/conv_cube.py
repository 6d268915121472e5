"""The cube's float32 accumulation over a convolution's lowering (conv_lowering, ops/contraction/cube.py): what
ConvolutionBackward's kernel and its variants emulate.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..contraction import cube
from .conv_lowering import F32, HELD, Conv, Lowered, _column_ranges


def accumulate(low: Lowered, ranges=None, order=None, dtype=F32) -> np.ndarray:
    """The cube's float32 result (G, M, C): each K range (cube.rounds by default: the 950's splitKRound) accumulated
    in L0C mmad step by mmad step (cube.steps: 16 values of K each), the ranges added in `order` (default: as
    listed) into the output. dtype: the accumulator's (float16 or bfloat16: a defect)."""
    ranges = cube.rounds(low.k) if ranges is None else ranges
    order = range(len(ranges)) if order is None else order
    out = np.zeros((low.g, low.m, low.c), F32)
    gather = max(cube.K0, HELD // max(low.g * max(low.c, 1), 1) // cube.K0 * cube.K0)
    for cs, ce in _column_ranges(low, gather):
        partials = []
        for start, stop in ranges:
            acc = np.zeros((low.g, low.m, ce - cs), dtype)
            for ks in range(start, stop, gather):
                ke = min(stop, ks + gather)
                left, right = low.left(ks, ke).astype(F32), low.right(ks, ke, cs, ce).astype(F32)
                for part in cube.steps(left, right, 0, ke - ks):
                    acc = (acc.astype(F32) + part).astype(dtype)
            partials.append(acc.astype(F32))
        total = np.zeros((low.g, low.m, ce - cs), F32)
        for i in order:
            total = total + partials[i]
        out[:, :, cs:ce] = total
    return out


def split_ranges(k: int, parts: int = 8) -> list[tuple[int, int]]:
    """K cut into `parts` contiguous ranges (one a core: split-K)."""
    size = max(1, math.ceil(k / parts))
    return [(s, min(k, s + size)) for s in range(0, k, size)]


def with_padding_dropped(conv: Conv) -> Conv:
    """The first spatial axis's padding one less (a padding row dropped): every position read one row off."""
    return replace(conv, padding=(max(conv.padding[0] - 1, 0), *conv.padding[1:]))
