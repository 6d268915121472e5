"""The Window family (docs/families.md): output and input positions related by kernel size, stride, padding and
dilation along each spatial axis, per (n, c) plane. Pooling's gradients are on it; convolution's will be.

A window o along an axis of n input positions covers the positions o * s - p + j * d for j < k that lie inside
[0, n) (the padding's positions are no elements). The number of windows follows the forward's rule (PyTorch's
pooling_output_shape, ops-nn's avg_pool_v2_grad tiling CheckGradShapeForCalculated):
    out = (n + 2p - d (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1,
less one where ceil mode would start the last window inside the right padding ((out - 1) s >= n + p).

A block is one (n, c) plane. The driver (the forward's input, `self`, whose shape a case gives) is cut as
(N C, H, W): the functions receive it, and every tensor of its shape (gradInput), as **(k, H, W)**; the pooled
tensor (gradOutput, (N C, Ho, Wo)) is cut from its own shape (`own_geometry`) and arrives as **(k, Ho, Wo)**. The
window parameters reach the functions as the attributes they are; `axis_windows` and `cover` turn them into the
per-axis relations. `spatial` axes per window: 2 (NCHW, and the 3-d NCL = (C, H, W) without N) or 3 (NCDHW, and
CDHW without N). A 3-D block is one (D, H, W) volume, cut as (N C, D H, W): the functions receive it as
**(k, D H, W)** and the pooled tensor as **(k, Do Ho, Wo)**; the op's `case_values` give the depths to unfold them
(ops/window/pool.volume).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Mapping

import numpy as np

from .base import Geometry, Rows, Shapes

SPATIAL = 2  # a 2-D window's spatial axes: (H, W)


def pair(values, fill: tuple[int, ...] | None = None) -> tuple[int, int]:
    """An aclIntArray of length 1 or 2 as (H, W): one value for both; `fill` where it is empty (stride: the
    kernel's)."""
    v = tuple(int(x) for x in (values or ()))
    if not v:
        if fill is None:
            raise ValueError("an empty window parameter")
        return tuple(fill)[:2]
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def spread(values, n: int, fill: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """An aclIntArray of length 1 or n as n values (one value for every axis); `fill` where it is empty. n = 2:
    `pair`."""
    if n == 2:
        return pair(values, fill)
    v = tuple(int(x) for x in (values or ()))
    if not v:
        if fill is None:
            raise ValueError("an empty window parameter")
        return tuple(fill)[:n]
    return v[:1] * n if len(v) == 1 else v[:n]


def pooled_size(n: int, k: int, s: int, p: int, d: int = 1, ceil: bool = False) -> int:
    """Windows along an axis of n positions (pooling_output_shape)."""
    span = n + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    return out


@dataclass(frozen=True)
class AxisWindows:
    """One axis: n input positions, `out` windows of size k, stride s, padding p (both sides), dilation d."""

    n: int
    out: int
    k: int
    s: int
    p: int
    d: int = 1

    def cover(self) -> np.ndarray:
        """(out, n) int64: 1 where window o covers input position i (padding covers nothing). Read only (cached)."""
        return _cover(self.n, self.out, self.k, self.s, self.p, self.d)

    def covering(self) -> np.ndarray:
        """(n, m) int64: the windows covering each input position in ascending order, -1 after the last (m: the most
        any position has). Read only (cached)."""
        return _covering(self.n, self.out, self.k, self.s, self.p, self.d)

    def clipped(self) -> np.ndarray:
        """(out,) the positions of each window inside the input (what a count without padding divides by)."""
        return self.cover().sum(axis=1)

    def padded(self) -> np.ndarray:
        """(out,) each window's positions inside the padded input [-p, n + p) (what counting the padding divides by:
        a ceil-mode window running past the right padding is cut there)."""
        start = np.arange(self.out) * self.s - self.p
        end = np.minimum(start + (self.k - 1) * self.d + 1, self.n + self.p)
        return np.maximum(-(-(end - start) // self.d), 0)

    def first_last(self) -> tuple[np.ndarray, np.ndarray]:
        """(n,) the first and one past the last window covering each input position (d = 1: a range)."""
        q = np.arange(self.n) + self.p
        first = np.where(q < self.k, 0, (q - self.k) // self.s + 1)
        last = np.minimum(q // self.s + 1, self.out)
        return first, np.maximum(last, first)


@lru_cache(maxsize=64)
def _cover(n: int, out: int, k: int, s: int, p: int, d: int) -> np.ndarray:
    c = np.zeros((out, n), dtype=np.int64)
    i = np.arange(out)[:, None] * s - p + np.arange(k)[None, :] * d
    o = np.broadcast_to(np.arange(out)[:, None], i.shape)
    inside = (i >= 0) & (i < n)
    c[o[inside], i[inside]] = 1
    c.flags.writeable = False
    return c


@lru_cache(maxsize=64)
def _covering(n: int, out: int, k: int, s: int, p: int, d: int) -> np.ndarray:
    return _covering_of(_cover(n, out, k, s, p, d))


def _covering_of(cover: np.ndarray) -> np.ndarray:
    """(n, m): a cover matrix's windows covering each position in ascending order, -1 after the last."""
    c = cover.T
    m = int(c.sum(axis=1).max(initial=0))
    order = np.argsort(-c, axis=1, kind="stable")[:, :m]  # (the covering windows first, ascending)
    got = np.where(np.take_along_axis(c, order, axis=1) == 1, order, -1)
    got.flags.writeable = False
    return got


@dataclass(frozen=True)
class Window(Rows):
    """Input-shaped tensors (driver: self, the output gradInput) cut into (H, W) planes, the pooled tensor `grad`
    into (Ho, Wo) planes, related by the window attributes the family names."""

    axes: Callable[[Shapes, Mapping], tuple[int, int]] = lambda shapes, attrs: (0, 0)  # (unused: the planes')
    grad: str = "gradOutput"
    kernel: str = "kernelSize"
    stride: str = "stride"
    padding: str = "padding"
    dilation: str | None = None
    ceil: str | None = "ceilMode"
    pooled: tuple[str, ...] = ()  # other tensors of the pooled shape, cut like grad (MaxPool's indices)
    # a tensor of its own shape holding the pooled tensor's int32 indices as bytes from its buffer's start
    # (MaxPool2dWithMask's int8 mask): block b is its bytes [4 b Ho Wo, 4 (b + 1) Ho Wo), arriving as (k, 1, 4 Ho Wo);
    # packed_shape: its shape from the pooled tensor's and the attributes, or why the family cannot take the case
    packed: str | None = None
    packed_shape: Callable[[tuple[int, ...], Mapping], tuple[int, ...] | str] | None = None
    row_sums: bool = False  # (its elements sum other terms than a row's: Rows.relief_terms)
    name: str = "window"
    spatial: int = SPATIAL  # window axes: 2 (H, W) or 3 (D, H, W)
    term_roundings: int = 0  # (no across-rows output: each element's allowance is the op's Reference.allowance)

    @property
    def own(self) -> tuple[str, ...]:
        return (self.grad, *self.pooled, *((self.packed,) if self.packed else ()))

    def attribute_fields(self) -> tuple[tuple[str, str], ...]:
        """(field, the attribute kind it must name) for declcheck: the window attributes the family reads."""
        return (("kernel", "int_list"), ("stride", "int_list"), ("padding", "int_list"), ("dilation", "int_list"),
                ("ceil", "bool"))

    def windows(self, shapes: Shapes, attrs: Mapping) -> tuple[AxisWindows, ...]:
        """((D axis,) H axis, W axis) of a case: the input's spatial sizes, the pooled tensor's (given, else the
        forward's rule), the attributes."""
        return self.axis_windows(attrs, tuple(shapes[self.driver])[-self.spatial:],
                                 tuple(shapes[self.grad])[-self.spatial:] if self.grad in shapes else None)

    def axis_windows(self, attrs: Mapping, sizes, pooled=None) -> tuple[AxisWindows, ...]:
        """One AxisWindows per spatial axis: the input's sizes, the pooled sizes (None: the forward's rule)."""
        k, s, p, d, ceil = self.parameters(attrs)
        if pooled is None:
            pooled = tuple(pooled_size(n, k[i], s[i], p[i], d[i], ceil) for i, n in enumerate(sizes))
        return tuple(AxisWindows(int(n), int(o), k[i], s[i], p[i], d[i]) for i, (n, o) in enumerate(zip(sizes, pooled)))

    def parameters(self, attrs: Mapping):
        """(kernel, stride, padding, dilation) as one value per spatial axis and ceil mode, from the attributes."""
        n = self.spatial
        k = spread(attrs[self.kernel], n)
        s = spread(attrs.get(self.stride), n, fill=k)
        p = spread(attrs.get(self.padding), n, fill=(0,) * n)
        d = spread(attrs.get(self.dilation), n, fill=(1,) * n) if self.dilation else (1,) * n
        return k, s, p, d, bool(attrs.get(self.ceil, False)) if self.ceil else False

    def default_shapes(self, shape: tuple[int, ...], attrs: Mapping, names: tuple[str, ...]) -> dict:
        """Every input-shaped tensor the case's shape; the pooled tensor its planes' forward size (the case's shape
        where the attributes give none: a case the contract refuses)."""
        shape = tuple(shape)
        shapes = {n: shape for n in names}
        try:
            k, s, p, d, ceil = self.parameters(attrs)
            sp = self.spatial
            sizes = tuple(pooled_size(n, k[i], s[i], p[i], d[i], ceil) for i, n in enumerate(shape[-sp:]))
            if len(shape) >= sp + 1 and min(k + s + d) > 0 and min(sizes) > 0:
                for name in (self.grad, *self.pooled):
                    shapes[name] = (*shape[:-sp], *sizes)
            if self.packed in names and not isinstance(packed := self.packed_shape(shapes[self.grad], attrs), str):
                shapes[self.packed] = tuple(packed)
        except (ValueError, TypeError, IndexError, ZeroDivisionError, KeyError):
            pass
        return shapes

    def shape_problem(self, op, shapes: Shapes, attrs: Mapping) -> str | None:
        """Why the shapes are not (..., H, W) planes with a pooled tensor of the forward's size (None: they are)."""
        if self.driver not in shapes or self.grad not in shapes:
            return f"{self.driver} or {self.grad} is null"
        drv, g = tuple(shapes[self.driver]), tuple(shapes[self.grad])
        sp = self.spatial
        layouts = "(N, C, H, W) or (C, H, W)" if sp == 2 else "(N, C, D, H, W) or (C, D, H, W)"
        if len(drv) < sp + 1 or len(g) != len(drv):
            return f"{self.driver} {list(drv)} and {self.grad} {list(g)}: the {self.name} family needs {layouts} both"
        if g[:-sp] != drv[:-sp]:
            return f"{self.grad}'s leading axes {list(g[:-sp])} are not {self.driver}'s {list(drv[:-sp])}"
        problem = self.sizes_problem(drv, g, attrs)
        if problem:
            return problem
        for name in self.pooled:
            if name in shapes and tuple(shapes[name]) != g:
                return f"{name} has shape {list(shapes[name])}; the {self.name} family needs {self.grad}'s {list(g)}"
        for t in op.tensors:
            s = tuple(shapes.get(t.name, drv))
            if t.name not in (self.driver, self.grad, *self.pooled, self.packed) and s != drv:
                return f"{t.name} has shape {list(s)}; the {self.name} family needs {self.driver}'s {list(drv)}"
        if self.packed in shapes:
            want = self.packed_shape(g, attrs)
            if isinstance(want, str) or tuple(shapes[self.packed]) != tuple(want):
                return want if isinstance(want, str) else (
                    f"{self.packed} has shape {list(shapes[self.packed])}; the forward's for {self.grad} {list(g)} "
                    f"is {list(want)} (its first int32 the indices)")
        return None

    def sizes_problem(self, drv: tuple[int, ...], g: tuple[int, ...], attrs: Mapping) -> str | None:
        """Why the pooled tensor's planes are not the forward's pooled size of the driver's (None: they are)."""
        sp = self.spatial
        k, s, p, d, ceil = self.parameters(attrs)
        want = tuple(pooled_size(n, k[i], s[i], p[i], d[i], ceil) for i, n in enumerate(drv[-sp:]))
        if min(want) < 1:
            return (f"kernel {list(k)}, stride {list(s)}, padding {list(p)} leave no window in {list(drv[-sp:])} "
                    f"(the forward's output would be {list(want)})")
        if g[-sp:] != want:
            return (f"{self.grad}'s planes are {list(g[-sp:])}; kernel {list(k)}, stride {list(s)}, padding "
                    f"{list(p)}{', ceil mode' if ceil else ''} pool {list(drv[-sp:])} into {list(want)}")
        return None

    def geometry(self, shapes: Shapes, attrs: Mapping) -> Geometry:
        """The driver's blocks: one (H, W) plane (3-D: one (D, H, W) volume, rows D H) per (n, c)."""
        shape = tuple(shapes[self.driver])
        return Geometry(math.prod(shape[:-self.spatial]), math.prod(shape[-self.spatial:-1]), shape[-1])

    def own_geometry(self, name: str, shapes: Shapes, attrs: Mapping, geo: Geometry) -> Geometry | None:
        """The pooled tensors' block b: their (Ho, Wo) plane b (3-D: their (Do, Ho, Wo) volume, rows Do Ho)."""
        if name not in self.own:
            return None
        g = tuple(shapes[self.grad])
        if name == self.packed:
            return Geometry(geo.a1, 1, 4 * math.prod(g[-self.spatial:]))
        return Geometry(geo.a1, math.prod(g[-self.spatial:-1]), g[-1])


@dataclass(frozen=True)
class AdaptiveAxis:
    """One axis of adaptive pooling: n input positions pooled into `out` windows, window o covering
    [floor(o n / out), ceil((o + 1) n / out)) (PyTorch's start_index / end_index, ops-nn's StartIndexOut2In /
    EndIndexOut2In). Neighbouring windows overlap by one position where out does not divide n, and where out > n
    a position is in several windows. The same questions as AxisWindows (cover, covering, clipped, first_last)."""

    n: int
    out: int
    d = s = 1  # (no dilation: each position's windows are one range, as window_sums walks them)
    p = 0

    def starts(self) -> np.ndarray:
        return np.arange(self.out, dtype=np.int64) * self.n // max(self.out, 1)

    def ends(self) -> np.ndarray:
        return -(-(np.arange(1, self.out + 1, dtype=np.int64) * self.n) // max(self.out, 1))

    @property
    def k(self) -> int:
        """The largest window (the tiling's CeilDiv(n, out), where out <= n)."""
        return int(self.clipped().max(initial=0))

    def cover(self) -> np.ndarray:
        """(out, n) int64, read only (cached): 1 where window o covers position i."""
        return _adaptive_cover(self.n, self.out)

    def covering(self) -> np.ndarray:
        """(n, m) int64, read only (cached): the windows covering each position, ascending, -1 after the last."""
        return _adaptive_covering(self.n, self.out)

    def clipped(self) -> np.ndarray:
        """(out,) each window's size: its divisor along this axis."""
        return self.ends() - self.starts()

    padded = clipped  # (no padding)

    def first_last(self) -> tuple[np.ndarray, np.ndarray]:
        """(n,) the first and one past the last window covering each position: floor(i out / n) and
        ceil((i + 1) out / n) (StartIndexIn2Out, EndIndexIn2Out)."""
        i = np.arange(self.n, dtype=np.int64)
        n = max(self.n, 1)
        return i * self.out // n, -(-((i + 1) * self.out) // n)


@lru_cache(maxsize=64)
def _adaptive_cover(n: int, out: int) -> np.ndarray:
    a = AdaptiveAxis(n, out)
    i = np.arange(n)[None, :]
    c = ((i >= a.starts()[:, None]) & (i < a.ends()[:, None])).astype(np.int64)
    c.flags.writeable = False
    return c


@lru_cache(maxsize=64)
def _adaptive_covering(n: int, out: int) -> np.ndarray:
    return _covering_of(_adaptive_cover(n, out))


@dataclass(frozen=True)
class Adaptive(Window):
    """Adaptive average pooling's gradient: no window attributes; along each spatial axis the driver's n positions
    and gradOutput's `out` windows (its own size, which a case gives under `tensors`; self's where it gives none)
    place the windows (AdaptiveAxis). Blocks as Window's. `precision`: the name under which the functions receive
    the driver dtype's significand bits (24, 11, 8), (k, 1, 1) int64, for a path that computes in the 16-bit dtype
    (the op_api's global pooling: a Fill of 1 / (H W) in the dtype and a Mul)."""

    kernel: str | None = None
    stride: str | None = None
    padding: str | None = None
    ceil: str | None = None
    name: str = "adaptive window"
    precision: str | None = None

    def attribute_fields(self) -> tuple[tuple[str, str], ...]:
        return ()

    def axis_windows(self, attrs: Mapping, sizes, pooled=None) -> tuple[AdaptiveAxis, ...]:
        """One AdaptiveAxis per spatial axis: the input's sizes, the pooled ones (None: the same, one position a
        window)."""
        pooled = tuple(sizes) if pooled is None else tuple(pooled)
        return tuple(AdaptiveAxis(int(n), int(o)) for n, o in zip(sizes, pooled))

    def default_shapes(self, shape: tuple[int, ...], attrs: Mapping, names: tuple[str, ...]) -> dict:
        """Every tensor the case's shape (gradOutput too: one window a position, unless the case gives its own)."""
        return {n: tuple(shape) for n in names}

    def sizes_problem(self, drv: tuple[int, ...], g: tuple[int, ...], attrs: Mapping) -> str | None:
        """Any pooled size is taken; an empty gradOutput beside a non-empty self leaves the output unwritten."""
        if 0 in g and 0 not in drv:
            return (f"{self.grad} {list(g)} is empty and {self.driver} {list(drv)} is not: the op_api returns without "
                    f"computing, and the output keeps what it held (no result to judge)")
        return None

    def block_values(self, m, b0: int, b1: int) -> dict:
        """`precision` (when named): the driver dtype's significand bits for every block of [b0, b1)."""
        if self.precision is None:
            return {}
        bits = next(t.dtype.precision for t in m.tensors if t.name == self.driver)
        return {self.precision: np.full((b1 - b0, 1, 1), bits, dtype=np.int64)}
