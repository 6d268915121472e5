"""Input generators ("fills"): how a case file says what values an input holds.

Random fills are drawn in fixed blocks of BLOCK elements, each seeded from
(seed, tensor slot, block number). Any chunk of a tensor can therefore be
produced on its own, and the bytes never depend on chunk size, worker count
or machine. Values are drawn in float64 and rounded once into the dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..dtypes import DType, round_from_f64
from .yamlsafe import show

BLOCK = 1 << 16
KINDS = ("uniform", "normal", "constant", "values", "all_values")


@dataclass(frozen=True)
class Fill:
    kind: str
    params: tuple  # uniform/normal: (a, b); constant: (v,); values: the literal values; all_values: ()

    def describe(self) -> dict:
        if self.kind == "all_values":
            return {"all_values": True}
        if self.kind == "constant":
            return {"constant": _json_float(self.params[0])}
        return {self.kind: [_json_float(v) for v in self.params]}


def _json_float(v: float) -> float | str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0 and math.copysign(1, v) < 0:
        return "-0.0"
    return v


def parse_number(value) -> float:
    """A YAML scalar as a float; accepts nan, inf, -inf and -0.0 spelled as strings too."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {show(value)}")
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # an int beyond float64: no dtype holds it
            raise ValueError(f"number {show(value)} is beyond float64's range") from None
    if isinstance(value, str):
        text = value.strip().lower().lstrip("+")
        named = {"nan": math.nan, ".nan": math.nan, "inf": math.inf, ".inf": math.inf,
                 "-inf": -math.inf, "-.inf": -math.inf, "infinity": math.inf, "-infinity": -math.inf}
        if text in named:
            return named[text]
        try:
            return float(text)
        except ValueError:
            pass
    raise ValueError(f"expected a number, got {show(value)}")


def parse_fill(spec) -> Fill:
    """Parse `{uniform: [lo, hi]}` and friends; ValueError says what is wrong."""
    if not isinstance(spec, dict) or len(spec) != 1:
        raise ValueError(f"a generator is one of {{{', '.join(KINDS)}}} with its argument, got {show(spec)}")
    (kind, arg), = spec.items()
    if kind not in KINDS:
        raise ValueError(f"unknown generator {show(kind)} (valid: {', '.join(KINDS)})")
    if kind in ("uniform", "normal"):
        if not isinstance(arg, (list, tuple)) or len(arg) != 2:
            raise ValueError(f"'{kind}' takes two numbers, got {show(arg)}")
        a, b = (parse_number(v) for v in arg)
        if not (math.isfinite(a) and math.isfinite(b)):
            raise ValueError(f"'{kind}' bounds must be finite, got {show(arg)}")
        if kind == "uniform" and a > b:
            raise ValueError(f"'uniform' needs lo <= hi, got {show(arg)}")
        if kind == "normal" and b < 0:
            raise ValueError(f"'normal' needs std >= 0, got {show(arg)}")
        return Fill(kind, (a, b))
    if kind == "constant":
        return Fill(kind, (parse_number(arg),))
    if kind == "values":
        if not isinstance(arg, (list, tuple)) or not arg:
            raise ValueError(f"'values' takes a non-empty list, got {show(arg)}")
        return Fill(kind, tuple(parse_number(v) for v in arg))
    if arg is not True:
        raise ValueError(f"'all_values' takes true, got {show(arg)}")
    return Fill(kind, ())


def check_fits(fill: Fill, dtype: DType) -> str | None:
    """Why this fill cannot be represented in dtype, or None."""
    if fill.kind == "all_values":
        return None if dtype.is16bit else f"'all_values' needs a 16-bit dtype, not {dtype.name}"
    if fill.kind == "normal":
        mean, std = fill.params
        span = abs(mean) + 6 * std
        return None if span <= dtype.max_finite else f"normal {list(fill.params)} overflows {dtype.name} (max {dtype.max_finite:g})"
    for v in fill.params:
        if math.isfinite(v) and abs(v) > dtype.max_finite:
            return f"value {v:g} overflows {dtype.name} (max {dtype.max_finite:g})"
    return None


def all_values_count(dtype: DType) -> int:
    return 1 << (8 * dtype.itemsize)


def generate(fill: Fill, dtype: DType, seed: int, slot: int, start: int, stop: int) -> np.ndarray:
    """Logical elements [start, stop) of a tensor filled by `fill`, in `dtype`."""
    n = stop - start
    if fill.kind == "all_values":
        return np.arange(start, stop, dtype=np.int64).astype(dtype.uint_dtype).view(dtype.np_dtype)
    if fill.kind == "constant":
        return round_from_f64(np.full(n, fill.params[0]), dtype)
    if fill.kind == "values":
        vals = np.array(fill.params, dtype=np.float64)
        return round_from_f64(vals[np.arange(start, stop) % len(vals)], dtype)
    return round_from_f64(_random_f64(fill, seed, slot, start, stop), dtype)


def _random_f64(fill: Fill, seed: int, slot: int, start: int, stop: int) -> np.ndarray:
    out = np.empty(stop - start, dtype=np.float64)
    first, last = start // BLOCK, (stop - 1) // BLOCK if stop > start else start // BLOCK - 1
    for block in range(first, last + 1):
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, slot, block])))
        lo, hi = max(start, block * BLOCK), min(stop, (block + 1) * BLOCK)
        # Draws are sequential: the first k of a block are the same however many are drawn, so a small
        # tensor draws only what it needs (pinned across the block boundary by tests).
        need = hi - block * BLOCK
        raw = rng.random(need) if fill.kind == "uniform" else rng.standard_normal(need)
        out[lo - start:hi - start] = raw[lo - block * BLOCK:hi - block * BLOCK]
    a, b = fill.params
    if fill.kind == "uniform":
        return a + (b - a) * out
    return a + b * out
