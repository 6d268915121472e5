"""What a case's metrics were held against: (metric, value, limit, within) rows for the HTML report, from
the verify JSON's numbers alone (standard, parameters, metrics, benchmark metrics, the judged dtype).

The verdict itself is the standard's (judge/standards.py); these rows restate its bounds beside the
numbers so a reader sees by how much each one was missed. No plotting library needed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..dtypes import DTYPES
from ..standards import balance_limit


@dataclass(frozen=True)
class Limit:
    metric: str
    value: float
    limit: str  # the bound as text ("< 0.000977", "<= 0")
    within: bool | None  # None: shown for information, no bound


def _num(x) -> float:
    try:
        return float(x) if not isinstance(x, bool) else math.nan
    except (TypeError, ValueError):
        return math.nan


def _below(metric: str, value, bound: float, strict: bool = True) -> Limit:
    v = _num(value)
    ok = (v < bound) if strict else (v <= bound)
    return Limit(metric, v, f"{'<' if strict else '<='} {bound:.4g}", bool(ok))


def case_limits(standard: str, params: dict, metrics: dict, benchmark: dict | None, judged_dtype: str | None
                ) -> list[Limit]:
    """The bounds of `standard` with their values; then the counts every standard reports, for information."""
    m, p = metrics, {k: _num(v) for k, v in (params or {}).items()}
    compared = max(int(_num(m.get("compared", 0)) or 0), 0)
    share = _num(m.get("violations", 0)) / compared if compared else 0.0
    rows = [_below("NaN/Inf mismatches", m.get("special_mismatches", 0), 0, strict=False)]
    if standard == "mere-mare" and "T" in p:
        rows += [_below("MERE", m.get("mere"), p["T"]), _below("MARE", m.get("mare"), p.get("mare", 10) * p["T"])]
        dtype = DTYPES.get(judged_dtype or "")
        if dtype is not None and "balance" in p and "balance_noise" in p:
            rows.append(_below("|error balance|", abs(_num(m.get("error_balance"))),
                               balance_limit(p, dtype, compared), strict=False))
    elif standard == "ulp" and "share" in p:
        rows.append(_below(f"share over {p.get('ulps', 1):g} ulp", share, p["share"]))
        if "mean_ulps" in p:
            rows.append(_below("mean ulp error (either passes)", m.get("mean_ulp_error"), p["mean_ulps"]))
    elif standard == "thousandth" and "share" in p:
        rows.append(_below(f"share with relative error >= {p.get('rel', 0):g}", share, 1 - p["share"]))
    elif standard == "msopst" and "share" in p:
        rows += [_below(f"share with relative diff > {p.get('rel', 0):g}", share, p["share"], strict=False),
                 _below("max relative diff", m.get("max_rel_error"), p.get("max_rel", math.inf))]
    elif standard == "benchmark" and benchmark:
        for key in ("small_error_rate", "rmse", "mere", "max_rel_error"):
            bench = _num(benchmark.get(key))
            rows.append(Limit(f"{key} (benchmark {bench:.3g})", _num(m.get(key)), f"ratio <= "
                              f"{p.get('max_rel_ratio' if key == 'max_rel_error' else 'ratio', 2):g}x (floored)", None))
    elif standard in ("absolute-threshold", "allclose", "bitwise"):
        rows.append(_below("elements over the bound", m.get("violations", 0), 0, strict=False))
    info = ("elements", "violations", "relieved", "max_abs_error", "max_rel_error", "max_ulp_error", "mean_ulp_error")
    return rows + [Limit(key, _num(m.get(key)), "", None) for key in info if key in m]
