"""aclnnNLLLoss2dBackward: out[n, t, h, w] = -gradOutput * weight[t] (/ totalWeight for mean) where t =
target[n, h, w] is not ignoreIndex; every other entry 0.

aclnnNLLLossBackward's arithmetic at every (n, h, w) position, with the class axis at 1 of an (N, C, H, W) self.
The op_api (loss/nll_loss_grad/op_api/aclnn_nll_loss2d_backward.cpp, hicann/ops-nn e5c3fa93) says so itself: off
the 950 it transposes self to (N, H, W, C), reshapes it to (N H W, C) rows and target and a per-position gradOutput
to (N H W), calls the 1-D NLLLossGrad kernel, and transposes the result back; on the 950 (IsRegbase) it hands the 4-D
tensors to the same kernel, whose 4-D SIMT paths (op_kernel/arch35/nll_loss_grad.h, SimtComputeNoReduce4d,
SimtComputeReduceMean4d, SimtComputeReduceSum4d) zero-fill out and write, at out[n, t, hw] for every position whose
target differs from ignoreIndex (an int64 compare), exactly what the 2-D paths write at out[i, t]:
  none: -T(fl32(float(g[n, hw]) * float(w_t)));  sum: -T(fl32(float(g_0) * float(w_t)));
  mean: -T(fl32(q * float(w_t))), q = fl32(g_0 / tw) once.
So every function here is aclnnNLLLossBackward's (rows/nll_loss_backward.py), applied to the block's positions as
the 1-D op's rows: a sample (k, C, S) becomes k S rows of C classes, and the result is moved back (`_by_rows`). The
goldens, the exact path, the emulated kernel and the variants are the 1-D op's; what is this op's is the contract
(CheckShape of the 2-D source, which differs from the 1-D one: see CONTRACT_NOTES) and the Classes family's cut.
"""

from __future__ import annotations

import math
from functools import wraps

import numpy as np

from ...errors import UserError
from ..base import Contract, OpSpec, Reference, defect
from ..families import Classes
from ..registry import register
from ..rows import nll_loss_backward as nll

NAME = "aclnnNLLLoss2dBackward"
NONE = nll.NONE


def _as_rows(t) -> tuple[dict, tuple[int, int, int]]:
    """A block of k samples (k, C, S) as the 1-D op's rows, one per position (k S, C, 1): target and gradOutput
    (k, 1, S) (or one broadcast value) to (k S, 1, 1); weight and totalWeight, read whole as (k, 1, numel), to
    (k S, C, 1) and (k S, 1, 1). Returns the rows and (k, C, S)."""
    target = np.asarray(t["target"])
    k, s = target.shape[0], target.shape[2]
    weight = np.asarray(t["weight"]).reshape(k, 1, -1)
    classes = weight.shape[2]

    def per_position(a) -> np.ndarray:  # (a broadcast value beside no classes: (k, 0, S), none of it read)
        a = np.asarray(a)
        a = a[:, :1, :] if a.shape[1] else np.zeros((k, 1, 1), dtype=a.dtype)
        return np.broadcast_to(a, (k, 1, s)).reshape(k * s, 1, 1)

    rows = {**{n: v for n, v in t.items() if n != "self"},
            "target": per_position(target), "gradOutput": per_position(t["gradOutput"]),
            "weight": np.repeat(weight.transpose(0, 2, 1), s, axis=0),
            "totalWeight": np.repeat(np.asarray(t["totalWeight"]).reshape(k, -1)[:, :1], s, axis=0).reshape(-1, 1, 1)}
    return rows, (k, classes, s)


def _back(a, shape: tuple[int, int, int]):
    """The 1-D op's rows (k S, C, 1) moved back to the samples' (k, C, S)."""
    k, classes, s = shape
    return np.asarray(a).reshape(k, s, classes).transpose(0, 2, 1)


def _by_rows(fn):
    """fn, a function of aclnnNLLLossBackward's blocks, on this op's: positions in, positions back out (an array,
    a Reference, or edge's (where, device) pair)."""
    @wraps(fn)
    def on_samples(t):
        rows, shape = _as_rows(t)
        try:
            got = fn(rows)
        except UserError as exc:  # (a target out of range: named as this op's)
            raise UserError(str(exc).replace(nll.NAME, NAME, 1), key=exc.key) from None
        if isinstance(got, Reference):
            return Reference(_back(got.value, shape), _back(got.bound, shape), _back(got.scale, shape))
        if isinstance(got, tuple):
            return tuple(_back(a, shape) for a in got)
        return _back(got, shape)
    return on_samples


@defect
def _channels_last(t):
    """Defect: out written as (N, H, W, C), the op_api's transposed layout, never transposed back (the off-950
    path's last Transpose dropped): each sample's value for (class c, position s) lands at flat c * S + s's
    (s, c) place instead."""
    right = _by_rows(nll.SPEC.kernel)(t)
    k, classes, s = right.shape
    return right.transpose(0, 2, 1).reshape(k, classes, s)


# every variant of the 1-D op is one of this op's (the same kernel), the swapped axes aside: this op's axes are
# swapped by _channels_last
VARIANTS = {**{name: _by_rows(fn) for name, fn in nll.VARIANTS.items() if name != "nll-swapped-axes"},
            "nll2d-channels-last": _channels_last}


def _shapes(shape: tuple[int, ...], attrs) -> dict[str, tuple[int, ...]]:
    """gradOutput (N, H, W) for reduction none, else one element (0-d); totalWeight (1,). (target: (N, H, W) and
    weight (C,) by the family.)"""
    return {"gradOutput": Classes.spatial(shape) if attrs["reduction"] == NONE else (), "totalWeight": (1,)}


def _target_fill(shapes, attrs) -> dict:
    """Classes in [0, C - 1], an eighth of them ignoreIndex: the 1-D op's fill, C on axis 1."""
    return nll.target_fill(shapes["self"][1] if len(shapes["self"]) > 1 else 1, attrs)


def _shape_rule(descs, attrs) -> str | None:
    """CheckShape in op_api/aclnn_nll_loss2d_backward.cpp, in its order (gradOutput first; weight by its element
    count, any shape; totalWeight one element)."""
    self_shape, target, grad = descs["self"].shape, descs["target"].shape, descs["gradOutput"].shape
    if attrs["reduction"] == NONE:
        if grad != target:
            return f"gradOutput shape {list(grad)} is not target's {list(target)} (reduction none)"
    elif len(grad) > 1 or math.prod(grad) != 1:
        return f"gradOutput shape {list(grad)} is not a single element of at most 1 dim"
    if len(self_shape) != 4:
        return f"self has {len(self_shape)} dims; it must be 4-D (N, C, H, W)"
    if len(target) != 3:
        return f"target has {len(target)} dims; it must be 3-D (N, H, W)"
    if Classes.spatial(self_shape) != target:
        return f"target shape {list(target)} does not match self {list(self_shape)}'s (N, H, W)"
    classes = self_shape[1]
    if math.prod(descs["weight"].shape) != classes:
        return f"weight shape {list(descs['weight'].shape)} does not hold {classes} elements, one per class"
    if descs["out"].shape != self_shape:
        return f"out shape {list(descs['out'].shape)} is not self's {list(self_shape)}"
    if math.prod(descs["totalWeight"].shape) != 1:
        return f"totalWeight shape {list(descs['totalWeight'].shape)} is not a single element"
    return None


SPEC = register(OpSpec(
    name=NAME,
    key="nll_loss2d_backward",
    header="aclnnop/aclnn_nll_loss2d_backward.h",
    signature=nll.SIGNATURE,
    summary="Gradient of the 2-D negative log-likelihood loss: -gradOutput * weight[target] at each position's "
            "target class (over totalWeight for mean), 0 elsewhere and where the target is ignoreIndex.",
    formula="out[n, t, h, w] = -g * w[t], t = target[n, h, w] != ignoreIndex (none: g = gradOutput[n, h, w]; sum: "
            "gradOutput; mean: gradOutput / totalWeight); every other element 0",
    tensors=nll.tensor_specs(_target_fill),
    attributes=nll.SPEC.attributes,
    products=nll.PRODUCTS,
    dims=(4, 4),
    empty_ok=True,
    family=Classes(driver="self", positions=("target", "gradOutput"), whole=("weight", "totalWeight"), shapes=_shapes),
    case_values=lambda shapes: {"batch": math.prod(Classes.spatial(shapes["self"]))},
    # (aclnnNLLLossBackward's golden, exact path, 950 kernel and edge, on the positions as its rows)
    **{field: _by_rows(getattr(nll.SPEC, field)) for field in ("reference", "exact", "kernel", "edge")},
    variants=VARIANTS,
    contract=Contract(dtypes="same", checks_dims=False, attribute_rule=nll.SPEC.contract.attribute_rule,
                      shape_rule=_shape_rule),
    # (the 1-D op's, each (n, h, w) position one of its rows)
    special_values=nll.SPEC.special_values.replace("row", "position"),
))

CONTRACT_NOTES = """\
aclnnNLLLoss2dBackward phase one (loss/nll_loss_grad/op_api/aclnn_nll_loss2d_backward.cpp), beyond the Contract:
- Order: gradOutput, self, target, weight, out, totalWeight null -> 161001 (CheckNotNull); then dtypes
  (161002): self in {FLOAT, FLOAT16, BF16} on A2/A3/950 (ASCEND910B, ASCEND910_93, IsRegbase), {FLOAT, FLOAT16}
  else; gradOutput, weight, out, totalWeight must equal self's (out too, unlike aclnnNLLLossBackward's castable
  out); target in {INT64, UINT8, INT32}; then shapes (CheckShape, 161002): reduction none: gradOutput's shape
  target's, else gradOutput <= 1 dim with one element; self 4-D; target 3-D; self's dims 0, 2, 3 target's; weight
  C elements (weight->Numel(): any shape, read flat; the doc says (C,)); out self's shape; totalWeight one
  element (any rank); then reduction outside [0, 2] -> 161002 (after the shapes: the Contract checks it first,
  the same status); then an empty self -> ACLNN_SUCCESS, workspace 0.
- No check of target values or ignoreIndex (an ASSERT in the kernel only); gen refuses a target outside [0, C)
  that is not ignoreIndex (one line, exit 2), as for aclnnNLLLossBackward. totalWeight 0 is not refused.
- Off the 950 (not emulated here) fp16 is cast to fp32 and target to int32 before the kernel, self transposed
  to (N H W, C) rows: the same numbers.
"""
