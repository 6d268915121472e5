"""aclnnSoftmaxGradExt: y = (grad * x1 - sum(grad * x1, axes) * x1) * x2, x1 the forward softmax, x2 a scale.

A graph-only op of ops-nn (activation/softmax_grad_ext: the graph op SoftmaxGradExt(grad, x1, x2; axes, keep_dims),
op_graph/softmax_grad_ext_proto.h). It has no op_api: CANN generates a single-op aclnn API from the OpDef
(op_host/softmax_grad_ext_def.cpp): inputs grad, x1, x2, attributes axes (Int, -1) and keep_dims (Bool, true),
output y, all ND of one dtype among FLOAT, FLOAT16, BF16, registered for ascend950 only. The header
(aclnnop/aclnn_softmax_grad_ext.h) is the generated one, with the OpDef's names camel-cased (keepDims) and its types
(int64_t axes, bool keepDims): ops-nn has no public header to compare token for token.

The 950 kernel (op_kernel/arch35: softmax_grad_ext_ar_small_r.h, _ar_full_load.h, _ar_recompute.h), in float32 with
16-bit inputs cast up exactly: p = grad * x1, S = the row sum of p, y = fl(fl(p - fl(x1 * S)) * x2) (Mul, Mul, Sub,
Mul: no fused step), cast to y's dtype CAST_RINT. The row sum is the SoftmaxGrad kernels' (`softmax_common.row_sum32`:
64-lane tree) in the full-load and recompute templates; the small-R template (the tiling's first choice, R <= 8 for
float32, R <= 16 for 16-bit) accumulates each row in index order (MulAddDst per element, unfused as docs/kernels.md
models it). The kernel sees float32 only, so rows of 9 to 16 take the tree here whatever the dtype; the sequential
order there is a legitimate variant (`_sequential_short`). The tiling (softmax_grad_ext_tiling_base_arch35.cpp)
reduces only the last axis (axes -1 or n - 1: A0 = 1), 1 to 6 dims (0-d as 1-d), no empty axis; x2 is grad's shape
or exactly (1,) (x2IsScalar: one value for every element). keep_dims is not read.

The result is x1 (grad - S) x2 exactly, rational in the inputs: softmax_backward's reference and Fractions times x2.
"""

from __future__ import annotations

import numpy as np

from . import softmax_backward as SB
from . import softmax_common as C
from ..base import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..families import Rows, dim_axis
from ..registry import register

G, X1, X2, Y = "grad", "x1", "x2", "y"
AXES, KEEP = "axes", "keepDims"
SMALL_R = 8  # the small-R template's bound for float32 rows (16 for 16-bit rows: see the module's docstring)
MAX_DIMS = 6


def _as_softmax(t):
    """The SoftmaxBackward mapping of this op's tensors: gradOutput = grad, output = x1."""
    return {C.DY: t[G], C.Y: t[X1]}


def _reference(t):
    """softmax_backward's x1 (grad - S) with its bound B, times x2: one more rounding, u |value| (value within
    (1 + 3u) of |x1 (grad - S) x2| + |x2| B); bound |x2| B (1 + 2^-30) + 2u |value|; scale |x2| times its scale."""
    base = SB._reference(_as_softmax(t))
    x2 = np.abs(t[X2])
    value = base.value * t[X2]
    slack = 1 + 2.0**-30
    return Reference(value, (x2 * base.bound * slack + 2 * C.U * np.abs(value)) * slack, x2 * base.scale * slack,
                     shared=x2 * base.shared * slack)  # (the row sum's shared error, times x2: decision 239)


def _exact(t):
    """Fractions: x1 (grad - sum(grad x1)) x2 along axis 1."""
    return SB._exact(_as_softmax(t)) * t[X2]


def _row_sum(p):
    """The 950's row sum: in index order for a small-R row (R <= 8), else the 64-lane tree."""
    return C.sequential_sum(p) if p.shape[1] <= SMALL_R else C.row_sum32(p)


def _combine(sum_fn, weight=X1, scale=True):
    """fl(fl(p - fl(w * S)) * x2), p = grad * x1, S = sum_fn(p): the kernel, with the sum, weight and x2 chosen."""
    def kernel(t):
        p = t[G] * t[X1]
        d = p - t[weight] * sum_fn(p)
        return d * t[X2] if scale else d
    return kernel


_kernel = _combine(_row_sum)
_kernel.__doc__ = "The 950 kernel in float32: p = grad*x1, S = its row sum, (p - x1*S) * x2."
_edge = C.overflow_edge(_kernel)


@defect
def _flipped_sum(t):
    """Defect: the reduction term's sign flipped: (p + x1 S) x2."""
    p = t[G] * t[X1]
    return (p + t[X1] * _row_sum(p)) * t[X2]


@defect
def _missing_sum(t):
    """Defect: the reduction term left out: p x2."""
    return t[G] * t[X1] * t[X2]


@defect
def _scale_ignored(t):
    """Defect: x2 not applied: p - x1 S."""
    return _combine(_row_sum, scale=False)(t)


@defect
def _scale_first(t):
    """Defect: a full-shape x2 read as a scalar (x2IsScalar set wrongly): every element scaled by x2's first."""
    return _combine(_row_sum, scale=False)(t) * t[X2].reshape(-1)[0]


@defect
def _swapped_inputs(t):
    """Defect: grad and x1 read the other way round: the sum weighted by grad, (p - grad S) x2."""
    return _combine(_row_sum, weight=G)(t)


def _with_sum(sum_fn, doc: str):
    """The kernel with another row sum, as a variant documented by `doc`."""
    kernel = _combine(sum_fn)
    kernel.__doc__ = doc
    return kernel


_half_accumulation = defect(_with_sum(C.half_sum, "Defect: the row sum accumulated in index order in float16 "
                                                  "(stagnates on long rows of like-signed terms)."))
_dropped_element = defect(_with_sum(C.dropped_sum, "Defect: the row sum misses the row's last element (a loop "
                                                   "bound off by one)."))
_sequential_short = legitimate(_with_sum(lambda p: C.sequential_sum(p) if p.shape[1] <= 16 else C.row_sum32(p),
                                         "Legitimate: the small-R template's order for rows up to 16 (its bound for "
                                         "16-bit rows): index order."))
_tree_short = legitimate(_with_sum(C.row_sum32, "Legitimate: the 64-lane tree for short rows too (the full-load "
                                                "template's order)."))
_golden_order = legitimate(_with_sum(lambda p: p.sum(axis=1, keepdims=True, dtype=np.float32),
                                     "Legitimate: ops-nn's TensorFlow golden (tests/assets/golden.py): S by reduce_sum "
                                     "(pairwise here), x1 S, p - x1 S, times x2, all float32."))


VARIANTS = {
    "sgext-flipped-sum": _flipped_sum,
    "sgext-missing-sum": _missing_sum,
    "sgext-scale-ignored": _scale_ignored,
    "sgext-scale-first-element": _scale_first,
    "sgext-swapped-inputs": _swapped_inputs,
    "sgext-half-accumulation": _half_accumulation,
    "sgext-dropped-element": _dropped_element,
    "sgext-sequential-short-rows": _sequential_short,
    "sgext-tree-short-rows": _tree_short,
    "sgext-golden-order": _golden_order,
}


def _tiled(shape) -> tuple:
    """A shape as the tiling reads it (EnsureNotScalar: 0-d is (1,))."""
    return tuple(shape) or (1,)


def _shape_rule(d, attrs) -> str | None:
    """Infershape (y takes grad's shape), then the tiling's checks in its order (GetDimsAndCheckShapeValid,
    GetAndCheckAxes). The device returns the tiling's refusals as 561002; 161002 here (CONTRACT_NOTES)."""
    g = _tiled(d[G].shape)
    scalar = _tiled(d[X2].shape) == (1,)
    for name in (X1, Y) if scalar else (X1, X2, Y):
        if _tiled(d[name].shape) != g:
            return f"{name} shape {list(d[name].shape)} is not grad's {list(d[G].shape)}"
    if any(s <= 0 for s in g):
        return f"grad shape {list(d[G].shape)} has an empty axis (the tiling takes none)"
    axes = int(attrs[AXES])
    if axes not in (-1, len(g) - 1):
        return f"axes {axes}: only -1 or {len(g) - 1} (the last axis) for a {len(d[G].shape)}-d grad"
    return None


SPEC = register(OpSpec(
    name="aclnnSoftmaxGradExt",
    key="softmax_grad_ext",
    header="aclnnop/aclnn_softmax_grad_ext.h",
    summary="Gradient of softmax along the last axis, scaled: (grad * x1 - sum(grad * x1, axes) * x1) * x2.",
    formula="y = (grad * x1 - sum(grad * x1, axes, keepdim) * x1) * x2, x2 grad's shape or one value",
    tensors=(TensorSpec(G, "input", {"normal": [0, 1]}), TensorSpec(X1, "input", {"uniform": [0.0, 1.0]}),
             TensorSpec(X2, "input", {"uniform": [-2.0, 2.0]}), TensorSpec(Y, "output", {"constant": 0})),
    attributes=(AttrSpec(AXES, "int", default=-1), AttrSpec(KEEP, "bool", default=True)),
    products=products("950"),
    dims=(0, MAX_DIMS),
    empty_ok=False,
    family=Rows(driver=G, axes=dim_axis(G, AXES)),
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="same", shape_rule=_shape_rule),
    special_values="A row holding inf or NaN in grad or x1 gives inf/NaN in every element of that row (the sum is "
                   "not finite; 0 * inf is NaN), as IEEE arithmetic in the kernel's order gives them; an inf or NaN "
                   "x2 propagates into its element. Where a float32 intermediate overflows on finite inputs (grad * x1, "
                   "the row sum or the product with x2 beyond 3.4e38) the golden is exact; verify also accepts the "
                   "kernel's inf/NaN there.",
))

CONTRACT_NOTES = """\
aclnnSoftmaxGradExt phase one: no op_api; the aclnn is generated from the OpDef (activation/softmax_grad_ext/op_host/
softmax_grad_ext_def.cpp), registered for ascend950 only.
- 161001: grad, x1, x2 or y null.
- 161002: a dtype outside {FLOAT, FLOAT16, BF16}, or the four not of one dtype (the OpDef's one column per tensor; the
  tiling's GetAndCheckDtypes checks the same).
- Infershape: y takes grad's shape (input 0) and dtype.
- Tiling (561002 on the device; 161002 here): grad at most 6 dims (the op's dims) (0-d read as (1,)); x1 and y grad's shape; x2 grad's
  shape or exactly (1,) (a 0-d x2 reads as (1,)); no axis of size 0 (empty tensors refused); axes -1 or n - 1 (the last
  axis only). keep_dims is not read (false computes the same).
"""
