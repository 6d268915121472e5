"""The float64 reference of a normalisation's input gradient, shared by LayerNorm's rows and BatchNorm's channels.

Both compute, per row (or channel) of n elements, dx = (a - sum(a) / n - h * sum(h a) / n) * rstd with
h = (x - mean) * rstd and a = dy * gamma (gamma per element for LayerNorm, one value per channel for BatchNorm).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .dyadic import as_fractions_of, exact_row_dots, exact_row_sums, over_common
from .treesum import exact_sum_factor, row_sum64

U = 2.0**-53
SLACK = 1.0 + 2.0**-30  # covers the float64 evaluation of a magnitude (at most ~100 u below the exact one)
TINY = 2.0**-1074


def normalized(x: np.ndarray, mean: np.ndarray, rstd: np.ndarray) -> np.ndarray:
    """h = (x - mean) * rstd, in the inputs' float type."""
    with np.errstate(all="ignore"):
        return (x - mean) * rstd


def dx_reference(a: np.ndarray, h: np.ndarray, rstd: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value, bound, scale) of dx on float64 rows (k, n, A0) whose float32 inputs were widened.

    With u = 2^-53, X = x̂ exact, T = |a| + A/n + |X| B/n (A = sum|a|, B = sum|X a|): a = dy * gamma is exact (two
    24-bit factors); h = fl(fl(x - mean) * rstd) = X(1 + 2.01u); p = fl(h a) = Xa(1 + 3.01u); the pairwise sums
    (row_sum64) are within F u sum|terms|, F = exact_sum_factor(n), so s1 is within F u A and s2 within
    (F + 3.02) u B; the quotients by n, h * (s2/n), the two subtractions and * rstd add one rounding each.
    Summed: |value - exact| <= (F + 10.4) u |rstd| T; with T computed from h (within (F + 4) u of the exact T)
    (F + 12) u |rstd| T covers it, plus a subnormal floor of (n + 16) 2^-1074 (products of four fp32 values can
    fall below float64's normal range). Nothing overflows float64 (|terms| <= 2^896).

    scale = |rstd| T (>= |exact|, slack SLACK): a float32 kernel's error is about (log2 n + c) 2^-24 of it."""
    n = a.shape[1]
    p = h * a
    big_a, big_b = row_sum64(np.abs(a)), row_sum64(np.abs(p))
    value = (a - row_sum64(a) / n - h * (row_sum64(p) / n)) * rstd if n else a * 0.0
    mag = np.abs(rstd) * (np.abs(a) + big_a / max(n, 1) + np.abs(h) * big_b / max(n, 1)) * SLACK
    bound = (exact_sum_factor(n) + 12) * U * mag + (n + 16) * TINY
    return value, bound, mag


def dx_exact(a, h, rstd):
    """The same formula on Fraction object arrays (any k rows), exactly.

    In integers over each row's common denominators (dyadic.over_common): with a = A / da, h = H / dh, r = R / dr,
    s1 = sum A, s2 = sum H A, dx = (n A dh^2 - s1 dh^2 - H s2) R / (n da dh^2 dr), one Fraction per element; in
    Fractions where an input is not rational (inf or NaN: IEEE's values)."""
    n = a.shape[1]
    if not n:
        return a
    r = np.asarray(rstd, dtype=object)
    parts = over_common(a), over_common(h), over_common(r.reshape((1,) * (a.ndim - r.ndim) + r.shape))
    if any(p is None for p in parts):
        return (a - a.sum(axis=1, keepdims=True) / n - h * ((h * a).sum(axis=1, keepdims=True) / n)) * rstd
    (big_a, da), (big_h, dh), (big_r, dr) = parts
    s1, s2 = big_a.sum(axis=1, keepdims=True), (big_h * big_a).sum(axis=1, keepdims=True)
    dh2 = dh * dh
    return as_fractions_of((n * big_a * dh2 - s1 * dh2 - big_h * s2) * big_r, n * da * dh2 * dr)


def as_fractions(v) -> np.ndarray:
    """A float array as Fractions (a non-finite value stays a float: IEEE decides what it touches)."""
    v = np.asarray(v, np.float64)
    flat = [Fraction(e) if math.isfinite(e) else e for e in v.reshape(-1).tolist()]
    return np.array(flat + [None], dtype=object)[:-1].reshape(v.shape)


class ExactRows:
    """Exact row sums of (rows, n) float64 arrays a, x (a with at most 53 significant bits, x float32 values) and
    per-row mean and rstd: s1 = sum(a), s2 = sum(x̂ a) = rstd (sum(x a) - mean sum(a)) through ops/dyadic.py,
    so a few elements of a long row cost a few Fractions, not one per element."""

    def __init__(self, a, x, mean, rstd, sxa):
        self.a, self.x, self.n = a, x, a.shape[1]
        self.mu = [Fraction(float(v)) for v in mean[:, 0]]
        self.r = [v if isinstance(v, Fraction) else Fraction(float(v)) for v in rstd[:, 0]]
        self.s1 = exact_row_sums(a)
        self.s2 = [r * (sx - m * s) for r, sx, m, s in zip(self.r, sxa, self.mu, self.s1)]

    def _h(self, row: int, j: int) -> Fraction:
        return (Fraction(float(self.x[row, j])) - self.mu[row]) * self.r[row]

    def at(self, rows, cols) -> list[Fraction]:
        """dx = (a - s1 / n - x̂ s2 / n) rstd at (row, column) pairs."""
        return [(Fraction(float(self.a[i, j])) - self.s1[i] / self.n - self._h(i, j) * self.s2[i] / self.n) * self.r[i]
                for i, j in zip(np.asarray(rows).tolist(), np.asarray(cols).tolist())]

    def column(self, dy, cols, lanes, weighted: bool) -> list[Fraction]:
        """Columns (j, c) of a (k, n, a0) dy summed over its k rows: sum of dy x̂ (weighted) or of dy."""
        a0 = dy.shape[2]
        out = []
        for j, c in zip(np.asarray(cols).tolist(), np.asarray(lanes).tolist()):
            terms = [Fraction(float(d)) for d in dy[:, j, c].tolist()]
            out.append(sum((d * self._h(i * a0 + c, j) for i, d in enumerate(terms)) if weighted else terms, Fraction(0)))
        return out


def dx_exact_at(a, x, mean, rstd) -> ExactRows | None:
    """ExactRows of (rows, n) arrays, or None where x or a is too wide for an exact split (ops/dyadic.py). rstd's
    first column may hold Fractions (an instance's rstd from its variance: exact or to 60 digits), taken as they are."""
    sxa = exact_row_dots(a, x) if a.shape[1] else None
    return None if sxa is None else ExactRows(a, x, mean, rstd, sxa)
