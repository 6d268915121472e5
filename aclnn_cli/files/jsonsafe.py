"""JSON from outside (manifests, results files, ATK and msOpST suites) under the limits YAML has.

Python's json module takes the last of two equal keys, turns a 5,000-digit integer into a ValueError
(Python's own 4,300-digit limit) that is not a JSONDecodeError, recurses once per nesting level, and
reads NaN and Infinity, which no standard JSON holds. `loads` refuses each of those with one line
(`JsonRefused`, a ValueError): the caller adds the file's name and turns it into its UserError.
"""

from __future__ import annotations

import json
from typing import Any, Callable

MAX_DEPTH = 64  # nesting levels: a manifest needs 4, a results file 6, an ATK suite about 5
MAX_NUMBER_CHARS = 40  # an integer or float token: int64 needs 20, a round-tripped double 24
MAX_STRING_CHARS = 1 << 20  # one string value or key


class JsonRefused(ValueError):
    """A JSON document this tool will not load; the message is one line, for after the file's name."""


def _no_constant(token: str):
    raise JsonRefused(f"{token} is not JSON (write a number, or a string the format defines)")


def _number(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(token: str):
        if len(token) > MAX_NUMBER_CHARS:
            raise JsonRefused(f"a number of {len(token)} digits (at most {MAX_NUMBER_CHARS})")
        return kind(token)
    return parse


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JsonRefused(f"duplicate key {_clip(key)}")
            seen.add(key)
    return obj


def _clip(text: str, limit: int = 40) -> str:
    text = repr(text[: limit + 8])
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _decoder(allow_constants: bool, numbers: bool = True) -> json.JSONDecoder:
    return json.JSONDecoder(object_pairs_hook=_pairs,
                            **({"parse_int": _number(int), "parse_float": _number(float)} if numbers else {}),
                            **({} if allow_constants else {"parse_constant": _no_constant}))


_STRICT, _LENIENT, _STRICT_FIELDS = _decoder(False), _decoder(True), _decoder(False, numbers=False)


def loads(text: str, *, allow_constants: bool = False, max_depth: int = MAX_DEPTH, number_tokens: bool = True) -> Any:
    """One JSON document; JsonRefused (one line) if it is not JSON or breaks a limit.

    allow_constants: accept NaN/Infinity/-Infinity (files written by Python tools, as ATK's are).
    number_tokens=False: no MAX_NUMBER_CHARS per token (Python's own 4,300-digit limit still holds), for
    a reader that checks each number it uses field by field (manifests: thousands per run, and the
    per-token check is a Python call per number, a third of the decoding time).
    """
    decoder = _LENIENT if allow_constants else _STRICT if number_tokens else _STRICT_FIELDS
    try:
        value = decoder.decode(text)
    except JsonRefused:
        raise
    except json.JSONDecodeError as exc:
        raise JsonRefused(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise JsonRefused(f"nested more than {max_depth} levels deep") from None
    except (ValueError, OverflowError) as exc:  # (int() and float() on a token the scanner accepted)
        raise JsonRefused(f"not valid JSON: {str(exc).splitlines()[0][:80]}") from None
    if len(text) > MAX_STRING_CHARS or text.count("[") + text.count("{") > max_depth:
        _check_shape(value, max_depth)  # (else no limit can be broken: a long string or a deep nest needs that much text)
    return value


def _check_shape(value: Any, max_depth: int) -> None:
    """Nesting depth and string sizes, walked without recursion."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            items = node.items()
            for key, _ in items:
                if len(key) > MAX_STRING_CHARS:
                    raise JsonRefused(f"a key of {len(key)} characters (at most {MAX_STRING_CHARS})")
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            if isinstance(node, str) and len(node) > MAX_STRING_CHARS:
                raise JsonRefused(f"a string of {len(node)} characters (at most {MAX_STRING_CHARS})")
            continue
        if depth > max_depth:
            raise JsonRefused(f"nested more than {max_depth} levels deep")
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, str)))


def decode_utf8(data: bytes) -> str:
    """Bytes as JSON text (UTF-8, a BOM allowed); JsonRefused names the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise JsonRefused(f"not UTF-8 text (byte {exc.start})") from None
