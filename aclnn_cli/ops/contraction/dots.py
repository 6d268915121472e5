"""Dot products over K for the contraction family: the float64 reference with a rigorous bound, the exact values
of the few elements that bound leaves open, and the allowance of a float32 accumulation (docs/allowances.md,
"Contractions").

Operands arrive as matrices (k, M, K) and (k, K, N) (ops/families/contraction.py). Every input is a float32,
float16 or bfloat16 value: a product of two has at most 48 significant bits and an exponent far inside float64's
range, so each product is exact in float64 and the exact dot product is an exact sum of float64 values.

- reference: np.matmul in float64 (BLAS, any order and blocking, FMA or not) is within gamma_K |A|.|B| of the
  exact sum (Higham, Accuracy and Stability, 3.1: any order of K - 1 additions of exact products), and
  |A|.|B|, a second matmul, is itself within a factor gamma_K of its exact value, so
  bound = gamma_K / (1 - gamma_K) * fl(|A|.|B|), with slack for the multiplication. The term scale is |A|.|B|.
- exact_at: the K exact float64 products of each wanted element summed exactly (ops/dyadic.exact_row_sums):
  integers, never a Fraction per term.
- allowance: what a correct float32 kernel may stand off the exact sum: from K and |A|.|B| in any order, and
  tighter from the prefix sums along K in the orders kernels use (docs/allowances.md, "Contractions").
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

import math

from ..accumulation import ACCUMULATION_UNIT, LAMBDA, SECOND_ORDER, across_rows_allowance
from ..dyadic import exact_row_sums

U64 = 2.0**-53
SLACK = 1 + 2.0**-40  # covers the float64 roundings of the bound's own arithmetic
PRODUCT_ROUNDINGS = 1  # a float32 product rounded once on the cube (16-bit products are exact: 0; 1 covers both)
WANTED_TERMS = 1 << 22  # products held at once by exact_at (32 MiB of float64)


def gamma(k: int, unit: float = U64) -> float:
    """gamma_k = k u / (1 - k u) in float64's unit (or `unit`), for k additions."""
    ku = max(k, 1) * unit
    return ku / (1 - ku)


def growth(k, term_roundings: int = PRODUCT_ROUNDINGS):
    """The allowance of a float32 dot product of k terms (an int, or per element an array) in units of
    u * sum|terms| (docs/allowances.md).

    Any order of additions is a binary tree; node sums are bounded by their subtree's sum|t|, and
    sum over nodes of (subtree sum|t|)^2 <= sum|t| * sum_i |t_i| depth_i <= (sum|t|)^2 (k - 1). With the
    probabilistic model of the row families (Hoeffding, lambda = 8) the error is within
    lambda u sqrt(k - 1 + c) sum|t|: growth sqrt(k), where the worst case grows as k."""
    return LAMBDA * np.sqrt(np.maximum(np.asarray(k) - 1, 0) + term_roundings) * SECOND_ORDER


def reference(left: np.ndarray, right: np.ndarray):
    """(value, bound, |A|.|B|, allowance) of left @ right, float64 operands (k, M, K) and (k, K, N).

    K is walked in chunks of about sqrt(K) (two matmuls each: the products and their absolute values), as the row
    families walk rows (golden/rows.py, AcrossRows): a chunk's sum|t| bounds every prefix sum inside it, so the
    largest prefix in K order is bounded by max over chunks of |sum before the chunk| + the chunk's sum|t|, and
    sum t_i^2 by the sum of the chunks' (sum|t|)^2. The allowance is the smaller of the any-order one (growth(K))
    and the row families' (ops/accumulation.py) from these bounds. Any order of float64 additions of the exact
    products stays within gamma_K sum|t| of the exact sum, the chunked one too."""
    k = left.shape[-1]
    step = k_step(k)
    shape = (*left.shape[:-1], right.shape[-1])
    value, scale, peak, squares = (np.zeros(shape) for _ in range(4))
    # (two buffers for every chunk's products: a fresh (M, N) array per chunk faulted its pages in each time, half
    #  of a 4096 x 4096 x 4096 reference's time; each sum sees the same operations in the same order as before)
    size, work = np.empty(shape), np.empty(shape)
    for s in range(0, k, step):
        np.matmul(np.abs(left[..., s:s + step]), np.abs(right[..., s:s + step, :]), out=size)
        np.add(np.abs(value, out=work), size, out=work)
        np.maximum(peak, work, out=peak)
        scale += size
        squares += np.multiply(size, size, out=work)
        value += np.matmul(left[..., s:s + step], right[..., s:s + step, :], out=work)
    return finished(value, scale, peak, squares, k, k)


def certified(left: np.ndarray, right: np.ndarray):
    """(value, bound, scale, tighter) of left @ right for gen's certification: the value one float64 matmul (any
    order and blocking BLAS takes: within gamma_K(u64) |A|.|B| of the exact sum, the module's docstring), the bound
    gamma_K(u64) times `norm_bound`'s upper bound on the exact |A|.|B| (with SLACK for the bound's own float64
    arithmetic: a few roundings of 2^-53 each), the scale that upper bound (certification's alone: no allowance is
    made from it), and tighter(): the bound from `magnitude`, a second product, for where the norms' leave many
    elements uncertain (golden/rowsgen)."""
    scale, factor = norm_bound(left, right)

    def tighter() -> np.ndarray:
        exact_scale, exact_factor = magnitude(left, right)
        return exact_factor * SLACK * exact_scale

    return np.matmul(left, right), factor * SLACK * scale, scale, tighter


def norm_bound(left: np.ndarray, right: np.ndarray):
    """(scale, factor) as `magnitude` gives them, from the rows' and columns' norms: sum_k |a_ik| |b_kj| <=
    ||a_i|| ||b_j|| (Cauchy-Schwarz), in O(MK + KN + MN) instead of a product's O(MKN). For random operands it is
    about 1.6 times |A|.|B| (E|x|^2 / E x^2 = 2 / pi for normal values), which moves gen's bound of about 2^-40
    of the terms no nearer any rounding boundary that matters; operands built to be orthogonal in magnitude make it
    loose, and `certified`'s tighter() takes over.

    Rigour, in float64: each square is exact (a float32, float16 or bfloat16 value has at most 24 significant bits)
    or within u64 of its value, every term >= 0, so the computed sum of K squares is >= (1 - gamma_K)(1 - u64) of
    the exact one in any order; the square root, the product of two norms and the division below each round once
    (1 - u64). So fl(||a|| ||b||) >= (1 - gamma_K - 5 u64) ||a|| ||b||, and dividing by 1 - gamma_K - 8 u64 (a
    rounding itself) leaves an upper bound. No value of a float32 or narrower operand under- or overflows a square
    in float64; a float64 one that overflows leaves an infinity, a bound no element is certified with."""
    k = left.shape[-1]
    g = gamma(k)
    with np.errstate(over="ignore", invalid="ignore"):
        rows = np.sqrt(np.einsum("...ik,...ik->...i", left, left))
        columns = np.sqrt(np.einsum("...kj,...kj->...j", right, right))
        scale = rows[..., :, None] * columns[..., None, :]
    scale /= 1 - g - 8 * U64
    return scale, g


F32_UNIT = 2.0**-24
F32_TERMS = 1 << 20  # the longest K whose |A|.|B| is taken in float32 (gamma_K(u32) <= 1/16)
F32_UNDERFLOW = 2.0**-126  # a float32 rounding's absolute error below its normal range, flushed to zero or not


def magnitude(left: np.ndarray, right: np.ndarray):
    """(scale, factor): an |A|.|B| (float64, (k, M, N)) and the factor that makes factor * scale a bound on the
    float64 value's error, gamma_K(u64) S (S the exact |A|.|B|; the module's docstring).

    In float32 (sgemm: half a float64 matmul's time), where that is rigorous: every operand value is a float32,
    float16 or bfloat16 value (the module's docstring), so |A| and |B| convert to float32 exactly (checked: a value
    that would round sends the call to float64). The computed fl32(|A|.|B|) is an inner product of K terms in any
    order, blocking and FMA use, so (Higham, Accuracy and Stability, 3.1, 3.5: products rounded too) it is within
    gamma_K(u32) S of S where every rounding is fl(x) = x (1 + d), |d| <= u32. Below float32's normal range a
    rounding has an absolute error e instead, |e| < 2^-126 (2^-150, half the subnormal spacing, with gradual
    underflow; still below 2^-126 where a BLAS flushes results to zero; float16 products, 2^-48 at least, never get
    there, bfloat16 and float32 ones may): at most 2K - 1 roundings (K products, K - 1 additions; an FMA merges
    two), each e carried through at most K more roundings, (1 + u32)^K <= 1 + gamma_K(u32) < 2. So
        fl32(|A|.|B|) >= (1 - gamma_K(u32)) S - 2K * 2 * 2^-126,  S <= (fl32(|A|.|B|) + K 2^-124) / (1 - gamma_K(u32)),
    and that right side is the scale, the factor gamma_K(u64). Every term is >= 0, so an overflow anywhere leaves an
    infinity in the result (inf + x is inf for x >= 0; no inf - inf): a finite result had none, an infinite one sends
    the call to float64. K past F32_TERMS does too (gamma_K(u32) stays <= 1/16). The bound's float64 evaluation (an
    addition, a division, two products) rounds a few times by 2^-53: SLACK covers them.

    Else in float64, as before: fl64(|A|.|B|) >= (1 - gamma_K(u64)) S (exact products, any order of the additions),
    the scale fl64(|A|.|B|) and the factor gamma_K(u64) / (1 - gamma_K(u64))."""
    k = left.shape[-1]
    if 0 < k <= F32_TERMS:
        a, b = _float32_abs(left), _float32_abs(right)
        if a is not None and b is not None:
            with np.errstate(over="ignore"):
                s = np.matmul(a, b)
            del a, b
            if np.isfinite(s).all():
                scale = s.astype(np.float64)
                del s
                scale += k * (4 * F32_UNDERFLOW)
                scale /= 1 - gamma(k, F32_UNIT)
                return scale, gamma(k)
    g = gamma(k)
    return np.matmul(np.abs(left), np.abs(right)), g / (1 - g)


def _float32_abs(x: np.ndarray) -> np.ndarray | None:
    """|x| in float32, or None where a value of x is not a float32 value (its conversion would round)."""
    with np.errstate(all="ignore"):
        narrow = x.astype(np.float32)
    if not np.array_equal(narrow, x):
        return None
    return np.abs(narrow, out=narrow)


def k_step(k: int) -> int:
    """The chunk of K whose sum|t| bounds the prefix sums inside it: about sqrt(K)."""
    return max(16, math.isqrt(max(k, 1)))


class Walk:
    """The chunked walk of `reference` for single elements, from their products in K order (rows of float64
    arrays, fed a piece of K at a time with `add`): any chunking of K gives a valid prefix bound."""

    def __init__(self, n: int, k: int) -> None:
        self.value, self.scale, self.peak, self.squares = (np.zeros(n) for _ in range(4))
        self.step = k_step(k)

    def add(self, at, products: np.ndarray) -> None:
        """products (len(at), terms): the next terms in K order of the elements `at` (indices or a slice)."""
        value, scale, peak, squares = (a[at] for a in (self.value, self.scale, self.peak, self.squares))
        for s in range(0, products.shape[1], self.step):
            piece = products[:, s:s + self.step]
            size = np.abs(piece).sum(axis=1)
            np.maximum(peak, np.abs(value) + size, out=peak)
            value += piece.sum(axis=1)
            scale += size
            squares += size * size
        for a, v in zip((self.value, self.scale, self.peak, self.squares), (value, scale, peak, squares)):
            a[at] = v


FINISH_TILE = 1 << 16  # elements `finished` takes at a time


def finished(value, scale, peak, squares, k: int, counts, term_roundings: int = PRODUCT_ROUNDINGS):
    """(value, bound, scale, allowance) from a walk's sums: the bound gamma_K / (1 - gamma_K) scale, and the
    smaller of the prefix allowance and the any-order one, each element of `counts` nonzero terms (an int: all).

    Element by element, FINISH_TILE elements at a time: its twenty temporaries of a 4096 x 4096 output's size had
    each faulted 128 MiB of pages in (a third of that reference's time, and most of its memory)."""
    g = gamma(k)
    bound, allowance = np.empty(np.shape(value)), np.empty(np.shape(value))
    v, sc, pk, sq, b, al = (np.reshape(a, -1) for a in (value, scale, peak, squares, bound, allowance))
    c = counts if np.ndim(counts) == 0 else np.broadcast_to(counts, np.shape(value)).reshape(-1)
    for s in range(0, v.size, FINISH_TILE):
        e = s + FINISH_TILE
        n = c if np.ndim(c) == 0 else c[s:e]
        b[s:e] = (g / (1 - g)) * SLACK * sc[s:e]
        top = np.maximum(pk[s:e], np.abs(v[s:e]))
        by_rows = across_rows_allowance((top + b[s:e]) * SLACK, sc[s:e] * SLACK, sq[s:e] * SLACK, n, term_roundings)
        al[s:e] = np.minimum(by_rows, growth(n, term_roundings) * ACCUMULATION_UNIT * SLACK * sc[s:e])
    return value, bound, scale, allowance


def reference_at(left: np.ndarray, right: np.ndarray, where: np.ndarray):
    """`reference` of out's elements at flat positions `where` of the blocks (k, M, N), block-major: 1-d arrays."""
    where = np.asarray(where, dtype=np.int64)
    walk = Walk(where.size, left.shape[2])
    for sl, row, column in _operands_at(left, right, where):
        walk.add(sl, row * column)
    return finished(walk.value, walk.scale, walk.peak, walk.squares, left.shape[2], left.shape[2])


def _operands_at(left: np.ndarray, right: np.ndarray, where: np.ndarray):
    """(slice of `where`, its elements' rows of left, their columns of right, as float64), WANTED_TERMS values at a
    time. The operands may be as stored (float16, bfloat16, float32: ops/base.narrow_blocks): only the rows and
    columns asked for are widened."""
    k, m, kk = left.shape
    n = right.shape[2]
    b, rest = where // (m * n), where % (m * n)
    i, j = rest // n, rest % n
    step = max(1, WANTED_TERMS // max(kk, 1))
    for s in range(0, where.size, step):
        sl = slice(s, s + step)
        rows, columns = left[b[sl], i[sl], :], right[b[sl], :, j[sl]]
        yield sl, rows.astype(np.float64, copy=False), columns.astype(np.float64, copy=False)


def input_rounding_error(left: np.ndarray, right: np.ndarray, representable, relative: float,
                         floor: float = 0.0) -> np.ndarray:
    """How far the products change when each operand value not `representable` (a boolean function of values) is
    rounded with a relative error up to `relative`, or an absolute one up to `floor` below the target's normal range
    (float16's subnormals): |dA|.|B| + |A|.|dB| + |dA|.|dB|, zero where nothing changes."""
    da = np.where(representable(left), 0.0, np.maximum(relative * np.abs(left), floor))
    db = np.where(representable(right), 0.0, np.maximum(relative * np.abs(right), floor))
    if not da.any() and not db.any():
        return np.zeros((*left.shape[:-1], right.shape[-1]))
    return SLACK * (np.matmul(da, np.abs(right)) + np.matmul(np.abs(left), db) + np.matmul(da, db))


def ieee(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The IEEE float64 sum of products where an operand is inf or NaN: every product formed (inf * 0 is NaN),
    whatever a BLAS may skip. Only blocks holding a non-finite value come here."""
    with np.errstate(all="ignore"):
        return (left[:, :, :, None] * right[:, None, :, :]).sum(axis=2)


def exact_at(left: np.ndarray, right: np.ndarray, where: np.ndarray) -> np.ndarray:
    """The exact values (Fractions) of out at flat positions `where` of the blocks (k, M, N), block-major."""
    where = np.asarray(where, dtype=np.int64)
    values: list[Fraction] = []
    for _, row, column in _operands_at(left, right, where):
        products = row * column  # (exact: at most 48 bits each)
        values += exact_row_sums(products) if left.shape[2] else [Fraction(0)] * products.shape[0]
    return np.array(values + [None], dtype=object)[:-1]


def exact(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Whole blocks exactly (object arrays of Fractions in, Fractions out): the definition, for small blocks."""
    k, m, _ = left.shape
    n = right.shape[2]
    out = np.empty((k, m, n), dtype=object)
    for b in range(k):
        for i in range(m):
            for j in range(n):
                out[b, i, j] = sum((x * y for x, y in zip(left[b, i, :], right[b, :, j])), Fraction(0))
    return out
