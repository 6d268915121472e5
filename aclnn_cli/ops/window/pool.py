"""Average pooling's gradient on the window family: the float64 reference with a rigorous bound, the exact values
(Fractions) of the elements it leaves open, the allowance of the 950's float32 kernel, and that kernel.

gradInput[h, w] = sum over the windows (oh, ow) covering (h, w) of gradOutput[oh, ow] / D[oh, ow]. Coverage is
separable: window (oh, ow) covers (h, w) exactly when oh covers h along H and ow covers w along W
(ops/families/window.AxisWindows.cover), so a plane's sums are two matmuls with 0/1 matrices:
gradInput = Ch^T (gradOutput / D) Cw. Functions receive gradOutput as (k, Ho, Wo) planes and self as (k, H, W)
(its values are never read: it gives H and W).

The divisor of a window (ops-nn pooling/avg_pool_v2_grad/op_kernel/arch35/avg_pool_v2_grad_simt.h,
CycleUpdateGradValue): divisorOverride where it is not 0; else, counting the padding, the window's positions inside
[-p, n + p) per axis (a ceil-mode window running past the right padding is cut there), multiplied; else the
positions inside the input.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

from ..accumulation import ACCUMULATION_UNIT, LAMBDA, SECOND_ORDER
from ..base import defect
from ..dyadic import exact_row_sums
from ..families.window import AxisWindows, Window, pair

U64 = 2.0**-53
SLACK = 1 + 2.0**-40  # the float64 roundings of the bound's own arithmetic
# float32 roundings that make one term: the 950 divides, fl(g / fl(D)) (fl(D): an int32 made float); A2 and A3's
# cube path multiplies by a reciprocal, fl(g * fl(1 / D)). Two cover both.
TERM_ROUNDINGS = 2
GLOBAL_MIN = 10  # IsGlobalAvgPool (aclnn_avgpool2d_backward.cpp): H and W at least 10
F32 = np.float32


def lists_rule(kernel, stride, padding) -> str | None:
    """The window arrays' checks both pooling gradients' op_apis make: kernelSize 1 or 2 values > 0, stride 0, 1 or 2
    values > 0 (None: a null stride, the kernel's), padding 1 or 2 values in [0, kernel / 2]."""
    k, p = tuple(kernel or ()), tuple(padding or ())
    if len(k) not in (1, 2) or min(k) <= 0:
        return f"kernelSize {list(k)}: 1 or 2 values, each > 0"
    if stride is not None and (len(stride) > 2 or (stride and min(stride) <= 0)):
        return f"stride {list(stride)}: at most 2 values, each > 0"
    if len(p) not in (1, 2):
        return f"padding {list(p)}: 1 or 2 values"
    kk, pp = pair(k), pair(p)
    if min(pp) < 0 or any(2 * pi > ki for pi, ki in zip(pp, kk)):
        return f"padding {list(p)}: each >= 0 and at most half the kernel {list(kk)}"
    return None


IN_DEPTH, OUT_DEPTH = "inputDepth", "gradDepth"  # a 3-D op's case_values: the depths that unfold its volumes


def depths(family: Window):
    """A 3-D op's `case_values`: the driver's depth D and the pooled tensor's Do (its blocks arrive as (k, D H, W)
    and (k, Do Ho, Wo); `windows` and `volume` unfold them)."""
    def values(shapes) -> dict:
        drv, g = tuple(shapes.get(family.driver) or ()), tuple(shapes.get(family.grad) or ())
        return {IN_DEPTH: int(drv[-3]) if len(drv) >= 3 else 1, OUT_DEPTH: int(g[-3]) if len(g) >= 3 else 1}
    return values


def windows(family: Window, t) -> tuple[AxisWindows, ...]:
    """The spatial axes of the blocks in t: ((D,) H, W) of self's (k, H, W) or (k, D H, W), of gradOutput's
    (k, Ho, Wo) or (k, Do Ho, Wo) (3-D: the depths from the op's case_values; whole (k, D, H, W) volumes as they
    are), the attributes."""
    drv, g = np.shape(t[family.driver]), np.shape(t[family.grad])
    n = family.spatial
    if n == 2 or len(drv) == n + 1:
        return family.axis_windows(t, drv[-n:], g[-n:])
    d, do = int(t[IN_DEPTH]), int(t[OUT_DEPTH])
    return family.axis_windows(t, (d, drv[-2] // max(d, 1), drv[-1]), (do, g[-2] // max(do, 1), g[-1]))


def volume(x, axes, pooled: bool = False) -> np.ndarray:
    """Blocks x (k, ..., last) as (k, one axis per window axis): the pooled sizes or the input's."""
    x = np.asarray(x)
    return x.reshape((x.shape[0], *(a.out if pooled else a.n for a in axes)))


def _outer(parts) -> np.ndarray:
    out = parts[0]
    for part in parts[1:]:
        out = np.multiply.outer(out, part)
    return out


def divisors(axes, include_pad: bool, override: int) -> np.ndarray:
    """(Ho, Wo) (3-D: (Do, Ho, Wo)) int64: each window's divisor."""
    if override:
        return np.full(tuple(a.out for a in axes), int(override), dtype=np.int64)
    if include_pad:
        return _outer([a.padded() for a in axes])
    return _outer([a.clipped() for a in axes])


def is_global(ah: AxisWindows, aw: AxisWindows, override: int) -> bool:
    """The 950's op_api takes a Div instead of AvgPoolV2Grad (IsGlobalAvgPool): no divisorOverride, the kernel the
    whole plane of at least 10 x 10, one window."""
    return (not override and (ah.k, aw.k) == (ah.n, aw.n) and min(ah.n, aw.n) >= GLOBAL_MIN
            and (ah.out, aw.out) == (1, 1))


def counts(axes) -> np.ndarray:
    """(H, W) (3-D: (D, H, W)) how many windows cover each input position: the terms of its sum."""
    return _outer([a.cover().sum(axis=0) for a in axes])


def gamma(n, unit: float) -> np.ndarray:
    nu = np.asarray(n, np.float64) * unit
    return nu / (1 - nu)


def plane_sums(terms: np.ndarray, axes) -> np.ndarray:
    """Ch^T terms Cw for each plane of terms (k, Ho, Wo), float64: (k, H, W); 3-D: each axis's cover contracted in
    turn, (k, Do, Ho, Wo) to (k, D, H, W)."""
    if len(axes) == 2:
        ch, cw = (a.cover().astype(np.float64) for a in axes)
        return np.matmul(np.matmul(ch.T, terms), cw)
    x = terms
    for i, a in enumerate(axes):
        x = np.moveaxis(np.tensordot(x, a.cover().astype(np.float64), axes=([1 + i], [0])), -1, 1 + i)
    return x


def reference(g: np.ndarray, axes, d: np.ndarray, fp16_divide: bool = False, term_roundings: int = TERM_ROUNDINGS):
    """(value, bound, scale, allowance) of the blocks' gradients, g (k, Ho, Wo) (3-D: (k, Do, Ho, Wo)) float64.

    value: the float64 sums (one rounding per term's division, at most n - 1 additions per element, the products
    by 0 and 1 exact): within gamma_{n + 2} scale of the exact sum in float64's unit (the extra one: a divisor
    beyond 2^53 rounded). scale: sum |g| / |D| over the element's windows. allowance: a float32 kernel's terms,
    c = `term_roundings` roundings each (TERM_ROUNDINGS by default), added in any order: the smaller of the worst
    case gamma_{n - 1 + c} and the probabilistic lambda sqrt(n - 1 + c) (docs/allowances.md), times scale.
    fp16_divide: the 950's Div path with cubeMathType 1 or 2 (gradOutput cast to float16, divided in float16):
    2^-10 of each term and float16's subnormal step more."""
    dd = d.astype(np.float64)
    n = counts(axes)
    with np.errstate(all="ignore"):
        value = plane_sums(g / dd, axes)
        scale = plane_sums(np.abs(g) / np.abs(dd), axes)
        bound = gamma(n + 2, U64) * SLACK * scale
        c = n - 1 + term_roundings
        growth = np.minimum(gamma(c, ACCUMULATION_UNIT), LAMBDA * np.sqrt(c) * SECOND_ORDER * ACCUMULATION_UNIT)
        allowance = np.where(n > 0, growth, 0.0) * scale * SLACK
        if fp16_divide:
            allowance = allowance + np.where(n > 0, 2.0**-10 * scale + 2.0**-24, 0.0)
    return value, bound, scale, allowance


def exact_at(g: np.ndarray, axes, d: np.ndarray, where: np.ndarray) -> np.ndarray:
    """The exact values (Fractions) at flat positions `where` of the blocks (k, H, W) (3-D: (k, D, H, W)),
    block-major; g (k, Ho, Wo) (3-D: (k, Do, Ho, Wo)).

    An element's terms over a common denominator L = lcm of its divisors: sum g (L / D) / L. With g a float32 value
    (24 bits) and L below 2^29 each g (L / D) is exact in float64, and their sum is dyadic.exact_row_sums': integers,
    no Fraction per term. Elements outside that (a divisor beyond it) are summed in Fractions."""
    where = np.asarray(where, dtype=np.int64)
    sizes = tuple(a.n for a in axes)
    b, rest = where // max(int(np.prod(sizes)), 1), where % max(int(np.prod(sizes)), 1)
    pos = np.unravel_index(rest, sizes)
    nax = len(axes)
    cov = []  # each axis's covering windows, broadcast to (E, m0, m1, ...)
    for i, (a, p) in enumerate(zip(axes, pos)):
        c = a.covering()[p]
        cov.append(c.reshape((c.shape[0],) + tuple(c.shape[1] if j == i else 1 for j in range(nax))))
    full = np.broadcast_shapes(*(c.shape for c in cov))
    cov = [np.broadcast_to(c, full).reshape(where.size, -1) for c in cov]
    valid = np.logical_and.reduce([c >= 0 for c in cov]) if cov else np.zeros((where.size, 0), bool)
    idx = tuple(np.where(valid, c, 0) for c in cov)
    if where.size and valid.shape[1]:
        gv = np.where(valid, g[(b[:, None], *idx)], 0.0)
        dv = np.where(valid, d[idx], 1).astype(np.int64)
    else:
        gv, dv = np.zeros((where.size, 0)), np.ones((where.size, 0), np.int64)
    lcm = np.lcm.reduce(np.abs(dv), axis=1) if dv.shape[1] else np.ones(where.size, np.int64)
    with np.errstate(all="ignore"):
        fast = (lcm < 2**29) & np.all(gv.astype(np.float32).astype(np.float64) == gv, axis=1)
    out = np.empty(where.size, dtype=object)
    if fast.any():
        scaled = gv[fast] * (lcm[fast][:, None] // dv[fast]).astype(np.float64)  # (exact: at most 53 bits)
        sums = exact_row_sums(scaled) if scaled.shape[1] else [Fraction(0)] * int(fast.sum())
        out[fast] = [s / int(m) for s, m in zip(sums, lcm[fast].tolist())]
    for e in np.flatnonzero(~fast).tolist():
        out[e] = sum((Fraction(float(gv[e, j])) / int(dv[e, j]) for j in np.flatnonzero(valid[e]).tolist()), Fraction(0))
    return out


def exact(g: np.ndarray, axes, d: np.ndarray) -> np.ndarray:
    """Whole blocks exactly: g an object array of Fractions (k, Ho, Wo) (3-D: (k, Do, Ho, Wo)); (k, H, W)
    (3-D: (k, D, H, W)) Fractions."""
    covers = [a.cover() for a in axes]
    k = g.shape[0]
    out = np.empty((k, *(a.n for a in axes)), dtype=object)
    for b in range(k):
        for pos in itertools.product(*(range(a.n) for a in axes)):
            wins = itertools.product(*(np.flatnonzero(c[:, i]).tolist() for c, i in zip(covers, pos)))
            out[(b, *pos)] = sum((Fraction(g[(b, *o)]) / int(d[o]) for o in wins), Fraction(0))
    return out


def divisor_defects(prefix: str, compute) -> dict:
    """The divisor rule's defects of an average pooling gradient, as `compute(t, include=..., override=...)` (the
    op's kernel with its divisors from those) makes them: countIncludePad ignored either way, divisorOverride
    ignored."""
    @defect
    def include_pad_ignored(t):
        """Defect: countIncludePad ignored, the padding never counted."""
        return compute(t, include=False)

    @defect
    def include_pad_always(t):
        """Defect: countIncludePad ignored, the padding always counted."""
        return compute(t, include=True)

    @defect
    def override_ignored(t):
        """Defect: divisorOverride ignored."""
        return compute(t, override=0)

    return {f"{prefix}-include-pad-ignored": include_pad_ignored, f"{prefix}-include-pad-always": include_pad_always,
            f"{prefix}-override-ignored": override_ignored}


def window_sums(terms: np.ndarray, axes, order: str = "rows", last_write: bool = False) -> np.ndarray:
    """Each input position's covering windows' terms added in `terms`' dtype, one window at a time: "rows" as the
    950's SIMT kernel (AvgPoolV2GradSimtNchwKernel: oh from phStart to phEnd, ow inner; 3-D: od outer), "reversed"
    (the last window first), "columns" (the last axis outer). last_write: each window's term stored, not added (a
    defect). terms (k, Ho, Wo) (3-D: (k, Do, Ho, Wo)); (k, H, W) (3-D: (k, D, H, W))."""
    if any(a.d != 1 for a in axes):
        raise ValueError("window_sums walks windows of dilation 1 (a range of windows per position)")
    k = terms.shape[0]
    ranges = [a.first_last() for a in axes]
    acc = np.zeros((k, *(a.n for a in axes)), dtype=terms.dtype)
    spans = [int((last - first).max(initial=0)) for first, last in ranges]
    steps = list(itertools.product(*(range(n) for n in spans)))
    if order == "columns":
        steps = sorted(steps, key=lambda ab: ab[::-1])
    elif order == "reversed":
        steps = steps[::-1]
    for step in steps:
        wins = [first + j for (first, _), j in zip(ranges, step)]
        valid = _outer([w < last for w, (_, last) in zip(wins, ranges)])
        vals = terms[(slice(None), *np.ix_(*(np.minimum(w, max(a.out - 1, 0)) for w, a in zip(wins, axes))))]
        if last_write:
            acc = np.where(valid, vals, acc)
        else:
            acc = np.where(valid, acc + vals, acc)
    return acc
