"""Attribute values of each kind, as a case file or a manifest gives them (ValueError says what is wrong).

The kinds live here, with their readers, so that the op declarations (ops/base.py, checked by
ops/declcheck.py at register), gen and verify share one list. Nothing here imports aclnn_cli.ops
(importing that package registers every op, whose check reads this module).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

from ..tensor import dtypes as D
from .fill import parse_number
from ..files.text import show


class AttrSpec(Protocol):
    """What the readers need of an op's attribute declaration (ops/base.py's AttrSpec, which sits above)."""

    kind: str
    scalar_dtype: str
    choices: tuple[str, ...]


def scalar_value(attr: AttrSpec, value: Any) -> float | int:
    """A case-file number as the aclScalar of attr.scalar_dtype holds it."""
    dtype = D.lookup(attr.scalar_dtype)
    if dtype.name in ("int32", "int64"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {show(value)}")
        return value
    x = parse_number(value)
    with np.errstate(over="ignore"):
        return float(np.asarray(x, dtype=np.float64).astype(dtype.np_dtype).astype(np.float64))


def _double(attr: AttrSpec, value: Any) -> float:
    """A C double (BatchNormBackward's eps): the number exactly as given, inf and nan included."""
    return parse_number(value)


def _float(attr: AttrSpec, value: Any) -> float:
    """A C float: the number rounded to float32 (what the API receives; beyond its range, inf)."""
    x = parse_number(value)
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def _bool(attr: AttrSpec, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {show(value)}")
    return value


def _string(attr: AttrSpec, value: Any) -> str:
    if not isinstance(value, str) or (attr.choices and value not in attr.choices):
        raise ValueError(f"expected one of {', '.join(map(repr, attr.choices))}, got {show(value)}")
    return value


def _int_list(attr: AttrSpec, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValueError(f"expected a list of integers, got {show(value)}")
    return tuple(value)


def _int(attr: AttrSpec, value: Any) -> int:
    """An int64_t argument (dim, reduction, ignoreIndex)."""
    if isinstance(value, bool) or not isinstance(value, int) or not -2**63 <= value < 2**63:
        raise ValueError(f"expected an int64 integer, got {show(value)}")
    return value


def _bool_list(attr: AttrSpec, value: Any) -> tuple[bool, ...]:
    """An aclBoolArray* (outputMask)."""
    if not isinstance(value, list) or len(value) > 64 or not all(isinstance(v, bool) for v in value):
        raise ValueError(f"expected a list of true/false, got {show(value)}")
    return tuple(value)


# The attribute kinds, one reader each: register accepts these kinds only (ops/base.ATTRIBUTE_KINDS is this
# list), gen reads case files and verify reads manifests through these, so what one writes the other reads.
PARSERS: dict[str, Callable[[AttrSpec, Any], Any]] = {"scalar": scalar_value, "bool": _bool, "string": _string,
                                                      "int_list": _int_list, "int": _int, "bool_list": _bool_list,
                                                      "double": _double, "float": _float}
ATTRIBUTE_KINDS = tuple(PARSERS)
# The kinds whose value is one number that may be non-finite (a manifest writes those as "nan", "inf", "-inf").
NUMBER_KINDS = ("scalar", "double", "float")


def parse_value(attr: AttrSpec, value: Any) -> Any:
    """One value a case gives for attr; ValueError says what is wrong."""
    if value is None:
        return None
    if attr.kind not in PARSERS:
        raise ValueError(f"unknown attribute kind {show(attr.kind)}")
    return PARSERS[attr.kind](attr, value)
