"""aclnnSoftmaxBackward: out = y * (dy - sum(dy * y, dim)), y = `output` (the forward output, any values).

The result is rational in the inputs, so the exact path is Fractions on whole rows. The 950 kernel
(activation/softmax_grad/op_kernel/arch35/softmax_grad_ar_full_load.h, and the ARA / recompute templates
beside it), in float32 with 16-bit inputs cast up exactly: p = y * dy, S = the row sum of p (64-lane
tree, `softmax_common.row_sum32`), out = MulAddDst(p, -y, S) = p + (-y) * S, cast to the output dtype
CAST_RINT. The op_api (op_api/aclnn_softmax_backward.cpp) runs SoftmaxGrad(output, gradOutput, axes=[dim])
on contiguous copies, then Cast to out's dtype and ViewCopy.
"""

from __future__ import annotations

import numpy as np

from . import softmax_common as C
from ..base import Contract, OpSpec, Reference, defect, legitimate
from ..registry import register
from ..dyadic import as_fractions_of, over_common
from ..accumulation import sum_allowance
from ..treesum import row_sum64

DY, Y = C.DY, C.Y


def _reference(t):
    """y * (dy - S) in float64, S = sum of p = y * dy along the row.

    Each p_j is exact in float64 (two 24-bit significands, no over- or underflow for float32 inputs), and
    C.row_sum_bounded gives S64 with |S64 - S| <= B (u |S64| by math.fsum, or F u P pairwise on short rows;
    P = sum |p_j| in float64). d = fl(dy - S64) adds u|d|, value = fl(y d) adds u|y d| <= u|value| (1 + 2u):
    |value - exact| <= u (2|y d| + ...) + |y| B <= 3 u |value| + |y| B, with |y d| <= |value| (1 + 2u).
    scale = |y| (|dy| + P): a float32 kernel's error is ~ (log2 R + c) u |y| P from the sum plus a few u |p|;
    it bounds |exact| (|dy - S| <= |dy| + P), with slack for P's float64 rounding.
    """
    dy, y = t[DY], t[Y]
    p = y * dy
    big_p = row_sum64(np.abs(p))
    total, err = C.row_sum_bounded(p, big_p)
    value = y * (dy - total)
    bound = (3 * C.U * np.abs(value) + np.abs(y) * err) * (1 + 2.0**-30)
    return Reference(value, bound, np.abs(y) * (np.abs(dy) + big_p) * (1 + 2.0**-30), shared=_shared(p, y))


def _shared(p, y):
    """What a correct float32 kernel's row sum S = sum(p) may be off by (ops/accumulation.py's allowance, p = y dy
    made with one rounding), carried to each element of the row as |y| times it: the error every element of a row
    shares, which the error balance does not count as bias (equal logits and a gradient constant along the row put
    the same lean on a whole row: decision 239)."""
    k, r, a0 = p.shape
    with np.errstate(all="ignore"):
        rows = sum_allowance([np.moveaxis(p, 1, 2).reshape(k * a0, r)], 1).reshape(k, 1, a0)
        shared = np.abs(y) * rows
    return np.where(np.isfinite(shared), shared, 0.0)  # (a non-finite row's elements are not relieved)


def _exact(t):
    """Fractions: y * (dy - sum(y * dy)) along axis 1 (any k rows, any A0). In integers over each row's common
    denominators (dyadic.over_common: dy = D / dd, y = Y / dy_): Y (D dy_ - sum Y D) / (dy_^2 dd), one Fraction
    per element; in Fractions where an input is inf or NaN (IEEE's values)."""
    dy, y = t[DY], t[Y]
    parts = over_common(dy), over_common(y)
    if None in parts:
        return y * (dy - (y * dy).sum(axis=1, keepdims=True))
    (big_d, d_dy), (big_y, d_y) = parts
    return as_fractions_of(big_y * (big_d * d_y - (big_y * big_d).sum(axis=1, keepdims=True)), d_y * d_y * d_dy)


def _combine(sum_fn, weight=Y):
    """p + (-w) * sum_fn(p) with p = y * dy: the 950 kernel's order, with the row sum (and the weight) chosen."""
    def kernel(t):
        p = t[Y] * t[DY]
        return p + (-t[weight]) * sum_fn(p)
    return kernel


_kernel = _combine(C.row_sum32)
_kernel.__doc__ = "The 950 kernel in float32: p = y*dy, S = 950 row sum of p, p + (-y)*S (MulAddDst, unfused)."


_overflow = C.overflow_edge(_kernel)


def _edge(t):
    """The kernel's inf/NaN where it has one (C.overflow_edge); where output is +-inf, ATen's order instead:
    p - y*S (the 950's) and (dy - S)*y (ATen's) are both IEEE results there, one NaN (inf - inf), the other
    +-inf, and the doc defines neither: the golden takes the 950's, verify accepts either."""
    where, device = _overflow(t)
    y32 = np.asarray(t[Y]).astype(np.float32)
    inf_y = np.isinf(y32)
    if inf_y.any():
        with np.errstate(all="ignore"):
            aten = _aten_order({**t, DY: np.asarray(t[DY]).astype(np.float32), Y: y32})
        where = where | inf_y
        device = np.where(inf_y, aten.astype(np.float64), device)
    return where, device


@defect
def _flipped_sum(t):
    """Defect: the reduction term's sign flipped: p + y * S."""
    p = t[Y] * t[DY]
    return p + t[Y] * C.row_sum32(p)


@defect
def _missing_sum(t):
    """Defect: the reduction term left out: out = y * dy."""
    return t[Y] * t[DY]


@defect
def _wrong_axis(t):
    """Defect: the sum taken along the axes after dim instead of along dim (dim last: each element its own row)."""
    return _combine(C.trailing_sum)(t)


@defect
def _half_accumulation(t):
    """Defect: the row sum accumulated in index order in float16 (stagnates on long rows of like-signed terms)."""
    return _combine(C.half_sum)(t)


@defect
def _dropped_element(t):
    """Defect: the row sum misses the row's last element (a loop bound off by one)."""
    return _combine(C.dropped_sum)(t)


@defect
def _graph_input_order(t):
    """Defect: SoftmaxGrad's inputs are (softmax, grad_softmax), the API's (gradOutput, output); a kernel
    reading them the other way round weights the sum by dy: p - dy * S."""
    return _combine(C.row_sum32, weight=DY)(t)


@defect
def _logsoftmax_sum(t):
    """Defect: LogSoftmax's sum in Softmax's formula: y * (dy - sum(dy))."""
    dy, y = t[DY], t[Y]
    return y * (dy - C.row_sum32(dy))


@legitimate
def _aten_order(t):
    """Legitimate: ATen's CPU kernel (SoftMaxKernel.cpp): S in 8 float32 lanes along the last dim, a running
    sum per column otherwise (C.aten_sum), then (dy - S) * y."""
    dy, y = t[DY], t[Y]
    return (dy - C.aten_sum(y * dy)) * y


@legitimate
def _fused(t):
    """Legitimate: MulAddDst fused (one rounding of p - y*S; float64 then float32, within an ulp of it)."""
    dy, y = t[DY], t[Y]
    p = y * dy
    s = C.row_sum32(p)
    wide = p.astype(np.float64) - y.astype(np.float64) * s.astype(np.float64)
    return wide.astype(p.dtype)


VARIANTS = {
    "softmax-flipped-sum": _flipped_sum,
    "softmax-missing-sum": _missing_sum,
    "softmax-wrong-axis": _wrong_axis,
    "softmax-half-accumulation": _half_accumulation,
    "softmax-dropped-element": _dropped_element,
    "softmax-graph-input-order": _graph_input_order,
    "softmax-logsoftmax-sum": _logsoftmax_sum,
    "softmax-aten-order": _aten_order,
    "softmax-fused-multiply-add": _fused,
}

SPEC = register(OpSpec(
    name="aclnnSoftmaxBackward",
    key="softmax_backward",
    header="aclnnop/aclnn_softmax_backward.h",
    signature=C.SIGNATURE,
    summary="Gradient of softmax along dim from the forward output y: y * (dy - sum(dy * y, dim)).",
    formula="out = gradOutput * output - sum(gradOutput * output, dim, keepdim) * output",
    tensors=C.tensors({"uniform": [0.0, 1.0]}),
    attributes=(C.DIM,),
    products=C.PRODUCTS,
    dims=(0, 8),
    empty_ok=True,
    family=C.FAMILY,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", shape_rule=C.rules_in_order(C.dtype_rule, C.dim_rule, C.shapes_rule)),
    special_values="A row holding inf or NaN in gradOutput or output gives inf/NaN in every element of that row "
                   "(the sum is not finite; 0 * inf is NaN), as IEEE arithmetic in the kernel's order gives them; where "
                   "output is +-inf verify also accepts ATen's order ((dy - S) * y: -inf or +inf where the 950's "
                   "p - y*S is inf - inf = NaN). "
                   "Where a float32 intermediate overflows on finite inputs (y * dy or the row sum beyond 3.4e38) "
                   "the golden is exact; verify also accepts the kernel's inf/NaN there. gradOutput constant "
                   "along a row of a true softmax gives an exact result near 0 that a float32 kernel only "
                   "resolves to ~ log2(R) u |y| sum|y dy|: judged against that scale.",
))

CONTRACT_NOTES = """\
aclnnSoftmaxBackward phase one (activation/softmax_grad/op_api/aclnn_softmax_backward.cpp), beyond the Contract:
- Order: gradOutput, output, out null -> 161001; on products other than 950 (not regbase) an empty
  gradOutput or output returns ACLNN_SUCCESS here, before any other check; gradOutput BF16 on a SoC
  outside [ASCEND910B, ASCEND910E] (910, 310P) -> 161002; gradOutput or output not FLOAT/FLOAT16/BF16 ->
  161002; output's dtype != gradOutput's -> 161002; dim outside [-n, n - 1] (n = gradOutput's dims, 0-d as
  1) -> 161002; gradOutput over 8 dims -> 161002; output's or out's shape != gradOutput's -> 161002; then
  an empty tensor -> ACLNN_SUCCESS, workspace 0 (on 950 after the checks).
- out's dtype is not checked: the kernel's result (gradOutput's dtype) is Cast to it. The Contract is
  "promote" (out any float) with output's dtype tied to gradOutput's by the shape_rule (dtype_rule, first,
  as in the source). A case whose out is wider than its inputs (fp16 in, fp32 out) is accepted as the API
  accepts it, but the Rows pipeline has no compute dtype: the golden is the exact result rounded once into
  out's dtype and verify judges at out's precision, while the device rounds to fp16 first. No bundled case
  does that; such a user case needs a tolerance of the inputs' dtype.
- dims: only gradOutput's count is checked (output and out must equal its shape); 0-d is accepted (the doc
  says 0-8).
- The kernel (op_host/softmax_grad_def.cpp) is registered for ascend950 only; the other products' kernels
  are not in ops-nn: the emulated kernel is the 950's.
"""
