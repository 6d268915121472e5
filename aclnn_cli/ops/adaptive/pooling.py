"""Adaptive average pooling's gradient on the Adaptive window family (aclnnAdaptiveAvgPool2dBackward,
aclnnAdaptiveAvgPool3dBackward): the reference, exact values and allowance (ops/window/pool.py's, the divisor of a
window its size), the kernels' float32 terms and orders, the op_api's global pooling, and the defects both share.

Along an axis of n positions pooled into `out`, window o covers [floor(o n / out), ceil((o + 1) n / out))
(families/window.AdaptiveAxis); a window's divisor is the product of its sizes along the axes, and

    out[..., i] = sum over the windows o covering i of gradOutput[..., o] / (size of o).

The 950's kernels (op_kernel/arch35) form a term from a float32 g (a 16-bit value widened exactly) with up to four
float32 roundings, in one of these forms (`terms`), and add the terms of a position in float32, in one of the
orders `sums` gives, before one cast to the output dtype:
    "div"        fl(g / fl(K))                            K = kD kH kW: the SIMT kernels of 3-D, both big kernels
    "recip"      fl(g fl(1 / K))                          3-D small kernel (Muls by 1.0f / kernelSize)
    "recip2"     fl(g fl(fl(1 / kH) fl(1 / kW)))          2-D small kernel (scale = invCoverH * iw)
    "h_div_w"    fl(fl(g fl(1 / kH)) / kW)                2-D SIMT AdaptiveAvgPool2dGradNchw, HReduceWExpandFast
    "h_recip_w"  fl(fl(g fl(1 / kH)) fl(1 / kW))          2-D SIMT SegFast, SmallOutWRow, HExpandW2SmallFast
    "w_div_h"    fl(fl(g fl(1 / kW)) / kH)                2-D SIMT OutWSmall, HInOne, HExpandExactOutWSmallFast
A gradOutput of one position per plane (the global pooling) takes the op_api's Fill and Mul instead (`global_path`):
fl_T(g fl_T(fl32(1 / S))), S the plane's positions, in the dtype T itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..base import Reference, defect, legitimate
from ..families.window import AdaptiveAxis
from ...tensor import dtypes as D
from ..window import pool

F32 = np.float32
PRECISION = "precision"  # the family's block value: the dtype's significand bits (24, 11, 8)
PLANES = "planes"  # a case value: N C, the planes (volumes) of the whole case (the tilings read it)
BITS_DTYPE = {24: D.FLOAT32, 11: D.FLOAT16, 8: D.BFLOAT16}


def planes(family):
    """A `case_values` entry: N C of the driver (every axis before the spatial ones)."""
    def values(shapes) -> dict:
        drv = tuple(shapes.get(family.driver) or ())
        return {PLANES: int(np.prod(drv[:-family.spatial])) if len(drv) > family.spatial else 1}
    return values


def bits(t) -> int:
    """The dtype's significand bits the family gives the functions (float32's where a caller gives none)."""
    p = np.asarray(t.get(PRECISION, 24)).reshape(-1)
    return int(p[0]) if p.size else 24


def setup(family, t):
    """(the axes, the divisors (each window's size, (Ho, Wo) or (Do, Ho, Wo)))."""
    axes = pool.windows(family, t)
    return axes, pool.divisors(axes, False, 0)


def is_global(axes) -> bool:
    """One window per axis: the op_api's Fill and Mul (DoAdapativeAvgPool2DBackward, SelectAdaptiveAvgPool3dBackward)."""
    return all(a.out == 1 for a in axes)


def grad(family, t, axes, dtype=np.float64) -> np.ndarray:
    return pool.volume(np.asarray(t[family.grad], dtype), axes, pooled=True)


def fill_value(size: int, p: int) -> float:
    """The op_api's fill: `float fillValue = 1.0 / size` (a double quotient made float), converted to the dtype."""
    w = np.array([F32(1.0 / max(size, 1))], F32)
    return float(D.round_from_f32(w, BITS_DTYPE[p], "rint").astype(np.float64)[0])


def reference(family, t, term_roundings: int) -> Reference:
    """pool.reference's value, bound, scale and allowance (c = term_roundings per term), in the blocks' shape."""
    axes, d = setup(family, t)
    parts = pool.reference(grad(family, t, axes), axes, d, term_roundings=term_roundings)
    value, bound, scale, allowance = (x.reshape(np.shape(t[family.driver])) for x in parts)
    return Reference(value, bound, scale, allowance=allowance)


def edge(family, t):
    """Where the device may differ from the exact result, and its value there: on the global path every element, the
    Fill's fl_T(1 / S) making each fl_T(g w) stand up to |w S - 1| off, one way for the whole case (`global_path`)."""
    axes = pool.windows(family, t)
    shape = np.shape(t[family.driver])
    if not is_global(axes):
        return np.zeros(shape, bool), np.full(shape, np.nan)
    with np.errstate(invalid="ignore"):
        g = grad(family, t, axes, np.float64).astype(F32)
    return np.ones(shape, bool), global_path(g, axes, bits(t)).astype(np.float64).reshape(shape)


def exact_at(family, t, wanted, out: str):
    axes, d = setup(family, t)
    return {out: pool.exact_at(grad(family, t, axes), axes, d, wanted[out])}


def exact(family, t):
    axes, d = setup(family, t)
    return pool.exact(pool.volume(t[family.grad], axes, pooled=True), axes, d).reshape(np.shape(t[family.driver]))


def functions(family, term_roundings: int, out: str) -> dict:
    """The OpSpec functions both ops take from here, for `family` and its output `out`."""
    return {"reference": lambda t: reference(family, t, term_roundings), "exact": lambda t: exact(family, t),
            "exact_at": lambda t, wanted: exact_at(family, t, wanted, out), "edge": lambda t: edge(family, t)}


def _recip(k, dtype=F32):
    return dtype(1) / np.asarray(k).astype(dtype)


def terms(g: np.ndarray, axes, form: str, dtype=F32) -> np.ndarray:
    """Each window's term in `form` (the module's table), g (k, *pooled) in `dtype`; the last two axes are H and W,
    any before them (D) multiply into kH's side as the kernels' products do."""
    sizes = [a.clipped() for a in axes]
    shape = [[1] * len(axes) for _ in axes]
    for i, s in enumerate(shape):
        s[i] = -1
    k = [np.asarray(x).reshape(s) for x, s in zip(sizes, shape)]
    kh = k[0] * k[1] if len(k) > 2 else k[0]  # (3-D: kD kH, as one factor)
    kw = k[-1]
    with np.errstate(all="ignore"):
        if form == "div":
            return g / (kh * kw).astype(dtype)
        if form == "recip":
            return g * _recip(kh * kw, dtype)
        if form == "recip2":
            return g * (_recip(kh, dtype) * _recip(kw, dtype))
        if form == "h_div_w":
            return (g * _recip(kh, dtype)) / kw.astype(dtype)
        if form == "h_recip_w":
            return (g * _recip(kh, dtype)) * _recip(kw, dtype)
        if form == "w_div_h":
            return (g * _recip(kw, dtype)) / kh.astype(dtype)
    raise ValueError(f"unknown term form {form!r}")


def sums(x: np.ndarray, axes, order: str = "rows", last_write: bool = False) -> np.ndarray:
    """Each position's windows' terms added in x's dtype: pool.window_sums' orders ("rows": the first axis outer,
    "reversed", "columns": the last axis outer), or "column-sums" (2-D SmallOutWRow: per window column ow a sum
    over the windows oh, then those sums over ow)."""
    if order != "column-sums":
        return pool.window_sums(x, axes, order, last_write)
    ah, aw = axes
    along_h = pool.window_sums(x, (ah, AdaptiveAxis(aw.out, aw.out)))
    return pool.window_sums(along_h, (AdaptiveAxis(ah.n, ah.n), aw))


def global_path(g: np.ndarray, axes, p: int) -> np.ndarray:
    """The op_api's Fill of fl_T(fl32(1 / S)) and Mul in the dtype T (p significand bits): fl_T(g w), broadcast over
    each plane (volume). g (k, 1, 1[, 1]) float32; float32 holding T's values."""
    w = fill_value(int(np.prod([a.n for a in axes])), p)
    with np.errstate(all="ignore"):
        prod = (np.asarray(g, np.float64) * w).astype(F32)  # (exact: two values of p <= 24 bits, then one rounding)
        prod = D.round_from_f32(prod, BITS_DTYPE[p], "rint").astype(F32)
    return np.broadcast_to(prod, (prod.shape[0], *(a.n for a in axes))).copy()


def compute(family, t, form: str, order: str = "rows", dtype=F32, axes=None, divisor=None,
            last_write: bool = False, global_ok: bool = True) -> np.ndarray:
    """The blocks' gradients as a kernel forms its terms (`form`) and adds them (`order`), in `dtype`; the op_api's
    global path where gradOutput is one position per plane (`global_ok`). axes: windows placed otherwise (a
    defect); divisor: each window divided by it instead (a defect)."""
    own = pool.windows(family, t)
    g = grad(family, t, own, dtype)
    if global_ok and dtype is F32 and axes is None and divisor is None and is_global(own):
        out = global_path(g, own, bits(t))
    else:
        where = axes or own
        if divisor is not None:
            with np.errstate(all="ignore"):
                x = g / dtype(divisor)
        else:
            x = terms(g, where, form, dtype)
        out = sums(x, where, order, last_write)
    return out.reshape(np.shape(t[family.driver]))


@dataclass(frozen=True, eq=False)
class Placed:
    """An axis whose windows stand at given [lo, hi) ranges (a defect's misplaced windows); AdaptiveAxis's
    questions (clipped, first_last; ranges ascending, so each position's windows are a range)."""

    n: int
    out: int
    lo: tuple
    hi: tuple
    d = s = 1
    p = 0

    def clipped(self) -> np.ndarray:
        return np.maximum(np.array(self.hi, np.int64) - np.array(self.lo, np.int64), 0)

    def first_last(self) -> tuple[np.ndarray, np.ndarray]:
        i = np.arange(self.n)[:, None]
        inside = (i >= np.array(self.lo)[None, :]) & (i < np.array(self.hi)[None, :])
        if not self.out:
            return np.zeros(self.n, np.int64), np.zeros(self.n, np.int64)
        any_ = inside.any(axis=1)
        first = np.where(any_, inside.argmax(axis=1), 0)
        last = np.where(any_, self.out - inside[:, ::-1].argmax(axis=1), 0)
        return first, np.maximum(last, first)


def floor_end(a) -> Placed:
    """Windows ending at floor((o + 1) n / out): one position short wherever out does not divide (o + 1) n."""
    o = np.arange(a.out)
    return Placed(a.n, a.out, tuple(o * a.n // a.out), tuple((o + 1) * a.n // a.out))


def uniform(a) -> Placed:
    """Fixed windows: kernel ceil(n / out), stride floor(n / out), as a plain pooling of that size would place
    them."""
    k, s = -(-a.n // a.out), max(a.n // a.out, 1)
    o = np.arange(a.out)
    return Placed(a.n, a.out, tuple(o * s), tuple(np.minimum(o * s + k, a.n)))


def variants(prefix: str, family, form: str):
    """The defects and legitimate variants both ops declare, named `prefix`-..., around the kernel's `form`."""
    def moved(t, place):
        return compute(family, t, "div", axes=tuple(place(a) for a in pool.windows(family, t)))

    @defect
    def floor_ends(t):
        """Defect: each window's end floor((o + 1) n / out) instead of the ceiling (the overlap lost)."""
        return moved(t, floor_end)

    @defect
    def uniform_windows(t):
        """Defect: windows of the largest size at a fixed stride (a plain pooling standing in for adaptive)."""
        return moved(t, uniform)

    @defect
    def largest_divisor(t):
        """Defect: every window divided by the largest window's size (the tiling's CeilDiv product), not its own."""
        return compute(family, t, form, divisor=int(np.prod([a.k for a in pool.windows(family, t)])))

    @defect
    def last_write_wins(t):
        """Defect: overlapping windows not added: each position keeps its last window's term."""
        return compute(family, t, form, last_write=True, global_ok=False)

    @legitimate
    def reversed_order(t):
        """Legitimate: each position's windows added last first (atomic adds in any order)."""
        return compute(family, t, form, order="reversed", global_ok=False)

    @legitimate
    def columns(t):
        """Legitimate: the windows added with the last axis outer (HInOne's and OutWSmall's order)."""
        return compute(family, t, form, order="columns", global_ok=False)

    @legitimate
    def divide(t):
        """Legitimate: each term fl(g / fl(K)), one rounding (the big kernel's Div)."""
        return compute(family, t, "div", global_ok=False)

    return {f"{prefix}-floor-end": floor_ends, f"{prefix}-uniform-windows": uniform_windows,
            f"{prefix}-largest-divisor": largest_divisor, f"{prefix}-last-write-wins": last_write_wins,
            f"{prefix}-reversed": reversed_order, f"{prefix}-columns": columns, f"{prefix}-divide": divide}
