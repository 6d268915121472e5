"""Foreign value ranges as our generators, and the seeds and choices an importer makes per case: the same bytes on
every re-import (a hash of the file's base name and the case's key)."""

from __future__ import annotations

import hashlib
import math
from typing import Sequence

import numpy as np

from ...tensor import dtypes as D

MAX_SPREAD = 1 << 16  # longest values list the "every combination" layout may produce


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\0".join(parts).encode()).digest()


def seed_for(basename: str, key: str) -> int:
    """The seed of a case: a hash of the file's base name and the case's key (re-imports give the same bytes)."""
    return int.from_bytes(_digest(basename, key)[:8], "big") >> 1


def unit(basename: str, key: str, what: str) -> float:
    """A deterministic number in [0, 1) for the per-case choices a foreign format leaves random."""
    return int.from_bytes(_digest(basename, key, what)[:7], "big") / 2.0**56


def yaml_number(v: float | int) -> float | int | str:
    """A number as our YAML writes it: nan/inf/-inf as strings (parse_number reads them)."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def fit(v: float | int, dtype: str) -> float | int:
    """A bound printed with too few digits to stay below the dtype's max (3.4028235e+38 for float32) is
    the dtype's max: it rounds there. A value that really overflows stays, and validation reports it."""
    d = D.lookup(dtype)
    if isinstance(v, float) and math.isfinite(v) and abs(v) > d.max_finite:
        with np.errstate(over="ignore"):
            rounded = D.round_from_f64(np.array([v]), d).astype(np.float64)[0]
        if np.isfinite(rounded):
            return math.copysign(d.max_finite, v)
    return v


def range_fill(values: Sequence[float | int], dtype: str) -> dict:
    """A foreign value range as our generator.

    [v] -> constant; [lo, hi] -> uniform (lo == hi: constant; an infinite bound is the dtype's max
    finite); anything else (3+ values, or NaN in a pair) -> values, repeated to fill the tensor.
    """
    if D.lookup(dtype).is_integer:
        return int_fill([_held(v, D.lookup(dtype)) for v in values])
    vals = [fit(v, dtype) for v in values]
    finite_max = D.lookup(dtype).max_finite
    if len(vals) == 1 or (len(vals) == 2 and _same(vals[0], vals[1])):
        return {"constant": yaml_number(vals[0])}
    if len(vals) == 2 and not any(isinstance(v, float) and math.isnan(v) for v in vals):
        lo, hi = (max(min(v, finite_max), -finite_max) if math.isinf(v) else v for v in vals)
        return {"uniform": [yaml_number(lo), yaml_number(hi)]}
    return {"values": [yaml_number(v) for v in vals]}


def _held(v: float | int, dtype: D.DType) -> float | int:
    """An infinity on an integer tensor as the dtype's extreme: held at its range, as a float range's infinite bound
    is the float dtype's max finite and as ATK's nd draws on an integer tensor are (decision 90). (A C cast of an
    infinity is undefined, and ATK documents none of its own: the saturating reading is the one with a meaning.)"""
    if isinstance(v, float) and math.isinf(v):
        lo, hi = dtype.int_range
        return hi if v > 0 else lo
    return v


def int_fill(values: Sequence[float | int]) -> dict:
    """An integer tensor's range: [lo, hi] -> randint over the integers in it (inclusive); [v] -> constant;
    3+ values -> values. A NaN has no integer: validation refuses what is left of it."""
    if len(values) == 2 and all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
        lo, hi = math.ceil(min(values)), math.floor(max(values))
        if lo <= hi:  # (else no integer lies in the range: the values as given, which validation refuses)
            return {"randint": [lo, hi]} if lo < hi else {"constant": lo}
    if len(values) == 1:
        return {"constant": yaml_number(values[0])}
    return {"values": [yaml_number(v) for v in values]}


def _same(a: float | int, b: float | int) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def spread(fills: dict[str, dict], names: Sequence[str]) -> dict[str, dict]:
    """Lay several inputs' value lists out so every combination occurs: the k-th such input repeats
    each of its values n_0*...*n_(k-1) times (while the lists stay under MAX_SPREAD entries)."""
    listed = [n for n in names if "values" in fills.get(n, {})]
    out, repeat = dict(fills), 1
    for n in listed:
        vals = fills[n]["values"]
        if len(listed) < 2 or repeat * len(vals) > MAX_SPREAD:
            break
        out[n] = {"values": [v for v in vals for _ in range(repeat)]}
        repeat *= len(vals)
    return out
