"""Field checks shared by the importers: each foreign field is checked for its type and range, as our
YAML's fields are, before anything is built from it. A failed check is a ValueError whose message
says what was expected and what was found (bounded); the importer adds file, case and field.

What the formats really hold (ops-nn's ATK and TTK suites, CANN's msOpST documentation) decides
what is allowed; docs/importing.md lists it per field.
"""

from __future__ import annotations

import difflib
import math
from typing import Any, Callable, Sequence

from ...values import yamlsafe
from ...errors import CaseError
from .common import clip, show

MAX_INT64 = 2**63 - 1  # dims, strides, offsets, ids: what aclnn's int64 fields hold
MAX_DIMS = 64  # a shape or strides list; our validation then applies the op's own limit
MAX_VALUES = yamlsafe.MAX_NODES  # entries of one value list (a range, msOpST's literal data): as in our YAML
NAMED_NUMBERS = {"nan": math.nan, "-nan": math.nan, "inf": math.inf, "+inf": math.inf, "-inf": -math.inf,
                 "infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf}


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def as_number(v: Any) -> float | int:
    """A foreign number: an int, a float, or one of the strings 'nan', 'inf', '-inf' (as ATK and msOpST
    write the special values); ValueError otherwise. A number written as a string ("1.5") is refused:
    no tool writes one, and a quoted number is most often a typo for something else."""
    if is_int(v) or isinstance(v, float):
        return v
    if isinstance(v, str) and v.strip().lower() in NAMED_NUMBERS:
        return NAMED_NUMBERS[v.strip().lower()]
    raise ValueError(f"expected a number (or 'nan', 'inf', '-inf'), got {show(v)}")


def interval(v: Any) -> list[float | int]:
    """A range written as a string in interval notation, "(0, 1)", "[ -5, 0 )", "( 0, 5 ]" (ops-nn's LogitGrad and
    Celu suites): its two ends, [lo, hi]; whether an end is open is not kept (docs/importing.md). ValueError
    otherwise."""
    text_ = v.strip() if isinstance(v, str) else ""
    if len(text_) < 2 or text_[0] not in "([" or text_[-1] not in ")]" or text_[1:-1].count(",") != 1:
        raise ValueError(f"expected an interval such as \"(0, 1)\" or \"[-5, 0)\", got {show(v)}")
    ends = []
    for part in text_[1:-1].split(","):
        try:
            ends.append(float(part))  # (Python's float reads "inf", "-inf" and "nan" as ATK writes them)
        except ValueError:
            raise ValueError(f"an interval's end is a number, got {show(part.strip())} in {show(v)}") from None
    return ends


def numbers(values: Any, what: str) -> list[float | int]:
    """A non-empty list of foreign numbers (at most MAX_VALUES); ValueError naming the bad entry."""
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"{what} must be a non-empty list of numbers, got {show(values)}")
    if len(values) > MAX_VALUES:
        raise ValueError(f"{what} holds {len(values)} values, at most {MAX_VALUES}")
    out = []
    for i, v in enumerate(values):
        try:
            out.append(as_number(v))
        except ValueError as exc:
            raise ValueError(f"{what}[{i}]: {exc}") from None
    return out


def int_list(value: Any, what: str = "shape", lo: int = 0) -> tuple[int, ...]:
    """A shape or strides: a list of integers in [lo, 2^63 - 1], at most MAX_DIMS of them."""
    if not isinstance(value, (list, tuple)) or not all(is_int(d) for d in value):
        raise ValueError(f"a {what} is a list of integers, got {show(value)}")
    if len(value) > MAX_DIMS:
        raise ValueError(f"a {what} of {len(value)} dimensions (at most {MAX_DIMS})")
    for d in value:
        if d < lo:
            hint = " (dynamic shapes are not supported)" if what == "shape" else ""
            raise ValueError(f"negative entry in {what} {show(list(value))}{hint}")
        if d > MAX_INT64:
            raise ValueError(f"{what} entry {show(d)} is over 2^63 - 1")
    return tuple(value)


def int_in(value: Any, what: str, lo: int = 0, hi: int = MAX_INT64) -> int:
    """An integer in [lo, hi] (booleans and floats refused)."""
    if not is_int(value):
        raise ValueError(f"{what} must be an integer, got {show(value)}")
    if not lo <= value <= hi:
        raise ValueError(f"{what} {show(value)} is outside [{lo}, {hi if hi != MAX_INT64 else '2^63 - 1'}]")
    return value


def text(value: Any, what: str, empty: bool = False) -> str:
    """A string (non-empty unless `empty`)."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {show(value)}")
    if not empty and not value.strip():
        raise ValueError(f"{what} is empty")
    return value


def check_types(obj: dict, types: dict[str, tuple[type, ...]], bad: Callable[..., CaseError], prefix: str = "") -> None:
    """Fields we read past still have the type their format gives them (a list where a label belongs
    is a broken file, not a label). `type(None)` in a tuple allows null."""
    for key, allowed in types.items():
        if key in obj and not (isinstance(obj[key], allowed) and not (isinstance(obj[key], bool)
                                                                      and bool not in allowed)):
            names = " or ".join("null" if t is type(None) else {"str": "a string", "bool": "true/false",
                                                                "dict": "an object", "list": "a list",
                                                                "int": "an integer", "float": "a number"}[t.__name__]
                                for t in allowed)
            raise bad(f"{key} must be {names}, got {show(obj[key])}", f"{prefix}{key}")


def unknown(name: str, known: Sequence[str], what: str) -> str:
    """The message for an unknown key or column: the known ones if they fit on the line, and a "did you mean"."""
    listed = ", ".join(known)
    hint = f"known: {listed}" if len(listed) <= 160 else "docs/importing.md lists them"
    close = difflib.get_close_matches(name, known, n=1)
    return f"unknown {what} '{clip(name)}' ({hint})" + (f"; did you mean '{close[0]}'?" if close else "")


def check_keys(obj: dict, known: Sequence[str], what: str, bad: Callable[..., CaseError], prefix: str = "") -> None:
    """Unknown keys are errors, never silently dropped."""
    for k in obj:
        if k not in known:
            raise bad(unknown(k, known, f"{what} key"), f"{prefix}{clip(k)}")


def field(bad: Callable[..., CaseError], key: str, check: Callable[..., Any], *args: Any) -> Any:
    """check(*args), its ValueError turned into `bad(message, key)`."""
    try:
        return check(*args)
    except ValueError as exc:
        raise bad(str(exc), key) from None
