"""The Split family (docs/families.md): an input split in halves along the axis an int64 attribute names."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

from .base import Geometry, Rows, Shapes


@dataclass(frozen=True)
class Split(Rows):
    """x split in halves along the axis an int64 attribute names (SwiGluGrad's A and B; GeGluBackward's).

    The driver x is cut as (A1, R, A0) at that axis (R = its size, even); a block is one a1 index, so both
    halves of every element are in it: [:, :R/2, :] is A, [:, R/2:, :] is B. The tensors in `halves` (yGrad,
    gelu) have x's shape with the axis halved and arrive as (k, R/2, A0); every other tensor has x's shape and
    arrives (or is returned) as (k, R, A0). No output is a sum: each element is rounded once from float32."""

    axes: Callable[[Shapes, Mapping], tuple[int, int]] = lambda shapes, attrs: (0, 0)  # (unused: `dim`'s)
    halves: tuple[str, ...] = ()
    dim: str = "dim"
    row_sums: bool = False  # (its elements sum other terms than a row's: Rows.relief_terms)
    name: str = "split"
    shared_errors: bool = False

    @property
    def own(self) -> tuple[str, ...]:
        return self.halves

    def split_axis(self, shape: tuple[int, ...], attrs: Mapping) -> int:
        """The split axis of a driver of this shape, `dim` counted from the end where negative."""
        dim = int(attrs[self.dim])
        axis = dim + len(shape) if dim < 0 else dim
        if not 0 <= axis < len(shape):
            raise ValueError(f"{self.dim} = {dim} is outside a {len(shape)}-d {self.driver}")
        return axis

    def halved(self, shape: tuple[int, ...], attrs: Mapping) -> tuple[int, ...]:
        axis = self.split_axis(shape, attrs)
        return (*shape[:axis], shape[axis] // 2, *shape[axis + 1:])

    def default_shapes(self, shape: tuple[int, ...], attrs: Mapping, names: tuple[str, ...]) -> dict:
        """The halves x's shape with `dim` halved, the rest x's."""
        own = {self.driver: tuple(shape), **(self.shapes(tuple(shape), attrs) if self.shapes else {})}
        try:
            half = self.halved(tuple(shape), attrs)
        except (KeyError, TypeError, ValueError):  # (a dim out of range: the contract refuses the case)
            half = tuple(shape)
        return {n: own.get(n, half if n in self.halves else tuple(shape)) for n in (*names, *own)}

    def driver_axis(self, shapes: Shapes, attrs: Mapping) -> tuple[tuple[int, ...], int] | str:
        """(the driver's shape, the axis `dim` names), or why there is none (a null driver, a dim out of range)."""
        if self.driver not in shapes:
            return f"the driver {self.driver} is null"
        drv = tuple(shapes[self.driver])
        try:
            return drv, self.split_axis(drv, attrs)
        except (KeyError, TypeError, ValueError) as exc:
            return str(exc)

    def shape_problem(self, op, shapes: Shapes, attrs: Mapping) -> str | None:
        """Why the shapes are not x's, even along `dim`, and x's with `dim` halved for the halves."""
        found = self.driver_axis(shapes, attrs)
        if isinstance(found, str):
            return found
        drv, axis = found
        if drv[axis] % 2:
            return f"{self.driver} has {drv[axis]} elements along {self.dim} = {attrs[self.dim]}; the split family needs an even number"
        half = self.halved(drv, attrs)
        for t in op.tensors:
            if t.name not in shapes or t.name == self.driver:
                continue
            s, want = tuple(shapes[t.name]), half if t.name in self.halves else drv
            if s != want:
                what = "with " + self.dim + " halved" if t.name in self.halves else "shape"
                return f"{t.name} has shape {list(s)}; the split family needs the {self.driver}'s {what}, {list(want)}"
        return None

    def geometry(self, shapes: Shapes, attrs: Mapping) -> Geometry:
        shape = tuple(shapes[self.driver])
        axis = self.split_axis(shape, attrs)
        return Geometry(math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:]))

    def own_geometry(self, name: str, shapes: Shapes, attrs: Mapping, geo: Geometry) -> Geometry | None:
        """A half's blocks: the same a1 index of a tensor half as long along `dim`."""
        return Geometry(geo.a1, geo.r // 2, geo.a0) if name in self.halves else None
