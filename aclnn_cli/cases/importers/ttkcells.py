"""A TTK CSV's rows and cells, read under limits, and the Python literals its cells hold.

csv's own limit (128 KiB a cell) ends in a csv.Error traceback; here a cell may hold MAX_CELL
characters (ops-nn's largest is under 8,000), a file MAX_ROWS rows, and a NUL byte is refused. Cells
hold Python literals such as "((27, 24), (27, 24))" or "((-1, 1, nan, -0.0, inf),)", parsed from their
syntax tree, never evaluated, with numbers of at most MAX_DIGITS digits and at most MAX_NESTING levels
(the parser otherwise fails in its own words, or runs out of memory on 100,000 minus signs).
"""

from __future__ import annotations

import ast
import csv
import io
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from ...errors import CaseError
from ..spec import MAX_CASES
from .common import clip, show
from .fields import unknown

MAX_CELL = 1 << 16
MAX_ROWS = MAX_CASES  # test cases (non-blank rows) in one file
MAX_DIGITS = 40
MAX_NESTING = 16
_LONG_NUMBER = re.compile(r"\d{%d,}" % (MAX_DIGITS + 1))
_SIGNS = re.compile(r"[-+~](?:\s*[-+~]){3,}")
_NAMED = {"nan": math.nan, "inf": math.inf, "infinity": math.inf, "none": None, "true": True, "false": False}


@dataclass(frozen=True)
class Table:
    """A TTK file: its header (stripped) and its non-blank rows as (line number, cells)."""

    header: list[str]
    rows: list[tuple[int, list[str]]]


def read_table(where: str, data: bytes) -> Table:
    """The header and rows of a TTK CSV; one-line CaseError for anything csv would choke on."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CaseError(where, f"not UTF-8 text (byte {exc.start})") from None
    nul = text.find("\0")
    if nul >= 0:
        raise CaseError(where, f"line {text.count(chr(10), 0, nul) + 1}: a NUL character (a TTK file is text)")
    saved = csv.field_size_limit(MAX_CELL)
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    rows: list[tuple[int, list[str]]] = []
    line = 1
    try:
        for cells in reader:
            if header is None:
                header = [c.strip() for c in cells]
            elif any(c.strip() for c in cells):
                if len(rows) == MAX_ROWS:
                    raise CaseError(where, f"more than {MAX_ROWS} test cases (the most a case file may hold)")
                rows.append((line, cells))
            line = reader.line_num + 1
    except csv.Error as exc:
        what = (f"a cell of more than {MAX_CELL} characters" if "field limit" in str(exc)
                else "not valid CSV (an unterminated quoted cell?)")
        raise CaseError(where, f"line {line}: {what}") from None
    finally:
        csv.field_size_limit(saved)
    return Table(header or [], rows)


def check_header(where: str, header: list[str], known: tuple[str, ...]) -> None:
    """Every column known, none twice (csv would keep the last cell of two equal columns)."""
    seen: set[str] = set()
    for col in header:
        if col and col not in known:
            raise CaseError(where, unknown(col, known, "TTK column"), key=clip(col))
        if col and col in seen:
            raise CaseError(where, f"column '{col}' appears twice in the header (csv would keep one of the two "
                            "cells)", key=col)
        seen.add(col)


def check_row(where: str, line: int, header: list[str], cells: list[str]) -> dict[str, str]:
    """One row as {column: stripped cell}: as many cells as columns, nothing under an unnamed column."""
    if len(cells) != len(header):
        raise CaseError(where, f"line {line} has {len(cells)} cells for {len(header)} columns")
    for col, cell in zip(header, cells):
        if not col and cell.strip():
            raise CaseError(where, f"line {line}: a value {show(cell.strip())} under a column with no name")
    return {col: cell.strip() for col, cell in zip(header, cells) if col}


class Cells:
    """Typed access to one row's cells, each error naming the column."""

    def __init__(self, row: dict, bad: Callable[..., CaseError]) -> None:
        self.row, self.bad = row, bad

    def literal(self, col: str) -> Any:
        text = self.row.get(col, "")
        if not text:
            return None
        try:
            return literal(text)
        except ValueError as exc:
            raise self.bad(f"cannot read {show(text)}: {exc}", col) from None

    def tuple(self, col: str) -> list:
        value = self.literal(col)
        if value is None:
            return []
        return list(value) if isinstance(value, (tuple, list)) else [value]

    def per_tensor(self, col: str, n: int, fallback: str | None = None, one_for_all: bool = False,
                   required: bool = False) -> list:
        """n entries, one per tensor ([None] * n if the cell is empty, unless required); with one_for_all,
        a single entry serves every tensor (TTK writes `('bfloat16',)` for all inputs)."""
        values = self.tuple(col) or (self.tuple(fallback) if fallback else [])
        if not values:
            if required:
                raise self.bad(f"{col} is empty: it needs {'one entry per tensor' if n > 1 else 'an entry'}", col)
            return [None] * n
        if col.endswith("shapes") and not isinstance(values[0], (tuple, list, type(None))):
            values = [tuple(values)]  # a single shape written without the outer tuple
        if len(values) == 1 and n > 1 and one_for_all:
            values = values * n
        if len(values) != n:
            raise self.bad(f"{len(values)} {'entry' if len(values) == 1 else 'entries'} for {n} tensors", col)
        return values

    def ranges(self, n: int) -> list:
        """input_data_ranges as n entries (None: the op's default). One range (with or without the outer
        tuple) applies to every input; (None, None) is no range."""
        value = self.literal("input_data_ranges")
        if value is None:
            return [None] * n
        if not isinstance(value, (tuple, list)):
            raise self.bad(f"expected a tuple of ranges, got {show(value)}", "input_data_ranges")
        if value and not any(isinstance(v, (tuple, list)) for v in value) and any(v is not None for v in value):
            value = (value,)
        entries = [None if v is None or all_none(v) else v for v in value]
        if len(entries) == 1:
            return entries * n
        if len(entries) > n:
            raise self.bad(f"{len(entries)} ranges for {n} tensors", "input_data_ranges")
        return entries + [None] * (n - len(entries))


def all_none(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(v is None or all_none(v) for v in value)


def literal(text: str) -> Any:
    """A Python literal (numbers, strings, None, booleans, tuples, lists, dicts; nan and inf as names).

    Parsed into a syntax tree and converted node by node: nothing is evaluated."""
    text = text.strip()
    if _LONG_NUMBER.search(text):
        raise ValueError(f"a number of more than {MAX_DIGITS} digits")
    if _SIGNS.search(text):
        raise ValueError("more than three signs in a row")
    depth = deepest = 0
    for c in text:
        depth += c in "([{"
        depth -= c in ")]}"
        deepest = max(deepest, depth)
    if deepest > MAX_NESTING:
        raise ValueError(f"nested more than {MAX_NESTING} levels deep")
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ValueError("not a Python literal") from None
    return _node(tree)


def _node(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
        return node.value
    if isinstance(node, ast.Name) and node.id.lower() in _NAMED:
        return _NAMED[node.id.lower()]
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_node(e) for e in node.elts)
    if isinstance(node, ast.Dict) and None not in node.keys:
        keys = [_node(k) for k in node.keys]
        if not all(isinstance(k, (str, int, float, bool, type(None))) for k in keys):
            raise ValueError("a dict key is a string or a number")
        return dict(zip(keys, (_node(v) for v in node.values)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _node(node.operand)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v if isinstance(node.op, ast.USub) else v
    raise ValueError(f"{type(node).__name__.lower()} is not a literal")
