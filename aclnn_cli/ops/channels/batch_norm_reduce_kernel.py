"""aclnnBatchNormReduceBackward's device computation, its variants and its float32 edges (the declaration:
batch_norm_reduce_backward.py).

The op_api (norm/sync_batch_norm_backward_reduce/op_api/aclnn_batch_norm_backward_reduce.cpp, e5c3fa93) casts
gradOut, input, mean, invstd and weight to float32 (InputParamContiguousAndCast), then:
  Mul(gradOut, input)                                  -> dyx, float32 (one rounding per element)
  ReduceSumOp(dyx), ReduceSumOp(gradOut) over every axis but 1 -> sumDyX, sumDy (float32 sums per channel)
  SyncBatchNormBackwardReduce(sumDy, sumDyX, mean, invstd)  (op_kernel/arch35/sync_batch_norm_backward_reduce_dag.h,
      U = float32 here, every Cast a copy):  sumDyXmu = fl(sumDyX - fl(mean * sumDy));  y = fl(sumDyXmu * invstd)
  sumDy -> sumDy and gradBias, sumDyXmu -> sumDyXmu, y -> gradWeight, each Cast to its own dtype (RINT) and copied.
weight is cast and never read. The ReduceSumOp's float32 order is the 950's tree sum (ops/treesum.py), as for
BatchNormBackward's inference sums.
"""

from __future__ import annotations

import numpy as np

from ..base import defect, legitimate
from ..treesum import running_sum, tree_sum
from .sums import accumulation_variants
from .batch_norm_kernel import _lost_partial

DY, X, MEAN, INV, W = "gradOut", "input", "mean", "invstd", "weight"
SDY, SDXM, GW, GB = "sumDy", "sumDyXmu", "gradWeight", "gradBias"
IG, WG, BG = "inputG", "weightG", "biasG"
SAMPLES = "sampleCount"  # a case value: N, the samples a channel's M elements come from (the (s, n) order needs it)
# |v| at and past which each output dtype rounds to infinity (its largest finite value plus half an ulp)
OVERFLOW = (65520.0, 2.0**128 * (1 - 2.0**-9), 2.0**128 * (1 - 2.0**-25))


def kernel(t, row_sum=tree_sum, dyx=None, tail=None, steps=None) -> dict:
    """The op_api's float32 pipeline (module docstring), with replaceable pieces for the variants: the channel sums,
    the products summed for sumDyX, and the DAG's tail (sumDy, sumDyX, mean, invstd -> sumDyXmu, y). steps: a list
    the float32 intermediates are appended to (the edge check)."""
    dy, x, mean, inv = t[DY], t[X], t[MEAN], t[INV]
    with np.errstate(all="ignore"):
        s_dy = row_sum(dy, axis=1)
        s_dyx = row_sum(dy * x if dyx is None else dyx(t), axis=1)
        xmu, y = (s_dyx - mean * s_dy, None) if tail is None else tail(s_dy, s_dyx, mean, inv)
        y = xmu * inv if y is None else y
    if steps is not None:
        steps += [dy * x, s_dy, s_dyx, mean * s_dy, xmu, y]
    return {SDY: s_dy, SDXM: xmu, GW: y, GB: s_dy}


def crosses(exact: np.ndarray, device: np.ndarray) -> np.ndarray:
    """Where |exact| and |device| lie on two sides of an output dtype's overflow threshold (one rounds to an
    infinity, the other not): a float32 result within its error of the threshold."""
    with np.errstate(invalid="ignore"):
        lo, hi = np.minimum(np.abs(exact), np.abs(device)), np.maximum(np.abs(exact), np.abs(device))
        out = np.zeros(np.shape(exact), dtype=bool)
        for limit in OVERFLOW:
            out |= (lo < limit) & (hi >= limit)
    return out


def values64(t) -> dict:
    """The doc's sums in float64 (no bound: what `edge` compares the float32 pipeline with): sum(dy), sum(dy (x -
    mean)) and that times invstd."""
    dy, x, mean, inv = (np.asarray(t[n], np.float64) for n in (DY, X, MEAN, INV))
    with np.errstate(all="ignore"):
        s_dy, xmu = dy.sum(axis=1, keepdims=True), (dy * (x - mean)).sum(axis=1, keepdims=True)
        return {SDY: s_dy, SDXM: xmu, GW: xmu * inv, GB: s_dy}


def edge(t) -> dict:
    """Where a correct float32 pipeline may part from the golden while a channel's inputs are finite: a float32
    intermediate overflowed (dy * x, a sum, mean * sumDy: the exact result may be finite there, or the difference of
    two infinities NaN), or the result sits by an output dtype's overflow threshold on the other side than the exact
    value. The device value is the float32 pipeline's."""
    f32 = {k: v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v for k, v in t.items()}
    steps: list = []
    device = {k: np.asarray(v, np.float64) for k, v in kernel(f32, steps=steps).items()}
    exact = values64(t)
    k = t[X].shape[0]
    with np.errstate(invalid="ignore"):
        over = np.logical_or.reduce([~np.isfinite(v).reshape(k, -1).all(axis=1) for v in steps])
        finite = np.logical_and.reduce([np.isfinite(t[n]).reshape(k, -1).all(axis=1) for n in (DY, X, MEAN, INV)])
    return {name: ((finite & (over | crosses(exact[name], v).reshape(-1))).reshape(v.shape), v)
            for name, v in device.items()}


def _by_samples(t):
    """A channel sum over the samples first, then the spatial positions ((s, n): N tiled across cores), each a
    float32 running sum."""
    n = int(t.get(SAMPLES, 1))

    def run(v, axis):
        k, m = v.shape[0], v.shape[1]
        if n <= 1 or m % n:
            return running_sum(v[:, ::-1], axis)
        per_s = np.cumsum(v.reshape(k, n, m // n), axis=1, dtype=v.dtype)[:, -1]
        return running_sum(per_s, 1).reshape(k, 1, 1)
    return run


@defect
def _mean_ignored(t):
    """Defect: sumDyXmu = sumDyX (the mean's term never subtracted): sum(dy x) for sum(dy (x - mean))."""
    return kernel(t, tail=lambda s, sx, mean, inv: (sx, None))


@defect
def _mean_term_sign(t):
    """Defect: sumDyXmu = sumDyX + mean * sumDy (the DAG's Sub written Add)."""
    return kernel(t, tail=lambda s, sx, mean, inv: (sx + mean * s, None))


@defect
def _without_invstd(t):
    """Defect: gradWeight = sumDyXmu (the invstd factor of x̂ forgotten)."""
    return kernel(t, tail=lambda s, sx, mean, inv: (sx - mean * s, sx - mean * s))


@defect
def _with_weight(t):
    """Defect: gradWeight multiplied by weight (the API passes weight, which the gradient of gamma must not read)."""
    w = t.get(W, np.float32(1) if t[X].dtype != object else 1)
    return kernel(t, tail=lambda s, sx, mean, inv: (sx - mean * s, (sx - mean * s) * inv * w))


@defect
def _stats_swapped(t):
    """Defect: mean and invstd read in each other's place."""
    return kernel({**t, MEAN: t[INV], INV: t[MEAN]})


@defect
def _first_sample(t):
    """Defect: the sums reduced over the spatial axes of sample 0 only (axis 0 left out of ReduceSumOp's axes)."""
    n = int(t.get(SAMPLES, 1))
    return kernel(t, row_sum=lambda v, axis: tree_sum(v[:, :v.shape[1] // max(n, 1)], axis=axis))


@defect
def _lost_core_partial(t):
    """Defect: one core's partial sums lost: each channel's sums miss their last 1/48 of the terms."""
    return kernel(t, row_sum=_lost_partial)


_fp16_accumulation, _bf16_accumulation, _sequential = accumulation_variants(kernel, "both channel sums")


@legitimate
def _sample_major(t):
    """Legitimate: the channel sums over the samples first, then the spatial positions."""
    return kernel(t, row_sum=_by_samples(t))


@legitimate
def _centred(t):
    """Legitimate: sumDyXmu summed from centred terms fl(dy fl(x - mean)), the doc's formula (ATen's sum(dy * (x -
    mean))): no cancellation between two sums; gradWeight = fl(sumDyXmu * invstd)."""
    mean = t[MEAN]
    return kernel(t, dyx=lambda u: u[DY] * (u[X] - mean), tail=lambda s, sx, m, inv: (sx, None))


VARIANTS = {
    "syncbn-reduce-mean-ignored": _mean_ignored,
    "syncbn-reduce-mean-term-sign": _mean_term_sign,
    "syncbn-reduce-without-invstd": _without_invstd,
    "syncbn-reduce-with-weight": _with_weight,
    "syncbn-reduce-stats-swapped": _stats_swapped,
    "syncbn-reduce-first-sample": _first_sample,
    "syncbn-reduce-lost-core-partial": _lost_core_partial,
    "syncbn-reduce-fp16-accumulation": _fp16_accumulation,
    "syncbn-reduce-bf16-accumulation": _bf16_accumulation,
    "syncbn-reduce-sequential": _sequential,
    "syncbn-reduce-sample-major": _sample_major,
    "syncbn-reduce-centred": _centred,
}
