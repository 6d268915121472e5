"""The Channels family (docs/families.md): an (N, C, ...) driver reduced over N and the spatial axes, axis 1 kept."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

from .base import Geometry, Rows, Shapes


@dataclass(frozen=True)
class Channels(Rows):
    """Each output element depends on whole channels of the driver (N, C, *spatial), 2-D or more.

    A block is one channel c: the driver's elements (n, c, s) in (n, s) order, R = N * S, A0 = 1. Every input
    not in `per_row` has the driver's shape and arrives as (k, R, 1); a `per_row` tensor holds one value per
    channel, shape (C,): an input (weight, the saved statistics) arrives as (k, 1, 1), an output (gradWeight,
    gradBias: a sum over the channel) comes back as (k, 1, 1). Other outputs have the driver's shape."""

    axes: Callable[[Shapes, Mapping], tuple[int, int]] = lambda shapes, attrs: (0, 0)  # (unused: the geometry's)
    name: str = "channels"

    def default_shapes(self, shape: tuple[int, ...], attrs: Mapping, names: tuple[str, ...]) -> dict:
        """Per-channel tensors (C,), the rest the driver's shape."""
        own = {self.driver: tuple(shape), **(self.shapes(tuple(shape), attrs) if self.shapes else {})}
        channel = tuple(shape[1:2])
        return {n: own.get(n, channel if n in self.per_row else tuple(shape)) for n in (*names, *own)}

    def shape_problem(self, op, shapes: Shapes, attrs: Mapping) -> str | None:
        """Why the shapes are not the driver's (N, C, ...) and (C,) per channel (None: they are)."""
        if self.driver not in shapes:
            return f"the driver {self.driver} is null"
        drv = tuple(shapes[self.driver])
        if len(drv) < 2:
            return f"the {self.driver} has {len(drv)} dimensions; the channels family needs (N, C, ...)"
        for t in op.tensors:
            if t.name not in shapes or t.name == self.driver:
                continue
            s = tuple(shapes[t.name])
            want = (drv[1],) if t.name in self.per_row else drv
            if s != want:
                what = f"one value per channel, {list(want)}" if t.name in self.per_row else f"the {self.driver}'s shape {list(drv)}"
                return f"{t.name} has shape {list(s)}; the channels family needs {what}"
        return None

    def geometry(self, shapes: Shapes, attrs: Mapping) -> Geometry:
        shape = tuple(shapes[self.driver])
        if len(shape) < 2:
            raise ValueError(f"a {len(shape)}-d {self.driver} has no channel axis")
        n, c, inner = shape[0], shape[1], math.prod(shape[2:])
        return Geometry(c, n * inner, 1, lead=n if n > 1 else 1)  # (one sample: channels are ranges)
