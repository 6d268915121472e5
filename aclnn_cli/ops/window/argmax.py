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


def window_positions(ah: AxisWindows, aw: AxisWindows) -> tuple[np.ndarray, np.ndarray]:
    """(Ho, Wo, kh kw) flat input positions of each window's taps in scan order (h outer, w inner), and whether each
    tap lies inside the input (padding is no position)."""
    ih = np.arange(ah.out)[:, None] * ah.s - ah.p + np.arange(ah.k)[None, :] * ah.d  # (Ho, kh)
    iw = np.arange(aw.out)[:, None] * aw.s - aw.p + np.arange(aw.k)[None, :] * aw.d  # (Wo, kw)
    h = np.broadcast_to(ih[:, None, :, None], (ah.out, aw.out, ah.k, aw.k))
    w = np.broadcast_to(iw[None, :, None, :], (ah.out, aw.out, ah.k, aw.k))
    inside = (h >= 0) & (h < ah.n) & (w >= 0) & (w < aw.n)
    flat = np.where(inside, h * aw.n + w, 0)
    return flat.reshape(ah.out, aw.out, -1), inside.reshape(ah.out, aw.out, -1)


def forward_indices(family: Window, t) -> np.ndarray:
    """The forward's indices of the planes of self in t: (k, Ho, Wo) int64 (the derivation of `indices`)."""
    x = np.asarray(t[family.driver], np.float64)
    k = x.shape[0]
    ah, aw = windows(family, t)
    flat, inside = window_positions(ah, aw)
    planes = x.reshape(k, -1)
    first = np.argmax(inside, axis=-1)  # (every window has a tap inside: the pooled size's rule)
    index = np.broadcast_to(np.take_along_axis(flat, first[..., None], -1)[..., 0], (k, ah.out, aw.out)).copy()
    best = np.full((k, ah.out, aw.out), -np.inf)
    for j in range(flat.shape[-1]):
        v = np.where(inside[..., j], planes[:, flat[..., j]], -np.inf)
        take = inside[..., j] & ((v > best) | np.isnan(v))
        best = np.where(take, v, best)
        index = np.where(take, flat[..., j], index)
    return index


def check_indices(family: Window, t, name: str = "indices") -> np.ndarray:
    """The indices of t (k, Ho, Wo) as int64, each naming a position of its own window: the doc's constraint (in
    [0, H W)) and the forward's meaning. A case giving others has no defined result: refused, naming the first."""
    idx = np.asarray(t[name], np.int64)
    ah, aw = windows(family, t)
    flat, inside = window_positions(ah, aw)
    ok = ((idx[..., None] == flat[None]) & inside[None]).any(axis=-1)
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
    gv = g.reshape(-1)
    out = np.empty(len(where), dtype=object)
    for e, p in enumerate(np.asarray(where, np.int64).tolist()):
        out[e] = sum((Fraction(float(v)) for v in gv[tgt == p].tolist()), Fraction(0))
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
