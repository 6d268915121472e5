"""A user op of the Rows family (docs/adding-an-op.md, "A reduction"): the backward of centering a row,
y = x - mean(x) along `dim`, with a learned shift b added after it (y = x - mean(x) + b, b shaped as
the row). gradInput = dy - mean(dy) along the row; gradShift = the sum of dy over every row."""

import numpy as np

from aclnn_cli.ops import AttrSpec, OpSpec, Reference, TensorSpec, defect, register
from aclnn_cli.ops.families import Rows, dim_axis
from aclnn_cli.ops.treesum import exact_sum_factor, row_sum64

U = 2.0**-53


def reference(t):
    """float64 on whole rows (k, R, A0). row_sum64's pairwise sum of R terms is within
    exact_sum_factor(R) u sum|dy| of the exact sum; dividing by R and subtracting add two roundings. A tight
    bound matters: gen computes exactly every row whose rounding the bound leaves open."""
    dy = t["gradOutput"]
    r = dy.shape[1]
    total = row_sum64(dy)
    magnitude = row_sum64(np.abs(dy))
    mean = total / r
    value = dy - mean
    bound = (exact_sum_factor(r) + 2) * U * (magnitude / r) + 2 * U * (np.abs(dy) + np.abs(mean))
    scale = np.abs(dy) + magnitude / r
    shift = row_sum64(dy, axis=0)  # across rows: this block's partial sum (k rows)
    shift_scale = row_sum64(np.abs(dy), axis=0)
    return {"gradInput": Reference(value, bound, scale),
            "gradShift": Reference(shift, exact_sum_factor(dy.shape[0]) * U * shift_scale, shift_scale)}


def exact(t):
    """Fractions: the same formula, exactly."""
    dy = t["gradOutput"]
    mean = dy.sum(axis=1, keepdims=True) / dy.shape[1]
    return {"gradInput": dy - mean, "gradShift": dy.sum(axis=0, keepdims=True)}


def kernel(t):
    """float32, sequential sums (a plain loop's order)."""
    dy = t["gradOutput"]
    total = np.cumsum(dy, axis=1, dtype=np.float32)[:, -1:, :]
    return {"gradInput": dy - total / np.float32(dy.shape[1]), "gradShift": np.cumsum(dy, axis=0, dtype=np.float32)[-1:]}


@defect
def _mean_of_all(t):
    """Defect: the mean taken over the whole block of rows, not along the row."""
    dy = t["gradOutput"]
    return {"gradInput": dy - dy.mean(axis=(0, 1), keepdims=True, dtype=np.float32),
            "gradShift": dy.sum(axis=0, keepdims=True, dtype=np.float32)}


SPEC = register(OpSpec(
    name="aclnnMyCenterBackward", key="my_center_backward",
    summary="Gradient of y = x - mean(x, dim) + shift.",
    formula="gradInput = gradOutput - mean(gradOutput, dim); gradShift = sum of gradOutput over every row",
    tensors=(TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
             TensorSpec("self", "input", {"uniform": [-2, 2]}, read_by_kernel=False),
             TensorSpec("gradInput", "output", {"constant": 0}),
             TensorSpec("gradShift", "output", {"constant": 0})),
    attributes=(AttrSpec("dim", "int", default=-1),),
    products={"A2": ("float32", "float16", "bfloat16")},
    dims=(1, 8), empty_ok=False,
    family=Rows(driver="gradOutput", axes=dim_axis("gradOutput"), across_rows=("gradShift",)),
    reference=reference, exact=exact, kernel=kernel,
    variants={"mean-of-all": _mean_of_all},
))
