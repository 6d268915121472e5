"""aclnnBatchNormElemtBackward's device computation, its variants and its float32 edges (the declaration:
batch_norm_elemt_backward.py).

The op_api (norm/sync_batch_norm_backward_elemt/op_api/aclnn_batch_norm_elemt_backward.cpp, e5c3fa93):
- GetPromoteType: P = float16 where gradOut, input, mean, invstd, weight, sumDy and sumDyXmu are all float16 (a null
  weight is FillScalar's float32 ones), else float32; every one of them is cast to P.
- MeanByCounter: count = ReduceSumOp(Cast(counter, float32)) over all its axes (a float32 sum); sumDy and sumDyXmu
  are cast to float32 (GetDivPromoteType(P, float32) is float32) and divided: meanDy = fl(sumDy / count), meanDyXmu =
  fl(sumDyXmu / count); each cast back to P (rounded to float16 when P is).
- SyncBatchNormBackwardElemt (op_kernel/arch35/sync_batch_norm_backward_elemt_dag.h), every input widened to float32:
  sub1 = dy - meanDy; sub2 = x - mean; mul1 = invstd * invstd; mul2 = meanDyXmu * mul1; mul3 = sub2 * mul2;
  sub3 = sub1 - mul3; mulw = invstd * weight; gradInput = sub3 * mulw, cast to P (CAST_RINT), then to gradInput's
  dtype.
The count's ReduceSumOp order is the 950's tree sum (ops/treesum.py).
"""

from __future__ import annotations

import numpy as np

from ..base import defect, legitimate
from ..treesum import tree_sum
from .batch_norm_reduce_kernel import crosses

DY, X, MEAN, INV, W, SDY, SDXM, CNT, GI = ("gradOut", "input", "mean", "invstd", "weight", "sumDy", "sumDyXmu",
                                          "counter", "gradInput")
PROMOTED = (DY, X, MEAN, INV, W, SDY, SDXM)  # all float16: the op_api computes in float16 (GetPromoteType)


def half(t) -> bool:
    """Whether the op_api's P is float16: every tensor of PROMOTED float16 (the family's f"{name}Bits", 0 for a null
    weight); False where a caller gives no bits."""
    bits = [t.get(f"{n}Bits") for n in PROMOTED]
    return all(b is not None and int(np.asarray(b).reshape(-1)[0]) == 11 for b in bits)


def to_half(v):
    """v rounded to float16 (to nearest even), back in v's dtype."""
    with np.errstate(over="ignore"):
        return v.astype(np.float16).astype(v.dtype)


def weight(t):
    w = t.get(W)
    return w if w is not None else t[DY].dtype.type(1)


def count(t, row_sum=tree_sum):
    """The float32 count per block, (k, 1, 1): counter cast to float32 and summed over all its elements."""
    c = np.asarray(t[CNT])
    return row_sum(c.astype(np.float32).astype(t[DY].dtype), axis=2)


def kernel(t, cnt=None, means=None, dag=None, half_means=True, steps=None) -> dict:
    """The op_api's computation (module docstring) in the inputs' float type, with replaceable pieces for the
    variants: the count, the means (sumDy, sumDyXmu, count -> meanDy, meanDyXmu), their rounding to float16 where P
    is, and the DAG. steps: a list the float32 intermediates are appended to (the edge check)."""
    dy, x, mean, inv, sdy, sdxm = (t[n] for n in (DY, X, MEAN, INV, SDY, SDXM))
    p16 = half(t)
    with np.errstate(all="ignore"):
        c = count(t) if cnt is None else cnt(t)
        mdy, mdxm = (sdy / c, sdxm / c) if means is None else means(sdy, sdxm, c)
        if p16 and half_means:
            mdy, mdxm = to_half(mdy), to_half(mdxm)
        parts = (dag or _dag)(dy, x, mean, inv, weight(t), mdy, mdxm)
        gi = parts[-1]
        if p16:
            gi = to_half(gi)
    if steps is not None:
        steps += [np.broadcast_to(v, dy.shape) for v in (mdy, mdxm, *parts)]
    return {GI: gi}


def _dag(dy, x, mean, inv, w, mdy, mdxm, xmu_sign=1, square=True, final_inv=True, use_weight=True):
    """sync_batch_norm_backward_elemt_dag.h's steps (the keywords make the defects); the last is gradInput."""
    sub1 = dy - mdy
    sub2 = x - mean
    mul1 = inv * inv if square else inv
    mul2 = mdxm * mul1
    mul3 = sub2 * mul2
    sub3 = sub1 - mul3 if xmu_sign > 0 else sub1 + mul3
    mulw = (inv if final_inv else 1) * (w if use_weight else 1)
    return sub1, sub2, mul1, mul2, mul3, sub3, mulw, sub3 * mulw


def edge(t, exact) -> dict:
    """Where a correct float32 computation may part from the golden while an element's inputs are finite: a float32
    intermediate overflowed or is NaN (invstd squared, a product; a count of 0), or the result sits by an output
    dtype's overflow threshold on the other side than `exact` (the golden's float64 value). The device value is the
    float32 computation's."""
    f32 = {k: v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v for k, v in t.items()}
    steps: list = []
    device = np.asarray(kernel(f32, steps=steps)[GI], np.float64)
    with np.errstate(invalid="ignore"):
        over = np.logical_or.reduce([~np.isfinite(v) for v in steps])
        finite = np.logical_and.reduce([np.broadcast_to(np.isfinite(t[n]), device.shape)
                                        for n in (DY, X, MEAN, INV, SDY, SDXM, W) if t.get(n) is not None])
        finite &= np.broadcast_to(np.isfinite(np.asarray(t[CNT], np.float64)).all(axis=2, keepdims=True), device.shape)
    return {GI: (finite & (over | crosses(exact, device)), device)}


@defect
def _mean_dy_ignored(t):
    """Defect: meanDy not subtracted (sub1 = dy)."""
    return kernel(t, dag=lambda dy, *a: _dag(dy, *a[:4], 0 * a[4], a[5]))


@defect
def _invstd_once(t):
    """Defect: the centred term scaled by invstd instead of invstd squared (mul1 = invstd)."""
    return kernel(t, dag=lambda *a: _dag(*a, square=False))


@defect
def _xmu_term_sign(t):
    """Defect: the centred term added instead of subtracted (sub3 = sub1 + mul3)."""
    return kernel(t, dag=lambda *a: _dag(*a, xmu_sign=-1))


@defect
def _no_final_invstd(t):
    """Defect: gradInput not multiplied by invstd at the end (mulw = weight)."""
    return kernel(t, dag=lambda *a: _dag(*a, final_inv=False))


@defect
def _weight_ignored(t):
    """Defect: weight not applied (mulw = invstd): gamma's factor lost."""
    return kernel(t, dag=lambda *a: _dag(*a, use_weight=False))


@defect
def _sums_swapped(t):
    """Defect: sumDy and sumDyXmu read in each other's place."""
    return kernel({**t, SDY: t[SDXM], SDXM: t[SDY]})


@defect
def _counter_first(t):
    """Defect: the count taken from counter's first element, not the sum of all of them (one device's count)."""
    return kernel(t, cnt=lambda u: np.asarray(u[CNT])[:, :, :1].astype(np.float32).astype(u[DY].dtype))


@defect
def _counter_numel(t):
    """Defect: the means divided by counter's element count (the number of devices), not by its sum."""
    return kernel(t, cnt=lambda u: u[DY].dtype.type(max(np.shape(u[CNT])[2], 1)))


@defect
def _stats_of_first_channel(t):
    """Defect: mean and invstd not read per channel: every channel of a launch takes the first one's."""
    first = {n: np.broadcast_to(t[n][:1], t[n].shape) for n in (MEAN, INV)}
    return kernel({**t, **first})


@legitimate
def _float32_means(t):
    """Legitimate: meanDy and meanDyXmu kept in float32 where P is float16 (an op_api that does not cast them back):
    nearer the exact means."""
    return kernel(t, half_means=False)


@legitimate
def _reciprocal_count(t):
    """Legitimate: the means as products with fl(1 / count) (two roundings each, as ATen's CUDA kernel's
    `mean_dy * invstd`-style factors): within the shared allowance of the means."""
    return kernel(t, means=lambda s, sx, c: (s * (c.dtype.type(1) / c), sx * (c.dtype.type(1) / c)))


VARIANTS = {
    "syncbn-elemt-mean-dy-ignored": _mean_dy_ignored,
    "syncbn-elemt-invstd-once": _invstd_once,
    "syncbn-elemt-xmu-term-sign": _xmu_term_sign,
    "syncbn-elemt-no-final-invstd": _no_final_invstd,
    "syncbn-elemt-weight-ignored": _weight_ignored,
    "syncbn-elemt-sums-swapped": _sums_swapped,
    "syncbn-elemt-counter-first": _counter_first,
    "syncbn-elemt-counter-numel": _counter_numel,
    "syncbn-elemt-stats-of-first-channel": _stats_of_first_channel,
    "syncbn-elemt-float32-means": _float32_means,
    "syncbn-elemt-reciprocal-count": _reciprocal_count,
}
