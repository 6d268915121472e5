"""aclnnAvgPool2dBackward: the gradient of 2-D average pooling.

    gradInput[n, c, h, w] = sum over the windows (oh, ow) covering (h, w) of gradOutput[n, c, oh, ow] / D(oh, ow)

hicann/ops-nn pooling/avg_pool3_d_grad/docs/aclnnAvgPool2dBackward.md: gradOutput, self, gradInput float32, float16,
bfloat16 (950, A3, A2; no bfloat16 on 910 and 310P), NCHW or NCL (3-d: (C, H, W)), 3-4 dims; kernelSize of 1 or 2
values > 0; stride of 0 (the kernel), 1 or 2 values > 0, nullptr allowed; padding of 1 or 2 values, at most half the
kernel; cubeMathType 0-3; gradInput self's shape. op_api/aclnn_avgpool2d_backward.cpp (CheckParams) checks those
and that gradOutput's dtype is gradInput's; the doc adds self's. gradOutput's planes must be the forward's pooled
size (the tiling's CheckGradShapeForCalculated; the window family refuses any other when the case loads).

On the 950 (IsRegbase) the op_api runs AvgPoolV2Grad (pooling/avg_pool_v2_grad, exclusive = !countIncludePad),
except the global pooling it sends to a Div (IsGlobalAvgPool: no divisorOverride, the kernel the whole plane of at
least 10 x 10, one window): gradOutput / (kH kW) broadcast over the plane, in float16 where cubeMathType is 1 or 2.
The divisor D is ops/window/pool.py's (the SIMT kernel's CycleUpdateGradValue). The golden is the exact sum rounded
once to gradInput's dtype; the allowance is the float32 kernel's, per element from its own terms
(ops/window/pool.py, docs/allowances.md "Windows").
"""

from __future__ import annotations

import numpy as np

from ..base import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..families import Window
from ..registry import register
from . import pool

GRAD, SELF, OUT = "gradOutput", "self", "gradInput"
KERNEL, STRIDE, PADDING, CEIL, INCLUDE, OVERRIDE, MATH = (
    "kernelSize", "stride", "padding", "ceilMode", "countIncludePad", "divisorOverride", "cubeMathType")
FAMILY = Window(driver=SELF, grad=GRAD, kernel=KERNEL, stride=STRIDE, padding=PADDING, ceil=CEIL)
FP16_MATH = (1, 2)  # ALLOW_FP32_DOWN_PRECISION, USE_FP16: the global path's Cast to float16


def _setup(t, include=None, override=None):
    """(H axis, W axis, divisors (Ho, Wo), global path) of the planes in t."""
    ah, aw = pool.windows(FAMILY, t)
    include = bool(t[INCLUDE]) if include is None else include
    override = int(t[OVERRIDE]) if override is None else override
    return ah, aw, pool.divisors((ah, aw), include, override), pool.is_global(ah, aw, int(t[OVERRIDE]))


def _reference(t) -> Reference:
    ah, aw, d, glob = _setup(t)
    fp16 = glob and int(t.get(MATH, 0)) in FP16_MATH
    value, bound, scale, allowance = pool.reference(np.asarray(t[GRAD], np.float64), (ah, aw), d, fp16)
    return Reference(value, bound, scale, allowance=allowance)


def _exact_at(t, wanted):
    ah, aw, d, _ = _setup(t)
    return {OUT: pool.exact_at(np.asarray(t[GRAD], np.float64), (ah, aw), d, wanted[OUT])}


def _exact(t):
    ah, aw, d, _ = _setup(t)
    return pool.exact(t[GRAD], (ah, aw), d)


def _terms(t, d, dtype=pool.F32, reciprocal: bool = False):
    g = np.asarray(t[GRAD], dtype)
    with np.errstate(all="ignore"):
        if reciprocal:
            return g * (dtype(1) / d.astype(dtype))
        return g / d.astype(dtype)


def _compute(t, dtype=pool.F32, order: str = "rows", reciprocal: bool = False, **setup) -> np.ndarray:
    ah, aw, d, glob = _setup(t, **setup)
    if glob and not setup:  # (IsGlobalAvgPool: one Div, gradOutput / (kH kW), broadcast over the plane)
        g = np.asarray(t[GRAD], dtype)
        with np.errstate(all="ignore"):
            if int(t.get(MATH, 0)) in FP16_MATH and dtype == pool.F32:
                q = (g.astype(np.float16).astype(dtype) / dtype(ah.k * aw.k)).astype(np.float16).astype(dtype)
            else:
                q = g / dtype(ah.k * aw.k)
        return np.broadcast_to(q, (g.shape[0], ah.n, aw.n)).copy()
    return pool.window_sums(_terms(t, d, dtype, reciprocal), (ah, aw), order)


def _kernel(t):
    """The 950: AvgPoolV2Grad's SIMT kernel, float32 terms fl(g / D) added window by window (oh outer, ow inner)
    into a float32 gradient, or the global pooling's Div."""
    return _compute(t)


def _ieee(t):
    return _compute(t, np.float64)


@legitimate
def _reversed(t):
    """Legitimate: each position's windows added in the other order (the last window first)."""
    return _compute(t, order="reversed")


@legitimate
def _columns(t):
    """Legitimate: windows added column by column (ow outer), as a scatter over the kernel's offsets may."""
    return _compute(t, order="columns")


@legitimate
def _reciprocal(t):
    """Legitimate: each term gradOutput * fl(1 / D) (the A2 and A3 cube path's mean matrix): two roundings."""
    return _compute(t, reciprocal=True)


@defect
def _kernel_size_divisor(t):
    """Defect: every window divided by kH kW (the border's clipped or unpadded count ignored)."""
    ah, aw = pool.windows(FAMILY, t)
    override = int(t[OVERRIDE])
    d = pool.divisors((ah, aw), True, override or ah.k * aw.k)
    return pool.window_sums(_terms(t, d), (ah, aw))


@defect
def _last_write_wins(t):
    """Defect: overlapping windows not added, each position keeps its last window's term."""
    ah, aw, d, _ = _setup(t)
    return pool.window_sums(_terms(t, d), (ah, aw), last_write=True)


def _shifted(t, stride: int = 0, pad: int = 0):
    ah, aw, d, _ = _setup(t)
    bh = pool.AxisWindows(ah.n, ah.out, ah.k, ah.s + stride, ah.p + pad)
    bw = pool.AxisWindows(aw.n, aw.out, aw.k, aw.s + stride, aw.p + pad)
    return pool.window_sums(_terms(t, d), (bh, bw))


@defect
def _stride_off_by_one(t):
    """Defect: windows placed with stride + 1."""
    return _shifted(t, stride=1)


@defect
def _padding_off_by_one(t):
    """Defect: windows placed with padding + 1 (every window one position to the left)."""
    return _shifted(t, pad=1)


VARIANTS = {"avgpool-reversed": _reversed, "avgpool-columns": _columns, "avgpool-reciprocal": _reciprocal,
            "avgpool-kernel-size-divisor": _kernel_size_divisor, **pool.divisor_defects("avgpool", _compute),
            "avgpool-last-write-wins": _last_write_wins, "avgpool-stride-off-by-one": _stride_off_by_one,
            "avgpool-padding-off-by-one": _padding_off_by_one}


def _attribute_rule(attrs) -> str | None:
    """CheckDimsVaild, CheckPaddingValidAvgPool2D, CheckCubeMathTypeValid (aclnn_avgpool2d_backward.cpp) and, on the
    950, CheckArrayDataAvgPoolBackWard."""
    problem = pool.lists_rule(attrs[KERNEL], attrs[STRIDE], attrs[PADDING])
    if problem:
        return problem
    if int(attrs[MATH]) not in (0, 1, 2, 3):
        return f"cubeMathType {attrs[MATH]} is not 0, 1, 2 or 3"
    return None


def _shape_rule(descs, attrs) -> str | None:
    """gradOutput and gradInput both 3-d or both 4-d; gradInput self's shape (CheckDimsVaild, CheckOutputShape)."""
    g, s, o = (tuple(descs[n].shape) for n in (GRAD, SELF, OUT))
    if len(g) != len(o):
        return f"gradOutput {list(g)} and gradInput {list(o)} must be 3-d or 4-d together"
    if s != o:
        return f"gradInput shape {list(o)} is not self's {list(s)}"
    return None


SPEC = register(OpSpec(
    name="aclnnAvgPool2dBackward",
    key="avg_pool2d_backward",
    header="aclnnop/aclnn_avgpool2d_backward.h",
    signature=(GRAD, SELF, KERNEL, STRIDE, PADDING, CEIL, INCLUDE, OVERRIDE, MATH, OUT),
    summary="Gradient of 2-D average pooling: each input position sums the gradients of the windows covering it, "
            "each divided by its window's divisor.",
    formula="gradInput[n, c, h, w] = sum over windows (oh, ow) covering (h, w) of gradOutput[n, c, oh, ow] / D(oh, ow)",
    tensors=(
        TensorSpec(GRAD, "input", {"normal": [0, 1]}, formats={3: "NCL", 4: "NCHW"}),
        TensorSpec(SELF, "input", {"normal": [0, 1]}, read_by_kernel=False, formats={3: "NCL", 4: "NCHW"}),
        TensorSpec(OUT, "output", {"constant": 0}, formats={3: "NCL", 4: "NCHW"}),
    ),
    attributes=(AttrSpec(KERNEL, "int_list"), AttrSpec(STRIDE, "int_list", default=(), optional=True),
                AttrSpec(PADDING, "int_list", default=(0,)), AttrSpec(CEIL, "bool", default=False),
                AttrSpec(INCLUDE, "bool", default=True), AttrSpec(OVERRIDE, "int", default=0),
                AttrSpec(MATH, "int", default=0)),
    products=products("950", "A3", "A2", "910", "310P",
                      overrides={"910": ("float32", "float16"), "310P": ("float32", "float16")}),
    dims=(3, 4),
    empty_ok=False,
    family=FAMILY,
    reference=_reference,
    exact=_exact,
    exact_at=_exact_at,
    kernel=_kernel,
    ieee=_ieee,
    variants=VARIANTS,
    contract=Contract(dtypes="same", attribute_rule=_attribute_rule, shape_rule=_shape_rule),
    special_values="The doc defines none; IEEE: an inf or NaN in gradOutput reaches every position its window covers "
                   "(inf - inf in one sum gives NaN).",
))
