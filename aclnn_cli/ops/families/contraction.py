"""The Contraction family (docs/families.md): out[b] = left[b] @ right[b], a dot product over K per element.

Shapes follow torch.matmul (aclnnMatmul's doc states the same rules): an operand of 2 or more dims is a stack of
matrices, its last two dims (M, K) for left and (K, N) for right, the dims before them its batch dims; a 1-d left
(K) is one (1, K) row and a 1-d right (K) one (K, 1) column, the padded dim removed from the output. The two
operands' batch dims broadcast (NumPy rules) into the output's: out has shape (*batch, M, N) without the dims a
1-d operand padded. aclnnBatchMatMul is the 3-d case of the same rules.

A block is one index b of the output's batch dims (B of them, flattened row-major). Each operand is cut from its
own shape, as the matrix it is: the left operand's block b is its matrix at b's broadcast index (an index of its
own batch dims, a dim of size 1 read at 0), the right's likewise, the output's block b its (M, N) matrix b. So the
functions receive left as (k, M, K), right as (k, K, N) and return out as (k, M, N): the sizes are the arrays'
own, nothing else has to carry them. Where an operand's batch dims are the output's, its blocks are one range of
its flat elements (`Geometry`); where they broadcast, block b reads the matrix `Batches.sources` names, and blocks
repeat. A transposed operand is a strided view of its storage; the storage layer gathers it in logical order, so
the functions never see a layout. Beside the blocks the functions receive, per block, the flat index of each
operand's own batch and the block's own (`block_values`: (k, 1, 1) int64 under `left_batch`, `right_batch` and
`out_batch`), which only a defect that reads the wrong one needs, and two facts of the case the functions cannot see in float values: whether an
operand is float32 (`float32_operands`: what cubeMathType rounds) and whether both are 1-d (`vector_dot`).

Every output element is a sum of K products, rounded once from float32; its allowance is the op's
(`Reference.allowance`, derived from K: docs/allowances.md, "Contractions"). Elements sharing a row of left or a
column of right are accumulated alike, so their errors may lean one way (`shared_errors`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple

import numpy as np

from .base import Geometry, Rows, Shapes, broadcast_shape
from .exact import exact_fills, precision

# block_values' names (no tensor or attribute has them): each operand's own batch index of every block, and the
# output's (the block's own index); 1 where the
# operands are computed as float32 (one is float32, or float16 meets bfloat16: what cubeMathType acts on); 1 where both operands are 1-d (a dot product: no cube at all)
LEFT_BATCH, RIGHT_BATCH, OUT_BATCH = "left_batch", "right_batch", "out_batch"
FLOAT32_OPERANDS, VECTOR_DOT = "float32_operands", "vector_dot"
# gen's golden takes a chunk's blocks in tiles of out of at most this many operand elements on each side: rows of left
# and columns of right, float64 in the reference (32 MiB each), where the whole blocks' matrices held both operands
# and six out-sized arrays in float64 (a 4096 x 4096 x 4096 case: 1.2 GB)
TILE = 1 << 22


class Matrices(NamedTuple):
    """The matrices of a contraction's operands: batch dims (the output's and each operand's, padded on the left
    with 1s to the output's length), M, K, N, and the output's shape."""

    batch: tuple[int, ...]
    left_batch: tuple[int, ...]
    right_batch: tuple[int, ...]
    m: int
    k: int
    n: int
    out: tuple[int, ...]

    @property
    def blocks(self) -> int:
        return math.prod(self.batch)


def matrices(left: tuple[int, ...], right: tuple[int, ...]) -> Matrices | str:
    """The matrices of left @ right under torch.matmul's rules, or why there are none (a 0-d operand, K differing,
    batch dims that do not broadcast)."""
    left, right = tuple(left), tuple(right)
    if not left or not right:
        return f"a 0-d operand ({list(left)} @ {list(right)}): matmul needs 1 dim or more"
    m, k = (1, left[0]) if len(left) == 1 else left[-2:]
    k2, n = (right[0], 1) if len(right) == 1 else right[-2:]
    if k != k2:
        return f"the left operand's K = {k} is not the right operand's {k2} ({list(left)} @ {list(right)})"
    lb, rb = left[:-2], right[:-2]
    batch = broadcast_shape(lb, rb)
    if batch is None:
        return f"batch dims {list(lb)} and {list(rb)} do not broadcast"
    pad = lambda s: (1,) * (len(batch) - len(s)) + tuple(s)
    out = (*batch, *((m,) if len(left) > 1 else ()), *((n,) if len(right) > 1 else ()))
    return Matrices(batch, pad(lb), pad(rb), m, k, n, out)


def out_shape(left: tuple[int, ...], right: tuple[int, ...]) -> tuple[int, ...]:
    """The output's shape for left @ right; for operands that do not multiply (a negative case), the same formula
    with each batch dim the larger of the two and K ignored, so the call still has an output to pass."""
    got = matrices(left, right)
    if not isinstance(got, str):
        return got.out
    if not left or not right:
        return tuple(left or right)
    lb, rb = tuple(left[:-2]), tuple(right[:-2])
    n = max(len(lb), len(rb))
    lb, rb = (1,) * (n - len(lb)) + lb, (1,) * (n - len(rb)) + rb
    return (*map(max, lb, rb), *left[-2:-1], *(right[-1:] if len(right) > 1 else ()))


def batch_sources(batch: tuple[int, ...], own: tuple[int, ...], b0: int, b1: int) -> np.ndarray:
    """The flat index, in an operand's own batch dims `own` (padded to len(batch)), of output batches [b0, b1)
    broadcast onto it: a dim of size 1 is read at 0."""
    index = np.arange(b0, b1, dtype=np.int64)
    if not batch:
        return index
    digits = np.unravel_index(index, batch)
    source = np.zeros_like(index)
    for d, size in zip(digits, own):
        source = source * size + (d if size != 1 else 0)
    return source


@dataclass(frozen=True)
class Batches(Geometry):
    """An operand whose batch dims broadcast to the output's: block b (an output batch index) is the operand's
    matrix at b's broadcast index, so blocks repeat and are not one range of its flat elements. a1 is the output's
    batch count, (r, a0) the matrix."""

    batch: tuple[int, ...] = ()
    own: tuple[int, ...] = ()

    @property
    def contiguous(self) -> bool:
        return False

    def sources(self, b0: int, b1: int) -> np.ndarray:
        return batch_sources(self.batch, self.own, b0, b1)

    def positions(self, b0: int, b1: int):
        """The operand's flat indices read by blocks [b0, b1), block by block (a matrix repeated where it is)."""
        inner = np.arange(self.block, dtype=np.int64)
        return (self.sources(b0, b1)[:, None] * self.block + inner[None, :]).reshape(-1)

    def block_of(self, flat):
        """(the first block reading each element, its position in the matrix): an element of a broadcast operand is
        read by every block whose broadcast index is its matrix; the first of them is the one with 0 along every
        broadcast dim."""
        size = max(self.block, 1)
        matrix, inside = flat // size, flat % size
        digits = np.unravel_index(matrix, self.own) if self.own else ()
        first = np.zeros_like(matrix)
        for d, size_out, size_own in zip(digits, self.batch, self.own):
            first = first * size_out + (d if size_own != 1 else 0)
        return first, inside


@dataclass(frozen=True)
class Contraction(Rows):
    """out[b] = left[b] @ right[b] over K, torch.matmul's shapes: left (*lb, M, K) or (K), right (*rb, K, N) or (K),
    out (broadcast(lb, rb), M, N) without a 1-d operand's padded dim.

    driver: the left operand (self). right: the right operand (mat2). out: the output."""

    axes: Callable[[Shapes, Mapping], tuple[int, int]] = lambda shapes, attrs: (0, 0)  # (unused: the matrices')
    right: str = "mat2"
    out: str = "out"
    row_sums: bool = False  # (its elements sum other terms than a row's: Rows.relief_terms)
    name: str = "contraction"
    # (True: the elements of a row of out share its row of left, those of a column the column of right, and the
    #  kernel adds them all in one order, so their accumulation errors are correlated and may lean one way; a
    #  failing verdict gets the second look with every element judged against its allowance, as a row sum's)
    shared_errors: bool = True

    @property
    def own(self) -> tuple[str, ...]:
        return (self.driver, self.right, self.out)

    def exact_fills(self, op, shapes: Shapes, values: Mapping, dtypes: Mapping) -> dict | str:
        """Both operands' fills for sums of K products, within the precision the output's result keeps
        (families/exact.precision: float16's where the cube's result leaves as float16)."""
        mm = matrices(shapes[self.driver], shapes[self.right])
        if isinstance(mm, str):
            return mm
        out = op.output.name
        p = precision(op, out, shapes, values, dtypes)
        return exact_fills((self.driver, self.right), {out: (mm.k, 2, p, dtypes[out].name)}, dtypes)

    def matrices(self, shapes: Shapes) -> Matrices:
        got = matrices(shapes[self.driver], shapes[self.right])
        if isinstance(got, str):
            raise ValueError(got)
        return got

    def sizes(self, shapes: Shapes) -> tuple[int, int, int, int]:
        """(B, M, K, N): the output's batch count and the matrices' sizes."""
        mm = self.matrices(shapes)
        return mm.blocks, mm.m, mm.k, mm.n

    def default_shapes(self, shape: tuple[int, ...], attrs: Mapping, names: tuple[str, ...]) -> dict:
        """left the case's shape (*batch, M, K); right (*batch, K, M) unless given (a case gives mat2's shape for
        another N), a 1-d left's right the same (K) (a dot product); the output from the two (`case_shapes`)."""
        own = {self.driver: tuple(shape), **(self.shapes(tuple(shape), attrs) if self.shapes else {})}
        if len(shape) >= 2:
            own.setdefault(self.right, (*shape[:-2], shape[-1], shape[-2]))
        elif len(shape) == 1:
            own.setdefault(self.right, tuple(shape))
        return {n: own.get(n, tuple(shape)) for n in (*names, *own)}

    def case_shapes(self, op, shape: tuple[int, ...], attrs: Mapping, given: Mapping[str, tuple[int, ...]]) -> dict:
        """The defaults, mat2 as given, then out from self and mat2 unless given (`out_shape`)."""
        shapes = {**self.default_shapes(shape, attrs, tuple(t.name for t in op.tensors)),
                  **{n: tuple(s) for n, s in given.items()}}
        if self.out not in given:
            shapes[self.out] = out_shape(shapes[self.driver], shapes[self.right])
        return shapes

    def shape_problem(self, op, shapes: Shapes, attrs: Mapping) -> str | None:
        """Why the shapes are not left @ right -> out under torch.matmul's rules (None: they are)."""
        if self.driver not in shapes or self.right not in shapes:
            return f"{self.driver} or {self.right} is null"
        mm = matrices(shapes[self.driver], shapes[self.right])
        if isinstance(mm, str):
            return mm
        if self.out in shapes and tuple(shapes[self.out]) != mm.out:
            return f"{self.out} has shape {list(shapes[self.out])}; the contraction family needs {list(mm.out)}"
        return None

    def geometry(self, shapes: Shapes, attrs: Mapping) -> Geometry:
        """One block per output batch index: the left operand's (M, K) matrix as broadcast there."""
        mm = self.matrices(shapes)
        return Geometry(mm.blocks, mm.m, mm.k)

    def own_geometry(self, name: str, shapes: Shapes, attrs: Mapping, geo: Geometry) -> Geometry | None:
        """Block b of each tensor: left's (M, K) and right's (K, N) matrix at b's broadcast index (one range of its
        flat elements where its batch dims are the output's, else `Batches`), out's (M, N) matrix b."""
        mm = self.matrices(shapes)
        if name == self.out:
            return Geometry(mm.blocks, mm.m, mm.n)
        if name not in (self.driver, self.right):
            return None
        own, r, a0 = (mm.left_batch, mm.m, mm.k) if name == self.driver else (mm.right_batch, mm.k, mm.n)
        if own == mm.batch:
            return Geometry(mm.blocks, r, a0)
        return Batches(mm.blocks, r, a0, batch=mm.batch, own=own)

    def golden_tiles(self, blocks):
        """out's element (b, i, j) is row i of left[b] times column j of right[b]: gen's golden takes blocks of more
        than TILE operand elements a side in tiles of rows i0:i1 and columns j0:j1, left[:, i0:i1] and right[:, :,
        j0:j1] (the blocks' other values as they are), each TILE elements a side at most (one row or column at
        least). Each element's products, their value and bound, and so its certified golden, are those of the whole
        blocks; only BLAS's order of float64 additions may differ (inside the bound)."""
        left, right = blocks[self.driver], blocks[self.right]
        k, m, kk = left.shape
        n = right.shape[2]
        rows = columns = max(1, TILE // max(k * kk, 1))
        if rows >= m and columns >= n:
            return None
        pieces = [({**blocks, self.driver: left[:, i:i + rows], self.right: right[:, :, j:j + columns]},
                   (slice(None), slice(i, i + rows), slice(j, j + columns)))
                  for i in range(0, m, rows) for j in range(0, n, columns)]
        return (k, m, n), pieces

    def block_values(self, m, b0: int, b1: int) -> dict:
        """Per block of [b0, b1), (k, 1, 1) int64: the flat index of each operand's own batch it reads and its own,
        whether an
        operand is float32, whether both are 1-d."""
        shapes = {t.name: tuple(t.layout.shape) for t in m.tensors}
        mm = self.matrices(shapes)
        k = (b1 - b0, 1, 1)
        kinds = {t.dtype.name for t in m.tensors if t.name in (self.driver, self.right)}
        wide = "float32" in kinds or len(kinds) > 1  # (float16 beside bfloat16 promotes to float32)
        dot = len(shapes[self.driver]) == 1 and len(shapes[self.right]) == 1
        return {LEFT_BATCH: batch_sources(mm.batch, mm.left_batch, b0, b1).reshape(k),
                RIGHT_BATCH: batch_sources(mm.batch, mm.right_batch, b0, b1).reshape(k),
                OUT_BATCH: np.arange(b0, b1, dtype=np.int64).reshape(k),
                FLOAT32_OPERANDS: np.full(k, int(wide), dtype=np.int64), VECTOR_DOT: np.full(k, int(dot), dtype=np.int64)}
