"""The Scatter family (docs/families.md): rows of a driver added into the output rows an index names.

EmbeddingDenseBackward: out[w, :] = the sum of grad[m, :] over the rows m whose indices[m] is w. The driver
(..., D) is cut into M = numel / D rows of R = D elements (the Rows family's (A1, R, A0) with A1 = M, A0 = 1);
the index is a per-row input (one value per row, any shape of M elements); the output, of shape
(targets, D) from an attribute, is an across-rows output whose partial over the rows given has the output's
own shape: each row's values added into row indices[m]. Unlike Rows' across-rows outputs it is not
column-local in the driver's rows (an element depends on the rows that hit its row only), and the terms an
element gets are counted per element (`across_terms`): its allowance comes from its own terms.

A Rows family in every other respect: functions receive the driver's rows as (k, D, 1), the index as (k, 1, 1),
and the per-row `count` value (how many rows of the whole case share the row's index, for a mean over the
duplicates), which needs the whole index tensor: read once per case, M integers (never more than the driver).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from .base import Rows, Shapes
from ...tensor.storage import CHUNK


def _last_axis(driver: str) -> Callable[[Shapes, Mapping], tuple[int, int]]:
    def axes(shapes: Shapes, attrs: Mapping) -> tuple[int, int]:
        ndim = len(shapes[driver])
        return max(ndim - 1, 0), ndim
    return axes


def as_rows(index) -> np.ndarray:
    """Index values as int64 (a float index truncated toward zero, as a C cast does; Fractions too)."""
    a = np.asarray(index)
    if a.dtype == object:
        return np.array([int(v) for v in a.reshape(-1)], dtype=np.int64).reshape(a.shape)
    return a.astype(np.int64) if a.dtype.kind in "iub" else np.trunc(a).astype(np.int64)


@dataclass(frozen=True)
class Scatter(Rows):
    """Rows of `driver` (..., D) added into output rows `index` names; the output (attrs[targets], D).

    index: the per-row input holding each row's output row. targets: the attribute giving the output's rows.
    ignored: an attribute naming an output row no row is added to (paddingIdx: that row stays zero), or None.
    An index outside [0, targets) adds nothing (the kernels' own bounds check). count: the name under which
    functions receive, per row, how many rows of the whole case share its index."""

    axes: Callable[[Shapes, Mapping], tuple[int, int]] = None  # (the driver's last axis: set in __post_init__)
    index: str = "indices"
    targets: str = "numWeights"
    ignored: str | None = None
    count: str = "indexCount"
    term_roundings: int = 0  # (a term is a driver element, widened exactly)
    row_sums: bool = False  # (its elements sum other terms than a row's: Rows.relief_terms)
    name: str = "scatter"
    column_local: bool = False

    def __post_init__(self) -> None:
        if self.axes is None:
            object.__setattr__(self, "axes", _last_axis(self.driver))

    def width(self, attrs: Mapping) -> int:
        return int(attrs[self.targets])

    def kept(self, index: np.ndarray, attrs: Mapping) -> np.ndarray:
        """Which of these index values add their row somewhere: inside [0, targets) and not the ignored row."""
        keep = (index >= 0) & (index < self.width(attrs))
        if self.ignored is not None:
            keep &= index != int(attrs[self.ignored])
        return keep

    def default_shapes(self, shape: tuple[int, ...], attrs: Mapping, names: tuple[str, ...]) -> dict:
        """The index takes the driver's axes but the last (one value per row), the output (targets, D)."""
        shape = tuple(shape)
        own = {self.driver: shape, self.index: shape[:-1] or (1,),
               **{n: (self.width(attrs), shape[-1] if shape else 1) for n in self.across_rows}}
        return {**{n: shape for n in names}, **own}

    def shape_problem(self, op, shapes: Shapes, attrs: Mapping) -> str | None:
        """Why the shapes are not a driver (..., D), an index of one value per row and an output (targets, D)."""
        if self.driver not in shapes:
            return f"the driver {self.driver} is null"
        drv = tuple(shapes[self.driver])
        if not drv:
            return f"the {self.driver} is 0-d; the scatter family needs (..., D)"
        rows = math.prod(drv[:-1])
        if self.index in shapes and math.prod(shapes[self.index]) != rows:
            return (f"{self.index} has {math.prod(shapes[self.index])} values; the scatter family needs one per row "
                    f"of {self.driver} ({rows})")
        for name in self.across_rows:
            want = (self.width(attrs), drv[-1])
            if name in shapes and tuple(shapes[name]) != want:
                return f"{name} has shape {list(shapes[name])}; the scatter family needs [{self.targets}, D] = {list(want)}"
        return None

    def partial_shape(self, t: Mapping, piece: tuple[int, ...]) -> tuple[int, ...]:
        """An across-rows output's partial over the rows given: the output's own shape."""
        return (self.width(t), piece[1])

    def across_terms(self, blocks: Mapping[str, np.ndarray], attrs: Mapping, rows: int) -> np.ndarray:
        """Per output element, how many of these rows are added into it (its row's hits, every column alike)."""
        index = as_rows(blocks[self.index]).reshape(-1)
        hits = np.bincount(index[self.kept(index, attrs)], minlength=self.width(attrs))
        return np.repeat(hits, blocks[self.driver].shape[1])

    def row_values(self, m, files: dict, blocks: Mapping[str, np.ndarray]) -> dict:
        """`count`: per row, how many rows of the whole case share its index (1 where it adds nothing)."""
        if self.index not in blocks:
            return {}
        counts = self._counts(m, files)
        index = as_rows(blocks[self.index]).reshape(-1)
        inside = (index >= 0) & (index < counts.size)
        per_row = np.where(inside, counts[np.where(inside, index, 0)], 1) if counts.size else np.ones_like(index)
        return {self.count: per_row.reshape(-1, 1, 1)}

    def _counts(self, m, files: dict) -> np.ndarray:
        """Rows per index value over the whole case (bincount of the index, read a chunk at a time). Kept for the
        index file it was read from: a stage reads a case's blocks chunk after chunk through one open file."""
        source = files[self.index]
        if _LAST_COUNTS[0] is source:
            return _LAST_COUNTS[1]
        attrs = m.attribute_values
        entry = next(t for t in m.inputs if t.name == self.index)
        width = self.width(attrs)
        counts = np.zeros(width, dtype=np.int64)
        numel = entry.layout.numel
        for s in range(0, numel, CHUNK):
            index = as_rows(source.read(entry.layout, s, min(numel, s + CHUNK))).reshape(-1)
            counts += np.bincount(index[(index >= 0) & (index < width)], minlength=width)
        _LAST_COUNTS[:] = [source, counts]
        return counts


_LAST_COUNTS: list = [None, None]  # (the index file read last, its counts): one case at a time per process
