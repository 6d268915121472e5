"""aclnnLogSoftmaxBackward: out = dy - exp(y) * sum(dy, dim), y = `output` (the forward log-softmax output).

exp makes the result irrational (for y != 0 and a nonzero sum), so the exact path computes exp with
the decimal module, to >= 150 bits of the result itself (more digits where the two terms cancel).
The 950 kernel (activation/log_softmax_grad/op_kernel/arch35/log_softmax_grad_ar_full_load.h; the ARA
templates alike), in float32: s = the row sum of dy (`softmax_common.row_sum32`), out = Sub(dy,
Mul(Exp(y), s)), cast CAST_RINT. exp(y) overflows float32 above y = 88.72: the kernel then gives
-inf * sign(s) (NaN where s = 0) where the exact result may be finite: `edge` accepts it.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from . import softmax_common as C
from ..base import Contract, FLOATS, OpSpec, Reference, defect, legitimate
from ..exact import dec
from ..mathfns import exp as cr_exp
from ..registry import register
from ..treesum import row_sum64
from ...tensor.dtypes import lookup, round_from_f64

DY, Y = C.DY, C.Y
# y is clipped to [Y_LO, Y_HI] in the reference and the exact path. Past Y_HI a nonzero sum (|s| >= 2^-149, a
# sum of binary32/16 values) makes |s e^y| >= 2^139 > 2^128 + |dy|: every dtype's golden is -inf * sign(s) with
# or without the clip. Below Y_LO |s e^y| <= 2^142 e^-300 < 2^-290: dy - s e^y rounds to dy (a value of the
# output dtype), or to a zero of sign -sign(s) where dy = 0, with or without the clip.
Y_LO, Y_HI = -300.0, 200.0
EXP_ULPS = 4  # numpy's float64 exp is within this many ulps (tests/test_op_log_softmax_backward.py checks it)


def _reference(t):
    """dy - e * s in float64, e = exp(clip(y)), s the row sum of dy by C.row_sum_bounded.

    |s64 - s| <= B (u |s64| by math.fsum, F u M pairwise on short rows; M = sum |dy|), |e64 - e| <= 2 EXP_ULPS
    u e, the product and the difference one rounding each: |value - exact| <= u |value| (1 + 2u) + u e |s64|
    + e B + 2 EXP_ULPS u e |s| <= u (|value| + (2 EXP_ULPS + 2) e |s64|) + e B (1 + 2^-30 slack for |s| vs
    |s64| and the products of u's). scale = |dy| + e M: the sum's error (log2 R u M), exp's (a few u e |s|)
    and the roundings are proportional to it, and it bounds |exact|.
    """
    dy, y = t[DY], t[Y]
    e = cr_exp(np.clip(y, Y_LO, Y_HI))
    big_m = row_sum64(np.abs(dy))
    total, err = C.row_sum_bounded(dy, big_m)
    value = dy - e * total
    bound = (C.U * (np.abs(value) + (2 * EXP_ULPS + 3) * e * np.abs(total)) + e * err) * (1 + 2.0**-30)
    return Reference(value, bound, (np.abs(dy) + e * big_m) * (1 + 2.0**-30))


def exact_one(dy: Fraction, s: Fraction, y: Fraction) -> Fraction | Decimal:
    """dy - s e^clip(y): a Fraction where it is rational (s = 0, y = 0), else a Decimal whose relative error is
    below 10^-46 (~2^-152), digits doubled until the two terms' cancellation leaves that many."""
    y = min(max(y, Fraction(Y_LO)), Fraction(Y_HI))
    if s == 0 or y == 0:
        return dy - s * (y == 0)
    digits = 60
    while digits <= 4000:
        with localcontext() as ctx:
            ctx.prec, ctx.Emax, ctx.Emin = digits, 10**9, -(10**9)
            term = dec(s) * dec(y).exp()
            r = dec(dy) - term
            # dec() rounds each input once (y's error grows |y| times through exp), exp, * and - once each
            err = (abs(term) * (abs(dec(y)) + 4) + abs(dec(dy))) * Decimal(10) ** (1 - digits)
            if abs(r) > err * Decimal(10) ** 46:
                return r
        digits *= 2
    raise ArithmeticError(f"dy - s*exp(y) unresolved at 4000 digits (dy={dy}, s={s}, y={y})")


def _exact(t):
    """exact_one on every element; s the row's exact Fraction sum (any k rows, any A0)."""
    dy, y = t[DY], t[Y]
    s = np.broadcast_to(dy.sum(axis=1, keepdims=True), dy.shape)
    out = np.empty(dy.shape, dtype=object)
    for i in np.ndindex(dy.shape):
        out[i] = exact_one(dy[i], s[i], y[i])
    return out


_DTYPES = tuple(lookup(d) for d in FLOATS)


def _ieee(t):
    """Rows holding a non-finite input, in float64 (the pipeline takes these values as exact, bound 0).

    A non-finite dy makes its row's sum inf/NaN and every element inf/NaN, as IEEE arithmetic gives them. With
    dy finite the sum is finite and exact (its sign from math.fsum): y = +inf gives -inf * sign(s) (NaN for
    s = 0), y = -inf gives dy, y = NaN gives NaN, and a finite y the value of the formula. Those are the
    reference's where its bound proves every float dtype's rounding, else exact_one rounded to odd (odd64),
    which any of them then rounds correctly.
    """
    dy, y = t[DY], t[Y]
    with np.errstate(all="ignore"):
        value = dy - cr_exp(y) * dy.sum(axis=1, keepdims=True)
        ok_dy = np.isfinite(dy).all(axis=1, keepdims=True)  # (k, 1, A0): columns whose sum is finite
        if not ok_dy.any():
            return value
        cols = np.broadcast_to(ok_dy, dy.shape)
        dy_ok = np.where(cols, dy, 0.0)
        s, err = C.row_sum_bounded(dy_ok, row_sum64(np.abs(dy_ok)))
        for k, _, a0 in zip(*np.nonzero(ok_dy & (np.abs(s) <= err))):  # (the sign in doubt: exactly)
            s[k, 0, a0] = math.fsum(dy[k, :, a0])
        s = np.broadcast_to(s, dy.shape)
        ref = _reference({DY: dy_ok, Y: np.where(np.isfinite(y), y, 0.0)})
        value = np.where(cols & np.isfinite(y), ref.value, value)
        value = np.where(cols & (y == np.inf), -np.inf * np.sign(s), value)
        value = np.where(cols & (s == 0) & (y == np.inf), np.nan, value)
        value = np.where(cols & (y == -np.inf), dy, value)
        sure = np.ones(dy.shape, dtype=bool)
        for d in _DTYPES:
            r = round_from_f64(ref.value, d).astype(np.float64)
            lo, hi = (round_from_f64(ref.value + b, d).astype(np.float64) for b in (-ref.bound, ref.bound))
            sure &= (r == lo) & (r == hi) & ((r != 0) | (ref.value == 0))
    for i in zip(*np.nonzero(cols & np.isfinite(y) & ~sure)):
        dyf = dy[(i[0], slice(None), i[2])]
        q = exact_one(Fraction(dy[i]), sum(map(Fraction, dyf.tolist()), Fraction(0)), Fraction(y[i]))
        value[i] = C.odd64(Fraction(q))
    return value


def _combine(sum_fn, exp=cr_exp):
    """dy - exp(y) * sum_fn(dy): the 950 kernel's order with the row sum (and exp) chosen."""
    def kernel(t):
        dy = t[DY]
        return dy - exp(t[Y]) * sum_fn(dy)
    return kernel


_kernel = _combine(C.row_sum32)
_kernel.__doc__ = "The 950 kernel in float32: s = 950 row sum of dy; dy - Exp(y) * s."


def _subnormal_exp(t32):
    """Where float32 exp(y) is below the normal range: its few bits times s may be off by more than the gate's
    floor; the device's value there is the kernel's."""
    with np.errstate(all="ignore"):
        return cr_exp(t32[Y]) < C.F32_MIN_NORMAL


@defect
def _flipped_sum(t):
    """Defect: the reduction term's sign flipped: dy + exp(y) * s."""
    return t[DY] + cr_exp(t[Y]) * C.row_sum32(t[DY])


@defect
def _missing_sum(t):
    """Defect: the reduction term left out: out = dy."""
    return np.array(t[DY], copy=True)


@defect
def _wrong_axis(t):
    """Defect: the sum taken along the axes after dim instead of along dim (dim last: each element its own row)."""
    return _combine(C.trailing_sum)(t)


@defect
def _half_accumulation(t):
    """Defect: sum(dy) accumulated in index order in float16 (stagnates on long rows of like-signed dy)."""
    return _combine(C.half_sum)(t)


@defect
def _dropped_element(t):
    """Defect: sum(dy) misses the row's last element (a loop bound off by one)."""
    return _combine(C.dropped_sum)(t)


@defect
def _missing_exp(t):
    """Defect: `output` taken as probabilities, not log-probabilities: dy - y * s."""
    return _combine(C.row_sum32, exp=lambda y: y)(t)


@legitimate
def _aten_order(t):
    """Legitimate: ATen's CPU kernel (SoftMaxKernel.cpp): sum(dy) in 8 float32 lanes along the last dim, a
    running sum per column otherwise (C.aten_sum), then dy - exp(y) * s."""
    return _combine(C.aten_sum)(t)


@legitimate
def _exp_two_ulps(t):
    """Legitimate: an Exp 2 ulps off numpy's, up or down with y's last bit (the device's Exp accuracy is not
    in ops-nn; a one-sided bias is the gate's error-balance business, tests/test_op_log_softmax_backward.py)."""
    def exp(y):
        e = cr_exp(y)
        up = (np.asarray(y, dtype=np.float32).view(np.uint32) & 1) == 0
        away = np.where(up, np.inf, -np.inf).astype(e.dtype)
        return np.nextafter(np.nextafter(e, away), away)
    return _combine(C.row_sum32, exp=exp)(t)


VARIANTS = {
    "logsoftmax-flipped-sum": _flipped_sum,
    "logsoftmax-missing-sum": _missing_sum,
    "logsoftmax-wrong-axis": _wrong_axis,
    "logsoftmax-half-accumulation": _half_accumulation,
    "logsoftmax-dropped-element": _dropped_element,
    "logsoftmax-missing-exp": _missing_exp,
    "logsoftmax-aten-order": _aten_order,
    "logsoftmax-exp-2ulp": _exp_two_ulps,
}

SPEC = register(OpSpec(
    name="aclnnLogSoftmaxBackward",
    key="log_softmax_backward",
    header="aclnnop/aclnn_logsoftmax_backward.h",
    signature=C.SIGNATURE,
    summary="Gradient of log-softmax along dim from the forward output y: dy - exp(y) * sum(dy, dim).",
    formula="out = gradOutput - sum(gradOutput, dim, keepdim) * exp(output)",
    tensors=C.tensors({"uniform": [-10.0, 0.0]}),
    attributes=(C.DIM,),
    products=C.PRODUCTS,
    dims=(0, 8),
    empty_ok=True,
    family=C.FAMILY,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_ieee,
    edge=C.overflow_edge(_kernel, extra=_subnormal_exp),
    variants=VARIANTS,
    contract=Contract(dtypes="promote", shape_rule=C.rules_in_order(C.dtype_rule, C.shapes_rule, C.dim_rule)),
    special_values="A non-finite gradOutput makes its row's sum and every element of the row inf/NaN. With "
                   "gradOutput finite: output = +inf gives -inf * sign(sum) (NaN for a zero sum), -inf gives "
                   "gradOutput exactly, NaN gives NaN; the row's other elements stay finite. output above 88.72 "
                   "overflows the kernel's float32 exp: the golden is exact (finite where the sum is small), "
                   "verify also accepts the kernel's -inf * sign(s) or NaN there.",
))

CONTRACT_NOTES = """\
aclnnLogSoftmaxBackward phase one (activation/log_softmax_grad/op_api/aclnn_logsoftmax_backward.cpp):
- Order: output, gradOutput, out null -> 161001 (output checked first); off 950 an empty gradOutput or
  output returns ACLNN_SUCCESS before any other check; gradOutput or output BF16 on a SoC outside
  [ASCEND910B, ASCEND910E] -> 161002; dtypes not FLOAT/FLOAT16/BF16 or gradOutput's != output's ->
  161002; gradOutput or output over 8 dims, output's or out's shape != gradOutput's -> 161002; dim
  outside [-n, n - 1] (0-d as 1; the doc says [-n, n]) -> 161002; then empty -> ACLNN_SUCCESS.
- out's dtype is not checked (Cast after the kernel): Contract "promote" with output's dtype tied to
  gradOutput's by the shape_rule, as for aclnnSoftmaxBackward (and the same caveat for an out wider than the
  inputs). 0-d tensors are accepted (the doc says 1-8 dims).
- The kernel is registered for ascend950 only (op_host/log_softmax_grad_def.cpp).
"""
