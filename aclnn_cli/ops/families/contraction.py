"""The Contraction family (docs/families.md): out[b] = left[b] @ right[b], a dot product over K per element.

A block is one batch index b. Each operand is cut from its own shape, as the matrix it is: the driver (left,
(B, M, K)) into blocks (M, K), the right operand (B, K, N) into (K, N), the output (B, M, N) into (M, N). So the
functions receive left as (k, M, K), right as (k, K, N) and return out as (k, M, N): the sizes are the arrays'
own, nothing else has to carry them. A transposed operand is a strided view of its storage; the storage layer
gathers it in logical order, so the functions never see a layout.

Every output element is a sum of K products, rounded once from float32; its allowance is the op's
(`Reference.allowance`, derived from K: docs/allowances.md, "Contractions"). Elements sharing a row of left or a
column of right are accumulated alike, so their errors may lean one way (`shared_errors`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from .base import Geometry, Rows, Shapes


@dataclass(frozen=True)
class Contraction(Rows):
    """out[b] = left[b] @ right[b] over K: left (B, M, K), right (B, K, N), out (B, M, N), batches equal.

    driver: the left operand (self). right: the right operand (mat2). out: the output."""

    axes: Callable[[Shapes, Mapping], tuple[int, int]] = lambda shapes, attrs: (0, 0)  # (unused: the matrices')
    right: str = "mat2"
    out: str = "out"
    name: str = "contraction"
    # (True: the elements of a row of out share its row of left, those of a column the column of right, and the
    #  kernel adds them all in one order, so their accumulation errors are correlated and may lean one way; a
    #  failing verdict gets the second look with every element judged against its allowance, as a row sum's)
    shared_errors: bool = True

    @property
    def own(self) -> tuple[str, ...]:
        return (self.right, self.out)

    def sizes(self, shapes: Shapes) -> tuple[int, int, int, int]:
        """(B, M, K, N) of 3-d left and right operands."""
        (b, m, k), n = shapes[self.driver], shapes[self.right][2]
        return b, m, k, n

    def default_shapes(self, shape: tuple[int, ...], attrs: Mapping, names: tuple[str, ...]) -> dict:
        """left the case's shape (B, M, K); right (B, K, M) unless given (a case gives mat2's shape for another N);
        the output (B, M, N) from the two (Rows.case_shapes then lays the shapes given over these)."""
        own = {self.driver: tuple(shape), **(self.shapes(tuple(shape), attrs) if self.shapes else {})}
        if len(shape) == 3:
            own.setdefault(self.right, (shape[0], shape[2], shape[1]))
        return {n: own.get(n, tuple(shape)) for n in (*names, *own)}

    def case_shapes(self, op, shape: tuple[int, ...], attrs: Mapping, given: Mapping[str, tuple[int, ...]]) -> dict:
        """The defaults, mat2 as given, then out (B, M, N) from self and mat2 unless given."""
        shapes = {**self.default_shapes(shape, attrs, tuple(t.name for t in op.tensors)),
                  **{n: tuple(s) for n, s in given.items()}}
        left, right = shapes[self.driver], shapes[self.right]
        if self.out not in given and len(left) == 3 and len(right) == 3:
            shapes[self.out] = (max(left[0], right[0]), left[1], right[2])
        return shapes

    def shape_problem(self, op, shapes: Shapes, attrs: Mapping) -> str | None:
        """Why the shapes are not (B, M, K) @ (B, K, N) -> (B, M, N) (None: they are). A batch of 1 beside
        another (the API broadcasts it) is not cut yet: refused here, with that reason."""
        if self.driver not in shapes or self.right not in shapes:
            return f"{self.driver} or {self.right} is null"
        left, right = tuple(shapes[self.driver]), tuple(shapes[self.right])
        if len(left) != 3 or len(right) != 3:
            return f"{self.driver} {list(left)} and {self.right} {list(right)}: the contraction family needs 3-d operands"
        if left[2] != right[1]:
            return f"{self.driver}'s K = {left[2]} is not {self.right}'s {right[1]}"
        if left[0] != right[0]:
            return (f"batches {left[0]} and {right[0]}: the contraction family does not cut a broadcast batch yet "
                    f"(give both operands the same batch)")
        want = (left[0], left[1], right[2])
        if self.out in shapes and tuple(shapes[self.out]) != want:
            return f"{self.out} has shape {list(shapes[self.out])}; the contraction family needs {list(want)}"
        return None

    def geometry(self, shapes: Shapes, attrs: Mapping) -> Geometry:
        """The left operand's blocks: one (M, K) matrix per batch index."""
        b, m, k, _ = self.sizes(shapes)
        return Geometry(b, m, k)

    def own_geometry(self, name: str, shapes: Shapes, attrs: Mapping, geo: Geometry) -> Geometry | None:
        """right's block b: its (K, N) matrix; out's: its (M, N) matrix."""
        b, m, k, n = self.sizes(shapes)
        return Geometry(b, k, n) if name == self.right else Geometry(b, m, n) if name == self.out else None
