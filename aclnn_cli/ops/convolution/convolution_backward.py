"""aclnnConvolutionBackward: gradInput, gradWeight and gradBias of a 1-D, 2-D or 3-D convolution (outputMask).

    gradInput[n, c, i]  = sum over co of the group, taps j with o s - p + j d = i of gradOutput[n, co, o] w[co, c', j]
    gradWeight[co, c', j] = sum over n, o of input[n, c, o s - p + j d] gradOutput[n, co, o]
    gradBias[co]        = sum over n, o of gradOutput[n, co, o]

hicann/ops-nn conv/convolution_backward/docs/aclnnConvolutionBackward.md: gradOutput, input, weight float32, float16,
bfloat16 (950, A3, A2), NCL, NCHW or NCDHW; stride, padding, dilation one value per spatial axis (padding also 4 in
2-D), outputPadding all 0 unless transposed; groups in [1, 65535] with groups x weight's C = input's C; outputMask three
bools; cubeMathType 0-3. op_api/convolution_backward_checker.cpp (CheckParams): nulls (161001; an outputMask entry
true beside a null output too), dtypes (gradInput = input's, gradWeight = weight's, gradBias = gradOutput's on the
950), formats, CheckConvParams, cubeMathType, CheckConvShape, CheckConvChannelAndGroup, CheckConvShapePlus (gradOutput
the forward's size).

The device (op_api/aclnn_convolution_backward.cpp): gradInput by Conv{2,3}DBackpropInput and gradWeight by
Conv{2,3}DBackpropFilter*2Fp32 on the cube (products into a float32 L0C, rounded once to the output dtype), gradBias by
ReduceSum over (N, spatial) of gradOutput (float32 accumulation on the 950), 1-D as 2-D with H = 1. Emulated as the
lowering of ops/convolution/conv_lowering.py on the cube of ops/contraction/cube.py (mmad steps of 16 along K, splitKRound
rounds of 8192): gradInput's K is tap outer, output channel inner (the fractal's C0 along channels), gradWeight's and
gradBias's K sample outer, position inner. How the kernels tile K beyond that is not in the sources: any contiguous
order is a correct kernel (legitimate variants) and the allowance holds for every order.

transposed = true (PyTorch's conv_transpose, weight (Cin, Cout / groups, ...)): the forward is the input gradient of
the convolution whose input has gradOutput's shape and whose output has input's (`conv_of`), so gradInput is that
convolution's forward (conv_lowering.forward), gradWeight its weight gradient with input and gradOutput exchanged, and
gradBias the sum of gradOutput over its Cout channels; emulated on the same cube (the op_api's
Conv{2,3}DBackpropFilter with the operands exchanged and a forward convolution).

A 2-D padding of 4 values is (up, down, left, right) (convolution_backward_checker.h kPadding4UpIdx ...): the
near sides place the taps, both sides the forward's size. Not here yet: that padding with transposed = true (refused
when a case loads, naming why), mixed dtypes (promotion), empty tensors, the 8-bit dtypes of the transposed path, the
910 and 310P products, an operand or a result past float16's range under cubeMathType 2.

cubeMathType 2 (USE_FP16) on operands that are not all float16 (`_fp16`): the op_api casts gradOutput, input and
weight to float16 (InputPreProcess, line 583 at ops-nn e5c3fa93; bfloat16 too), so the cube gradients take float16
operands, and gradInput leaves the cube as float16 (then cast to its dtype); gradBias is summed before the casts, from
gradOutput as it is. Emulated so, and in the allowance (`_math_type_terms`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...tensor.dtypes import BFLOAT16, FLOAT16
from ..base import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, legitimate, narrow_blocks, products
from ..contraction.dots import SLACK
from ..families.convolution import WIDE_OPERANDS, Convolution, padding_sides, shape_of, shape_values, spatial_list
from ..registry import register
from . import conv_cube as C
from . import conv_elements as E
from . import conv_lowering as L
from .conv_rules import (BIAS_SIZES, DILATION, GB, GI, GRAD, GROUPS, GW, MASK, MATH, OUT_PAD, OUTPUTS, PADDING, STRIDE,
                         TRANSPOSED, W, X, attribute_rule, shape_rule)

FAMILY = Convolution(driver=X)
HF32 = 2.0**-9 + 2.0**-20  # float32 operands as HFLOAT32 (11 bits): |dA||B| + |A||dB| + |dA||dB| <= this |A||B|
USE_FP16 = 2  # cubeMathType: every operand cast to float16 (the op_api's InputPreProcess)
FP16_MIN_NORMAL, FP16_MAX = 2.0**-14, 65504.0
FP16_HALF_ULP, FP16_TINY = 2.0**-11, 2.0**-25  # a rounding to float16: relative, and below its normal range


def conv_of(t) -> L.Conv:
    """The case's convolution from the blocks' case values and attributes. Transposed, the convolution whose input
    gradient the forward is: its input gradOutput's shape, its output input's (conv_transpose(x, w) is that
    convolution's gradInput of x), so every gradient below is one of its lowerings."""
    x, w, g = shape_of(t, X), shape_of(t, W), shape_of(t, GRAD)
    sp = len(x) - 2
    inner, outer = (g, x) if t[TRANSPOSED] else (x, g)
    return L.Conv(n=x[0], cin=inner[1], cout=w[0], groups=int(t[GROUPS]), sizes=inner[2:], out=outer[2:],
                  kernel=w[2:], stride=spatial_list(t[STRIDE], sp, 1),
                  padding=tuple(lo for lo, _ in padding_sides(t[PADDING], sp)),  # (the sizes carry the far side's)
                  dilation=spatial_list(t[DILATION], sp, 1))


def lowered(t, conv=None, x=None, w=None, gy=None, dtype=np.float64, bias_gy=None, names=OUTPUTS,
            stored: bool = False) -> dict:
    """Each output's lowering (conv_lowering) of `names`, from the blocks in t unless arrays are given, its pieces in
    `dtype`; stored: the arrays are taken in their own float dtypes (gen's blocks as stored: no float64 copy of
    them). Transposed: gradInput the forward convolution of gradOutput with the weight, gradWeight the correlation
    of gradOutput with input."""
    conv = conv or conv_of(t)
    x, w, gy, bias_gy = (np.asarray(t[n] if a is None else a, None if stored else dtype)
                         for n, a in ((X, x), (W, w), (GRAD, gy), (GRAD, bias_gy)))
    if t[TRANSPOSED]:
        make = {GI: lambda: L.forward(conv, w, gy, dtype), GW: lambda: L.GradWeight(conv, gy, x, dtype),
                GB: lambda: L.GradBias(bias_gy, conv.n, conv.cin, conv.pin, dtype)}
    else:
        make = {GI: lambda: L.grad_input(conv, w, gy, dtype), GW: lambda: L.GradWeight(conv, x, gy, dtype),
                GB: lambda: L.GradBias(bias_gy, conv.n, conv.cout, conv.pout, dtype)}
    return {name: make[name]() for name in names}


def _piece(t, name: str, flat: np.ndarray) -> np.ndarray:
    """A tensor's flat elements as its one block (1, R, last)."""
    return flat.reshape(_block_shape(t, name))


def _block_shape(t, name: str) -> tuple[int, ...]:
    """A tensor's one block's shape (1, R, last)."""
    shape = {GI: shape_of(t, X), GW: shape_of(t, W), GB: shape_of(t, GRAD)[1:2]}[name]
    return (1, int(np.prod(shape[:-1], dtype=np.int64)), shape[-1])


def _reference(t) -> dict:
    """Per output: the lowering's float64 value, bound gamma_K |L|.|R|, scale |L|.|R| and the allowance of a float32
    accumulation from each element's taps (conv_lowering.reference), with what cubeMathType's rounding adds
    (`_math_type_terms`; gradBias is no cube product)."""
    lows, reach, out = lowered(t), _fp16_reach(t, L.magnitude), {}
    for name, low in lows.items():
        value, bound, scale, allowance = L.reference(low, 0 if name == GB else L.PRODUCT_ROUNDINGS)
        allowance = _math_type_terms(t, name, value, bound, scale, allowance, reach)
        out[name] = Reference(*(_piece(t, name, low.flat(a)) for a in (value, bound, scale)),
                              allowance=_piece(t, name, low.flat(allowance)))
    return out


class _Golden(Mapping):
    """golden_reference's outputs, each computed when it is read and not kept: gen settles one output at a time
    (golden/rowsgen), so a ResNet-50 layer's gradInput value and bound (400 MB of float64) are gone before
    gradWeight's lowering is built."""

    def __init__(self, t) -> None:
        self.t = t

    def __getitem__(self, name: str) -> Reference:
        """name's value and bound from its lowering (L.certified, already in the tensor's order), from the blocks
        as stored (every piece widened exactly to float64 as it is gathered). gen reads no scale: it is given as an
        infinity (no array), an upper bound that says nothing."""
        if name not in OUTPUTS:
            raise KeyError(name)
        value, bound = (_piece(self.t, name, a) for a in L.certified(lowered(self.t, names=(name,), stored=True)[name]))
        return Reference(value, bound, np.broadcast_to(np.inf, value.shape))

    def tiles(self, name: str):
        """(the block's shape, per range of output columns (flat positions in the tensor's order, Reference of value
        and bound there)): what golden/rowsgen settles tile by tile, so gen holds one tile's float64 arrays, never
        a whole output's (L.certified_tiles: the same bits as the whole `certified`)."""
        if name not in OUTPUTS:
            raise KeyError(name)
        low = lowered(self.t, names=(name,), stored=True)[name]
        return _block_shape(self.t, name), ((at, Reference(v, b, np.broadcast_to(np.inf, v.shape)))
                                            for at, v, b in L.certified_tiles(low))

    def __iter__(self):
        return iter(OUTPUTS)

    def __len__(self) -> int:
        return len(OUTPUTS)


@narrow_blocks
def _golden_reference(t) -> Mapping:
    """What gen certifies the goldens with: each output's value and bound, computed as gen reads it (`_Golden`)."""
    return _Golden(t)


_LAST: list = []  # [(weak references to the operand arrays, the convolution, {kind: lowerings})]: the last case's


def _lowered_once(t, kind: str = "values", arrays=dict) -> dict:
    """`lowered(t, **arrays(), stored=True)`, kept for the next call on the same operand arrays: verify's relief
    asks for a few elements at a time, chunk after chunk of one case (a ResNet-50 layer's gradInput: 101 calls).
    Single elements read the operands as given (conv_lowering.Lowered.rows, columns): no copy of them is made."""
    kept = L.kept_for(_LAST, tuple(t[n] for n in (X, W, GRAD)), (conv_of(t), bool(t[TRANSPOSED])), dict)
    if kind not in kept:
        kept[kind] = lowered(t, **arrays(), stored=True)
    return kept[kind]


@narrow_blocks
def _reference_at(t, wanted) -> dict:
    """`_reference` of single elements (verify's relief of a few flagged ones), each from its own products, from
    the blocks as stored (ops/base.narrow_blocks: each term widened to float64 as it is gathered)."""
    lows, out = _lowered_once(t), {}
    for name, where in wanted.items():
        reach = _fp16_reach(t, lambda low: E.magnitude_at(low, where), only=name, lower=_lowered_once)
        value, bound, scale, allowance = E.reference_at(lows[name], where, 0 if name == GB else L.PRODUCT_ROUNDINGS)
        out[name] = Reference(value, bound, scale,
                              allowance=_math_type_terms(t, name, value, bound, scale, allowance, reach))
    return out


def _fp16(t) -> bool:
    """cubeMathType 2 on operands that are not all float16: the op_api casts gradOutput, input and weight to float16
    for the cube (InputPreProcess, after gradBias's ReduceSum has read gradOutput as it is)."""
    return int(t.get(MATH, 0)) == USE_FP16 and bool(np.asarray(t.get(WIDE_OPERANDS, 1)).reshape(-1)[:1].all())


def _rounded_through(attrs, dtypes, shapes) -> dict:
    """cubeMathType 2 on operands not all float16: gradInput and gradWeight are float16's precision at best (float16
    operands, gradInput's result through float16), and that dtype's thresholds judge them; gradBias is as it was."""
    if int(attrs.get(MATH, 0)) != USE_FP16 or all(dtypes[n].name == "float16" for n in (X, W, GRAD)):
        return {}
    return {GI: FLOAT16, GW: FLOAT16}


def _fp16_reach(t, magnitude, only: str | None = None, lower=None) -> dict:
    """Under `_fp16`, per cube gradient: (|L| + d(L)).(|R| + d(R)), from which the operands' cast to float16 can move
    each element by at most that less |L|.|R| (the reference's scale): sum |dL||R| + |L||dR| + |dL||dR|, term by term.
    The cast rounds to nearest (the Cast operator's CAST_NONE: rint where precision is lost), moving v by at most
    d(v) = FP16_HALF_ULP (|v| + 2^-14), plus |v| - FP16_MAX where a saturating cast clamps it; the padding's taps stay
    zeros. {} where float16 holds every operand value (float16 values, and bfloat16 ones in its range).
    lower(t, kind, arrays): lowered(t, **arrays()) (`_lowered_once` keeps them)."""
    if not _fp16(t) or all(_fp16_exact(t[n]) for n in (X, W, GRAD)):
        return {}
    lower = lower or (lambda t, kind, arrays: lowered(t, **arrays()))

    def moved() -> dict:
        out = {}
        for key, n in (("x", X), ("w", W), ("gy", GRAD)):
            a = np.abs(np.asarray(t[n], np.float64))
            out[key] = a + FP16_HALF_ULP * (a + FP16_MIN_NORMAL) + np.maximum(a - FP16_MAX, 0.0)
        return out
    lows = lower(t, "moved", moved)
    return {name: magnitude(low) for name, low in lows.items() if name != GB and only in (None, name)}


def _math_type_terms(t, name: str, value, bound, scale, allowance, reach: dict):
    """The allowance with cubeMathType's roundings of a cube gradient (gradInput, gradWeight): 1 or 3 on float32
    operands, the HFLOAT32 rounding of every operand (HF32 of |L|.|R|); 2 on operands not all float16, their float16
    rounding (`_fp16_reach` less the scale |L|.|R|) and the result's through float16 (half a float16 ulp of |value| +
    bound + what the operands moved, or FP16_TINY below its normal range). gradInput leaves the cube as float16
    (Conv*BackpropInputFp162Fp16, Conv*dFp16); gradWeight as float32 (Conv*BackpropFilterFp162Fp32), but through a
    matmul where the op_api lowers it to one, whose result is float16 under USE_FP16 (ExecBatchMatmulOp): the
    allowance takes the result's rounding for both."""
    if name == GB:
        return allowance
    math_type = int(t.get(MATH, 0))
    if math_type in (1, 3) and not all(_eleven_bits(t[n]) for n in (X, W, GRAD)):
        return allowance + HF32 * SLACK * scale
    if _fp16(t):
        moved = np.maximum(reach[name] * SLACK - scale / SLACK, 0.0) if name in reach else 0.0
        with_operands = allowance + moved
        return with_operands + (FP16_HALF_ULP * (np.abs(value) + bound + with_operands) + FP16_TINY) * SLACK
    return allowance


def _fp16_exact(values) -> bool:
    """Whether float16 holds every value (float16 values, and bfloat16 ones within its range and precision)."""
    v = np.asarray(values, np.float64)
    with np.errstate(all="ignore"):
        return bool(np.all((v.astype(np.float16).astype(np.float64) == v) | np.isnan(v)))


def _eleven_bits(values) -> bool:
    """Whether every value has at most 11 significant bits (float16 and bfloat16 values do): HFLOAT32 keeps them."""
    m, _ = np.frexp(np.asarray(values, np.float64))
    return bool(np.all(np.ldexp(m, 11) == np.trunc(np.ldexp(m, 11))))


def _case_values(shapes) -> dict:
    return shape_values(X, W, GRAD)(shapes)


@narrow_blocks
def _exact_at(t, wanted) -> dict:
    """The exact values of the wanted elements, from the lowerings of the outputs asked for only (gen's fallback
    asks for one output at a time), from the blocks as stored (each product formed from float64 operands)."""
    lows = lowered(t, names=tuple(wanted), stored=True)
    return {name: E.exact_at(lows[name], np.asarray(where, np.int64)) for name, where in wanted.items()}


def _exact(t) -> dict:
    """Every element exactly (Fractions in: each a float value, so float64 holds it exactly)."""
    as_float = {n: np.asarray(t[n], dtype=np.float64) for n in (X, W, GRAD)}
    lows = lowered(t, x=as_float[X], w=as_float[W], gy=as_float[GRAD], bias_gy=as_float[GRAD])
    out = {}
    for name, low in lows.items():
        size = low.g * low.m * low.c
        out[name] = _piece(t, name, E.exact_at(low, np.arange(size)))
    return out


def _compute(t, conv=None, x=None, w=None, gy=None, ranges=None, order=None, dtype=np.float32, bias_gy=None) -> dict:
    """The float32 kernel over the lowering: cube accumulation per output (conv_cube.accumulate). Under `_fp16`
    the cube's operands are float16 (rounded to nearest) and gradInput leaves it as float16; gradBias reads
    gradOutput as it is."""
    fp16 = _fp16(t)
    if fp16:
        x, w, gy = (_to_fp16(t[n] if a is None else a) for n, a in ((X, x), (W, w), (GRAD, gy)))
    lows = lowered(t, conv, x, w, gy, np.float32, bias_gy)
    out = {}
    for name, low in lows.items():
        r = ranges(low.k) if ranges else None
        o = order(len(r)) if order and r else None
        result = low.flat(C.accumulate(low, r, o, dtype))
        out[name] = _piece(t, name, _to_fp16(result) if fp16 and name == GI else result)
    return out


def _to_fp16(values) -> np.ndarray:
    """float32 values rounded to float16 (to nearest, past its largest to inf), as float32."""
    with np.errstate(over="ignore"):
        return np.asarray(values, np.float32).astype(np.float16).astype(np.float32)


def _ieee(t) -> dict:
    """Where an input is inf or NaN: the lowering's float64 sums (IEEE: an inf meeting a 0 gives NaN), each element's
    float64 value as its golden, as BatchMatMul's dots.ieee."""
    return {name: _piece(t, name, low.flat(L.reference(low)[0])) for name, low in lowered(t).items()}


def _kernel(t) -> dict:
    """The 950's cube: mmad steps of 16 along K into L0C in float32, rounds of at most 8192 added in order."""
    return _compute(t)


@legitimate
def _split_k(t):
    """Legitimate: K split into 8 contiguous ranges (cores), the partials added in a shuffled order."""
    return _compute(t, ranges=C.split_ranges, order=lambda n: np.random.default_rng(0).permutation(n))


@legitimate
def _reversed_rounds(t):
    """Legitimate: K in 64 contiguous ranges added last first."""
    return _compute(t, ranges=lambda k: C.split_ranges(k, 64), order=lambda n: range(n - 1, -1, -1))


@defect
def _flipped_kernel(t):
    """Defect: gradInput with the weight's taps flipped along every spatial axis (a kernel rotating the weight where
    the lowering must not)."""
    w = np.asarray(t[W], np.float32).reshape(shape_of(t, W))
    flipped = w[(slice(None), slice(None), *(slice(None, None, -1),) * (w.ndim - 2))]
    return {**_compute(t), GI: _compute(t, w=flipped.reshape(np.shape(t[W])))[GI]}


@defect
def _padding_row_dropped(t):
    """Defect: the first spatial axis's padding taken one less (a padding row dropped: every tap read a row off)."""
    return _compute(t, conv=C.with_padding_dropped(conv_of(t)))


@defect
def _groups_ignored(t):
    """Defect: the group's channel offset ignored: every group reads group 0's input and gradOutput channels."""
    groups = int(t[GROUPS])

    def first_group(name):
        a = np.asarray(t[name], np.float32).reshape(shape_of(t, name))
        return np.concatenate([a[:, :a.shape[1] // groups]] * groups, axis=1).reshape(np.shape(t[name]))
    return _compute(t, x=first_group(X), gy=first_group(GRAD), bias_gy=t[GRAD])


@defect
def _bias_one_sample(t):
    """Defect: gradBias summed over the first sample only."""
    gy = np.asarray(t[GRAD], np.float32).reshape(shape_of(t, GRAD)).copy()
    gy[1:] = 0
    return {**_compute(t), GB: _compute(t, bias_gy=gy.reshape(np.shape(t[GRAD])))[GB]}


def _whole_k(k: int) -> list[tuple[int, int]]:
    return [(0, k)]


@defect
def _fp16_accumulation(t):
    """Defect: every output accumulated in float16 (L0C in 16 bits over the whole K), mmad step by step."""
    return _compute(t, ranges=_whole_k, dtype=np.float16)


@defect
def _bf16_accumulation(t):
    """Defect: every output accumulated in bfloat16 over the whole K, mmad step by step."""
    return _compute(t, ranges=_whole_k, dtype=BFLOAT16.np_dtype)


VARIANTS = {"conv-split-k": _split_k, "conv-reversed-rounds": _reversed_rounds, "conv-flipped-kernel": _flipped_kernel,
            "conv-padding-row-dropped": _padding_row_dropped, "conv-groups-ignored": _groups_ignored,
            "conv-bias-one-sample": _bias_one_sample, "conv-fp16-accumulation": _fp16_accumulation,
            "conv-bf16-accumulation": _bf16_accumulation}


SPEC = register(OpSpec(
    name="aclnnConvolutionBackward",
    key="convolution_backward",
    header="aclnnop/aclnn_convolution_backward.h",
    signature=(GRAD, X, W, BIAS_SIZES, STRIDE, PADDING, DILATION, TRANSPOSED, OUT_PAD, GROUPS, MASK, MATH, GI, GW, GB),
    summary="Gradients of a 1-D, 2-D or 3-D convolution, transposed or not (stride, padding, dilation, groups): "
            "gradInput, gradWeight and gradBias as outputMask asks.",
    formula="gradInput = gradOutput convolved back through weight; gradWeight[co, c, j] = sum over n, o of "
            "input[n, c, o s - p + j d] gradOutput[n, co, o]; gradBias[co] = sum over n, o of gradOutput[n, co, o]",
    tensors=(
        TensorSpec(GRAD, "input", {"normal": [0, 1]}, formats={3: "NCL", 4: "NCHW", 5: "NCDHW"}),
        TensorSpec(X, "input", {"normal": [0, 1]}, formats={3: "NCL", 4: "NCHW", 5: "NCDHW"}),
        TensorSpec(W, "input", {"normal": [0, 1]}, formats={3: "NCL", 4: "NCHW", 5: "NCDHW"}),
        TensorSpec(GI, "output", {"constant": 0}, optional=True, formats={3: "NCL", 4: "NCHW", 5: "NCDHW"}),
        TensorSpec(GW, "output", {"constant": 0}, optional=True, formats={3: "NCL", 4: "NCHW", 5: "NCDHW"}),
        TensorSpec(GB, "output", {"constant": 0}, optional=True),
    ),
    attributes=(AttrSpec(BIAS_SIZES, "int_list", default=()), AttrSpec(STRIDE, "int_list"),
                AttrSpec(PADDING, "int_list"), AttrSpec(DILATION, "int_list"),
                AttrSpec(TRANSPOSED, "bool", default=False), AttrSpec(OUT_PAD, "int_list"),
                AttrSpec(GROUPS, "int", default=1), AttrSpec(MASK, "bool_list", default=(True, True, True)),
                AttrSpec(MATH, "int", default=0)),
    products=products("950", "A3", "A2"),
    dims=(1, 5),
    empty_ok=False,
    family=FAMILY,
    case_values=_case_values,
    reference=_reference,
    golden_reference=_golden_reference,
    exact=_exact,
    exact_at=_exact_at,
    reference_at=_reference_at,
    kernel=_kernel,
    ieee=_ieee,
    rounded_through=_rounded_through,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", attribute_rule=attribute_rule, shape_rule=shape_rule),
    special_values="The doc defines none; IEEE sums of products: an inf meeting a 0 gives NaN, infinities of both "
                   "signs in one sum give NaN, and a NaN reaches every element whose sum holds it.",
))
