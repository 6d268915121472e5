"""The 950 kernels' float32 row sum, as docs/kernels.md describes it ("Sums").

64-lane blocks (one 256-byte vector register of float32); while there are more blocks than a power of two,
block j + 2^k is added into block j (2^k the largest power of two below the block count), then blocks are
halved pairwise, and the last block is reduced in-register pairwise (the in-register order is not in the
sources: pairwise assumed). Padding lanes are +0, so they change nothing (x + 0 = x exactly, -0 + 0 = +0
aside: a row of -0 sums to +0 here as on the device's zero-filled tail).
"""

from __future__ import annotations

import math

import numpy as np

LANES = 64


def tree_sum(x: np.ndarray, axis: int = 1, keepdims: bool = True) -> np.ndarray:
    """Sum along `axis` in x's dtype (float32 for the kernels) in the 950's order."""
    moved = np.moveaxis(np.asarray(x), axis, -1)
    n = moved.shape[-1]
    blocks = max(1, -(-n // LANES))
    padded = np.zeros((*moved.shape[:-1], blocks * LANES), dtype=moved.dtype)
    padded[..., :n] = moved
    b = padded.reshape(*moved.shape[:-1], blocks, LANES)
    count = blocks
    if count > 1 and count & (count - 1):
        p = 1 << (count.bit_length() - 1)  # the largest power of two below count
        b[..., :count - p, :] += b[..., p:count, :]
        count = p
    while count > 1:
        count //= 2
        b[..., :count, :] += b[..., count:2 * count, :]
    lanes = b[..., 0, :]
    width = LANES
    while width > 1:
        width //= 2
        lanes = lanes[..., :width] + lanes[..., width:2 * width]
    total = lanes[..., 0]
    return np.expand_dims(total, axis) if keepdims else total


def exact_sum_factor(n: int) -> float:
    """A safe bound on numpy's float64 pairwise sum of n terms, in units of 2^-53 * sum|terms|.

    numpy sums a contiguous run pairwise: up to 8 terms in order, up to 128 in 8 interleaved running sums
    added at the end, longer runs split in halves. Each term passes through at most 16 + ceil(log2(n/128))
    + 3 additions, so log2(n) + 20 covers every n (Higham, Accuracy and Stability, 4.2)."""
    return math.log2(max(n, 2)) + 20


def row_sum64(x: np.ndarray, axis: int = 1) -> np.ndarray:
    """Sum along `axis` in float64, pairwise (the axis made contiguous first: along any other axis numpy adds
    in order, and exact_sum_factor would not bound it), keepdims."""
    moved = np.ascontiguousarray(np.moveaxis(x, axis, -1))
    return np.expand_dims(moved.sum(axis=-1), axis)


def running_sum(x: np.ndarray, axis: int) -> np.ndarray:
    """A running sum along axis in x's dtype, in index order (a plain loop's, or one atomic add after another),
    keepdims: the order legitimate variants take against the device's tree."""
    if x.shape[axis] == 0:
        return np.sum(x, axis=axis, keepdims=True)
    return np.take(np.cumsum(x, axis=axis, dtype=x.dtype), [-1], axis=axis)


def narrow_running_sum(dtype):
    """For defects: a sum(x, axis) in index order whose accumulator is stored in `dtype` (float16, bfloat16)
    after every float32 addition; keepdims, in x's dtype. (A kernel accumulating in 16 bits stalls once the
    running sum outgrows its terms' ulp.)"""
    def run(x: np.ndarray, axis: int) -> np.ndarray:
        moved = np.moveaxis(x, axis, 0)
        acc = np.zeros(moved.shape[1:], dtype=dtype)
        for term in moved:
            acc = (acc.astype(np.float32) + term.astype(np.float32)).astype(dtype)
        return np.expand_dims(acc.astype(x.dtype), axis)
    return run


def kahan_sum(x: np.ndarray, axis: int, reset_nan: bool = False) -> np.ndarray:
    """A Kahan-compensated sum along `axis` in index order (y = t - c; s' = s + y; c = (s' - s) - y), keepdims, in
    x's dtype; `reset_nan`: a NaN compensation set back to 0 (some kernels' guard, so an infinite sum stays infinite).
    Stack independent sums to share the pass."""
    terms = np.ascontiguousarray(np.moveaxis(np.asarray(x), axis, 0))  # (each step reads one contiguous row)
    acc = _kahan(terms, False)
    if reset_nan:  # (c is NaN only once the sum is not finite, which it then stays: redo those sums guarded, but
        # for one with a NaN term: NaN either way)
        redo = ~np.isfinite(acc)
        if redo.any():
            redo &= ~np.isnan(terms).any(axis=0)
            acc[redo] = _kahan(terms[:, redo], True)
    return np.expand_dims(acc, axis)


def _kahan(terms: np.ndarray, reset_nan: bool) -> np.ndarray:
    acc = np.zeros(terms.shape[1:], dtype=terms.dtype)
    comp, y, s = np.zeros_like(acc), np.empty_like(acc), np.empty_like(acc)
    with np.errstate(all="ignore"):
        for term in terms:
            np.subtract(term, comp, out=y)
            np.add(acc, y, out=s)
            np.subtract(s, acc, out=comp)
            np.subtract(comp, y, out=comp)
            if reset_nan:
                np.copyto(comp, 0, where=np.isnan(comp))
            acc, s = s, acc
    return acc
