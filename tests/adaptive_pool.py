"""Test helpers of the adaptive average pooling gradients (tests/test_op_adaptive_avg_pool{2,3}d_backward.py), written
from PyTorch's adaptive_avg_pool backward (start_index, end_index) and the manifest alone: no aclnn-cli window code.

Along an axis of n input positions pooled into m, window o covers [floor(o n / m), ceil((o + 1) n / m)) and
input position i receives gradOutput[o] / (the window's size along every axis) from each window covering it.
"""

from __future__ import annotations

import itertools

import numpy as np

import harness
from exactq import Fraction

F = np.float32


def bounds(n: int, m: int) -> list[tuple[int, int]]:
    """[start, end) of each of the m windows over n positions, in Python integers."""
    return [((o * n) // m, -((-(o + 1) * n) // m)) for o in range(m)]


def grids(case, m) -> tuple[np.ndarray, tuple[int, ...]]:
    """gradOutput as (planes, *pooled) float64 and self's spatial sizes, from the manifest's numbers."""
    ts = harness.tensors(m)
    sp = 3 if "3d" in m["op"] else 2
    g = harness.view(harness.storage(case, ts["gradOutput"]), ts["gradOutput"]).astype(np.float64)
    return g.reshape(-1, *g.shape[-sp:]), tuple(ts["self"]["shape"][-sp:])


def oracle(case, m) -> list:
    """The exact gradient in logical order: Fractions summed window by window."""
    g, sizes = grids(case, m)
    pooled = g.shape[1:]
    out = np.full((g.shape[0], *sizes), Fraction(0), dtype=object)
    fg = np.vectorize(Fraction, otypes=[object])(g)
    for o in itertools.product(*(range(k) for k in pooled)):
        box = [bounds(n, k)[i] for n, k, i in zip(sizes, pooled, o)]
        size = int(np.prod([b - a for a, b in box]))
        for p in range(g.shape[0]):
            out[(p, *(slice(a, b) for a, b in box))] += fg[(p, *o)] / size
    return list(out.reshape(-1))


def independent(case, m) -> np.ndarray:
    """A float32 kernel of another order than the device's: each window's term g / K (K its size product, in
    float32) scattered into the positions it covers, the windows last to first."""
    g, sizes = grids(case, m)
    pooled = g.shape[1:]
    out = np.zeros((g.shape[0], *sizes), F)
    g = g.astype(F)
    with np.errstate(invalid="ignore"):  # (inf - inf: NaN, as IEEE says)
        for o in reversed(list(itertools.product(*(range(k) for k in pooled)))):
            box = [bounds(n, k)[i] for n, k, i in zip(sizes, pooled, o)]
            size = F(np.prod([b - a for a, b in box]))
            out[(slice(None), *(slice(a, b) for a, b in box))] += (g[(slice(None), *o)] / size).reshape(
                -1, *([1] * len(sizes)))
    return out.reshape(harness.tensors(m)["self"]["shape"])
