"""aclnnSeluBackward: gradInput = gradOutput * f(y), y = result (the forward's output, selu(x)).

    f(y) = scale                     y > 0 (and y NaN: the kernel's y <= 0 is false)
         = y + alpha * scale         y <= 0   (= scale * alpha * e^x, the derivative at the x with selu(x) = y)

alpha = 1.6732632423543772848170429916717 and scale = 1.0507009873554804934193349852946, SELU's constants as the
doc, PyTorch and the kernel's comments write them (32 digits; the golden takes these decimals as exact rationals).
The doc's formula (selu_grad/docs/aclnnSeluBackward.md: alpha e^x for x < 0, 1 for x >= 0) leaves out SELU's scale
and is written in x, which the API does not take; the golden follows the source and PyTorch's
elu_backward(is_result) (decision 102).

The 950 kernel (selu_grad/op_kernel/arch35/selu_grad.h, SeluGradSelectFp32), inputs widened to float32 (Cast, or
the FP32 transit kit for float16 and bfloat16):
    mask = (y <= 0); branchA = dy * SCALE_F; tmp = y + SCALE_ALPHA_PRODUCT_F; branchB = dy * tmp;
    out = Select(mask, branchB, branchA), cast back with CAST_RINT,
SCALE_F = 1.0507009873554804934193349852946f and SCALE_ALPHA_PRODUCT_F = 1.7580993408473768599402175208123f (each
rounded to float32 by the compiler). The file's header comment says "SCALE * gradients if outputs >= 0"; the code's
CMPMODE::LE sends y = 0 to the other branch, dy * alpha * scale, as PyTorch does.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..base import F64_UNIT, Contract, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..families import Elementwise
from ..registry import register

ALPHA_TEXT, SCALE_TEXT = "1.6732632423543772848170429916717", "1.0507009873554804934193349852946"
ALPHA, SCALE = Fraction(ALPHA_TEXT), Fraction(SCALE_TEXT)
NEGCOEF = ALPHA * SCALE  # 1.75809934084737685994021752081... (the kernel's SCALE_ALPHA_PRODUCT, to its 32 digits)
S64, N64 = float(SCALE), float(NEGCOEF)  # float64, each within half an ulp (F64_UNIT relative)
# the kernel's float32 literals, as the compiler rounds them
K_SCALE = float(np.float32(1.0507009873554804934193349852946))
K_NEGCOEF = float(np.float32(1.7580993408473768599402175208123))
# Each literal less SELU's constant (the float64 nearest the exact difference): every element of a branch carries dy
# times it, which leans it the same way (Reference.lean).
E_SCALE = float(Fraction(K_SCALE) - SCALE)
E_NEGCOEF = float(Fraction(K_NEGCOEF) - NEGCOEF)


def _reference(t):
    """float64: y > 0: dy * S64 (S64 within 1 unit of scale, the product 1): 2 units of |dy| scale.
    y <= 0: y + N64 (N64 within 1 unit of alpha scale, the sum 1 unit of |y + N64|), the product 1: 3 units of
    |dy| (|y| + alpha scale); 4 taken. The scale (what verify forgives rounding in proportion to) is |dy| times the
    terms, |y| + alpha scale, where y + alpha scale cancels (y near -1.758, the forward's saturation).
    lean: the kernel's literal less the constant, times dy, as it moves |result| (times the sign of the factor). At
    saturation every 16-bit result is the same value (-1.7578125), y + alpha scale is 2.9e-4, and the float32
    literal's rounding moves every element 8e-5 of itself the same way: more than the error balance allows a
    float16 kernel, which counts each element's lean less this (decision 243)."""
    y, dy = t["result"], t["gradOutput"]
    neg = y <= 0
    factor = np.where(neg, y + N64, S64)
    terms = np.where(neg, np.abs(y) + N64, S64)
    value = dy * factor
    scale = np.abs(dy) * terms
    with np.errstate(invalid="ignore", over="ignore"):
        lean = np.abs(dy) * np.where(neg, np.sign(factor) * E_NEGCOEF, E_SCALE)
    return Reference(value, F64_UNIT * 4.0 * scale, scale, lean=np.where(np.isfinite(lean), lean, 0.0))


def _exact(t):
    """One element, Fractions in: rational (the constants are the 32-digit decimals)."""
    y, dy = t["result"], t["gradOutput"]
    return dy * (y + NEGCOEF) if y <= 0 else dy * SCALE


def _ieee(t):
    """Non-finite inputs in float64, as the kernel's select takes them: NaN y gives dy * scale; y = -inf gives
    dy * -inf; an infinite dy times the factor (NaN where it is 0: y = -alpha scale)."""
    y, dy = t["result"], t["gradOutput"]
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(y <= 0, dy * (y + N64), dy * S64)


def _kernel(t, scale=K_SCALE, negcoef=K_NEGCOEF, strict=False, nan_negative=False):
    """The 950 kernel in the inputs' float type (float32 for emulate); the keywords make the defects."""
    y, dy = t["result"], t["gradOutput"]
    ft = y.dtype.type
    with np.errstate(invalid="ignore", over="ignore"):
        a = dy * ft(scale)
        b = dy * (y + ft(negcoef))
        if nan_negative:
            return np.where(y > 0, a, b)
        return np.where((y < 0) if strict else (y <= 0), b, a)


@defect
def _scale_dropped(t):
    """Defect: the doc's 1 for x >= 0: y > 0 passes dy through (SELU's scale left out of the positive branch)."""
    return _kernel(t, scale=1.0)


@defect
def _negcoef_alpha(t):
    """Defect: y + alpha instead of y + alpha * scale (the scale left out of the negative branch's constant)."""
    return _kernel(t, negcoef=float(np.float32(ALPHA_TEXT)))


@defect
def _strict_zero(t):
    """Defect: the header comment's y >= 0 branch: y = +-0 gives dy * scale instead of dy * alpha * scale."""
    return _kernel(t, strict=True)


@defect
def _nan_negative(t):
    """Defect: the select on y > 0 (ops-nn's ATK executor's torch.where): NaN y gives NaN instead of dy * scale."""
    return _kernel(t, nan_negative=True)


@defect
def _doc_formula(t):
    """Defect: the doc's formula read on the API's input: alpha e^y for y < 0, 1 for y >= 0."""
    y, dy = t["result"], t["gradOutput"]
    ft = y.dtype.type
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(y < 0, dy * (ft(float(np.float32(ALPHA_TEXT))) * np.exp(y)), dy)


@legitimate
def _one_rounding(t):
    """Legitimate: each branch rounded once (dy * (y + alpha scale) formed in float64 from the float32 constants, as a
    fused multiply-add would): one rounding fewer than the kernel, the same infinities and NaNs."""
    y, dy = t["result"], t["gradOutput"]
    wide = {k: np.asarray(v, dtype=np.float64) for k, v in (("result", y), ("gradOutput", dy))}
    return _kernel(wide).astype(y.dtype)


VARIANTS = {"selu-scale-dropped": _scale_dropped, "selu-negcoef-alpha-only": _negcoef_alpha,
            "selu-strict-zero": _strict_zero, "selu-nan-negative-branch": _nan_negative,
            "selu-doc-formula": _doc_formula, "selu-one-rounding": _one_rounding}


_TEXTBOOK_CONSTANTS: dict = {}  # mpmath precision -> (alpha * scale, scale)


def _textbook(y, attrs, mp):
    """SELU's derivative at the x with selu(x) = y, in y: scale (y > 0), scale alpha e^x = y + alpha scale (y <= 0),
    for the tests' mpmath oracle (the constants from their decimals, not from this module's Fractions; once per
    precision)."""
    prec = mp.mp.prec
    if prec not in _TEXTBOOK_CONSTANTS:
        alpha, scale = mp.mpf("1.6732632423543772848170429916717"), mp.mpf("1.0507009873554804934193349852946")
        _TEXTBOOK_CONSTANTS[prec] = (alpha * scale, scale)
    negcoef, scale = _TEXTBOOK_CONSTANTS[prec]
    return y + negcoef if y <= 0 else scale


_ALL = ("950", "A3", "A2", "310P", "910")

SPEC = register(OpSpec(
    name="aclnnSeluBackward",
    key="selu_backward",
    header="aclnnop/aclnn_selu_backward.h",
    summary="Gradient of SELU from its output: gradOutput * scale (result > 0), gradOutput * (result + alpha * scale).",
    formula="gradInput = gradOutput * scale (result > 0 or NaN), gradOutput * (result + alpha * scale) (result <= 0); "
            "alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946",
    tensors=(TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
             TensorSpec("result", "input", {"uniform": [-2.0, 3.0]}),
             TensorSpec("gradInput", "output", {"constant": 0})),
    products=products(*_ALL, overrides={"310P": ("float32", "float16"), "910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    # (its literals' roundings lean every element alike: a failing verdict gets verify's second look)
    family=Elementwise(shared_errors=True),
    exact=_exact,
    kernel=_kernel,
    ieee=_ieee,
    variants=VARIANTS,
    contract=Contract(dtypes="same", checks_dims=False),
    special_values="result = NaN gives gradOutput * scale (the kernel's result <= 0 is false); +inf gives gradOutput "
                   "* scale; -inf gives gradOutput * -inf (NaN for a zero gradOutput); result = +-0 gives gradOutput "
                   "* alpha * scale; NaN gradOutput gives NaN. The golden's constants are the 32-digit decimals; the "
                   "device's are their float32 roundings.",
    textbook=_textbook,
))

CONTRACT_NOTES = """\
Phase-one rules of aclnnSeluBackward (selu_grad/op_api/aclnn_selu_backward.cpp), in the source's order:
1. 161001: gradOutput, result or gradInput null. workspaceSize / executor: not checked (no OP_CHECK_COMM_INPUT).
2. 161002: result's or gradInput's dtype differs from gradOutput's (OP_CHECK_DTYPE_NOT_SAME, before the list); a
   dtype not in {FLOAT, FLOAT16, INT32, INT8} + BF16 where SocVersion is in [ASCEND910B, ASCEND910E] (A2, A3, 950:
   ASCEND950 sits between them in opdev/platform.h's enum); 910 and 310P: no BF16. The integer dtypes are the
   API's and not aclnn-cli's (no standard for integer outputs, as ThresholdBackward, decision 94): the contract
   lists the float ones and calls an INT32 or INT8 call 161002, which the API does not.
3. 161002: result's or gradInput's shape differs from gradOutput's (no broadcasting).
- Dims: none checked (the doc says 1-8): a 0-dim call is accepted, a call of more than 8 dims is reshaped to 1-D
  around the kernel (checks_dims=False; the cases keep to the doc's 0-8).
- Empty: gradOutput or result empty -> SUCCESS, workspace 0 (the doc says result may not be empty).
- Compute: the kernel's output is in the inputs' dtype, l0op::Cast to gradInput's (the same: no second rounding).
"""
