"""aclnnAvgPool3dBackward: the gradient of 3-D average pooling.

    output[n, c, d, h, w] = sum over the windows (od, oh, ow) covering (d, h, w) of gradOutput[n, c, od, oh, ow] / D

hicann/ops-nn pooling/avg_pool3_d_grad/docs/aclnnAvgPool3dBackward.md: gradOutput, self, output float32, float16,
bfloat16 (950, A3, A2; not on 910, 310P or 310B), NCDHW or CDHW (4-5 dims); kernelSize of 1 or 3 values > 0; stride
of 0 (the kernel's), 1 or 3 values > 0 (nullptr refused); padding of 1 or 3 values in [0, kernel / 2]; output self's
shape; gradOutput the forward's pooled size (CheckOutputShape). op_api/aclnn_avgpool3d_backward.cpp: CheckParams
(CheckNotNull, CheckDtypeValid, CheckDimVlid, CheckFormat), then after FillIntArray CheckArrayDataAvgPoolBackWard
and CheckOutputShape. No cubeMathType, no global-pooling Div: every product runs AvgPool3DGrad
(op_api/avgpool3d_backward.cpp, op_kernel/avg_pool3_d_grad.cpp; the 950 has a binary of it, no arch35 kernel).

The kernel (op_kernel/avg_pool3_d_grad_base.h CalcIndex, avg_pool3_d_grad_utils.h CalcIndexW): mulsFactor =
fl32(1 / D) with D divisorOverride, else countIncludePad's poolSize (each axis's window cut at n + p), else the
positions inside the input (ops/window/pool.divisors, the 2-D op's rule per axis); each term fl32(g * mulsFactor)
(Muls), added into a float32 workspace (SetAtomicAdd) window by window, od outer, ow inner; cast once to output's
dtype. The golden is the exact sum rounded once; the allowance the float32 kernel's (pool.reference).
"""

from __future__ import annotations

import numpy as np

from ..base import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..families import Window
from ..families.window import spread
from ..registry import register
from . import pool

GRAD, SELF, OUT = "gradOutput", "self", "output"
KERNEL, STRIDE, PADDING, CEIL, INCLUDE, OVERRIDE = (
    "kernelSize", "stride", "padding", "ceilMode", "countIncludePad", "divisorOverride")
FAMILY = Window(driver=SELF, grad=GRAD, kernel=KERNEL, stride=STRIDE, padding=PADDING, ceil=CEIL, spatial=3)


def _setup(t, include=None, override=None, **_):
    """(the (D, H, W) axes, the divisors (Do, Ho, Wo))."""
    axes = pool.windows(FAMILY, t)
    include = bool(t[INCLUDE]) if include is None else include
    override = int(t[OVERRIDE]) if override is None else override
    return axes, pool.divisors(axes, include, override)


def _grad(t, axes, dtype=np.float64):
    return pool.volume(np.asarray(t[GRAD], dtype), axes, pooled=True)


def _blocks(x: np.ndarray, t) -> np.ndarray:
    """(k, D, H, W) back to the blocks' shape, (k, D H, W) as the family cuts them."""
    return x.reshape(np.shape(t[SELF]))


def _reference(t) -> Reference:
    axes, d = _setup(t)
    parts = pool.reference(_grad(t, axes), axes, d)
    value, bound, scale, allowance = (_blocks(p, t) for p in parts)
    return Reference(value, bound, scale, allowance=allowance)


def _exact_at(t, wanted):
    axes, d = _setup(t)
    return {OUT: pool.exact_at(_grad(t, axes), axes, d, wanted[OUT])}


def _exact(t):
    axes, d = _setup(t)
    return _blocks(pool.exact(pool.volume(t[GRAD], axes, pooled=True), axes, d), t)


def _compute(t, dtype=pool.F32, order: str = "rows", divide: bool = False, last_write: bool = False,
             axes=None, **setup) -> np.ndarray:
    own, d = _setup(t, **setup)
    g = _grad(t, own, dtype)
    with np.errstate(all="ignore"):
        terms = g / d.astype(dtype) if divide else g * (dtype(1) / d.astype(dtype))
    return _blocks(pool.window_sums(terms, axes or own, order, last_write), t)


def _kernel(t):
    """AvgPool3DGrad: float32 terms fl(g * fl(1 / D)) added window by window (od outer, ow inner) into a float32
    workspace."""
    return _compute(t)


def _ieee(t):
    return _compute(t, np.float64, divide=True)


@legitimate
def _reversed(t):
    """Legitimate: each position's windows added in the other order (the last window first; atomic adds in any
    order)."""
    return _compute(t, order="reversed")


@legitimate
def _columns(t):
    """Legitimate: windows added with the W axis outer, D inner."""
    return _compute(t, order="columns")


@legitimate
def _divide(t):
    """Legitimate: each term fl(g / D), one rounding (the 2-D op's 950 kernel divides)."""
    return _compute(t, divide=True)


@defect
def _kernel_size_divisor(t):
    """Defect: every window divided by kD kH kW (the border's clipped or unpadded count ignored)."""
    axes = pool.windows(FAMILY, t)
    return _compute(t, include=True, override=int(t[OVERRIDE]) or int(np.prod([a.k for a in axes])))


@defect
def _last_write_wins(t):
    """Defect: overlapping windows not added, each position keeps its last window's term."""
    return _compute(t, last_write=True)


def _shifted(t, stride: int = 0, pad: int = 0, depth_only: bool = False):
    axes = pool.windows(FAMILY, t)
    moved = tuple(pool.AxisWindows(a.n, a.out, a.k, a.s + stride, a.p + pad) if i == 0 or not depth_only else a
                  for i, a in enumerate(axes))
    return _compute(t, axes=moved)


@defect
def _stride_off_by_one(t):
    """Defect: windows placed with stride + 1."""
    return _shifted(t, stride=1)


@defect
def _padding_off_by_one(t):
    """Defect: windows placed with padding + 1 (every window one position earlier)."""
    return _shifted(t, pad=1)


@defect
def _depth_stride_off_by_one(t):
    """Defect: the depth axis's windows placed with stride + 1 (H and W right: a 2-D kernel's D walk wrong)."""
    return _shifted(t, stride=1, depth_only=True)


VARIANTS = {"avgpool3d-reversed": _reversed, "avgpool3d-columns": _columns, "avgpool3d-divide": _divide,
            "avgpool3d-kernel-size-divisor": _kernel_size_divisor, **pool.divisor_defects("avgpool3d", _compute),
            "avgpool3d-last-write-wins": _last_write_wins, "avgpool3d-stride-off-by-one": _stride_off_by_one,
            "avgpool3d-padding-off-by-one": _padding_off_by_one,
            "avgpool3d-depth-stride-off-by-one": _depth_stride_off_by_one}


def _attribute_rule(attrs) -> str | None:
    """CheckDimVlid's lengths (kernelSize and padding 1 or 3, stride 0, 1 or 3), then CheckArrayDataAvgPoolBackWard
    on the filled arrays: kernel and stride > 0, padding in [0, kernel / 2]."""
    k, s, p = (tuple(attrs[n] or ()) for n in (KERNEL, STRIDE, PADDING))
    if len(k) not in (1, 3):
        return f"kernelSize {list(k)}: 1 or 3 values"
    if len(p) not in (1, 3):
        return f"padding {list(p)}: 1 or 3 values"
    if len(s) not in (0, 1, 3):
        return f"stride {list(s)}: 0, 1 or 3 values"
    kk = spread(k, 3)
    if min(kk) <= 0:
        return f"kernelSize {list(k)}: each > 0"
    if s and min(s) <= 0:
        return f"stride {list(s)}: each > 0"
    pp = spread(p, 3)
    if min(pp) < 0 or any(pi > ki // 2 for pi, ki in zip(pp, kk)):
        return f"padding {list(p)}: each >= 0 and at most half the kernel {list(kk)}"
    return None


def _shape_rule(descs, attrs) -> str | None:
    """gradOutput 4-d or 5-d, self and output its dims; output self's shape (CheckDimVlid)."""
    g, s, o = (tuple(descs[n].shape) for n in (GRAD, SELF, OUT))
    if len(s) != len(g) or len(o) != len(g):
        return f"gradOutput {list(g)}, self {list(s)} and output {list(o)} must have as many dims"
    if s != o:
        return f"output shape {list(o)} is not self's {list(s)}"
    return None


SPEC = register(OpSpec(
    name="aclnnAvgPool3dBackward",
    key="avg_pool3d_backward",
    header="aclnnop/aclnn_avgpool3d_backward.h",
    signature=(GRAD, SELF, KERNEL, STRIDE, PADDING, CEIL, INCLUDE, OVERRIDE, OUT),
    summary="Gradient of 3-D average pooling: each input position sums the gradients of the windows covering it, "
            "each divided by its window's divisor.",
    formula="output[n, c, d, h, w] = sum over windows (od, oh, ow) covering (d, h, w) of gradOutput[n, c, od, oh, ow] "
            "/ D(od, oh, ow)",
    tensors=(
        TensorSpec(GRAD, "input", {"normal": [0, 1]}),
        TensorSpec(SELF, "input", {"normal": [0, 1]}, read_by_kernel=False),
        TensorSpec(OUT, "output", {"constant": 0}),
    ),
    attributes=(AttrSpec(KERNEL, "int_list"), AttrSpec(STRIDE, "int_list", default=()),
                AttrSpec(PADDING, "int_list", default=(0,)), AttrSpec(CEIL, "bool", default=False),
                AttrSpec(INCLUDE, "bool", default=True), AttrSpec(OVERRIDE, "int", default=0)),
    products=products("950", "A3", "A2"),
    dims=(4, 5),
    empty_ok=False,
    family=FAMILY,
    case_values=pool.depths(FAMILY),
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
