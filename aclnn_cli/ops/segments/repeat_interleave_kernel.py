"""aclnnRepeatInterleaveGrad's 950 kernel, its variants and defects (the declaration: repeat_interleave_grad.py).

The 950 (hicann/ops-nn index/repeat_interleave_grad/op_kernel/v35, tiling op_host/repeat_interleave_grad_tiling_arch35
.cpp): y_grad is viewed as (M, P, N) around the axis (lenM, lenP, lenN), fp16 and bf16 widened exactly to float32
(GetPromoteType: float). Each repeat value r is one run of P: r = 0 writes 0 (ProcessZeroR), r = 1 copies the element
(PureMove), r <= rFactor reduces the run at once (SingleRedeuceSum: ReduceSum AR, the 950's row sum), a longer run is
cut into rCount = ceil(r / rFactor) chunks of rFactor rows (BinaryRedeuceSum): with P = FindNearestPower2(rCount),
chunk i + P is first added elementwise into chunk i (the tail chunk zero-padded), the P chunks are each reduced, and
their partials merged in a binary cache (UpdateCacheAux: a pairwise tree in chunk order); the result is cast (RINT)
to y_grad's dtype. One repeats value (IsIntRepeat) takes the atvoss reduce template instead, each run one
ReduceSumOp (its own chunking of a run past the UB is not modelled: the 950's row sum over the whole run). rFactor
is the tiling's: basicBlockSize / nFactor / dtSize, basicBlockSize half the UB left for data (a third of that for a
16-bit y_grad), nFactor 128 where N > 1 (RA) and the rows a core takes at once, at most 128, where N = 1 (AR). UB_BYTES and CORES are the 950's as this module assumes them (not in the sources): any other
chunk length is the variant `rig-chunks-64`'s kind of order, which a correct kernel may use and the allowance covers.

Functions get blocks: yGrad (k, R, A0), repeats (k, 1, n) (one value per run, or one for all), segments (k, 1, 1):
S; they return out as (k, S, A0).
"""

from __future__ import annotations

import numpy as np

from ..base import defect, legitimate
from ..families.segments import run_starts
from ..treesum import narrow_running_sum, tree_sum

Y, REP, OUT, AXIS = "yGrad", "repeats", "out", "axis"
UB_BYTES = 253952  # the 950's unified buffer as assumed here (248 KiB)
CORES = 64
REPEAT_BUFFER, CACHE_BUFFER, RES_BUFFER = 128, 16 * 1024, 8 * 1024  # the tiling's reserved buffers (bytes)
SPLIT = 128  # BASE_SPLIT_LENGTH


def runs(t) -> np.ndarray:
    """Each run's first position along the axis, S + 1 values (families/segments.run_starts)."""
    y, counts = t[Y], t[REP]
    s = int(np.asarray(t["segments"]).reshape(-1)[0]) if np.size(t["segments"]) else 0
    return run_starts(counts[0, 0] if counts.shape[0] else np.zeros(0, np.int64), y.shape[1], s)


def chunk_length(m: int, a0: int, itemsize: int) -> int:
    """rFactor of the tiling for a case of m blocks (module docstring): float32 data of a 16-bit y_grad takes three
    times its bytes (CAST_MULT)."""
    data = UB_BYTES - 2 * REPEAT_BUFFER - CACHE_BUFFER - RES_BUFFER
    basic = (data // 2 // (3 if itemsize < 4 else 1)) // 32 * 32
    rows = SPLIT if a0 > 1 else min(SPLIT, -(-max(m, 1) // CORES))
    factor = basic // rows // itemsize
    return factor if a0 > 1 else factor // (32 // itemsize) * (32 // itemsize)


def nearest_power2(value: int) -> int:
    """FindNearestPower2: 1 up to 2, 2 up to 4, else the largest power of two below value."""
    return 1 if value <= 2 else 2 if value <= 4 else 1 << (value - 1).bit_length() - 1


def bisection_sum(run: np.ndarray, factor: int) -> np.ndarray:
    """A run (k, L, A0) summed as BinaryRedeuceSum does (module docstring), float32; (k, A0)."""
    k, length, a0 = run.shape
    if length <= factor:
        return tree_sum(run, axis=1, keepdims=False)
    count = -(-length // factor)
    half = nearest_power2(count)
    chunks = np.zeros((k, count, factor, a0), dtype=run.dtype)
    chunks.reshape(k, count * factor, a0)[:, :length] = run
    chunks[:, :count - half] += chunks[:, half:count]
    partials = [tree_sum(chunks[:, i], axis=1, keepdims=False) for i in range(half)]
    while len(partials) > 1:
        partials = [partials[i] + partials[i + 1] for i in range(0, len(partials), 2)]
    return partials[0]


def segment_sums(t, run_sum, starts: np.ndarray | None = None) -> np.ndarray:
    """out (k, S, A0) in yGrad's dtype: each run summed by run_sum(run (k, L, A0)) -> (k, A0); an empty run +0, a
    run of one the element itself (PureMove: a -0 stays -0)."""
    y = t[Y]
    starts = runs(t) if starts is None else starts
    out = np.zeros((y.shape[0], starts.size - 1, y.shape[2]), dtype=y.dtype)
    with np.errstate(all="ignore"):
        for j, (a, b) in enumerate(zip(starts[:-1].tolist(), starts[1:].tolist())):
            if b - a == 1:
                out[:, j] = y[:, a]
            elif b > a:
                out[:, j] = run_sum(y[:, a:b])
    return out


def kernel(t) -> np.ndarray:
    """The 950 kernel on blocks (module docstring); one repeats value takes the reduce template (IsIntRepeat: RIGDag's
    ReduceSumOp over each run, the 950's row sum)."""
    y = t[Y]
    if t[REP].shape[2] == 1:
        return segment_sums(t, lambda run: tree_sum(run, axis=1, keepdims=False))
    factor = chunk_length(int(np.asarray(t["blocks"]).reshape(-1)[0]), y.shape[2], int(t["itemsize"]))
    return segment_sums(t, lambda run: bisection_sum(run, factor))


@legitimate
def _sequential(t):
    """Legitimate: each run added one element after another in axis order (a scalar loop)."""
    return segment_sums(t, lambda run: np.cumsum(run, axis=1, dtype=run.dtype)[:, -1])


@legitimate
def _pairwise(t):
    """Legitimate: each run reduced at once in the 950's row-sum order (the reduce template's, which the op takes
    where repeats is one value), whatever repeats holds."""
    return segment_sums(t, lambda run: tree_sum(run, axis=1, keepdims=False))


@legitimate
def _chunks_64(t):
    """Legitimate: the bisection with chunks of 64 rows (another UB size or core count's rFactor)."""
    return segment_sums(t, lambda run: bisection_sum(run, 64))


@legitimate
def _reversed(t):
    """Legitimate: each run added last element first (a core walking the axis backwards)."""
    return segment_sums(t, lambda run: np.cumsum(run[:, ::-1], axis=1, dtype=run.dtype)[:, -1])


@defect
def _off_by_one(t):
    """Defect: every run boundary one position late (the first element of each run summed into the run before)."""
    starts = runs(t).copy()
    starts[1:-1] = np.minimum(starts[1:-1] + 1, starts[-1])
    return segment_sums(t, lambda run: tree_sum(run, axis=1, keepdims=False), np.maximum.accumulate(starts))


@defect
def _fp16_accumulation(t):
    """Defect: each run's running sum kept in float16 (the output dtype of a float16 case, not float32)."""
    return segment_sums(t, lambda run: narrow_running_sum(np.float16)(run, 1)[:, 0])


@defect
def _bf16_accumulation(t):
    """Defect: each run's running sum kept in bfloat16."""
    import ml_dtypes

    return segment_sums(t, lambda run: narrow_running_sum(ml_dtypes.bfloat16)(run, 1)[:, 0])


@defect
def _last_run_dropped(t):
    """Defect: the last run's output left zero (a loop bound one short: the repeat tail block never processed)."""
    out = kernel(t)
    out[:, -1:] = 0
    return out


@defect
def _first_only(t):
    """Defect: each run's first element copied, not summed (every run handled as a run of one)."""
    starts = runs(t)
    out = np.zeros((t[Y].shape[0], starts.size - 1, t[Y].shape[2]), dtype=t[Y].dtype)
    full = starts[1:] > starts[:-1]
    out[:, full] = t[Y][:, starts[:-1][full]]
    return out


@defect
def _wrong_axis(t):
    """Defect: the runs read along the flattened (axis, inner) positions, as if the axis were the last one (A0 taken
    as 1): right only where nothing follows the axis."""
    y = t[Y]
    k, r, a0 = y.shape
    flat = {**t, Y: y.reshape(k, r * a0, 1)}
    starts = runs(t)
    out = segment_sums(flat, lambda run: tree_sum(run, axis=1, keepdims=False), starts)
    return np.broadcast_to(out, (k, starts.size - 1, a0)).copy()


VARIANTS = {
    "rig-sequential": _sequential,
    "rig-pairwise": _pairwise,
    "rig-chunks-64": _chunks_64,
    "rig-reversed": _reversed,
    "rig-off-by-one": _off_by_one,
    "rig-fp16-accumulation": _fp16_accumulation,
    "rig-bf16-accumulation": _bf16_accumulation,
    "rig-last-run-dropped": _last_run_dropped,
    "rig-first-only": _first_only,
    "rig-wrong-axis": _wrong_axis,
}
