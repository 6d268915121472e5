"""Comparison as pure functions: arrays in, numbers and verdicts out. No I/O.

`element_errors` turns one chunk of (actual, golden) into per-element errors,
`Metrics` accumulates chunks (so tensors of any size stream through), and a
`Standard` turns Metrics into a verdict. All of them can be exercised on
hand-made arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Callable

import numpy as np

from .dtypes import DType

# MERE/MARE thresholds T (CANN ops precision standard): pass if MERE < T and MARE < 10 T.
MERE_T = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-13}


@dataclass
class ElementErrors:
    """Errors of one chunk. rel is already relative to the standard's denominator."""

    abs: np.ndarray  # |a - g| where both finite, else 0
    rel: np.ndarray  # abs / denominator where both finite, else 0
    signed: np.ndarray  # (|a| - |g|) / denominator: < 0 means toward zero
    ulp: np.ndarray  # abs in units of the output dtype's ulp at the golden's exponent
    special: np.ndarray  # NaN/Inf disagreement (bool)
    finite: np.ndarray  # both finite (bool)
    violation: np.ndarray  # breaks the standard's per-element rule (bool)


def ulp_at(g: np.ndarray, dtype: DType) -> np.ndarray:
    """One ulp of `dtype` at the exponent of |g| (never below the subnormal spacing)."""
    _, e = np.frexp(np.abs(g))  # frexp(0) gives exponent 0: zero belongs to the smallest binade
    e = np.where(g == 0, dtype.emin, np.maximum(e - 1, dtype.emin))
    return np.ldexp(1.0, e - dtype.precision + 1)


def special_mismatch(a: np.ndarray, g: np.ndarray) -> np.ndarray:
    """NaN must meet NaN; an Inf must meet the same-signed Inf."""
    nan_a, nan_g = np.isnan(a), np.isnan(g)
    with np.errstate(invalid="ignore"):
        inf_diff = (np.isinf(a) | np.isinf(g)) & (a != g) & ~nan_a & ~nan_g
    return (nan_a != nan_g) | inf_diff


def element_errors(a: np.ndarray, g: np.ndarray, denominator: np.ndarray, dtype: DType,
                   rule: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]) -> ElementErrors:
    """Per-element errors of actual `a` against golden `g` (float64 arrays of one chunk)."""
    finite = np.isfinite(a) & np.isfinite(g)
    a0, g0 = np.where(finite, a, 0.0), np.where(finite, g, 0.0)
    abs_err = np.abs(a0 - g0)
    den = np.where(finite, denominator, 1.0)
    rel = abs_err / den
    signed = (np.abs(a0) - np.abs(g0)) / den
    ulp = abs_err / ulp_at(g0, dtype)
    violation = rule(abs_err, rel, g0) & finite
    return ElementErrors(abs_err, rel, signed, ulp, special_mismatch(a, g), finite, violation)


@dataclass
class Metrics:
    """Streaming summary of a comparison; merge chunks in any order."""

    elements: int = 0
    compared: int = 0
    special_mismatches: int = 0
    first_special: int = -1
    violations: int = 0
    first_violation: int = -1
    sum_rel: float = 0.0
    sum_signed: float = 0.0
    sum_sq_abs: float = 0.0
    sum_ulp: float = 0.0
    max_abs: float = 0.0
    max_abs_at: int = -1
    max_rel: float = 0.0
    max_rel_at: int = -1
    max_ulp: float = 0.0
    relieved: int = 0  # elements the op's knowledge (scale, edge, flush-to-zero) turned from bad to good

    def add(self, e: ElementErrors, base: int) -> None:
        n = e.abs.size
        self.elements += n
        self.compared += int(e.finite.sum())
        self.sum_rel += float(e.rel.sum())
        self.sum_signed += float(e.signed.sum())
        self.sum_sq_abs += float(np.dot(e.abs, e.abs))
        self.sum_ulp += float(e.ulp.sum())
        if n:
            self.max_ulp = max(self.max_ulp, float(e.ulp.max()))
            for attr, arr in (("abs", e.abs), ("rel", e.rel)):
                i = int(np.argmax(arr))
                if arr[i] > getattr(self, f"max_{attr}"):
                    setattr(self, f"max_{attr}", float(arr[i]))
                    setattr(self, f"max_{attr}_at", base + i)
        for name, mask in (("special", e.special), ("violation", e.violation)):
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
            n = f.name
            if n.startswith("sum_") or n in ("elements", "compared", "special_mismatches", "violations", "relieved"):
                setattr(self, n, getattr(self, n) + getattr(other, n))
        for n in ("max_abs", "max_rel"):
            if getattr(other, n) > getattr(self, n):
                setattr(self, n, getattr(other, n))
                setattr(self, f"{n}_at", getattr(other, f"{n}_at"))
        self.max_ulp = max(self.max_ulp, other.max_ulp)
        for n in ("first_special", "first_violation"):
            mine, theirs = getattr(self, n), getattr(other, n)
            if theirs >= 0 and (mine < 0 or theirs < mine):
                setattr(self, n, theirs)

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

    def to_json(self) -> dict:
        return {
            "elements": self.elements, "compared": self.compared, "special_mismatches": self.special_mismatches,
            "violations": self.violations, "max_abs_error": self.max_abs, "max_rel_error": self.max_rel,
            "mere": self.mere, "mare": self.max_rel, "rmse": self.rmse, "error_balance": self.error_balance,
            "max_ulp_error": self.max_ulp, "mean_ulp_error": self.mean_ulp, "relieved": self.relieved,
        }


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str  # which rule decided, with the numbers


@dataclass(frozen=True)
class Standard:
    """A named precision standard.

    floor: the relative-error denominator's small-value floor for a dtype.
    rule: per-element (abs, rel, golden) -> breaks the element bound.
    judge: Metrics -> Verdict. relief: whether flagged elements may be re-judged
    against the op's term scale (condition-aware), the device's edge results
    and flush-to-zero (see verify.py).
    """

    name: str
    summary: str
    source: str
    floor: Callable[[DType], float]
    rule: Callable[[DType], Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]]
    judge: Callable[[Metrics, DType], Verdict]
    relief: bool = False
    thresholds: dict = field(default_factory=dict)


def _specials(m: Metrics) -> Verdict | None:
    if m.special_mismatches:
        return Verdict(False, f"{m.special_mismatches} NaN/Inf mismatches (first at element {m.first_special})")
    return None


def _judge_mere_mare(m: Metrics, dtype: DType) -> Verdict:
    bad = _specials(m)
    if bad:
        return bad
    t = MERE_T[dtype.name]
    if m.mere >= t:
        return Verdict(False, f"MERE {m.mere:.3g} >= T {t:.3g}")
    if m.max_rel >= 10 * t:
        return Verdict(False, f"MARE {m.max_rel:.3g} >= 10T {10 * t:.3g} (element {m.max_rel_at})")
    return Verdict(True, f"MERE {m.mere:.3g} < {t:.3g}, MARE {m.max_rel:.3g} < {10 * t:.3g}")


def _judge_no_violations(label: str):
    def judge(m: Metrics, dtype: DType) -> Verdict:
        bad = _specials(m)
        if bad:
            return bad
        if m.violations:
            return Verdict(False, f"{m.violations} elements break the {label} bound (first at element {m.first_violation})")
        return Verdict(True, f"all {m.compared} finite elements within the {label} bound")
    return judge


ALLCLOSE = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5)}  # rtol, atol
ABS_THRESHOLD = {  # rtol, small_value, atol (msprobe)
    "float16": (2.0**-10, 2.0**-10, 2.0**-16), "bfloat16": (2.0**-8, 2.0**-10, 2.0**-16),
    "float32": (2.0**-20, 2.0**-20, 2.0**-30),
}

STANDARDS: dict[str, Standard] = {}


def _register(s: Standard) -> Standard:
    STANDARDS[s.name] = s
    return s


_register(Standard(
    "mere-mare", "mean relative error < T and max relative error < 10T; relative error uses a small-value "
    "floor and, where it exceeds T, the condition-aware scale", "CANN ops precision standard (+ floor)",
    floor=lambda d: d.smallest_normal,
    rule=lambda d: (lambda ae, re, g: re >= MERE_T[d.name]),
    judge=_judge_mere_mare, relief=True, thresholds=MERE_T,
))
_register(Standard(
    "allclose", "|a - g| <= atol + rtol |g| for every element", "PyTorch assert_close defaults",
    floor=lambda d: d.smallest_normal,
    rule=lambda d: (lambda ae, re, g: ae > ALLCLOSE[d.name][1] + ALLCLOSE[d.name][0] * np.abs(g)),
    judge=_judge_no_violations("allclose"), thresholds=ALLCLOSE,
))
_register(Standard(
    "absolute-threshold", "|g| > small: |a-g|/|g| <= rtol; else |a-g| <= atol; for every element",
    "msprobe API accuracy checker",
    floor=lambda d: d.smallest_normal,
    rule=lambda d: (lambda ae, re, g: np.where(np.abs(g) > ABS_THRESHOLD[d.name][1],
                                               ae > ABS_THRESHOLD[d.name][0] * np.abs(g), ae > ABS_THRESHOLD[d.name][2])),
    judge=_judge_no_violations("absolute-threshold"), thresholds=ABS_THRESHOLD,
))

DEFAULT_STANDARD = "mere-mare"


def find_standard(name: str) -> Standard:
    if name not in STANDARDS:
        raise KeyError(f"unknown standard '{name}' (valid: {', '.join(STANDARDS)})")
    return STANDARDS[name]
