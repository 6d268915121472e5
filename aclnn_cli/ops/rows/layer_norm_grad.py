"""aclnnLayerNormGrad: the graph op LayerNormGrad (hicann/ops-nn norm/layer_norm_grad), from the forward's mean and
variance: aclnnLayerNormBackward's algebra with rstd = 1 / sqrt(variance + eps) computed by the op.

ops-nn has no op_api for it: CANN generates a single-op aclnn API from the OpDef (op_host/layer_norm_grad_def.cpp),
aclnnLayerNormGrad(dy, x, variance, mean, gamma, pd_x, pd_gamma, pd_beta) in OpDef order, no attributes, header
aclnnop/aclnn_layer_norm_grad.h (the generated one: there is no public header in ops-nn to compare).

Per row (the trailing gamma.ndim axes of x, N elements), rstd = 1 / sqrt(variance + eps), x̂ = (x - mean) rstd,
a = dy * gamma:
  pd_x = (a - sum(a) / N - x̂ * sum(x̂ a) / N) * rstd;  pd_gamma = sum over rows of dy x̂,  pd_beta = sum of dy.
eps is the tiling's (layer_norm_grad_tiling_base.cpp): a float 1e-12 for a float32 x, 1e-5 for fp16 / bf16 (there
is no epsilon attribute); the golden uses rstd = 1 / sqrt(variance + fl32(eps)) exactly (rational where
variance + eps is a rational square, else to 60 digits, as aclnnBatchNormBackward's inference invstd).

The 950 kernel (op_kernel/arch35/layer_norm_grad_recompute_backward_impl.h and layer_norm_grad_base.h): every row's
rstd from NormCommon::ComputeRstdNewtonRaphsonReg (norm/norm_common/op_kernel/reduce_common_regbase.h), in float32:
  v = fl(var + eps); r = fl(1 / v); y = fl(sqrt(r)); t = fl(fl(v * -0.5) * y); t1 = 1.5 + t y; rstd = fl(y t1);
  s = 1 - v r; r = r - rstd rstd; s = s + v r; s = fl(s rstd); rstd = rstd + 0.5 s  (the Mula steps as fused
  multiply-adds); v = +inf gives 0, v = 0 gives +inf.
Then Normalize, LastReduceSum and ComputeDx exactly as LayerNormGradV3's (layer_norm_backward.py's kernel):
  x̂ = fl(fl(x - mean) * rstd), s1 = tree sum(a), s2 = tree sum(fl(x̂ a)),
  pd_x = fl(fl(fl(fl(fl(a N) - s1) - fl(x̂ s2)) fl(1 / N)) rstd); pd_gamma, pd_beta summed over the rows.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..base import Contract, FLOATS, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..channels.batch_norm_backward import inv_sqrt
from ..families import Rows, trailing_axes
from ..graphops import GraphOp
from ..normgrad import U
from ..registry import register
from . import layer_norm_backward as LB

DY, X, VAR, MEAN, G = "dy", "x", "variance", "mean", "gamma"
PDX, PDG, PDB = "pd_x", "pd_gamma", "pd_beta"
EPS = "epsilon"  # a case value (from x's dtype): the tiling's eps as the kernel holds it, a float32
TO_LB = {PDX: LB.GI, PDG: LB.GW, PDB: LB.GB}


def _case_dtypes(dtypes) -> dict:
    """eps by x's dtype (layer_norm_grad_tiling_base.cpp), narrowed to float32 as the tiling's float field holds it."""
    return {EPS: float(np.float32(1e-12 if dtypes[X] == "float32" else 1e-5))}


def _shapes(shape: tuple[int, ...], attrs) -> dict[str, tuple[int, ...]]:
    """A case gives x's shape: gamma its last axis, mean and variance [A1..Ai, 1] (the proto's shape)."""
    return {G: tuple(shape[-1:]), MEAN: tuple(shape[:-1]) + (1,), VAR: tuple(shape[:-1]) + (1,)}


def newton_rstd(var, eps):
    """ComputeRstdNewtonRaphsonReg in float32 (module docstring); a Mula (dst = a * b + dst) as one rounding: the
    float32 product is exact in float64, the float64 sum rounded to float32 (a double rounding at worst)."""
    f, w = np.float32, np.float64

    def mula(a, b, c):
        return (np.asarray(a, w) * np.asarray(b, w) + np.asarray(c, w)).astype(f)

    with np.errstate(all="ignore"):
        v = np.maximum(np.asarray(var, f) + f(eps), f(-99.99))
        r = f(1) / v
        y = np.sqrt(r)
        t = (v * f(-0.5)) * y
        rstd = y * mula(t, y, f(1.5))
        s = mula(-v, r, f(1))
        r = mula(-rstd, rstd, r)
        s = mula(v, r, s) * rstd
        rstd = mula(s, f(0.5), rstd)
        rstd = np.where(v == np.inf, f(0), rstd)
        return np.where(v == 0, f(np.inf), rstd).astype(f)


def _as_lb(t, rstd) -> dict:
    """The mapping aclnnLayerNormBackward's functions read, with this op's tensors and rstd."""
    return {LB.DY: t[DY], LB.X: t[X], LB.MEAN: t[MEAN], LB.RSTD: rstd, LB.W: t[G]}


def _from_lb(out) -> dict:
    return {name: out[lb] for name, lb in TO_LB.items()}


def _rstd32(t):
    return newton_rstd(t[VAR], t[EPS])


def _compute(t, **pieces) -> dict:
    """The 950 kernel: the Newton rstd, then LayerNormGradV3's (pieces: its replaceable sums and dx formula)."""
    return _from_lb(LB._compute(_as_lb(t, _rstd32(t)), **pieces))


def _kernel(t) -> dict:
    return _compute(t)


RSTD_REL = 3 * U  # 1 / sqrt(var + eps) in float64: a sum, a square root, a quotient (2.5u and the products' slack)


def _rstd64(t):
    with np.errstate(all="ignore"):
        return 1.0 / np.sqrt(np.asarray(t[VAR], np.float64) + t[EPS])


def _reference(t) -> dict:
    """aclnnLayerNormBackward's reference with the float64 rstd (within 3u): pd_x is cubic in rstd (rstd a,
    rstd s1 / N, x̂ s2 / N rstd with x̂ and s2 each carrying rstd), so a relative error d of rstd moves it by at most
    ((1 + d)^3 - 1) of its scale < 9.1u scale: 10u scale is added to the bound; pd_gamma (terms dy x̂) by 3.1u of its
    scale; pd_beta does not read rstd."""
    ref = LB._reference(_as_lb(t, _rstd64(t)))
    gi, gw = ref[LB.GI], ref[LB.GW]
    ref[LB.GI] = Reference(gi.value, gi.bound + 10 * U * gi.scale, gi.scale)
    ref[LB.GW] = Reference(gw.value, gw.bound + 3.1 * U * gw.scale, gw.scale)
    return _from_lb(ref)


def exact_rstd(var, eps) -> np.ndarray:
    """1 / sqrt(variance + eps) per row as Fractions (exact where rational, else to 60 digits); +inf at 0, NaN below
    or for a non-finite variance (IEEE's values)."""
    e = Fraction(eps)

    def one(v):
        if not isinstance(v, Fraction) and not math.isfinite(float(v)):
            return 0.0 if v == math.inf else math.nan
        q = Fraction(v) + e
        return inv_sqrt(q) if q > 0 else math.inf if q == 0 else math.nan
    flat = [one(v) for v in np.asarray(var, dtype=object).reshape(-1)]
    return np.array(flat + [None], dtype=object)[:-1].reshape(np.shape(var))


def _exact(t) -> dict:
    """Fractions on any k rows: LayerNormBackward's exact with the exact rstd."""
    return _from_lb(LB._exact(_as_lb(t, exact_rstd(t[VAR], t[EPS]))))


def _edge(t) -> dict:
    """pd_x where a float32 intermediate overflows while the inputs are finite (LayerNormBackward's edge, on the
    Newton rstd); a finite variance whose rstd overflows float32 (var + eps = 0 in float32) is one too."""
    rstd = _rstd32(t).astype(np.float64)
    where, device = LB._edge(_as_lb(t, rstd))[LB.GI]
    return {PDX: (where, device)}


# ------------------------------------------------------------------ variants

def _lb_variant(name):
    """One of aclnnLayerNormBackward's variants on this op (rstd from the Newton step)."""
    fn = LB.VARIANTS[name]

    def variant(t):
        return _from_lb(fn(_as_lb(t, _rstd32(t))))
    variant.variant_kind = fn.variant_kind
    variant.__doc__ = fn.__doc__
    return variant


@defect
def _no_epsilon(t):
    """Defect: eps left out (rstd = 1 / sqrt(variance)): off wherever the variance is near eps or zero."""
    return _compute({**t, EPS: 0.0})


@defect
def _variance_as_rstd(t):
    """Defect: the variance input read as rstd (the LayerNormGradV3 habit: no rsqrt at all)."""
    return _from_lb(LB._compute(_as_lb(t, np.asarray(t[VAR], np.float32))))


@defect
def _sqrt_not_rsqrt(t):
    """Defect: rstd = sqrt(variance + eps) (the reciprocal forgotten)."""
    with np.errstate(all="ignore"):
        s = np.sqrt(np.asarray(t[VAR], np.float32) + np.float32(t[EPS]))
    return _from_lb(LB._compute(_as_lb(t, s)))


@defect
def _variance_mean_swapped(t):
    """Defect: variance and mean read in each other's place (the graph op takes (dy, x, variance, mean, gamma))."""
    return _compute({**t, VAR: t[MEAN], MEAN: t[VAR]})


@defect
def _fp16_eps_on_fp32(t):
    """Defect: eps 1e-5 for every dtype (the 16-bit dtypes' eps on float32 as well): off where variance is small."""
    return _compute({**t, EPS: float(np.float32(1e-5))})


@legitimate
def _rounded_rsqrt(t):
    """Legitimate: rstd the correctly rounded float32 of 1 / sqrt(fl(var + eps)) (another rsqrt), the rest as the
    950."""
    with np.errstate(all="ignore"):
        v = (np.asarray(t[VAR], np.float32) + np.float32(t[EPS])).astype(np.float64)
        r = (1.0 / np.sqrt(v)).astype(np.float32)
    return _from_lb(LB._compute(_as_lb(t, r)))


@legitimate
def _divide_sqrt(t):
    """Legitimate: rstd = fl(1 / fl(sqrt(fl(var + eps)))) (ReduceCommon's Sqrt, Div: two roundings) with the doc's
    order, means first (LayerNormBackward's ln-doc-order)."""
    with np.errstate(all="ignore"):
        r = np.float32(1) / np.sqrt(np.asarray(t[VAR], np.float32) + np.float32(t[EPS]))
    return _from_lb(LB.VARIANTS["ln-doc-order"](_as_lb(t, r)))


VARIANTS = {
    **{"lng" + name[2:]: _lb_variant(name) for name in LB.VARIANTS
       if name not in ("ln-last-axis-only", "ln-mean-rstd-swapped", "ln-doc-order")},
    "lng-no-epsilon": _no_epsilon,
    "lng-variance-as-rstd": _variance_as_rstd,
    "lng-sqrt-not-rsqrt": _sqrt_not_rsqrt,
    "lng-variance-mean-swapped": _variance_mean_swapped,
    "lng-fp16-eps-on-fp32": _fp16_eps_on_fp32,
    "lng-rounded-rsqrt": _rounded_rsqrt,
    "lng-divide-sqrt-doc-order": _divide_sqrt,
}


# ------------------------------------------------------------------ the contract

def _dtype_rule(d) -> str | None:
    """The OpDef's seven combinations (dy = x = pd_x; variance, mean float32; gamma float32 or x's; pd_gamma =
    pd_beta, float32 or gamma's), the Contract having checked each dtype against the product."""
    x = d[X].dtype.name
    for name in (DY, PDX):
        if d[name].dtype.name != x:
            return f"{name} dtype {d[name].dtype.name} differs from x's {x}"
    for name in (VAR, MEAN):
        if d[name].dtype.name != "float32":
            return f"{name} dtype {d[name].dtype.name} is not float32"
    g = d[G].dtype.name
    if g not in ("float32", x):
        return f"gamma dtype {g} is neither float32 nor x's {x}"
    if d[PDG].dtype.name != d[PDB].dtype.name:
        return f"pd_gamma dtype {d[PDG].dtype.name} differs from pd_beta's {d[PDB].dtype.name}"
    if d[PDG].dtype.name not in ("float32", g):
        return f"pd_gamma dtype {d[PDG].dtype.name} is neither float32 nor gamma's {g}"
    return None


def _shape_rule(d, attrs) -> str | None:
    """The dtype combinations (161002), then the doc's and the tiling's shapes (layer_norm_grad_tiling_base.cpp,
    GetShapeAttrsInfo: 561002 on the device, 161002 here, as aclnnRmsNormGrad's: CONTRACT_NOTES)."""
    rule = _dtype_rule(d)
    if rule:
        return rule
    xs, gs = d[X].shape, d[G].shape
    for name in (DY, PDX):
        if d[name].shape != xs:
            return f"{name} shape {list(d[name].shape)} is not x's {list(xs)}"
    if d[VAR].shape != d[MEAN].shape:
        return f"variance shape {list(d[VAR].shape)} differs from mean's {list(d[MEAN].shape)}"
    for name in (PDG, PDB):
        if d[name].shape != gs:
            return f"{name} shape {list(d[name].shape)} is not gamma's {list(gs)}"
    if not 1 <= len(gs) <= len(xs):
        return f"gamma has {len(gs)} dims; it takes 1 to x's {len(xs)}"
    if any(v <= 0 for v in xs):
        return f"x shape {list(xs)}: every axis must be positive"
    lead = len(xs) - len(gs)
    if tuple(xs[lead:]) != tuple(gs):
        return f"gamma shape {list(gs)} is not x's last {len(gs)} dims {list(xs[lead:])}"
    if math.prod(d[MEAN].shape) != math.prod(xs[:lead]):
        return f"mean has {math.prod(d[MEAN].shape)} elements; x has {math.prod(xs[:lead])} rows"
    return None


SPEC = register(OpSpec(
    name="aclnnLayerNormGrad",
    key="layer_norm_grad",
    header="aclnnop/aclnn_layer_norm_grad.h",
    summary="The graph op LayerNormGrad through its generated aclnn API: gradients of layer norm over the trailing "
            "gamma.ndim axes from the forward's mean and variance (rstd = 1 / sqrt(variance + eps), eps 1e-12 for "
            "float32, 1e-5 for fp16/bf16): pd_x per row, pd_gamma and pd_beta summed over every row.",
    formula="rstd = 1 / sqrt(variance + eps), x̂ = (x - mean) * rstd, a = dy * gamma; pd_x = (a - mean_N(a) - x̂ * "
            "mean_N(a * x̂)) * rstd; pd_gamma = sum over rows of dy * x̂; pd_beta = sum over rows of dy",
    tensors=(
        TensorSpec(DY, "input", {"normal": [0, 1]}),
        TensorSpec(X, "input", {"normal": [0, 1]}),
        TensorSpec(VAR, "input", {"uniform": [0.25, 4.0]}, dtypes=("float32",)),
        TensorSpec(MEAN, "input", {"uniform": [-0.25, 0.25]}, dtypes=("float32",)),
        TensorSpec(G, "input", {"uniform": [-2.0, 2.0]}, dtypes=FLOATS),
        TensorSpec(PDX, "output", {"constant": 0}),
        TensorSpec(PDG, "output", {"constant": 0}, dtypes=FLOATS),
        TensorSpec(PDB, "output", {"constant": 0}, dtypes=FLOATS),
    ),
    products=products("950"),
    dims=(1, 8),
    empty_ok=False,  # (the tiling refuses an axis <= 0)
    family=Rows(driver=X, axes=trailing_axes(X, lambda s, a: len(s[G])), per_row=(VAR, MEAN), across_rows=(PDG, PDB),
                shapes=_shapes),
    case_dtypes=_case_dtypes,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", shape_rule=_shape_rule),
    graph_ops={"LayerNormGrad": GraphOp("aclnnLayerNormGrad", (DY, X, VAR, MEAN, G), outputs=(PDX, PDG, PDB))},
    special_values="The proto defines none; the kernel's IEEE arithmetic as aclnnLayerNormBackward's (a NaN in a row "
                   "makes that row of pd_x NaN and the columns it touches of pd_gamma, pd_beta). variance + eps = 0 "
                   "gives rstd = +inf (the Newton step's select), variance = +inf gives rstd = 0 (a row of zeros), a "
                   "negative variance + eps a NaN rstd. Where a float32 intermediate overflows while the inputs are "
                   "finite, the golden is exact; verify also accepts the kernel's value.",
))

CONTRACT_NOTES = """\
aclnnLayerNormGrad phase one: no op_api; the aclnn is generated from the OpDef (op_host/layer_norm_grad_def.cpp),
the shape checks are the tiling's (op_host/layer_norm_grad_tiling_base.cpp, GetShapeAttrsInfo).
- Nulls -> 161001; a dtype combination the OpDef lacks -> 161002: (dy = x = pd_x, variance, mean, gamma, pd_gamma =
  pd_beta) in (fp32, fp32, fp32, fp32, fp32), (fp16, fp32, fp32, fp32|fp16, fp32), (fp16, fp32, fp32, fp16, fp16),
  and the same with bf16. The proto's TensorType lists fp16/bf16 variance and mean too; the OpDef and the tiling's
  InputDtypeCheck take FLOAT only, as the Contract does. Only ascend950 is configured.
- Tiling (561002 on the device; 161002 here): dy dims >= gamma's, every axis of dy positive (no empty case), gamma =
  dy's trailing dims, dtype checks as above (pd_gamma, pd_beta FLOAT or gamma's, equal). Its CheckShapeSame calls
  (dy = x = pd_x, variance = mean, gamma = pd_gamma = pd_beta) log but their result is not checked: the Contract
  follows the proto (equal shapes) and no bundled case relies on the difference. numel(mean) = rows is the proto's
  shape rule, not checked by the source (a shorter mean is read out of bounds).
- eps is not an input: 1e-12 (float32 x) or 1e-5, as a float (the case value `epsilon`).
"""
