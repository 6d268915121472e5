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
from .fill import Fill, all_values_count, check_fits, parse_fill, parse_number
from .layout import Layout, from_spec
from .ops import OpSpec, find_op
from .ops.contract import SUCCESS, TensorDesc, broadcast_shape, check, rejections
from .standards import DEFAULT_STANDARD, find_standard

CASE_KEYS = ("name", "dtype", "shape", "product", "seed", "inputs", "tensors", "expect_status", "standard", "tolerance",
             "contract")
TENSOR_KEYS = ("shape", "dtype", "layout", "nullptr")
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
    null: bool = False


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
    expect_rule: str = ""  # for negative cases: the doc's rule that rejects the call
    tolerance: tuple[tuple[str, float], ...] = ()  # overrides of the standard's parameters

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


def _as_list(value: Any, is_single=lambda v: False) -> list:
    """A scalar, or a list of alternatives to expand over."""
    if isinstance(value, list) and not is_single(value):
        return value
    return [value]


def _is_single_shape(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(v, list) for v in value)


def load_file(path: str | Path) -> list[Case]:
    """Load and expand one case file: our YAML, or a foreign suite an importer recognises by content."""
    from . import importers

    path = Path(path)
    where = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read case file: {exc.strerror}", where=where) from None
    docs = importers.to_documents(path, data)
    if docs is None:
        docs = [parse_yaml(where, data)]
    out: list[Case] = []
    for doc in docs:
        out.extend(cases_from_doc(where, doc))
    return out


def parse_yaml(where: str, data: bytes) -> Any:
    """One YAML document, safely loaded."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CaseError(where, f"not UTF-8 text (byte {exc.start})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise CaseError(where, f"not valid YAML{at}: {getattr(exc, 'problem', exc)}") from None


def cases_from_doc(where: str, doc: Any) -> list[Case]:
    """Validate and expand one parsed case document (a YAML file, or what an importer built)."""
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
    seen: set[str] = set()
    for c in out:
        if c.case_id in seen:
            raise CaseError(where, f"two cases expand to the same id '{c.case_id}'", case=c.name, key="name")
        seen.add(c.case_id)
    return out


class _Spec:
    """One raw case (defaults merged), parsed into the pieces expansion combines."""

    def __init__(self, where: str, op: OpSpec, defaults: dict, raw: Any, index: int) -> None:
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
        self.where, self.op, self.name = where, op, name
        self.raw = {**defaults, **raw}
        self.fills = self._fills()
        self.overrides = self._overrides()
        self.products = [str(p) for p in _as_list(self.raw.get("product", DEFAULT_PRODUCT))]
        for p in self.products:
            if p not in op.products:
                raise self.err(f"{op.name} is not supported on product '{p}' (supported: {', '.join(op.products)})", "product")
        self.shapes = self._shapes()
        seed = self.raw.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise self.err(f"seed must be an integer in [0, 2^63), got {seed!r}", "seed")
        self.seed = seed
        self.status = _status(self.raw.get("expect_status", 0), self.err)
        self.standard = self.raw.get("standard")
        try:
            std = find_standard(self.standard or DEFAULT_STANDARD)
        except KeyError as exc:
            raise self.err(exc.args[0], "standard") from None
        tol = self.raw.get("tolerance") or {}
        if not isinstance(tol, dict):
            raise self.err("'tolerance' maps parameter names to numbers, e.g. {rtol: 0.001}", "tolerance")
        try:
            self.tolerance = tuple((str(k), parse_number(v)) for k, v in tol.items())
            std.params(D.FLOAT32, dict(self.tolerance))
        except (KeyError, ValueError) as exc:
            raise self.err(exc.args[0], "tolerance") from None
        self.contract = self.raw.get("contract", False)
        if not isinstance(self.contract, bool):
            raise self.err("'contract' is true or false", "contract")
        if self.contract and "expect_status" in raw:
            raise self.err("'contract: true' makes its own statuses; drop expect_status", "expect_status")

    def err(self, msg: str, key: str) -> CaseError:
        return CaseError(self.where, msg, case=self.name, key=key)

    def _fills(self) -> dict[str, Fill]:
        inputs = self.raw.get("inputs") or {}
        if not isinstance(inputs, dict):
            raise self.err("'inputs' must map input names to generators", "inputs")
        names = tuple(t.name for t in self.op.inputs)
        for key in inputs:
            if key not in names:
                raise self.err(_unknown_key(str(key), names), f"inputs.{key}")
        fills = {}
        for t in self.op.inputs:
            try:
                fills[t.name] = parse_fill(inputs.get(t.name, t.default_fill))
            except ValueError as exc:
                raise self.err(str(exc), f"inputs.{t.name}") from None
        return fills

    def _overrides(self) -> dict[str, dict]:
        tensors = self.raw.get("tensors") or {}
        if not isinstance(tensors, dict):
            raise self.err("'tensors' must map tensor names to {shape, dtype, layout, nullptr}", "tensors")
        names = tuple(t.name for t in self.op.tensors)
        for n, spec in tensors.items():
            if n not in names:
                raise self.err(_unknown_key(str(n), names), f"tensors.{n}")
            if not isinstance(spec, dict):
                raise self.err("must be a mapping of shape, dtype, layout, nullptr", f"tensors.{n}")
            for k in spec:
                if k is None:
                    raise self.err("YAML reads 'null:' as an empty key; write 'nullptr: true'", f"tensors.{n}")
                if k not in TENSOR_KEYS:
                    raise self.err(_unknown_key(str(k), TENSOR_KEYS), f"tensors.{n}.{k}")
            if "shape" in spec:
                spec = {**spec, "shape": self._one_shape(spec["shape"], f"tensors.{n}.shape")}
            if not isinstance(spec.get("nullptr", False), bool):
                raise self.err("'nullptr' is true or false", f"tensors.{n}.nullptr")
            tensors[n] = spec
        return tensors

    def _one_shape(self, s: Any, key: str) -> tuple[int, ...]:
        if isinstance(s, int) and not isinstance(s, bool):
            s = [s]
        if not isinstance(s, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in s):
            raise self.err(f"a shape is a list of integers, got {s!r}", key)
        if any(d < 0 for d in s):
            raise self.err(f"negative dimension in shape {s}", key)
        return tuple(s)

    def _shapes(self) -> list[tuple[int, ...] | None]:
        if "shape" not in self.raw:
            if any(f.kind == "all_values" for f in self.fills.values()):
                return [None]  # every bit pattern: the shape follows from the dtype
            raise self.err("missing 'shape' (only an all_values input makes it optional)", "shape")
        return [self._one_shape(s, "shape") for s in _as_list(self.raw["shape"], _is_single_shape)]

    def dtype(self, name: str) -> D.DType:
        try:
            return D.lookup(name)
        except KeyError as exc:
            raise self.err(exc.args[0], "dtype") from None


def _expand(where: str, op: OpSpec, defaults: dict, raw: Any, index: int) -> list[Case]:
    spec = _Spec(where, op, defaults, raw, index)
    per_tensor = {n: [spec.dtype(d) for d in _as_list(o["dtype"])] for n, o in spec.overrides.items() if "dtype" in o}
    varying = [n for n, ds in per_tensor.items() if len(ds) > 1]
    cases = []
    for product in spec.products:
        dtype_names = _as_list(spec.raw.get("dtype", list(op.products[product])))
        if len(per_tensor) == len(op.tensors):  # every tensor has its own dtype: the case-level one is moot
            dtype_names = dtype_names[:1]
        multi = {"dtype": len(dtype_names) > 1 or ("dtype" not in spec.raw and len(per_tensor) < len(op.tensors)),
                 "shape": len(spec.shapes) > 1, "product": len(spec.products) > 1}
        for dtype_name, shape in itertools.product(dtype_names, spec.shapes):
            dtype = spec.dtype(dtype_name)
            for combo in itertools.product(*(per_tensor[n] for n in per_tensor)):
                dtypes = {t.name: dtype for t in op.tensors} | dict(zip(per_tensor, combo))
                parts = [op.key, spec.name]
                if multi["dtype"]:
                    parts.append(dtype.name)
                if varying:
                    parts.append(".".join(_short(dtypes[n]) for n in varying))
                base_shape = shape if shape is not None else _exhaustive_shape(spec, dtypes)
                if multi["shape"]:
                    parts.append("x".join(map(str, base_shape)) or "scalar")
                if multi["product"]:
                    parts.append(product)
                cases.extend(_build(spec, product, dtypes, base_shape, parts))
    return cases


def _short(d: D.DType) -> str:
    return {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64"}[d.name]


def _exhaustive_shape(spec: _Spec, dtypes: dict[str, D.DType]) -> tuple[int, ...]:
    n = next(t for t, f in spec.fills.items() if f.kind == "all_values")
    return (all_values_count(dtypes[n]),) if dtypes[n].is16bit else (0,)


def _build(spec: _Spec, product: str, dtypes: dict[str, D.DType], shape: tuple[int, ...], parts: list[str]) -> list[Case]:
    op = spec.op
    shapes = {t.name: spec.overrides.get(t.name, {}).get("shape", shape) for t in op.inputs}
    out = op.output.name
    shapes[out] = spec.overrides.get(out, {}).get("shape") or broadcast_shape(*shapes.values()) or shape
    descs = {t.name: TensorDesc(dtypes[t.name], shapes[t.name], spec.overrides.get(t.name, {}).get("nullptr", False))
             for t in op.tensors}
    for t in op.inputs:
        problem = check_fits(spec.fills[t.name], dtypes[t.name])
        if problem:
            raise spec.err(problem, f"inputs.{t.name}")
        if spec.fills[t.name].kind == "all_values" and math.prod(shapes[t.name]) != all_values_count(dtypes[t.name]):
            raise spec.err(f"all_values gives {all_values_count(dtypes[t.name])} elements; shape {list(shapes[t.name])} "
                           f"holds {math.prod(shapes[t.name])} (leave shape out)", f"inputs.{t.name}")
    outcome = check(op, product, descs)
    status, rule = outcome.status, outcome.rule
    if spec.contract:
        if status != SUCCESS:
            raise spec.err(f"'contract: true' needs a valid base case, but {rule} ({status})", "contract")
        return [_case(spec, product, r.tensors, parts + [r.label], r.status, r.rule) for r in rejections(op, product, descs)]
    if status != spec.status:
        names = M_STATUS_NAMES
        if spec.status == SUCCESS:
            msg = (f"{op.name} rejects this call with {names[status]} ({status}): {rule}; "
                   f"set expect_status: {names[status]} to make it a negative case")
        elif status == SUCCESS:
            msg = f"expects {names[spec.status]} but {op.name} accepts this call on {product}"
        else:
            msg = f"expects {names[spec.status]} but {op.name} returns {names[status]}: {rule}"
        key = "expect_status" if status == SUCCESS else {"null": "tensors.*.nullptr"}.get(outcome.field, outcome.field)
        raise spec.err(msg, key)
    if status == SUCCESS and 0 in shapes[out] and not op.empty_ok:
        raise spec.err(f"{op.name} does not support empty tensors (shape {list(shapes[out])})", "shape")
    return [_case(spec, product, descs, parts, status, rule)]


def _case(spec: _Spec, product: str, descs: dict[str, TensorDesc], parts: list[str], status: int, rule: str) -> Case:
    tensors = []
    for slot, t in enumerate(spec.op.tensors):
        d = descs[t.name]
        layout_spec = spec.overrides.get(t.name, {}).get("layout") if status == SUCCESS else None
        try:
            layout = from_spec(d.shape, layout_spec)
        except ValueError as exc:
            raise spec.err(str(exc), f"tensors.{t.name}.layout") from None
        fill = spec.fills.get(t.name, Fill("constant", (0.0,)))
        if fill.kind == "all_values" and not d.dtype.is16bit:
            fill = Fill("uniform", (-1.0, 1.0))  # a rejection case that changed the dtype: any values do
        tensors.append(TensorCase(t.name, t.role, d.dtype, layout, fill, slot, d.null))
    return Case("-".join(parts), spec.name, spec.where, spec.op, product, spec.seed, status, spec.standard,
                tuple(tensors), rule, spec.tolerance)


M_STATUS_NAMES = {v: k for k, v in STATUSES.items()}


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


def collect_files(paths: list[str | Path]) -> list[Path]:
    """Case files from files and directories (directories: every *.yaml / *.yml, and every file an
    importer recognises by content, sorted)."""
    from . import importers

    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(q for q in p.rglob("*") if q.is_file() and (q.suffix in (".yaml", ".yml")
                                                                           or importers.recognises(q))))
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
            if c.case_id in owner:
                raise CaseError(str(f), f"case id '{c.case_id}' also comes from {owner[c.case_id]}", case=c.name, key="name")
            owner[c.case_id] = str(f)
            cases.append(c)
    return cases
