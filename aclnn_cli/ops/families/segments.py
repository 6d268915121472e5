"""The Segments family (docs/families.md): consecutive runs along one axis of a driver each summed into one output
position of that axis (RepeatInterleaveGrad, the gradient of repeat_interleave).

A Split family in its cut: the driver is cut at the axis an int64 attribute names into blocks (A1, R, A0), so every
run of one output element lies in one block. Instead of halves, the family has `segments` outputs of the driver's
shape with that axis S long, cut from their own storage as (A1, S, A0) (S = the output's elements over A1 A0: the
doc lets out take any shape of that size), and a `counts` input (repeats: one run length per output position, or one
for all) read whole for every block, arriving as (k, 1, n). Functions receive beside them `segments`, (k, 1, 1):
S, which a single run length does not give where the driver is empty along the axis, and `blocks`, the case's A1.

Why a family and not the op: the cut (which tensors are whole, which are read from their own shape) is what gen,
emulate and verify ask a family, and a segment sum along an axis is the same question for every op of its kind
(a segmented reduce, an embedding bag's sum mode along an axis).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ...errors import UserError
from .base import Geometry, Shapes
from .split import Split


@dataclass(frozen=True)
class Segments(Split):
    """Runs of the driver along `dim` summed into `segments` outputs (module docstring). counts: the run lengths
    input (1-d of S values, or one value for all runs); segments: the outputs, S long along `dim`."""

    counts: str = "repeats"
    segments: tuple[str, ...] = ()
    name: str = "segments"

    @property
    def own(self) -> tuple[str, ...]:
        return self.segments

    @property
    def whole(self) -> tuple[str, ...]:
        return (self.counts,)

    def runs(self, shapes: Shapes, attrs: Mapping) -> int:
        """S, the output positions along `dim`: the counts' length where it holds more than one, else the segments
        output's elements over the driver's A1 A0 (its size along `dim` where that product is 0)."""
        n = math.prod(shapes.get(self.counts, (1,)))
        if n > 1:
            return n
        drv = tuple(shapes[self.driver])
        axis = self.split_axis(drv, attrs)
        outer = math.prod(drv[:axis]) * math.prod(drv[axis + 1:])
        out = tuple(shapes[self.segments[0]]) if self.segments and self.segments[0] in shapes else drv
        if outer:
            return math.prod(out) // outer
        return out[axis] if len(out) == len(drv) else 0

    def case_shapes(self, op, shape: tuple[int, ...], attrs: Mapping, given: Mapping[str, tuple[int, ...]]) -> dict:
        """The counts (R,) unless given; the segments outputs the driver's shape with `dim` the counts' length (one
        count: the driver's shape, runs of one, unless given)."""
        shape = tuple(shape)
        shapes = {self.driver: shape, **{n: tuple(s) for n, s in given.items()}}
        try:
            axis = self.split_axis(shape, attrs)
        except (KeyError, TypeError, ValueError):  # (a dim out of range: the contract refuses the case)
            return {**{t.name: shape for t in op.tensors}, **shapes}
        shapes.setdefault(self.counts, (shape[axis],))
        n = math.prod(shapes[self.counts])
        along = n if n > 1 else shape[axis]
        for name in self.segments:
            shapes.setdefault(name, (*shape[:axis], along, *shape[axis + 1:]))
        return {**{t.name: shape for t in op.tensors}, **shapes}

    def shape_problem(self, op, shapes: Shapes, attrs: Mapping) -> str | None:
        """Why the shapes are not a driver, counts of S values (or one) and segments outputs of A1 S A0 elements."""
        found = self.driver_axis(shapes, attrs)
        if isinstance(found, str):
            return found
        drv, axis = found
        outer, r = math.prod(drv[:axis]) * math.prod(drv[axis + 1:]), drv[axis]
        s = self.runs(shapes, attrs)
        single = math.prod(shapes.get(self.counts, (1,))) == 1
        for name in self.segments:
            if name in shapes and math.prod(shapes[name]) != outer * s:
                return (f"{name} has {math.prod(shapes[name])} elements; the segments family needs {outer} x {s} "
                        f"(the {self.driver}'s elements outside {self.dim}, times one per run)")
            if single and s and r % s:
                return (f"{name} holds {s} runs along {self.dim}, which do not divide the {self.driver}'s {r}: one "
                        f"{self.counts} value is the length of every run")
        for t in op.tensors:
            if t.name in shapes and t.name not in (self.driver, self.counts, *self.segments) and tuple(shapes[t.name]) != drv:
                return f"{t.name} has shape {list(shapes[t.name])}; the segments family needs the {self.driver}'s {list(drv)}"
        return None

    def own_geometry(self, name: str, shapes: Shapes, attrs: Mapping, geo: Geometry) -> Geometry | None:
        """A segments output's blocks: the same a1 index, S long along `dim`."""
        return Geometry(geo.a1, self.runs(shapes, attrs), geo.a0) if name in self.segments else None

    def block_values(self, m, b0: int, b1: int) -> dict:
        """`segments`: S, and `blocks`: the case's A1 (a kernel's tiling splits them across cores), (k, 1, 1) each."""
        shapes = {t.name: tuple(t.layout.shape) for t in m.tensors}
        attrs = m.attribute_values
        k = (b1 - b0, 1, 1)
        return {"segments": np.full(k, self.runs(shapes, attrs), dtype=np.int64),
                "blocks": np.full(k, self.geometry(shapes, attrs).a1, dtype=np.int64)}


def run_starts(counts: np.ndarray, r: int, s: int) -> np.ndarray:
    """Each run's first position along the axis (S + 1 values, the last R) from a block's counts (n values: one per
    run, or one for every run). A UserError (gen names the case and its repeats) where they are negative or do not
    add up to R: the doc's constraint, which the device does not check (its result there is undefined), so no golden
    can be made."""
    counts = np.asarray(counts, np.int64).reshape(-1)
    if counts.size == 1 and s != 1:
        counts = np.full(s, counts[0] if s else 0, np.int64)
    if counts.size != s:
        raise UserError(f"{counts.size} run lengths for {s} output positions", key="inputs.repeats")
    if (counts < 0).any():
        raise UserError(f"a negative run length {int(counts.min())}: repeats must be natural numbers",
                        key="inputs.repeats")
    if int(counts.sum()) != r:
        raise UserError(f"the run lengths add up to {int(counts.sum())}, not the axis' {r}", key="inputs.repeats")
    return np.concatenate([[0], np.cumsum(counts)])
