"""Comparison as pure functions: arrays in, numbers and verdicts out. No I/O.

`element_errors` turns one chunk of (actual, golden) into per-element errors,
`Metrics` accumulates chunks (so tensors of any size stream through), and a
`Standard` (standards.py) turns Metrics into a verdict. All of them can be
exercised on hand-made arrays.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, fields
from typing import Callable

import numpy as np

from .dtypes import DType

# msprobe small-value thresholds: |g| <= small is judged by |a - g| <= atol.
SMALL_VALUE = {"float16": (2.0**-10, 2.0**-16), "bfloat16": (2.0**-10, 2.0**-16), "float32": (2.0**-20, 2.0**-30),
               "float64": (2.0**-20, 2.0**-30)}
WORST_K = 5


@dataclass
class ElementErrors:
    """Errors of one chunk. rel is relative to the standard's denominator."""

    abs: np.ndarray  # |a - g| where both finite, else 0
    rel: np.ndarray  # abs / denominator where both finite, else 0
    signed: np.ndarray  # (|a| - |g|) / denominator: < 0 means toward zero
    ulp: np.ndarray  # abs in units of the output dtype's ulp at the golden's exponent
    special: np.ndarray  # NaN/Inf (and, if asked, zero-sign) disagreement
    finite: np.ndarray  # both finite
    small_error: np.ndarray  # |g| <= small value and |a - g| > its absolute bound
    small: np.ndarray  # |g| <= small value
    zero_golden: np.ndarray  # g == 0
    golden_abs: np.ndarray  # |g| where finite, else 0
    zero_sign: np.ndarray  # a and g are zeros of different sign
    violation: np.ndarray = field(default=None)  # breaks the standard's per-element rule


def ulp_at(g: np.ndarray, dtype: DType) -> np.ndarray:
    """One ulp of `dtype` at the exponent of |g| (never below the subnormal spacing)."""
    _, e = np.frexp(np.abs(g))  # frexp(0) gives exponent 0: zero belongs to the smallest binade
    e = np.where(g == 0, dtype.emin, np.maximum(e - 1, dtype.emin))
    return np.ldexp(1.0, e - dtype.precision + 1)


def special_mismatch(a: np.ndarray, g: np.ndarray, signed_zeros: bool = False) -> np.ndarray:
    """NaN must meet NaN; an Inf must meet the same-signed Inf; optionally -0 must meet -0."""
    nan_a, nan_g = np.isnan(a), np.isnan(g)
    with np.errstate(invalid="ignore"):
        bad = (nan_a != nan_g) | ((np.isinf(a) | np.isinf(g)) & (a != g) & ~nan_a & ~nan_g)
        if signed_zeros:
            bad |= (a == 0) & (g == 0) & (np.signbit(a) != np.signbit(g))
    return bad


def element_errors(a: np.ndarray, g: np.ndarray, denominator: np.ndarray, dtype: DType, *,
                   flush_ok: bool = True, signed_zeros: bool = False) -> ElementErrors:
    """Per-element errors of actual `a` against golden `g` (float64 arrays of one chunk).

    flush_ok: a zero where the golden is subnormal in `dtype` counts as exact (flush-to-zero).
    """
    finite = np.isfinite(a) & np.isfinite(g)
    a0, g0 = np.where(finite, a, 0.0), np.where(finite, g, 0.0)
    abs_err = np.abs(a0 - g0)
    if flush_ok:
        abs_err[(a0 == 0) & (np.abs(g0) < dtype.smallest_normal)] = 0.0
    den = np.where(finite, denominator, 1.0)
    small_value, small_atol = SMALL_VALUE[dtype.name]
    small = finite & (np.abs(g0) <= small_value)
    return ElementErrors(
        abs=abs_err, rel=abs_err / den, signed=np.where(abs_err > 0, (np.abs(a0) - np.abs(g0)) / den, 0.0),
        ulp=abs_err / ulp_at(g0, dtype), special=special_mismatch(a, g, signed_zeros), finite=finite,
        small_error=small & (abs_err > small_atol), small=small, zero_golden=finite & (g0 == 0),
        golden_abs=np.abs(g0), zero_sign=finite & (a0 == 0) & (g0 == 0) & (np.signbit(a0) != np.signbit(g0)))


@dataclass
class Metrics:
    """Streaming summary of a comparison; merge chunks in any order."""

    elements: int = 0
    compared: int = 0
    special_mismatches: int = 0
    first_special: int = -1
    violations: int = 0
    first_violation: int = -1
    relieved: int = 0  # elements the op's knowledge (scale, edge results) turned from bad to good
    small_elements: int = 0
    small_errors: int = 0
    zero_goldens: int = 0
    sum_rel: float = 0.0
    sum_signed: float = 0.0
    sum_sq_abs: float = 0.0
    sum_ulp: float = 0.0
    sum_sq_golden: float = 0.0
    max_abs: float = 0.0
    max_abs_at: int = -1
    max_rel: float = 0.0
    max_rel_at: int = -1
    max_ulp: float = 0.0
    worst: list = field(default_factory=list)  # heap of (rel, index): the WORST_K largest

    _COUNTS = ("elements", "compared", "special_mismatches", "violations", "relieved", "small_elements",
               "small_errors", "zero_goldens")

    def add(self, e: ElementErrors, base: int) -> None:
        n = e.abs.size
        self.elements += n
        self.compared += int(e.finite.sum())
        self.small_elements += int(e.small.sum())
        self.small_errors += int(e.small_error.sum())
        self.zero_goldens += int(e.zero_golden.sum())
        self.sum_rel += float(e.rel.sum())
        self.sum_signed += float(e.signed.sum())
        self.sum_sq_abs += float(np.dot(e.abs, e.abs))
        self.sum_ulp += float(e.ulp.sum())
        self.sum_sq_golden += float(np.dot(e.golden_abs, e.golden_abs))
        if not n:
            return
        self.max_ulp = max(self.max_ulp, float(e.ulp.max()))
        for attr, arr in (("abs", e.abs), ("rel", e.rel)):
            i = int(np.argmax(arr))
            if arr[i] > getattr(self, f"max_{attr}"):
                setattr(self, f"max_{attr}", float(arr[i]))
                setattr(self, f"max_{attr}_at", base + i)
        self._count("special", e.special, base)
        if e.violation is not None:
            self._count("violation", e.violation, base)
        score = np.where(e.special, np.inf, e.rel)
        k = min(WORST_K, n)
        top = np.argpartition(score, n - k)[n - k:]
        for i in top:
            if score[i] > 0:
                self._push((float(score[i]), int(base + i)))

    def _push(self, item: tuple[float, int]) -> None:
        if len(self.worst) < WORST_K:
            heapq.heappush(self.worst, item)
        elif item > self.worst[0]:
            heapq.heapreplace(self.worst, item)

    def _count(self, name: str, mask: np.ndarray, base: int) -> None:
        hits = np.flatnonzero(mask)
        if hits.size:
            counter = "special_mismatches" if name == "special" else "violations"
            setattr(self, counter, getattr(self, counter) + int(hits.size))
            first = f"first_{name}"
            if getattr(self, first) < 0 or base + hits[0] < getattr(self, first):
                setattr(self, first, int(base + hits[0]))

    def merge(self, other: "Metrics") -> None:
        """Fold another chunk's (or worker's) metrics into this one."""
        for f in fields(self):
            if f.name.startswith("sum_") or f.name in self._COUNTS:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        for n in ("max_abs", "max_rel"):
            if getattr(other, n) > getattr(self, n):
                setattr(self, n, getattr(other, n))
                setattr(self, f"{n}_at", getattr(other, f"{n}_at"))
        self.max_ulp = max(self.max_ulp, other.max_ulp)
        for n in ("first_special", "first_violation"):
            mine, theirs = getattr(self, n), getattr(other, n)
            if theirs >= 0 and (mine < 0 or theirs < mine):
                setattr(self, n, theirs)
        for item in other.worst:
            self._push(item)

    def worst_indices(self) -> list[int]:
        return [i for _, i in sorted(self.worst, reverse=True)]

    @property
    def mere(self) -> float:
        return self.sum_rel / self.compared if self.compared else 0.0

    @property
    def error_balance(self) -> float:
        return self.sum_signed / self.compared if self.compared else 0.0

    @property
    def rmse(self) -> float:
        return (self.sum_sq_abs / self.compared) ** 0.5 if self.compared else 0.0

    @property
    def mean_ulp(self) -> float:
        return self.sum_ulp / self.compared if self.compared else 0.0

    @property
    def small_error_rate(self) -> float:
        return self.small_errors / self.small_elements if self.small_elements else 0.0

    def to_json(self) -> dict:
        return {
            "elements": self.elements, "compared": self.compared, "special_mismatches": self.special_mismatches,
            "violations": self.violations, "max_abs_error": self.max_abs, "max_rel_error": self.max_rel,
            "mere": self.mere, "mare": self.max_rel, "rmse": self.rmse, "error_balance": self.error_balance,
            "max_ulp_error": self.max_ulp, "mean_ulp_error": self.mean_ulp, "small_error_rate": self.small_error_rate,
            "zero_golden_share": self.zero_goldens / self.compared if self.compared else 0.0,
            "relieved": self.relieved,
        }


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str  # which rule decided, with the numbers


Rule = Callable[[ElementErrors], np.ndarray]
