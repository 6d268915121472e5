"""aclnnGeluBackward: gradInput = gradOutput * GELU'(x) in GELU's tanh approximation.

The doc (gelu_grad/docs/aclnnGeluBackward.md) writes the erf derivative and then "Gelu近似计算公式" (the tanh
approximation); the device computes the tanh form's derivative, and so does ops-nn's own test: its ATK executor
(tests/st/aclnnGeluBackward/executor_aclnnGeluBackward.py) and golden (tests/assets/golden.py) call
torch.ops.aten.gelu_backward(..., approximate="tanh"). The golden is therefore the tanh form (decision 101):

    f = s (1 + w c), s = sigmoid(2u), c = sigmoid(-2u), u = sqrt(2/pi)(x + 0.044715 x^3),
    w = 2 sqrt(2/pi) x (1 + 3 * 0.044715 x^2),

with exact constants: aclnnGeluBackwardV2's "tanh" reference, bound and Decimal exact path (gelu_backward_v2.py),
on which this module calls with approximate = "tanh".

The 950 kernel (gelu_grad/op_kernel/arch35/gelu_grad_dag.h, GeluGradCustom) is, operation for operation and constant
for constant, gelu_grad_v2_dag.h's GeluGradV2TanhCustom: both inputs widened to float32,
p = exp((x^2 * AN + BETAN) * x), r = (x^2 * A3 + BETA) * x, q = 1 / (p + 1), w = ((p * q) * r) * q, NaN w -> 0,
out = dy * (w + q), cast to the promoted dtype (RINT). The op_api (op_api/aclnn_gelu_backward.cpp) passes
gradOutput as the graph op's third input y, which the arch35 DAG does not read.
"""

from __future__ import annotations

from ..base import Contract, OpSpec, defect, grad_signature, legitimate, products
from ..registry import register
from . import gelu_backward_v2 as V2


def _tanh(t) -> dict:
    """The same tensors and attributes, with GeluBackwardV2's attribute set to its tanh form."""
    return {**t, "approximate": "tanh"}


def _reference(t):
    return V2._reference(_tanh(t))


def _exact(t):
    return V2._exact(_tanh(t))


def _ieee(t):
    """Finite x: dy f(x); x = +inf -> dy, -inf -> 0 * dy (the kernel's NaN -> 0 select), NaN -> NaN."""
    return V2._ieee(_tanh(t))


def _kernel(t):
    """The 950 kernel in the inputs' float type (float32 for emulate): dy * (w + q), as documented above."""
    return V2._run(_tanh(t))


def _variant(kind, doc: str, **parts):
    def variant(t):
        return V2._run(_tanh(t), **parts)
    variant.__doc__ = doc
    return kind(variant)


@defect
def _erf_form(t):
    """Defect: the doc's erf derivative (Phi(x) + x phi(x)) computed instead of the tanh form's: up to 8.7e-4 * dy
    apart near |x| = 2 (what GeluBackwardV2 computes with approximate "none")."""
    return V2._run({**t, "approximate": "none"})


VARIANTS = {
    "sign-slip": _variant(defect, "Defect: one term's sign flipped (q - w).", combine=lambda a, b: a - b),
    "cubic-derivative": _variant(defect, "Defect: u' with 0.044715 x^2 instead of 3 * 0.044715 x^2.",
                                 tanh=lambda x: V2._tanh_parts(x, a3=-V2.K_AN)),
    "no-nan-select": _variant(defect, "Defect: the NaN -> 0 select dropped: NaN for x < -10.06 (p = inf, inf * 0) "
                              "and x = +inf.", tanh=lambda x: V2._tanh_parts(x, nan_select=False)),
    "exp-overflow": _variant(defect, "Defect: q = e^2u/(1+e^2u): inf/inf = NaN for x > 10.06.", tanh=V2._exp_overflow),
    "gelu-erf-form": _erf_form,
    "stable-formula": _variant(legitimate, "Legitimate: q and 1-q from e^-|2u| (no overflow, no NaN select needed).",
                               tanh=V2._stable_tanh),
    "fused-axpy": _variant(legitimate, "Legitimate: Axpy fused, x^2*AN + BETAN rounded once (an FMA).",
                           tanh=lambda x: V2._tanh_parts(x, fused=True)),
}


_TEXTBOOK_CONSTANTS: dict = {}  # mpmath precision -> (sqrt(2/pi), 0.044715)


def _textbook(x, attrs, mp):
    """d/dx of 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))), for the tests' mpmath oracle:
    0.5 (1 + tanh u) + 0.5 x sech^2(u) u', written with 1 + tanh u = 2 / (1 + e^-2u) and
    sech^2 u = 4 e^-2u / (1 + e^-2u)^2 (no overflow of cosh for large |u|). The constants once per precision."""
    prec = mp.mp.prec
    if prec not in _TEXTBOOK_CONSTANTS:
        _TEXTBOOK_CONSTANTS[prec] = (mp.sqrt(2 / mp.pi), mp.mpf("0.044715"))
    k, a = _TEXTBOOK_CONSTANTS[prec]
    u = k * (x + a * x**3)
    e = mp.exp(-2 * u)
    du = k * (1 + 3 * a * x**2)
    return 1 / (1 + e) + x * du * 2 * e / (1 + e) ** 2


_ALL = ("950", "A3", "A2", "310P", "910")

SPEC = register(OpSpec(
    name="aclnnGeluBackward",
    key="gelu_backward",
    header="aclnnop/aclnn_gelu_backward.h",
    summary="Gradient of GELU in its tanh approximation (what the device and ops-nn's tests compute).",
    formula="gradInput = gradOutput * s (1 + w (1 - s)), s = sigmoid(2u), u = sqrt(2/pi)(x + 0.044715 x^3), "
            "w = 2 sqrt(2/pi) x (1 + 0.134145 x^2); x = self",
    tensors=grad_signature("gradInput"),
    products=products(*_ALL, overrides={"310P": ("float32", "float16"), "910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=True,
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    ieee=_ieee,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", broadcast_on=_ALL, out_is_promoted=True),
    special_values="self = +inf gives gradOutput, -inf gives 0 * gradOutput (the kernel's NaN -> 0 select; PyTorch "
                   "gives NaN at both); NaN in either input gives NaN. The golden's constants are exact "
                   "(sqrt(2/pi), 0.044715); the device's are float32.",
    textbook=_textbook,
))

CONTRACT_NOTES = """\
Phase-one rules of aclnnGeluBackward (gelu_grad/op_api/aclnn_gelu_backward.cpp, CheckPromoteTypeGeluBackward in
common/inc/op_api/level2_base.h), in the source's order:
1. 161001: gradOutput, self or gradInput null. workspaceSize / executor: not checked (no OP_CHECK_COMM_INPUT).
2. 161002: PromoteType(gradOutput, self) undefined or not in {FLOAT, FLOAT16, BF16}; BF16 where NpuArch is neither
   DAV_2201 (A2/A3) nor regbase (950); the promoted type not gradInput's dtype (Contract.out_is_promoted). As in
   GeluBackwardV2 there is no per-input list: an integer input beside a float one promotes to the float and passes.
3. 161002: gradOutput or self with more than 8 dims (OP_CHECK_MAX_DIM; gradInput is not checked, but must be the
   broadcast shape); gradOutput and self do not broadcast; gradInput's shape is not the broadcast shape.
- Empty: self or gradOutput empty -> SUCCESS, workspace 0, after all checks.
- Compute: both inputs l0op::Cast to the promoted type (on 950 not broadcast first: the DAG's CopyInBrc reads them
  broadcast); the kernel's output is in that type, which rule 2 makes gradInput's: no double rounding.
"""
