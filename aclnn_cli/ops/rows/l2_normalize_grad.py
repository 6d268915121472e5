"""aclnnL2NormalizeGrad: dx = (dy - y * sum(y * dy, dim)) / max(sqrt(sum(x^2, dim)), eps).

A graph-only op of ops-nn (norm/l2_normalize_grad: the graph op L2NormalizeGrad(x, y, dy; dim, eps),
op_graph/l2_normalize_grad_proto.h). It has no op_api: CANN generates a single-op aclnn API from the OpDef
(op_host/l2_normalize_grad_def.cpp): inputs x, y, dy, output dx, all ND of one dtype among FLOAT, FLOAT16; attributes
dim (ListInt, optional, {1}) and eps (Float, optional, 1e-4); registered for ascend950 only. The header
(aclnnop/aclnn_l2_normalize_grad.h) is the generated one: `const aclIntArray *dimOptional` (an optional pointer
attribute takes the suffix; null or empty means {1}), `double eps` (a Float attribute is a double in the API and
reaches the tiling as the float the OpDef holds: every function here narrows it to float32). ops-nn has no public
header to compare token for token. y need not be x's normalization: the three inputs are independent.

The 950 kernel (op_kernel/arch35), in float32 with float16 inputs cast up exactly, the row along the one axis `dim`
names cut as (A1, D, A0):
- A0 = 1, D <= 6144 (regbase_dx_full_load.h): sq = ReduceSum(x*x), s = ReduceSum(y*dy) (AR: the 64-lane tree,
  `treesum.tree_sum`);
- A0 = 1, D > 6144 (regbase_dx_split_d.h): each chunk of 4096 summed by the tree, the chunk sums by the tree again
  (groups of 256 chunks: one group up to D = 1 M);
- A0 > 1 (regbase_dx_strided.h): sq and s per column in index order along D, Kahan-compensated (Mul, then
  y = t - c, t' = acc + y, c = (t' - acc) - y, acc = t');
then n = Maxs(Sqrt(sq), eps), dx = Div(Sub(dy, Mul(y, s)), n), cast to dx's dtype CAST_RINT. The tiling
(op_host/arch35/l2_normalize_grad_tiling.cpp) takes one dim only; an empty x is the empty kernel (nothing written).

The golden is the exact (dy - y S) / max(sqrt(Q), eps): where sqrt(Q) > eps it is not rational, and `_exact` gives its
float64 rounded to odd, decided by comparing squares of rationals (correct for every narrower dtype).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from . import softmax_common as C
from ..base import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..families import Rows
from ..registry import register
from ..treesum import kahan_sum, row_sum64, tree_sum

X, Y, DY, DX = "x", "y", "dy", "dx"
DIM, EPS = "dimOptional", "eps"
FULL_LOAD = 6144  # UB_FACTOR_DX_FULL_LOAD: the longest row the full-load template takes
CHUNK = 4096  # UB_FACTOR_DX_SPLIT_D: the split-D template's chunk


def eps32(t) -> float:
    """eps as the kernel holds it: the double narrowed to float."""
    with np.errstate(over="ignore"):
        return float(np.float32(float(t[EPS])))


def the_dim(dims, rank: int) -> int:
    """The axis a dim list names (null or empty: 1), negative counted from the end; not checked."""
    d = int(dims[0]) if dims else 1
    return d + rank if d < 0 else d


def _axes(shapes, attrs) -> tuple[int, int]:
    d = the_dim(attrs[DIM], len(shapes[X]))
    return d, d + 1


# ------------------------------------------------------------------ the golden

def _reference(t):
    """(dy - y S) / n in float64, n = max(sqrt(Q), eps), Q = sum x^2, S = sum y dy (terms exact in float64; sums
    within C.row_sum_bounded's bounds bQ, bS). |sqrt(Q64) - sqrt(Q)| <= bQ / (sqrt(Q64) + sqrt(Q64 - bQ)), plus
    sqrt's rounding u r; max is 1-Lipschitz, so n's error en is as much. N = dy - y S64: error |y| bS + u |y S| +
    u |N|. value = N / n: error <= (eN + |value| en) / (n - en) + u |value| (infinite where en >= n: exactly then).
    scale = (|dy| + |y| P) / n, P = sum |y dy|: the terms the result is made of."""
    x, y, dy = t[X], t[Y], t[DY]
    u = C.U
    sq_terms, s_terms = x * x, y * dy
    q, bq = C.row_sum_bounded(sq_terms, row_sum64(sq_terms))
    big_p = row_sum64(np.abs(s_terms))
    s, bs = C.row_sum_bounded(s_terms, big_p)
    with np.errstate(all="ignore"):
        r = np.sqrt(q)
        er = np.where(bq > 0, bq / (r + np.sqrt(np.maximum(q - bq, 0.0))), 0.0) + u * r
        n = np.maximum(r, eps32(t))
        num = dy - y * s
        value = num / n
        e_num = np.abs(y) * bs + u * np.abs(y * s) + u * np.abs(num)
        room = n - er
        bound = np.where(room > 0, (e_num + np.abs(value) * er) / np.where(room > 0, room, 1.0) + u * np.abs(value),
                         np.inf) * (1 + 2.0**-30)
        scale = (np.abs(dy) + np.abs(y) * big_p) / n * (1 + 2.0**-30)
    return Reference(value, bound, scale)


def _cmp_over_sqrt(a: Fraction, q: Fraction, c: Fraction) -> int:
    """The sign of a / sqrt(q) - c, for a, c >= 0 and q > 0 (squares compared)."""
    lhs, rhs = a * a, c * c * q
    return (lhs > rhs) - (lhs < rhs)


def over_sqrt_odd(num: Fraction, q: Fraction) -> Fraction:
    """num / sqrt(q) (q > 0) as its float64 rounded to odd (C.odd64's property), decided exactly."""
    if num == 0:
        return Fraction(0)
    a = abs(num)
    with localcontext() as ctx:
        ctx.prec = 40
        approx = (Decimal(a.numerator) / Decimal(a.denominator)) / (Decimal(q.numerator) / Decimal(q.denominator)).sqrt()
    lo = float(approx)
    while _cmp_over_sqrt(a, q, Fraction(lo)) < 0:
        lo = math.nextafter(lo, -math.inf)
    while _cmp_over_sqrt(a, q, Fraction(math.nextafter(lo, math.inf))) >= 0:
        lo = math.nextafter(lo, math.inf)
    if _cmp_over_sqrt(a, q, Fraction(lo)) == 0:
        v = lo
    else:
        hi = math.nextafter(lo, math.inf)
        v = lo if np.array([lo]).view(np.int64)[0] & 1 else hi
    return Fraction(v) if num > 0 else -Fraction(v)


def _exact(t):
    """Fractions: N = dy - y S exact; n = eps where Q <= eps^2 (N / eps, rational), else N / sqrt(Q) rounded to odd."""
    x, y, dy = t[X], t[Y], t[DY]
    e = Fraction(eps32(t))
    q = (x * x).sum(axis=1, keepdims=True)
    num = dy - y * (y * dy).sum(axis=1, keepdims=True)
    out = np.empty(num.shape, dtype=object)
    for i in np.ndindex(num.shape):
        qi = q[i[0], 0, i[2]]
        out[i] = num[i] / e if qi <= e * e else over_sqrt_odd(num[i], qi)
    return out


# ------------------------------------------------------------------ the kernel

def _split_d(terms):
    """The split-D template's sum of (k, D, 1): chunks of 4096 by the tree, their sums by the tree again."""
    d = terms.shape[1]
    parts = [tree_sum(terms[:, i:i + CHUNK]) for i in range(0, d, CHUNK)]
    return tree_sum(np.concatenate(parts, axis=1))


def row_sum(terms):
    """The 950's sum by template: full load (the tree), split D, strided (Kahan)."""
    if terms.shape[2] > 1:
        return kahan_sum(terms, 1)  # (the strided template: per column, in index order)
    return tree_sum(terms) if terms.shape[1] <= FULL_LOAD else _split_d(terms)


def _compute(t, sum_fn=row_sum, use_sqrt=True, floor=np.maximum, weight=Y, sign=-1, divide=True):
    """The kernel in the inputs' float type; the keywords make the variants."""
    x, y, dy = t[X], t[Y], t[DY]
    ft = x.dtype.type
    with np.errstate(all="ignore"):
        sq = sum_fn(x * x)
        n = floor(np.sqrt(sq) if use_sqrt else sq, ft(eps32(t)))
        num = dy + ft(sign) * (t[weight] * sum_fn(y * dy))
        return (num / n if divide else num * n).astype(x.dtype)


def _kernel(t):
    """Sq and S by the template's order, n = max(sqrt(Sq), eps), (dy - y S) / n, in float32."""
    return _compute(t)


def _edge(t):
    """Where a float32 intermediate overflows on finite inputs (x*x, y*dy or a sum past 3.4e38) the golden is exact;
    the device gives the kernel's value there: inf/NaN, or 0 where only the sum of squares overflowed (n = inf)."""
    t32 = {k: (np.asarray(v).astype(np.float32) if isinstance(v, np.ndarray) else v) for k, v in t.items()}
    with np.errstate(all="ignore"):
        k32 = _kernel(t32)
        inf_norm = np.isinf(row_sum(t32[X] * t32[X])) & np.isfinite(t32[X]).all(axis=1, keepdims=True)
        where = ~np.isfinite(k32) | np.broadcast_to(inf_norm, k32.shape)
    return where, k32.astype(np.float64)


def _variant(kind, doc: str, **how):
    fn = lambda t: _compute(t, **how)  # noqa: E731
    fn.__doc__ = doc
    return kind(fn)


VARIANTS = {
    "l2n-no-sqrt": _variant(defect, "Defect: the norm's sqrt left out: n = max(sum x^2, eps).", use_sqrt=False),
    "l2n-eps-as-min": _variant(defect, "Defect: eps clamps from above: n = min(sqrt(sum x^2), eps).", floor=np.minimum),
    "l2n-flipped-sum": _variant(defect, "Defect: the projection's sign flipped: (dy + y S) / n.", sign=1),
    "l2n-missing-sum": _variant(defect, "Defect: the projection left out: dy / n.", sign=0),
    "l2n-x-for-y": _variant(defect, "Defect: the projection weighted by x instead of y: (dy - x S) / n.", weight=X),
    "l2n-multiply-norm": _variant(defect, "Defect: multiplied by the norm instead of divided.", divide=False),
    "l2n-half-accumulation": _variant(defect, "Defect: both sums accumulated in index order in float16 (stagnate "
                                              "on long rows).", sum_fn=C.half_sum),
    "l2n-dropped-element": _variant(defect, "Defect: both sums miss the row's last element (a loop bound off by "
                                            "one).", sum_fn=C.dropped_sum),
    "l2n-tree-everywhere": _variant(legitimate, "Legitimate: every template summing by the tree (columns halved "
                                                "pairwise where A0 > 1).", sum_fn=C.row_sum32),
    "l2n-torch-order": _variant(legitimate, "Legitimate: ops-nn's torch golden's arrangement in float32: numpy's "
                                            "pairwise sums, clamp(sqrt), (dy - y s) / n.",
                                sum_fn=lambda v: v.sum(axis=1, keepdims=True, dtype=np.float32)),
}


@legitimate
def _reciprocal(t):
    """Legitimate: (dy - y S) * (1 / n): one more rounding than the division."""
    ft = t[X].dtype.type
    n_inv = _compute({**t, DY: np.zeros_like(t[DY]) + ft(1.0), Y: np.zeros_like(t[Y])})
    with np.errstate(all="ignore"):
        return ((t[DY] - t[Y] * row_sum(t[Y] * t[DY])) * n_inv).astype(t[X].dtype)


VARIANTS["l2n-reciprocal"] = _reciprocal


# ------------------------------------------------------------------ phase one

def _shape_rule(d, attrs) -> str | None:
    """Infershape (dx takes x's shape), then the tiling's CheckShape and ResolveDimAndShape in order. The device
    returns the tiling's refusals as 561002; 161002 here (CONTRACT_NOTES)."""
    xs = tuple(d[X].shape)
    for name in (Y, DY, DX):
        if tuple(d[name].shape) != xs:
            return f"{name} shape {list(d[name].shape)} is not x's {list(xs)}"
    dims = attrs[DIM] or ()
    if len(dims) > 1:
        return f"dim {list(dims)}: the kernel takes a single axis"
    if not 0 <= the_dim(dims, len(xs)) < len(xs):
        return f"dim {list(dims) or [1]} is outside [{-len(xs)}, {len(xs) - 1}] for a {len(xs)}-d x"
    return None


SPEC = register(OpSpec(
    name="aclnnL2NormalizeGrad",
    key="l2_normalize_grad",
    header="aclnnop/aclnn_l2_normalize_grad.h",
    summary="Gradient of L2Normalize along one axis: (dy - y * sum(y * dy, dim)) / max(sqrt(sum(x^2, dim)), eps).",
    formula="dx = (dy - y * sum(y * dy, dim, keepdim)) / max(sqrt(sum(x^2, dim, keepdim)), eps); eps narrowed to "
            "float32",
    tensors=(TensorSpec(X, "input", {"uniform": [-1.0, 1.0]}), TensorSpec(Y, "input", {"uniform": [-1.0, 1.0]}),
             TensorSpec(DY, "input", {"normal": [0, 1]}), TensorSpec(DX, "output", {"constant": 0})),
    attributes=(AttrSpec(DIM, "int_list", default=(1,), optional=True), AttrSpec(EPS, "double", default=1e-4)),
    products=products("950", overrides={"950": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    family=Rows(driver=X, axes=_axes),
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="same", shape_rule=_shape_rule),
    special_values="A row holding inf or NaN in x gives n = inf or NaN: dx is 0, NaN or inf/NaN as IEEE arithmetic "
                   "in the kernel's order gives it; inf or NaN in y or dy makes S inf/NaN and the row's dx with it. "
                   "Where a float32 intermediate overflows on finite inputs (x*x, y*dy or their sums beyond 3.4e38) "
                   "the golden is exact; verify also accepts the kernel's inf/NaN there.",
))

CONTRACT_NOTES = """\
aclnnL2NormalizeGrad phase one: no op_api; the aclnn is generated from the OpDef (norm/l2_normalize_grad/op_host/
l2_normalize_grad_def.cpp), registered for ascend950 only (the README lists more products; the OpDef does not).
- 161001: x, y, dy or dx null. dimOptional null: the default {1}.
- 161002: a dtype outside {FLOAT, FLOAT16}, or the four not of one dtype (the OpDef; the tiling's CheckDtype too).
- Infershape: dx takes x's shape and dtype.
- Tiling (561002 on the device; 161002 here): y and dy x's rank and shape; dim of more than one entry; the resolved
  dim (empty list: 1) outside [0, rank) (a 0-d x is refused by it). Empty x: the empty kernel, SUCCESS.
- eps: any double (no check), narrowed to float.
"""
