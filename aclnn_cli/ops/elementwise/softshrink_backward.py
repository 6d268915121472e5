"""aclnnSoftshrinkBackward: gradInput = gradOutput where |self| > lambda (or self is NaN), else +0.

lambda reaches the kernel as float32 (`aclScalar::ToFloat`, op_api/aclnn_softshrink_backward.cpp). The 950 kernel
(soft_shrink_grad/op_kernel/arch35/soft_shrink_grad.h): fp16/bf16 widened to float32; CompareScalar(|x| > lambda),
Select(mask, dy, 0.0f), then Compare(x != x) and Select(nan, dy, out); cast back (CAST_ROUND, exact here: the value is a
widened input). The result is gradOutput or +0: exact. Inputs of two dtypes are both l0op::Cast to FLOAT first and the
kernel's FLOAT result is view-copied into gradInput (`out_is_promoted`). Inputs broadcast (l0op::BroadcastTo).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..base import AttrSpec, Contract, OpSpec, Reference, defect, grad_signature, legitimate, products
from ..registry import register

LAMBDA = "lambda"  # the header's name (the graph op's is lambd)


def _lambda(t) -> float:
    return float(np.float32(t[LAMBDA]))


def _mask(x, lam, inclusive=False, nan_passes=True):
    with np.errstate(invalid="ignore"):
        outside = (np.abs(x) >= lam) if inclusive else (np.abs(x) > lam)
        return outside | np.isnan(x) if nan_passes else outside


def _reference(t):
    """Exact: gradOutput or +0 (bound 0)."""
    dy = t["gradOutput"]
    value = np.where(_mask(t["self"], _lambda(t)), dy, 0.0)
    return Reference(value, np.zeros_like(value), np.abs(dy))


def _exact(t):
    x = t["self"]
    return t["gradOutput"] if abs(x) > Fraction(_lambda(t)) else Fraction(0)


def _kernel(t, inclusive=False, nan_passes=True, signed=False):
    """The 950 kernel: Select(|x| > lambda, dy, 0), then Select(x != x, dy, out). The keywords make the defects."""
    x, dy = t["self"], t["gradOutput"]
    lam = _lambda(t)
    if signed:  # x > lambda only
        with np.errstate(invalid="ignore"):
            keep = (x > lam) | np.isnan(x)
    else:
        keep = _mask(x, lam, inclusive, nan_passes)
    return np.where(keep, dy, dy.dtype.type(0))


@defect
def _inclusive(t):
    """Defect: |x| >= lambda passes gradOutput (x = +-lambda gives gradOutput instead of 0)."""
    return _kernel(t, inclusive=True)


@defect
def _one_sided(t):
    """Defect: x > lambda only (the x < -lambda branch of the doc's formula forgotten)."""
    return _kernel(t, signed=True)


@defect
def _nan_blocked(t):
    """Defect: the NaN select left out: NaN self gives 0 instead of gradOutput."""
    return _kernel(t, nan_passes=False)


@defect
def _forward_value(t):
    """Defect: the forward's value written (x - lambda, x + lambda, 0) times gradOutput: shrink for its derivative."""
    x, dy = t["self"], t["gradOutput"]
    lam = x.dtype.type(_lambda(t))
    with np.errstate(invalid="ignore", over="ignore"):
        shrunk = np.where(x > lam, x - lam, np.where(x < -lam, x + lam, x.dtype.type(0)))
        return dy * shrunk


@legitimate
def _two_compares(t):
    """Legitimate: (x > lambda) | (x < -lambda) | (x != x): the same elements as |x| > lambda."""
    x, dy = t["self"], t["gradOutput"]
    lam = _lambda(t)
    with np.errstate(invalid="ignore"):
        keep = (x > lam) | (x < -lam) | (x != x)
    return np.where(keep, dy, dy.dtype.type(0))


VARIANTS = {"softshrink-inclusive": _inclusive, "softshrink-one-sided": _one_sided,
            "softshrink-nan-blocked": _nan_blocked, "softshrink-forward-value": _forward_value,
            "softshrink-two-compares": _two_compares}


def _lambda_rule(attrs):
    """161002: lambda->ToFloat() < 0 (-0.0 and NaN pass)."""
    lam = attrs[LAMBDA]
    return "lambda < 0" if lam is not None and float(np.float32(lam)) < 0 else None


def _textbook(x, attrs, mp):
    """The doc's factor: 1 where x > lambda or x < -lambda, else 0, for the tests' mpmath oracle."""
    lam = mp.mpf(attrs[LAMBDA])
    return mp.mpf(1) if (x > lam or x < -lam) else mp.mpf(0)


_ALL = ("950", "A3", "A2", "310P", "910")

SPEC = register(OpSpec(
    name="aclnnSoftshrinkBackward",
    key="softshrink_backward",
    header="aclnnop/aclnn_softshrink_backward.h",
    summary="Gradient of softshrink: gradOutput where |self| > lambda, else 0.",
    formula="gradInput = gradOutput where |self| > lambda (or self is NaN), else +0",
    tensors=grad_signature("gradInput", self_range=(-2.0, 2.0)),
    attributes=(AttrSpec(LAMBDA, "scalar", default=0.5),),
    products=products(*_ALL, overrides={"310P": ("float32", "float16"), "910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_kernel,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", broadcast_on=_ALL, out_is_promoted=True, attribute_rule=_lambda_rule),
    special_values="self = NaN gives gradOutput (the kernel's x != x select); self = +-inf gives gradOutput (for a "
                   "finite lambda); |self| = lambda gives +0; where |self| <= lambda the result is +0 whatever "
                   "gradOutput is (NaN and inf included). lambda is used as float32; lambda = +inf gives 0 but at NaN "
                   "self.",
    textbook=_textbook,
    oracle_attributes=({LAMBDA: 0.5}, {LAMBDA: float(np.float32(0.3))}),
))

CONTRACT_NOTES = """\
Phase-one rules of aclnnSoftshrinkBackward (soft_shrink_grad/op_api/aclnn_softshrink_backward.cpp), in its order:
1. 161001: workspaceSize or executor null; gradOutput, self, lambda or gradInput null.
2. 161002: gradOutput's, self's or gradInput's dtype not in {FLOAT, FLOAT16, BF16} (910, 310P: FLOAT, FLOAT16). The
   dtypes are not compared: inputs of two dtypes are both cast to FLOAT, and the kernel's result (FLOAT, or the
   inputs' common dtype) is view-copied into gradInput, whose dtype the source leaves to ViewCopy: the contract
   asks for the promoted dtype (`out_is_promoted`), as the doc does ("gradInput的数据类型与self的相同").
3. 161002: gradOutput or self with more than 8 dims; gradOutput and self do not broadcast; gradInput's shape is not
   the broadcast shape.
4. 161002: lambda->ToFloat() < 0.
- Empty: gradOutput or gradInput empty -> SUCCESS, workspace 0.
"""
