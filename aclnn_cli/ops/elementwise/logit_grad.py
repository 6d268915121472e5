"""aclnnLogitGrad: out = dy / (x (1 - x)) where eps <= x <= 1 - eps; outside, 0 (eps >= 0) or NaN (eps < 0: [0, 1]).

ops-nn (e5c3fa93) has no op_api for it: the aclnn is generated from the OpDef (loss/logit_grad/op_host/CMakeLists.txt
ACLNNTYPE aclnn; logit_grad_def.cpp: x, dy, dx of one dtype among BF16, FLOAT16, FLOAT, ND; eps a Float attribute,
line 44). The header's `double eps` therefore reaches the tiling as a float (logit_grad_tiling.cpp, RunBigKernelTiling:
`*(attrs->GetFloat(0))`, stored as the tiling's float eps): every function here narrows eps to float32 first.

The kernel (loss/logit_grad/op_kernel/logit_grad.h, one source for the A2/A3 and 950 cores), in float32 (16-bit
inputs widened exactly, CopyInAndCast):
- Init, lines 103-109: eps >= 0 -> lo = eps, outside value 0; else (NaN too: the compare is false) lo = 0, outside
  value sqrt(-1) = NaN.
- ComputeStepOne, lines 233-239: t = fl(x * -1 + 1), p = fl(x t), q = fl(dy / p).
- ComputeStepTwo, lines 359-374: inside = x >= lo and x <= fl(1 - lo) (CompareScalar GE, LE; NaN x is outside);
  Select(inside, q, outside value).
- CastAndCopyOut, lines 381-386: float16 CAST_NONE, bfloat16 CAST_RINT: round to nearest even.
The 950's fused float16 and bfloat16 paths (ComputeFusedFp16/Bf16, lines 245-353) do the same in registers.

The golden is the exact dy / (x (1 - x)) rounded once, in the exact window [lo, 1 - lo] (the doc's formula, with the
float32 eps); where the kernel's float32 upper end fl(1 - lo) exceeds 1 - lo, or its float32 quotient crosses a
dtype's overflow threshold that the exact value does not, verify also accepts the kernel's value (`_edge`). At
x = +-0 and 1 inside the window the quotient is dy / +-0 in IEEE, as the kernel divides: -0 gives -inf for dy > 0
(PyTorch's dy * inf gives +inf there). The result is rational in the inputs: the exact path is Fractions.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..base import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..registry import register

F32 = np.float32
EPS = "eps"
# |q| at and past which each output dtype rounds to infinity (its largest finite value plus half an ulp)
OVERFLOW = (65520.0, 2.0**128 * (1 - 2.0**-9), 2.0**128 * (1 - 2.0**-25))


def eps32(t) -> float:
    """eps as the kernel holds it: the double narrowed to float (NaN stays NaN, past FLT_MAX an infinity)."""
    with np.errstate(over="ignore"):
        return float(F32(float(t[EPS])))


def window(t) -> tuple[float, float, float]:
    """(lo, hi, the value outside): Init's two branches, eps narrowed first. hi is the largest double <= the exact
    1 - lo, so `x <= hi` decides x <= 1 - lo exactly for every double x (1e-20 must not make x = 1 inside)."""
    e = eps32(t)
    if not e >= 0:
        return 0.0, 1.0, math.nan
    hi = 1.0 - e
    if math.isfinite(e) and Fraction(hi) > 1 - Fraction(e):
        hi = math.nextafter(hi, -math.inf)
    return e, hi, 0.0


def _inside(x, lo: float, hi: float):
    with np.errstate(invalid="ignore"):
        return (x >= lo) & (x <= hi)


def _reference(t):
    """dy / (x (1 - x)) in float64: 1 - x, the product and the quotient one rounding each (x is a float32 value, so
    nothing underflows or overflows in float64): within 3.01 u |value|, 4 u taken. No terms cancel: the scale is
    |value|. A pole (x = +-0 or 1) or the NaN outside is exact (bound 0, scale 0)."""
    x, dy = t["x"], t["dy"]
    lo, hi, outside = window(t)
    with np.errstate(all="ignore"):
        value = np.where(_inside(x, lo, hi), dy / (x * (1.0 - x)), outside)
    finite = np.isfinite(value)
    magnitude = np.where(finite, np.abs(value), 0.0)
    return Reference(value, 4 * 2.0**-53 * magnitude, magnitude)


def _ieee(t):
    """The same formula where an input is inf or NaN: NaN and +-inf x are outside; inside, dy's inf or NaN
    propagates through the quotient."""
    x, dy = t["x"], t["dy"]
    lo, hi, outside = window(t)
    with np.errstate(all="ignore"):
        return np.where(_inside(x, lo, hi), dy / (x * (1.0 - x)), outside)


def _exact(t):
    x, dy = t["x"], t["dy"]
    lo, hi, outside = window(t)
    if not (lo <= x <= hi):
        return Fraction(0) if outside == 0 else math.nan
    p = x * (1 - x)
    if p == 0:  # (a pole: its float64 value is an infinity, certified, so gen never asks; -0 keeps no sign here)
        return math.nan if dy == 0 else math.copysign(math.inf, dy)
    return dy / p


def _kernel(t, strict=False, flip=False, eps_used=True, nan_outside=True, hi_exact=False):
    """ComputeStepOne and ComputeStepTwo in the inputs' float type; the keywords make the defects and variants."""
    x, dy = t["x"], t["dy"]
    ft = x.dtype.type
    lo, hi, outside = window(t) if eps_used else window({EPS: -1.0})
    if not hi_exact:
        hi = float(ft(1.0) - ft(lo))  # (the kernel's hi: 1 - lo rounded to float32)
    if not nan_outside:
        outside = 0.0
    with np.errstate(all="ignore"):
        t1 = x * ft(-1.0) + ft(1.0)
        q = dy / (x * (t1 if not flip else -t1))
        wide = x.astype(np.float64)  # (compared with the float64 ends as they are: hi_exact's is no float32)
        inside = ((wide > lo) & (wide < hi)) if strict else _inside(wide, lo, hi)
        return np.where(inside, q, ft(outside)).astype(x.dtype)


def _in_kernel_window(t, q):
    """q where the kernel's window holds x (lo <= x <= fl32(1 - lo)), its outside value elsewhere: the variants'."""
    x = t["x"]
    ft = x.dtype.type
    lo, _, outside = window(t)
    return np.where(_inside(x, ft(lo), ft(1.0) - ft(lo)), q, ft(outside)).astype(x.dtype)


def _edge(t):
    """Where a correct float32 kernel may part from the golden: x = fl32(1 - lo) above the exact 1 - lo (the kernel
    takes it in), and a float32 quotient on the other side of an overflow threshold than the exact value."""
    x, dy = t["x"], t["dy"]
    lo, hi, _ = window(t)
    x32, dy32 = np.asarray(x, dtype=F32), np.asarray(dy, dtype=F32)
    device = _kernel({**t, "x": x32, "dy": dy32}).astype(np.float64)
    with np.errstate(all="ignore"):
        exact = np.abs(dy / (x * (1.0 - x)))
        crosses = np.zeros(np.shape(x), dtype=bool)
        for limit in OVERFLOW:
            crosses |= (np.minimum(exact, np.abs(device)) < limit) & (np.maximum(exact, np.abs(device)) >= limit)
    finite = np.isfinite(x) & np.isfinite(dy)
    where = finite & ((_inside(x32, lo, float(F32(1.0) - F32(lo))) != _inside(x, lo, hi)) | crosses)
    return where, device


@defect
def _open_window(t):
    """Defect: x > lo and x < 1 - lo (the doc's closed window opened): x = eps or 1 - eps gives the outside value."""
    return _kernel(t, strict=True)


@defect
def _sign_slip(t):
    """Defect: dy / (x (x - 1)): every nonzero result has the wrong sign."""
    return _kernel(t, flip=True)


@defect
def _eps_ignored(t):
    """Defect: the window always [0, 1] with NaN outside (the tiling's eps not read)."""
    return _kernel(t, eps_used=False)


@defect
def _zero_outside(t):
    """Defect: eps < 0 selects 0 outside [0, 1] instead of NaN (Init's sqrt(-1) branch lost)."""
    return _kernel(t, nan_outside=False)


@defect
def _reciprocal(t):
    """Defect: dy * (1 / (x (1 - x))): at a subnormal x (bfloat16's, float32's) the reciprocal overflows to inf where
    the quotient is finite; an arrangement that rounds a quantity larger than its result."""
    x, dy = t["x"], t["dy"]
    ft = x.dtype.type
    with np.errstate(all="ignore"):
        return _in_kernel_window(t, dy * (ft(1.0) / (x * (ft(1.0) - x))))


@legitimate
def _divide_twice(t):
    """Legitimate: dy / x / (1 - x), two float32 divisions for one product and one division: three roundings
    either way, in the kernel's window."""
    x, dy = t["x"], t["dy"]
    ft = x.dtype.type
    with np.errstate(all="ignore"):
        return _in_kernel_window(t, dy / x / (ft(1.0) - x))


@legitimate
def _exact_window(t):
    """Legitimate: the window's upper end 1 - lo compared exactly (in float64), the golden's window."""
    return _kernel(t, hi_exact=True)


VARIANTS = {"logit-open-window": _open_window, "logit-sign-slip": _sign_slip, "logit-eps-ignored": _eps_ignored,
            "logit-zero-outside": _zero_outside, "logit-reciprocal": _reciprocal, "logit-divide-twice": _divide_twice,
            "logit-exact-window": _exact_window}

_PRODUCTS = ("950", "A3", "A2")  # the OpDef's AddConfig (ascend950, ascend910_93, ascend910b); the doc: no others

SPEC = register(OpSpec(
    name="aclnnLogitGrad",
    key="logit_grad",
    header="aclnnop/aclnn_logit_grad.h",
    signature=("x", "dy", EPS, "out"),
    summary="Gradient of logit: dy / (x (1 - x)) inside [eps, 1 - eps], 0 outside (eps >= 0) or NaN outside [0, 1] "
            "(eps < 0).",
    formula="out = dy / (x * (1 - x)) where eps <= x <= 1 - eps; else 0 (eps >= 0); for eps < 0 (or NaN) the window "
            "is [0, 1] and outside it NaN; eps narrowed to float32",
    tensors=(TensorSpec("dy", "input", {"uniform": [-100, 100]}),
             TensorSpec("x", "input", {"uniform": [0.0, 1.0]}),
             TensorSpec("out", "output", {"constant": 0})),
    attributes=(AttrSpec(EPS, "double", default=-1.0),),
    products=products(*_PRODUCTS),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_ieee,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="same"),
    special_values="eps >= 0: x outside [eps, 1 - eps], +-inf and NaN x give +0 whatever dy is (the kernel's select; "
                   "the doc says NaN for inf and NaN x, PyTorch NaN for NaN x). eps < 0 or NaN: outside [0, 1], "
                   "+-inf and NaN x give NaN. x = +0 or 1 inside the window: dy / +0 (+-inf, NaN for dy = 0); x = -0: "
                   "dy / -0 (-inf for dy > 0, as the kernel divides). eps > 1 (or +inf): the window is empty, all "
                   "+0. Inside, dy's inf or NaN propagates. Where the float32 quotient crosses an overflow "
                   "threshold the exact value does not, or x = fl32(1 - eps) lies above 1 - eps, verify also "
                   "accepts the kernel's value.",
))

CONTRACT_NOTES = """\
aclnnLogitGrad phase one: no op_api; the aclnn is generated from the OpDef (loss/logit_grad/op_host/CMakeLists.txt
ACLNNTYPE aclnn; op_host/logit_grad_def.cpp), registered for ascend910b, ascend910_93 and ascend950.
- 161001: x, dy or out null (the doc's table).
- 161002: a dtype outside {BF16, FLOAT16, FLOAT}, or x, dy and out not all of one dtype (the OpDef's three columns
  and the binary configs' three kernels: fp16/fp16/fp16, fp32/fp32/fp32, bf16/bf16/bf16).
- Shapes: the doc asks dy and out to have x's shape (no broadcast) and 0 to 8 dims; the generated aclnn's own checks
  are not in ops-nn's source (the tiling reads only x's element count), so those two rules are the doc's, held
  here as 161002.
- eps: any double (no check); narrowed to float by the generated aclnn (the OpDef's Float attribute).
- Empty: x empty -> SUCCESS (the tiling's elementNum 0: the kernel's loop runs no pass).
"""
