"""The Classes family (docs/families.md): an (N, C, *spatial) driver whose class axis 1 is a row at every (n, s)
position, beside per-position tensors of the driver's shape without that axis (NLLLoss2dBackward's target).

A Rows family in its cut: axes (1, 2), so a block is one sample n, (C, S) with S the spatial positions, and every
class of every position of the sample lies in it. What Rows cannot say: a tensor of shape (N, *spatial) (one value
per position, a target or a per-position gradOutput) does not broadcast to (N, C, *spatial), and a (C,) weight
would broadcast along the last spatial axis, not C. So `positions` are cut from their own storage as (k, 1, S)
(where one holds a single element, it broadcasts as any one-element input does: (k, C, S)), and `whole` inputs (C
elements or one, any shape: the op_api reads them flat) arrive as (k, 1, numel) for every block.

Why a family and not the op: which tensors are cut from their own shape and which are read whole is what gen,
emulate and verify ask a family; a class axis beside per-position labels is the same question for every loss of
its kind (NLLLoss2d, CrossEntropy over K-dim inputs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

from .base import Geometry, Rows, Shapes


@dataclass(frozen=True)
class Classes(Rows):
    """Samples of an (N, C, *spatial) driver as blocks (k, C, S) (module docstring). positions: inputs of shape
    (N, *spatial), arriving as (k, 1, S); whole: inputs of C elements or one, arriving as (k, 1, numel)."""

    axes: Callable[[Shapes, Mapping], tuple[int, int]] = lambda shapes, attrs: (1, 2)
    positions: tuple[str, ...] = ()
    whole: tuple[str, ...] = ()
    row_sums: bool = False  # (its elements sum other terms than a row's: Rows.relief_terms)
    name: str = "classes"

    @property
    def own(self) -> tuple[str, ...]:
        return self.positions

    @staticmethod
    def spatial(drv: tuple[int, ...]) -> tuple[int, ...]:
        """The driver's shape without the class axis: a per-position tensor's."""
        return tuple(drv[:1]) + tuple(drv[2:])

    def default_shapes(self, shape: tuple[int, ...], attrs: Mapping, names: tuple[str, ...]) -> dict:
        """The op's own `shapes` first; positions the driver's without axis 1, whole inputs (C,), the rest the
        driver's."""
        own = {self.driver: tuple(shape), **(self.shapes(tuple(shape), attrs) if self.shapes else {})}
        return {n: own.get(n, self.spatial(shape) if n in self.positions else tuple(shape[1:2]) if n in self.whole
                           else tuple(shape)) for n in (*names, *own)}

    def shape_problem(self, op, shapes: Shapes, attrs: Mapping) -> str | None:
        """Why the shapes are not a driver of 2 dims or more, positions of its shape without axis 1 (or one
        element), whole inputs of C elements or one, and the rest the driver's shape."""
        if self.driver not in shapes:
            return f"the driver {self.driver} is null"
        drv = tuple(shapes[self.driver])
        if len(drv) < 2:
            return f"{self.driver} has {len(drv)} dims; the classes family needs (N, C, ...)"
        for t in op.tensors:
            if t.name not in shapes or t.name == self.driver:
                continue
            s = tuple(shapes[t.name])
            n = math.prod(s)
            if t.name in self.positions:
                ok, want = s == self.spatial(drv) or n == 1, f"{list(self.spatial(drv))} or one element"
            elif t.name in self.whole:
                ok, want = n in (drv[1], 1), f"{drv[1]} elements (one per class) or one"
            else:
                ok, want = s == drv or (t.role == "input" and n == 1), f"the {self.driver}'s shape {list(drv)}"
            if not ok:
                return f"{t.name} has shape {list(s)}; the classes family needs {want}"
        return None

    def own_geometry(self, name: str, shapes: Shapes, attrs: Mapping, geo: Geometry) -> Geometry | None:
        """A per-position tensor's blocks: sample n's S values, (1, S); one element broadcasts (None)."""
        if name not in self.positions or math.prod(shapes[name]) != geo.a1 * geo.a0:
            return None
        return Geometry(geo.a1, 1, geo.a0)
