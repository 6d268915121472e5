"""What aclnnSoftmaxBackward and aclnnLogSoftmaxBackward share: rows along `dim`, the 950 kernels' float32
row sums, their phase-one rules, edges and the defects both ops can have.

Both ops take (gradOutput, output, int64_t dim, out); the 950 kernels (activation/softmax_grad and
activation/log_softmax_grad, op_kernel/arch35) cut the shape into (A1, R, A0) around `dim`: the AR
templates (A0 = 1) sum a row in 64-lane blocks (`treesum.tree_sum`), the ARA templates (A0 > 1) sum R
vectors of A0 lanes by folding and halving (`NlastReduceSum`, `NlastDichotomyAdd` in softmax_grad_base.h;
`AscendC::ReduceSum<RA>` in the full-load ARA kernels), modelled by `column_tree_sum`. Not an op module:
it registers nothing.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable, Mapping

import numpy as np

from ..base import AttrSpec, TensorSpec, products
from ..families import Rows, dim_axis
from ..treesum import exact_sum_factor, row_sum64, tree_sum

DY, Y, OUT = "gradOutput", "output", "out"
U = 2.0**-53  # float64 unit roundoff
ALL = ("950", "A3", "A2", "310P", "910")
PRODUCTS = products(*ALL, overrides={"310P": ("float32", "float16"), "910": ("float32", "float16")})
DIM = AttrSpec("dim", "int", default=-1)
SIGNATURE = (DY, Y, "dim", OUT)
FAMILY = Rows(driver=Y, axes=dim_axis(Y, "dim"))


def tensors(y_fill: Mapping) -> tuple[TensorSpec, ...]:
    """(gradOutput, output, out) with the forward output's default fill."""
    return (TensorSpec(DY, "input", {"normal": [0, 1]}), TensorSpec(Y, "input", dict(y_fill)),
            TensorSpec(OUT, "output", {"constant": 0}))


# ------------------------------------------------------------------ float32 row sums (the kernels' orders)

def column_tree_sum(x: np.ndarray) -> np.ndarray:
    """Sum along axis 1 of (k, R, A0), each column on its own: rows [P, R) folded onto [0, R - P) (P the
    largest power of two below R, FindNearestPower2), then halved pairwise (row j + row j + n/2): the
    ARA kernels' NlastDichotomyAdd order, its groups of 8 rows taken as one halving tree."""
    n = x.shape[1]
    if n == 0:
        return np.zeros((x.shape[0], 1, x.shape[2]), dtype=x.dtype)
    acc = np.array(x, copy=True)
    if n & (n - 1):
        p = 1 << (n.bit_length() - 1)
        acc[:, :n - p] += acc[:, p:n]
        n = p
    while n > 1:
        n //= 2
        acc[:, :n] += acc[:, n:2 * n]
    return acc[:, :1]


def row_sum32(x: np.ndarray) -> np.ndarray:
    """The 950 kernels' row sum of (k, R, A0), keepdims: AR (A0 = 1) in 64-lane blocks, ARA by columns."""
    return tree_sum(x, axis=1) if x.shape[2] == 1 else column_tree_sum(x)


def sequential_sum(x: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Sum along axis 1 of (k, R, A0) in index order, every addition rounded to `dtype` (keepdims, as float32)."""
    acc = np.zeros((x.shape[0], 1, x.shape[2]), dtype=dtype)
    terms = np.asarray(x).astype(dtype)
    for j in range(x.shape[1]):
        acc = (acc + terms[:, j:j + 1]).astype(dtype)
    return acc.astype(np.float32)


def lanes_sum(x: np.ndarray, lanes: int = 8) -> np.ndarray:
    """Sum along axis 1 of (k, R, A0) as a SIMD loop does: `lanes` running sums in index order (element j into
    lane j % lanes), then the lanes halved pairwise (ATen's vec::reduce_all over Vectorized<float>, AVX2).
    Only for A0 = 1 rows; keepdims, in x's dtype."""
    k, n, _ = x.shape
    pad = -n % lanes
    acc = np.zeros((k, lanes), dtype=x.dtype)
    body = np.concatenate([x[:, :, 0], np.zeros((k, pad), dtype=x.dtype)], axis=1).reshape(k, -1, lanes)
    for j in range(body.shape[1]):
        acc = acc + body[:, j]
    while acc.shape[1] > 1:
        half = acc.shape[1] // 2
        acc = acc[:, :half] + acc[:, half:]
    return acc.reshape(k, 1, 1)


def aten_sum(x: np.ndarray) -> np.ndarray:
    """ATen's CPU order (aten/src/ATen/native/cpu/SoftMaxKernel.cpp): 8 lanes along the last dim
    (_vec_host_softmax_backward_lastdim), a running sum per column otherwise (_vec_softmax_backward)."""
    return lanes_sum(x) if x.shape[2] == 1 else sequential_sum(x, x.dtype)


HALF = np.float16


def half_sum(x: np.ndarray) -> np.ndarray:
    """Defect helper: the row sum accumulated in index order in float16 (a scalar loop in the 16-bit type)."""
    return sequential_sum(x, HALF)


def dropped_sum(x: np.ndarray) -> np.ndarray:
    """Defect helper: the 950 row sum of every element but the row's last (a loop bound off by one)."""
    return row_sum32(x[:, :-1]) if x.shape[1] > 1 else np.zeros_like(x[:, :1])


def trailing_sum(x: np.ndarray) -> np.ndarray:
    """Defect helper: the sum taken along the axes after `dim` (A0) instead of along `dim` (with `dim` the
    last axis each element is a row of its own)."""
    return np.broadcast_to(x.sum(axis=2, keepdims=True, dtype=np.float32), x.shape)


# ------------------------------------------------------------------ float64 row sums for the references

FSUM_MIN_R = 16  # rows at least this long are summed by math.fsum; shorter ones pairwise (a Python call per row)


def row_sum_bounded(x: np.ndarray, magnitude: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(S, B): the sum of (k, R, A0) float64 terms along axis 1 (keepdims) and a bound B >= |S - exact sum|.

    Rows of R >= FSUM_MIN_R: math.fsum, correctly rounded (CPython's Modules/mathmodule.c), so B = u |S|; a
    tight B keeps gen's exact pass for the rare element within it of a rounding boundary. Shorter rows:
    treesum.row_sum64 with B = exact_sum_factor(R) u magnitude (magnitude = row_sum64 of |x|, which is at most
    (1 + 2 F u) of the exact sum of |x|: the slack is in the factor's + 20)."""
    r = x.shape[1]
    if r < FSUM_MIN_R:
        return row_sum64(x), exact_sum_factor(r) * U * magnitude * (1 + 2.0**-40)
    rows = np.ascontiguousarray(np.moveaxis(x, 1, -1)).reshape(-1, r).tolist()
    total = np.array([math.fsum(row) for row in rows]).reshape(x.shape[0], x.shape[2], 1)
    total = np.moveaxis(total, -1, 1)
    return total, U * np.abs(total)


# ------------------------------------------------------------------ phase one (161002 rules)

def _ndim(d) -> int:
    return max(len(d.shape), 1)


def dtype_rule(descs: Mapping, attrs: Mapping) -> str | None:
    """OP_CHECK_DTYPE_NOT_MATCH / _NOT_SAME: output's dtype is gradOutput's (out's is free: the result is Cast)."""
    dy, y = descs[DY].dtype, descs[Y].dtype
    if dy != y:
        return f"output dtype {y.name} is not gradOutput's {dy.name}"
    return None


def dim_rule(descs: Mapping, attrs: Mapping) -> str | None:
    """CheckDim: dim in [-n, n - 1], n = gradOutput's dims (a 0-d tensor counts as 1-d)."""
    n, dim = _ndim(descs[DY]), int(attrs["dim"])
    if not -n <= dim < n:
        return f"dim {dim} is outside [{-n}, {n - 1}] for a {len(descs[DY].shape)}-d gradOutput"
    return None


def shapes_rule(descs: Mapping, attrs: Mapping) -> str | None:
    """CheckShape: output and out shaped as gradOutput (OP_CHECK_SHAPE_NOT_EQUAL)."""
    for name in (Y, OUT):
        if tuple(descs[name].shape) != tuple(descs[DY].shape):
            return f"{name} shape {list(descs[name].shape)} is not gradOutput's {list(descs[DY].shape)}"
    return None


def rules_in_order(*rules: Callable[[Mapping, Mapping], str | None]) -> Callable[[Mapping, Mapping], str | None]:
    """A Contract.shape_rule checking `rules` in the source's order (the first broken one decides)."""
    def rule(descs: Mapping, attrs: Mapping) -> str | None:
        for r in rules:
            broken = r(descs, attrs)
            if broken:
                return broken
        return None
    return rule


# ------------------------------------------------------------------ edges

F32_MIN_NORMAL = 2.0**-126


def overflow_edge(kernel: Callable[[Mapping], np.ndarray], extra=None):
    """An `edge`: wherever the float32 kernel's result is inf/NaN the device may give that value (an
    intermediate overflowed on finite inputs: y * dy or the row sum past 3.4e38, LogSoftmax's exp(y) above
    88.72; or, on a row holding inf, a float32 sum whose sign or zero differs from the exact sum's).
    extra(t32) -> more places, on finite inputs (the kernel's value there too)."""
    def edge(t):
        t32 = {k: (np.asarray(v).astype(np.float32) if isinstance(v, np.ndarray) else v) for k, v in t.items()}
        with np.errstate(all="ignore"):
            k32 = np.asarray(kernel(t32), dtype=np.float32)
            where = ~np.isfinite(k32)
            if extra is not None:
                where |= extra(t32) & np.isfinite(t32[DY]) & np.isfinite(t32[Y])
        return where, k32.astype(np.float64)
    return edge


# ------------------------------------------------------------------ float64 rounded to odd

def odd64(q: Fraction) -> float:
    """q rounded to float64 by rounding to odd: q itself where representable, else the neighbour with an odd
    last bit. Rounding that once more to nearest at <= 51 bits (float32, float16, bfloat16) gives q's
    correctly rounded value (Boldo and Melquiond, "When double rounding is odd", 2005)."""
    v = float(q)
    exact = Fraction(v)
    if exact == q or not math.isfinite(v):
        return v
    other = math.nextafter(v, math.inf if exact < q else -math.inf)
    bits = np.array([v, other]).view(np.int64)
    return v if bits[0] & 1 else other
