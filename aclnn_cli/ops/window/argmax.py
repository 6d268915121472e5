"""Max pooling's gradient on the window family: the forward's argmax (the derived `indices` input), the exact
scatter-add of gradOutput into the positions the indices name, its float64 reference with a rigorous bound, and the
950's float32 kernel.

    gradInput[p] = sum over the windows w whose index names p of gradOutput[w]

An index is the flat position h * W + w in its (n, c) plane (aclnnMaxPool2dWithIndices); the forward takes the
first maximum in the window's scan order (h outer, w inner: PyTorch's max_pool2d, what ops-nn's ATK executor
derives the indices with), a NaN wherever it lies (every NaN is taken, so the last), and the window's first
position inside the input when every value is -inf. Functions receive self (k, H, W), gradOutput and indices
(k, Ho, Wo).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ...errors import UserError
from ..accumulation import ACCUMULATION_UNIT, LAMBDA, SECOND_ORDER
from ..families.window import AxisWindows, Window
from .pool import SLACK, U64, gamma, windows

F32 = np.float32


def taps(a: AxisWindows) -> tuple[np.ndarray, np.ndarray]:
    """(out, k) input positions of each window's taps along one axis, in order, and whether each lies inside [0, n)
    (padding is no position)."""
    i = np.arange(a.out)[:, None] * a.s - a.p + np.arange(a.k)[None, :] * a.d
    return i, (i >= 0) & (i < a.n)


def first_taps(ah: AxisWindows, aw: AxisWindows) -> np.ndarray:
    """(Ho, Wo) each window's first position inside the input, h * W + w: where the forward starts its scan."""
    (ih, inh), (iw, inw) = taps(ah), taps(aw)
    h = np.take_along_axis(ih, np.argmax(inh, axis=1)[:, None], 1)[:, 0]
    w = np.take_along_axis(iw, np.argmax(inw, axis=1)[:, None], 1)[:, 0]
    return h[:, None] * aw.n + w[None, :]


def forward_indices(family: Window, t) -> np.ndarray:
    """The forward's indices of the planes of self in t: (k, Ho, Wo) int64 (the derivation of `indices`). One pass
    per tap (jh, jw) of the kernel, each over every window of the k planes: memory of the pooled planes only."""
    x = np.asarray(t[family.driver], np.float64)
    k = x.shape[0]
    ah, aw = windows(family, t)
    (ih, inh), (iw, inw) = taps(ah), taps(aw)
    planes = x.reshape(k, -1)
    index = np.broadcast_to(first_taps(ah, aw), (k, ah.out, aw.out)).copy()
    best = np.full((k, ah.out, aw.out), -np.inf)
    for jh in range(ah.k):
        for jw in range(aw.k):
            inside = inh[:, jh, None] & inw[None, :, jw]
            flat = np.where(inside, ih[:, jh, None] * aw.n + iw[None, :, jw], 0)
            v = np.where(inside, planes[:, flat], -np.inf)
            take = inside & ((v > best) | np.isnan(v))
            best = np.where(take, v, best)
            index = np.where(take, flat, index)
    return index


def _on_axis(i: np.ndarray, a: AxisWindows, o: np.ndarray) -> np.ndarray:
    """Whether position i along the axis is a tap of window o: o s - p + j d for some j < k, inside [0, n)."""
    off = i - (o * a.s - a.p)
    return (i >= 0) & (i < a.n) & (off >= 0) & (off % a.d == 0) & (off // a.d < a.k)


def check_indices(family: Window, t, name: str = "indices") -> np.ndarray:
    """The indices of t (k, Ho, Wo) as int64, each naming a position of its own window: the doc's constraint (in
    [0, H W)) and the forward's meaning. A case giving others has no defined result: refused, naming the first."""
    idx = np.asarray(t[name], np.int64)
    ah, aw = windows(family, t)
    oh, ow = np.arange(ah.out)[:, None], np.arange(aw.out)[None, :]
    inside = (idx >= 0) & (idx < ah.n * aw.n)
    ok = inside & _on_axis(idx // aw.n, ah, oh) & _on_axis(idx % aw.n, aw, ow)
    if not ok.all():
        b, oh, ow = (int(v[0]) for v in np.nonzero(~ok))
        raise UserError(f"{name}[{b}, {oh}, {ow}] (plane {b}) is {int(idx[b, oh, ow])}, not a position of its window "
                        f"in the {ah.n} x {aw.n} plane: the doc defines no result (indices are the forward's "
                        f"argmax, in [0, H W)); leave {name} out to have it derived from self")
    return idx


def _targets(idx: np.ndarray, size: int) -> np.ndarray:
    """Flat positions in the blocks (k, H W) each window's term goes to, (k, Ho, Wo)."""
    return idx + (np.arange(idx.shape[0]) * size)[:, None, None]


def reference(family: Window, t):
    """(value, bound, scale, allowance) of the planes' gradients (k, H, W), float64.

    value: each position's terms (gradOutput, at most 2^24 of them, exact in float64) added in float64, within
    gamma_{n - 1} scale of the exact sum (n terms; scale = sum |g|). allowance: a float32 kernel adding the same
    terms in any order (no rounding in making a term): min(gamma_{n - 1}, lambda sqrt(n - 1) (1 + 2^-6)) u scale,
    0 where one term or none (a sum of one term is exact)."""
    g = np.asarray(t[family.grad], np.float64)
    idx = check_indices(family, t)
    k, h, w = t[family.driver].shape
    tgt = _targets(idx, h * w).reshape(-1)
    value = np.zeros(k * h * w)
    scale = np.zeros(k * h * w)
    n = np.zeros(k * h * w)
    with np.errstate(all="ignore"):
        np.add.at(value, tgt, g.reshape(-1))
        np.add.at(scale, tgt, np.abs(g).reshape(-1))
        np.add.at(n, tgt, 1.0)
        bound = gamma(np.maximum(n - 1, 0), U64) * SLACK * scale
        c = np.maximum(n - 1, 0)
        growth = np.minimum(gamma(c, ACCUMULATION_UNIT), LAMBDA * np.sqrt(c) * SECOND_ORDER * ACCUMULATION_UNIT)
        allowance = growth * scale * SLACK
    shape = (k, h, w)
    return value.reshape(shape), bound.reshape(shape), scale.reshape(shape), allowance.reshape(shape)


def exact_at(family: Window, t, where: np.ndarray) -> np.ndarray:
    """The exact sums (Fractions) at flat positions `where` of the planes (k, H, W), block-major."""
    g = np.asarray(t[family.grad], np.float64)
    idx = np.asarray(t["indices"], np.int64)
    k, h, w = t[family.driver].shape
    tgt = _targets(idx, h * w).reshape(-1)
    order = np.argsort(tgt, kind="stable")
    tgt, gv = tgt[order], g.reshape(-1)[order]
    where = np.asarray(where, np.int64)
    lo, hi = np.searchsorted(tgt, where, "left"), np.searchsorted(tgt, where, "right")
    out = np.empty(where.size, dtype=object)
    for e, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        out[e] = sum((Fraction(float(v)) for v in gv[a:b].tolist()), Fraction(0))
    return out


def exact(family: Window, t) -> np.ndarray:
    """Whole planes exactly: gradOutput an object array of Fractions (k, Ho, Wo); (k, H, W) Fractions."""
    g = t[family.grad]
    idx = np.asarray(t["indices"], np.int64)
    k, h, w = t[family.driver].shape
    out = np.empty(k * h * w, dtype=object)
    out[:] = [Fraction(0)] * out.size
    tgt = _targets(idx, h * w).reshape(-1)
    for p, v in zip(tgt.tolist(), g.reshape(-1).tolist()):
        out[p] += Fraction(v)
    return out.reshape(k, h, w)


def scatter(family: Window, t, dtype=F32, order: str = "rows", last_write: bool = False,
            idx: np.ndarray | None = None) -> np.ndarray:
    """Each window's gradOutput added, in `dtype`, into the position its index names, one window after another:
    "rows" as the 950's kernels (windows in (oh, ow) order: the SIMT kernel's ph outer, pw inner per position, the
    NCHW kernels' argmax tiles in row-major order), "columns" (ow outer), "reversed" (the last window first).
    last_write: each position keeps the term of the last window naming it (a defect)."""
    g = np.asarray(t[family.grad], dtype)
    idx = np.asarray(t["indices"], np.int64) if idx is None else idx
    k, h, w = t[family.driver].shape
    ho, wo = g.shape[-2:]
    windows_ = np.arange(ho * wo).reshape(ho, wo)
    if order == "columns":
        windows_ = windows_.T
    seq = windows_.reshape(-1)
    if order == "reversed":
        seq = seq[::-1]
    tgt = _targets(idx, h * w).reshape(k, -1)[:, seq].reshape(-1)
    terms = g.reshape(k, -1)[:, seq].reshape(-1)
    # each term's rank among those of its position, in the order above: round r adds every position's r-th term
    pos = np.argsort(tgt, kind="stable")
    sorted_t = tgt[pos]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_t)) + 1] if sorted_t.size else np.zeros(0, np.int64)
    rank_sorted = np.arange(sorted_t.size) - np.repeat(starts, np.diff(np.r_[starts, sorted_t.size]))
    rank = np.empty_like(rank_sorted)
    rank[pos] = rank_sorted
    acc = np.zeros(k * h * w, dtype=dtype)
    with np.errstate(all="ignore"):
        for r in range(int(rank.max(initial=-1)) + 1):
            at = rank == r
            acc[tgt[at]] = terms[at] if last_write else acc[tgt[at]] + terms[at]
    return acc.reshape(k, h, w)
