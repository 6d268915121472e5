"""A user op of the Elementwise family, written from ops-nn's doc (loss/smooth_l1_loss_grad_v2/docs/
aclnnSmoothL1LossBackward.md, with PyTorch's beta, which the doc's formula leaves at 1):

    d = self - target;  g = d / beta where |d| < beta, else sign(d);  gradInput = gradOut * g / N

N = numel(self) for reduction 1 (mean), else 1 (0 none, 2 sum); gradOut, self and target broadcast to gradInput.
reduction is an int64_t, beta a C float. Only `reference` is given: it is rational (+ - * /, comparisons,
np.where, integer constants), so gen computes the elements its bound leaves open through it on Fractions and
every golden is certified, ties at a rounding boundary included (docs/adding-an-op.md, "Without exact").
aclnnSmoothL1LossBackward is bundled (aclnn_cli/ops/elementwise/smooth_l1_loss_backward.py), so this user module
takes another name and key (docs/adding-an-op.md: a user op may not take a bundled op's name).
"""

import math

import numpy as np

from aclnn_cli.ops import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, register

U = 2.0**-53
ALL = ("950", "A3", "A2", "910", "310P")


def _numel(shapes):
    return {"numel": math.prod(shapes["self"])}


def _g(d, beta):
    """d / beta inside (-beta, beta), else sign(d): on float64 or Fraction arrays alike."""
    sign = np.where(d > 0, 1, np.where(d < 0, -1, 0))
    return np.where(abs(d) < beta, d / beta, sign) if beta > 0 else sign


def reference(t):
    """float64: d, d / beta, the product and / N round once each (4 u |value|); a d within u of +-beta may take
    the other branch, where both give +-1 to within u."""
    n = t["numel"] if t["reduction"] == 1 else 1
    value = t["gradOut"] * _g(t["self"] - t["target"], t["beta"]) / n
    bound = 6 * U * abs(value) + 2.0**-1070
    return Reference(value, bound, abs(value) + bound)


def kernel(t):
    """float32 in the 950's order (smooth_l1_loss_grad_v2_dag.h): the branches selected and added, times gradOut,
    times cof = fl32(1 / N) for mean."""
    x = t["self"]
    f = x.dtype.type
    beta = f(t["beta"])
    d = x - t["target"]
    with np.errstate(divide="ignore", invalid="ignore"):
        inside = np.where(np.abs(d) > beta, f(0), d * (f(1) / beta))
    r = (np.where(d > beta, f(1), f(0)) + np.where(d < -beta, f(-1), f(0))) + inside
    cof = f(1 / t["numel"]) if t["reduction"] == 1 else f(1)
    return (r * t["gradOut"]) * cof


@defect
def _mean_forgotten(t):
    """Defect: mean computed like sum (no 1 / N)."""
    return kernel({**t, "reduction": 2})


def _rules(attrs):
    """161002: reduction outside 0..2, a negative beta."""
    if attrs["reduction"] not in (0, 1, 2):
        return f"reduction {attrs['reduction']} is not 0, 1 or 2"
    return "beta < 0" if attrs["beta"] < 0 else None


def _same_dtype(descs, attrs):
    """Not promoted here: gradOut and target of self's dtype (the cases give them alike)."""
    x = descs["self"].dtype
    bad = [n for n in ("gradOut", "target") if descs[n].dtype != x]
    return f"{bad[0]} dtype is not self's {x.name}" if bad else None


SPEC = register(OpSpec(
    name="aclnnMySmoothL1LossBackward", key="my_smooth_l1_loss_backward",
    summary="Gradient of the smooth L1 loss: (self - target) / beta inside (-beta, beta), else its sign; "
            "divided by numel(self) for mean.",
    formula="gradInput = gradOut * (|d| < beta ? d / beta : sign(d)) / (reduction == mean ? numel(self) : 1), "
            "d = self - target",
    tensors=(TensorSpec("gradOut", "input", {"normal": [0, 1]}),
             TensorSpec("self", "input", {"uniform": [-3, 3]}),
             TensorSpec("target", "input", {"uniform": [-3, 3]}),
             TensorSpec("gradInput", "output", {"constant": 0})),
    attributes=(AttrSpec("reduction", "int", default=1), AttrSpec("beta", "float", default=1.0)),
    case_values=_numel,
    products={p: ("float32", "float16") if p in ("910", "310P") else ("float32", "float16", "bfloat16") for p in ALL},
    dims=(0, 8), empty_ok=True,
    reference=reference, kernel=kernel,
    contract=Contract(dtypes="promote", broadcast_on=ALL, attribute_rule=_rules, shape_rule=_same_dtype),
    variants={"my-smooth-l1-mean-forgotten": _mean_forgotten},
))
