"""Phase one of the aclnn API: which status GetWorkspaceSize returns for given tensors.

One function, `check`, used three ways: gen refuses a case the API would
reject unless the case expects that status; `rejections` turns a valid case
into every rejection the op's doc lists; and the emulator "returns" it as
the device's phase-one status.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from ..tensor.dtypes import DType, lookup
from ..tensor.status import INVALID, NULLPTR, SUCCESS
from .base import COMPLEXES, FLOATS, OpSpec
from .families import broadcast_shape



@dataclass(frozen=True)
class TensorDesc:
    """What phase one sees of a tensor: its dtype and view shape, or a null pointer."""

    dtype: DType
    shape: tuple[int, ...]
    null: bool = False


@dataclass(frozen=True)
class Outcome:
    """What the API returns for a case in phase one: a status and the doc's rule that decided it."""

    status: int
    rule: str = ""  # the doc's rule that decides a rejection
    field: str = ""  # what the rule is about: "dtype", "shape", or the case-file key of a null pointer


def check(op: OpSpec, product: str, tensors: Mapping[str, TensorDesc], attributes: Mapping | None = None) -> Outcome:
    """Phase one's status for one call, with the rule that decides it.

    attributes: name -> value as the case gives it (None: a null pointer), for ops that take any.
    """
    attributes = attributes or {}
    for t in op.tensors:
        if tensors[t.name].null and not t.optional:
            return Outcome(NULLPTR, f"{t.name} is a null pointer", f"tensors.{t.name}.nullptr")
    for a in op.attributes:
        if attributes.get(a.name) is None and not a.optional and a.name in attributes:
            return Outcome(NULLPTR, f"{a.name} is a null pointer", f"attributes.{a.name}")
    effective = {a.name: a.default if attributes.get(a.name) is None else attributes[a.name] for a in op.attributes}
    rule = op.contract.null_rule(tensors, effective) if op.contract.null_rule is not None else None
    if rule:
        return Outcome(NULLPTR, rule, "tensors")
    product_dtypes = op.products[product] + op.contract.also_accepts
    for t in op.tensors:
        if tensors[t.name].null:
            continue
        d = tensors[t.name].dtype
        supported = product_dtypes if t.dtypes is None else t.dtypes
        if d.name not in supported:
            where = f"on {product} " if t.dtypes is None else ""
            return Outcome(INVALID, f"{t.name} dtype {d.name} is not supported {where}"
                                    f"(supported: {', '.join(supported)})", "dtype")
    rule = op.contract.dtype_attribute_rule(tensors, effective) if op.contract.dtype_attribute_rule else None
    if rule:
        return Outcome(INVALID, rule, "dtype")
    rule = _dtype_rule(op, product, tensors)
    if rule:
        return Outcome(INVALID, rule, "dtype")
    rule = op.contract.dtype_rule(tensors) if op.contract.dtype_rule is not None else None
    if rule:
        return Outcome(INVALID, rule, "dtype")
    lo, hi = op.dims if op.contract.checks_dims else (0, 1 << 30)
    for t in op.tensors:
        if tensors[t.name].null:
            continue
        n = len(tensors[t.name].shape)
        if not lo <= n <= hi:
            return Outcome(INVALID, f"{t.name} has {n} dims; {op.name} takes {lo}-{hi}", "shape")
    rule = _shape_rule(op, product, tensors)
    if rule:
        return Outcome(INVALID, rule, "shape")
    if op.contract.attribute_rule is not None:
        rule = op.contract.attribute_rule(effective)
        if rule:
            return Outcome(INVALID, rule, "attributes")
    if op.contract.shape_rule is not None:
        rule = op.contract.shape_rule(tensors, effective)
        if rule:
            return Outcome(INVALID, rule, "shape")
    return Outcome(SUCCESS)


def second_input(op: OpSpec) -> str | None:
    """The input beside the gradient: the forward input (self) or the forward output (SigmoidBackward); None for
    an op with one input."""
    return op.inputs[1].name if len(op.inputs) > 1 else None


def related(op: OpSpec, tensors: Mapping[str, TensorDesc] | None = None) -> list[str]:
    """The tensors the "same"/"promote" relation ties: those without a dtype list of their own, and not null."""
    return [t.name for t in op.tensors if t.dtypes is None and not (tensors is not None and tensors[t.name].null)
            and (op.contract.out_checked or t.role != "output")]


def _dtype_rule(op: OpSpec, product: str, tensors: Mapping[str, TensorDesc]) -> str | None:
    c = op.contract
    if c.dtypes == "promote":  # any supported float inputs; every float is castable to any float output
        promoted = compute_dtype(op, {n: d.dtype for n, d in tensors.items() if not d.null})
        out = tensors[op.output.name]
        if c.out_is_promoted and not out.null and out.dtype != promoted:
            return f"{op.output.name} dtype {out.dtype.name} is not the promoted input dtype {promoted.name}"
        return None
    names = related(op, tensors)
    grad, x_name, out_name = op.gradient, second_input(op), op.output.name
    if product in c.mixed_fp32_on and {grad, x_name, out_name} <= set(names):
        dy, x, out = (tensors[n].dtype for n in (grad, x_name, out_name))
        if dy != x:
            return None if out.name == "float32" else (
                f"{grad} {dy.name} and {x_name} {x.name} differ: on {product} that needs a float32 "
                f"{out_name}, not {out.name}")
    kinds = {tensors[n].dtype.name for n in names}
    if len(kinds) > 1:
        return "dtypes differ: " + ", ".join(f"{n} {tensors[n].dtype.name}" for n in names) + " must be identical"
    return None


def _shape_rule(op: OpSpec, product: str, tensors: Mapping[str, TensorDesc]) -> str | None:
    out = op.output.name
    ins = [t.name for t in op.inputs]
    if product in op.contract.broadcast_on:
        b = broadcast_shape(*(tensors[n].shape for n in ins))
        if b is None:
            return "input shapes " + ", ".join(f"{n} {list(tensors[n].shape)}" for n in ins) + " do not broadcast"
        if tensors[out].shape != b:
            return f"{out} shape {list(tensors[out].shape)} is not the broadcast shape {list(b)}"
        return None
    if not op.family.inputs_broadcast:  # (Rows: the shapes of its rows, dgamma, rstd differ: the op's shape_rule decides)
        return None
    live = [t.name for t in op.tensors if not tensors[t.name].null and (op.contract.out_checked or t.role != "output")]
    if len({tensors[n].shape for n in live}) > 1:
        return "shapes differ: " + ", ".join(f"{n} {list(tensors[n].shape)}" for n in live) + " must be identical"
    return None


def rounded_through(op: OpSpec, output: str, attrs: Mapping, dtypes: Mapping[str, DType],
                    shapes: Mapping[str, tuple[int, ...]]) -> DType | None:
    """The dtype the op says the device rounds an output through for these attributes (`OpSpec.rounded_through`)."""
    return op.rounded_through(attrs, dtypes, shapes).get(output) if op.rounded_through else None


def roundings(op: OpSpec, output: str, dtypes: Mapping[str, DType], through: DType | None = None) -> tuple[DType, ...]:
    """The dtypes an output's result is rounded to on its way: its own, the compute dtype a promoting Elementwise op
    rounds through, and `through` (`rounded_through`) where given. The narrowest's thresholds judge it, the largest
    smallest normal is its relative-error floor (judge/judgeddtype.py)."""
    dtype = dtypes[output]
    inner = dtype if op.family.rounded_once else compute_dtype(op, dtypes)
    return tuple(d for d in (dtype, inner, through) if d is not None)


def compute_dtype(op: OpSpec, dtypes: Mapping[str, DType]) -> DType:
    """The dtype the kernel rounds its result to: the promoted input type for promoting ops, else the output's.

    Promotion: equal dtypes stay; any mix (fp16+bf16, anything+fp32) is float32.
    """
    if op.contract.dtypes != "promote":
        return dtypes[op.output.name]
    kinds = {dtypes[t.name] for t in op.inputs if t.read_by_kernel and t.dtypes is None and t.name in dtypes
             and not dtypes[t.name].is_integer}  # (tensors with their own list are outside the promotion)
    if not kinds:
        return dtypes.get(op.output.name, lookup("float32"))
    if len(kinds) == 1:
        kind = kinds.pop()
        return kind if kind.name in FLOATS + COMPLEXES else lookup("float32")  # (float64 and others: in float32)
    return lookup("float32")


@dataclass(frozen=True)
class Rejection:
    """A negative case an op's contract expands into: the change to a valid case and the status it must get."""

    label: str  # becomes part of the case id
    status: int
    rule: str
    tensors: Mapping[str, TensorDesc]


def rejections(op: OpSpec, product: str, base: Mapping[str, TensorDesc],
               attributes: Mapping | None = None) -> list[Rejection]:
    """Every documented rejection, as a mutation of a valid call. Each one is checked against `check`.

    A null for each required tensor; unsupported dtypes for the tensors tied by the contract, and for each
    tensor with its own dtype list one outside it; the contract's dtype and shape relations; 9 dims. The
    generic shape mutations of a rows op are kept only where its shape_rule rejects them."""
    grad, out = op.gradient, op.output.name
    tied = [n for n in related(op, base)]
    must: list[tuple[str, dict]] = []  # mutations every contract of this form rejects
    maybe: list[tuple[str, dict]] = []  # a rows op's shape_rule decides these

    def mutated(**changes: TensorDesc) -> dict:
        return {**base, **changes}

    def retyped(names: list[str], dtype: DType) -> dict:
        return mutated(**{n: replace(base[n], dtype=dtype) for n in names})

    for t in op.tensors:
        if not t.optional:
            must.append((f"null_{t.name}", mutated(**{t.name: replace(base[t.name], null=True)})))
    if tied and "float64" not in op.contract.also_accepts:
        must.append(("dtype_float64", retyped(tied, lookup("float64"))))
    for d in FLOATS + tuple(d for d in op.dtypes if d not in FLOATS):  # (an integer another product takes)
        if tied and d not in op.products[product]:
            must.append((f"dtype_{d}_on_{product}", retyped(tied, lookup(d))))
    for t in op.tensors:
        if t.dtypes is not None and not base[t.name].null:
            wrong = next(d for d in ("float64", "float32", "int64", "bfloat16") if d not in t.dtypes)
            must.append((f"dtype_{wrong}_{t.name}", retyped([t.name], lookup(wrong))))
    if op.contract.dtypes == "same" and grad in tied and len(tied) > 1:
        supported = [lookup(d) for d in op.products[product]]
        other = next((d for d in supported if d != base[grad].dtype), None)
        if other is not None and product in op.contract.mixed_fp32_on and out in tied:
            not_fp32 = next(d for d in supported if d.name != "float32")
            x_name = second_input(op)
            dy = other if x_name is None or other != base[x_name].dtype else base[grad].dtype
            must.append(("mixed_dtypes_without_float32_out", mutated(
                **{grad: replace(base[grad], dtype=dy), out: replace(base[out], dtype=not_fp32)})))
        elif other is not None:
            must.append((f"dtype_mismatch_{grad}", retyped([grad], other)))
        wrong_out = next((d for d in supported if d != base[out].dtype), None)
        if out in tied and wrong_out is not None:
            must.append((f"dtype_mismatch_{out}", retyped([out], wrong_out)))
    shapes = must if op.family.inputs_broadcast else maybe
    shape = base[out].shape or (1,)
    bigger = shape[:-1] + (shape[-1] + 1,)
    x = second_input(op)
    if len(base[out].shape) >= 1 and not base[out].null:
        if op.contract.out_checked:
            shapes.append((f"shape_mismatch_{out}", mutated(**{out: replace(base[out], shape=bigger)})))
        if x is None:
            pass  # (one input: no second shape to mismatch)
        elif product in op.contract.broadcast_on:
            a, b = shape[:-1] + (max(shape[-1], 2),), shape[:-1] + (max(shape[-1], 2) + 1,)
            shapes.append(("shapes_not_broadcastable", mutated(
                **{grad: replace(base[grad], shape=a), x: replace(base[x], shape=b), out: replace(base[out], shape=a)})))
        elif not base[x].null:
            shapes.append((f"shape_mismatch_{x}", mutated(**{x: replace(base[x], shape=bigger)})))
    if op.contract.checks_dims:
        must.append(("dims_9", mutated(**{t.name: replace(base[t.name], shape=(1,) * 8 + (2,)) for t in op.tensors})))
    result = []
    for label, tensors in must + maybe:
        outcome = check(op, product, tensors, attributes)
        if outcome.status == SUCCESS:
            if (label, tensors) in maybe:
                continue
            raise AssertionError(f"{op.name} on {product}: mutation {label} is accepted by the contract")
        result.append(Rejection(label, outcome.status, outcome.rule, tensors))
    return result
