"""MISTRUSTED: a passing case that could not have failed, reported as a warning (docs/verify.md, "MISTRUSTED").

benchdnn's notion: the case passed, but a broken kernel would have passed too. It does not fail
the run unless verify is given --strict.
"""

from __future__ import annotations

import math

from ..casedir import manifest as M
from .compare import Metrics


def mistrust(m: M.CaseManifest, metrics: Metrics, strict: bool = False) -> str | None:
    """Why a passing case cannot show anything, or None (docs/verify.md, "MISTRUSTED").

    A case that exercises special values (a non-finite input or golden) tests propagation,
    and a golden that underflowed to zero tests that the kernel survives it; neither is
    mistrusted. What is: every result trivially zero because the gradient is all zero, and
    constant, finite inputs (one value cannot show a kernel's errors).
    """
    read, grad = m.op.read_inputs, m.op.gradient
    fills = {t["name"]: t.get("fill", {}) for t in m.raw["tensors"]  # (only the inputs asked about below)
             if (t["name"] in read or t["name"] == grad) and t["role"] == "input" and not t.get("null")}
    if read and not any("constant" in f or "values" in f for f in fills.values()):
        return None  # (distributions only: no special value, no constant input; the common case, at once)
    if metrics.elements > metrics.compared or any(_special(fills.get(n, {})) for n in read):
        return None
    # (a null optional input, MishGrad's tanhx left out, reads nothing: the inputs given decide)
    if m.output.layout.numel > 1 and all(_constant(fills[n]) for n in read if n in fills):
        return "every input the kernel reads is constant: one value cannot show a kernel's errors"
    dy = fills.get(grad, {})
    if _constant(dy) and _values(dy) == {0.0}:
        return f"{grad} is all zero: every result is trivially zero, so a kernel writing zeros would pass too"
    return None


def _values(fill: dict) -> set[float]:
    if "constant" not in fill and "values" not in fill:  # (a distribution: no values of its own)
        return set()
    raw = [fill["constant"]] if "constant" in fill else fill.get("values", [])
    out = set()
    for v in raw if isinstance(raw, list) else []:
        try:
            out.add(abs(float(v)))
        except (TypeError, ValueError):
            out.add(float("nan"))
    return out


def _special(fill: dict) -> bool:
    """A fill with a NaN or an infinity among its values."""
    return any(not math.isfinite(v) for v in _values(fill))


def _constant(fill: dict) -> bool:
    return "constant" in fill or ("values" in fill and len({str(v) for v in fill["values"]}) == 1)
