"""A user op of the Split family (docs/adding-an-op.md, "An op that splits an input in halves"): the backward of
GLU, y = a * sigmoid(b), where self = [a, b] is split in halves along `dim` (ops-nn's aclnnGluBackward):
  gradA = gradOut * s,  gradB = gradOut * a * s * (1 - s),  s = sigmoid(b);  out = [gradA, gradB] along dim."""

import numpy as np

from aclnn_cli.ops import AttrSpec, OpSpec, Reference, TensorSpec, defect, register
from aclnn_cli.ops import exact as X
from aclnn_cli.ops.families import Split

U = 2.0**-53


def _halves(t):
    x = t["self"]
    h = x.shape[1] // 2
    return x[:, :h], x[:, h:], t["gradOut"]


def reference(t):
    """float64 on blocks (k, R, A0); gradOut arrives as (k, R/2, A0). s = 1/(1 + e^-b) from e^-|b| (no overflow)
    is within 4 float64 units; each product adds one: gradA within 6 u |gradA|, gradB within 10 u |gradB|."""
    a, b, dy = _halves(t)
    e = np.exp(-np.abs(b))
    s = np.where(b >= 0, 1 / (1 + e), e / (1 + e))
    c = np.where(b >= 0, e / (1 + e), 1 / (1 + e))  # 1 - s, without cancelling
    ga, gb = dy * s, dy * a * s * c
    value = np.concatenate([ga, gb], axis=1)
    bound = np.concatenate([6 * U * np.abs(ga), 10 * U * np.abs(gb)], axis=1) + 2.0**-1060
    return Reference(value, bound, np.abs(value))


def exact(t):
    """Each element to 60 digits (aclnn_cli.ops.exact: Decimal sigmoid), on any k blocks."""
    a, b, dy = _halves(t)
    k, h, a0 = a.shape
    out = np.empty((k, 2 * h, a0), dtype=object)
    for i in np.ndindex(k, h, a0):
        da, db, g = X.dec(a[i]), X.dec(b[i]), X.dec(dy[i])
        s = X.evaluate(X.sigmoid, db)
        out[i[0], i[1], i[2]] = X.evaluate(lambda: g * s)
        out[i[0], i[1] + h, i[2]] = X.evaluate(lambda: g * da * s * X.sigmoid(-db))
    return out


def kernel(t):
    """float32: s = 1 / (1 + exp(-b)), gradA = dy s, gradB = gradA a (1 - s)."""
    a, b, dy = _halves(t)
    s = 1 / (1 + np.exp(-b))
    ga = dy * s
    return np.concatenate([ga, ga * a * (1 - s)], axis=1)


@defect
def halves_swapped(t):
    """Defect: the gate taken from the first half, the value from the second."""
    a, b, dy = _halves(t)
    return kernel({"self": np.concatenate([b, a], axis=1), "gradOut": dy})


SPEC = register(OpSpec(
    name="aclnnMyGluBackward",
    key="my_glu_backward",
    summary="Backward of GLU, a * sigmoid(b), self = [a, b] split in halves along dim.",
    formula="s = sigmoid(b); out = [gradOut * s, gradOut * a * s * (1 - s)] along dim",
    tensors=(TensorSpec("gradOut", "input", {"normal": [0, 1]}),
             TensorSpec("self", "input", {"uniform": [-6.0, 6.0]}),
             TensorSpec("out", "output", {"constant": 0})),
    attributes=(AttrSpec("dim", "int", default=-1),),
    products={"A2": ("float32", "float16", "bfloat16")},
    dims=(1, 8),
    empty_ok=False,
    family=Split(driver="self", halves=("gradOut",)),
    reference=reference,
    exact=exact,
    kernel=kernel,
    variants={"glu-halves-swapped": halves_swapped},
))
