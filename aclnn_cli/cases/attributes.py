"""Attribute values: from case files to `Case`, into the manifest and back, for the op's functions.

An op declares its attributes with `AttrSpec` (ops/base.py). A case file gives values under
`attributes:`; a list expands into one case per value (like dtype and shape). A scalar is rounded
to its `scalar_dtype` when the case is read (a `float` to float32; a `double` is kept exactly): the
harness passes that value, and the golden is computed from what the device receives. `null` is a null
pointer (allowed for optional scalars; for any other attribute it makes a negative case).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Mapping

import numpy as np

from ..tensor import dtypes as D
from ..values.fill import parse_number
from ..ops.base import OpSpec
from ..values.attrvalues import NUMBER_KINDS, parse_value
from ..files.text import clip, key_path, unknown_key

Combo = tuple[tuple[str, Any], ...]  # (name, value) per attribute, in the op's order; None = nullptr
LIST_KINDS = ("int_list", "bool_list")  # kinds whose one value is a list (aclIntArray*, aclBoolArray*)


def case_combos(op: OpSpec, given: Mapping, err: Callable[[str, str], Exception]) -> list[Combo]:
    """Every combination of the attribute values a case gives (lists expand); defaults fill the rest."""
    names = tuple(a.name for a in op.attributes)
    for key in given:
        if key not in names:
            raise err(unknown_key(key, names) if names else f"{op.name} takes no attributes",
                      f"attributes.{key_path(key)}")
    choices = []
    for attr in op.attributes:
        key = f"attributes.{attr.name}"
        if attr.name not in given:
            if attr.default is None and not attr.optional:
                raise err(f"{op.name} needs a value for {attr.name}", key)
            choices.append([default(attr)])
            continue
        raw = given[attr.name]
        is_list_kind = attr.kind in LIST_KINDS  # one value is a list: a list of lists expands
        listed = raw if isinstance(raw, list) and not is_list_kind else [raw]
        if is_list_kind and isinstance(raw, list) and raw and all(isinstance(v, list) for v in raw):
            listed = raw
        if not listed:
            raise err(f"'{attr.name}' is an empty list, which expands to no cases", key)
        try:
            choices.append([parse_value(attr, v) for v in listed])
        except ValueError as exc:
            raise err(str(exc), key) from None
    return [tuple(zip(names, combo)) for combo in itertools.product(*choices)]


def default(attr) -> Any:
    """attr's default as the device receives it: a number rounded as a case's value is (a float's 0.1 is
    float32(0.1)), so gen's functions and the manifest verify reads hold one value."""
    return parse_value(attr, attr.default) if attr.kind in NUMBER_KINDS else attr.default


def values(op: OpSpec, combo: Combo) -> dict[str, Any]:
    """What the op's functions receive: each attribute's value, its default where the case passes nullptr."""
    given = dict(combo)
    return {a.name: default(a) if given.get(a.name) is None else given[a.name] for a in op.attributes}


def with_case_values(op: OpSpec, values: dict[str, Any], tensors) -> dict[str, Any]:
    """values plus op.case_values of the tensors' view shapes (MSE's numel(self)) and op.case_dtypes of their dtypes
    (LayerNormGrad's epsilon), if the op has any."""
    if op.case_values is not None:
        values = {**values, **op.case_values({t.name: tuple(t.layout.shape) for t in tensors})}
    if op.case_dtypes is not None:
        values = {**values, **op.case_dtypes({t.name: t.dtype.name for t in tensors})}
    return values


def id_part(name: str, value: Any, wide: bool = False) -> str:
    """`beta1.7`, `approximate-tanh`, `selfIsResult-true`, `betaOptional-null`: a case id piece.
    wide: the attribute holds any float64 (a double), so only repr tells its values apart (eps0.1 is 0.1, and
    float32(0.1) is eps0.10000000149011612); a float32 value is spelled shortest as a float32 (beta1.2)."""
    if value is None:
        return f"{name}-null"
    if isinstance(value, bool):
        return f"{name}-{str(value).lower()}"
    if isinstance(value, float):
        with np.errstate(over="ignore"):
            short = np.float32(value)
        if not math.isfinite(value):
            return f"{name}{value}"
        return f"{name}{str(short) if float(short) == value and not wide else repr(value)}"  # (str: float32's shortest)
    if isinstance(value, tuple):  # normalizedShape4x8, outputMask1x0x1; an empty list: normalizedShape-empty
        return f"{name}{'x'.join(str(int(v)) for v in value)}" if value else f"{name}-empty"
    if isinstance(value, int):  # dim-1, dim0, reduction2, ignoreIndex-100
        return f"{name}{value}"
    return f"{name}-{clip(str(value), 40)}"


def spans_float64(attr) -> bool:
    """Whether attr's values range over float64 (a double, a float64 scalar): see id_part."""
    return attr.kind == "double" or (attr.kind == "scalar" and attr.scalar_dtype == "float64")


def to_manifest(op: OpSpec, combo: Combo) -> list[dict]:
    """The manifest's `attributes`: in the op's order, with each scalar's dtype for the harness."""
    given = dict(combo)
    out = []
    for a in op.attributes:
        value = given.get(a.name)
        entry: dict[str, Any] = {"name": a.name, "kind": a.kind}
        if a.kind == "scalar":
            dtype = D.lookup(a.scalar_dtype)
            entry.update(dtype=dtype.name, acl_dtype=dtype.acl_id)
        if a.kind in NUMBER_KINDS and isinstance(value, float) and not math.isfinite(value):  # (JSON has no nan)
            value = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        entry["value"] = list(value) if isinstance(value, tuple) else value
        out.append(entry)
    return out


def from_manifest(op: OpSpec, raw: Any) -> Combo:
    """A manifest's `attributes`, checked against the op's declaration (ValueError on anything else)."""
    raw = raw or []
    if not isinstance(raw, list) or [e.get("name") if isinstance(e, dict) else None for e in raw] != \
            [a.name for a in op.attributes]:
        raise ValueError(f"attributes must list {[a.name for a in op.attributes]} in order")
    combo = []
    for a, entry in zip(op.attributes, raw):
        if entry.get("kind") != a.kind:
            raise ValueError(f"attribute {a.name} must be of kind {a.kind}")
        value = entry.get("value")
        if a.kind in NUMBER_KINDS and isinstance(value, str):
            value = parse_number(value)
        combo.append((a.name, parse_value(a, value)))
    return tuple(combo)
