"""Chunks mostly bit-identical to their golden: errors of the elements that differ, nothing else.

A correct float16/bfloat16 kernel returns the golden's own bits for nearly every element (a
certified golden is the correctly rounded result). Those elements' errors are exactly +0 (abs,
rel, signed and ulp: x - x and 0 / d are +0), they are finite, and no standard's rule flags them
(every threshold is > 0; `exact_never_flagged` checks the rule itself). So a chunk is compared by
one pass over the bits, the dense errors of the few elements that differ (`element_errors` on them:
the same numbers, element by element), and metrics folded in as if the zeros were there:

- maxima and their first index: a maximum > 0 is one of the differing elements' (the first of them
  in index order); a maximum of 0 is at element 0, which never beats a metric's running maximum;
- sums: the sum of the non-zero terms, the same terms the dense pass adds in another order. They agree
  to the sum's rounding (float64; float32 for the squares, as the dense pass rounds them), far below
  any standard's threshold; counts, maxima and their indices are exact (decision 56).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..tensor.dtypes import DType
from .compare import NO_INDEX, WORST_K, ElementErrors, Metrics, element_errors
from .sums import error_sums
from .workspace import Buffers

# (bits of |x|, exponent field all ones) per storage dtype: |x| bits >= the second means Inf or NaN.
_MAGNITUDE = {"float32": (0x7FFFFFFF, 0x7F800000), "float16": (0x7FFF, 0x7C00), "bfloat16": (0x7FFF, 0x7F80)}
MOSTLY = 16  # at most 1/MOSTLY of a chunk's elements differ, or the dense path is cheaper


@dataclass
class Differing:
    """One chunk's errors, kept only for the elements whose bits differ from the golden's."""

    n: int  # elements in the chunk
    at: np.ndarray  # chunk positions of the differing elements, ascending
    sub: ElementErrors  # their errors; sub's own indices (special, nonfinite, violation) are into `at`
    zero_goldens: int  # finite elements of the chunk with a zero golden


def differing_errors(a_native: np.ndarray, g_native: np.ndarray, floor: float, dtype: DType, *, flush_ok: bool,
                     signed_zeros: bool, bufs: Buffers | None) -> Differing | None:
    """The chunk as Differing, or None when the dense path applies (many differ, or a golden is Inf/NaN)."""
    masks = _MAGNITUDE.get(dtype.name)
    if masks is None or a_native.dtype != dtype.np_dtype or g_native.dtype != dtype.np_dtype:
        return None
    n, u = g_native.size, dtype.uint_dtype
    ab, gb = a_native.view(u), g_native.view(u)
    differ = np.not_equal(ab, gb, out=bufs.get("differ", bool, n) if bufs else None)
    if not n or np.count_nonzero(differ) * MOSTLY > n:
        return None
    at = np.flatnonzero(differ)
    magnitude = np.bitwise_and(gb, u.type(masks[0]), out=bufs.get("magnitude", u, n) if bufs else None)
    if magnitude.max() >= masks[1]:  # (a non-finite golden: the dense path's bookkeeping)
        return None
    zeros = 0 if magnitude.min() else int(np.count_nonzero(magnitude == 0))
    if not at.size:  # (every element identical: a small case often is)
        return Differing(n, at, _no_errors(dtype), zeros)
    sub = element_errors(a_native[at], g_native[at], floor, dtype, flush_ok=flush_ok, signed_zeros=signed_zeros)
    zeros -= int(np.count_nonzero(magnitude[at] == 0))  # (counted again below, as the dense path counts them)
    zeros += sub.abs.size - sub.nonzero_goldens - sub.nonfinite.size
    return Differing(n, at, sub, zeros)


_EMPTY = np.empty(0, np.float32)
_EMPTY.flags.writeable = False


def _no_errors(dtype: DType) -> ElementErrors:
    """The errors of no element (what element_errors gives for empty arrays, without its passes)."""
    return ElementErrors(_EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY, dtype, NO_INDEX, NO_INDEX,
                         nonzero_goldens=0)


def exact_never_flagged(rule: Callable[[ElementErrors], np.ndarray], dtype: DType, floor: float) -> bool:
    """Whether `rule` passes bit-identical elements (errors 0) across the dtype's range of goldens.
    (Asked once per rule, dtype and floor: thousands of small cases share a few.)"""
    key = (rule, dtype.name, floor)
    known = _PROBED.get(key)
    if known is None:
        known = False
        if dtype.name in _MAGNITUDE:
            values = np.array([0.0, -0.0, dtype.smallest_subnormal, dtype.smallest_normal, floor, 1e-3, 1.0, -1.0,
                               dtype.max_finite], np.float64).astype(dtype.np_dtype)
            known = not np.any(rule(element_errors(values, values, floor, dtype)))
        if len(_PROBED) > 1024:
            _PROBED.clear()
        _PROBED[key] = known
    return known


_PROBED: dict[tuple, bool] = {}


def add_differing(metrics: Metrics, d: Differing, base: int) -> None:
    """Metrics.add of the full chunk, from its differing elements (the same metrics; sums to their rounding)."""
    metrics._settle()
    e, at = d.sub, d.at
    metrics.elements += d.n
    metrics.compared += d.n - e.nonfinite.size
    metrics.zero_goldens += d.zero_goldens
    rel, signed, sq_abs, ulp = error_sums(e)  # (the non-zero terms: the same sums as the dense pass's, in another order)
    metrics.sum_rel += rel
    metrics.sum_signed += signed
    metrics.sum_sq_abs += sq_abs
    metrics.sum_ulp += ulp
    where = (lambda i: base + int(at[i]))
    if e.ulp.size:
        metrics.max_ulp = max(metrics.max_ulp, float(e.ulp[e.ulp.argmax()]))
    value, i = _first_max(e.abs)
    if value > metrics.max_abs:
        metrics.max_abs, metrics.max_abs_at = value, where(i)
    chunk_max_rel, i = _first_max(e.rel)
    if chunk_max_rel > metrics.max_rel:
        metrics.max_rel, metrics.max_rel_at = chunk_max_rel, where(i)
    if e.special.size:
        metrics.special_mismatches += int(e.special.size)
        first = where(e.special[0])
        if metrics.first_special < 0 or first < metrics.first_special:
            metrics.first_special = first
        for i in e.special[:WORST_K]:
            metrics._push((float("inf"), where(i)))
    if e.violation is not None:
        hits = int(np.count_nonzero(e.violation))
        if hits:
            metrics.violations += hits
            first = where(int(np.argmax(e.violation)))
            if metrics.first_violation < 0 or first < metrics.first_violation:
                metrics.first_violation = first
    # (the worst-k candidates: the full chunk's are its non-zero relative errors, in the same order)
    metrics._pending = (e.rel, chunk_max_rel, where)


def _first_max(x: np.ndarray) -> tuple[float, int]:
    """(maximum, its first position) of the differing elements; (0.0, 0) when the chunk's maximum is its zeros'."""
    if not x.size:
        return 0.0, 0
    i = int(x.argmax())
    return float(x[i]), i
