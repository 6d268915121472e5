"""Case files: YAML in, validated and expanded `Case` objects out.

A file holds `op`, optional `defaults` and a list of `cases`. Lists under
dtype, shape or product expand into one case per combination. Every problem
is reported as a CaseError naming the file, the case and the key; user values
appear in messages only through `show`/`clip`, never at full length.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import dtypes as D
from .errors import CaseError
from .fill import Fill, all_values_count, check_fits, parse_fill, parse_number
from .layout import Layout, from_spec
from .ops import OpSpec, find_op
from .ops.contract import SUCCESS, TensorDesc, broadcast_shape, check, compute_dtype, rejections
from .standards import DEFAULT_STANDARD, find_standard
from .yamlsafe import as_list, clip, collect_files, is_int, key_path, printable_path, read_file, show, unknown_key
from .yamlsafe import parse as parse_yaml

CASE_KEYS = ("name", "dtype", "shape", "product", "seed", "inputs", "tensors", "expect_status", "standard", "tolerance",
             "contract")
TENSOR_KEYS = ("shape", "dtype", "layout", "nullptr")
TOP_KEYS = ("op", "defaults", "cases")
DEFAULT_PRODUCT = "A2"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
STATUSES = {"ACLNN_SUCCESS": 0, "ACLNN_ERR_PARAM_NULLPTR": 161001, "ACLNN_ERR_PARAM_INVALID": 161002}
MAX_SEED = 2**63 - 1
# A case id is a directory name, and gen also makes `.<id>.partial-<pid>` / `.<id>.old-<pid>` next to it:
# 200 bytes leaves room for those within the usual 255-byte limit on a file name.
MAX_ID_BYTES = 200
MAX_CASES = 20_000  # per file: far beyond any real suite, and it stops a few lists multiplying into millions


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

    @property
    def storage_bytes(self) -> int:
        """Bytes of .bin files gen writes for this case (case.json aside), so a size limit can refuse it first.

        Every non-null tensor's whole storage (views with gaps or offsets write more than their elements),
        plus, for a positive case, the golden file, which has the output's storage size. Python ints:
        exact even for shapes whose byte count would overflow int64.
        """
        total = sum(t.layout.storage_size * t.dtype.itemsize for t in self.tensors if not t.null)
        out = self.output
        if self.expect_status == SUCCESS and not out.null:
            total += out.layout.storage_size * out.dtype.itemsize
        return total


def _is_single_shape(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(v, list) for v in value)


def load_file(path: str | Path) -> list[Case]:
    """Load and expand one case file: our YAML, or a foreign suite an importer recognises by content."""
    from . import importers

    path = Path(path)
    where = printable_path(path)
    data = read_file(path, where)
    docs = importers.to_documents(path, data)
    if docs is None:
        docs = [parse_yaml(where, data)]
    out: list[Case] = []
    for doc in docs:
        out.extend(cases_from_doc(where, doc))
    return out


def cases_from_doc(where: str, doc: Any) -> list[Case]:
    """Validate and expand one parsed case document (a YAML file, or what an importer built)."""
    if doc is None:
        raise CaseError(where, "empty case file (expected a mapping with keys op, defaults, cases)")
    if not isinstance(doc, dict):
        raise CaseError(where, "a case file is a mapping with keys op, defaults, cases")
    for key in doc:
        if key not in TOP_KEYS:
            raise CaseError(where, unknown_key(key, TOP_KEYS), key=key_path(key))
    if "op" not in doc:
        raise CaseError(where, "missing 'op'", key="op")
    if not isinstance(doc["op"], str):
        raise CaseError(where, f"'op' is an op name like aclnnSiluBackward, got {show(doc['op'])}", key="op")
    try:
        op = find_op(clip(doc["op"]))
    except KeyError as exc:
        raise CaseError(where, exc.args[0], key="op") from None
    defaults = doc.get("defaults")
    defaults = {} if defaults is None else defaults
    if not isinstance(defaults, dict):
        raise CaseError(where, f"'defaults' must be a mapping of case keys, got {show(defaults)}", key="defaults")
    for key in defaults:
        if key not in CASE_KEYS or key == "name":
            raise CaseError(where, unknown_key(key, CASE_KEYS[1:]), key=f"defaults.{key_path(key)}")
    raw_cases = doc.get("cases")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise CaseError(where, f"'cases' must be a non-empty list, got {show(raw_cases)}", key="cases")
    out: list[Case] = []
    for i, raw in enumerate(raw_cases):
        out.extend(_expand(where, op, defaults, raw, i, MAX_CASES - len(out)))
    seen: dict[str, str] = {}
    for c in out:
        fold = c.case_id.casefold()
        if fold in seen:
            other = seen[fold]
            how = f"the same id '{other}'" if other == c.case_id else \
                f"ids that differ only in case, '{other}' and '{c.case_id}' (one directory on macOS and Windows)"
            raise CaseError(where, f"two cases expand to {how}", case=c.name, key="name")
        seen[fold] = c.case_id
    return out


class _Spec:
    """One raw case (defaults merged), parsed into the pieces expansion combines.

    Everything a user wrote is type-checked here, before any expansion, so a wrong type is one
    clear error and never an exception from deeper code.
    """

    def __init__(self, where: str, op: OpSpec, defaults: dict, raw: Any, index: int) -> None:
        if not isinstance(raw, dict):
            raise CaseError(where, f"case #{index + 1} must be a mapping, got {show(raw)}")
        name = raw.get("name")
        label = clip(name) if isinstance(name, str) else f"#{index + 1}" if name is None else show(name)
        for key in raw:
            if key not in CASE_KEYS:
                raise CaseError(where, unknown_key(key, CASE_KEYS), case=label, key=key_path(key))
        if not isinstance(name, str) or not NAME_RE.fullmatch(name) or ".." in name:
            raise CaseError(where, "needs a name of letters, digits, '_', '-' or '.' (at most 100, no '..')",
                            case=label, key="name")
        self.where, self.op, self.name = where, op, name
        self.raw = {**defaults, **raw}
        self.fills = self._fills()
        self.overrides = self._overrides()
        self.products = self._products()
        self.shapes = self._shapes()
        self.dtypes = [self.dtype(d) for d in self._list("dtype", self.raw["dtype"])] if "dtype" in self.raw else None
        seed = self.raw.get("seed", 0)
        if not is_int(seed) or not 0 <= seed <= MAX_SEED:
            raise self.err(f"seed must be an integer in [0, 2^63), got {show(seed)}", "seed")
        self.seed = seed
        self.status = _status(self.raw.get("expect_status", 0), self.err)
        self.standard = self.raw.get("standard")
        if self.standard is not None and not isinstance(self.standard, str):
            raise self.err(f"'standard' is a name like {DEFAULT_STANDARD}, got {show(self.standard)}", "standard")
        try:
            self.std = find_standard(DEFAULT_STANDARD if self.standard is None else clip(self.standard))
        except KeyError as exc:
            raise self.err(exc.args[0], "standard") from None
        self.tolerance = self._tolerance()
        self.contract = self.raw.get("contract", False)
        if not isinstance(self.contract, bool):
            raise self.err(f"'contract' is true or false, got {show(self.contract)}", "contract")
        if self.contract and "expect_status" in raw:
            raise self.err("'contract: true' makes its own statuses; drop expect_status", "expect_status")

    def err(self, msg: str, key: str) -> CaseError:
        return CaseError(self.where, msg, case=self.name, key=key)

    def _mapping(self, key: str, what: str) -> dict:
        """A mapping-valued key; left out or null is empty, anything else (even [] or 0) is an error."""
        value = self.raw.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.err(f"'{key}' must map {what}, got {show(value)}", key)
        return value

    def _list(self, key: str, value: Any, is_single=lambda v: False) -> list:
        """The alternatives a key expands over; an empty list would silently make no cases."""
        values = as_list(value, is_single)
        if not values:
            raise self.err(f"'{key.rsplit('.', 1)[-1]}' is an empty list, which expands to no cases", key)
        return values

    def _fills(self) -> dict[str, Fill]:
        inputs = self._mapping("inputs", "input names to generators")
        names = tuple(t.name for t in self.op.inputs)
        for key in inputs:
            if key not in names:
                raise self.err(unknown_key(key, names), f"inputs.{key_path(key)}")
        fills = {}
        for t in self.op.inputs:
            try:
                fills[t.name] = parse_fill(inputs.get(t.name, t.default_fill))
            except ValueError as exc:
                raise self.err(str(exc), f"inputs.{t.name}") from None
        return fills

    def _overrides(self) -> dict[str, dict]:
        """Per-tensor keys, checked; shapes become tuples and dtypes lists of DType (new dicts: the raw
        ones may be shared with other cases through defaults or YAML aliases)."""
        tensors = self._mapping("tensors", "tensor names to {shape, dtype, layout, nullptr}")
        names = tuple(t.name for t in self.op.tensors)
        out = {}
        for n, spec in tensors.items():
            if n not in names:
                raise self.err(unknown_key(n, names), f"tensors.{key_path(n)}")
            if not isinstance(spec, dict):
                raise self.err(f"must be a mapping of shape, dtype, layout, nullptr, got {show(spec)}", f"tensors.{n}")
            for k in spec:
                if k is None:
                    raise self.err("YAML reads 'null:' as an empty key; write 'nullptr: true'", f"tensors.{n}")
                if k not in TENSOR_KEYS:
                    raise self.err(unknown_key(k, TENSOR_KEYS), f"tensors.{n}.{key_path(k)}")
            o = dict(spec)
            if "shape" in o:
                o["shape"] = self._one_shape(o["shape"], f"tensors.{n}.shape")
            if "dtype" in o:
                key = f"tensors.{n}.dtype"
                o["dtype"] = [self.dtype(d, key) for d in self._list(key, o["dtype"])]
            if not isinstance(o.get("nullptr", False), bool):
                raise self.err(f"'nullptr' is true or false, got {show(o['nullptr'])}", f"tensors.{n}.nullptr")
            out[n] = o
        return out

    def _products(self) -> list[str]:
        out = []
        for p in self._list("product", self.raw.get("product", DEFAULT_PRODUCT)):
            if not isinstance(p, str) and not (is_int(p) and 0 <= p < 10**6):
                raise self.err(f"a product is a name like A2 or \"950\", got {show(p)}", "product")
            p = clip(str(p))
            if p not in self.op.products:
                raise self.err(f"{self.op.name} is not supported on product '{p}' "
                               f"(supported: {', '.join(self.op.products)})", "product")
            out.append(p)
        return out

    def _one_shape(self, s: Any, key: str) -> tuple[int, ...]:
        if is_int(s):
            s = [s]
        if not isinstance(s, list) or not all(is_int(d) for d in s):
            raise self.err(f"a shape is a list of integers, got {show(s)}", key)
        if any(d < 0 for d in s):
            raise self.err(f"negative dimension in shape {show(s)}", key)
        if any(d > 2**64 for d in s):  # beyond any int64; larger ones are refused with their byte size later
            raise self.err(f"dimension over 2^64 in shape {show(s)}", key)
        return tuple(s)

    def _shapes(self) -> list[tuple[int, ...] | None]:
        if "shape" not in self.raw:
            if any(f.kind == "all_values" for f in self.fills.values()):
                return [None]  # every bit pattern: the shape follows from the dtype
            raise self.err("missing 'shape' (only an all_values input makes it optional)", "shape")
        return [self._one_shape(s, "shape") for s in self._list("shape", self.raw["shape"], _is_single_shape)]

    def _tolerance(self) -> tuple[tuple[str, float], ...]:
        """Overrides, checked against float32 here (its keys and ranges include every dtype's); each
        positive case checks them again against its own tolerance dtype in `_check_tolerance`."""
        tol = self._mapping("tolerance", "parameter names to numbers, e.g. {rtol: 0.001}")
        items, canonical = [], {}
        for k, v in tol.items():
            if not isinstance(k, str):
                raise self.err(f"a tolerance name is text like rtol, got {show(k)}", "tolerance")
            key, name = f"tolerance.{key_path(k)}", clip(k)
            try:
                x = parse_number(v)
                self.std.params(D.FLOAT32, {name: x})
            except (KeyError, ValueError) as exc:
                raise self.err(exc.args[0], key) from None
            first = canonical.setdefault((self.std.aliases or {}).get(name, name), name)
            if first != name:
                raise self.err(f"'{name}' and '{first}' set the same tolerance of standard '{self.std.name}'", key)
            items.append((name, x))
        return tuple(items)

    def dtype(self, name: Any, key: str = "dtype") -> D.DType:
        if not isinstance(name, str):
            raise self.err(f"a dtype is a name like float16, got {show(name)}", key)
        try:
            return D.lookup(clip(name))
        except KeyError as exc:
            raise self.err(exc.args[0], key) from None


def _expand(where: str, op: OpSpec, defaults: dict, raw: Any, index: int, budget: int) -> list[Case]:
    """One raw case's expansion; at most `budget` cases (what the file has left of MAX_CASES)."""
    spec = _Spec(where, op, defaults, raw, index)
    per_tensor = {n: o["dtype"] for n, o in spec.overrides.items() if "dtype" in o}
    varying = [n for n, ds in per_tensor.items() if len(ds) > 1]
    plan = []
    for product in spec.products:
        dtypes = spec.dtypes if spec.dtypes is not None else [D.lookup(n) for n in op.products[product]]
        if len(per_tensor) == len(op.tensors):  # every tensor has its own dtype: the case-level one is moot
            dtypes = dtypes[:1]
        plan.append((product, dtypes))
    total = sum(len(d) for _, d in plan) * len(spec.shapes) * math.prod(len(ds) for ds in per_tensor.values())
    if total > budget:
        lists = {"product": len(spec.products), "dtype": max(len(d) for _, d in plan), "shape": len(spec.shapes),
                 **{f"tensors.{n}.dtype": len(ds) for n, ds in per_tensor.items()}}
        key = max(lists, key=lambda k: lists[k])
        raise spec.err(f"expands to {total} cases, more than the {MAX_CASES} a case file may hold", key)
    cases = []
    for product, dtype_list in plan:
        multi = {"dtype": len(dtype_list) > 1 or ("dtype" not in spec.raw and len(per_tensor) < len(op.tensors)),
                 "shape": len(spec.shapes) > 1, "product": len(spec.products) > 1}
        for dtype, shape in itertools.product(dtype_list, spec.shapes):
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
                if len(cases) > budget:  # only 'contract: true' multiplies past the estimate
                    raise spec.err(f"expands to more than the {MAX_CASES} cases a case file may hold", "contract")
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
    b = broadcast_shape(*shapes.values())
    shapes[out] = spec.overrides.get(out, {}).get("shape", shape if b is None else b)  # an explicit () counts
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
    if status == SUCCESS:
        _check_tolerance(spec, dtypes)
    return [_case(spec, product, descs, parts, status, rule)]


def _check_tolerance(spec: _Spec, dtypes: dict[str, D.DType]) -> None:
    """The overrides against the dtype verify will judge this case in: the output's, or the coarser
    compute dtype a promoting op rounds through (as `verify.tolerance_dtype`)."""
    out = dtypes[spec.op.output.name]
    judged = min((out, compute_dtype(spec.op, dtypes)), key=lambda d: d.precision)
    for k, v in spec.tolerance:
        try:
            spec.std.params(judged, {k: v})
        except KeyError as exc:
            raise spec.err(f"{exc.args[0]} for {judged.name} results", f"tolerance.{k}") from None
        except ValueError as exc:
            raise spec.err(exc.args[0], f"tolerance.{k}") from None


def _case(spec: _Spec, product: str, descs: dict[str, TensorDesc], parts: list[str], status: int, rule: str) -> Case:
    case_id = "-".join(parts)
    if len(case_id.encode()) > MAX_ID_BYTES:
        raise spec.err(f"case id '{clip(case_id)}' is {len(case_id.encode())} bytes, but it names a directory "
                       f"(at most {MAX_ID_BYTES}): use a shorter name, or fewer or shorter shapes in the list", "name")
    tensors = []
    for slot, t in enumerate(spec.op.tensors):
        d = descs[t.name]
        override = spec.overrides.get(t.name, {})
        layout_spec = override.get("layout") if status == SUCCESS else None
        try:
            layout = from_spec(d.shape, layout_spec, d.dtype.itemsize)
        except ValueError as exc:  # a layout the user gave, or else the shape is at fault (too large)
            key = f"tensors.{t.name}.layout" if layout_spec is not None else \
                f"tensors.{t.name}.shape" if "shape" in override else "shape"
            raise spec.err(str(exc), key) from None
        fill = spec.fills.get(t.name, Fill("constant", (0.0,)))
        if fill.kind == "all_values" and not d.dtype.is16bit:
            fill = Fill("uniform", (-1.0, 1.0))  # a rejection case that changed the dtype: any values do
        tensors.append(TensorCase(t.name, t.role, d.dtype, layout, fill, slot, d.null))
    return Case(case_id, spec.name, spec.where, spec.op, product, spec.seed, status, spec.standard,
                tuple(tensors), rule, spec.tolerance)


M_STATUS_NAMES = {v: k for k, v in STATUSES.items()}


def _status(value: Any, err) -> int:
    if is_int(value) and value in STATUSES.values():
        return value
    if isinstance(value, str):
        key = value.strip().upper()
        for name, code in STATUSES.items():
            if key in (name, name.removeprefix("ACLNN_"), str(code)):
                return code
    raise err(f"unknown status {show(value)} (valid: {', '.join(f'{k} ({v})' for k, v in STATUSES.items())})", "expect_status")


def load_cases(paths: list[str | Path]) -> list[Case]:
    """Every case of every file, expanded; case ids must be unique across files (ignoring case: one
    directory on macOS and Windows)."""
    cases: list[Case] = []
    owner: dict[str, tuple[str, str]] = {}
    for f in collect_files(paths):
        for c in load_file(f):
            fold = c.case_id.casefold()
            if fold in owner:
                other, where = owner[fold]
                same = "" if other == c.case_id else f" (as '{other}', differing only in case)"
                raise CaseError(printable_path(f), f"case id '{c.case_id}' also comes from {where}{same}",
                                case=c.name, key="name")
            owner[fold] = (c.case_id, printable_path(f))
            cases.append(c)
    return cases
