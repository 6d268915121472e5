"""The Channels family (docs/families.md): an (N, C, ...) driver reduced over N and the spatial axes, axis 1 kept."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from .base import Geometry, Rows, Shapes


@dataclass(frozen=True)
class Channels(Rows):
    """Each output element depends on whole channels of the driver (N, C, *spatial), 2-D or more.

    A block is one channel c: the driver's elements (n, c, s) in (n, s) order, R = N * S, A0 = 1. Every input
    not in `per_row` has the driver's shape and arrives as (k, R, 1); a `per_row` tensor holds one value per
    channel, shape (C,): an input (weight, the saved statistics) arrives as (k, 1, 1), an output (gradWeight,
    gradBias: a sum over the channel) comes back as (k, 1, 1). Other outputs have the driver's shape.

    `shared` (PReLU's weight): a per-channel input that may hold one value for every channel instead. Where it
    does, or where the driver has fewer than 2 dims, the whole driver is one block (every axis reduced, the
    elements in flat order) and every per-channel tensor holds one value; elsewhere a per-channel tensor may have
    any shape of C elements (the op reads it flat). `precision`: the name under which the functions receive the
    driver dtype's significand bits (24, 11, 8), (k, 1, 1) int64, for a kernel that computes in the inputs' own
    dtype (PReLU's 16-bit products); a case's float values cannot show it. `bits_of`: tensors whose dtypes'
    significand bits the functions receive as f"{name}Bits", (k, 1, 1) int64, 0 for a null one (an op_api that
    computes in float16 only where every input is float16: BatchNormElemtBackward). `whole`: inputs of any shape
    (1-8 dims; (1,) by default) read whole for every block, arriving as (k, 1, numel) (a count tensor the op sums:
    BatchNormElemtBackward's counter)."""

    axes: Callable[[Shapes, Mapping], tuple[int, int]] = lambda shapes, attrs: (0, 0)  # (unused: the geometry's)
    name: str = "channels"
    shared: str | None = None
    precision: str | None = None
    bits_of: tuple[str, ...] = ()
    whole: tuple[str, ...] = ()

    def one_channel(self, shapes: Shapes) -> bool:
        """Whether the whole driver is one block (the `shared` input holds one value, or no axis 1)."""
        if self.shared is None or self.driver not in shapes:
            return False
        return len(shapes[self.driver]) < 2 or (self.shared in shapes and math.prod(shapes[self.shared]) == 1)

    def default_shapes(self, shape: tuple[int, ...], attrs: Mapping, names: tuple[str, ...]) -> dict:
        """Per-channel tensors (C,) ((1,) for a driver of fewer than 2 dims), the rest the driver's shape."""
        own = {self.driver: tuple(shape), **(self.shapes(tuple(shape), attrs) if self.shapes else {})}
        channel = tuple(shape[1:2]) if len(shape) > 1 or self.shared is None else (1,)
        return {n: own.get(n, (1,) if n in self.whole else channel if n in self.per_row else tuple(shape))
                for n in (*names, *own)}

    def case_shapes(self, op, shape: tuple[int, ...], attrs: Mapping, given: Mapping[str, tuple[int, ...]]) -> dict:
        """As Rows'; a per-channel output a case does not give takes the `shared` input's shape where that holds one
        value (PReLU's gradWeight: weight's shape)."""
        shapes = super().case_shapes(op, shape, attrs, given)
        if self.shared in given and math.prod(given[self.shared]) == 1:
            for name in self.per_row:
                if name not in given and any(t.name == name and t.role == "output" for t in op.tensors):
                    shapes[name] = tuple(given[self.shared])
        return shapes

    def shape_problem(self, op, shapes: Shapes, attrs: Mapping) -> str | None:
        """Why the shapes are not the driver's (N, C, ...) and (C,) per channel (None: they are)."""
        if self.driver not in shapes:
            return f"the driver {self.driver} is null"
        drv = tuple(shapes[self.driver])
        single = self.one_channel(shapes)
        if len(drv) < 2 and not single:
            return f"the {self.driver} has {len(drv)} dimensions; the channels family needs (N, C, ...)"
        for t in op.tensors:
            if t.name not in shapes or t.name == self.driver or t.name in self.whole:
                continue
            s = tuple(shapes[t.name])
            if t.name in self.per_row and self.shared is not None:
                count = 1 if single else drv[1]
                if math.prod(s) != count:
                    return f"{t.name} has shape {list(s)}; the channels family needs {count} value(s), one per channel"
                continue
            want = (drv[1],) if t.name in self.per_row else drv
            if s != want:
                what = f"one value per channel, {list(want)}" if t.name in self.per_row else f"the {self.driver}'s shape {list(drv)}"
                return f"{t.name} has shape {list(s)}; the channels family needs {what}"
        return None

    def geometry(self, shapes: Shapes, attrs: Mapping) -> Geometry:
        shape = tuple(shapes[self.driver])
        if self.one_channel(shapes):
            return Geometry(1, math.prod(shape), 1)
        if len(shape) < 2:
            raise ValueError(f"a {len(shape)}-d {self.driver} has no channel axis")
        n, c, inner = shape[0], shape[1], math.prod(shape[2:])
        return Geometry(c, n * inner, 1, lead=n if n > 1 else 1)  # (one sample: channels are ranges)

    def block_values(self, m, b0: int, b1: int) -> dict:
        """`precision` (when named): the driver dtype's significand bits for every block of [b0, b1); `bits_of`:
        each named tensor's (0 where it is null)."""
        out = {}
        if self.precision is not None:
            bits = next(t.dtype.precision for t in m.tensors if t.name == self.driver)
            out[self.precision] = np.full((b1 - b0, 1, 1), bits, dtype=np.int64)
        for t in m.tensors:
            if t.name in self.bits_of:
                out[f"{t.name}Bits"] = np.full((b1 - b0, 1, 1), 0 if t.null else t.dtype.precision, dtype=np.int64)
        return out
