"""A convolution's single elements from their own dot products (conv_lowering.Lowered.rows and columns: each
element's row of L and column of R read from the operands as given): verify's relief of a few flagged elements
(`reference_at`, `magnitude_at`) and gen's exact path (`exact_at`), with none of the whole-tensor pieces.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..contraction import dots
from ..contraction.dots import PRODUCT_ROUNDINGS
from ..dyadic import exact_row_sums
from .conv_lowering import HELD, Lowered

EXACT_HELD = 1 << 18  # products exact_at forms at a time (2 MiB of float64: exact_row_sums makes several such)


def reference_at(low: Lowered, where: np.ndarray, term_roundings: int = PRODUCT_ROUNDINGS):
    """`reference` of the tensor's elements at flat positions `where` (verify's relief of a few flagged ones), each
    from its own products: 1-d arrays."""
    where = np.asarray(where, np.int64)
    walk = dots.Walk(where.size, low.k)
    for inside, products in _products_at(low, where):
        walk.add(inside, products)
    g, m, c = low.locate(where)
    counts = np.broadcast_to(low.counts(), (low.g, low.m, low.c))[g, m, c]
    return dots.finished(walk.value, walk.scale, walk.peak, walk.squares, low.k, counts, term_roundings)


def magnitude_at(low: Lowered, where: np.ndarray) -> np.ndarray:
    """`magnitude` of the elements at flat positions `where`: 1-d."""
    where = np.asarray(where, np.int64)
    out = np.zeros(where.size)
    for inside, products in _products_at(low, where):
        out[inside] += np.abs(products).sum(axis=1)
    return out


def exact_at(low: Lowered, where: np.ndarray) -> np.ndarray:
    """The exact values (Fractions) of the tensor's elements at flat positions `where`, EXACT_HELD products at a
    time (exact sums: any cut of K gives the same values; gen's exact path beside a layer's blocks)."""
    where = np.asarray(where, np.int64)
    out = np.array([Fraction(0)] * where.size + [None], dtype=object)[:-1]
    for inside, products in _products_at(low, where, EXACT_HELD):
        out[inside] = out[inside] + np.array(exact_row_sums(products) + [None], dtype=object)[:-1]
    return out


def _products_at(low: Lowered, where: np.ndarray, held: int = HELD):
    """(indices into `where`, their elements' exact float64 products over a range of K): each element's K in
    order, from its own row of L and column of R (Lowered.rows, columns), at most `held` products at a time."""
    g, m, c = low.locate(where)
    group = max(1, held // max(low.k, 16))  # (elements whose whole K fits in `held`)
    for s in range(0, where.size, group):
        at = slice(s, s + group)
        k_step = max(16, min(low.k, held // max(where[at].size, 1)))
        for ks in range(0, low.k, k_step):
            ke = min(low.k, ks + k_step)
            yield at, low.rows(ks, ke, g[at], m[at]) * low.columns(ks, ke, g[at], c[at])  # (exact)
