"""Verdicts: the statuses a case can get, one case's result and a run's, as verify and report share them."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

PASS, FAIL, LAYOUT, MISTRUSTED, MISSING, STATUS, ERROR = (
    "PASS", "FAIL", "LAYOUT", "MISTRUSTED", "MISSING", "STATUS", "ERROR")
ALL_STATUSES = (PASS, FAIL, LAYOUT, MISTRUSTED, MISSING, STATUS, ERROR)


@dataclass
class CaseResult:
    case_id: str
    op: str
    dtype: str
    shape: list
    product: str
    status: str
    standard: str
    reason: str
    params: dict = field(default_factory=dict)
    metrics: dict | None = None
    benchmark: dict | None = None
    worst: list = field(default_factory=list)
    repro: str = ""
    path: str = ""
    kind: str = "precision"  # or "contract": a negative case, judged on phase one's status only
    error_rows: list = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        """The result as strict JSON data (non-finite numbers as strings)."""
        d = asdict(self)
        d.pop("error_rows")
        return json_safe(d)


@dataclass
class RunResult:
    cases: list[CaseResult] = field(default_factory=list)
    strict: bool = False  # MISTRUSTED counts as a failure

    @property
    def exit_code(self) -> int:
        if any(c.status == ERROR for c in self.cases):
            return 2
        passing = (PASS, MISTRUSTED) if not self.strict else (PASS,)
        return 0 if all(c.status in passing for c in self.cases) else 1

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(ALL_STATUSES, 0)
        for c in self.cases:
            out[c.status] += 1
        return out


def json_safe(value):
    """value with every non-finite float as a string ("nan", "inf", "-inf"): strict JSON has no NaN token."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
