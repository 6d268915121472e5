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

from fractions import Fraction

import numpy as np

from ..accumulation import ACCUMULATION_UNIT, LAMBDA, SECOND_ORDER
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


def windows(family: Window, t) -> tuple[AxisWindows, AxisWindows]:
    """The (H, W) axes of the planes in t: self's (k, H, W), gradOutput's (k, Ho, Wo), the attributes."""
    h, w = t[family.driver].shape[-2:]
    ho, wo = t[family.grad].shape[-2:]
    k, s, p, d, _ = family.parameters(t)
    return AxisWindows(h, ho, k[0], s[0], p[0], d[0]), AxisWindows(w, wo, k[1], s[1], p[1], d[1])


def divisors(ah: AxisWindows, aw: AxisWindows, include_pad: bool, override: int) -> np.ndarray:
    """(Ho, Wo) int64: each window's divisor."""
    if override:
        return np.full((ah.out, aw.out), int(override), dtype=np.int64)
    if include_pad:
        return np.outer(ah.padded(), aw.padded())
    return np.outer(ah.clipped(), aw.clipped())


def is_global(ah: AxisWindows, aw: AxisWindows, override: int) -> bool:
    """The 950's op_api takes a Div instead of AvgPoolV2Grad (IsGlobalAvgPool): no divisorOverride, the kernel the
    whole plane of at least 10 x 10, one window."""
    return (not override and (ah.k, aw.k) == (ah.n, aw.n) and min(ah.n, aw.n) >= GLOBAL_MIN
            and (ah.out, aw.out) == (1, 1))


def counts(ah: AxisWindows, aw: AxisWindows) -> np.ndarray:
    """(H, W) how many windows cover each input position: the terms of its sum."""
    return np.outer(ah.cover().sum(axis=0), aw.cover().sum(axis=0))


def gamma(n, unit: float) -> np.ndarray:
    nu = np.asarray(n, np.float64) * unit
    return nu / (1 - nu)


def plane_sums(terms: np.ndarray, ah: AxisWindows, aw: AxisWindows) -> np.ndarray:
    """Ch^T terms Cw for each plane of terms (k, Ho, Wo), float64: (k, H, W)."""
    ch, cw = ah.cover().astype(np.float64), aw.cover().astype(np.float64)
    return np.matmul(np.matmul(ch.T, terms), cw)


def reference(g: np.ndarray, ah: AxisWindows, aw: AxisWindows, d: np.ndarray, fp16_divide: bool = False):
    """(value, bound, scale, allowance) of the planes' gradients, g (k, Ho, Wo) float64.

    value: the float64 sums (one rounding per term's division, at most n - 1 additions per element, the products
    by 0 and 1 exact): within gamma_{n + 2} scale of the exact sum in float64's unit (the extra one: a divisor
    beyond 2^53 rounded). scale: sum |g| / |D| over the element's windows. allowance: a float32 kernel's terms,
    TERM_ROUNDINGS each, added in any order: the smaller of the worst case gamma_{n - 1 + c} and the probabilistic
    lambda sqrt(n - 1 + c) (docs/allowances.md), times scale. fp16_divide: the 950's Div path with cubeMathType
    1 or 2 (gradOutput cast to float16, divided in float16): 2^-10 of each term and float16's subnormal step more."""
    dd = d.astype(np.float64)
    n = counts(ah, aw)
    with np.errstate(all="ignore"):
        value = plane_sums(g / dd, ah, aw)
        scale = plane_sums(np.abs(g) / np.abs(dd), ah, aw)
        bound = gamma(n + 2, U64) * SLACK * scale
        c = n - 1 + TERM_ROUNDINGS
        growth = np.minimum(gamma(c, ACCUMULATION_UNIT), LAMBDA * np.sqrt(c) * SECOND_ORDER * ACCUMULATION_UNIT)
        allowance = np.where(n > 0, growth, 0.0) * scale * SLACK
        if fp16_divide:
            allowance = allowance + np.where(n > 0, 2.0**-10 * scale + 2.0**-24, 0.0)
    return value, bound, scale, allowance


def exact_at(g: np.ndarray, ah: AxisWindows, aw: AxisWindows, d: np.ndarray, where: np.ndarray) -> np.ndarray:
    """The exact values (Fractions) at flat positions `where` of the planes (k, H, W), block-major.

    An element's terms over a common denominator L = lcm of its divisors: sum g (L / D) / L. With g a float32 value
    (24 bits) and L below 2^29 each g (L / D) is exact in float64, and their sum is dyadic.exact_row_sums': integers,
    no Fraction per term. Elements outside that (a divisor beyond it) are summed in Fractions."""
    where = np.asarray(where, dtype=np.int64)
    size = ah.n * aw.n
    b, rest = where // size, where % size
    h, w = rest // aw.n, rest % aw.n
    oh, ow = ah.covering()[h], aw.covering()[w]  # (E, mh), (E, mw)
    oh = np.repeat(oh, ow.shape[1], axis=1)
    ow = np.tile(ow, (1, ah.covering().shape[1]))
    valid = (oh >= 0) & (ow >= 0)
    ohc, owc = np.where(valid, oh, 0), np.where(valid, ow, 0)
    gv = np.where(valid, g[b[:, None], ohc, owc], 0.0) if where.size and valid.shape[1] else np.zeros((where.size, 0))
    dv = np.where(valid, d[ohc, owc], 1).astype(np.int64) if gv.shape[1] else np.ones((where.size, 0), np.int64)
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


def exact(g: np.ndarray, ah: AxisWindows, aw: AxisWindows, d: np.ndarray) -> np.ndarray:
    """Whole planes exactly: g an object array of Fractions (k, Ho, Wo); (k, H, W) Fractions."""
    ch, cw = ah.cover(), aw.cover()
    k = g.shape[0]
    out = np.empty((k, ah.n, aw.n), dtype=object)
    for b in range(k):
        for h in range(ah.n):
            for w in range(aw.n):
                out[b, h, w] = sum((Fraction(g[b, oh, ow]) / int(d[oh, ow])
                                    for oh in np.flatnonzero(ch[:, h]).tolist()
                                    for ow in np.flatnonzero(cw[:, w]).tolist()), Fraction(0))
    return out


def window_sums(terms: np.ndarray, ah: AxisWindows, aw: AxisWindows, order: str = "rows",
                last_write: bool = False) -> np.ndarray:
    """Each input position's covering windows' terms added in `terms`' dtype, one window at a time: "rows" as the
    950's SIMT kernel (AvgPoolV2GradSimtNchwKernel: oh from phStart to phEnd, ow inner), "reversed" (the last
    window first), "columns" (ow outer). last_write: each window's term stored, not added (a defect)."""
    if ah.d != 1 or aw.d != 1:
        raise ValueError("window_sums walks windows of dilation 1 (a range of windows per position)")
    k = terms.shape[0]
    (fh, lh), (fw, lw) = ah.first_last(), aw.first_last()
    acc = np.zeros((k, ah.n, aw.n), dtype=terms.dtype)
    nh, nw = int((lh - fh).max(initial=0)), int((lw - fw).max(initial=0))
    steps = [(a, b) for a in range(nh) for b in range(nw)]
    if order == "columns":
        steps = sorted(steps, key=lambda ab: (ab[1], ab[0]))
    elif order == "reversed":
        steps = steps[::-1]
    for a, b in steps:
        oh, ow = fh + a, fw + b
        valid = (oh < lh)[:, None] & (ow < lw)[None, :]
        vals = terms[:, np.minimum(oh, max(ah.out - 1, 0))][:, :, np.minimum(ow, max(aw.out - 1, 0))]
        if last_write:
            acc = np.where(valid, vals, acc)
        else:
            acc = np.where(valid, acc + vals, acc)
    return acc
