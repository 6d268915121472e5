"""A user op of the Channels family (docs/adding-an-op.md, "A per-channel op"): the backward of a per-channel
affine map y = x * scale[c] + bias[c] over an (N, C, ...) input. gradInput = dy * scale[c];
gradScale[c] = sum of dy * x over the channel; gradBias[c] = sum of dy over the channel."""

import numpy as np

from aclnn_cli.ops import OpSpec, Reference, TensorSpec, defect, register
from aclnn_cli.ops.accumulation import sum_allowance
from aclnn_cli.ops.families import Channels
from aclnn_cli.ops.treesum import exact_sum_factor, row_sum64, tree_sum

U = 2.0**-53


def _sum(terms, roundings):
    """A channel sum's Reference: terms (k, M, 1) in float64 (each exact here: a product of two 24-bit values);
    numpy's pairwise sum within exact_sum_factor(M) u sum|t|; the allowance of a float32 kernel's sum derived
    from the terms (ops/accumulation.py)."""
    mag = row_sum64(np.abs(terms))
    k, m = terms.shape[0], terms.shape[1]
    return Reference(row_sum64(terms), exact_sum_factor(m) * U * mag, mag,
                     allowance=sum_allowance([terms.reshape(k, m)], roundings).reshape(k, 1, 1))


def reference(t):
    """float64 on whole channels: gradInput (k, M, 1), gradScale and gradBias (k, 1, 1)."""
    dy, x, s = t["gradOutput"], t["self"], t["scale"]
    return {"gradInput": Reference(dy * s, np.zeros_like(dy), np.abs(dy * s)),
            "gradScale": _sum(dy * x, 1), "gradBias": _sum(dy, 0)}


def exact(t):
    """Fractions on any k channels."""
    dy, x, s = t["gradOutput"], t["self"], t["scale"]
    return {"gradInput": dy * s, "gradScale": (dy * x).sum(axis=1, keepdims=True),
            "gradBias": dy.sum(axis=1, keepdims=True)}


def kernel(t):
    """float32: the products, then each channel's tree sum."""
    dy, x, s = t["gradOutput"], t["self"], t["scale"]
    return {"gradInput": dy * s, "gradScale": tree_sum(dy * x, axis=1), "gradBias": tree_sum(dy, axis=1)}


@defect
def _first_sample_only(t):
    """Defect: the channel sums cover the first half of the channel's elements only (a lost partial)."""
    out = kernel(t)
    half = max(1, t["gradOutput"].shape[1] // 2)
    out["gradBias"] = tree_sum(t["gradOutput"][:, :half], axis=1)
    return out


SPEC = register(OpSpec(
    name="aclnnMyChannelAffineBackward",
    key="my_channel_affine_backward",
    summary="Backward of y = x * scale[c] + bias[c] per channel (axis 1).",
    formula="gradInput = gradOutput * scale[c]; gradScale = sum(gradOutput * self); gradBias = sum(gradOutput)",
    tensors=(TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
             TensorSpec("self", "input", {"normal": [0, 1]}),
             TensorSpec("scale", "input", {"uniform": [0.5, 2.0]}),
             TensorSpec("gradInput", "output", {"constant": 0}),
             TensorSpec("gradScale", "output", {"constant": 0}),
             TensorSpec("gradBias", "output", {"constant": 0})),
    products={"A2": ("float32", "float16", "bfloat16")},
    dims=(1, 8),
    empty_ok=False,
    family=Channels(driver="self", per_row=("scale", "gradScale", "gradBias")),
    reference=reference,
    exact=exact,
    kernel=kernel,
    variants={"affine-first-half-only": _first_sample_only},
))
