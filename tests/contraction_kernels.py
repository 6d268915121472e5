"""What the contraction ops' tests share: the operands as the manifest's numbers lay them out, an oracle of Fractions,
and correct float32 kernels in several orders of addition (each independent of the op, the family and the cube).

The oracle and the kernels take the logical operands of any rank and multiply them as numpy.matmul does (torch's
rules: batch dims broadcast, a 1-d operand padded), so a broadcast batch or K misplaced by the family shows up.
"""

from __future__ import annotations


import numpy as np

import harness
from aclnn_cli.tensor import dtypes as D
from exactq import Fraction
from oracle import rounded_bits

F = np.float32


def logical(case, m, name) -> np.ndarray:
    """Tensor `name` of a generated case, in logical order, as float64 (read through the manifest's numbers)."""
    t = harness.tensors(m)[name]
    return harness.view(harness.storage(case, t), t).astype(np.float64)


def oracle(a: np.ndarray, b: np.ndarray) -> list:
    """The exact products summed, element by element, in the output's logical order (numpy.matmul of Fractions)."""
    fa = np.vectorize(Fraction, otypes=[object])(a)
    fb = np.vectorize(Fraction, otypes=[object])(b)
    return list(np.asarray(np.matmul(fa, fb), dtype=object).reshape(-1))


def goldens_against_the_oracle(generated) -> None:
    """Every golden of a generated suite is the oracle's exact sum of products rounded once to out's dtype, bit for
    bit: a few thousand elements per dtype, some of them through gen's exact path."""
    compared, exact = {}, {}
    for case in sorted(p.parent for p in generated.glob("*/case.json")):
        m = harness.load(case)
        t = harness.tensors(m)["out"]
        dtype = D.lookup(t["dtype"])
        got = harness.view(harness.storage(case, t, "golden"), t).reshape(-1).view(dtype.uint_dtype)
        want = rounded_bits(oracle(logical(case, m, "self"), logical(case, m, "mat2")), dtype).astype(dtype.uint_dtype)
        assert np.array_equal(got, want), case.name
        compared[dtype.name] = compared.get(dtype.name, 0) + got.size
        exact[dtype.name] = exact.get(dtype.name, 0) + m["golden"].get("exact_fallback_elements", 0)
    print("compared", compared, "exact path", exact)
    assert min(compared.values()) > 2000 and sum(exact.values()) > 0


def numpy_float32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """An independent kernel: numpy's float32 matmul (BLAS sgemm, its own blocking and order; batch dims broadcast)."""
    with np.errstate(all="ignore"):
        return np.matmul(a.astype(F), b.astype(F))


def _terms(a, b):
    """(k, M, N, K) float32 products: exact for 16-bit operands, rounded once for float32 ones."""
    return np.einsum("bmk,bkn->bmnk", a.astype(F), b.astype(F), dtype=F)


def in_order(t: np.ndarray) -> np.ndarray:
    """The float32 sum over the last axis from 0, one term after the other, as a loop `acc += t[..., i]` adds them
    (numpy's accumulate is strictly sequential)."""
    return np.add.accumulate(np.concatenate([np.zeros((*t.shape[:-1], 1), t.dtype), t], axis=-1), axis=-1)[..., -1]


def sequential(a, b):
    return in_order(_terms(a, b))


def pairwise(a, b):
    t = _terms(a, b)
    while t.shape[-1] > 1:
        if t.shape[-1] % 2:
            t = np.concatenate([t, np.zeros((*t.shape[:-1], 1), F)], axis=-1)
        t = t[..., 0::2] + t[..., 1::2]
    return t[..., 0]


def blocks_of_16(a, b):
    """Each block of 16 products summed in float32 in order, the blocks added in order."""
    t = _terms(a, b)
    tail = -t.shape[-1] % 16  # (the last block's missing terms as +0: a part + 0 is the part, and acc's + a zero
    t = np.concatenate([t, np.zeros((*t.shape[:-1], tail), F)], axis=-1)  # part is acc whatever its sign)
    return in_order(in_order(t.reshape(*t.shape[:-1], -1, 16)))


def split_k_shuffled(a, b, parts=48, seed=3):
    """48 per-core partials of contiguous K, each sequential, added in a shuffled order."""
    k = a.shape[2]
    size = -(-k // parts)
    partials = [sequential(a[:, :, s:s + size], b[:, s:s + size, :]) for s in range(0, k, size)]
    acc = np.zeros_like(partials[0])
    for i in np.random.default_rng(seed).permutation(len(partials)):
        acc += partials[i]
    return acc


ORDERS = {"sequential": sequential, "pairwise": pairwise, "blocks-of-16": blocks_of_16,
          "split-k-shuffled": split_k_shuffled, "sgemm": numpy_float32}

