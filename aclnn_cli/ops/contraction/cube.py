"""The cube's float32 accumulation, as the 950's batch matmul kernel drives it, and the orders and defects built on it.

hicann/ops-nn matmul/batch_mat_mul_v3/op_kernel/arch35/batch_mat_mul_v3_asw_kernel_advanced.h
(BatchMatMulAswKernel::Process): for each output tile, K is walked in `splitKRound` rounds; each round's
mm_.Iterate() accumulates its K range in L0C (float32, mmad after mmad along K), and mm_.GetTensorC(..., kIndex != 0)
writes the first round and atomically adds the others into the output. batch_mat_mul_v3_asw_block_advanced.h
(BatchMatMulAswBlock::Init) makes more than one round only for a float32 output whose singleCoreK exceeds
FP32_SPLIT_K_THRESHOLD = 8192: rounds = ceil(K / 8192), each CeilAlign(ceil(K / rounds), 8) long, the tail the rest.
fp16 and bf16 operands are multiplied exactly into the float32 accumulator; the result leaves L0C through the
fixpipe, rounded once (CAST_RINT) to the output dtype.

One mmad step covers K0 = 16 values of K (a 16 x 16 fractal of fp16/bf16). How the cube adds the 16 products
inside a step is not in the sources: modelled as the exact sum rounded once to float32 (a float64 matmul of the
16-slice; exact for 16-bit operands, and within a float32 rounding for float32 ones). The emulated kernel is not
told the output dtype (decision 80): it splits K into rounds at every dtype, which only changes the order of
float32 additions.

All functions take float32 (k, M, K) and (k, K, N) blocks and return float32 (k, M, N).
"""

from __future__ import annotations

import math

import numpy as np

K0 = 16  # values of K per mmad step
SPLIT_K = 8192  # FP32_SPLIT_K_THRESHOLD (batch_mat_mul_v3_asw_block_advanced.h)
ALIGN = 8  # ALIGN_BYTE / DATA_SIZE_FP32: a round's K aligned to 8
F32 = np.float32


def steps(left: np.ndarray, right: np.ndarray, start: int, stop: int, k0: int = K0):
    """The float32 results of the mmad steps over K in [start, stop), k0 values each (the last may be shorter)."""
    a, b = left.astype(np.float64), right.astype(np.float64)
    for s in range(start, stop, k0):
        e = min(stop, s + k0)
        yield np.matmul(a[:, :, s:e], b[:, s:e, :]).astype(F32)


def l0c(left: np.ndarray, right: np.ndarray, start: int, stop: int, k0: int = K0) -> np.ndarray:
    """One round: the steps over [start, stop) added in K order into a float32 accumulator (L0C)."""
    acc = np.zeros((left.shape[0], left.shape[1], right.shape[2]), dtype=F32)
    for part in steps(left, right, start, stop, k0):
        acc += part
    return acc


def rounds(k: int, threshold: int = SPLIT_K) -> list[tuple[int, int]]:
    """The K ranges of splitKRound rounds (BatchMatMulAswBlock::Init)."""
    if k <= threshold:
        return [(0, k)]
    count = -(-k // threshold)
    size = -(-(-(-k // count)) // ALIGN) * ALIGN
    return [(s, min(k, s + size)) for s in range(0, k, size)]


def cube(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The 950's order: rounds of L0C accumulation, the rounds added in order into the float32 output."""
    out = None
    for start, stop in rounds(left.shape[2]):
        part = l0c(left, right, start, stop)
        out = part if out is None else out + part
    if out is None:  # (K = 0: the k_equal_zero tiling clears the output)
        out = np.zeros((left.shape[0], left.shape[1], right.shape[2]), dtype=F32)
    return out


def split_k(left: np.ndarray, right: np.ndarray, parts: int = 8, seed: int = 0) -> np.ndarray:
    """Legitimate: K split into `parts` contiguous ranges (one a core), each accumulated on its own, the partials
    added in a shuffled order (stream-K and split-K tilings)."""
    k = left.shape[2]
    size = max(1, math.ceil(k / parts))
    partials = [l0c(left, right, s, min(k, s + size)) for s in range(0, k, size)]
    order = np.random.default_rng(seed).permutation(len(partials))
    out = np.zeros((left.shape[0], left.shape[1], right.shape[2]), dtype=F32)
    for i in order:
        out = out + partials[i]
    return out


def narrow_accumulator(left: np.ndarray, right: np.ndarray, dtype) -> np.ndarray:
    """Defect: every product added into an accumulator stored in `dtype` (float16, bfloat16), term by term."""
    acc = np.zeros((left.shape[0], left.shape[1], right.shape[2]), dtype=dtype)
    for i in range(left.shape[2]):
        term = left[:, :, i:i + 1] * right[:, i:i + 1, :]
        acc = (acc.astype(F32) + term).astype(dtype)
    return acc.astype(F32)


def tail_dropped(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Defect: the last K % 16 values of K never reach the cube (a K tail not padded, its step skipped)."""
    whole = left.shape[2] // K0 * K0
    return cube(left[:, :, :whole], right[:, :whole, :])


def not_transposed(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Defect: the transpose flag of the right operand misread: its K x N elements, in logical order, read as if
    stored (N, K) row-major (a contiguous mat2 taken for a transposed one, and so the other way round)."""
    k, kk, n = right.shape
    return cube(left, np.ascontiguousarray(right).reshape(k, n, kk).transpose(0, 2, 1))


def self_not_transposed(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Defect: the transpose flag of the left operand misread: its M x K elements, in logical order, read as if
    stored (K, M) row-major."""
    k, m, kk = left.shape
    return cube(np.ascontiguousarray(left).reshape(k, kk, m).transpose(0, 2, 1), right)
