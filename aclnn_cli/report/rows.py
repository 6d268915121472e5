"""A case's verdict rows (standards.Row as JSON) for the reports: checked when a results file is read,
and put in words by the standard's own Row.text. Nothing here knows a standard's numbers."""

from __future__ import annotations

import math

from ..judge.results import _ROW_TYPES as _AS_WRITTEN, ROW_KEYS  # (the types of ROW_KEYS' values as verify writes them)
from ..standards.rules import Row

_TYPES = {"output": str, "metric": str, "value": (int, float), "limit": (int, float), "comparison": str,
          "within": bool, "note": str}
COMPARISONS = ("<", "<=", ">")
INFO = ("elements", "violations", "relieved", "max_abs_error", "max_rel_error", "max_ulp_error", "mean_ulp_error")


def rows_problem(rows) -> str | None:
    """Why a results file's `rows` cannot be rendered, or None."""
    if rows is None:
        return None
    if not isinstance(rows, list):
        return "'rows' must be a list"
    for i, r in enumerate(rows):
        if type(r) is dict and tuple(r) == ROW_KEYS and tuple(map(type, r.values())) == _AS_WRITTEN \
                and r["comparison"] in COMPARISONS:
            continue  # (as verify writes a row: every check below holds)
        if not isinstance(r, dict) or set(r) != set(ROW_KEYS):
            return f"'rows' #{i + 1} must be an object with {', '.join(ROW_KEYS)}"
        for key, kind in _TYPES.items():
            value = r[key]
            if key in ("value", "limit") and isinstance(value, str) and value in ("nan", "inf", "-inf"):
                continue  # (strict JSON writes non-finite numbers as strings)
            if isinstance(value, bool) and key != "within" or not isinstance(value, kind):
                return f"'rows' #{i + 1}: '{key}' must be a {'number' if key in ('value', 'limit') else kind.__name__}"
        if r["comparison"] not in COMPARISONS:
            return f"'rows' #{i + 1}: 'comparison' must be one of {', '.join(COMPARISONS)}"
    return None


def as_row(r: dict) -> Row:
    """A checked JSON row (see rows_problem) as the standard's Row."""
    return Row(**{k: float(r[k]) if k in ("value", "limit") else r[k] for k in ROW_KEYS})


def row_lines(rows: list[dict]) -> list[str]:
    """Each row in words, marked within or over (console and JUnit)."""
    return [f"{'within' if r['within'] else 'OVER  '}  {as_row(r).text()}" for r in rows]


def number(x) -> str:
    """A value of a row or a metric: whole numbers as integers (counts), others to 4 significant digits."""
    if isinstance(x, str):
        return x
    x = float(x)
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.4g}" if math.isfinite(x) else str(x)
