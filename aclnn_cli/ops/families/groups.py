"""The Groups family (docs/families.md): groups of channels over every sample (GroupNorm)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

from .base import Geometry, Rows, Shapes


@dataclass(frozen=True)
class Groups(Rows):
    """Each output element depends on whole groups of channels over every sample (GroupNorm).

    The driver holds N * C * HxW elements in (n, c, hw) order (any shape of that size: the API takes N, C, HxW and
    group as int64 attributes, named by `n`, `c`, `hxw`, `group`). A block is one group g: the elements
    (n, c, hw) with c in g, in (n, c, hw) order, R = N * D * HxW (D = C / group). Every driver-shaped tensor
    arrives as (k, R, 1); a `per_group` tensor (mean, rstd: N * group values, (n, g) order) as (k, N, 1); a
    `per_channel` tensor (gamma, and the outputs summed over N and HxW: gradGamma, gradBeta) as (k, D, 1).

    `channels_last` (InstanceNormGrad: no size attributes, an NDHWC driver): N is the driver's first axis, C its
    last, HxW the product of the axes between, and every channel is a group of its own (D = 1); the driver's
    elements lie in (n, hw, c) order, so block c gathers them C apart, still in (n, hw) order (`Geometry`'s
    channels_last). A per-group tensor holds N * C values in (n, c) order (any shape: [N, 1, 1, 1, C])."""

    axes: Callable[[Shapes, Mapping], tuple[int, int]] = lambda shapes, attrs: (0, 0)  # (unused: the attributes')
    per_group: tuple[str, ...] = ()
    per_channel: tuple[str, ...] = ()
    n: str = "N"
    c: str = "C"
    hxw: str = "HxW"
    group: str = "group"
    channels_last: bool = False
    name: str = "groups"

    @property
    def own(self) -> tuple[str, ...]:
        return self.per_group + self.per_channel

    def sizes(self, attrs: Mapping, shape: tuple[int, ...] = ()) -> tuple[int, int, int, int]:
        """(N, C, HxW, group) as ints: the attributes', or with `channels_last` the driver's `shape`'s."""
        if self.channels_last:
            if len(shape) < 2:
                raise ValueError(f"a {len(shape)}-d {self.driver} has no channel axis (N, ..., C)")
            return shape[0], shape[-1], math.prod(shape[1:-1]), shape[-1]
        return tuple(int(attrs[k]) for k in (self.n, self.c, self.hxw, self.group))  # type: ignore[return-value]

    def _sizes_of(self, shapes: Shapes, attrs: Mapping) -> tuple[int, int, int, int]:
        return self.sizes(attrs, tuple(shapes.get(self.driver, ())))

    def default_shapes(self, shape: tuple[int, ...], attrs: Mapping, names: tuple[str, ...]) -> dict:
        """per_group (N, group), per_channel (C,), the rest the driver's."""
        own = {self.driver: tuple(shape), **(self.shapes(tuple(shape), attrs) if self.shapes else {})}
        try:
            n, c, _, g = self.sizes(attrs, tuple(shape))
        except (KeyError, TypeError, ValueError):
            n = c = g = 0
        return {k: own.get(k, (n, g) if k in self.per_group else (c,) if k in self.per_channel else tuple(shape))
                for k in (*names, *own)}

    def shape_problem(self, op, shapes: Shapes, attrs: Mapping) -> str | None:
        """Why the shapes and N, C, HxW, group do not describe groups (None: they do)."""
        if self.driver not in shapes:
            return f"the driver {self.driver} is null"
        try:
            n, c, hxw, g = self._sizes_of(shapes, attrs)
        except (KeyError, TypeError, ValueError) as exc:
            return f"N, C, HxW and group must be integers: {exc}"
        drv = tuple(shapes[self.driver])
        if min(n, c, hxw) < 0 or g <= 0 or c % g:
            return f"C = {c} is not split into group = {g} groups (N = {n}, HxW = {hxw})"
        if math.prod(drv) != n * c * hxw:
            return f"{self.driver} has {math.prod(drv)} elements, not N * C * HxW = {n * c * hxw}"
        for t in op.tensors:
            if t.name not in shapes or t.name == self.driver:
                continue
            s = tuple(shapes[t.name])
            if t.name in self.own:
                want = n * g if t.name in self.per_group else c
                if math.prod(s) != want:
                    return f"{t.name} has {math.prod(s)} elements; the groups family needs {want}"
            elif s != drv:
                return f"{t.name} has shape {list(s)}; the groups family needs the {self.driver}'s shape {list(drv)}"
        return None

    def geometry(self, shapes: Shapes, attrs: Mapping) -> Geometry:
        n, c, hxw, g = self._sizes_of(shapes, attrs)
        if g <= 0 or c % g:
            raise ValueError(f"C = {c} is not split into group = {g} groups")
        if self.channels_last:
            return Geometry(g, n * hxw, 1, lead=max(n, 1), channels_last=True)
        return Geometry(g, n * (c // g) * hxw, 1, lead=n if n > 1 else 1)

    def own_geometry(self, name: str, shapes: Shapes, attrs: Mapping, geo: Geometry) -> Geometry | None:
        """A per-group tensor's block g: its N values (n, g); a per-channel one's: its D channels of group g."""
        n, c, _, g = self._sizes_of(shapes, attrs)
        if name in self.per_group:
            return Geometry(g, n, 1, lead=n if n > 1 else 1)
        return Geometry(g, c // g, 1) if name in self.per_channel else None
