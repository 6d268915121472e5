"""What every family shares: the geometry of blocks, the Elementwise default, and Rows, on which the others build.

`Elementwise`: each output element depends only on the same element of each input (inputs broadcast to the
output); the functions receive flat pieces of any length. `Rows`: an output element depends on a whole row along
the reduction axes. The driver tensor's shape is cut as (A1, R, A0): R = the product of the reduced axes [lo, hi),
A1 of the axes before, A0 of those after (the kernels' own AR / ARA tiling). A "block" is one a1 index: R * A0
consecutive logical elements. The pipeline hands the functions whole blocks, never part of one: every input
arrives as an array of shape (k, R, A0) (numpy-broadcast to the driver's shape), an input listed in `per_row`
(one value per a1: rstd, mean, NLL's target) as (k, 1, 1), and attributes as for elementwise ops. Row outputs
come back as (k, R, A0); an output listed in `across_rows` (dgamma, gradWeight, gradBias: a sum over every row)
comes back as the block's partial sum, shape (1, R, A0), and the pipeline adds the partials of every block.
A tensor the family names in `own` is cut into blocks of its own shape (`own_geometry`).

The geometry is integer arithmetic on shapes (docs/families.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

Shapes = Mapping[str, tuple[int, ...]]

def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy/aclnn broadcast of shapes, or None if they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(ndim):
        dims = {s[k - ndim + len(s)] for s in shapes if k - ndim + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else 1)
    return tuple(out)


@dataclass(frozen=True)
class Geometry:
    """A case's rows: (A1, R, A0) of the driver's shape.

    lead > 1 (the Channels family): the blocks are channels of a driver laid out (lead, A1, inner), R = lead *
    inner, A0 = 1; block c holds the elements (n, c, s) in (n, s) order, so its elements are not one range of
    the driver's flat indices. `positions` and `block_of` translate between the two orders.

    channels_last (the Groups family's instance norm, NDHWC): the driver is laid out (lead, inner, A1) instead, a
    channel's elements C apart; block c still holds (n, s) in that order."""

    a1: int
    r: int
    a0: int
    lead: int = 1
    channels_last: bool = False

    @property
    def block(self) -> int:
        """Logical elements per block (one a1 index): R * A0."""
        return self.r * self.a0

    @property
    def numel(self) -> int:
        return self.a1 * self.r * self.a0

    @property
    def contiguous(self) -> bool:
        """Block b is the driver's flat elements [b * block, (b + 1) * block)."""
        return self.lead == 1 and not (self.channels_last and self.a1 > 1)

    def positions(self, b0: int, b1: int):
        """The driver's flat indices of blocks [b0, b1), in block order: a slice where they are one range."""
        if self.contiguous:
            return slice(b0 * self.block, b1 * self.block)
        inner = self.r // self.lead
        c = np.arange(b0, b1, dtype=np.int64).reshape(-1, 1, 1)
        n = np.arange(self.lead, dtype=np.int64).reshape(1, -1, 1)
        s = np.arange(inner, dtype=np.int64).reshape(1, 1, -1)
        if self.channels_last:
            return (n * (self.a1 * inner) + s * self.a1 + c).reshape(-1)
        return (n * (self.a1 * inner) + c * inner + s).reshape(-1)

    def block_of(self, flat):
        """(block, position inside its block) of the driver's flat indices `flat` (an int64 array)."""
        if self.contiguous:
            return flat // max(self.block, 1), flat % max(self.block, 1)
        inner = max(self.r // self.lead, 1)
        n, rest = flat // (self.a1 * inner), flat % (self.a1 * inner)
        if self.channels_last:
            return rest % self.a1, n * inner + rest // self.a1
        return rest // inner, n * inner + rest % inner


@dataclass(frozen=True)
class Elementwise:
    """out[i] = f(in[i] for each input): any flat piece will do."""

    name: str = "elementwise"
    # What the pipeline asks of a family (each family answers every question; none is asked by name):
    # - element_local: an output element depends on the same element of each input only. Then a case is cut
    #   into flat pieces of any length, split into ranges across workers, compared in batches, and each
    #   element's inputs are known (relief, the report); else into whole blocks (`geometry`).
    element_local: bool = True
    # - inputs_broadcast: every input broadcasts to the output (the contract's shape rule); else the op's
    #   own `shape_rule` and the family's shapes decide.
    inputs_broadcast: bool = True
    # - rounded_once: each output is rounded once from float32 to its own dtype (no compute dtype between,
    #   whose coarser precision would judge it).
    rounded_once: bool = False
    # - shared_errors: one rounding can be shared by many elements (a row sum's), so errors within their
    #   bounds may still lean one way: a failing verdict gets a second look with every element relieved.
    shared_errors: bool = False
    across_rows: tuple[str, ...] = ()
    per_row: tuple[str, ...] = ()
    # - output_like: the input whose shape the output has, the others broadcasting into it and never beyond
    #   (aclnnKlDivBackward's self; with inputs_broadcast False and the op's shape_rule); None: the output has the
    #   inputs' broadcast shape. An input widening it (an API summing the wider result back) is not modelled.
    output_like: str | None = None
    # - own: tensors whose blocks are cut from their own shape (`own_geometry`), not the driver's.
    own = property(lambda self: ())
    # - whole: inputs read whole for every block (a count tensor of any shape), arriving as (k, 1, numel).
    whole = property(lambda self: ())

    def relief_terms(self, geo: Geometry | None) -> int | None:
        """How many terms an element's float32 computation adds, for its relief (judge/comparison.py): none here,
        the formula's own roundings aside."""
        return 0

    def geometry(self, shapes: Shapes, attrs: Mapping) -> Geometry | None:
        return None

    def own_geometry(self, name: str, shapes: Shapes, attrs: Mapping, geo: Geometry) -> Geometry | None:
        return None

    def shape_problem(self, op, shapes: Shapes, attrs: Mapping) -> str | None:
        """Why the family cannot relate these shapes (None: it can). The contract checks the broadcast; with
        `output_like`, inputs widening that input's shape are refused (the result would be summed back to it)."""
        if self.output_like is None or self.output_like not in shapes:
            return None
        like = tuple(shapes[self.output_like])
        wide = broadcast_shape(*(shapes[t.name] for t in op.inputs if t.name in shapes))
        if wide is not None and wide != like:
            return (f"the inputs broadcast to {list(wide)}, wider than {self.output_like} {list(like)}, whose shape "
                    f"{op.output.name} has: the API sums such a result back to it (a reduction aclnn-cli does not model)")
        return None

    def exact_fills(self, op, shapes: Shapes, values: Mapping, dtypes: Mapping) -> dict | str:
        """`fill: exact`'s operand fills (families/exact.py), or why this family has none."""
        return (f"{op.name} is in the {self.name} family; exact fills are for sums of products (the contraction "
                f"and convolution families)")

    def case_tensor(self, op) -> str:
        """The tensor whose dtype and shape a case's `dtype` and `shape` give: the output (`output_like`, whose shape
        the output has)."""
        return self.output_like or op.output.name

    def case_shapes(self, op, shape: tuple[int, ...], attrs: Mapping, given: Mapping[str, tuple[int, ...]]) -> dict:
        """Every tensor's shape from a case's `shape` and the shapes it gives (`given`): the inputs the case's
        shape, the output their broadcast shape (`output_like`'s shape)."""
        shapes = {t.name: tuple(given.get(t.name, shape)) for t in op.inputs}
        b = shapes[self.output_like] if self.output_like in shapes else broadcast_shape(*shapes.values())
        out = op.output.name
        shapes[out] = tuple(given.get(out, shape if b is None else b))  # (an explicit () counts)
        return shapes


@dataclass(frozen=True)
class Rows:
    """Each output element depends on whole rows along axes [lo, hi) of the driver tensor.

    driver: the tensor whose shape is cut into rows (an input: an output may be null).
    axes(shapes, attrs) -> (lo, hi): the reduced axes of the driver's shape, 0 <= lo <= hi <= ndim,
      from an attribute (`dim`, `normalizedShape`) or the shapes (gamma's rank). Only called on a case
      that phase one accepts.
    per_row: inputs with one value per a1 index (their numel is A1; A0 must be 1), and outputs with one value
      per a1 index (a sum over each row: returned as (k, 1, 1)).
    across_rows: outputs summed over every row (their numel is R * A0).
    """

    driver: str
    axes: Callable[[Shapes, Mapping], tuple[int, int]]
    per_row: tuple[str, ...] = ()
    across_rows: tuple[str, ...] = ()
    # Shapes of other tensors for a case that gives only the driver's shape: (driver shape, attrs) ->
    # {name: shape} (RmsNorm's gamma: the last axis). The rest default as `default_shapes` says.
    shapes: Callable[[tuple[int, ...], Mapping], Mapping[str, tuple[int, ...]]] | None = None
    # The float32 roundings that make one term of an across-rows sum from the inputs (LayerNorm's dy * x̂,
    # x̂ = (x - mean) * rstd: 3): its allowance's term error (ops/accumulation.py). 4 covers the bundled ops.
    term_roundings: int = 4
    # float32 roundings applied to a finished across-rows sum as a whole (Scatter's fl(S * fl(1 / count))): each
    # adds u |result| to the allowance.
    sum_roundings: int = 0
    # Elements the emulated kernel takes per call at least (0: the pipeline's chunk, 65,536). A kernel whose time is a
    # Python loop along each block rather than its elements (InstanceNormGrad's Kahan sums, one step per position)
    # takes many blocks per call, and each block's values are its own (the bytes do not change). Not with an
    # across-rows output: the emulated device adds its partials chunk by chunk, so the chunk decides its bits.
    kernel_chunk: int = 0
    # Whether an element of a row output is made from sums over its row's R terms at most (softmax, the norms'
    # gradInput): its relief's bound then counts R additions. A family whose elements sum something else (a
    # window, a dot product, the rows a scatter sends) says False, and keeps the term-scale relief.
    row_sums: bool = True
    name: str = "rows"
    own = property(lambda self: ())  # (the questions: Elementwise)
    whole = property(lambda self: ())
    element_local: bool = False
    inputs_broadcast: bool = False
    rounded_once: bool = True
    shared_errors: bool = True
    # - column_local: an across-rows output's element (r, a0) depends on that column of each row input only; then
    #   gen's exact pass hands `exact` the uncertain columns (else whole blocks, or `exact_at` the elements).
    column_local: bool = True

    def relief_terms(self, geo: Geometry | None) -> int | None:
        """The terms an element's float32 computation adds, its row's R, where row_sums; else None (not derived)."""
        return geo.r if self.row_sums and geo is not None else None

    def case_tensor(self, op) -> str:
        """The tensor whose dtype and shape a case's `dtype` and `shape` give: the driver."""
        return self.driver

    def exact_fills(self, op, shapes: Shapes, values: Mapping, dtypes: Mapping) -> dict | str:
        """`fill: exact`'s operand fills (families/exact.py), or why this family has none."""
        return (f"{op.name} is in the {self.name} family; exact fills are for sums of products (the contraction "
                f"and convolution families)")

    def across_terms(self, blocks: Mapping[str, np.ndarray], attrs: Mapping, rows: int):
        """How many terms each element of an across-rows output gets from these blocks: every row, one each."""
        return rows

    def partial_shape(self, t: Mapping, piece: tuple[int, ...]) -> tuple[int, ...]:
        """An across-rows output's partial over the blocks given: (1, R, A0)."""
        return (1, *piece[1:])

    def row_values(self, m, files: dict, blocks: Mapping[str, np.ndarray]) -> dict:
        """Per-row values the functions receive beside the blocks' inputs, (k, 1, 1) each, from the whole case
        (Scatter: how many rows share each row's index). Rows: none."""
        return {}

    def block_values(self, m, b0: int, b1: int) -> dict:
        """Values the functions receive beside blocks [b0, b1)'s inputs, (k, 1, 1) each, from the blocks' indices
        (Contraction: each operand's own batch index of every block). Rows: none."""
        return {}

    def golden_tiles(self, blocks: Mapping[str, np.ndarray]):
        """None, or gen's pieces of these blocks (finite inputs) for its golden: (the outputs' shape over the blocks,
        [(a piece's inputs, where its outputs go in that shape)]), where an output element depends on a part of its
        block only (Contraction: its row and column). Rows: None (a block is the piece)."""
        return None

    def case_shapes(self, op, shape: tuple[int, ...], attrs: Mapping, given: Mapping[str, tuple[int, ...]]) -> dict:
        """Every tensor's shape: the family's defaults from the driver's (`default_shapes`), then those given."""
        return {**self.default_shapes(shape, attrs, tuple(t.name for t in op.tensors)),
                **{n: tuple(s) for n, s in given.items()}}

    def default_shapes(self, shape: tuple[int, ...], attrs: Mapping, names: tuple[str, ...]) -> dict:
        """Every tensor's shape from the driver's: the op's own `shapes` first; then per-row inputs take the
        axes before the reduced ones, across-rows outputs the reduced ones and after, the rest the driver's."""
        shapes = {self.driver: tuple(shape), **(self.shapes(tuple(shape), attrs) if self.shapes else {})}
        lo, hi = self.axes(shapes, attrs)
        for name in names:
            if name not in shapes:
                shapes[name] = (tuple(shape[:lo]) if name in self.per_row else
                                tuple(shape[lo:]) if name in self.across_rows else tuple(shape))
        return shapes

    def shape_problem(self, op, shapes: Shapes, attrs: Mapping) -> str | None:
        """Why the family cannot relate the shapes of a case the op accepts (None: it can). An input that is
        not per-row has the driver's shape, the shape of the driver's axes from the reduced ones on (gamma),
        or one element; a per-row input one value per row; a row output the driver's shape; an across-rows
        output the axes from the reduced ones on. Any other shape the pipeline would broadcast as NumPy does,
        along the trailing axes: a (C,) weight beside [N, C, H, W] with W = C would be read along W."""
        if self.driver not in shapes:
            return f"the driver {self.driver} is null"
        drv = tuple(shapes[self.driver])
        lo, hi = self.axes(shapes, attrs)
        if not 0 <= lo <= hi <= len(drv):
            return f"reduced axes [{lo}, {hi}) outside the {len(drv)}-d {self.driver}"
        tail, rows = _squeezed(drv[lo:]), math.prod(drv[:lo])
        for t in op.tensors:
            if t.name not in shapes:  # (a null tensor: nothing is read or written)
                continue
            s = tuple(shapes[t.name])
            n = math.prod(s)
            if t.name in self.per_row:
                ok, want = n in (rows, 1) and (n == 1 or math.prod(drv[hi:]) == 1), \
                    f"one value per row ({rows}, the axes before the reduced ones of {list(drv)})"
            elif t.name in self.across_rows:
                ok, want = _squeezed(s) == tail, f"the {self.driver}'s axes from the reduced ones on, {list(drv[lo:])}"
            elif t.role == "output":
                ok, want = s == drv, f"the {self.driver}'s shape {list(drv)}"
            else:
                ok, want = s == drv or _squeezed(s) == tail or n == 1, \
                    f"the {self.driver}'s shape {list(drv)}, its axes from the reduced ones on {list(drv[lo:])}, or one element"
            if not ok:
                return f"{t.name} has shape {list(s)}; the rows family needs {want}"
        return None

    def own_geometry(self, name: str, shapes: Shapes, attrs: Mapping, geo: Geometry) -> Geometry | None:
        """The blocks of tensor `name` where they are cut from its own shape, not the driver's (a tensor in
        `own`): geo.a1 blocks, block b of it read with block b of the driver. None: the driver's blocks (the
        tensor broadcast to the driver)."""
        return None

    def geometry(self, shapes: Shapes, attrs: Mapping) -> Geometry:
        shape = tuple(shapes[self.driver])
        lo, hi = self.axes(shapes, attrs)
        if not 0 <= lo <= hi <= len(shape):
            raise ValueError(f"reduced axes [{lo}, {hi}) outside a {len(shape)}-d {self.driver}")
        return Geometry(math.prod(shape[:lo]), math.prod(shape[lo:hi]), math.prod(shape[hi:]))


ELEMENTWISE = Elementwise()


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape without its leading 1s (how NumPy aligns it: [1, 40] and [40] broadcast alike)."""
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


def dim_axis(driver: str, attr: str = "dim") -> Callable[[Shapes, Mapping], tuple[int, int]]:
    """axes() for a reduction over the one axis an int64 attribute names (negative counts from the end;
    a 0-d driver counts as 1-d, R = 1)."""
    def axes(shapes: Shapes, attrs: Mapping) -> tuple[int, int]:
        ndim = len(shapes[driver])
        dim = int(attrs[attr])
        dim = dim + max(ndim, 1) if dim < 0 else dim
        return (0, 0) if ndim == 0 else (dim, dim + 1)
    return axes


def trailing_axes(driver: str, count: Callable[[Shapes, Mapping], int]) -> Callable[[Shapes, Mapping], tuple[int, int]]:
    """axes() for a reduction over the last count(shapes, attrs) axes of the driver (LayerNorm's
    len(normalizedShape), RmsNorm's gamma rank, NLL's class axis)."""
    def axes(shapes: Shapes, attrs: Mapping) -> tuple[int, int]:
        ndim = len(shapes[driver])
        return ndim - count(shapes, attrs), ndim
    return axes
