"""Tensor layout as aclCreateTensor sees it: a view (shape, strides, offset) over a storage buffer.

All numbers are in elements, as in the ACL API. Logical element i of the view
(row-major order) lives at storage index offset + sum(coord_k * stride_k).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Layout:
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    storage_size: int

    @staticmethod
    def contiguous(shape: tuple[int, ...]) -> "Layout":
        return Layout(tuple(shape), packed_strides(shape), 0, math.prod(shape))

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
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
        if self.numel == 0:
            return None
        last = self.offset + sum((d - 1) * s for d, s in zip(self.shape, self.strides))
        if last >= self.storage_size:
            return f"view reaches storage index {last} but storage holds {self.storage_size} elements"
        return None

    def to_json(self) -> dict:
        return {"shape": list(self.shape), "strides": list(self.strides), "offset": self.offset,
                "storage_shape": [self.storage_size]}


def packed_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(strides))
