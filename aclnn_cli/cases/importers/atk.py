"""ATK JSON (the aclnn test kit's case list) -> our case documents.

A file is a JSON list of cases: {id, name, aclnn_name, api_type, standard, inputs: [{name, type,
required, dtype, shape, range_values, backward, align_32B, outlier_values}]}. Inputs carry aclnn
names (gradOutput, self, buffer), so they map by name. docs/importing.md has the field-by-field table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ...errors import CaseError
from ...ops import OpSpec
from .common import (Collector, TensorIn, as_number, case_entry, check_format, check_keys, dtype_name, errors,
                     json_cases, json_head, range_fill, resolve_op, safe_name, seed_for, shape_of, show, unit)

NAME = "ATK JSON"
# Case keys: the ones that matter, and the ones that describe ATK's own run (benchmark, accuracy
# standard, API wrapper names), which we read past on purpose (docs/importing.md says why).
CASE_KEYS = ("id", "aclnn_name", "inputs", "name", "api_type", "aclnn_api_type", "standard", "is_boundary")
INPUT_KEYS = ("name", "type", "dtype", "shape", "range_values", "required", "backward", "align_32B",
              "outlier_values", "format")
ND_KEYS = ("name", "mean", "std")


def sniff(head: bytes) -> bool:
    return json_head(head, b'"aclnn_name"', b'"range_values"')


def read(where: str, basename: str, data: bytes, out: Collector) -> None:
    """Every case of one ATK file into `out`."""
    stem = Path(basename).stem
    for i, raw in enumerate(json_cases(where, data, NAME)):
        key = str(raw.get("id", i))
        name = safe_name(f"{stem}-{key}")
        out.add(name, lambda raw=raw, name=name, key=key: _case(where, stem, raw, name, key))


def _case(where: str, stem: str, raw: dict, name: str, key: str) -> tuple[OpSpec, dict]:
    bad, unsupported = errors(where, name)
    check_keys(raw, CASE_KEYS, "ATK case", bad)
    op, _ = resolve_op(raw.get("aclnn_name"), lambda m: unsupported(m, "aclnn_name"))
    inputs = raw.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise bad("'inputs' must be a non-empty list", "inputs")
    names = tuple(t.name for t in op.inputs)
    tensors: dict[str, TensorIn] = {}
    for j, inp in enumerate(inputs):
        where_key = f"inputs[{j}]"
        if not isinstance(inp, dict):
            raise unsupported(f"a tensor list input is not supported ({op.name} takes single tensors)", where_key)
        check_keys(inp, INPUT_KEYS, "ATK input", bad, f"{where_key}.")
        n = inp.get("name")
        if n not in names:
            raise unsupported(f"{show(n)} is not an input of {op.name} (inputs: {', '.join(names)})",
                              f"{where_key}.name")
        if n in tensors:
            raise bad(f"input {show(n)} appears twice", f"{where_key}.name")
        tensors[n] = _tensor(inp, stem, key, n, lambda m, k: bad(m, f"{n}.{k}"),
                             lambda m, k: unsupported(m, f"{n}.{k}"))
    return op, case_entry(op, name, seed_for(stem, key), tensors)


def _tensor(inp: dict, stem: str, key: str, n: str, bad: Callable[..., CaseError],
            unsupported: Callable[..., CaseError]) -> TensorIn:
    if inp.get("type", "tensor") != "tensor":
        raise unsupported(f"ATK input type {show(inp.get('type'))} is not supported (only tensors)", "type")
    if inp.get("align_32B") not in (None, False):
        raise unsupported(f"align_32B {show(inp['align_32B'])} is not supported (aclnn-cli writes packed storage)",
                          "align_32B")
    if inp.get("outlier_values") not in (None, []):
        raise unsupported("outlier_values are not supported: write the outliers as a separate case with "
                          "a values generator", "outlier_values")
    check_format(inp.get("format"), lambda m: unsupported(m, "format"))
    if "dtype" not in inp or "shape" not in inp or "range_values" not in inp:
        raise bad("an ATK tensor input needs dtype, shape and range_values", "dtype")
    dtype = dtype_name(inp["dtype"], lambda m: unsupported(m, "dtype"))
    shape = shape_of(inp["shape"], bad, "shape")
    return TensorIn(dtype, shape, _fill(inp["range_values"], dtype, stem, f"{key}\0{n}", bad, unsupported))


def _fill(rv: Any, dtype: str, stem: str, key: str, bad: Callable[..., CaseError],
          unsupported: Callable[..., CaseError]) -> dict:
    """range_values -> our generator: a list is a range or values (common.range_fill); {"name": "nd", "mean":
    [a, b], "std": [c, d]} is a normal whose mean and std are drawn per case from [a, b] and [c, d]."""
    if isinstance(rv, list):
        if not rv:
            raise bad("range_values is empty", "range_values")
        try:
            return range_fill([as_number(v) for v in rv], dtype)
        except ValueError as exc:
            raise unsupported(f"range_values {show(rv)}: {exc}", "range_values") from None
    if isinstance(rv, dict):
        if rv.get("name") != "nd":
            raise unsupported(f"distribution {show(rv.get('name'))} is not supported (only 'nd')", "range_values.name")
        check_keys(rv, ND_KEYS, "nd distribution", unsupported, "range_values.")
        mean = _draw(rv.get("mean"), unit(stem, key, "mean"), bad, "range_values.mean")
        std = _draw(rv.get("std"), unit(stem, key, "std"), bad, "range_values.std")
        return {"normal": [mean, std]}
    raise bad(f"range_values must be a list or an nd distribution, got {show(rv)}", "range_values")


def _draw(span: Any, u: float, bad: Callable[..., CaseError], key: str) -> float | int:
    """A point of [lo, hi] at fraction u, to 6 significant digits (readable YAML, still inside the span)."""
    if isinstance(span, (int, float)) and not isinstance(span, bool):
        span = [span, span]
    try:
        lo, hi = (as_number(v) for v in span)
    except (TypeError, ValueError):
        raise bad(f"expected [lo, hi], got {show(span)}", key) from None
    if not lo <= hi:
        raise bad(f"expected [lo, hi] with lo <= hi, got {show(span)}", key)
    if lo == hi:
        return lo
    return min(max(float(f"{lo + (hi - lo) * u:.6g}"), lo), hi)
