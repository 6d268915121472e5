"""aclnnSigmoidBackward: gradInput = dy * y * (1 - y), y = `output` (the forward OUTPUT, any value accepted).

The result is rational in the inputs, so the exact path is exact arithmetic on Fractions.
The 950 kernel (sigmoid_grad/op_kernel/arch35/sigmoid_grad_{f32,f16,bf16}.h), in float32:
z = (dy * (1 - y)) * y, three roundings. The op_api broadcasts gradOutput and output, casts both to
their promoted dtype, runs the kernel (AI Core for FLOAT, FLOAT16, BF16) and Casts to gradInput's dtype.

COMPLEX64 and COMPLEX128 run on the AI CPU (op_api/sigmoid_grad.cpp: SigmoidGradAiCpu passes OP_ATTR(true) for
complex_conj, inputs (output, gradOutput)); op_kernel_aicpu/sigmoid_grad_aicpu.cpp's SigmoidGradComputeConj in T =
std::complex<float> or std::complex<double>: z = std::conj((one - y) * y) * dy, one = T(1.0). `_complex` is that
expression, op by op (golden/complexes.py evaluates it exactly, emulate in T's arithmetic: ops/complexparts.py).
"""

from __future__ import annotations

import numpy as np

from ..base import COMPLEXES, FLOATS, Contract, F64_UNIT, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..complexparts import Parts
from ..mathfns import exp
from ..registry import register

Y = "output"
F32_MIN_NORMAL = 2.0**-126


def _reference(t):
    """dy * (y * (1 - y)) in float64: three roundings, each within F64_UNIT relative.

    No term cancels (1 - y is a single rounding of exact inputs, whatever y is) and for inputs of at
    most 24 significant bits in float32's exponent range nothing overflows or underflows float64
    (|result| in [2^-298, 2^384] or 0), so |value - exact| <= ((1 + u)^3 - 1) |exact| < 4 u |value|.
    Exact zeros (y = 0, y = 1, dy = 0) keep the IEEE product's sign, as the kernel gives them.
    """
    dy, y = t["gradOutput"], t[Y]
    value = dy * (y * (1.0 - y))
    magnitude = np.abs(value)
    return Reference(value, 4.0 * F64_UNIT * magnitude, magnitude)


def _exact(t):
    y = t[Y]
    return t["gradOutput"] * y * (1 - y)


def _kernel(t):
    """The 950 kernel, op by op in the inputs' float type: (dy * (1 - y)) * y."""
    y = t[Y]
    return (t["gradOutput"] * (1.0 - y)) * y


def _edge(t):
    """Where the kernel's intermediate dy * (1 - y) leaves float32's normal range while the result may not.

    Overflow: dy = 3e38, y = -0.5 gives -inf where the exact -2.25e38 is finite. Underflow into
    subnormals loses bits, which the final * y scales back up where |y| > 1.
    The device value there is the float32 kernel's.
    """
    dy32, y32 = (np.asarray(t[n]).astype(np.float32) for n in ("gradOutput", Y))
    with np.errstate(all="ignore"):
        one_minus = np.float32(1) - y32
        partial = dy32 * one_minus
        device = (partial * y32).astype(np.float64)
    finite = np.isfinite(dy32) & np.isfinite(y32)
    underflow = (np.abs(partial) < F32_MIN_NORMAL) & (dy32 != 0) & (one_minus != 0)
    return finite & (np.isinf(partial) | underflow), device


def _complex(t):
    """The AI CPU's SigmoidGradComputeConj: std::conj((one_trans - y) * y) * dy, in T."""
    y = t[Y]
    return ((1 - y) * y).conj() * t["gradOutput"]


def _is_complex(t) -> bool:
    """Complex inputs: Parts in the emulated kernel (ops/complexparts.py), NumPy complex arrays from a test."""
    return isinstance(t[Y], Parts) or np.iscomplexobj(t[Y])


@defect
def _sign_slip(t):
    """Defect: 1 - y written y - 1: every nonzero result has the wrong sign."""
    y = t[Y]
    if _is_complex(t):
        return ((y - 1) * y).conj() * t["gradOutput"]
    return (t["gradOutput"] * (y - 1.0)) * y


@defect
def _conj_missing(t):
    """Defect: the complex path without std::conj, ((1 - y) * y) * dy (SigmoidGradCompute, complex_conj false):
    the imaginary part's sign is wrong wherever y is not real (real inputs: the kernel)."""
    if not _is_complex(t):
        return _kernel(t)
    y = t[Y]
    return ((1 - y) * y) * t["gradOutput"]


@defect
def _real_part_only(t):
    """Defect: the complex result's imaginary part dropped (a real-typed store of a complex value)."""
    if not _is_complex(t):
        return _kernel(t)
    z = _complex(t)
    return z.real.astype(z.dtype) if isinstance(z, np.ndarray) else Parts(z.re, np.zeros_like(z.im))


@defect
def _complex64_compute(t):
    """Defect (precision): complex128 computed in complex64 (float32 components) and widened back: ~2^-24 relative
    where the complex128 kernel is held to ~2^-53 (the other dtypes: the kernel)."""
    if not _is_complex(t) or t[Y].dtype != np.complex128:
        return _complex(t) if _is_complex(t) else _kernel(t)
    narrow = {k: v.astype(np.complex64) if isinstance(v, (np.ndarray, Parts)) else v for k, v in t.items()}
    return _complex(narrow).astype(np.complex128)


@legitimate
def _conj_each(t):
    """Legitimate: the complex product in another order, dy * conj(1 - y) * conj(y) (conj distributes over the
    product; different roundings, the same allowance). Real inputs: the kernel."""
    if not _is_complex(t):
        return _kernel(t)
    y = t[Y]
    return t["gradOutput"] * (1 - y).conj() * y.conj()


@defect
def _output_as_input(t):
    """Defect: `output` taken for the forward INPUT x: dy * sigmoid(y) * (1 - sigmoid(y))."""
    if _is_complex(t):
        y, dy = (v.numpy() if isinstance(v, Parts) else v for v in (t[Y], t["gradOutput"]))
        s = 1 / (1 + np.exp(-y))
        return (s * (1 - s)).conj() * dy
    s = 1.0 / (1.0 + exp(-t[Y]))
    return t["gradOutput"] * s * (1.0 - s)


@defect
def _graph_input_order(t):
    """Defect: the graph op SigmoidGrad takes (y, dy), the aclnn API (gradOutput, output); a kernel reading
    them in the wrong order computes (y * (1 - dy)) * dy."""
    dy = t["gradOutput"]
    if _is_complex(t):
        return ((1 - dy) * dy).conj() * t[Y]
    return (t[Y] * (1.0 - dy)) * dy


@defect
def _cancelling(t):
    """Defect (precision): (y - y*y) * dy, the public TBE formula for non-950 parts (unverified).

    y - y*y cancels as y -> 1: y*y is rounded at 2^-25 next to 1, so the float32 result carries a
    relative error up to ~2^-25 / (1 - y) (over 2^-13 for y within 2^-12 of 1); 16-bit outputs are
    barely affected since float16/bfloat16 y stays >= 2^-11 away from 1.
    """
    y = t[Y]
    if _is_complex(t):
        return (y - y * y).conj() * t["gradOutput"]
    return (y - y * y) * t["gradOutput"]


@defect
def _product_first(t):
    """Defect (overflow): dy * (y * (1 - y)): within 2 ulps on ordinary y, but y * (1 - y) overflows
    float32 for |y| > ~1.8e19 where the result with a small dy is finite (the device multiplies dy first)."""
    y = t[Y]
    if _is_complex(t):
        return t["gradOutput"] * (y * (1 - y)).conj()
    return t["gradOutput"] * (y * (1.0 - y))


VARIANTS = {
    "sign-slip": _sign_slip,
    "output-as-input": _output_as_input,
    "graph-input-order": _graph_input_order,
    "cancelling-formula": _cancelling,
    "product-first": _product_first,
    "conj-missing": _conj_missing,
    "real-part-only": _real_part_only,
    "complex64-compute": _complex64_compute,
    "conj-each": _conj_each,
}

ALL = ("950", "A3", "A2", "310P", "910")
_AI_CPU = COMPLEXES  # (every product: the AI CPU kernel)

SPEC = register(OpSpec(
    name="aclnnSigmoidBackward",
    key="sigmoid_backward",
    header="aclnnop/aclnn_sigmoid_backward.h",
    summary="Gradient of sigmoid from the forward output y: dy * y * (1 - y).",
    formula="gradInput = gradOutput * output * (1 - output)",
    tensors=(
        TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
        TensorSpec(Y, "input", {"uniform": [0.0, 1.0]}),
        TensorSpec("gradInput", "output", {"constant": 0}),
    ),
    products=products(*ALL, dtypes=FLOATS + _AI_CPU, overrides={"310P": ("float32", "float16") + _AI_CPU,
                                                                "910": ("float32", "float16") + _AI_CPU}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    complex_formula=_complex,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", broadcast_on=ALL, also_accepts=("float64",)),
    special_values="output = +-inf gives -inf * sign(gradOutput) (NaN if gradOutput = 0); NaN in either input "
                   "gives NaN; gradOutput = +-inf gives +-inf * y(1 - y) (NaN where y is 0 or 1). Exact zeros "
                   "(output 0 or 1, gradOutput 0) carry the IEEE product's sign: output = 1 gives "
                   "+0 * sign(gradOutput), as the kernel's (gradOutput * (1 - output)) * output does. Where "
                   "gradOutput * (1 - output) overflows float32 but the result does not (gradOutput = 3e38, "
                   "output = -0.5) the golden is exact; verify also accepts the kernel's inf.",
))

CONTRACT_NOTES = """\
aclnnSigmoidBackward phase one (sigmoid_grad/op_api/aclnn_sigmoid_backward.cpp), beyond the Contract:
- Order: gradOutput, output, gradInput null -> 161001; each of the three dtypes not in {FLOAT,
  FLOAT16, DOUBLE, COMPLEX64, COMPLEX128, BF16} -> 161002; gradOutput BF16 on a SoC outside
  [ASCEND910B, ASCEND910E] (910, 310P) -> 161002; gradOutput or output with more than 8 dims ->
  161002 (gradInput's dims unchecked); PromoteType(gradOutput, output) undefined or not in the
  list, or not castable to gradInput's dtype (complex -> real) -> 161002; gradOutput and output not
  broadcastable, or gradInput's shape != the broadcast shape -> 161002; then an empty gradOutput or
  output -> ACLNN_SUCCESS, workspace 0.
- Unlike most ops there is no OP_CHECK_COMM_INPUT: a null workspaceSize or executor is not checked.
- bf16 on 910/310P is rejected for gradOutput only: a BF16 output or gradInput with a FLOAT/FLOAT16
  gradOutput passes phase one there (the products table above is stricter than the source).
- DOUBLE, COMPLEX64, COMPLEX128 are accepted (computed on AI CPU: dy*(1-y)*y in T; complex
  conj((1-y)*y)*dy, complex_conj = true); the products table lists the AI Core float types and the two
  complex ones (gradOutput, output and gradInput all of one complex dtype: gen refuses a mix with a
  real dtype, which the tool does not model).
- 0-d tensors are accepted (the doc says 1-8; the source only checks <= 8). The doc also lists a
  format check; the source has none.
- Mixed dtypes: both inputs are l0op::Cast to the promoted dtype (fp16 + bf16 -> FLOAT), the kernel
  rounds its float32 result once to that dtype (RINT), and a final l0op::Cast to gradInput's dtype
  rounds again when it differs (double rounding; fp16 inputs with a FLOAT gradInput give fp16 precision).
"""
