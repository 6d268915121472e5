"""aclnnMaxPool2dWithMaskBackward: the gradient of 2-D max pooling given the forward's int8 "mask".

    gradInput[n, c, p] = sum over the windows (oh, ow) whose index names p of gradOutput[n, c, oh, ow]

hicann/ops-nn pooling/max_pool3d_grad_with_argmax/docs/aclnnMaxPool2dWithMaskBackward.md: A2 and A3 (and 910; not
950, 310P, 310B); gradOutput, self, gradInput float32, float16, bfloat16, NCHW; indices int8 ("the bit values of the
maximum's kernel position"); kernelSize 1 or 2 values > 0; stride 0, 1 or 2 values > 0; padding 1 or 2 values;
dilation 1. op_api/aclnn_max_pool2d_with_indices_backward.cpp (aclnnMaxPool2dWithMaskBackwardGetWorkspaceSize):
the 950 is refused ("Please use aclnnMaxPool2dWithIndicesBackward", 161002); a null kernelSize, self or gradOutput
and a kernelSize of another length give 161001; then CheckParams (isMask): nulls 161001, dtypes (A2/A3: float32,
float16, bfloat16, indices int8), 3-4 dims each, the arrays (padding in [0, kernel / 2], dilation 1), gradInput
self's shape, gradOutput the forward's (161002). The mask's shape is computed, [N, C, kH kW, (ceil(Ho Wo / 16) + 1)
32], but CheckGradInputAndIndicesShapeIsMask's answer is discarded: phase one takes any indices shape.

The mask: on A2 and A3 with a kernel other than 1 x 1 the op_api runs ExecMaxPool3dWithIndicesBackward with isMask,
whose IndicesInputProcess3D views the indices' storage as an int32 tensor of gradOutput's shape: the first N C Ho Wo
int32 (little-endian) of the buffer are the forward's argmax, h W + w in each (H, W) plane. That is what ops-nn's
ATK executor writes: torch.nn.MaxPool2d(return_indices=True) on self, as int32, flattened, zero-padded to the mask's
size, viewed as int8. `indices` is derived the same way (OpSpec.derived): the family cuts it as blocks of Ho Wo int32
(4 Ho Wo bytes, block b the bytes [4 b Ho Wo, 4 (b + 1) Ho Wo)), the tail zero. The kernel is MaxPool3DGradWithArgmax
as aclnnMaxPool3dWithArgmaxBackward runs it on A2 and A3 (D = 1): the windows' float32 terms added in a float32
workspace in row order, cast once. A 1 x 1 kernel runs MaxPoolGradWithArgmaxV1 on a 5HD bit mask instead, and the
910 (fp32 computed in fp16) that path always: neither is modelled (a 1 x 1 case is refused as outside the family).
"""

from __future__ import annotations

import functools
from typing import Mapping

import numpy as np

from ..base import AttrSpec, Contract, OpSpec, TensorSpec, products
from ..families import Window
from ..families.window import pair
from ..registry import register
from . import argmax, pool

GRAD, SELF, MASK, OUT = "gradOutput", "self", "indices", "gradInput"
KERNEL, STRIDE, PADDING, DILATION, CEIL = "kernelSize", "stride", "padding", "dilation", "ceilMode"


def mask_shape(grad: tuple[int, ...], attrs: Mapping) -> tuple[int, ...] | str:
    """The forward's mask shape for a gradOutput shape (..., Ho, Wo): (..., kH kW, (ceil(Ho Wo / 16) + 1) 32); a
    1 x 1 kernel: why it is not modelled."""
    kh, kw = pair(attrs[KERNEL])
    if (kh, kw) == (1, 1):
        return ("kernelSize 1 x 1: the op_api runs MaxPoolGradWithArgmaxV1 on the forward's 5HD bit mask, which this "
                "declaration does not model")
    ho, wo = grad[-2], grad[-1]
    return (*grad[:-2], kh * kw, (-(-(ho * wo) // 16) + 1) * 32)


FAMILY = Window(driver=SELF, grad=GRAD, kernel=KERNEL, stride=STRIDE, padding=PADDING, dilation=DILATION, ceil=CEIL,
                packed=MASK, packed_shape=mask_shape)


def decode(t) -> dict:
    """t with `indices` as the kernel reads them: each block's bytes as little-endian int32, gradOutput's block
    shape."""
    raw = np.asarray(t[MASK], np.int64)
    k = raw.shape[0]
    idx = np.ascontiguousarray((raw & 0xFF).astype(np.uint8).reshape(k, -1)).view("<i4")
    return {**t, MASK: idx.astype(np.int64).reshape(np.shape(t[GRAD]))}


def encode(idx: np.ndarray) -> np.ndarray:
    """Indices (k, Ho, Wo) as the mask's blocks: int32 little-endian bytes, (k, 1, 4 Ho Wo) int8."""
    k = idx.shape[0]
    return np.ascontiguousarray(np.asarray(idx, "<i4").reshape(k, -1)).view(np.int8).reshape(k, 1, -1)


def _decoded(fn):
    """fn on the decoded indices (its variant kind kept)."""
    @functools.wraps(fn)
    def wrapped(t, *rest):
        return fn(decode(t), *rest)
    return wrapped


def _functions() -> dict:
    found = argmax.spec_functions(FAMILY, OUT)
    forward = found.pop("derived")[MASK]
    out = {name: _decoded(fn) for name, fn in found.items()}
    out["derived"] = {MASK: lambda t: encode(forward(t))}
    return out


def _attribute_rule(attrs) -> str | None:
    """CheckShape (isMask, A2 and A3), in its order: kernelSize, stride, padding, dilation lengths; kernel > 0,
    stride > 0, padding in [0, kernel / 2], dilation 1."""
    k, s, p, d = (tuple(attrs[n] or ()) for n in (KERNEL, STRIDE, PADDING, DILATION))
    if len(d) not in (1, 2):
        return f"dilation {list(d)}: 1 or 2 values"
    problem = pool.lists_rule(k, s, p)
    if problem:
        return problem
    if pair(d) != (1, 1):
        return f"dilation {list(d)}: only 1"
    return None


def _null_rule(descs, attrs) -> str | None:
    """The entry's own check before CheckParams: a kernelSize of another length than 1 or 2 returns 161001."""
    k = tuple(attrs[KERNEL] or ())
    return None if len(k) in (1, 2) else f"kernelSize {list(k)}: 1 or 2 values (the entry returns 161001)"


def _shape_rule(descs, attrs) -> str | None:
    """CheckFormat: each tensor 3-d or 4-d; gradInput self's shape (the mask's shape is not checked)."""
    g, s, i, o = (tuple(descs[n].shape) for n in (GRAD, SELF, MASK, OUT))
    for name, shape in zip((SELF, OUT, GRAD, MASK), (s, o, g, i)):
        if len(shape) not in (3, 4):
            return f"{name} {list(shape)}: 3D or 4D expected"
    if s != o:
        return f"gradInput shape {list(o)} is not self's {list(s)}"
    if min(s[-3:]) == 0:
        return f"self {list(s)}: C, H and W must not be 0"
    return None


SPEC = register(OpSpec(
    name="aclnnMaxPool2dWithMaskBackward",
    key="max_pool2d_with_mask_backward",
    header="aclnnop/aclnn_max_pool2d_with_indices_backward.h",
    signature=(GRAD, SELF, MASK, KERNEL, STRIDE, PADDING, DILATION, CEIL, OUT),
    summary="Gradient of 2-D max pooling from the forward's mask: each window's gradient goes to the position of its "
            "maximum (the argmax the mask's buffer holds as int32), added where windows overlap.",
    formula="gradInput[n, c, p] = sum over windows (oh, ow) whose argmax (int32 n C Ho Wo + c Ho Wo + oh Wo + ow of "
            "the mask's bytes) is p of gradOutput[n, c, oh, ow]",
    tensors=(
        TensorSpec(GRAD, "input", {"normal": [0, 1]}, formats={3: "NCL", 4: "NCHW"}),
        TensorSpec(SELF, "input", {"normal": [0, 1]}, read_by_kernel=False, formats={3: "NCL", 4: "NCHW"}),
        TensorSpec(MASK, "input", {"derived": True}, dtypes=("int8",), formats={3: "NCL", 4: "NCHW"}),
        TensorSpec(OUT, "output", {"constant": 0}, formats={3: "NCL", 4: "NCHW"}),
    ),
    attributes=(AttrSpec(KERNEL, "int_list"), AttrSpec(STRIDE, "int_list", default=()),
                AttrSpec(PADDING, "int_list", default=(0,)), AttrSpec(DILATION, "int_list", default=(1,)),
                AttrSpec(CEIL, "bool", default=False)),
    products=products("A3", "A2"),
    dims=(3, 4),
    empty_ok=False,
    family=FAMILY,
    **_functions(),
    variants={name: _decoded(fn) for name, fn in argmax.variants(FAMILY, "maxpool-mask").items()},
    contract=Contract(dtypes="same", attribute_rule=_attribute_rule, shape_rule=_shape_rule, null_rule=_null_rule),
    special_values="The doc supports no NaN or -inf input; IEEE: an inf or NaN in gradOutput reaches the position its "
                   "window's index names (inf - inf in one sum gives NaN).",
))

