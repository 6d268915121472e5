"""One case as gen writes it: its tensors (dtype, layout, fill) and what the op's functions receive, built from a
case file's validated spec (loader.py expands the file; this builds each combination: shapes from the family,
fills, layouts, the contract's verdict, the standard and tolerance that will judge it).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping

from ..tensor import dtypes as D
from .attributes import Combo, values as attribute_values, with_case_values
from ..ops.declcheck import describe
from .spec import MAX_ID_BYTES, ByKind, Spec as _Spec
from ..values.fill import Constant, Fill, Uniform, all_values_count, check_fits, parse_fill
from ..tensor.layout import Layout, from_spec
from ..ops import OpSpec
from ..tensor.status import NAMES as STATUS_NAMES, SUCCESS
from ..ops.contract import TensorDesc, check, rejections, rounded_through, roundings
from ..standards.rules import fixed_standard, integer_refusal
from ..standards.tolerances import ToleranceError
from ..files.lazy import cached_attribute
from ..files.text import clip


@dataclass(frozen=True)
class TensorCase:
    name: str
    role: str
    dtype: D.DType
    layout: Layout
    fill: Fill
    slot: int  # position in the op signature; part of the random stream's seed
    null: bool = False

    @cached_attribute
    def described(self) -> list:
        """What decides this tensor's bytes, for the case's fingerprint (golden/fingerprint.py): made once, as
        tensors are shared by the cases of a file."""
        return [self.name, self.role, self.dtype.name, self.null, self.slot, self.layout.to_json(), self.fill.describe()]


@dataclass(frozen=True, slots=True)  # (slots: a run may hold tens of thousands)
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
    attributes: Combo = ()  # (name, value) per attribute of the op; None: a null pointer
    shard: str = ""  # "I/N" when a sharded gen wrote it (case.json says so: a per-shard verify needs its record)

    @property
    def attribute_values(self) -> dict:
        """What the op's functions receive: the attributes, defaults where a null pointer was passed, and the
        op's case_values (from the shapes)."""
        return with_case_values(self.op, attribute_values(self.op, self.attributes), self.tensors)

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
        if self.expect_status == SUCCESS:
            total += sum(t.layout.storage_size * t.dtype.itemsize for t in self.tensors if t.role == "output" and not t.null)
        return total


def own_dtype(t, dtype: D.DType) -> D.DType:
    """A tensor's dtype where the case gives only the case-level one: that one, unless the tensor has its own
    dtype list without it (NLL's target beside a float32 case: int64; RmsNorm's rstd: float32), then the list's first."""
    if t.dtypes is None or dtype.name in t.dtypes:
        return dtype
    return D.lookup(t.dtypes[0])


def short_dtype(d: D.DType) -> str:
    return {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
            "int32": "i32", "uint8": "u8", "int16": "i16", "int8": "i8"}.get(d.name, d.name)


def fill_for(spec: _Spec, name: str, shapes: Mapping[str, tuple[int, ...]], values: Mapping,
             dtype: D.DType | None = None) -> Fill:
    """An input's fill for one case: the case's, or the op's default (a callable one called with the case's
    tensor shapes and attribute values; one with an integer_fill picked by the case's dtype)."""
    fill = spec.fills[name]
    if isinstance(fill, ByKind):
        return fill.pick(dtype)
    if isinstance(fill, Fill):
        return fill
    try:
        return parse_fill(fill(dict(shapes), dict(values)))
    except Exception as exc:  # (the op's own function: any failure is one line naming it)
        raise spec.err(f"{spec.op.name}'s default fill for {name}: {describe(exc, 200)}", f"inputs.{name}") from None


def exhaustive_shape(spec: _Spec, dtypes: dict[str, D.DType]) -> tuple[int, ...]:
    n = next(t for t, f in spec.fills.items() if f.kind == "all_values")
    return (all_values_count(dtypes[n]),) if dtypes[n].is16bit else (0,)


def build_cases(spec: _Spec, product: str, dtypes: dict[str, D.DType], shape: tuple[int, ...], parts: list[str],
           attrs: Combo = ()) -> list[Case]:
    op = spec.op
    out = op.output.name
    given = {n: tuple(o["shape"]) for n, o in spec.overrides.items() if "shape" in o}
    try:  # (the case's shape is the family's case tensor's: the output's, or a Rows op's driver's)
        shapes = op.family.case_shapes(op, tuple(shape), attribute_values(op, attrs), given)
    except (KeyError, ValueError, TypeError, IndexError) as exc:
        raise spec.err(f"cannot shape {op.name}'s tensors from {list(shape)}: {exc}", "shape") from None
    descs = {t.name: TensorDesc(dtypes[t.name], shapes[t.name], spec.overrides.get(t.name, {}).get("nullptr", False))
             for t in op.tensors}
    live = {descs[n].dtype for n in descs if not descs[n].null}
    if len(live) > 1 and any(d.is_complex for d in live):  # (the API promotes; its cast to a complex out is unmodelled)
        raise spec.err("a complex call takes every tensor in that one complex dtype here (aclnn-cli does not model "
                       "the API's promotion between complex and other dtypes), got " +
                       ", ".join(f"{n} {descs[n].dtype.name}" for n in descs if not descs[n].null), "dtype")
    values = attribute_values(op, attrs)
    fills = {t.name: fill_for(spec, t.name, shapes, values, dtypes[t.name]) for t in op.inputs}
    for t in op.inputs:
        if descs[t.name].null:
            continue
        problem = check_fits(fills[t.name], dtypes[t.name])
        if fills[t.name].kind == "derived" and t.name not in op.derived:
            problem = f"{op.name} does not derive {t.name} from its other inputs: give its values"
        if problem:
            raise spec.err(problem, f"inputs.{t.name}")
        if fills[t.name].kind == "all_values" and math.prod(shapes[t.name]) != all_values_count(dtypes[t.name]):
            raise spec.err(f"all_values gives {all_values_count(dtypes[t.name])} elements; shape {list(shapes[t.name])} "
                           f"holds {math.prod(shapes[t.name])} (leave shape out)", f"inputs.{t.name}")
    outcome = check(op, product, descs, dict(attrs))
    status, rule = outcome.status, outcome.rule
    if spec.exact and status == SUCCESS:
        fills.update(_exact_fills(spec, {n: s for n, s in shapes.items() if not descs[n].null}, values, dtypes))
    if status == SUCCESS:  # (an accepted call whose shapes the family cannot relate would get wrong goldens)
        live = {n: s for n, s in shapes.items() if not descs[n].null}
        try:
            problem = op.family.shape_problem(op, live, values)
        except (KeyError, ValueError, TypeError, IndexError) as exc:
            problem = f"cannot cut it into the family's pieces: {exc}"
        if problem:
            raise spec.err(f"{op.name} accepts these shapes, but {problem}", "shape")
    if spec.contract:
        if status != SUCCESS:
            raise spec.err(f"'contract: true' needs a valid base case, but {rule} ({status})", "contract")
        return [_case(spec, product, r.tensors, parts + [r.label], r.status, r.rule, attrs, fills)
                for r in rejections(op, product, descs, dict(attrs))]
    if status != spec.status:
        names = STATUS_NAMES
        if spec.status == SUCCESS:
            msg = (f"{op.name} rejects this call with {names[status]} ({status}): {rule}; "
                   f"set expect_status: {names[status]} to make it a negative case")
        elif status == SUCCESS:
            msg = f"expects {names[spec.status]} but {op.name} accepts this call on {product}"
        else:
            msg = f"expects {names[spec.status]} but {op.name} returns {names[status]}: {rule}"
        key = "expect_status" if status == SUCCESS else outcome.field
        raise spec.err(msg, key)
    if status == SUCCESS and 0 in shapes[out] and not op.empty_ok:
        raise spec.err(f"{op.name} does not support empty tensors (shape {list(shapes[out])})", "shape")
    if status == SUCCESS:
        _check_tolerance(spec, dtypes, values, shapes)
    return [_case(spec, product, descs, parts, status, rule, attrs, fills)]


def _exact_fills(spec: _Spec, shapes, values, dtypes) -> dict[str, Fill]:
    """The family's fills for `fill: exact` (ops/families/exact.py); one line where it has none or K is too large
    for the output's dtype, or where the case gives an operand's values itself."""
    got = spec.op.family.exact_fills(spec.op, shapes, values, dtypes)
    if isinstance(got, str):
        raise spec.err(f"fill: exact: {got}", "fill")
    for name in sorted(set(got) & spec.given_inputs):
        raise spec.err(f"'fill: exact' chooses {name}'s values; drop inputs.{name}", f"inputs.{name}")
    return got


def _check_tolerance(spec: _Spec, dtypes: dict[str, D.DType], values: Mapping, shapes: Mapping) -> None:
    """The overrides against the dtype verify will judge this case in: the output's, or the coarser
    compute dtype a promoting op rounds through (as `verify.tolerance_dtype`)."""
    judged = min(roundings(spec.op, spec.op.output.name, dtypes,
                           rounded_through(spec.op, spec.op.output.name, values, dtypes, shapes)), key=lambda d: d.precision)
    refusal = integer_refusal(judged, spec.standard, spec.tolerance)
    if refusal:
        raise spec.err(refusal, "standard" if spec.standard not in (None, fixed_standard(judged)) else "tolerance")
    if fixed_standard(judged):
        return
    for k, v in spec.tolerance:
        try:
            spec.std.check_key(k, v, judged)
        except KeyError as exc:
            raise spec.err(f"{exc.args[0]} for {judged.name} results", f"tolerance.{k}") from None
        except ValueError as exc:
            raise spec.err(exc.args[0], f"tolerance.{k}") from None
    try:
        spec.std.params(judged, dict(spec.tolerance))  # the keys together: joint bounds (mere-mare's mare*T)
    except ToleranceError as exc:
        raise spec.err(f"{exc.args[0]} for {judged.name} results", f"tolerance.{exc.key}") from None


def _case(spec: _Spec, product: str, descs: dict[str, TensorDesc], parts: list[str], status: int, rule: str,
          attrs: Combo = (), fills: Mapping[str, Fill] | None = None) -> Case:
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
            layout = _contiguous(tuple(d.shape), d.dtype.itemsize) if layout_spec in (None, "contiguous") else \
                from_spec(d.shape, layout_spec, d.dtype.itemsize)
        except ValueError as exc:  # a layout the user gave, or else the shape is at fault (too large)
            key = f"tensors.{t.name}.layout" if layout_spec is not None else \
                f"tensors.{t.name}.shape" if "shape" in override else "shape"
            raise spec.err(str(exc), key) from None
        if t.role == "output" and layout_spec not in (None, "contiguous") and not d.null and layout.overlaps():
            raise spec.err(f"the output view (shape {list(layout.shape)}, strides {list(layout.strides)}) puts two of "
                           f"{t.name}'s elements on one storage position: the device's result there is whichever "
                           "write lands last, so no golden can judge it (overlapping input views are fine)",
                           f"tensors.{t.name}.layout")
        fill = (fills or {}).get(t.name, Constant((0.0,)))
        if status != SUCCESS and (fill.check(d.dtype) or fill.kind == "derived"):  # a rejection case that changed
            # the dtype: any values do; a derived input (the forward's indices of a call refused) is zeros
            fill = Uniform((-1.0, 1.0)) if not d.dtype.is_integer else Constant((0.0,))
        tensors.append(_shared(TensorCase(t.name, t.role, d.dtype, layout, fill, slot, d.null)))
    return Case(case_id, spec.name, spec.where, spec.op, product, spec.seed, status, spec.standard,
                tuple(tensors), rule, spec.tolerance, attrs)


@lru_cache(maxsize=1024)
def _contiguous(shape: tuple[int, ...], itemsize: int) -> Layout:
    """from_spec(shape, None, itemsize): thousands of cases share a few shapes, so one Layout each."""
    return from_spec(shape, None, itemsize)


_TENSORS: dict[tuple, TensorCase] = {}


def _shared(t: TensorCase) -> TensorCase:
    """One TensorCase for the same tensor in thousands of cases (a case file's defaults): memory per case
    stays small. Fills are told apart by their values' bits (0.0 == -0.0, but they fill differently)."""
    params = t.fill.params
    bits = struct.pack(f"<{len(params)}d", *params) if all(type(v) is float for v in params) else \
        tuple(struct.pack("<d", v) if isinstance(v, float) else (type(v), v) for v in params)
    key = (t.name, t.role, t.dtype.name, t.layout, t.fill.kind, bits, t.slot, t.null)
    try:
        if len(_TENSORS) > 4096:
            _TENSORS.clear()
        return _TENSORS.setdefault(key, t)
    except TypeError:  # (an unhashable value: not shared)
        return t
