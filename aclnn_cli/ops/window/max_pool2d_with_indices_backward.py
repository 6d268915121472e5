"""aclnnMaxPool2dWithIndicesBackward: the gradient of 2-D max pooling.

    gradInput[n, c, p] = sum over the windows (oh, ow) whose index names p of gradOutput[n, c, oh, ow]

hicann/ops-nn pooling/max_pool3d_grad_with_argmax/docs/aclnnMaxPool2dWithIndicesBackward.md: gradOutput, self,
gradInput float32, float16, bfloat16 on the 950, float32 on A2 and A3 (not 910, 310P, 310B); indices int32 or int64
on the 950, int32 on A2 and A3, gradOutput's shape, the forward's argmax as a flat position in the (H, W) plane, in
[0, H W); 3-4 dims; kernelSize 1 or 2 values > 0; stride 0, 1 or 2 values > 0 (empty: the kernel); padding 1 or 2
values in [0, kernel / 2]; dilation > 0 on the 950 (1 on A2 and A3). op_api/aclnn_max_pool2d_with_indices_backward.cpp
(CheckParams) checks those; every array non-null (161001).

`indices` is derived (OpSpec.derived): gen computes it from self by the forward (ops/window/argmax.py, the first
maximum in scan order, as ops-nn's ATK executor does with torch), unless a case gives its values; explicit indices
outside their windows are refused when gen computes the golden (the doc defines no result). On the 950 the op_api
runs MaxPoolGradWithArgmaxV3: its SIMT kernel gives each position the float32 sum, over the windows that could cover
it (ph outer, pw inner), of gradOutput where the window's index names it, cast once to gradInput's dtype; the NCHW
kernels scatter the windows' terms in the same order into a float32 buffer. The golden is the exact sum rounded once.
"""

from __future__ import annotations

import numpy as np

from ..base import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..families import Window
from ..families.window import pair
from ..registry import register
from . import argmax, pool

GRAD, SELF, INDICES, OUT = "gradOutput", "self", "indices", "gradInput"
KERNEL, STRIDE, PADDING, DILATION, CEIL = "kernelSize", "stride", "padding", "dilation", "ceilMode"
FAMILY = Window(driver=SELF, grad=GRAD, kernel=KERNEL, stride=STRIDE, padding=PADDING, dilation=DILATION,
                ceil=CEIL, pooled=(INDICES,))


def _reference(t) -> Reference:
    value, bound, scale, allowance = argmax.reference(FAMILY, t)
    return Reference(value, bound, scale, allowance=allowance)


def _exact_at(t, wanted):
    return {OUT: argmax.exact_at(FAMILY, t, wanted[OUT])}


def _exact(t):
    return argmax.exact(FAMILY, t)


def _derive_indices(t):
    return argmax.forward_indices(FAMILY, t)


def _kernel(t):
    """The 950: MaxPoolGradWithArgmaxV3, the windows' gradOutput added in float32 in (oh, ow) order."""
    return argmax.scatter(FAMILY, t)


def _ieee(t):
    return argmax.scatter(FAMILY, t, np.float64)


@legitimate
def _reversed(t):
    """Legitimate: each position's windows added in the other order (the last window first)."""
    return argmax.scatter(FAMILY, t, order="reversed")


@legitimate
def _columns(t):
    """Legitimate: windows added column by column (ow outer), as a kernel tiling the argmax by columns may."""
    return argmax.scatter(FAMILY, t, order="columns")


@defect
def _first_in_window(t):
    """Defect: each window's gradient to its first position inside the input, not to its argmax."""
    idx = np.broadcast_to(argmax.first_taps(*argmax.windows(FAMILY, t)), np.shape(t[INDICES])).astype(np.int64)
    return argmax.scatter(FAMILY, t, idx=idx)


@defect
def _last_write_wins(t):
    """Defect: overlapping windows naming one position not added, the last window's term stored."""
    return argmax.scatter(FAMILY, t, last_write=True)


@defect
def _accumulate_fp16(t):
    """Defect: the sum accumulated in float16 (rounded after every addition) instead of float32."""
    return argmax.scatter(FAMILY, t, dtype=np.float16).astype(np.float32)


@defect
def _index_transposed(t):
    """Defect: an index read as w * H + h (column-major in the plane) instead of h * W + w."""
    k, h, w = t[SELF].shape
    idx = np.asarray(t[INDICES], np.int64)
    swapped = (idx % w) * h + idx // w
    return argmax.scatter(FAMILY, t, idx=swapped % (h * w))


VARIANTS = {"maxpool-reversed": _reversed, "maxpool-columns": _columns, "maxpool-first-in-window": _first_in_window,
            "maxpool-last-write-wins": _last_write_wins, "maxpool-accumulate-fp16": _accumulate_fp16,
            "maxpool-index-transposed": _index_transposed}


def _attribute_rule(attrs) -> str | None:
    """CheckShape (aclnn_max_pool2d_with_indices_backward.cpp): the arrays' sizes and values (the 950's dilation rule;
    A2 and A3's dilation of 1 is not told the product: decision 143)."""
    k, p, d = (tuple(attrs[n] or ()) for n in (KERNEL, PADDING, DILATION))
    problem = pool.lists_rule(k, tuple(attrs[STRIDE] or ()), p)
    if problem:
        return problem
    if len(d) not in (1, 2) or min(d) <= 0:
        return f"dilation {list(d)}: 1 or 2 values, each > 0"
    kk, pp, dd = pair(k), pair(p), pair(d)
    if any(2 * pi > (ki - 1) * di + 1 for pi, ki, di in zip(pp, kk, dd)):
        return f"padding {list(p)}: at most half the dilated kernel"
    return None


def _shape_rule(descs, attrs) -> str | None:
    """indices gradOutput's shape, gradInput self's (CheckGradInputAndIndicesShape), all 3-d or 4-d (CheckFormat)."""
    g, s, i, o = (tuple(descs[n].shape) for n in (GRAD, SELF, INDICES, OUT))
    if len({len(g), len(s), len(i), len(o)}) != 1:
        return f"gradOutput {list(g)}, self {list(s)}, indices {list(i)}, gradInput {list(o)}: 3-d or 4-d together"
    if s != o:
        return f"gradInput shape {list(o)} is not self's {list(s)}"
    if i != g:
        return f"indices shape {list(i)} is not gradOutput's {list(g)}"
    return None


SPEC = register(OpSpec(
    name="aclnnMaxPool2dWithIndicesBackward",
    key="max_pool2d_with_indices_backward",
    header="aclnnop/aclnn_max_pool2d_with_indices_backward.h",
    signature=(GRAD, SELF, INDICES, KERNEL, STRIDE, PADDING, DILATION, CEIL, OUT),
    summary="Gradient of 2-D max pooling: each window's gradient goes to the position of its maximum (the forward's "
            "indices), added where windows overlap.",
    formula="gradInput[n, c, p] = sum over windows (oh, ow) with indices[n, c, oh, ow] == p of gradOutput[n, c, oh, ow]",
    tensors=(
        TensorSpec(GRAD, "input", {"normal": [0, 1]}, formats={3: "NCL", 4: "NCHW"}),
        TensorSpec(SELF, "input", {"normal": [0, 1]}, read_by_kernel=False, formats={3: "NCL", 4: "NCHW"}),
        TensorSpec(INDICES, "input", {"derived": True}, dtypes=("int32", "int64"), formats={3: "NCL", 4: "NCHW"}),
        TensorSpec(OUT, "output", {"constant": 0}, formats={3: "NCL", 4: "NCHW"}),
    ),
    attributes=(AttrSpec(KERNEL, "int_list"), AttrSpec(STRIDE, "int_list", default=()),
                AttrSpec(PADDING, "int_list", default=(0,)), AttrSpec(DILATION, "int_list", default=(1,)),
                AttrSpec(CEIL, "bool", default=False)),
    products=products("950", "A3", "A2", overrides={"A3": ("float32",), "A2": ("float32",)}),
    dims=(3, 4),
    empty_ok=False,
    family=FAMILY,
    reference=_reference,
    exact=_exact,
    exact_at=_exact_at,
    kernel=_kernel,
    ieee=_ieee,
    variants=VARIANTS,
    derived={INDICES: _derive_indices},
    contract=Contract(dtypes="same", attribute_rule=_attribute_rule, shape_rule=_shape_rule),
    special_values="The doc supports no NaN or -inf input; IEEE: an inf or NaN in gradOutput reaches the position its "
                   "window's index names (inf - inf in one sum gives NaN).",
))
