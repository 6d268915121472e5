"""A convolution's gradients lowered to dot products (im2col through index arrays), a range of K and of output
columns at a time: the float64 reference with its rigorous bound and allowance, gen's certified value and bound
tile by tile; single elements from their own dot products in conv_elements.py, the cube's float32 accumulation over
the same lowering (ops/contraction/cube.py) in conv_cube.py.

Each gradient is G batched matrix products out[g] = L[g] @ R[g], L (G, M, K), R (G, K, C), with zeros where a tap
falls in the padding (an exact zero term changes no sum and no rounding):

- gradWeight: G = groups, M = Cout / G, K = N x So (sample outer, output position inner), C = Cin / G x Kk (input
  channel outer, kernel tap inner); L = gradOutput, R[(n, o), (c, j)] = input[n, c, o s - p + j d].
- gradInput (`grad_input`; it and `forward` are a `Gathered`): G = groups, M = Cin / G, K = Kk x Cout / G (tap
  outer, output channel inner), C = N x S; L[c, (j, co)] = weight[co, c, j], R[(j, co), (n, i)] = gradOutput[n, co, o]
  where o s - p + j d = i, else 0.
- gradBias: G = 1, M = Cout, K = N x So, C = 1; L = gradOutput, R = ones.
- the forward (`forward`, a transposed convolution's gradInput): G = groups, M = Cout / G, K = Cin / G x Kk (channel
  outer, tap inner), C = N x So; L = weight, R[(c, j), (n, o)] = input[n, c, o s - p + j d].

Every input is a float32, float16 or bfloat16 value, so each product is exact in float64 and the exact result an exact
sum of float64 values (ops/dyadic.exact_row_sums), as for BatchMatMul (ops/contraction/dots.py, whose bound and
allowance these are, with K counted per element: the taps that do not fall in the padding).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..contraction import dots
from ..contraction.dots import PRODUCT_ROUNDINGS

HELD = 1 << 22  # elements a gathered piece of R holds (32 MiB of float64)
WIDE_COLUMNS = 1 << 10  # certified's columns a piece at most, so that a piece spans K whole up to HELD / 1024 terms
F32 = np.float32


@dataclass(frozen=True)
class Conv:
    """The sizes and window parameters of one case."""

    n: int
    cin: int
    cout: int
    groups: int
    sizes: tuple[int, ...]  # input's spatial sizes
    out: tuple[int, ...]  # gradOutput's
    kernel: tuple[int, ...]  # weight's
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]

    cg = property(lambda self: self.cin // self.groups)
    cog = property(lambda self: self.cout // self.groups)
    taps = property(lambda self: math.prod(self.kernel))
    pin = property(lambda self: math.prod(self.sizes))
    pout = property(lambda self: math.prod(self.out))

    def reads(self) -> list[np.ndarray]:
        """Per axis (k, out): the input position tap j of output position o reads, -1 in the padding."""
        got = []
        for n, o, k, s, p, d in zip(self.sizes, self.out, self.kernel, self.stride, self.padding, self.dilation):
            i = np.arange(o)[None, :] * s - p + np.arange(k)[:, None] * d
            got.append(np.where((i >= 0) & (i < n), i, -1))
        return got

    def sources(self) -> list[np.ndarray]:
        """Per axis (k, n): the output position whose tap j reads input position i, -1 where none does."""
        got = []
        for n, o, k, s, p, d in zip(self.sizes, self.out, self.kernel, self.stride, self.padding, self.dilation):
            q = np.arange(n)[None, :] + p - np.arange(k)[:, None] * d
            src = np.where(q % s == 0, q // s, -1)
            got.append(np.where((src >= 0) & (src < o), src, -1))
        return got


def _flat_table(per_axis: list[np.ndarray], sizes) -> np.ndarray:
    """(taps, positions): the flat position (row-major over `sizes`) of per-axis tables table_a[tap_a, at_a], both
    indices flat over the axes (kernel taps, the other side's positions), -1 where any axis has -1. Built once per
    gradient (kernel taps x positions entries), so that reading a piece of R is one gather: each axis adds its term
    times its row-major multiplier, and a padding entry adds -prod(sizes), which no sum of the valid terms undoes."""
    d, total, mult = len(per_axis), math.prod(sizes), 1
    flat = np.zeros((1,) * (2 * d), np.int64)
    for a in reversed(range(d)):
        table = per_axis[a].astype(np.int64)
        shape = [1] * (2 * d)
        shape[a], shape[d + a] = table.shape
        flat = flat + np.where(table >= 0, table * mult, -total).reshape(shape)
        mult *= sizes[a]
    return np.maximum(flat, -1).reshape(math.prod(t.shape[0] for t in per_axis), -1)


def _narrow(a: np.ndarray) -> np.ndarray:
    """a as float32 where that holds every value exactly (every operand is a float32, float16 or bfloat16 value, and
    infinities and NaNs stay what they are), else as it is: a Gathered lowering keeps its (transposed) copy of the
    weight at half the bytes, and gives its pieces back in the dtype it was built in (`Lowered.dtype`), so no value
    changes."""
    if a.dtype != np.float64:
        return a
    with np.errstate(all="ignore"):
        narrow = a.astype(F32)
        same = (narrow == a).all() or np.array_equal(narrow, a, equal_nan=True)  # (the NaN test only where needed)
    return narrow if same else a


def _terms_per(tables, axis: int, factor: int, repeat: int) -> np.ndarray:
    """Each output column's number of non-padding terms, as a (1, 1, columns) array: per spatial axis, the valid
    entries of its read table counted along `axis` (0: per output position, 1: per tap), multiplied over the axes
    in C order, times `factor` (the channels each term runs over), the whole repeated `repeat` times."""
    per = np.ones(1, np.int64)
    for table in tables:
        per = np.multiply.outer(per, (table >= 0).sum(axis=axis)).reshape(-1)
    return np.tile(per * factor, repeat)[None, None, :]


def _taken(src: np.ndarray, lead: tuple, pos: np.ndarray, dtype) -> np.ndarray:
    """src[(*lead, pos)] widened to dtype, +0 where pos is -1 (a tap in the padding): a few elements' terms read
    from the operand as given, with no padded copy of it (an exact +0 term, as the pieces' `right` reads there)."""
    got = src[(*lead, np.maximum(pos, 0))].astype(dtype)
    got[np.broadcast_to(pos < 0, got.shape)] = 0
    return got


def _sample_major(a: np.ndarray, ks: int, ke: int, per: int) -> np.ndarray:
    """a (N, ..., per) (a view of an operand as given) as (..., K = N x per, sample outer) over K range ks:ke: only
    the samples that range touches are moved (no copy of the whole operand in K order)."""
    n0, n1 = ks // per, max(ks // per, (ke - 1) // per + 1)
    piece = np.moveaxis(a[n0:n1], 0, -2)
    return piece.reshape(*piece.shape[:-2], -1)[..., ks - n0 * per:ke - n0 * per]


class Lowered:
    """One gradient as G matrix products: `left(ks, ke)` (G, M, ke - ks), `right(ks, ke, cs, ce)` (G, ke - ks,
    ce - cs), `rows(ks, ke, g, m)` and `columns(ks, ke, g, c)` (len(g), ke - ks) the rows of L and columns of R of
    single elements, each in `dtype` (the operands' as given, or `dtype` where given), `counts()` the nonzero taps
    per element (G, M, C) (broadcastable), `flat(out)` the (G, M, C) result in the tensor's element order,
    `tensor_positions(cs, ce)` (G, M, ce - cs) where columns cs:ce lie in that order, `locate(flat)` the (g, m, c) of
    tensor elements.

    Pieces and single elements read the operands as given (views, index arithmetic: `_sample_major`, `_taken`),
    widening only what a piece holds: no padded, transposed or widened copy of a 25.7M-element operand of a
    ResNet-50 layer is made, for gen's pieces or verify's relief of a few flagged elements, and every term is the
    value the whole-tensor lowering read (tests/test_conv_gather.py)."""

    g: int
    m: int
    k: int
    c: int
    dtype: np.dtype

    def tensor_positions(self, cs: int, ce: int) -> np.ndarray:
        """(G, M, ce - cs): where the elements of output columns cs:ce lie in the tensor's element order."""
        return (np.arange(self.g * self.m)[:, None] * self.c + np.arange(cs, ce)[None, :]).reshape(self.g, self.m, -1)


class GradWeight(Lowered):
    def __init__(self, conv: Conv, x: np.ndarray, gy: np.ndarray, dtype=None) -> None:
        self.conv, self.g, self.m, self.k, self.c = conv, conv.groups, conv.cog, conv.n * conv.pout, conv.cg * conv.taps
        self.dtype = np.dtype(dtype or gy.dtype)
        self.gy = gy.reshape(conv.n, conv.groups, conv.cog, conv.pout)  # (views of the operands as given)
        self.xs = x.reshape(conv.n, conv.groups, conv.cg, conv.pin)
        self.table = conv.reads()
        self.flat_table = _flat_table(self.table, conv.sizes)

    def left(self, ks, ke):
        return _sample_major(self.gy, ks, ke, self.conv.pout).astype(self.dtype, copy=False)

    def right(self, ks, ke, cs, ce):
        """A tap at a time: its columns (input channels) of every row of K read through one table row, the
        padding's -1 made a zero; no padded copy of input, no (K, C) index array."""
        cv, q, c = self.conv, np.arange(ks, ke), np.arange(cs, ce)
        ch, tap = c // cv.taps, c % cv.taps
        out = np.empty((self.g, ke - ks, ce - cs), self.dtype)
        for j in np.unique(tap):
            cols = np.flatnonzero(tap == j)
            pos = self.flat_table[j, q % cv.pout]
            got = self.xs[q // cv.pout, :, :, np.maximum(pos, 0)][:, :, ch[cols]]  # (len, G, columns)
            got[pos < 0] = 0
            out[:, :, cols] = got.transpose(1, 0, 2)
        return out

    def rows(self, ks, ke, g, m):
        """Each element's gradOutput channel, the samples ks:ke touches (whole planes, then K's range)."""
        return _sample_major(self.gy[:, g, m, :], ks, ke, self.conv.pout).astype(self.dtype)

    def columns(self, ks, ke, g, c):
        """Each element's input channel plane per sample, read through its tap's table row (one index per output
        position, not per term), the padding's -1 made a zero; then K's range."""
        cv = self.conv
        n0, n1 = ks // cv.pout, max(ks // cv.pout, (ke - 1) // cv.pout + 1)
        table = self.flat_table[c % cv.taps]  # (len, positions)
        got = np.take_along_axis(self.xs[n0:n1][:, g, c // cv.taps, :], np.maximum(table, 0)[None], axis=2)
        got[:, table < 0] = 0
        return _sample_major(got, ks - n0 * cv.pout, ke - n0 * cv.pout, cv.pout).astype(self.dtype)

    def counts(self):
        return _terms_per(self.table, 1, self.conv.n, self.conv.cg)

    def flat(self, out):
        return out.reshape(-1)

    def locate(self, flat):
        gm, c = np.divmod(flat, self.c)
        return gm // self.m, gm % self.m, c


class Gathered(Lowered):
    """An output of G x M channels at `positions` per sample, out (G, M, C = N x positions), from lhs (G, M, K) and
    a source (N, G, channels, source positions) read through `table` (per spatial axis, the source position of each
    tap at each output position, or -1 in the padding): K is the group's channels x the taps, tap outer (gradInput:
    the fractal's C0 runs along channels) or channel outer (the forward convolution)."""

    def __init__(self, conv: Conv, lhs: np.ndarray, src: np.ndarray, table, sizes, positions: int,
                 tap_outer: bool, dtype=None) -> None:
        self.conv, self.table, self.sizes, self.positions, self.tap_outer = conv, table, sizes, positions, tap_outer
        self.given, self.srcs, self.channels = lhs, src, src.shape[2]  # (the operands as given)
        self.dtype = np.dtype(dtype or src.dtype)
        self.flat_table = _flat_table(table, sizes)
        self.g, self.m, self.k, self.c = lhs.shape[0], lhs.shape[1], lhs.shape[2], conv.n * positions

    @cached_property
    def lhs(self) -> np.ndarray:
        return _narrow(self.given)

    def left(self, ks, ke):
        return self.lhs[:, :, ks:ke].astype(self.dtype, copy=False)

    def _tap_channel(self, kk: np.ndarray):
        if self.tap_outer:
            return kk // self.channels, kk % self.channels
        return kk % self.conv.taps, kk // self.conv.taps

    def right(self, ks, ke, cs, ce):
        """A tap at a time: its rows of K read through one table row for every column, the padding's -1 made a
        zero; no padded copy of the source, no (K, C) index array. Laid out (K, C, G) in memory, as the pieces
        have always been (a group's matrix strided: numpy's matmul then takes the same path, so the same bits)."""
        cc, p = np.arange(cs, ce), self.positions
        tap, ch = self._tap_channel(np.arange(ks, ke))
        out = np.empty((ke - ks, ce - cs, self.g), self.dtype)
        for j in np.unique(tap):
            rows = np.flatnonzero(tap == j)
            pos = self.flat_table[j, cc % p]
            got = self.srcs[cc // p, :, :, np.maximum(pos, 0)][:, :, ch[rows]]  # (C, G, rows)
            got[pos < 0] = 0
            out[rows] = got.transpose(2, 0, 1)
        return out.transpose(2, 0, 1)

    def rows(self, ks, ke, g, m):
        return self.given[g, m, ks:ke].astype(self.dtype)

    def columns(self, ks, ke, g, c):
        tap, ch = self._tap_channel(np.arange(ks, ke))
        pos = self.flat_table[tap[None, :], (c % self.positions)[:, None]]
        return _taken(self.srcs, ((c // self.positions)[:, None], g[:, None], ch[None, :]), pos, self.dtype)

    def counts(self):
        return _terms_per(self.table, 0, self.channels, self.conv.n)

    def flat(self, out):
        return out.reshape(self.g, self.m, self.conv.n, self.positions).transpose(2, 0, 1, 3).reshape(-1)

    def tensor_positions(self, cs, ce):
        """Columns cs:ce (sample outer, position inner) in the tensor's order, (N, G, M, positions)."""
        cc, p = np.arange(cs, ce), self.positions
        return ((np.arange(self.g * self.m) * p)[:, None] + (cc // p * (self.g * self.m * p) + cc % p)[None, :]
                ).reshape(self.g, self.m, -1)

    def locate(self, flat):
        n, rest = np.divmod(flat, self.g * self.m * self.positions)
        ch, i = np.divmod(rest, self.positions)
        return ch // self.m, ch % self.m, n * self.positions + i


def grad_input(conv: Conv, w: np.ndarray, gy: np.ndarray, dtype=None) -> Gathered:
    """gradInput: G = groups, M = Cin / G, K = Kk x Cout / G (tap outer), C = N x Si; gradOutput read through the
    table of the output positions each input position feeds."""
    lhs = w.reshape(conv.groups, conv.cog, conv.cg, conv.taps).transpose(0, 2, 3, 1)
    return Gathered(conv, lhs.reshape(conv.groups, conv.cg, conv.taps * conv.cog),
                    gy.reshape(conv.n, conv.groups, conv.cog, conv.pout), conv.sources(), conv.out, conv.pin, True, dtype)


def forward(conv: Conv, w: np.ndarray, x: np.ndarray, dtype=None) -> Gathered:
    """The forward convolution of `x` (conv's input) with w: gradInput of a transposed convolution. G = groups,
    M = Cout / G, K = Cin / G x Kk (channel outer, tap inner), C = N x So."""
    return Gathered(conv, w.reshape(conv.groups, conv.cog, conv.cg * conv.taps),
                    x.reshape(conv.n, conv.groups, conv.cg, conv.pin), conv.reads(), conv.sizes, conv.pout, False, dtype)


class GradBias(Lowered):
    """gy (N, channels, positions) summed over N and the positions, per channel."""

    def __init__(self, gy: np.ndarray, n: int, channels: int, positions: int, dtype=None) -> None:
        self.g, self.m, self.k, self.c, self.dtype = 1, channels, n * positions, 1, np.dtype(dtype or gy.dtype)
        self.gy, self.positions = gy.reshape(n, channels, positions), positions  # (a view of gradOutput as given)

    def left(self, ks, ke):
        return _sample_major(self.gy, ks, ke, self.positions)[None].astype(self.dtype, copy=False)

    def right(self, ks, ke, cs, ce):
        return np.ones((1, ke - ks, ce - cs), self.dtype)

    def rows(self, ks, ke, g, m):
        q = np.arange(ks, ke)[None, :]
        return self.gy[q // self.positions, m[:, None], q % self.positions].astype(self.dtype)

    def columns(self, ks, ke, g, c):
        return np.ones((g.size, ke - ks), self.dtype)

    def counts(self):
        return np.full((1, 1, 1), self.k, np.int64)

    def flat(self, out):
        return out.reshape(-1)

    def locate(self, flat):
        return np.zeros_like(flat), flat, np.zeros_like(flat)


def _column_ranges(low: Lowered, k_step: int):
    width = max(1, HELD // max(low.g * max(k_step, 1), 1))
    return [(s, min(low.c, s + width)) for s in range(0, max(low.c, 1), width)] if low.c else []


def reference(low: Lowered, term_roundings: int = PRODUCT_ROUNDINGS):
    """(value, bound, scale, allowance), each (G, M, C) float64, as dots.reference: K walked in chunks of about
    sqrt(K) (the peak of the prefix sums in K order bounded chunk by chunk), the allowance the smaller of the
    any-order one and the prefix one (docs/allowances.md), both from each element's own count of nonzero taps."""
    k_step = dots.k_step(low.k)
    shape = (low.g, low.m, low.c)
    value, scale, peak, squares = (np.zeros(shape) for _ in range(4))
    for cs, ce in _column_ranges(low, k_step):
        v, sc, pk, sq = (a[:, :, cs:ce] for a in (value, scale, peak, squares))
        for ks in range(0, low.k, k_step):
            ke = min(low.k, ks + k_step)
            left, right = low.left(ks, ke), low.right(ks, ke, cs, ce)
            size = np.matmul(np.abs(left), np.abs(right))
            np.maximum(pk, np.abs(v) + size, out=pk)
            v += np.matmul(left, right)
            sc += size
            sq += size * size
    counts = np.broadcast_to(low.counts(), shape)
    return dots.finished(value, scale, peak, squares, low.k, counts, term_roundings)


def certified(low: Lowered):
    """(value, bound), each 1-d in the tensor's element order (Lowered.flat's): `certified_tiles` placed, each
    column range's value and bound as its piece is done, so no (G, M, C) array beside the two is made."""
    size = low.g * low.m * low.c
    value, bound = np.zeros(size), np.zeros(size)
    for at, v, b in certified_tiles(low):
        value[at], bound[at] = v, b
    return value, bound


def certified_tiles(low: Lowered):
    """(flat positions in the tensor's order, value, bound), each 1-d, per range of output columns, for gen's
    certification: no prefix walk, so a piece spans as much of K as HELD allows (K whole up to HELD / WIDE_COLUMNS
    terms: few wide matmuls, not sqrt(K) thin ones each adding into the piece). value: the pieces' float64 matmuls
    summed (any order of the K exact products: within gamma_K S of the exact sum, S the exact |L|.|R|); |L|.|R| per
    piece through dots.magnitude (float32 where rigorous: an upper bound on the piece's S; else float64, at least
    (1 - gamma_k) of it), summed in float64 to T >= (1 - gamma_K) S (K counts every term and every addition); the
    bound gamma_K / (1 - gamma_K) T (dots.SLACK: its own roundings). A tile is a column range's elements whatever
    else is asked, so its values are the same bits whether gen settles the output tile by tile or `certified` whole
    (decision: gen holds one tile's float64 arrays, not gradInput's 2 x 206 MB)."""
    width = min(low.c, WIDE_COLUMNS)
    k_step = min(low.k, max(dots.k_step(low.k), HELD // max(low.g * max(width, low.m, 1), 1)))
    g = dots.gamma(low.k)
    factor = (g / (1 - g)) * dots.SLACK
    for cs, ce in _column_ranges(low, k_step):
        v, t = np.zeros((low.g, low.m, ce - cs)), np.zeros((low.g, low.m, ce - cs))
        for ks in range(0, low.k, k_step):
            ke = min(low.k, ks + k_step)
            left, right = low.left(ks, ke), low.right(ks, ke, cs, ce)
            v += np.matmul(left, right)
            t += dots.magnitude(left, right)[0]
        t *= factor
        yield low.tensor_positions(cs, ce).reshape(-1), v.reshape(-1), t.reshape(-1)


def magnitude(low: Lowered) -> np.ndarray:
    """sum over each element's terms of |L| |R|, (G, M, C) float64, within a factor SLACK either way (sums of
    nonnegative terms)."""
    k_step = dots.k_step(low.k)
    out = np.zeros((low.g, low.m, low.c))
    for cs, ce in _column_ranges(low, k_step):
        for ks in range(0, low.k, k_step):
            ke = min(low.k, ks + k_step)
            out[:, :, cs:ce] += np.matmul(np.abs(low.left(ks, ke)), np.abs(low.right(ks, ke, cs, ce)))
    return out


def kept_for(store: list, arrays: tuple, tag, make):
    """make()'s result, kept in `store` (one entry) for the next call on the same `arrays` and `tag`. The arrays are
    held weakly: when the relief lets the case's blocks go, what was made of them goes too."""
    if not (store and store[0][1] == tag and all(r() is a for r, a in zip(store[0][0], arrays))):
        entry = (tuple(weakref.ref(a) for a in arrays), tag, make())
        store[:] = [entry]
        weakref.finalize(arrays[0], _forget, store, entry)
    return store[0][2]


def _forget(store: list, entry) -> None:
    if store and store[0] is entry:
        store.clear()
