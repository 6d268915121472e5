"""A case's error data (verify JSON's `errors`, see judge/errorstats.py) read back for plots: checked, as arrays.

Results files may hold anything: `read_errors` refuses what is not the documented shape with a message
naming the key, which `report` turns into one line naming file and case (exit 2), never a traceback.
Needs only NumPy (and the op declarations for the term scale): the plotting lives in plots.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


@dataclass
class ErrorMap:
    rows: int
    cols: int
    block: tuple[int, int]
    ulp_max: np.ndarray  # [grid rows, grid cols]: largest |ulp error| per block
    flagged: np.ndarray | None  # the same grid: flagged elements per block (None: none anywhere)


@dataclass
class ErrorData:
    judged_dtype: str | None
    floor: float
    attributes: dict
    exact: int
    nonfinite: int
    toward_zero: list[tuple[int, int]]  # (k, count): |ulp error| in [2^k, 2^(k+1)), |actual| < |expected|
    away_from_zero: list[tuple[int, int]]
    index: np.ndarray
    expected: np.ndarray
    actual: np.ndarray
    ulp_error: np.ndarray  # signed: negative toward zero
    flagged: np.ndarray  # bool
    inputs: dict[str, np.ndarray]
    flagged_total: int
    relieved_total: int
    map: ErrorMap | None

    @property
    def abs_error(self) -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore"):
            return np.abs(self.actual - self.expected)

    def relative_to(self, scale: np.ndarray | float) -> np.ndarray:
        """|actual - expected| / max(|expected|, scale, floor): with scale 0, the plain relative error."""
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return self.abs_error / np.maximum(np.maximum(np.abs(self.expected), scale), self.floor)


def errors_problem(data) -> str | None:
    """Why verify JSON's `errors` of one case cannot be read (None: it can, or it is null)."""
    if data is None:
        return None
    try:
        read_errors(data)
    except ValueError as exc:
        return f"'errors': {exc}"
    return None


def read_errors(data: dict) -> ErrorData:
    """ErrorData from verify JSON's `errors`; ValueError naming the key that is not as documented."""
    _need(isinstance(data, dict), "", "an object")
    hist, sample, emap = data.get("ulp_histogram"), data.get("sample"), data.get("map")
    _need(isinstance(hist, dict), "ulp_histogram", "an object")
    _need(isinstance(sample, dict), "sample", "an object")
    index = np.array(_ints(sample.get("index"), "sample.index"), dtype=np.int64)
    n = index.size
    columns = {key: _numbers(sample.get(key), f"sample.{key}", n) for key in ("expected", "actual", "ulp_error")}
    flagged = np.array(_ints(sample.get("flagged"), "sample.flagged", n), dtype=bool)
    inputs = sample.get("inputs")
    _need(isinstance(inputs, dict) and all(isinstance(k, str) for k in inputs), "sample.inputs", "an object")
    floor = data.get("floor", 0.0)
    _need(_is_number(floor) and float(floor) >= 0, "floor", "a number >= 0")
    attributes = data.get("attributes") or {}
    _need(isinstance(attributes, dict), "attributes", "an object")
    judged = data.get("judged_dtype")
    _need(judged is None or isinstance(judged, str), "judged_dtype", "a string")
    return ErrorData(
        judged, float(floor), attributes, _count(hist.get("exact"), "ulp_histogram.exact"),
        _count(hist.get("nonfinite"), "ulp_histogram.nonfinite"),
        _bins(hist.get("toward_zero"), "ulp_histogram.toward_zero"),
        _bins(hist.get("away_from_zero"), "ulp_histogram.away_from_zero"),
        index, columns["expected"], columns["actual"], columns["ulp_error"], flagged,
        {k: _numbers(v, f"sample.inputs.{k[:40]}", n) for k, v in inputs.items()},
        _count(sample.get("flagged_total", int(flagged.sum())), "sample.flagged_total"),
        _count(sample.get("relieved_total", 0), "sample.relieved_total"), None if emap is None else _map(emap))


def _need(ok: bool, key: str, what: str) -> None:
    if not ok:
        raise ValueError(f"{key or 'errors'} must be {what}")


def _is_number(x) -> bool:
    return (isinstance(x, (int, float)) and not isinstance(x, bool)) or isinstance(x, str) and x in NONFINITE


_PLAIN_NUMBERS = frozenset((float, int))  # (a list of these alone converts without a look at each: most lists)


def _numbers(values, key: str, n: int | None = None) -> np.ndarray:
    _need(isinstance(values, list) and (n is None or len(values) == n), key,
          "a list of numbers" + ("" if n is None else f" as long as sample.index ({n})"))
    try:
        if set(map(type, values)) <= _PLAIN_NUMBERS:
            return np.array(values, dtype=np.float64)
        return np.array([NONFINITE[x] if isinstance(x, str) else x for x in values], dtype=np.float64)
    except (KeyError, TypeError, ValueError, OverflowError):
        raise ValueError(f"{key} must be a list of numbers (non-finite ones as \"nan\", \"inf\", \"-inf\")") from None


def _whole(values, low: int) -> bool:
    """Whether values (a list) are ints from low to 2^62 (int64 arrays), looked at in C: lists of thousands."""
    return set(map(type, values)) <= {int} and (not values or (min(values) >= low and max(values) <= 2**62))


def _ints(values, key: str, n: int | None = None) -> list[int]:
    ok = isinstance(values, list) and (n is None or len(values) == n)
    _need(ok and _whole(values, -2**62), key, "a list of integers" + ("" if n is None else f" ({n})"))
    return values


def _count(value, key: str) -> int:
    _need(type(value) is int and value >= 0, key, "an integer >= 0")
    return value


def _bins(values, key: str) -> list[tuple[int, int]]:
    _need(isinstance(values, list), key, "a list of [k, count] pairs")
    out = []
    for pair in values:
        _need(isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is int and abs(pair[0]) <= 2000,
              key, "a list of [k, count] pairs (|k| <= 2000)")
        out.append((pair[0], _count(pair[1], key)))
    return out


def _map(emap) -> ErrorMap:
    _need(isinstance(emap, dict), "map", "an object or null")
    rows, cols, block = emap.get("rows"), emap.get("cols"), emap.get("block")
    _need(type(rows) is int and type(cols) is int and rows > 0 and cols > 0, "map.rows/cols", "integers > 0")
    _need(isinstance(block, list) and len(block) == 2 and all(type(b) is int and b > 0 for b in block),
          "map.block", "[rows, cols] of a block, integers > 0")
    grid = (-(-rows // block[0]), -(-cols // block[1]))
    ulp = emap.get("ulp_max")
    _need(isinstance(ulp, list) and len(ulp) == grid[0] and all(isinstance(r, list) and len(r) == grid[1] for r in ulp),
          "map.ulp_max", f"{grid[0]} rows of {grid[1]} numbers")
    ulp_max = np.array([_numbers(r, "map.ulp_max") for r in ulp]).reshape(grid)
    flagged = emap.get("flagged")
    if flagged is not None:
        ok = isinstance(flagged, list) and len(flagged) == grid[0] and all(
            isinstance(r, list) and len(r) == grid[1] and _whole(r, 0) for r in flagged)
        _need(ok, "map.flagged", f"null or {grid[0]} rows of {grid[1]} counts")
        flagged = np.array(flagged, dtype=np.int64).reshape(grid)
    return ErrorMap(rows, cols, (block[0], block[1]), ulp_max, flagged)


def term_scale(op_name: str, data: ErrorData) -> np.ndarray | None:
    """The op's magnitude of the terms that cancel (what the default gate's relief judges against) at the
    sample's inputs, or None where it cannot be had (an op not loaded here, a sample without inputs)."""
    from ..ops import find_op
    from ..values.attrvalues import NUMBER_KINDS

    try:
        op = find_op(op_name)
    except KeyError:
        return None
    if not data.index.size or set(data.inputs) != {t.name for t in op.tensors if t.role == "input"}:
        return None
    attributes = {}
    for spec in getattr(op, "attributes", ()):
        value = data.attributes.get(spec.name, spec.default)
        if spec.kind in NUMBER_KINDS and value is not None:
            value = NONFINITE.get(value, value) if isinstance(value, str) else float(value)
        elif spec.kind == "int_list" and isinstance(value, list):
            value = tuple(value)
        attributes[spec.name] = value
    try:
        with np.errstate(all="ignore"):
            scale = np.asarray(op.golden_f64({**data.inputs, **attributes}).scale, dtype=np.float64)
    except Exception:  # (an op's own code, on values it may not expect: the plot goes without the scale)
        return None
    return np.broadcast_to(scale, data.index.shape) if scale.size in (1, data.index.size) else None
