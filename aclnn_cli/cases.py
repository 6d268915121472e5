"""Case files: YAML in, validated and expanded `Case` objects out.

A file holds `op`, optional `defaults` and a list of `cases`. Lists under
dtype, shape or product expand into one case per combination. Every problem
is reported as a CaseError naming the file, the case and the key.
"""

from __future__ import annotations

import difflib
import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import dtypes as D
from .errors import CaseError, UserError
from .fill import Fill, all_values_count, check_fits, parse_fill
from .layout import Layout
from .ops import OpSpec, find_op

CASE_KEYS = ("name", "dtype", "shape", "product", "seed", "inputs", "expect_status", "standard")
TOP_KEYS = ("op", "defaults", "cases")
DEFAULT_PRODUCT = "A2"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
STATUSES = {"ACLNN_SUCCESS": 0, "ACLNN_ERR_PARAM_NULLPTR": 161001, "ACLNN_ERR_PARAM_INVALID": 161002}
MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class TensorCase:
    name: str
    role: str
    dtype: D.DType
    layout: Layout
    fill: Fill
    slot: int  # position in the op signature; part of the random stream's seed


@dataclass(frozen=True)
class Case:
    case_id: str
    name: str
    source: str
    op: OpSpec
    product: str
    seed: int
    expect_status: int
    standard: str | None
    tensors: tuple[TensorCase, ...]

    @property
    def inputs(self) -> tuple[TensorCase, ...]:
        return tuple(t for t in self.tensors if t.role == "input")

    @property
    def output(self) -> TensorCase:
        return next(t for t in self.tensors if t.role == "output")

    @property
    def numel(self) -> int:
        return self.output.layout.numel


def _unknown_key(key: str, valid: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"unknown key '{key}' (valid: {', '.join(valid)}){hint}"


def _as_list(value: Any, is_single) -> list:
    """A scalar, or a list of alternatives to expand over."""
    if isinstance(value, list) and not is_single(value):
        return value
    return [value]


def _is_single_shape(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(v, list) for v in value)


def load_file(path: str | Path) -> list[Case]:
    """Load and expand one case file."""
    path = Path(path)
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read case file: {exc.strerror}", where=where) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise CaseError(where, f"not valid YAML{at}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(doc, dict):
        raise CaseError(where, "a case file is a mapping with keys op, defaults, cases")
    for key in doc:
        if key not in TOP_KEYS:
            raise CaseError(where, _unknown_key(str(key), TOP_KEYS), key=str(key))
    if "op" not in doc:
        raise CaseError(where, "missing 'op'", key="op")
    try:
        op = find_op(doc["op"])
    except KeyError as exc:
        raise CaseError(where, exc.args[0], key="op") from None
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise CaseError(where, "'defaults' must be a mapping", key="defaults")
    for key in defaults:
        if key not in CASE_KEYS or key == "name":
            raise CaseError(where, _unknown_key(str(key), CASE_KEYS[1:]), key=f"defaults.{key}")
    raw_cases = doc.get("cases")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise CaseError(where, "'cases' must be a non-empty list", key="cases")
    out: list[Case] = []
    for i, raw in enumerate(raw_cases):
        out.extend(_expand(where, op, defaults, raw, i))
    _check_unique(where, out)
    return out


def _check_unique(where: str, cases: list[Case]) -> None:
    seen: set[str] = set()
    for c in cases:
        if c.case_id in seen:
            raise CaseError(where, f"two cases expand to the same id '{c.case_id}'", case=c.name, key="name")
        seen.add(c.case_id)


def _expand(where: str, op: OpSpec, defaults: dict, raw: Any, index: int) -> list[Case]:
    if not isinstance(raw, dict):
        raise CaseError(where, f"case #{index + 1} must be a mapping")
    name = raw.get("name")
    label = str(name) if name is not None else f"#{index + 1}"
    for key in raw:
        if key not in CASE_KEYS:
            raise CaseError(where, _unknown_key(str(key), CASE_KEYS), case=label, key=str(key))
    if not isinstance(name, str) or not NAME_RE.match(name) or ".." in name:
        raise CaseError(where, "needs a name of letters, digits, '_', '-' or '.' (at most 100, no '..')",
                        case=label, key="name")
    spec = {**defaults, **raw}

    def err(msg: str, key: str) -> CaseError:
        return CaseError(where, msg, case=name, key=key)

    inputs = spec.get("inputs") or {}
    if not isinstance(inputs, dict):
        raise err("'inputs' must map input names to generators", "inputs")
    input_names = tuple(t.name for t in op.inputs)
    fills: dict[str, Fill] = {}
    for t in op.inputs:
        try:
            fills[t.name] = parse_fill(inputs.get(t.name, t.default_fill))
        except ValueError as exc:
            raise err(str(exc), f"inputs.{t.name}") from None
    for key in inputs:
        if key not in input_names:
            raise err(_unknown_key(str(key), input_names), f"inputs.{key}")

    products = _as_list(spec.get("product", DEFAULT_PRODUCT), lambda v: False)
    for p in products:
        if str(p) not in op.products:
            raise err(f"{op.name} is not supported on product '{p}' (supported: {', '.join(op.products)})", "product")
    dtype_names = _as_list(spec.get("dtype", list(op.dtypes)), lambda v: False)
    shapes = _shapes(spec, fills, err)
    seed = spec.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise err(f"seed must be an integer in [0, 2^63), got {seed!r}", "seed")
    status = _status(spec.get("expect_status", 0), err)
    standard = spec.get("standard")
    if standard is not None and not isinstance(standard, str):
        raise err("'standard' must be a standard's name", "standard")

    multi = {"dtype": len(dtype_names) > 1 or "dtype" not in spec, "shape": len(shapes) > 1, "product": len(products) > 1}
    cases = []
    for product, dtype_name, shape in itertools.product(products, dtype_names, shapes):
        try:
            dtype = D.lookup(dtype_name)
        except KeyError as exc:
            raise err(exc.args[0], "dtype") from None
        if dtype.name not in op.products[str(product)]:
            raise err(f"{op.name} does not support {dtype.name} on {product} "
                      f"(supported: {', '.join(op.products[str(product)])})", "dtype")
        _check_shape(op, shape, err)
        for t in op.inputs:
            problem = check_fits(fills[t.name], dtype)
            if problem:
                raise err(problem, f"inputs.{t.name}")
        exhaustive = [t.name for t in op.inputs if fills[t.name].kind == "all_values"]
        if exhaustive and shape != (-1,) and math.prod(shape) != all_values_count(dtype):
            raise err(f"all_values gives {all_values_count(dtype)} elements; shape {list(shape)} holds "
                      f"{math.prod(shape)} (leave shape out)", f"inputs.{exhaustive[0]}")
        parts = [op.key, name]
        if multi["dtype"]:
            parts.append(dtype.name)
        if multi["shape"]:
            parts.append("x".join(map(str, shape)) or "scalar")
        if multi["product"]:
            parts.append(str(product))
        tensors = tuple(
            TensorCase(t.name, t.role, dtype, Layout.contiguous(tuple(shape)),
                       fills.get(t.name, Fill("constant", (0.0,))), slot)
            for slot, t in enumerate(op.tensors)
        )
        cases.append(Case("-".join(parts), name, where, op, str(product), seed, status, standard, tensors))
    return cases


def _shapes(spec: dict, fills: dict[str, Fill], err) -> list[tuple[int, ...]]:
    exhaustive = [n for n, f in fills.items() if f.kind == "all_values"]
    if "shape" not in spec:
        if exhaustive:
            return [(-1,)]  # resolved per dtype below: every bit pattern
        raise err("missing 'shape' (only an all_values input makes it optional)", "shape")
    shapes = _as_list(spec["shape"], _is_single_shape)
    out = []
    for s in shapes:
        if isinstance(s, int) and not isinstance(s, bool):
            s = [s]
        if not isinstance(s, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in s):
            raise err(f"a shape is a list of integers, got {s!r}", "shape")
        if any(d < 0 for d in s):
            raise err(f"negative dimension in shape {s}", "shape")
        out.append(tuple(s))
    return out


def _check_shape(op: OpSpec, shape: tuple[int, ...], err) -> None:
    lo, hi = op.dims
    if shape == (-1,):
        return
    if not lo <= len(shape) <= hi:
        raise err(f"{op.name} takes {lo}-{hi} dims, shape {list(shape)} has {len(shape)}", "shape")
    if math.prod(shape) == 0 and not op.empty_ok:
        raise err(f"{op.name} does not support empty tensors (shape {list(shape)})", "shape")


def _status(value: Any, err) -> int:
    if isinstance(value, bool):
        raise err(f"unknown status {value!r}", "expect_status")
    if isinstance(value, int) and value in STATUSES.values():
        return value
    if isinstance(value, str):
        key = value.strip().upper()
        for name, code in STATUSES.items():
            if key in (name, name.removeprefix("ACLNN_"), str(code)):
                return code
    raise err(f"unknown status {value!r} (valid: {', '.join(f'{k} ({v})' for k, v in STATUSES.items())})", "expect_status")


def resolve_exhaustive(case: Case) -> Case:
    """Replace the placeholder shape of an all_values case with one element per bit pattern."""
    if case.output.layout.shape != (-1,):
        return case
    n = all_values_count(case.output.dtype)
    tensors = tuple(TensorCase(t.name, t.role, t.dtype, Layout.contiguous((n,)), t.fill, t.slot) for t in case.tensors)
    return Case(case.case_id, case.name, case.source, case.op, case.product, case.seed, case.expect_status,
                case.standard, tensors)


def collect_files(paths: list[str | Path]) -> list[Path]:
    """Case files from files and directories (directories: every *.yaml / *.yml, sorted)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(q for q in p.rglob("*") if q.suffix in (".yaml", ".yml") and q.is_file()))
        elif p.is_file():
            files.append(p)
        else:
            raise UserError("no such file or directory", where=str(p))
    if not files:
        raise UserError("no case files (*.yaml) found", where=", ".join(map(str, paths)))
    return files


def load_cases(paths: list[str | Path]) -> list[Case]:
    """Every case of every file, expanded; case ids must be unique across files."""
    cases: list[Case] = []
    owner: dict[str, str] = {}
    for f in collect_files(paths):
        for c in load_file(f):
            c = resolve_exhaustive(c)
            if c.case_id in owner:
                raise CaseError(str(f), f"case id '{c.case_id}' also comes from {owner[c.case_id]}", case=c.name, key="name")
            owner[c.case_id] = str(f)
            cases.append(c)
    return cases
