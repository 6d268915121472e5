"""aclnnConvTbcBackward: gradInput, gradWeight and gradBias of a 1-D convolution over time-batch-channel tensors.

    gradInput[t, b, ci]   = sum over k, co of self[t - k + pad, b, co] weight[k, ci, co]
    gradWeight[k, ci, co] = sum over b, t of input[t + k - pad, b, ci] self[t, b, co]
    gradBias[co]          = sum over t, b of self[t, b, co]

hicann/ops-nn conv/convolution_backward/docs/aclnnConvTbcBackward.md and op_api/convtbc_backward_checker.cpp
(CheckTbcParams): self (To, B, Cout), input (T, B, Cin), weight (K, Cin, Cout), bias (Cout) float32, float16, bfloat16
(950, A3, A2), all one dtype (the doc's 161002), ND or NCL (bias ND); no null (161001); self not empty; dims 3, 3, 3, 1
(outputs 3, 3, 1); input[2] = weight[1], bias[0] = weight[2], pad >= 0, To = T + 2 pad + 1 - K >= 0 and self (To, B,
Cout); each output its input's shape (gradBias bias's); cubeMathType 0-3 (cube_util's CheckCubeMathType, as
ConvolutionBackward's). bias's values are never read: it gives gradBias's shape and dtype.

The device (op_api/aclnn_convolution_backward.cpp, aclnnConvTbcBackwardGetWorkspaceSize) computes the three
gradients as ConvolutionBackward does (outputMask all true, stride 1, dilation 1, groups 1), on the tensors laid out
anew: on the 950 (IsRegbase: CalculateConvolutionTbcBackwardBy3D) a 3-D convolution of one sample, [1, 1, T, B, C]
NDHWC (C, D = 1, H = T, W = B) with a (1, K, 1) kernel and padding (0, pad, 0); on the A2 and A3
(CalculateConvolutionTbcBackward) the NCL convolution of self and input permuted (1, 2, 0), weight (2, 1, 0). Each is
a case of the bundled aclnnConvolutionBackward (`frame`), whose reference, goldens, exact values, kernel and variants
this op runs on it, its results permuted back (`_back`): nothing is computed here. The kernel is the 950's (By3D);
the A2/A3 NCL lowering sums gradWeight's and gradBias's K in another order (sample outer, not time outer), a
legitimate variant, within the same allowance (K's terms are the same products).

Not here yet: empty tensors (the op_api's empty path fills gradBias with B x To, CalculateConvolutionTbcBackward-
WithEmpty, not the doc's sum of self, so no golden is both), mixed dtypes, HIFLOAT8 / FLOAT8 gradWeight (950), the
910 product.
"""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np

from ..base import AttrSpec, Contract, OpSpec, TensorSpec, defect, legitimate, products
from ..convolution import conv_lowering as L
from ..convolution import convolution_backward as CB
from ..families.convolution import WIDE_OPERANDS, Tbc, shape_of, shape_values
from ..registry import register

SELF, X, W, BIAS, GI, GW, GB, PAD, MATH = (
    "self", "input", "weight", "bias", "gradInput", "gradWeight", "gradBias", "pad", "cubeMathType")
FAMILY = Tbc(driver=X)
BY_3D = (2, 0, 1)  # the 950: (T, B, C) as (C, T, B), the [1, C, 1, T, B] of one sample
NCL = (1, 2, 0)  # the A2 and A3: (T, B, C) as (B, C, T)
WEIGHT = (2, 1, 0)  # (K, Cin, Cout) as (Cout, Cin, K) in both, its own inverse


def frame(t, data=BY_3D) -> dict:
    """The aclnnConvolutionBackward case the op_api lowers this one to (`data`: BY_3D or NCL): its operand blocks,
    attributes and shapes, as convolution_backward's functions read them."""
    pad = int(t[PAD])
    x, w, g = (np.asarray(t[n]).reshape(shape_of(t, n)) for n in (X, W, SELF))
    if data == BY_3D:
        arrays = {CB.X: x.transpose(data)[None, :, None], CB.GRAD: g.transpose(data)[None, :, None],
                  CB.W: w.transpose(WEIGHT)[:, :, None, :, None]}
        padding = (0, pad, 0)
    else:
        arrays = {CB.X: x.transpose(data), CB.GRAD: g.transpose(data), CB.W: w.transpose(WEIGHT)}
        padding = (pad,)
    ones = (1,) * len(padding)
    out = {n: np.ascontiguousarray(a).reshape(1, -1, a.shape[-1]) for n, a in arrays.items()}
    out |= shape_values(CB.X, CB.W, CB.GRAD)({n: a.shape for n, a in arrays.items()})
    out |= {CB.STRIDE: ones, CB.PADDING: padding, CB.DILATION: ones, CB.TRANSPOSED: False,
            CB.OUT_PAD: (0,) * len(padding), CB.GROUPS: 1, CB.MASK: (True, True, True), CB.MATH: int(t.get(MATH, 0)),
            CB.BIAS_SIZES: ()}
    if WIDE_OPERANDS in t:
        out[WIDE_OPERANDS] = t[WIDE_OPERANDS]
    return out


def _back(t, name: str, a: np.ndarray, data=BY_3D) -> np.ndarray:
    """An output of the lowered case (its element order) in this op's layout, as its one block (1, R, last)."""
    x, w = shape_of(t, X), shape_of(t, W)
    if name == GI:
        lowered = tuple(x[i] for i in data)
        a = np.asarray(a).reshape(lowered).transpose(np.argsort(data))
    elif name == GW:
        a = np.asarray(a).reshape(tuple(w[i] for i in WEIGHT)).transpose(WEIGHT)
    a = np.asarray(a).reshape(-1)
    return a.reshape(1, -1, (x if name == GI else w)[-1])


def _backs(t, got: dict, data=BY_3D) -> dict:
    """`_back` of every output, of arrays or of References (each field that is an array)."""
    out = {}
    for name, v in got.items():
        if isinstance(v, np.ndarray):
            out[name] = _back(t, name, v, data)
        else:
            out[name] = replace(v, **{f.name: _back(t, name, getattr(v, f.name), data)
                                      for f in fields(v) if getattr(v, f.name) is not None})
    return out


def _positions(t, wanted) -> dict:
    """The flat positions of this op's elements `wanted` in the lowered case's element order."""
    sizes = {GI: shape_of(t, X), GW: shape_of(t, W), GB: shape_of(t, W)[-1:]}
    return {name: _back(t, name, np.arange(int(np.prod(sizes[name]))).astype(np.float64)).reshape(-1)
            [np.asarray(where, np.int64)].astype(np.int64) for name, where in wanted.items()}


_LAST: list = []  # [(weak references to this case's operand arrays, the lowering, its frame)]


def _framed(t, data=BY_3D) -> dict:
    """`frame(t, data)`, the same dict for the same operand arrays (conv_lowering.kept_for): that module keeps
    its lowerings for the next call on the same arrays (verify's relief asks a few elements at a time), so a frame
    made anew at each call would lower the whole case again each time."""
    return L.kept_for(_LAST, tuple(t[n] for n in (X, W, SELF)), data, lambda: frame(t, data))


def _through(fn, data=BY_3D, kind=None):
    """fn (a convolution_backward function of a case) run on this case's lowering, its outputs permuted back;
    kind: the variant kind it is declared (defect, legitimate), with fn's docstring."""
    def run(t):
        return _backs(t, fn(frame(t, data)), data)
    run.__doc__ = fn.__doc__
    return {"defect": defect, "legitimate": legitimate}[kind](run) if kind else run


def _reference_at(t, wanted) -> dict:
    return CB._reference_at(_framed(t), _positions(t, wanted))


def _exact_at(t, wanted) -> dict:
    return CB._exact_at(_framed(t), _positions(t, wanted))


def _rounded_through(attrs, dtypes, shapes) -> dict:
    """convolution_backward's: cubeMathType 2 on operands not all float16 rounds the cube gradients through it."""
    return CB._rounded_through(attrs, {CB.X: dtypes[X], CB.W: dtypes[W], CB.GRAD: dtypes[SELF]}, shapes)


@legitimate
def _ncl_lowering(t):
    """Legitimate: the A2's and A3's lowering (self and input permuted to NCL, B the samples): gradWeight's and
    gradBias's K sample outer, time inner, where the 950's is time outer, sample inner."""
    return _backs(t, CB._kernel(frame(t, NCL)), NCL)


# Each ConvolutionBackward variant that applies (one group: conv-groups-ignored changes nothing), on the NCL lowering
# where the samples are the convolution's N (conv-bias-one-sample) and the padding is T's (conv-padding-row-dropped).
VARIANTS = {"tbc-ncl-lowering": _ncl_lowering,
            **{name: _through(CB.VARIANTS[name], BY_3D, "legitimate")
               for name in ("conv-split-k", "conv-reversed-rounds")},
            **{name: _through(CB.VARIANTS[name], NCL, "defect")
               for name in ("conv-flipped-kernel", "conv-padding-row-dropped", "conv-bias-one-sample",
                            "conv-fp16-accumulation", "conv-bf16-accumulation")}}


def _attribute_rule(attrs) -> str | None:
    """CheckTbcShape's pad >= 0 and CheckTbcCubeMathType's range."""
    if int(attrs[PAD]) < 0:
        return f"pad {attrs[PAD]}: must be >= 0"
    if not 0 <= int(attrs[MATH]) <= 3:
        return f"cubeMathType {attrs[MATH]}: must be 0 (KEEP_DTYPE), 1, 2 or 3"
    return None


def _shape_rule(d, attrs) -> str | None:
    """CheckTbcParams in its order after the dtype and format lists, each 161002: self not empty, then
    CheckTbcShape's dims, input[2] = weight[1], bias[0] = weight[2], To >= 0 and self (To, B, Cout), each output its
    input's shape."""
    if int(np.prod(d[SELF].shape)) == 0:
        return f"self {list(d[SELF].shape)} is empty"
    for name, dims in ((SELF, 3), (X, 3), (W, 3), (BIAS, 1), (GB, 1), (GI, 3), (GW, 3)):
        if len(d[name].shape) != dims:
            return f"{name} has {len(d[name].shape)} dims; it takes {dims}"
    s, x, w, b = (tuple(d[n].shape) for n in (SELF, X, W, BIAS))
    if x[2] != w[1]:
        return f"input's channels {x[2]} are not weight[1] {w[1]}"
    if b[0] != w[2]:
        return f"bias {list(b)} is not weight[2] {w[2]}"
    to = x[0] + 2 * int(attrs[PAD]) + 1 - w[0]
    if to < 0 or s != (to, x[1], w[2]):
        return f"self {list(s)} is not [{to}, {x[1]}, {w[2]}] (input[0] + 2 pad + 1 - weight[0], input[1], weight[2])"
    for name, of in ((GI, X), (GW, W), (GB, BIAS)):
        if tuple(d[name].shape) != tuple(d[of].shape):
            return f"{name} shape {list(d[name].shape)} is not {of}'s {list(d[of].shape)}"
    return None


SPEC = register(OpSpec(
    name="aclnnConvTbcBackward",
    key="conv_tbc_backward",
    header="aclnnop/aclnn_convolution_backward.h",
    signature=(SELF, X, W, BIAS, PAD, MATH, GI, GW, GB),
    summary="Gradients of a 1-D convolution over time-batch-channel (TBC) tensors, padding pad on both sides of T: "
            "gradInput, gradWeight and gradBias.",
    formula="gradInput[t, b, ci] = sum over k, co of self[t - k + pad, b, co] weight[k, ci, co]; gradWeight[k, ci, co] "
            "= sum over b, t of input[t + k - pad, b, ci] self[t, b, co]; gradBias[co] = sum over t, b of self[t, b, co]",
    tensors=(
        TensorSpec(SELF, "input", {"normal": [0, 1]}, formats={3: "ND"}),
        TensorSpec(X, "input", {"normal": [0, 1]}, formats={3: "ND"}),
        TensorSpec(W, "input", {"normal": [0, 1]}, formats={3: "ND"}),
        TensorSpec(BIAS, "input", {"normal": [0, 1]}, formats={1: "ND"}),
        TensorSpec(GI, "output", {"constant": 0}, formats={3: "ND"}),
        TensorSpec(GW, "output", {"constant": 0}, formats={3: "ND"}),
        TensorSpec(GB, "output", {"constant": 0}, formats={1: "ND"}),
    ),
    attributes=(AttrSpec(PAD, "int", default=0), AttrSpec(MATH, "int", default=0)),
    products=products("950", "A3", "A2"),
    dims=(1, 3),
    empty_ok=False,
    family=FAMILY,
    case_values=shape_values(X, W, SELF),
    reference=_through(CB._reference),
    golden_reference=_through(CB._golden_reference),
    exact=_through(CB._exact),
    exact_at=_exact_at,
    reference_at=_reference_at,
    kernel=_through(CB._kernel),
    ieee=_through(CB._ieee),
    rounded_through=_rounded_through,
    variants=VARIANTS,
    contract=Contract(dtypes="same", attribute_rule=_attribute_rule, shape_rule=_shape_rule),
    special_values="The doc defines none; IEEE sums of products: an inf meeting a 0 gives NaN, infinities of both "
                   "signs in one sum give NaN, and a NaN reaches every element whose sum holds it.",
))
