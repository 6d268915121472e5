"""Which tolerance values a standard accepts: ranges that follow from one property.

A value is accepted only if, with it, a sign-flipped result and an all-zero result of ordinary
magnitude still FAIL, for every op and dtype; and a value no result could ever meet is refused
too. docs/decisions.md ("Tolerance ranges that follow from the property") derives each range;
in short, a case is of *ordinary magnitude* when

- at least ORDINARY_SHARE (a quarter) of its elements are *informative*: a finite golden that is
  normal in the judged dtype (not zero, not subnormal, so not flushed), at least half the op's
  term scale (the relief of the default standard divides by at most 2|g| there) and not at one
  of the op's documented device edge results;
- at least one informative element has |golden| >= ORDINARY_MAGNITUDE (1/8): absolute bounds
  must stay below something, and a gradient of gradOutput ~ N(0, 1) is of that order;
- the benchmark kernel (emulated, float32 compute) is within BENCHMARK_RMS ulps of the golden in
  RMS (measured: at most ~5 over the registry's ops and dtypes).

Ranges are data (`Range`, `Joint`) so that messages, docs and the property tests read the same
numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

from ..tensor.dtypes import DType

ORDINARY_SHARE = 0.25  # informative elements in a case of ordinary magnitude, at least
ORDINARY_MAGNITUDE = 0.125  # |golden| of at least one informative element
RELIEF_SCALE = 2.0  # an informative element's term scale is at most this times |golden|
BENCHMARK_RMS = 16.0  # benchmark RMSE under this many 2^-p * rms(golden) (measured <= ~5)
MAX_FACTOR = 1e6  # multipliers with nothing to bound them from the property: a sanity cap

RELATIVE_MAX = 0.5  # a zero result is 1 off, a sign flip 2: a factor 2 below the smaller
# An absolute bound (allclose: atol + rtol|g|) at most 3/4 of an ordinary golden's magnitude: a zero
# result there is at least 4/3 of it. With rtol at its top (1/2), atol <= 1/32.
ABSOLUTE_MAX = 0.75 * ORDINARY_MAGNITUDE
SMALL_MAX = 0.1  # where the absolute bound takes over: atol carries the property, any small is safe
MARE_T_MAX = 1 / RELIEF_SCALE  # a zero result's relieved error at an informative element, at least


class ToleranceError(ValueError):
    """A refused tolerance value; `key` is the one to name (as the user spelled it)."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


def _fmt(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class Range:
    """Accepted values lo < x <= hi (closed_lo: lo <= x; open_hi: x < hi); hi may follow the dtype."""

    what: str  # "a relative error": what the value is, for the message
    lo: float
    hi: float | Callable[[DType], float]
    closed_lo: bool = False
    open_hi: bool = False

    @property
    def per_dtype(self) -> bool:
        return callable(self.hi)

    def bounds(self, dtype: DType) -> tuple[float, float]:
        return self.lo, (self.hi(dtype) if callable(self.hi) else self.hi)

    def contains(self, x: float, dtype: DType) -> bool:
        lo, hi = self.bounds(dtype)
        return (lo <= x if self.closed_lo else lo < x) and (x < hi if self.open_hi else x <= hi)

    def text(self, dtype: DType) -> str:
        lo, hi = self.bounds(dtype)
        return f"{'[' if self.closed_lo else '('}{_fmt(lo)}, {_fmt(hi)}{')' if self.open_hi else ']'}"

    def extremes(self, dtype: DType) -> tuple[float, float]:
        """The smallest and largest accepted values (the next float inside an open end)."""
        lo, hi = self.bounds(dtype)
        return (lo if self.closed_lo else math.nextafter(lo, math.inf),
                math.nextafter(hi, -math.inf) if self.open_hi else hi)


@dataclass(frozen=True)
class Joint:
    """A bound on keys that combine: their product (weights None) or weighted sum is at most `limit`."""

    keys: tuple[str, ...]
    limit: float
    why: str  # one clause: what the bound keeps failing
    weights: tuple[float, ...] | None = None

    def value(self, p: Mapping[str, float]) -> float:
        if self.weights is None:
            return math.prod(p[k] for k in self.keys)
        return math.fsum(w * p[k] for w, k in zip(self.weights, self.keys))

    def holds(self, p: Mapping[str, float]) -> bool:
        return self.value(p) <= self.limit

    def top(self, key: str, p: Mapping[str, float]) -> float:
        """The largest value of `key` the bound allows with the other keys as in p."""
        if self.weights is None:
            return self.limit / math.prod(p[k] for k in self.keys if k != key)
        w = dict(zip(self.keys, self.weights))
        return (self.limit - math.fsum(w[k] * p[k] for k in self.keys if k != key)) / w[key]

    def text(self) -> str:
        if self.weights is None:
            return "*".join(self.keys)
        return " + ".join(k if w == 1 else f"{_fmt(w)}*{k}" for w, k in zip(self.weights, self.keys))


def relative() -> Range:
    return Range("a relative error", 0.0, RELATIVE_MAX)


def factor() -> Range:
    return Range("a factor", 0.0, MAX_FACTOR)


def ulps_max(dtype: DType) -> float:
    """A zero result at a normal golden is at least 2^(p-1) ulps off: a factor 2 below."""
    return 2.0 ** (dtype.precision - 2)


def mean_ulps_max(dtype: DType) -> float:
    """A quarter of the elements at least 2^(p-1) ulps off: the mean is at least 2^(p-3)."""
    return ORDINARY_SHARE * 2.0 ** (dtype.precision - 1)


def ratio_max(dtype: DType) -> float:
    """A zero result's RMSE is rms(golden): 2^p / BENCHMARK_RMS times the benchmark's, at least."""
    return min(2.0 ** dtype.precision / BENCHMARK_RMS, MAX_FACTOR)


def check_value(std: str, key: str, shown: str, rng: Range, value, dtype: DType) -> float:
    """A tolerance value as a float; ToleranceError naming the key, the standard and the range unless valid.

    Every value must be a finite number (a NaN threshold makes every comparison false) in its range.
    """
    tail = f" (standard '{std}')"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ToleranceError(f"tolerance '{shown}' must be a number, got {_short(value)}{tail}", shown)
    try:
        x = float(value)
    except (ValueError, OverflowError):
        raise ToleranceError(f"tolerance '{shown}' must be a number, got {_short(value)}{tail}", shown) from None
    if not math.isfinite(x):
        raise ToleranceError(f"tolerance '{shown}' must be finite, got {x}{tail}", shown)
    if not rng.contains(x, dtype):
        where = f" for {dtype.name}" if rng.per_dtype else ""
        raise ToleranceError(f"tolerance '{shown}' must be {rng.what} in {rng.text(dtype)}{where}, got {_fmt(x)}{tail}",
                             shown)
    return x


def check_joints(std: str, ranges: Mapping[str, Range], joints: tuple[Joint, ...], p: Mapping[str, float],
                 names: Mapping[str, str], dtype: DType) -> None:
    """Each joint bound on the merged parameters p; names: canonical key -> the user's spelling, for
    the keys the user set (the one named is the last of them: the one that broke it)."""
    for j in joints:
        if j.holds(p):
            continue
        key = ([k for k in j.keys if k in names] or list(j.keys))[-1]
        shown = names.get(key, key)
        shown_values = ", ".join(f"{k} {_fmt(p[k])}" for k in j.keys)
        others = ", ".join(f"{k} {_fmt(p[k])}" for k in j.keys if k != key)
        rng = ranges[key]
        lo, hi = rng.bounds(dtype)
        top = min(hi, j.top(key, p))
        left = f"{key} must be in {'[' if rng.closed_lo else '('}{_fmt(lo)}, {_fmt(top)}]" if top > lo else \
            f"no {key} is accepted"
        raise ToleranceError(f"tolerance '{shown}': {j.text()} = {_fmt(j.value(p))} ({shown_values}) must be at most "
                             f"{_fmt(j.limit)} ({j.why}); with {others}, {left} (standard '{std}')", shown)


def _short(value, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
