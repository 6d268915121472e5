"""Tensor layout as aclCreateTensor sees it: a view (shape, strides, offset) over a storage buffer.

All numbers are in elements, as in the ACL API. Logical element i of the view
(row-major order) lives at storage index offset + sum(coord_k * stride_k).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..files.text import is_int, show

# Elements of a view, storage bytes, strides, offsets: anything larger would overflow the int64 index
# arithmetic (numpy, the manifest, the harness) long before any file system could hold the tensor.
MAX_ELEMENTS = 2**62


OVERLAP_EXACT = 1 << 22  # elements whose positions Layout.overlaps compares one by one (32 MiB of int64)


@dataclass(frozen=True)
class Layout:
    """A view over a storage buffer (shape, strides, offset), as aclCreateTensor is given it."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    storage_size: int

    @staticmethod
    def contiguous(shape: tuple[int, ...]) -> "Layout":
        return Layout(tuple(shape), packed_strides(shape), 0, math.prod(shape))

    @cached_property  # (thousands of small cases share one Layout: each is worked out once)
    def numel(self) -> int:
        return math.prod(self.shape)

    @cached_property
    def is_contiguous(self) -> bool:
        return self.numel == 0 or (
            self.offset == 0 and self.strides == packed_strides(self.shape) and self.storage_size == self.numel
        )

    def storage_index(self, flat: np.ndarray) -> np.ndarray:
        """Storage positions of logical (row-major) flat indices."""
        flat = np.asarray(flat, dtype=np.int64)
        if self.is_contiguous:
            return flat
        pos = np.full(flat.shape, self.offset, dtype=np.int64)
        rest = flat.copy()
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            rest, coord = np.divmod(rest, size)
            pos += coord * stride
        return pos

    def range_index(self, start: int, stop: int) -> np.ndarray:
        """storage_index of logical elements [start, stop), from a table of the inner axes' positions (the
        longest run of trailing axes with no more elements than the range) added to each outer position: one
        addition per element where storage_index divides once per axis (a tenth of gen on channel-last suites)."""
        if self.is_contiguous:
            return np.arange(start, stop, dtype=np.int64)
        n, axis, inner = stop - start, len(self.shape), 1
        while axis > 0 and inner * self.shape[axis - 1] <= n:
            axis -= 1
            inner *= self.shape[axis]
        if n <= 0 or axis == len(self.shape):  # (nothing, or the last axis alone is longer than the range)
            return self.storage_index(np.arange(start, stop, dtype=np.int64))
        table = np.zeros(1, dtype=np.int64)
        for size, stride in zip(self.shape[axis:], self.strides[axis:]):
            table = (table[:, None] + np.arange(size, dtype=np.int64) * stride).reshape(-1)
        first = start // inner
        outer = Layout(self.shape[:axis], self.strides[:axis], self.offset, self.storage_size)
        pos = (outer.storage_index(np.arange(first, (stop - 1) // inner + 1))[:, None] + table[None, :]).reshape(-1)
        return pos[start - first * inner:stop - first * inner]

    def coords(self, flat: int) -> tuple[int, ...]:
        """Coordinates of one logical flat index (for reports)."""
        return tuple(int(c) for c in np.unravel_index(flat, self.shape)) if self.shape else ()

    def check(self) -> str | None:
        """Why this layout is unusable, or None. Every view element must lie inside the storage."""
        if len(self.shape) != len(self.strides):
            return f"strides {list(self.strides)} do not match shape {list(self.shape)}"
        if any(d < 0 for d in self.shape):
            return f"negative dimension in shape {list(self.shape)}"
        if any(s < 0 for s in self.strides) or self.offset < 0:
            return "negative strides and offsets are not supported by aclCreateTensor"
        too_big = [(what, v) for what, v in (("a dimension", max(self.shape, default=0)), ("the element count", self.numel),
                                             ("a stride", max(self.strides, default=0)), ("the offset", self.offset),
                                             ("the storage size", self.storage_size)) if v > MAX_ELEMENTS]
        if too_big:
            what, v = too_big[0]
            return f"{what} is {magnitude(v)} elements; at most 2^62"
        if self.numel == 0:
            return None
        last = self.offset + sum((d - 1) * s for d, s in zip(self.shape, self.strides))
        if last >= self.storage_size:
            return f"view reaches storage index {last} but storage holds {self.storage_size} elements"
        return None

    def overlaps(self) -> bool:
        """Whether two of the view's elements may share a storage position (a stride 0 on an axis of two or more,
        or axes interleaved). Axes by increasing stride, each stride past the span of the ones before, keep every
        element apart; where they do not, the positions themselves are compared (up to OVERLAP_EXACT elements;
        beyond, unproven counts as overlapping)."""
        reach = 0
        for stride, size in sorted((s, d) for d, s in zip(self.shape, self.strides) if d > 1):
            if stride <= reach:
                break
            reach += (size - 1) * stride
        else:
            return False
        if self.numel > OVERLAP_EXACT:
            return True
        return int(np.unique(self.range_index(0, self.numel)).size) < self.numel

    def to_json(self) -> dict:
        return {"shape": list(self.shape), "strides": list(self.strides), "offset": self.offset,
                "storage_shape": [self.storage_size]}


def packed_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(strides))


LAYOUT_KEYS = ("transposed", "gap", "step", "offset", "tail", "strides", "storage_shape")


def from_spec(shape: tuple[int, ...], spec, itemsize: int = 1) -> Layout:
    """A Layout from a case file's layout spec; ValueError says what is wrong.

    Sizes are Python ints throughout: a view of over 2^62 elements, or a storage of over 2^62
    bytes (`itemsize` bytes an element), is refused here rather than overflowing int64 later.

    spec: None or "contiguous"; "transposed" (storage holds the last two dims
    swapped); or a mapping of: transposed (bool), gap (elements of padding after
    each innermost storage row), step (stride of the innermost dim), offset,
    tail (spare storage elements after the view), or explicit strides and
    storage_shape.
    """
    numel = math.prod(shape)
    if numel > MAX_ELEMENTS:
        raise ValueError(f"the view holds {magnitude(numel)} elements ({human_bytes(numel * itemsize)}); at most 2^62")
    if spec is None or spec == "contiguous":
        spec = {}
    elif spec == "transposed":
        spec = {"transposed": True}
    if not isinstance(spec, dict):
        raise ValueError(f"a layout is 'contiguous', 'transposed' or a mapping of {', '.join(LAYOUT_KEYS)}; got {show(spec)}")
    for k in spec:
        if k not in LAYOUT_KEYS:
            raise ValueError(f"unknown layout key {show(k)} (valid: {', '.join(LAYOUT_KEYS)})")
    ints = {k: spec[k] for k in ("gap", "step", "offset", "tail") if k in spec}
    for k, v in ints.items():  # no upper bound here: the storage size check below says how big it gets
        if not is_int(v) or v < (1 if k == "step" else 0):
            raise ValueError(f"layout '{k}' must be an integer >= {1 if k == 'step' else 0}, got {show(v)}")
    if not isinstance(spec.get("transposed", False), bool):
        raise ValueError(f"layout 'transposed' is true or false, got {show(spec['transposed'])}")
    derived = {"transposed": False, "gap": 0, "step": 1}
    if "strides" in spec and any(spec.get(k, v) != v for k, v in derived.items()):
        # silently dropping one would generate a layout the user did not ask for
        raise ValueError("explicit 'strides' cannot be combined with transposed, gap or step")
    if "storage_shape" in spec and spec.get("tail", 0):
        raise ValueError("explicit 'storage_shape' cannot be combined with tail")
    ndim = len(shape)
    if "strides" in spec:
        strides = spec["strides"]
        if not isinstance(strides, list) or len(strides) != ndim or not all(is_int(s) for s in strides):
            raise ValueError(f"layout strides must be {ndim} integers for shape {list(shape)}, got {show(strides)}")
        strides = tuple(strides)
    else:
        strides = _derived_strides(shape, bool(spec.get("transposed", False)), spec.get("step", 1), spec.get("gap", 0))
    offset = spec.get("offset", 0)
    needed = offset + (sum((d - 1) * s for d, s in zip(shape, strides)) + 1 if numel else 0)
    if "storage_shape" in spec:
        st = spec["storage_shape"]
        if not (isinstance(st, list) and len(st) == 1 and is_int(st[0]) and st[0] >= 0):
            raise ValueError(f"storage_shape is a one-element list [n], got {show(st)}")
        storage = st[0]
    else:
        storage = needed + spec.get("tail", 0)
    if storage * itemsize > MAX_ELEMENTS:
        raise ValueError(f"the storage is {human_bytes(storage * itemsize)} ({magnitude(storage)} elements); "
                         "at most 2^62 bytes")
    layout = Layout(tuple(shape), strides, offset, storage)
    problem = layout.check()
    if problem:
        raise ValueError(problem)
    return layout


def magnitude(v: int) -> str:
    """A huge int, readably: 1e+18, or 2^k past what a float holds."""
    return f"{float(v):.3g}" if v.bit_length() < 1000 else f"over 2^{v.bit_length() - 1}"


def human_bytes(n: int) -> str:
    """1536 -> '1.5 KiB', for sizes people read in an error (exact Python int in, no overflow)."""
    if n < 1024:
        return f"{n} B"
    if n.bit_length() > 1000:
        return f"over 2^{n.bit_length() - 1} B"
    k = min((n.bit_length() - 1) // 10, 6)
    return f"{n / 1024 ** k:.1f} {'KMGTPE'[k - 1]}iB"


def _derived_strides(shape: tuple[int, ...], transposed: bool, step: int, gap: int) -> tuple[int, ...]:
    ndim = len(shape)
    order = list(range(ndim))
    if transposed:
        if ndim < 2:
            raise ValueError("'transposed' needs at least 2 dims")
        order[-1], order[-2] = order[-2], order[-1]
    perm = [max(shape[i], 1) for i in order]  # storage dims, outermost first
    st = [0] * ndim
    acc = step
    for k in reversed(range(ndim)):
        st[k] = acc
        acc = perm[k] * step + gap if k == ndim - 1 else acc * perm[k]
    strides = [0] * ndim
    for k, i in enumerate(order):
        strides[i] = st[k]
    return tuple(strides)


def source_positions(layout: Layout, out_shape: tuple[int, ...], flat: np.ndarray) -> np.ndarray | slice:
    """Storage positions of an input's elements feeding output elements `flat` (broadcasting)."""
    if layout.shape == tuple(out_shape):
        if layout.is_contiguous and isinstance(flat, slice):
            return flat
        return layout.range_index(flat.start, flat.stop) if isinstance(flat, slice) else layout.storage_index(flat)
    idx = np.arange(flat.start, flat.stop) if isinstance(flat, slice) else np.asarray(flat, dtype=np.int64)
    coords = np.unravel_index(idx, out_shape) if out_shape else ()
    pos = np.full(idx.shape, layout.offset, dtype=np.int64)
    lead = len(out_shape) - len(layout.shape)
    for k, (size, stride) in enumerate(zip(layout.shape, layout.strides)):
        if size != 1:
            pos += coords[lead + k] * stride
    return pos
