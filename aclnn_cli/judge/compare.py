"""Comparison as pure functions: arrays in, numbers and verdicts out. No I/O.

`element_errors` turns one chunk of (actual, golden) into per-element errors,
`Metrics` accumulates chunks (so tensors of any size stream through), and a
`Standard` (standards.py) turns Metrics into a verdict. All of them can be
exercised on hand-made arrays.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Callable

import numpy as np

from ..tensor.dtypes import DType
from .widening import _EXPONENT_BITS, _ulp_of_wide, ulp_at, ulp_of, widen
from .sums import error_sums, sum_squares
from .workspace import Buffers
from .complexerr import complex_errors

if TYPE_CHECKING:
    from .errorstats import ErrorStats  # (the report's data: imported by whoever gathers it)

# msprobe small-value thresholds: |g| <= small is judged by |a - g| <= atol.
Rule = Callable[["ElementErrors"], np.ndarray]
SMALL_VALUE = {"float16": (2.0**-10, 2.0**-16), "bfloat16": (2.0**-10, 2.0**-16), "float32": (2.0**-20, 2.0**-30),
               "float64": (2.0**-20, 2.0**-30)}
WORST_K = 5


@dataclass
class ElementErrors:
    """Errors of one chunk, in float32 (float64 for float64 data). rel is relative to the standard's denominator.

    Elements where a or g is not finite carry zero errors and count as `special` when they
    disagree (NaN must meet NaN, Inf the same-signed Inf).
    """

    a: np.ndarray
    g: np.ndarray
    abs: np.ndarray  # |a - g| (saturates at the float type's max)
    rel: np.ndarray  # abs / denominator
    signed: np.ndarray  # (|a| - |g|) / denominator: < 0 means toward zero
    ulp: np.ndarray | None  # abs in units of the output dtype's ulp at the golden's exponent (None: not measured)
    golden_abs: np.ndarray  # |g|
    dtype: DType
    nonfinite: np.ndarray  # indices where a or g is not finite
    special: np.ndarray  # indices of NaN/Inf (and, if asked, zero-sign) disagreements
    violation: np.ndarray | None = None  # breaks the standard's per-element rule (bool)
    nonzero_goldens: int | None = None  # count_nonzero(golden_abs), if known (element_errors counts it cheaply)
    relieved: np.ndarray | None = None  # indices that broke it until the op's relief re-judged them (comparison.py)

    @property
    def compared(self) -> int:
        return self.abs.size - self.nonfinite.size

    def subset(self, idx: np.ndarray) -> "ElementErrors":
        """The errors of elements idx alone (for a rule, which judges element by element)."""
        return ElementErrors(self.a[idx], self.g[idx], self.abs[idx], self.rel[idx], self.signed[idx],
                             None if self.ulp is None else self.ulp[idx], self.golden_abs[idx], self.dtype, NO_INDEX,
                             NO_INDEX)

    def flagged(self) -> np.ndarray:
        """Sorted positions the rule flagged or that are special: a mask, not np.union1d's sort (a broken kernel
        flags every element of every chunk, and sorting them was a sixth of its verify)."""
        if self.violation is None:
            return self.special
        if not self.special.size:
            return np.flatnonzero(self.violation)
        mask = self.violation.copy()
        mask[self.special] = True
        return np.flatnonzero(mask)

    @property
    def zero_sign(self) -> np.ndarray:
        return (self.a == 0) & (self.g == 0) & (np.signbit(self.a) != np.signbit(self.g))

    def small(self) -> tuple[int, int]:
        """(elements with |g| <= small value, those of them whose |a - g| exceeds the absolute bound)."""
        small_value, small_atol = SMALL_VALUE[self.dtype.name]
        small = self.golden_abs <= small_value
        small[self.nonfinite] = False
        return int(small.sum()), int((small & (self.abs > small_atol)).sum())


def special_mismatch(a: np.ndarray, g: np.ndarray, signed_zeros: bool = False) -> np.ndarray:
    """NaN must meet NaN; an Inf must meet the same-signed Inf; optionally -0 must meet -0."""
    nan_a, nan_g = np.isnan(a), np.isnan(g)
    with np.errstate(invalid="ignore"):
        bad = (nan_a != nan_g) | ((np.isinf(a) | np.isinf(g)) & (a != g) & ~nan_a & ~nan_g)
        if signed_zeros:
            bad |= (a == 0) & (g == 0) & (np.signbit(a) != np.signbit(g))
    return bad


NO_INDEX = np.empty(0, dtype=np.int64)
NO_INDEX.flags.writeable = False  # (shared by every chunk without non-finite elements)


def element_errors(a_native: np.ndarray, g_native: np.ndarray, floor: float, dtype: DType, *,
                   flush_ok: bool = True, signed_zeros: bool = False, bufs: Buffers | None = None,
                   complex_gamma: float | None = None, ulps: bool = True) -> ElementErrors:
    """Per-element errors of actual against golden, both as stored in `dtype` (one chunk).

    flush_ok: a zero where the golden is subnormal in `dtype` (flush-to-zero hardware) is exact; so is one
    below `floor` (a result rounded through a narrower compute dtype, flushed there).
    bufs: where the error arrays go (workspace.py: reused from chunk to chunk), else new arrays.
    complex_gamma: a complex output's relative error bound (judging.OutputJudging.complex_gamma).
    ulps: measure the ulp errors (else ulp is None: a verdict that reads none, printed to the console only).

    Computed in float32 (exact widening of every 16-bit and 32-bit value; the errors
    themselves carry float32 rounding, far below any threshold); float64 data in float64.
    """
    if dtype.is_integer:
        return integer_errors(a_native, g_native, floor, dtype)
    if dtype.is_complex:  # (in modulus, against the computation's allowance)
        if complex_gamma is None:
            raise ValueError(f"a {dtype.name} output is judged against its op's complex_gamma: none was given")
        return complex_errors(a_native, g_native, floor, dtype, complex_gamma)
    wide = a_native.dtype == np.float64 or g_native.dtype == np.float64  # hand-made or float64 data
    work = np.dtype(np.float64) if wide or dtype.itemsize == 8 else np.dtype(np.float32)
    buf = _numpy_allocates if bufs is None else bufs.get
    n = g_native.size
    with np.errstate(all="ignore"):
        a = widen(a_native, work, buf("a", work, n))
        g = widen(g_native, work, buf("g", work, n))
        abs_err = np.subtract(a, g, out=buf("abs", work, n))
        np.abs(abs_err, out=abs_err)
        golden_abs = np.abs(g, out=buf("golden_abs", work, n))
        # No golden below the floor (>= the dtype's smallest normal): the denominator is |g| itself, and no
        # ulp needs raising to the subnormal spacing (max(x, bound) is x for x >= bound, bit for bit).
        golden_abs_min = float(golden_abs.min()) if n else 0.0
        normal = bool(n and golden_abs_min >= floor and floor >= dtype.smallest_normal)
        den = golden_abs if normal else np.maximum(golden_abs, work.type(floor), out=buf("den", work, n))
        rel = np.divide(abs_err, den, out=buf("rel", work, n))
        signed = np.abs(a, out=buf("signed", work, n))
        signed -= golden_abs
        signed /= den
        if not ulps:
            ulp = None
        elif g_native.dtype != dtype.np_dtype:
            ulp = ulp_at(g, dtype)
        elif work == np.float32 and dtype.name in _EXPONENT_BITS:
            ulp = _ulp_of_wide(g, dtype, buf("ulp", work, n), normal)
        else:
            ulp = ulp_of(g_native, dtype, work)
        if ulp is not None:
            ulp = np.divide(abs_err, ulp, out=ulp)
    nonfinite = special = NO_INDEX
    if n and not rel[rel.argmax()] < np.inf:  # (argmax meets a NaN first: NaN or inf, a non-finite value or an
        odd = np.flatnonzero(~(rel < np.inf))  # overflowing difference)
        ao, go = a[odd], g[odd]
        fin = np.isfinite(ao) & np.isfinite(go)
        big = odd[fin]  # both finite, the difference overflowed the work type
        top = np.finfo(work).max
        with np.errstate(over="ignore"):
            wide = np.abs(ao[fin].astype(np.float64) - go[fin].astype(np.float64))
        abs_err[big] = np.minimum(wide, top)
        rel[big] = np.minimum(wide / np.maximum(np.abs(go[fin]).astype(np.float64), floor), top)
        if ulp is not None:
            ulp[big] = top
        nonfinite = odd[~fin]
        special = nonfinite[special_mismatch(ao[~fin], go[~fin])]
        for arr in (abs_err, rel, signed, ulp, golden_abs):
            if arr is not None:
                arr[nonfinite] = 0
    if flush_ok and not (normal and golden_abs_min > max(dtype.smallest_normal, floor)):  # (else none is flushed)
        is_zero = np.equal(a, 0, out=buf("is_zero", bool, n))
        zeros = np.flatnonzero(is_zero) if is_zero.any() else NO_INDEX
        if zeros.size:
            flushed = zeros[(golden_abs[zeros] <= max(dtype.smallest_normal, floor)) & (golden_abs[zeros] > 0)]
            for arr in (abs_err, rel, signed, ulp):
                if arr is not None:
                    arr[flushed] = 0
    if signed_zeros:
        zs = np.flatnonzero((a == 0) & (g == 0) & (np.signbit(a) != np.signbit(g)))
        special = np.union1d(special, zs)
    e = ElementErrors(a, g, abs_err, rel, signed, ulp, golden_abs, dtype, nonfinite, special)
    e.nonzero_goldens = n if normal and not nonfinite.size else _count_positive(golden_abs)  # (normal: none is 0)
    return e


def integer_errors(a_native: np.ndarray, g_native: np.ndarray, floor: float, dtype: DType) -> ElementErrors:
    """An integer output's errors. |a - g| from the integers themselves, as uint64 (its wrap-around gives the exact
    difference of any two int64s): float32 loses a difference of 1 above 2^24 and float64 above 2^53, and a
    difference read as 0 would pass a wrong element. Then in float64 (a difference >= 1 stays >= 1). An integer's
    ulp is 1, so the ulp error is the difference; nothing is non-finite."""
    ai, gi = np.asarray(a_native).astype(np.int64), np.asarray(g_native).astype(np.int64)
    u = np.uint64
    abs_err = np.where(ai >= gi, ai.view(u) - gi.view(u), gi.view(u) - ai.view(u)).astype(np.float64)
    a, g = ai.astype(np.float64), gi.astype(np.float64)
    golden_abs = np.abs(g)
    den = np.maximum(golden_abs, floor)
    e = ElementErrors(a, g, abs_err, abs_err / den, (np.abs(a) - golden_abs) / den, abs_err.copy(), golden_abs,
                      dtype, NO_INDEX, NO_INDEX)
    e.nonzero_goldens = int(np.count_nonzero(golden_abs))
    return e


def _numpy_allocates(name: str, dtype, n: int) -> None:
    """No buffer: out=None (numpy makes the array, as cheaply as it can)."""
    return None


def _count_positive(x: np.ndarray) -> int:
    """count_nonzero of values >= +0 (|g| from np.abs, zeroed with +0): on their bits, six times faster."""
    if x.dtype == np.float32:
        return int(np.count_nonzero(x.view(np.uint32)))
    if x.dtype == np.float64:
        return int(np.count_nonzero(x.view(np.uint64)))
    return int(np.count_nonzero(x))


def apply_rule(e: ElementErrors, rule: Rule) -> None:
    """Mark the elements that break a standard's per-element rule."""
    e.violation = rule(e)


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
    worst: list = field(default_factory=list)  # heap of (rel, -index): the WORST_K largest, ties to the first index
    errors: ErrorStats | None = None  # the report's histogram, sample and map (filled by the comparison)

    _COUNTS = ("elements", "compared", "special_mismatches", "violations", "relieved", "small_elements",
               "small_errors", "zero_goldens")

    def add(self, e: ElementErrors, base: int, index: np.ndarray | None = None, track_small: bool = False) -> None:
        """Fold in one chunk's errors; element i is logical index base + i, or index[i] if given."""
        self._settle()
        n = e.abs.size
        self.elements += n
        self.compared += e.compared
        if track_small:
            small, small_err = e.small()
            self.small_elements += small
            self.small_errors += small_err
        nonzero = e.nonzero_goldens if e.nonzero_goldens is not None else int(np.count_nonzero(e.golden_abs))
        self.zero_goldens += n - nonzero - e.nonfinite.size
        rel, signed, sq_abs, ulp = error_sums(e)
        self.sum_rel += rel
        self.sum_signed += signed
        self.sum_sq_abs += sq_abs
        self.sum_sq_golden += sum_squares(e.golden_abs) if track_small else 0.0
        self.sum_ulp += ulp
        if not n:
            return
        where = (lambda i: int(index[i])) if index is not None else (lambda i: base + int(i))
        if e.ulp is None:  # (NaN: the run's RMSE and ulp errors say "not measured", whatever else is added)
            self.max_ulp = math.nan
        elif not math.isnan(self.max_ulp):
            self.max_ulp = max(self.max_ulp, float(e.ulp[e.ulp.argmax()]))  # (argmax: max is 4x slower; both take NaN)
        i = int(e.abs.argmax())
        if e.abs[i] > self.max_abs:
            self.max_abs, self.max_abs_at = float(e.abs[i]), where(i)
        i = int(e.rel.argmax())
        chunk_max_rel = float(e.rel[i])
        if chunk_max_rel != chunk_max_rel:  # (argmax stops at a NaN ratio, an error nothing measured: the worst)
            chunk_max_rel = float("inf")
        if chunk_max_rel > self.max_rel:
            self.max_rel, self.max_rel_at = chunk_max_rel, where(i)
        if e.special.size:
            self.special_mismatches += int(e.special.size)
            first = where(e.special[0])
            if self.first_special < 0 or first < self.first_special:
                self.first_special = first
            for i in e.special[:WORST_K]:
                self._push((float("inf"), where(i)))
        if e.violation is not None:
            hits = int(np.count_nonzero(e.violation))
            if hits:
                self.violations += hits
                first = where(int(np.argmax(e.violation)))
                if self.first_violation < 0 or first < self.first_violation:
                    self.first_violation = first
        # The chunk's candidates for the worst k are picked when someone asks (a passing case never does):
        # before the next chunk, a merge, worst_indices() or pickling, so the result is the same.
        self._pending = (e.rel, chunk_max_rel, where)

    def _settle(self) -> None:
        """Fold the last chunk's candidates for the worst k into the heap."""
        pending = self.__dict__.pop("_pending", None)
        if pending is None:
            return
        rel, chunk_max_rel, where = pending
        floor = self.worst[0][0] if len(self.worst) >= WORST_K else 0.0
        if chunk_max_rel <= floor:  # nothing in this chunk enters the worst k: skip the scan
            return
        # The k largest over the floor, ties to the first: argmax k times, each taken out and put back (a
        # chunk of a new range has its whole chunk over the floor 0: selecting those first cost 6x more).
        r = rel if rel.flags.writeable else rel.copy()
        top, values = [], []
        for _ in range(min(WORST_K, r.size)):
            j = int(r.argmax())
            v = float(r[j])
            if not v > floor:
                break
            top.append(j)
            values.append(v)
            r[j] = -np.inf
        r[top] = values
        for j, v in zip(top, values):
            self._push((v, where(j)))

    def __getstate__(self) -> dict:
        self._settle()
        return self.__dict__

    def _push(self, item: tuple[float, int]) -> None:
        """Offer (rel, index) for the worst k. Among equal errors the lower index is kept, so which elements
        are named does not depend on how the tensor was cut into chunks and ranges."""
        item = (item[0], -item[1])
        if len(self.worst) < WORST_K:
            heapq.heappush(self.worst, item)
        elif item > self.worst[0]:
            heapq.heapreplace(self.worst, item)

    def merge(self, other: "Metrics") -> None:
        """Fold another chunk's (or worker's) metrics into this one."""
        self._settle()
        other._settle()
        for f in fields(self):
            if f.name.startswith("sum_") or f.name in self._COUNTS:
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        for n in ("max_abs", "max_rel"):
            if getattr(other, n) > getattr(self, n):
                setattr(self, n, getattr(other, n))
                setattr(self, f"{n}_at", getattr(other, f"{n}_at"))
        self.max_ulp = math.nan if math.isnan(other.max_ulp) else max(self.max_ulp, other.max_ulp)  # (NaN: unmeasured)
        for n in ("first_special", "first_violation"):
            mine, theirs = getattr(self, n), getattr(other, n)
            if theirs >= 0 and (mine < 0 or theirs < mine):
                setattr(self, n, theirs)
        for rel, neg in other.worst:
            self._push((rel, -neg))
        if self.errors is not None and other.errors is not None:
            self.errors.merge(other.errors)

    def worst_indices(self) -> list[int]:
        return [i for i, _ in self.worst_items()]

    def worst_items(self) -> list[tuple[int, float]]:
        """(index, judged relative error) of the worst elements, worst first: the errors the verdict used."""
        self._settle()
        return [(-neg, rel) for rel, neg in sorted(self.worst, reverse=True)]

    @property
    def mere(self) -> float:
        return self.sum_rel / self.compared if self.compared else 0.0

    @property
    def error_balance(self) -> float:
        """The mean signed error over the elements whose golden is not zero (balanced_elements): an exact zero met
        by a zero has no rounding to lean either way, and counting it diluted a bias (a max-pool gradient, most of
        it zeros, scaled by 1 + T/3 passed)."""
        n = self.balanced_elements
        return self.sum_signed / n if n > 0 else 0.0

    @property
    def balanced_elements(self) -> int:
        return self.compared - self.zero_goldens

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
