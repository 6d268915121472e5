"""A user op of the Groups family (docs/adding-an-op.md, "Groups of channels over every sample"): the backward of
y = x * scale[n, g] + bias[c] over an input of N * C * HxW elements in (n, c, hw) order, C split into `group`
groups of D = C / group channels, one scale per (sample, group), one bias per channel:
  gradInput = gradOutput * scale[n, g(c)]                      (the driver's shape)
  gradScale[n, g] = sum over c in g and hw of gradOutput * self  (a per-group output: N * group values)
  gradBias[c] = sum over n and hw of gradOutput                  (a per-channel output: C values)"""

import numpy as np

from aclnn_cli.ops import AttrSpec, OpSpec, Reference, TensorSpec, defect, register
from aclnn_cli.ops.accumulation import sum_allowance
from aclnn_cli.ops.families import Groups
from aclnn_cli.ops.treesum import exact_sum_factor, row_sum64, tree_sum

U = 2.0**-53


def _split(t):
    """A block of k groups: gradOutput and self (k, N * D * HxW, 1) as (k, N, D, HxW), scale (k, N, 1) as
    (k, N, 1, 1). N, C, HxW and group arrive in t as ints."""
    s = t["scale"]
    shape = (s.shape[0], s.shape[1], int(t["C"]) // int(t["group"]), int(t["HxW"]))
    return t["gradOutput"].reshape(shape), t["self"].reshape(shape), s.reshape(*shape[:2], 1, 1)


def _sum(orders, roundings, shape):
    """A sum per row of float64 terms (each exact: a 24-bit value or a product of two), given in every order a
    kernel may add them ((rows, terms) arrays, the first also numpy's): numpy's pairwise sum within
    exact_sum_factor(terms) u sum|t|, and the allowance of a float32 kernel's sum (ops/accumulation.py)."""
    mag = row_sum64(np.abs(orders[0])).reshape(shape)
    return Reference(row_sum64(orders[0]).reshape(shape), exact_sum_factor(orders[0].shape[1]) * U * mag, mag,
                     allowance=sum_allowance(orders, roundings).reshape(shape))


def reference(t):
    """float64 on whole groups: gradInput exact; gradScale per (n, g) over its D * HxW products (k, N, 1);
    gradBias per channel over its N * HxW terms (k, D, 1), in (n, hw) or (hw, n) order."""
    dy, x, s = _split(t)
    k, n, d, hw = dy.shape
    gi = (dy * s).reshape(k, -1, 1)
    by_n = np.moveaxis(dy, 2, 1).reshape(k * d, n * hw)
    by_hw = np.moveaxis(dy, (2, 3), (1, 2)).reshape(k * d, hw * n)
    return {"gradInput": Reference(gi, np.zeros_like(gi), np.abs(gi)),
            "gradScale": _sum([(dy * x).reshape(k * n, d * hw)], 1, (k, n, 1)),
            "gradBias": _sum([by_n, by_hw], 0, (k, d, 1))}


def exact(t):
    """Fractions on any k groups."""
    dy, x, s = _split(t)
    k, n, d, _ = dy.shape
    return {"gradInput": (dy * s).reshape(k, -1, 1), "gradScale": (dy * x).sum(axis=(2, 3)).reshape(k, n, 1),
            "gradBias": dy.sum(axis=(1, 3)).reshape(k, d, 1)}


def kernel(t, samples=None):
    """float32: the products; gradScale a tree sum per (n, g); gradBias per sample and channel a tree sum over
    HxW, then the samples added one after another (an atomic add each). `samples`: how many samples gradBias
    takes (a defect's)."""
    dy, x, s = _split(t)
    k, n, d, _ = dy.shape
    partial = tree_sum(dy, axis=3)[:, :samples]                                        # (k, n, d, 1)
    gb = np.cumsum(partial, axis=1, dtype=dy.dtype)[:, -1] if partial.shape[1] else np.zeros((k, d, 1), dy.dtype)
    return {"gradInput": (dy * s).reshape(k, -1, 1), "gradScale": tree_sum((dy * x).reshape(k, n, -1), axis=2),
            "gradBias": gb.reshape(k, d, 1)}


@defect
def _one_sample(t):
    """Defect: gradBias sums the first sample only (the other samples' atomic adds lost)."""
    return kernel(t, samples=1)


SPEC = register(OpSpec(
    name="aclnnMyGroupScaleBackward",
    key="my_group_scale_backward",
    summary="Backward of y = x * scale[n, g] + bias[c]: one scale per (sample, group), one bias per channel.",
    formula="gradInput = gradOutput * scale[n, c / (C / group)]; gradScale[n, g] = sum over c in g and hw of "
            "gradOutput * self; gradBias[c] = sum over n and hw of gradOutput",
    tensors=(TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
             TensorSpec("self", "input", {"normal": [0, 1]}),
             TensorSpec("scale", "input", {"uniform": [-2.0, 2.0]}),
             TensorSpec("gradInput", "output", {"constant": 0}),
             TensorSpec("gradScale", "output", {"constant": 0}),
             TensorSpec("gradBias", "output", {"constant": 0})),
    attributes=(AttrSpec("N", "int"), AttrSpec("C", "int"), AttrSpec("HxW", "int"), AttrSpec("group", "int")),
    products={"A2": ("float32", "float16", "bfloat16")},
    dims=(1, 8),
    empty_ok=False,
    family=Groups(driver="self", per_group=("scale", "gradScale"), per_channel=("gradBias",)),
    reference=reference,
    exact=exact,
    kernel=kernel,
    variants={"my-group-bias-one-sample": _one_sample},
))
