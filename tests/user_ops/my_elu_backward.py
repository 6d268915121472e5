"""A user op of the Elementwise family, written from ops-nn's doc (activation/elu_grad_v2/docs/aclnnEluBackward.md):

    gradInput = gradOutput * scale                                    where x > 0
              = gradOutput * inputScale * (x + alpha * scale)         where x <= 0, isResult (x: the forward's output)
              = gradOutput * inputScale * alpha * scale * exp(x * inputScale)   where x <= 0, not isResult

x is selfOrResult. alpha, scale and inputScale are aclScalar* (float32 here), isResult a C bool; the header puts
them between the two input tensors (`signature`). aclnnEluBackward is bundled (aclnn_cli/ops/elementwise/elu_backward.py), so
this user module takes another name and key (docs/adding-an-op.md: a user op may not take a bundled op's name).
"""

import numpy as np

from aclnn_cli.ops import AttrSpec, Contract, OpSpec, TensorSpec, defect, register
from aclnn_cli.ops import exact as X
from aclnn_cli.ops.base import grad_linear_reference


def reference(t):
    """dy * f(x) in float64 (grad_linear_reference): alpha * scale and x * inputScale are exact (two 24-bit
    significands); x + alpha * scale, the products and exp (< 1 ulp) round at most 5 times."""
    x, a, s, i = t["selfOrResult"], t["alpha"], t["scale"], t["inputScale"]
    neg = x <= 0
    if t["isResult"]:
        factor = np.where(neg, i * (x + a * s), s)
        terms = np.where(neg, abs(i) * (np.abs(x) + abs(a * s)), abs(s))
    else:
        factor = np.where(neg, i * a * s * np.exp(np.minimum(x, 0) * i), s)
        terms = np.abs(factor)
    return grad_linear_reference(t["gradOutput"], factor, terms, 6.0)


def exact(t):
    """One element (Fractions in): exact where rational, exp in Decimal (60 digits) elsewhere."""
    x, dy, a, s, i = t["selfOrResult"], t["gradOutput"], t["alpha"], t["scale"], t["inputScale"]
    if x > 0:
        return dy * s
    if t["isResult"]:
        return dy * i * (x + a * s)
    return X.evaluate(lambda: X.dec(dy * i * a * s) * X.dec(x * i).exp())


def kernel(t):
    """float32 in the 950's order (elu_grad_v2_dag.h): negcoef = alpha * scale once, then Muls, Mul, Exp, Select."""
    x, dy = t["selfOrResult"], t["gradOutput"]
    f = x.dtype.type
    a, s, i = f(t["alpha"]), f(t["scale"]), f(t["inputScale"])
    if t["isResult"]:
        neg = (dy * i) * (x + a * s)
    else:
        with np.errstate(over="ignore"):
            neg = ((dy * i) * (a * s)) * np.exp(x * i)
    return np.where(x <= 0, neg, dy * s)


@defect
def _scale_dropped(t):
    """Defect: x > 0 passes gradOutput through (scale left out)."""
    return np.where(t["selfOrResult"] > 0, t["gradOutput"], kernel(t))


def _alpha_rule(attrs):
    """161002: isResult with a negative alpha."""
    return "alpha < 0 with isResult" if attrs["isResult"] and attrs["alpha"] < 0 else None


def _same_dtype(descs, attrs):
    """161002: selfOrResult of another dtype than gradOutput (gradInput may be any float it casts to)."""
    a, b = descs["gradOutput"].dtype, descs["selfOrResult"].dtype
    return None if a == b else f"selfOrResult dtype {b.name} is not gradOutput's {a.name}"


SPEC = register(OpSpec(
    name="aclnnMyEluBackward", key="my_elu_backward",
    summary="Gradient of ELU with scale and inputScale, from its input or (isResult) its output.",
    formula="x > 0: gradOutput * scale; x <= 0: gradOutput * inputScale * (x + alpha * scale) (isResult), "
            "gradOutput * inputScale * alpha * scale * exp(x * inputScale) (else)",
    tensors=(TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
             TensorSpec("selfOrResult", "input", {"uniform": [-6, 3]}),
             TensorSpec("gradInput", "output", {"constant": 0})),
    attributes=(AttrSpec("alpha", "scalar", default=1.0), AttrSpec("scale", "scalar", default=1.0),
                AttrSpec("inputScale", "scalar", default=1.0), AttrSpec("isResult", "bool", default=False)),
    signature=("gradOutput", "alpha", "scale", "inputScale", "isResult", "selfOrResult", "gradInput"),
    products={p: ("float32", "float16", "bfloat16") for p in ("950", "A3", "A2")},
    dims=(0, 8), empty_ok=True,
    reference=reference, exact=exact, kernel=kernel,
    contract=Contract(dtypes="promote", attribute_rule=_alpha_rule, shape_rule=_same_dtype),
    variants={"my-elu-scale-dropped": _scale_dropped},
))
