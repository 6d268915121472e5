"""aclnnRmsNormGrad: the gradients of RmsNorm, from the forward's rstd (given, not recomputed).

Per row (the trailing gamma.ndim axes of x, R elements), with a = dy * gamma and b = x * rstd:
  dxOut     = (a - b * sum(a * b) / R) * rstd
  dgammaOut = sum over every row of dy * b   (float32, gamma's shape)
Sums, products and quotients of binary floats are rational, so the exact path is Fractions.

The 950 kernel (hicann/ops-nn norm/rms_norm_grad/op_kernel/arch35/, all float32 after an exact cast of
fp16/bf16; rstd is float32):
  rms_norm_grad_regbase_dx_full_load.h (rows that fit UB; _dx_split_d.h the same per piece of a long row):
    a = fl(dy * g), b = fl(x * r), s = ReduceSum(fl(a * b)) (the 64-lane tree, treesum.tree_sum);
    negMean = fl(s * -fl32(1 / cols)); MulAddDst: inner = fl(a + fl(b * negMean)) (unfused, as docs/kernels.md
    describes it; the source's comment says FMA: the fused form is a legitimate variant);
    dx = fl(inner * r), cast RINT to dx's dtype.
  rms_norm_grad_regbase_dgamma.h / rms_norm_grad_dgamma_regbase_helper.h (CalcMulRes): terms fl(dy * fl(x * r)),
    summed over the rows by pairwise binary adds (reduceSumCompressedBy8 .. By1, UpdateCache for many rows).
"""

from __future__ import annotations

import math

import numpy as np

from ..base import Contract, FLOATS, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..families import Rows, trailing_axes
from ..registry import register
from ..treesum import exact_sum_factor, narrow_running_sum, row_sum64, running_sum, tree_sum

DY, X, RSTD, G, DX, DG = "dy", "x", "rstd", "gamma", "dxOut", "dgammaOut"
U = 2.0**-53
SLACK = 1.0 + 2.0**-30  # covers a float64 magnitude computed up to ~2^-46 below the exact one
TINY = 2.0**-1074
LAST = "gammaLastDim"  # a case value: the length of gamma's last axis (the wrong-axes defect needs it)


def _shapes(shape: tuple[int, ...], attrs) -> dict[str, tuple[int, ...]]:
    """A case gives x's shape: gamma is its last axis (rstd and dgammaOut follow from the family)."""
    return {G: tuple(shape[-1:])}


def _case_values(shapes) -> dict[str, int]:
    return {LAST: int(shapes[G][-1]) if shapes[G] else 1}


def _parts(t):
    """(a = dy * gamma, b = x * rstd, dy, rstd) in the inputs' float type, as the kernel's first three Muls."""
    return t[DY] * t[G], t[X] * t[RSTD], t[DY], t[RSTD]


def _dx(a, b, r, s, divisor=None, fused: bool = False):
    """The kernel's dx from the row sum s: negMean = s * -fl(1 / cols); (a + b * negMean) * r."""
    one = a.dtype.type(1)
    neg_inv = -(one / a.dtype.type(a.shape[1] if divisor is None else divisor))
    neg_mean = s * neg_inv
    if fused:  # one rounding of a + b * negMean, as an FMA gives it (float64 holds b * negMean exactly)
        inner = (a.astype(np.float64) + b.astype(np.float64) * neg_mean.astype(np.float64)).astype(a.dtype)
    else:
        inner = a + b * neg_mean
    return inner * r


def _compute(t, row_sum=tree_sum, col_sum=tree_sum, dx=_dx, dg_term=None) -> dict:
    """The kernel with replaceable pieces (the row sum, the sum over rows, dx, dgamma's term) for the variants."""
    a, b, dy, r = _parts(t)
    with np.errstate(all="ignore"):
        s = row_sum(a * b, axis=1)
        term = dg_term(a, b, dy, t) if dg_term is not None else dy * b
        return {DX: dx(a, b, r, s), DG: col_sum(term, axis=0)}


def _kernel(t) -> dict:
    """The 950 kernel (module docstring): dx as (k, R, 1) rows, dgamma as this block's partial (1, R, 1)."""
    return _compute(t)


def _reference(t) -> dict:
    """float64 on whole rows. u = 2^-53; A = |a|, M = sum|a b| / R, T = A + |b| M.

    a = dy * g and b = x * r are exact in float64 (two 24-bit factors); p = fl(a b) = ab(1 + d), |d| <= u; the
    pairwise sum (row_sum64) is within F u sum|p|, F = exact_sum_factor(R), so |s - sum ab| <= (F + 1.01) u R M;
    m = fl(s / R) is within (F + 2.02) u M of the exact mean; fl(b m) adds u |b| M, the subtraction u T and the
    final * r u |r| T: |value - exact| <= (F + 5.1) u |r| T. T is computed from p (within (F + 3) u of the
    exact T, F <= 45 here), so (F + 6) u |r| T SLACK bounds it, plus a floor for b * m and * r falling below
    float64's normal range: (|r| + 1) 2^-1072 (products of four fp32 values reach 2^-1268). Nothing overflows
    float64 (|p| <= 2^512, |b m| r <= 2^920).

    scale = |r| T >= |exact|: a float32 kernel's error is about (log2 R + c) 2^-24 of it (2.2 u32 |r| T
    measured: docs/kernels.md). dgamma: terms fl(dy b) within u of dy b (b exact, dy b has 72 bits),
    summed pairwise over the k rows: (F_k + 1.01) u W, W = sum|dy b| (its scale)."""
    a, b, dy, r = _parts(t)
    k, n = a.shape[0], a.shape[1]
    p = a * b
    mean_mag = row_sum64(np.abs(p)) / n
    value = (a - b * (row_sum64(p) / n)) * r
    mag = np.abs(r) * (np.abs(a) + np.abs(b) * mean_mag) * SLACK
    bound = (exact_sum_factor(n) + 6) * U * mag + (np.abs(r) + 1) * 4 * TINY
    w = dy * b
    w_mag = row_sum64(np.abs(w), axis=0) * SLACK
    return {DX: Reference(value, bound, mag),
            DG: Reference(row_sum64(w, axis=0), (exact_sum_factor(k) + 1.01) * U * w_mag, w_mag)}


def _exact(t) -> dict:
    """Fractions: the doc's formula on any k rows (and, for gen's across-rows pass, any columns)."""
    a, b, dy, r = _parts(t)
    mean = (a * b).sum(axis=1, keepdims=True) / a.shape[1]
    return {DX: (a - b * mean) * r, DG: (dy * b).sum(axis=0, keepdims=True)}


def _edge(t) -> dict:
    """dxOut where a float32 intermediate of the kernel overflows (a, b, a * b, the row sum, b * negMean, the
    difference) while every input of the row is finite: the exact result may be finite there; the device value
    is the float32 kernel's."""
    f32 = {k: v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v for k, v in t.items()}
    with np.errstate(all="ignore"):
        a, b, dy, r = _parts(f32)
        k = a.shape[0]
        s = tree_sum(a * b)
        neg_mean = s * -(np.float32(1) / np.float32(a.shape[1]))
        inner = a + b * neg_mean
        device = (inner * r).astype(np.float64)
        steps = (a, b, a * b, s, b * neg_mean, inner)
        over = np.logical_or.reduce([~np.isfinite(v).reshape(k, -1).all(axis=1) for v in steps])
    finite = np.logical_and.reduce([np.isfinite(t[n]).reshape(k, -1).all(axis=1) for n in (DY, X, RSTD, G)])
    where = np.broadcast_to((finite & over).reshape(-1, 1, 1), a.shape)
    return {DX: (where, device)}


@defect
def _mean_term_sign(t):
    """Defect: the mean term added instead of subtracted: (a + b * mean) * rstd (a flipped reduction term)."""
    return _compute(t, dx=lambda a, b, r, s: _dx(a, b, r, -s))


@defect
def _no_mean_term(t):
    """Defect: the mean term left out: dx = dy * gamma * rstd (a missing reduction term, the forward's Jacobian
    diagonal only)."""
    return _compute(t, dx=lambda a, b, r, s: _dx(a, b, r, 0 * s))


@defect
def _sum_down_columns(t):
    """Defect: the wrong axis: sum(a * b) taken down each column (over the rows handed in) instead of along the row."""
    return _compute(t, row_sum=lambda v, axis: np.broadcast_to(tree_sum(v, axis=0), v.shape))


@defect
def _last_axis_only(t):
    """Defect: the wrong axes: with a 2-d or longer gamma, the row sum taken over gamma's last axis only (the
    divisor kept at R): what a kernel reading `cols` as x's last dim does."""
    cols = int(t[LAST])
    if cols == t[X].shape[1]:
        return _compute(t)

    def partial(v, axis):
        k, n = v.shape[0], v.shape[1]
        groups = v.reshape(k, n // cols, cols, -1)
        return np.broadcast_to(tree_sum(groups, axis=2), groups.shape).reshape(v.shape)
    return _compute(t, row_sum=partial)


@defect
def _fp16_accumulation(t):
    """Defect: both sums (along the row, over the rows) accumulated sequentially in float16: the running sum
    stalls once it outgrows its terms' ulp (a long row of positive terms loses most of its sum)."""
    s = narrow_running_sum(np.float16)
    return _compute(t, row_sum=s, col_sum=s)


@defect
def _bf16_accumulation(t):
    """Defect: both sums accumulated sequentially in bfloat16 (8 significant bits: stalls past ~256 terms of ~1)."""
    import ml_dtypes

    s = narrow_running_sum(ml_dtypes.bfloat16)
    return _compute(t, row_sum=s, col_sum=s)


@defect
def _padded_divisor(t):
    """Defect: a wrong mean divisor: the row length padded to the kernel's 2-vector alignment (colsAlign2VL_, a
    multiple of 128) instead of cols: the zero-filled tail adds nothing to the sum but enlarges the count."""
    n = t[X].shape[1]
    return _compute(t, dx=lambda a, b, r, s: _dx(a, b, r, s, divisor=-(-n // 128) * 128))


@defect
def _drop_last(t):
    """Defect: one row element dropped: the row sum stops one short (a tail mask off by one)."""
    return _compute(t, row_sum=lambda v, axis: tree_sum(v[:, :-1], axis=1))


@defect
def _no_final_rstd(t):
    """Defect: dx not multiplied by rstd at the end (the outer 1/Rms of the doc's formula forgotten)."""
    return _compute(t, dx=lambda a, b, r, s: _dx(a, b, np.ones_like(r), s))


@defect
def _dgamma_without_rstd(t):
    """Defect: dgamma summed from dy * x (rstd forgotten in CalcMulRes): off by the factor rstd per row."""
    return _compute(t, dg_term=lambda a, b, dy, tt: dy * tt[X])


@defect
def _dgamma_with_gamma(t):
    """Defect: dgamma summed from a * b = dy * gamma * x * rstd (the dx pass's product reused): off by gamma."""
    return _compute(t, dg_term=lambda a, b, dy, tt: a * b)


@legitimate
def _sequential(t):
    """Legitimate: both sums a float32 running sum in index order (a plain loop)."""
    return _compute(t, row_sum=running_sum, col_sum=running_sum)


@legitimate
def _fused_mul_add(t):
    """Legitimate: MulAddDst as a fused multiply-add (the source's comment: "FMA: dy * gamma + (x * rstd) *
    (-mean)"): a + b * negMean rounded once."""
    return _compute(t, dx=lambda a, b, r, s: _dx(a, b, r, s, fused=True))


@legitimate
def _aten(t):
    """Legitimate: PyTorch's decomposition (torch/_decomp/decompositions.py, _fused_rms_norm_backward) in
    float32: x_hat = x * rstd, g = dy * gamma, total = sum(x_hat * g); dx = (g - (x_hat / N) * total) * rstd;
    dgamma = sum over rows of dy * x_hat; numpy's float32 pairwise sums (another order)."""
    a, b, dy, r = _parts(t)
    n = a.dtype.type(a.shape[1])
    with np.errstate(all="ignore"):
        total = (b * a).sum(axis=1, keepdims=True)
        return {DX: (a - (b / n) * total) * r, DG: (dy * b).sum(axis=0, keepdims=True)}


VARIANTS = {
    "rms-mean-term-sign-flip": _mean_term_sign,
    "rms-no-mean-term": _no_mean_term,
    "rms-sum-down-columns": _sum_down_columns,
    "rms-last-axis-only": _last_axis_only,
    "rms-fp16-accumulation": _fp16_accumulation,
    "rms-bf16-accumulation": _bf16_accumulation,
    "rms-padded-divisor": _padded_divisor,
    "rms-drop-last-element": _drop_last,
    "rms-no-final-rstd": _no_final_rstd,
    "rms-dgamma-without-rstd": _dgamma_without_rstd,
    "rms-dgamma-with-gamma": _dgamma_with_gamma,
    "rms-sequential": _sequential,
    "rms-fused-mul-add": _fused_mul_add,
    "rms-aten-decomposition": _aten,
}


def _dtype_rule(d) -> str | None:
    """The OpDef's combinations (op_host/rms_norm_grad_def.cpp): dy = x = dxOut; gamma FLOAT or x's; rstd, dgammaOut
    FLOAT (the Contract checked each dtype against the product)."""
    x = d[X].dtype.name
    for name in (DY, DX):
        if d[name].dtype.name != x:
            return f"{name} dtype {d[name].dtype.name} differs from x's {x}"
    if d[G].dtype.name not in ("float32", x):
        return f"gamma dtype {d[G].dtype.name} is neither float32 nor x's {x}"
    for name in (RSTD, DG):
        if d[name].dtype.name != "float32":
            return f"{name} dtype {d[name].dtype.name} is not float32"
    return None


def _rstd_rule(xs: tuple[int, ...], rs: tuple[int, ...], lead: int) -> str | None:
    """CheckRstdShape: rstd's dims are x's first ones (x's further leading dims 1 when rstd has fewer), then its
    numel is the row count (Tiling4RmsNormGrad)."""
    if len(rs) < lead:
        if tuple(rs) != tuple(xs[:len(rs)]):
            return f"rstd shape {list(rs)} is not x's first {len(rs)} dims {list(xs[:len(rs)])}"
        if any(v != 1 for v in xs[len(rs):lead]):
            return f"x shape {list(xs)}: the leading dims past rstd's {len(rs)} must be 1"
    elif tuple(rs[:lead]) != tuple(xs[:lead]):
        return f"rstd shape {list(rs)} does not start with x's leading dims {list(xs[:lead])}"
    if math.prod(rs) != math.prod(xs[:lead]):
        return f"rstd has {math.prod(rs)} elements; x has {math.prod(xs[:lead])} rows"
    return None


def _shape_rule(d, attrs) -> str | None:
    """The dtype combinations (161002), then the tiling's shape checks (rms_norm_grad_tiling.cpp, in its order).

    The device returns the tiling's refusals as 561002 (ACLNN_ERR_INNER_TILING_ERROR); the Contract knows only
    161001 and 161002, so they are 161002 here and no bundled case relies on them (CONTRACT_NOTES)."""
    rule = _dtype_rule(d)
    if rule:
        return rule
    xs, gs, ys = d[X].shape, d[G].shape, d[DY].shape
    if not 1 <= len(xs) <= 8:
        return f"x has {len(xs)} dims; it takes 1-8"
    if not 1 <= len(gs) <= len(xs):
        return f"gamma has {len(gs)} dims; it takes 1 to x's {len(xs)}"
    for name, like in ((DY, X), (DX, X), (DG, G)):
        if len(d[name].shape) != len(d[like].shape):
            return f"{name} has {len(d[name].shape)} dims; it must have {like}'s {len(d[like].shape)}"
    if ys != xs or d[DX].shape != xs:
        return f"dy {list(ys)}, x {list(xs)} and dxOut {list(d[DX].shape)} shapes must be identical"
    if xs[-1] == 0:
        return "the last axis of dy is empty"
    lead = len(xs) - len(gs)
    rule = _rstd_rule(xs, d[RSTD].shape, lead)
    if rule:
        return rule
    for name in (G, DG):
        if tuple(d[name].shape) != tuple(xs[lead:]):
            return f"{name} shape {list(d[name].shape)} is not x's last {len(gs)} dims {list(xs[lead:])}"
    return None


ALL = ("950", "A3", "A2", "310P")

SPEC = register(OpSpec(
    name="aclnnRmsNormGrad",
    key="rms_norm_grad",
    header="aclnnop/aclnn_rms_norm_grad.h",
    signature=(DY, X, RSTD, G, DX, DG),
    summary="Gradients of RmsNorm over the trailing gamma.ndim axes, from the forward's rstd: dx per row, "
            "dgamma (float32) summed over every row.",
    formula="a = dy * gamma, b = x * rstd; dxOut = (a - b * mean_R(a * b)) * rstd; "
            "dgammaOut = sum over rows of dy * b",
    tensors=(
        TensorSpec(DY, "input", {"normal": [0, 1]}),
        TensorSpec(X, "input", {"normal": [0, 1]}),
        TensorSpec(RSTD, "input", {"uniform": [0.5, 2.0]}, dtypes=("float32",)),
        TensorSpec(G, "input", {"uniform": [0.5, 1.5]}, dtypes=FLOATS),
        TensorSpec(DX, "output", {"constant": 0}),
        TensorSpec(DG, "output", {"constant": 0}, dtypes=("float32",)),
    ),
    products=products(*ALL, overrides={"310P": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    family=Rows(driver=X, axes=trailing_axes(X, lambda s, a: len(s[G])), per_row=(RSTD,), across_rows=(DG,),
                shapes=_shapes),
    case_values=_case_values,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", shape_rule=_shape_rule),
    special_values="The doc defines none; the kernel's IEEE arithmetic: a NaN anywhere in a row (dy, x, gamma, its "
                   "rstd) reaches the row sum, so that row of dxOut is NaN, and the columns it touches of dgammaOut "
                   "(from dy, x or rstd). An infinity gives inf or NaN by the formula's order (inf * 0, inf - inf). "
                   "rstd = 0 gives a row of zeros; a negative rstd is used as given. Where a float32 intermediate "
                   "overflows (a, b, a * b, the row sum) while the inputs are finite, the golden is exact; verify "
                   "also accepts the kernel's value. No rows (x [0, C]) on the 950: dxOut empty, dgammaOut zeros.",
))

CONTRACT_NOTES = """\
aclnnRmsNormGrad phase one: no op_api; the aclnn is generated from the OpDef (op_host/CMakeLists.txt ACLNNTYPE
aclnn; op_host/rms_norm_grad_def.cpp), the shape checks are the tiling's (op_host/rms_norm_grad_tiling.cpp).
- Nulls -> 161001; a dtype combination the OpDef lacks -> 161002: (dy = x = dxOut, gamma, rstd, dgammaOut) in
  (fp16, fp32|fp16, fp32, fp32), (bf16, fp32|bf16, fp32, fp32), (fp32, fp32, fp32, fp32); 310P fp16/fp32 only
  (its config_without_bf16; the doc's 310P table lists gamma = x only, the OpDef's 310P config takes gamma fp16
  or fp32 by position: not checked here, shape_rule has no product). 910: the OpDef registers it (fp16/fp32,
  cols % 64 == 0), the doc says unsupported: not a product here.
- Tiling (561002 on the device; 161002 here, see _shape_rule): x 1-8 dims, gamma 1-8 dims and <= x's, dy and
  dxOut x's dims, dgammaOut gamma's; dy = x = dxOut shapes; the last axis non-empty; rstd's dims x's first ones
  (fewer: x's dims up to the row axes must be 1; more: only the first x.ndim - gamma.ndim compared), numel(rstd)
  = rows; gamma = dgammaOut = x's trailing dims. No dims check of rstd: a 0-d rstd of a 1-d x passes (dims 0-8).
- Empty: rows = 0 passes on the 950 (rms_norm_grad_empty_dgamma.h: Duplicate 0.0f, dgammaOut zeros; the stub's
  NaN follows an earlier reading of it, not the source); other SoCs refuse no rows (561002): not expressible
  per product here, so the bundled empty case runs on the 950 only.
- Deterministic on the 950 (doc); other products SetAtomicAdd dgamma (order varies run to run).
"""
