"""aclnnMaxPool3dWithArgmaxBackward: the gradient of 3-D max pooling.

    gradInput[n, c, p] = sum over the windows (od, oh, ow) whose index names p of gradOutput[n, c, od, oh, ow]

hicann/ops-nn pooling/max_pool3d_grad_with_argmax/docs/aclnnMaxPool3dWithArgmaxBackward.md: gradOutput, self,
gradInput float32, float16, bfloat16 (950, A3, A2; not 910, 310P, 310B), ND, 4-5 dims (CDHW, NCDHW); indices int32 or
int64 (A2 and A3: int32 only), gradOutput's shape, the forward's argmax as a flat position d H W + h W + w of its
(D, H, W) volume; kernelSize 1 or 3 values > 0; stride 0 (the kernel), 1 or 3 values > 0; padding 1 or 3 values in
[0, kernel / 2]; dilation 1 or 3 values ("only 1", the doc; the op_api checks > 0 and every kernel takes it).
op_api/aclnn_max_pool3d_with_argmax_backward.cpp CheckParams: every tensor and array non-null (161001), dtypes,
formats and 4-5 dims each, the arrays, then indices gradOutput's shape and gradInput self's (161002). An empty
gradOutput, self or indices returns success at once (the header: N = 0 gives an empty gradInput; the doc's "no
empty in, empty out" is read as nothing to compute): empty_ok. Not modelled, as for the 2-D op (a tensor's own dtype
list and the rules are not told the product): A2 and A3's int32-only indices and their D H W <= INT32_MAX check.

`indices` is derived (OpSpec.derived): gen computes it from self by the forward (ops/window/argmax.py: the first
maximum in (d, h, w) scan order), as ops-nn's ATK executor does with torch.nn.MaxPool3d(return_indices=True) before
calling the API; explicit indices outside their windows are refused when gen computes the golden (no defined
result). The op_api runs MaxPool3DGradWithArgmax; on the 950 its SIMT kernel (op_kernel/arch35/
max_pool3d_grad_with_argmax_simt.h) gives each position the float32 sum over the windows whose span may reach it (pd
outer, ph, pw inner) of gradOutput where the window's index names it, cast once; the SIMD kernels scatter-add the
windows' float32 terms in row order; A2 and A3's kernels add into a float32 workspace and cast once (CAST_RINT). The
golden is the exact sum rounded once; the allowance counts the windows adding into each position.
"""

from __future__ import annotations

from ..base import AttrSpec, Contract, OpSpec, TensorSpec, products
from ..families import Window
from ..families.window import spread
from ..registry import register
from . import argmax, pool

GRAD, SELF, INDICES, OUT = "gradOutput", "self", "indices", "gradInput"
KERNEL, STRIDE, PADDING, DILATION, CEIL = "kernelSize", "stride", "padding", "dilation", "ceilMode"
FAMILY = Window(driver=SELF, grad=GRAD, kernel=KERNEL, stride=STRIDE, padding=PADDING, dilation=DILATION,
                ceil=CEIL, pooled=(INDICES,), spatial=3)


def _attribute_rule(attrs) -> str | None:
    """CheckParamsValid, in its order: kernelSize 1 or 3 values > 0; stride 0, 1 or 3 values > 0; padding 1 or 3
    values in [0, kernel / 2] (integer division); dilation 1 or 3 values > 0."""
    k, s, p, d = (tuple(attrs[n] or ()) for n in (KERNEL, STRIDE, PADDING, DILATION))
    if len(k) not in (1, 3) or min(k) <= 0:
        return f"kernelSize {list(k)}: 1 or 3 values, each > 0"
    if len(s) not in (0, 1, 3) or (s and min(s) <= 0):
        return f"stride {list(s)}: 0, 1 or 3 values, each > 0"
    if len(p) not in (1, 3):
        return f"padding {list(p)}: 1 or 3 values"
    kk, pp = spread(k, 3), spread(p, 3)
    if min(pp) < 0 or any(pi > ki // 2 for pi, ki in zip(pp, kk)):
        return f"padding {list(p)}: each >= 0 and at most half the kernel {list(kk)}"
    if len(d) not in (1, 3) or min(d) <= 0:
        return f"dilation {list(d)}: 1 or 3 values, each > 0"
    return None


def _shape_rule(descs, attrs) -> str | None:
    """CheckFormat: each tensor 4-d or 5-d; CheckInputShape: indices gradOutput's shape, gradInput self's."""
    g, s, i, o = (tuple(descs[n].shape) for n in (GRAD, SELF, INDICES, OUT))
    for name, shape in zip((GRAD, OUT, INDICES, SELF), (g, o, i, s)):
        if len(shape) not in (4, 5):
            return f"{name} {list(shape)}: 4D or 5D expected"
    if i != g:
        return f"indices shape {list(i)} is not gradOutput's {list(g)}"
    if s != o:
        return f"gradInput shape {list(o)} is not self's {list(s)}"
    return None


SPEC = register(OpSpec(
    name="aclnnMaxPool3dWithArgmaxBackward",
    key="max_pool3d_with_argmax_backward",
    header="aclnnop/aclnn_max_pool3d_with_argmax_backward.h",
    signature=(GRAD, SELF, INDICES, KERNEL, STRIDE, PADDING, DILATION, CEIL, OUT),
    summary="Gradient of 3-D max pooling: each window's gradient goes to the position of its maximum (the forward's "
            "argmax), added where windows overlap.",
    formula="gradInput[n, c, p] = sum over windows (od, oh, ow) with indices[n, c, od, oh, ow] == p of "
            "gradOutput[n, c, od, oh, ow]",
    tensors=(
        TensorSpec(GRAD, "input", {"normal": [0, 1]}),
        TensorSpec(SELF, "input", {"normal": [0, 1]}, read_by_kernel=False),
        TensorSpec(INDICES, "input", {"derived": True}, dtypes=("int32", "int64")),
        TensorSpec(OUT, "output", {"constant": 0}),
    ),
    attributes=(AttrSpec(KERNEL, "int_list"), AttrSpec(STRIDE, "int_list", default=()),
                AttrSpec(PADDING, "int_list", default=(0,)), AttrSpec(DILATION, "int_list", default=(1,)),
                AttrSpec(CEIL, "bool", default=False)),
    products=products("950", "A3", "A2"),
    dims=(4, 5),
    empty_ok=True,
    family=FAMILY,
    case_values=pool.depths(FAMILY),
    **argmax.spec_functions(FAMILY, OUT),  # (the kernel: the 950's SIMT order, windows (od, oh, ow), float32)
    variants=argmax.variants(FAMILY, "maxpool3d"),
    contract=Contract(dtypes="same", attribute_rule=_attribute_rule, shape_rule=_shape_rule),
    special_values="The doc: an inf or NaN input gives inf or NaN; IEEE: an inf or NaN in gradOutput reaches the "
                   "position its window's index names (inf - inf in one sum gives NaN).",
))
