"""aclnnPreluBackward's 950 kernel and its variants (the declaration: prelu_backward.py).

PReluGradUpdate (activation/p_relu_grad_update/op_kernel/arch35/prelu_grad_update_dag.h, e5c3fa93), in the inputs'
dtype T: line 62-64 dx = Select(self > 0, dy, Mul(weight, dy)); line 104-106 update = Select(self > 0, 0,
Mul(self, dy)) (Compare GT against 0: a NaN self and -0 take the weight branch). PReluGradReduce
(p_relu_grad_reduce/op_kernel/arch35/prelu_grad_reduce_dag.h:32-34): Cast update to float32, ReduceSumOp, Cast to T.
Here the functions receive float32 (emulate widens every input exactly) and the inputs' significand bits (BITS):
a product of two T values is exact in float32, so rounding it to T once is the device's Mul in T.
"""

from __future__ import annotations

import numpy as np

from ..base import defect, legitimate
from ..treesum import running_sum, tree_sum
from .sums import accumulation_variants

DY, X, W, GI, GW = "gradOutput", "self", "weight", "gradInput", "gradWeight"
BITS = "inputBits"  # the family's precision value: 24 (float32), 11 (float16), 8 (bfloat16)
SAMPLES = "sampleCount"  # a case value: N, for the (s, n) order of a channel


def positive(x):
    """self > 0 (Compare GT): NaN and -0 are not."""
    with np.errstate(invalid="ignore"):
        return x > 0


def negative(x):
    """The weight branch: self not > 0."""
    return ~positive(x)


def _in_dtype(values, bits: int):
    """values (a float32 product of two T values, exact) rounded once to T, back in values' dtype."""
    if bits == 11:
        return values.astype(np.float16).astype(values.dtype)
    if bits == 8:
        import ml_dtypes

        return values.astype(ml_dtypes.bfloat16).astype(values.dtype)
    return values


def input_bits(t) -> int:
    """The inputs' significand bits (the family's `precision` value; 24 where a caller gives none)."""
    b = t.get(BITS)
    return int(np.asarray(b).reshape(-1)[0]) if b is not None and np.size(b) else 24


def kernel(t, row_sum=tree_sum, branch=negative, mask=negative, weight=None, update=None, products_in=None) -> dict:
    """The 950 kernel (module docstring) with replaceable pieces for the variants: the gradWeight sum, the masks
    of dx and of update, the weight a block reads, how update is formed, the dtype products are rounded to."""
    dy, x = t[DY], t[X]
    w = t[W] if weight is None else weight(t[W])
    bits = input_bits(t) if products_in is None else products_in
    with np.errstate(all="ignore"):
        gi = np.where(branch(x), _in_dtype(w * dy, bits), dy)
        terms = _in_dtype(x * dy, bits)
        upd = np.where(mask(x), terms, dy.dtype.type(0)) if update is None else update(x, terms)
        return {GI: gi, GW: row_sum(upd, axis=1)}


@defect
def _zero_as_positive(t):
    """Defect: dx's mask self >= 0: self = +-0 gives gradOutput instead of weight * gradOutput."""
    def below_zero(x):
        with np.errstate(invalid="ignore"):
            return ~(x >= 0)
    return kernel(t, branch=below_zero)


@defect
def _swapped_branches(t):
    """Defect: dx's branches swapped (weight * dy where self > 0)."""
    return kernel(t, branch=positive)


@defect
def _weight_of_first_channel(t):
    """Defect: weight not read per channel: every channel of a launch takes the first one's weight."""
    return kernel(t, weight=lambda w: np.broadcast_to(w[:1], w.shape))


@defect
def _unmasked(t):
    """Defect: gradWeight summed over every element (the self <= 0 mask not applied to update)."""
    return kernel(t, mask=lambda x: np.ones(x.shape, dtype=bool))


@defect
def _positive_side(t):
    """Defect: gradWeight summed over self > 0 instead of self <= 0."""
    return kernel(t, mask=positive)


@defect
def _first_sample(t):
    """Defect: gradWeight reduced over the wrong axes: the spatial ones only, axis 0 left out (one sample's sum)."""
    n = int(t.get(SAMPLES, 1))
    return kernel(t, row_sum=lambda v, axis: tree_sum(v[:, :v.shape[1] // max(n, 1)], axis=axis))


@defect
def _mask_multiplied(t):
    """Defect: update = product * (self <= 0) instead of a select: a NaN or inf gradOutput at self > 0 makes NaN."""
    return kernel(t, update=lambda x, terms: terms * negative(x).astype(terms.dtype))


_fp16_accumulation, _bf16_accumulation, _sequential = accumulation_variants(kernel, "gradWeight")


@legitimate
def _sample_major(t):
    """Legitimate: gradWeight over the samples first, then the spatial positions ((s, n): N tiled across cores)."""
    n = int(t.get(SAMPLES, 1))

    def by_samples(v, axis):
        k, m = v.shape[0], v.shape[1]
        if n <= 1 or m % n:
            return running_sum(v[:, ::-1], axis)
        return v.reshape(k, n, m // n).sum(axis=1, dtype=v.dtype).sum(axis=1, dtype=v.dtype).reshape(k, 1, 1)
    return kernel(t, row_sum=by_samples)


@legitimate
def _float32_products(t):
    """Legitimate: the products kept in float32 (a kernel that widens first): nearer the exact terms."""
    return kernel(t, products_in=24)


VARIANTS = {
    "prelu-zero-as-positive": _zero_as_positive,
    "prelu-swapped-branches": _swapped_branches,
    "prelu-weight-of-first-channel": _weight_of_first_channel,
    "prelu-weight-grad-unmasked": _unmasked,
    "prelu-weight-grad-positive-side": _positive_side,
    "prelu-weight-grad-first-sample": _first_sample,
    "prelu-mask-multiplied": _mask_multiplied,
    "prelu-fp16-accumulation": _fp16_accumulation,
    "prelu-bf16-accumulation": _bf16_accumulation,
    "prelu-sequential": _sequential,
    "prelu-sample-major": _sample_major,
    "prelu-float32-products": _float32_products,
}
