"""aclnnLayerNormBackward: the gradients of layer norm, from the forward's mean and rstd (given, not recomputed).

Per row (the trailing len(normalizedShape) axes of `input`, N elements), with x̂ = (x - mean) * rstd and
a = gradOut * weight (weight null: ones):
  gradInputOut  = (a - sum(a) / N - x̂ * sum(x̂ a) / N) * rstd
  gradWeightOut = sum over every row of gradOut * x̂,   gradBiasOut = sum over every row of gradOut.
Sums, products and quotients of binary floats are rational, so the exact path is Fractions.

The 950 kernel (hicann/ops-nn norm/layer_norm_grad_v3/op_kernel/arch35/layer_norm_grad_v3_base.h, e5c3fa93),
all in float32 after an exact cast of fp16/bf16 (mean, rstd Cast to fp32 by the op_api):
  Normalize:          x̂ = fl(fl(x - mean) * rstd);  a = fl(dy * gamma)
  s1 = tree sum(a), s2 = tree sum(fl(x̂ * a)) along the row (LastReduceSum, pairwise caches)
  ComputeDxCommon:    dx = fl(fl(fl(fl(fl(a * N_f) - s1) - fl(x̂ * s2)) * fl(1 / N_f)) * rstd), N_f = fl32(N)
  ComputeGammaCommon: gradWeight terms fl(x̂ * dy); gradBias terms dy; both summed over the rows (ReduceSum RA,
                      UpdateCache's pairwise cache), then Cast (RINT) to the output dtype.
"""

from __future__ import annotations

import math

import numpy as np

from ..base import AttrSpec, Contract, FLOATS, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..families import Rows
from ..normgrad import SLACK, TINY, U, as_fractions, dx_exact, dx_exact_at, dx_reference
from ..registry import register
from ..treesum import exact_sum_factor, narrow_running_sum, row_sum64, running_sum, tree_sum

DY, X, MEAN, RSTD, W, B = "gradOut", "input", "mean", "rstd", "weightOptional", "biasOptional"
GI, GW, GB = "gradInputOut", "gradWeightOut", "gradBiasOut"
NORM, MASK = "normalizedShape", "outputMask"


def _axes(shapes, attrs) -> tuple[int, int]:
    """The trailing len(normalizedShape) axes of input (clamped, and none for a null normalizedShape: negative
    cases are shaped too)."""
    ndim = len(shapes[X])
    return max(0, ndim - len(attrs[NORM] or ())), ndim


def _shapes(shape: tuple[int, ...], attrs) -> dict[str, tuple[int, ...]]:
    """mean, rstd [A1..Ai, 1..1] (the doc's shape); weight, bias the normalized axes."""
    n = min(len(attrs[NORM] or ()), len(shape))
    lead, tail = tuple(shape[:len(shape) - n]), tuple(shape[len(shape) - n:])
    return {MEAN: lead + (1,) * n, RSTD: lead + (1,) * n, W: tail, B: tail}


def _parts(t):
    """(dy, a = dy * gamma, x̂, rstd) in the inputs' float type, as Normalize and the gamma multiply compute them."""
    dy, rstd = t[DY], t[RSTD]
    g = t.get(W)
    with np.errstate(all="ignore"):
        a = dy * g if g is not None else dy  # a null weight is Fill(ones): dy * 1 is dy
        return dy, a, (t[X] - t[MEAN]) * rstd, rstd


def _dx(a, xh, rstd, s1, s2, divisor=None):
    """ComputeDxCommon's order: ((a * N_f - s1) - x̂ * s2) * fl(1 / N_f) * rstd."""
    one = a.dtype.type(1)
    n = a.dtype.type(a.shape[1])
    inv = one / (a.dtype.type(divisor) if divisor is not None else n) if a.shape[1] else a.dtype.type(0)
    return (((a * n) - s1) - xh * s2) * inv * rstd


def _compute(t, row_sum=tree_sum, col_sum=tree_sum, dx=_dx, gw_term=None) -> dict:
    """The kernel with replaceable pieces (sums, the dx formula, the gradWeight term) for the variants."""
    dy, a, xh, rstd = _parts(t)
    with np.errstate(all="ignore"):
        s1, s2 = row_sum(a, axis=1), row_sum(xh * a, axis=1)
        gw = gw_term(dy, a, xh) if gw_term is not None else xh * dy
        return {GI: dx(a, xh, rstd, s1, s2), GW: col_sum(gw, axis=0), GB: col_sum(dy, axis=0)}


def _kernel(t) -> dict:
    """The 950 kernel (module docstring), row outputs (k, R, 1) and this block's across-rows partials (1, R, 1)."""
    return _compute(t)


def _reference(t) -> dict:
    """float64 on whole rows: gradInput as ops/normgrad.py derives it (bound (F + 12) u |rstd| T, scale |rstd| T).
    gradWeight: terms dy h within 3.01u of dy X (h = x̂ to 2.01u), pairwise over the k rows: (F_k + 3.02) u
    sum|dy X|; gradBias: terms dy exact, F_k u sum|dy|."""
    dy, a, h, rstd = _parts(t)
    k = a.shape[0]
    value, bound, mag = dx_reference(a, h, rstd)
    w = dy * h
    w_mag, b_mag = row_sum64(np.abs(w), axis=0) * SLACK, row_sum64(np.abs(dy), axis=0)
    fk = exact_sum_factor(k)
    return {GI: Reference(value, bound, mag),
            GW: Reference(row_sum64(w, axis=0), (fk + 3.02) * U * w_mag + (k + 4) * TINY, w_mag),
            GB: Reference(row_sum64(dy, axis=0), fk * U * b_mag, b_mag)}


def _exact(t) -> dict:
    """Fractions: the doc's formula on any k rows (and, for the across-rows pass, any columns)."""
    dy, a, xh, rstd = _parts(t)
    return {GI: dx_exact(a, xh, rstd), GW: (dy * xh).sum(axis=0, keepdims=True), GB: dy.sum(axis=0, keepdims=True)}


def _exact_at(t, wanted) -> dict:
    """`_exact`'s values at a few positions of a block (float64 inputs, exactly widened), without a Fraction per
    element of a long row (ops/normgrad.py, dx_exact_at); inputs it cannot take exactly take `_exact` whole."""
    dy = np.asarray(t[DY], np.float64)
    k, n, a0 = dy.shape
    x, mean, rstd = (np.broadcast_to(np.asarray(t[name], np.float64), dy.shape) for name in (X, MEAN, RSTD))
    a = dy * np.broadcast_to(np.asarray(t[W], np.float64), dy.shape) if t.get(W) is not None else dy
    narrow = all((np.asarray(v, np.float32) == v).all() for v in (dy, t.get(W, 0.0)))
    exact = dx_exact_at(*(np.moveaxis(v, 1, 2).reshape(k * a0, n) for v in (a, x, mean, rstd))) if narrow else None
    if exact is None:
        whole = _exact({**t, **{name: as_fractions(t[name]) for name in (DY, X, MEAN, RSTD, W) if t.get(name) is not None}})
        return {name: np.asarray(whole[name]).reshape(-1)[np.asarray(where, np.int64)] for name, where in wanted.items()}
    out = {}
    for name, where in wanted.items():
        where = np.asarray(where, np.int64).reshape(-1)
        if name == GI:
            i, j, c = np.unravel_index(where, dy.shape)
            values = exact.at(i * a0 + c, j)
        else:  # (columns of an across-rows output: their k terms each)
            j, c = np.divmod(where, a0)
            values = exact.column(dy, j, c, weighted=name == GW)
        out[name] = np.array(values + [None], dtype=object)[:-1]
    return out


def _edge(t) -> dict:
    """gradInput where a float32 intermediate of the kernel overflows (x̂, a * N, a sum, x̂ * s2) while every input
    of the row is finite: the exact result may be finite there; the device value is the float32 kernel's."""
    f32 = {k: v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v for k, v in t.items()}
    dy, a, xh, rstd = _parts(f32)
    k = a.shape[0]
    with np.errstate(all="ignore"):
        s1, s2 = tree_sum(a), tree_sum(xh * a)
        inter = (xh, a * np.float32(a.shape[1]), xh * s2, s1, s2)
        device = _dx(a, xh, rstd, s1, s2).astype(np.float64)
    finite = np.logical_and.reduce([np.isfinite(t[n]).reshape(k, -1).all(axis=1) for n in (DY, X, MEAN, RSTD, W) if n in t])
    over = np.logical_or.reduce([~np.isfinite(v).reshape(k, -1).all(axis=1) for v in inter])
    where = np.broadcast_to((finite & over).reshape(-1, 1, 1), a.shape)
    return {GI: (where, device)}


@defect
def _s2_sign(t):
    """Defect: the x̂ * s2 term added instead of subtracted (a flipped reduction term)."""
    return _compute(t, dx=lambda a, xh, r, s1, s2: _dx(a, xh, r, s1, -s2))


@defect
def _no_mean_term(t):
    """Defect: the mean of dy * gamma (s1) left out of gradInput (a missing reduction term)."""
    return _compute(t, dx=lambda a, xh, r, s1, s2: _dx(a, xh, r, 0 * s1, s2))


@defect
def _sums_across_rows(t):
    """Defect: the wrong axis: s1 and s2 summed down the column (over the rows handed in) instead of along the row."""
    return _compute(t, row_sum=lambda v, axis: np.broadcast_to(tree_sum(v, axis=0), v.shape))


@defect
def _last_axis_only(t):
    """Defect: the wrong axes: with a 2-d or longer normalizedShape, s1 and s2 reduced over its last axis only
    (N kept as the product): what a kernel indexing one axis as the row does."""
    last = int(t[NORM][-1]) if t[NORM] else 0
    if last == 0:
        return _compute(t)

    def partial(v, axis):
        k, n = v.shape[0], v.shape[1]
        groups = v.reshape(k, n // last, last, -1)
        return np.broadcast_to(tree_sum(groups, axis=2), groups.shape).reshape(v.shape)
    return _compute(t, row_sum=partial)


@defect
def _fp16_accumulation(t):
    """Defect: every sum accumulated sequentially in float16 (stalls once the running sum outgrows the terms'
    ulp: a long row of positive dy loses most of its sum)."""
    s = narrow_running_sum(np.float16)
    return _compute(t, row_sum=s, col_sum=s)


@defect
def _bf16_accumulation(t):
    """Defect: every sum accumulated sequentially in bfloat16 (8 significant bits: stalls past 256 terms of ~1)."""
    import ml_dtypes

    s = narrow_running_sum(ml_dtypes.bfloat16)
    return _compute(t, row_sum=s, col_sum=s)


@defect
def _bessel_divisor(t):
    """Defect: a wrong mean divisor: N - 1 (an unbiased-variance habit) instead of N."""
    return _compute(t, dx=lambda a, xh, r, s1, s2: _dx(a, xh, r, s1, s2, divisor=a.shape[1] - 1))


@defect
def _drop_last(t):
    """Defect: one row element dropped: the row sums stop one short (a tail-mask off by one)."""
    return _compute(t, row_sum=lambda v, axis: tree_sum(v[:, :-1], axis=1))


@defect
def _no_final_rstd(t):
    """Defect: gradInput not multiplied by rstd at the end (the chain rule through x̂ forgotten)."""
    return _compute(t, dx=lambda a, xh, r, s1, s2: _dx(a, xh, np.ones_like(r), s1, s2))


@defect
def _stats_swapped(t):
    """Defect: mean and rstd read in each other's place (the graph op LayerNormGradV3 takes (dy, x, rstd, mean,
    gamma), the aclnn API (.., mean, rstd, ..)): x̂ = (x - rstd) * mean."""
    return _compute({**t, MEAN: t[RSTD], RSTD: t[MEAN]})


@defect
def _gamma_in_weight_grad(t):
    """Defect: gradWeight summed from a * x̂ (gamma multiplied in) instead of dy * x̂."""
    return _compute(t, gw_term=lambda dy, a, xh: xh * a)


@legitimate
def _sequential(t):
    """Legitimate: every sum a float32 running sum in index order (a plain loop)."""
    return _compute(t, row_sum=running_sum, col_sum=running_sum)


@legitimate
def _doc_order(t):
    """Legitimate: the doc's order, means first: (a - fl(s1 / N) - fl(x̂ * fl(s2 / N))) * rstd, with numpy's
    float32 pairwise sums (another summation order)."""
    def means(a, xh, r, s1, s2):
        n = a.dtype.type(max(a.shape[1], 1))
        return (a - s1 / n - xh * (s2 / n)) * r
    return _compute(t, row_sum=lambda v, axis: v.sum(axis=axis, keepdims=True), col_sum=lambda v, axis:
                    v.sum(axis=axis, keepdims=True), dx=means)


@legitimate
def _aten(t):
    """Legitimate: ATen's CPU formula (aten/src/ATen/native/cpu/layer_norm_kernel.cpp,
    LayerNormBackwardKernelImplInternal) in float32: ds = sum(a x), db = sum(a) in order; b = (db mean - ds)
    rstd^3 / N, c = -b mean - db rstd / N, dx = rstd a + b x + c; dgamma += dy (x - mean) rstd row by row."""
    dy, a, xh, rstd = _parts(t)
    x, mean = t[X], t[MEAN]
    n = a.shape[1]
    scale = a.dtype.type(1) / a.dtype.type(max(n, 1))
    with np.errstate(all="ignore"):
        ds, db = running_sum(a * x, 1), running_sum(a, 1)
        b = (db * mean - ds) * rstd * rstd * rstd * scale
        c = -b * mean - db * rstd * scale
        return {GI: rstd * a + b * x + c, GW: running_sum(dy * ((x - mean) * rstd), 0), GB: running_sum(dy, 0)}


VARIANTS = {
    "ln-s2-sign-flip": _s2_sign,
    "ln-no-mean-term": _no_mean_term,
    "ln-sums-across-rows": _sums_across_rows,
    "ln-last-axis-only": _last_axis_only,
    "ln-fp16-accumulation": _fp16_accumulation,
    "ln-bf16-accumulation": _bf16_accumulation,
    "ln-bessel-divisor": _bessel_divisor,
    "ln-drop-last-element": _drop_last,
    "ln-no-final-rstd": _no_final_rstd,
    "ln-mean-rstd-swapped": _stats_swapped,
    "ln-gamma-in-weight-grad": _gamma_in_weight_grad,
    "ln-sequential": _sequential,
    "ln-doc-order": _doc_order,
    "ln-aten-formula": _aten,
}


def _attribute_rule(attrs) -> str | None:
    """outputMask's length (checked right after the null checks) and normalizedShape's (1..8)."""
    mask, norm = attrs[MASK], attrs[NORM]
    if len(mask) != 3:
        return f"outputMask has {len(mask)} values; it takes 3 (gradInputOut, gradWeightOut, gradBiasOut)"
    if len(norm) > 8:
        return f"normalizedShape has {len(norm)} values; at most 8"
    if len(norm) < 1:
        return "normalizedShape is empty; it takes 1 to 8 values"
    return None


def _dtype_rule(d, mask) -> str | None:
    """CheckDtype's relations (the Contract checked each dtype against the product), then the doc's output rules."""
    x = d[X].dtype.name
    if d[DY].dtype.name != x:
        return f"gradOut dtype {d[DY].dtype.name} differs from input's {x}"
    w = None if d[W].null else d[W].dtype.name
    if w is not None and w not in ("float32", x):
        return f"weightOptional dtype {w} is neither float32 nor input's {x}"
    wanted = {GI: x, GW: w or x, GB: w or x}
    for k, name in enumerate((GI, GW, GB)):
        # (gradWeight/gradBias may also be float32: the kernel's pd_gamma/pd_beta are float32 sums, written
        # without a second rounding; ops-nn's own TTK suite asks for float32 beside a bfloat16 weight)
        if mask[k] and not d[name].null and d[name].dtype.name != wanted[name] and not (
                name != GI and d[name].dtype.name == "float32"):
            source = "input's" if name == GI else ("weightOptional's" if w else "input's (weightOptional is null)")
            return f"{name} dtype {d[name].dtype.name} is not {source} {wanted[name]}"
    return None


def _shape_rule(d, attrs) -> str | None:
    """The dtype relations, then CheckShape (op_api/aclnn_layer_norm_backward.cpp) in its order, each 161002.

    A true outputMask entry beside a null output is 161001 in the source, checked before everything else: the
    Contract has no hook for a rule that depends on an attribute and a null pointer, so it is reported here
    (161002) and no bundled case relies on it."""
    mask, norm = attrs[MASK], tuple(attrs[NORM])
    for k, name in enumerate((GI, GW, GB)):
        if mask[k] and d[name].null:
            return f"{name} is a null pointer while outputMask[{k}] is true"
    rule = _dtype_rule(d, mask)
    if rule:
        return rule
    shape = d[X].shape
    if len(shape) < len(norm):
        return f"input has {len(shape)} dims, fewer than normalizedShape's {len(norm)}"
    if tuple(shape[len(shape) - len(norm):]) != norm:
        return f"input shape {list(shape)} does not end in normalizedShape {list(norm)}"
    for name in (W, B):
        if not d[name].null and d[name].shape != norm:
            return f"{name} shape {list(d[name].shape)} is not normalizedShape {list(norm)}"
    if d[DY].shape != shape:
        return f"gradOut shape {list(d[DY].shape)} is not input's {list(shape)}"
    if d[MEAN].shape != d[RSTD].shape:
        return f"mean shape {list(d[MEAN].shape)} differs from rstd's {list(d[RSTD].shape)}"
    rows = math.prod(shape[:len(shape) - len(norm)])
    if math.prod(d[MEAN].shape) != rows:
        return f"mean has {math.prod(d[MEAN].shape)} elements; input has {rows} rows"
    if mask[0] and d[GI].shape != shape:
        return f"gradInputOut shape {list(d[GI].shape)} is not input's {list(shape)}"
    for k, name in ((1, GW), (2, GB)):
        if mask[k] and math.prod(d[name].shape) != math.prod(norm):
            return f"{name} has {math.prod(d[name].shape)} elements; normalizedShape has {math.prod(norm)}"
    return None


ALL = ("950", "A3", "A2", "310P", "910")

SPEC = register(OpSpec(
    name="aclnnLayerNormBackward",
    key="layer_norm_backward",
    header="aclnnop/aclnn_layer_norm_backward.h",
    signature=(DY, X, NORM, MEAN, RSTD, W, B, MASK, GI, GW, GB),
    summary="Gradients of layer norm over the trailing normalizedShape axes, from the forward's mean and rstd: "
            "gradInput per row, gradWeight and gradBias summed over every row.",
    formula="x̂ = (input - mean) * rstd, a = gradOut * weight; gradInputOut = (a - mean_N(a) - x̂ * mean_N(a * x̂)) * "
            "rstd; gradWeightOut = sum over rows of gradOut * x̂; gradBiasOut = sum over rows of gradOut",
    tensors=(
        TensorSpec(DY, "input", {"normal": [0, 1]}),
        TensorSpec(X, "input", {"normal": [0, 1]}),
        TensorSpec(MEAN, "input", {"uniform": [-0.25, 0.25]}, dtypes=FLOATS),
        TensorSpec(RSTD, "input", {"uniform": [0.5, 2.0]}, dtypes=FLOATS),
        TensorSpec(W, "input", {"uniform": [-2.0, 2.0]}, optional=True, dtypes=FLOATS),
        TensorSpec(B, "input", {"uniform": [-1.0, 1.0]}, read_by_kernel=False, optional=True, dtypes=FLOATS),
        TensorSpec(GI, "output", {"constant": 0}, optional=True),
        TensorSpec(GW, "output", {"constant": 0}, optional=True, dtypes=FLOATS),
        TensorSpec(GB, "output", {"constant": 0}, optional=True, dtypes=FLOATS),
    ),
    attributes=(AttrSpec(NORM, "int_list"), AttrSpec(MASK, "bool_list", default=(True, True, True))),
    products=products(*ALL, overrides={"310P": ("float32", "float16"), "910": ("float32", "float16")}),
    dims=(1, 8),
    empty_ok=True,
    family=Rows(driver=X, axes=_axes, per_row=(MEAN, RSTD), across_rows=(GW, GB), shapes=_shapes),
    reference=_reference,
    exact=_exact,
    exact_at=_exact_at,
    kernel=_kernel,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", attribute_rule=_attribute_rule, shape_rule=_shape_rule),
    special_values="The doc defines none; the kernel's IEEE arithmetic: a NaN anywhere in a row (gradOut, input, "
                   "weight, its mean or rstd) reaches both row sums, so that row of gradInputOut is NaN, and so are the "
                   "columns it touches of gradWeightOut (and, from gradOut, gradBiasOut). An infinity gives inf or NaN "
                   "by the formula's order (inf - inf). rstd = 0 gives a row of zeros. mean and rstd are used as given. "
                   "Where a float32 intermediate overflows (x̂, a * N, a row sum) while the inputs are finite, the "
                   "golden is exact; verify also accepts the kernel's value. A masked-off output is not written.",
))

CONTRACT_NOTES = """\
aclnnLayerNormBackward phase one (norm/layer_norm_grad_v3/op_host/op_api/aclnn_layer_norm_backward.cpp):
- Order: gradOut, input, normalizedShape, mean, rstd, outputMask null -> 161001; outputMask length != 3 ->
  161002; outputMask[k] true with output k null -> 161001; CheckDtype (161002): gradOut, input, mean, rstd in
  {FLOAT16, FLOAT, BF16}, gradOut = input, weight (non-null) in the list and FLOAT or = input, bias and the
  non-null outputs in the list; then CheckShape (161002): gradOut, input, mean, rstd, normalizedShape and the
  requested outputs <= 8 dims, len(normalizedShape) >= 1, input dims >= len(normalizedShape), input vs
  normalizedShape, weight and bias (non-null) dims = len(normalizedShape) and shape = normalizedShape, gradOut
  = input, mean = rstd shape, numel(mean) = M, gradInputOut = input, numel(gradWeightOut) = numel(gradBiasOut)
  = N; then all of outputMask false -> success, nothing launched; then M <= 0 or N <= 0 -> success (M <= 0
  zero-fills the requested gradWeightOut, gradBiasOut).
- The input-vs-normalizedShape loop (CheckShapeEqual) runs i from len(input) - len(norm) to len(norm) and
  compares norm[i] with input[i + len(input) - len(norm)]: with len(input) >= 2 len(norm) nothing is compared
  and an input whose trailing dims differ from normalizedShape passes phase one (N is then input's, weight
  normalizedShape's: an out-of-bounds read). The Contract follows the doc (trailing dims = normalizedShape);
  the bundled negative case uses a 3-d input with a 2-long normalizedShape, which the source does compare.
- mean and rstd dtypes: the doc ties them to each other and to a width >= input's; the source checks each
  against the list only (they are Cast to FLOAT). The Contract follows the source (the golden is defined).
- Output dtypes: the source accepts any listed dtype (Cast after the kernel: an fp16 kernel result cast to a
  FLOAT gradInputOut is rounded twice). The Contract follows the doc: gradInputOut = input's, gradWeightOut =
  gradBiasOut = weight's (input's with a null weight). No bundled case relies on the difference.
- No SoC check of BF16 in the source; the products table follows the doc (no bf16 on 910, 310P).
- Dims: the source checks <= 8 only (a 0-d mean with M = 1 passes); the doc says 1-8, as the Contract does.
- Empty: the doc says unsupported; the source returns success (above), as empty_ok says.
- An outputMask false beside a non-null output: accepted, that output is not written; the pipeline judges every
  non-null output, so the bundled cases give a null tensor wherever the mask is false.
- Off the 950: LayerNormXBackpropV3 + LayerNormBetaGammaBackpropV2 (910, 310P), not emulated here.
"""
