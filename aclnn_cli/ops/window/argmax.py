"""Max pooling's gradient on the window family, in two or three window axes: the forward's argmax (the derived
`indices` input), the exact scatter-add of gradOutput into the positions the indices name, its float64 reference
with a rigorous bound, the 950's float32 kernel, and the defects and orders both MaxPool gradients share.

    gradInput[p] = sum over the windows w whose index names p of gradOutput[w]

An index is the flat position in its (n, c) plane or volume: h * W + w (aclnnMaxPool2dWithIndices), d * H W + h W + w
(aclnnMaxPool3dWithArgmax); the forward takes the first maximum in the window's scan order (d outer, then h, w inner:
PyTorch's max_pool2d and max_pool3d, what ops-nn's ATK executors derive the indices with), a NaN wherever it lies
(every NaN is taken, so the last), and the window's first position inside the input when every value is -inf.
Functions receive the blocks as the family cuts them (ops/families/window.py): self (k, H, W) or (k, D H, W),
gradOutput and indices (k, Ho, Wo) or (k, Do Ho, Wo); `pool.windows` gives the axes (the depths from the op's
case_values), and everything here works on the flat positions of a plane or volume, so one code serves both.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ...errors import UserError
from ..accumulation import ACCUMULATION_UNIT, LAMBDA, SECOND_ORDER
from ..base import defect, legitimate
from ..families.window import AxisWindows, Window
from .pool import SLACK, U64, gamma, windows

F32 = np.float32


def taps(a: AxisWindows) -> tuple[np.ndarray, np.ndarray]:
    """(out, k) input positions of each window's taps along one axis, in order, and whether each lies inside [0, n)
    (padding is no position)."""
    i = np.arange(a.out)[:, None] * a.s - a.p + np.arange(a.k)[None, :] * a.d
    return i, (i >= 0) & (i < a.n)


def _first_inside(a: AxisWindows) -> np.ndarray:
    """(out,) each window's first tap inside the input along one axis."""
    i, inside = taps(a)
    return np.take_along_axis(i, np.argmax(inside, axis=1)[:, None], 1)[:, 0]


def first_taps(*axes: AxisWindows) -> np.ndarray:
    """(Ho, Wo) or (Do, Ho, Wo): each window's first position inside the input, flat in the plane or volume (where
    the forward starts its scan)."""
    flat = np.zeros((), np.int64)
    for a in axes:
        flat = np.add.outer(flat * a.n, _first_inside(a))
    return flat


def _along(mask: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    return mask.reshape(tuple(mask.size if i == axis else 1 for i in range(ndim)))


def _reduce_axis(v: np.ndarray, index: np.ndarray, a: AxisWindows, axis: int, step: int, last: bool):
    """One axis of the forward: `v` the running maxima (k, ..., n along `axis`, ...) and `index` their flat positions
    so far; each window keeps its first tap inside the input with -inf, then takes a tap where its value is greater
    (`last`: not smaller) or NaN. Returns both with `out` along `axis`."""
    i, inside = taps(a)
    first = _first_inside(a)
    best = np.full(v.shape[:axis] + (a.out,) + v.shape[axis + 1:], -np.inf)
    at = np.take(index, first, axis=axis) + _along(first, axis, v.ndim) * step
    for j in range(a.k):
        pos = np.clip(i[:, j], 0, max(a.n - 1, 0))
        val = np.take(v, pos, axis=axis)
        better = (val >= best) if last else (val > best)
        take = _along(inside[:, j], axis, v.ndim) & (better | np.isnan(val))
        best = np.where(take, val, best)
        at = np.where(take, np.take(index, pos, axis=axis) + _along(pos, axis, v.ndim) * step, at)
    return best, at


def forward_indices(family: Window, t, last: bool = False) -> np.ndarray:
    """The forward's indices of the blocks of self in t, in gradOutput's block shape, int64 (the derivation of
    `indices`; `last`: the last maximum, a defect's). Separable: the scan order is lexicographic (d, h, w), so the
    first maximum of a window is the first maximum, along the first axis, of the rows' first maxima (the last NaN
    likewise): one pass per tap of one axis at a time, the last axis first, each over the running maxima."""
    axes = windows(family, t)
    x = np.asarray(t[family.driver], np.float64)
    v = x.reshape((x.shape[0], *(a.n for a in axes)))
    index = np.zeros(v.shape, np.int64)
    step = 1
    for ax in reversed(range(len(axes))):
        v, index = _reduce_axis(v, index, axes[ax], 1 + ax, step, last)
        step *= axes[ax].n
    return index.reshape(np.shape(t[family.grad]))


def _on_axis(i: np.ndarray, a: AxisWindows, o: np.ndarray) -> np.ndarray:
    """Whether position i along the axis is a tap of window o: o s - p + j d for some j < k, inside [0, n)."""
    off = i - (o * a.s - a.p)
    return (i >= 0) & (i < a.n) & (off >= 0) & (off % a.d == 0) & (off // a.d < a.k)


def _decode(idx: np.ndarray, axes) -> list[np.ndarray]:
    """A flat position as one coordinate per axis (the last fastest)."""
    out, rest = [], idx
    for a in reversed(axes):
        out.append(rest % max(a.n, 1))
        rest = rest // max(a.n, 1)
    return out[::-1]


def check_indices(family: Window, t, name: str = "indices") -> np.ndarray:
    """The indices of t as int64, each naming a position of its own window: the doc's constraint (in [0, H W) or
    [0, D H W)) and the forward's meaning. A case giving others has no defined result: refused, naming the first."""
    axes = windows(family, t)
    idx = np.asarray(t[name], np.int64).reshape((-1, *(a.out for a in axes)))
    size = math.prod(a.n for a in axes)
    ok = (idx >= 0) & (idx < size)
    for ax, (a, p) in enumerate(zip(axes, _decode(idx, axes))):
        o = np.arange(a.out).reshape(tuple(a.out if i == ax else 1 for i in range(len(axes))))
        ok &= _on_axis(p, a, o)
    if not ok.all():
        where = [int(v[0]) for v in np.nonzero(~ok)]
        sizes, letters = " x ".join(str(a.n) for a in axes), " ".join("DHW"[-len(axes):])
        raise UserError(f"{name}[{', '.join(map(str, where))}] (plane {where[0]}) is {int(idx[tuple(where)])}, not a "
                        f"position of its window in the {sizes} {'plane' if len(axes) == 2 else 'volume'}: the doc "
                        f"defines no result (indices are the forward's argmax, in [0, {letters})); leave {name} out "
                        f"to have it derived from self")
    return idx.reshape(np.shape(t[name]))


def _targets(idx: np.ndarray, size: int) -> np.ndarray:
    """Flat positions in the blocks (k, size) each window's term goes to, (k, windows)."""
    idx = idx.reshape(idx.shape[0], -1)
    return idx + (np.arange(idx.shape[0]) * size)[:, None]


def _size(family: Window, t) -> int:
    return math.prod(np.shape(t[family.driver])[1:])


def reference(family: Window, t):
    """(value, bound, scale, allowance) of the blocks' gradients, self's block shape, float64.

    value: each position's terms (gradOutput, at most 2^24 of them, exact in float64) added in float64, within
    gamma_{n - 1} scale of the exact sum (n terms: the windows whose index names the position; scale = sum |g|).
    allowance: a float32 kernel adding the same terms in any order (no rounding in making a term):
    min(gamma_{n - 1}, lambda sqrt(n - 1) (1 + 2^-6)) u scale, 0 where one term or none (a sum of one term is exact)."""
    g = np.asarray(t[family.grad], np.float64)
    idx = check_indices(family, t)
    k, size = g.shape[0], _size(family, t)
    tgt = _targets(idx, size).reshape(-1)
    value, scale, n = np.zeros(k * size), np.zeros(k * size), np.zeros(k * size)
    with np.errstate(all="ignore"):
        np.add.at(value, tgt, g.reshape(-1))
        np.add.at(scale, tgt, np.abs(g).reshape(-1))
        np.add.at(n, tgt, 1.0)
        c = np.maximum(n - 1, 0)
        bound = gamma(c, U64) * SLACK * scale
        growth = np.minimum(gamma(c, ACCUMULATION_UNIT), LAMBDA * np.sqrt(c) * SECOND_ORDER * ACCUMULATION_UNIT)
        allowance = growth * scale * SLACK
    shape = np.shape(t[family.driver])
    return value.reshape(shape), bound.reshape(shape), scale.reshape(shape), allowance.reshape(shape)


def exact_at(family: Window, t, where: np.ndarray) -> np.ndarray:
    """The exact sums (Fractions) at flat positions `where` of the blocks, block-major."""
    g = np.asarray(t[family.grad], np.float64)
    tgt = _targets(np.asarray(t["indices"], np.int64), _size(family, t)).reshape(-1)
    order = np.argsort(tgt, kind="stable")
    tgt, gv = tgt[order], g.reshape(-1)[order]
    where = np.asarray(where, np.int64)
    lo, hi = np.searchsorted(tgt, where, "left"), np.searchsorted(tgt, where, "right")
    out = np.empty(where.size, dtype=object)
    for e, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        out[e] = sum((Fraction(float(v)) for v in gv[a:b].tolist()), Fraction(0))
    return out


def exact(family: Window, t) -> np.ndarray:
    """Whole blocks exactly: gradOutput an object array of Fractions; self's block shape, Fractions."""
    g = t[family.grad]
    size = _size(family, t)
    out = np.empty(g.shape[0] * size, dtype=object)
    out[:] = [Fraction(0)] * out.size
    tgt = _targets(np.asarray(t["indices"], np.int64), size).reshape(-1)
    for p, v in zip(tgt.tolist(), g.reshape(-1).tolist()):
        out[p] += Fraction(v)
    return out.reshape(np.shape(t[family.driver]))


def scatter(family: Window, t, dtype=F32, order: str = "rows", last_write: bool = False,
            idx: np.ndarray | None = None, keep: np.ndarray | None = None) -> np.ndarray:
    """Each window's gradOutput added, in `dtype`, into the position its index names, one window after another:
    "rows" as the 950's kernels (windows in (od,) oh, ow order: the SIMT kernels' pd, ph outer, pw inner per
    position, the NCHW kernels' argmax tiles in row-major order), "columns" (the window axes reversed: ow outer),
    "reversed" (the last window first). last_write: each position keeps the term of the last window naming it (a
    defect). keep: (k, windows) whether each term is added at all (a defect's dropped terms)."""
    g = np.asarray(t[family.grad], dtype)
    idx = np.asarray(t["indices"], np.int64) if idx is None else idx
    k, size = g.shape[0], _size(family, t)
    outs = tuple(a.out for a in windows(family, t))
    seq = np.arange(math.prod(outs)).reshape(outs)
    if order == "columns":
        seq = seq.transpose()
    seq = seq.reshape(-1)
    if order == "reversed":
        seq = seq[::-1]
    tgt = _targets(idx, size)[:, seq].reshape(-1)
    terms = g.reshape(k, -1)[:, seq].reshape(-1)
    if keep is not None:
        kept = np.asarray(keep, bool).reshape(k, -1)[:, seq].reshape(-1)
        tgt, terms = tgt[kept], terms[kept]
    # each term's rank among those of its position, in the order above: round r adds every position's r-th term
    pos = np.argsort(tgt, kind="stable")
    sorted_t = tgt[pos]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_t)) + 1] if sorted_t.size else np.zeros(0, np.int64)
    rank_sorted = np.arange(sorted_t.size) - np.repeat(starts, np.diff(np.r_[starts, sorted_t.size]))
    rank = np.empty_like(rank_sorted)
    rank[pos] = rank_sorted
    acc = np.zeros(k * size, dtype=dtype)
    with np.errstate(all="ignore"):
        for r in range(int(rank.max(initial=-1)) + 1):
            at = rank == r
            acc[tgt[at]] = terms[at] if last_write else acc[tgt[at]] + terms[at]
    return acc.reshape(np.shape(t[family.driver]))


def _simt_reaches(family: Window, t, idx: np.ndarray, pads) -> np.ndarray:
    """(k, windows) whether the 950's SIMT kernel, placing each window's span with `pads`, visits the window from
    the position its index names: pStart = (i + p - span) / s + 1 (0 when i + p < span), pEnd = min((i + p) / s + 1,
    out), span = (k - 1) d + 1. With the true padding every window whose index lies in it is visited."""
    axes = windows(family, t)
    idx = idx.reshape((idx.shape[0], *(a.out for a in axes)))
    ok = np.ones(idx.shape, bool)
    for ax, (a, i, p) in enumerate(zip(axes, _decode(idx, axes), pads)):
        span = (a.k - 1) * a.d + 1
        start = np.where(i + p < span, 0, (i + p - span) // a.s + 1)
        end = np.minimum((i + p) // a.s + 1, a.out)
        o = np.arange(a.out).reshape(tuple(a.out if j == ax else 1 for j in range(len(axes))))
        ok &= (start <= o) & (o < end)
    return ok.reshape(idx.shape[0], -1)


def variants(family: Window, prefix: str, indices: str = "indices") -> dict:
    """The variants of a MaxPool gradient computed as `scatter` (the emulated kernel: windows in row order, float32),
    named `prefix`-...: two legitimate orders and the defects a scatter kernel can have."""

    def idx(t):
        return np.asarray(t[indices], np.int64)

    @legitimate
    def reversed_(t):
        """Legitimate: each position's windows added in the other order (the last window first)."""
        return scatter(family, t, order="reversed")

    @legitimate
    def columns(t):
        """Legitimate: windows added with the last window axis outer (ow outer), as a kernel tiling by columns may."""
        return scatter(family, t, order="columns")

    @defect
    def first_in_window(t):
        """Defect: each window's gradient to its first position inside the input, not to its argmax."""
        first = first_taps(*windows(family, t)).reshape(np.shape(t[indices])[1:])
        return scatter(family, t, idx=np.broadcast_to(first, np.shape(t[indices])).astype(np.int64))

    @defect
    def last_write_wins(t):
        """Defect: overlapping windows naming one position not added, the last window's term stored."""
        return scatter(family, t, last_write=True)

    @defect
    def accumulate_fp16(t):
        """Defect: the sum accumulated in float16 (rounded after every addition) instead of float32."""
        return scatter(family, t, dtype=np.float16).astype(F32)

    @defect
    def index_axes_reversed(t):
        """Defect: an index read with its axes in the other order (w outer: w H + h; 3-D w H D + h D + d) instead of
        the last axis fastest."""
        axes = windows(family, t)
        flat = np.zeros_like(idx(t))
        for a, p in zip(axes[::-1], _decode(idx(t), axes)[::-1]):
            flat = flat * a.n + p
        return scatter(family, t, idx=flat)

    @defect
    def padding_ignored(t):
        """Defect: the SIMT kernel's range of windows reaching a position computed without the padding: a term from
        a window starting in the padding is lost where the range misses it."""
        return scatter(family, t, keep=_simt_reaches(family, t, idx(t), (0,) * family.spatial))

    @defect
    def last_maximum(t):
        """Defect: the gradient to the window's last maximum of self (a kernel recomputing the argmax, ties to the
        last tap) instead of the given index: the forward's ties go to the first."""
        return scatter(family, t, idx=forward_indices(family, t, last=True))

    found = {"reversed": reversed_, "columns": columns, "first-in-window": first_in_window,
             "last-write-wins": last_write_wins, "accumulate-fp16": accumulate_fp16,
             "index-axes-reversed": index_axes_reversed, "padding-ignored": padding_ignored,
             "last-maximum": last_maximum}
    return {f"{prefix}-{name}": fn for name, fn in found.items()}


def spec_functions(family: Window, output: str) -> dict:
    """A MaxPool gradient's OpSpec functions on `family`: the reference, exact values, the emulated kernel, its IEEE
    twin and the derivation of `indices` (the forward)."""
    from ..base import Reference

    def reference_(t) -> Reference:
        value, bound, scale, allowance = reference(family, t)
        return Reference(value, bound, scale, allowance=allowance)

    def exact_at_(t, wanted):
        return {output: exact_at(family, t, wanted[output])}

    def kernel(t):
        """The 950's kernels: the windows' gradOutput added in float32 in row order ((od,) oh, ow), cast once."""
        return scatter(family, t)

    def ieee(t):
        return scatter(family, t, np.float64)

    def derive(t):
        return forward_indices(family, t)

    return {"reference": reference_, "exact": lambda t: exact(family, t), "exact_at": exact_at_, "kernel": kernel,
            "ieee": ieee, "derived": {"indices": derive}}
