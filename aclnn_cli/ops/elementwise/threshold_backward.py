"""aclnnThresholdBackward: out = gradOutput where self > threshold, else 0.

threshold reaches the op_api as float32 (`aclScalar::ToFloat`, op_api/aclnn_threshold_backward.cpp), which sends the
call to one of two kernels:

- |threshold| <= FLT_EPSILON (IsFloatEqual(threshold, 0)): ReluGrad (relu_grad/op_kernel/arch35/relu_grad_dag.h),
  out = dy * Select(x <= 0, 0, 1) in the inputs' dtype. The product carries IEEE's signs and NaNs: a negative dy gives
  -0, an infinite or NaN dy gives NaN where x <= 0. It compares with 0, not with the threshold: for
  0 < |threshold| <= 2^-23 the elements between 0 and the threshold differ from the doc's formula (`edge`).
- otherwise: ThresholdGradV2D (threshold_grad_v2_d_dag.h): Select(x <= threshold, 0.0f, dy) in float32 (inputs
  widened), cast back: +0 or dy itself.

Either way NaN x passes dy (x <= t is false). The result is exact (dy or a zero): the golden is the doc's formula
(its zero +0) with the non-finite semantics of the kernel the op_api picks (decision 94).

Integer dtypes (INT32, INT8, UINT8 on every product; INT64 on the 950 at |threshold| <= FLT_EPSILON only, the one
list of the op_api's that depends on the threshold: `_int64_rule`). The doc's formula compares self with the
threshold; the op_api hands both kernels the float32 ToFloat gives, so the golden is dy where x > fl32(threshold),
exactly, in the integers (an integer output is judged `exact`, docs/verify.md). The 950's kernels:
- ReluGrad: the compare and the product in the dtype (int8 and uint8 through half, exact): dy or 0, exact.
- ThresholdGradV2D: int8 and uint8 through half to float32 (exact); int32 cast to float32 with CAST_RINT, selected
  there, cast back. Past 2^24 the int32 self compares as its float32 rounding and the int32 dy comes back rounded
  (2^24 + 1 as 2^24): the doc's formula says neither, so that is judged a device finding, not forgiven (the emulated
  kernel does the round trip, and verify FAILs it: tests/test_op_threshold_backward.py).
A2, A3, 910 and 310P run the built-in library's kernels, not in ops-nn: emulated as the 950's.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np

from ..base import FLOATS, AttrSpec, Contract, OpSpec, Reference, defect, grad_signature, legitimate, products
from ..registry import register

FLT_EPSILON = float(np.finfo(np.float32).eps)


def _threshold(t) -> float:
    return float(np.float32(t["threshold"]))


def _relu_path(t) -> bool:
    """The op_api's IsFloatEqual(threshold, 0.0): |threshold - 0| <= FLT_EPSILON, in float32 (NaN: false)."""
    return bool(abs(_threshold(t)) <= FLT_EPSILON)


def _passes(x, thr):
    with np.errstate(invalid="ignore"):
        return ~(x <= thr)  # NaN x: x <= thr is false, dy passes


def _reference(t):
    """Exact: dy or +0 (bound 0). (ReluGrad's product gives -0 for a negative dy: verify takes -0 for +0.)"""
    dy = t["gradOutput"]
    value = np.where(_passes(t["self"], _threshold(t)), dy, np.zeros_like(dy))  # (an integer dy: stays exact)
    return Reference(value, np.zeros_like(value), np.abs(dy))


def _exact(t):
    x = t["self"]
    return t["gradOutput"] if x > Fraction(_threshold(t)) else Fraction(0)


def _relu_kernel(x, dy):
    """ReluGrad: dy * Select(x <= 0, 0, 1) in the inputs' dtype."""
    with np.errstate(invalid="ignore"):
        return dy * np.where(x <= 0, dy.dtype.type(0), dy.dtype.type(1))


def _widened(x, dy, through=np.float32):
    """ThresholdGradV2D's integer casts in: int8 and uint8 through half to float32 (exact), int32 to float32 with
    CAST_RINT (exact to 2^24 only: a larger self compares, and a larger gradOutput comes back, as its float32
    rounding; the doc's formula, the golden, has neither). `through`: the defect's narrower compute type. int64
    (ReluGrad's only: a defect that leaves ReluGrad) stays int64, as ReluGrad computes it."""
    if dy.dtype == np.int64:
        return x, dy
    return x.astype(through).astype(np.float32), dy.astype(through).astype(np.float32)


def _narrowed(value, dtype):
    """The cast back out (CAST_RINT), saturated at the dtype's range (float32(2^31 - 1) is 2^31)."""
    if value.dtype.kind in "iu":
        return value.astype(dtype)
    info = np.iinfo(dtype)
    return np.clip(np.rint(value.astype(np.float64)), info.min, info.max).astype(dtype)


def _kernel(t, inclusive=False, nan_passes=True, relu_always=False, inverted=False, cast_threshold=False,
            through=np.float32):
    """The kernel the op_api picks. The keywords make the defects."""
    x, dy = t["self"], t["gradOutput"]
    thr = _threshold(t)
    if relu_always or (_relu_path(t) and not (inclusive or inverted or not nan_passes)):
        return _relu_kernel(x, dy)
    zero = dy.dtype.type(0)
    if dy.dtype.kind in "iu":
        thr = _cast(thr, dy.dtype) if cast_threshold else thr
        wx, wdy = _widened(x, dy, through)
        return _narrowed(_select(wx, wdy, thr, wdy.dtype.type(0), inclusive, nan_passes, inverted), dy.dtype)
    return _select(x, dy, thr, dy * zero if _relu_path(t) else zero, inclusive, nan_passes, inverted)


def _select(x, dy, thr, zero, inclusive, nan_passes, inverted):
    """Select(x <= threshold, zero, dy), or a defect's compare."""
    with np.errstate(invalid="ignore"):
        if inverted:
            keep = x < thr
        elif inclusive:
            keep = ~(x < thr)
        else:
            keep = _passes(x, thr)
        if not nan_passes:
            keep &= ~np.isnan(x)
    return np.where(keep, dy, zero)


def _cast(thr: float, dtype) -> float:
    """A C cast of the float threshold to an integer dtype: toward zero, then modulo the dtype (an infinite one, which
    C leaves undefined, stays as it is)."""
    if not np.isfinite(thr):
        return thr
    return float(np.array(int(thr) % (1 << 64), dtype=np.uint64).astype(dtype))


def _edge(t):
    """0 < |threshold| <= FLT_EPSILON: the device compares with 0 (ReluGrad), the formula with the threshold."""
    x = np.asarray(t["self"])
    thr = _threshold(t)
    if not (_relu_path(t) and thr != 0):
        return np.zeros(x.shape, dtype=bool), np.zeros(x.shape)
    with np.errstate(invalid="ignore"):
        where = (x > thr) != (x > 0)
    return where, _relu_kernel(x.astype(np.float64), np.asarray(t["gradOutput"], dtype=np.float64))


@defect
def _inclusive(t):
    """Defect: x >= threshold passes gradOutput (x == threshold gives gradOutput instead of 0)."""
    return _kernel(t, inclusive=True)


@defect
def _threshold_ignored(t):
    """Defect: ReluGrad for every threshold (the op_api's dispatch lost): x > 0 instead of x > threshold."""
    return _kernel(t, relu_always=True)


@defect
def _nan_blocked(t):
    """Defect: NaN self gives 0 (a compare x > threshold selecting dy, instead of x <= threshold selecting 0)."""
    return _kernel(t, nan_passes=False)


@defect
def _inverted(t):
    """Defect: the select's operands swapped: gradOutput where self < threshold."""
    return _kernel(t, inverted=True)


@defect
def _threshold_cast(t):
    """Defect (integer dtypes): the threshold cast to self's dtype before the compare, as C does (toward zero, then
    modulo the dtype): -2.5 compares as -2, and uint8's -17 as 239."""
    return _kernel(t, cast_threshold=True)


@defect
def _int_through_half(t):
    """Defect (integer dtypes): every integer through half, as the 8-bit DAG does, int32 included: values past 2048
    round to float16's spacing (and past 65504 overflow)."""
    return _kernel(t, through=np.float16)


@legitimate
def _compare_wide(t):
    """Legitimate: the compare in float64 (the inputs and float32 threshold are exact there: the same elements)."""
    x, dy = t["self"], t["gradOutput"]
    if _relu_path(t):
        return _relu_kernel(x, dy)
    with np.errstate(invalid="ignore"):
        keep = ~(x.astype(np.float64) <= np.float64(_threshold(t)))
    return np.where(keep, dy, dy.dtype.type(0))


VARIANTS = {"threshold-inclusive": _inclusive, "threshold-ignored": _threshold_ignored,
            "threshold-nan-blocked": _nan_blocked, "threshold-inverted": _inverted,
            "threshold-cast-to-dtype": _threshold_cast, "threshold-int-through-half": _int_through_half,
            "threshold-compare-wide": _compare_wide}


def _int64_rule(tensors, attrs) -> str | None:
    """The 950's list holds INT64 only when |ToFloat(threshold)| <= FLT_EPSILON (ReluGrad takes it;
    ThresholdGradV2D's OpDef has no int64). The other products' lists have no INT64 at all."""
    named = [n for n, d in tensors.items() if not d.null and d.dtype.name == "int64"]
    if named and not _relu_path(attrs):
        return (f"{named[0]} dtype int64 is supported only at |threshold| <= FLT_EPSILON (ReluGrad), "
                f"not at threshold {float(np.float32(attrs['threshold'])):g}")
    return None


def _textbook(x, attrs, mp):
    """The doc's factor: 1 where x > threshold, else 0, for the tests' mpmath oracle."""
    return mp.mpf(1) if x > mp.mpf(attrs["threshold"]) else mp.mpf(0)


_ALL = ("950", "A3", "A2", "310P", "910")
_INTEGERS = ("int32", "int8", "uint8")  # (every product's list; int64 the 950's, at threshold 0 only)

# An integer call's defaults: small naturals (uint8 holds them too) around the default threshold 0.
_INTEGER_FILLS = {"gradOutput": {"randint": [1, 100]}, "self": {"randint": [0, 3]}}
_TENSORS = tuple(replace(t, integer_fill=_INTEGER_FILLS.get(t.name)) for t in grad_signature("out", self_range=(-2.0, 2.0)))

SPEC = register(OpSpec(
    name="aclnnThresholdBackward",
    key="threshold_backward",
    header="aclnnop/aclnn_threshold_backward.h",
    summary="Gradient of threshold: gradOutput where self > threshold, else 0 (threshold 0: ReLU's gradient).",
    formula="out = gradOutput where self > threshold (or self is NaN), else 0",
    tensors=_TENSORS,
    attributes=(AttrSpec("threshold", "scalar", default=0.0),),
    products=products(*_ALL, dtypes=FLOATS + _INTEGERS, overrides={
        "950": FLOATS + _INTEGERS + ("int64",), "310P": ("float32", "float16") + _INTEGERS,
        "910": ("float32", "float16") + _INTEGERS}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_kernel,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="same", broadcast_on=_ALL, dtype_attribute_rule=_int64_rule),
    special_values="self = NaN gives gradOutput (x <= threshold is false in both kernels); self = +inf gives "
                   "gradOutput, -inf gives 0 (finite threshold). With |threshold| <= FLT_EPSILON (ReluGrad: "
                   "gradOutput * 0 or 1) an infinite or NaN gradOutput gives NaN where self <= 0 (a negative one -0, "
                   "which verify takes for the golden's +0); with any other "
                   "threshold (a select) the zero is +0 whatever gradOutput is. "
                   "threshold is used as float32; threshold = NaN passes gradOutput everywhere.",
    textbook=_textbook,
    oracle_attributes=({"threshold": 0.0}, {"threshold": 0.5}, {"threshold": float(np.float32(-0.3))}),
))

CONTRACT_NOTES = """\
Phase-one rules of aclnnThresholdBackward (threshold_grad_v2_d/op_api/aclnn_threshold_backward.cpp), in its order:
1. 161001: threshold null, then out null, then workspaceSize null (executor is not checked), then gradOutput or
   self null.
2. 161002: gradOutput's or self's dtype not in the list: 950 {FLOAT, INT32, FLOAT16, INT8, UINT8, BF16, and INT64 when
   |threshold| <= FLT_EPSILON}; A2, A3 the same without INT64; 910, 310P {FLOAT, INT32, FLOAT16, INT8, UINT8}.
   gradOutput's dtype not self's; out's dtype not self's. (The doc: no INT64 on A2/A3, no BF16 or INT64 on 910/310P,
   INT64 on the 950 "only at 0.0" - the source's FLT_EPSILON test.)
3. 161002: gradOutput or self with more than 8 dims; gradOutput and self do not broadcast; out's shape not the
   broadcast shape.
- Empty: self or gradOutput empty -> SUCCESS, workspace 0 (after the shape checks).
- Dispatch: |ToFloat(threshold)| <= FLT_EPSILON -> ReluGrad (x > 0, dy * mask), else ThresholdGradV2D (x > threshold,
  select). The doc lists only 161001 for gradOutput and self; the source checks threshold and out too.
"""
