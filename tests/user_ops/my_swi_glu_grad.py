"""A user op of the Split family, written from ops-nn's doc (activation/swi_glu_grad/docs/aclnnSwiGluGrad.md): the
gradient of SwiGlu, y = silu(A) * B, where x = [A, B] is split in halves along `dim`; with s = sigmoid(A),

    out_A = yGrad * B * s * (1 + A * (1 - s)),   out_B = yGrad * A * s,   out = [out_A, out_B] along dim

yGrad has x's shape with dim halved. aclnnSwiGluGrad is bundled, so this one is named aclnnMySwiGluGrad.
"""

import numpy as np

from aclnn_cli.ops import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, register
from aclnn_cli.ops import exact as X
from aclnn_cli.ops.families import Split

U = 2.0**-53


def _parts(t):
    """A, B (the halves of x's blocks (k, R, A0)) and yGrad (k, R / 2, A0)."""
    x = t["x"]
    return x[:, :x.shape[1] // 2], x[:, x.shape[1] // 2:], t["yGrad"]


def reference(t):
    """float64: s and 1 - s from exp(-|A|) (4 u each); 1 + A (1 - s) may cancel (A near -1.28), so out_A's bound is
    relative to its terms |yGrad B s| (1 + |A (1 - s)|); out_B within 7 u of itself."""
    a, b, dy = _parts(t)
    e = np.exp(-np.abs(a))
    s, c = np.where(a >= 0, 1 / (1 + e), e / (1 + e)), np.where(a >= 0, e / (1 + e), 1 / (1 + e))
    terms_a = np.abs(dy * b * s) * (1 + np.abs(a * c))
    out_a, out_b = dy * b * s * (1 + a * c), dy * a * s
    value = np.concatenate([out_a, out_b], axis=1)
    scale = np.concatenate([terms_a, np.abs(out_b)], axis=1)
    return Reference(value, 12 * U * scale + 2.0**-1060 * np.abs(np.concatenate([dy * b, dy], axis=1)), scale)


def _element(a, b, dy):
    """(out_A, out_B) of one element, to 60 digits."""
    def both():
        s = X.sigmoid(X.dec(a))
        return X.dec(dy) * X.dec(b) * s * (1 + X.dec(a) * X.sigmoid(-X.dec(a))), X.dec(dy) * X.dec(a) * s
    return X.evaluate(both)


def exact(t):
    """Whole blocks (Fractions in), element by element."""
    out_a, out_b = np.frompyfunc(_element, 3, 2)(*_parts(t))
    return np.concatenate([out_a, out_b], axis=1)


def kernel(t, with_a=True):
    """float32 in the 950's order: s = 1 / (exp(-A) + 1), out_A = ((1 - s) A + 1) (yGrad s) B, out_B = (s yGrad) A."""
    a, b, dy = _parts(t)
    with np.errstate(over="ignore"):
        s = 1 / (np.exp(-a) + 1)
    return np.concatenate([(((1 - s) * a + 1) * (dy * s)) * b, (s * dy) * (a if with_a else 1)], axis=1)


@defect
def _out_b_without_a(t):
    """Defect: out_B = yGrad * s, A dropped (the gradient of sigmoid(A) * B)."""
    return kernel(t, with_a=False)


def _dim_rule(descs, attrs):
    """161002: dim outside x's axes, x odd along it, yGrad not x's shape with it halved."""
    x = tuple(descs["x"].shape)
    if not -len(x) <= attrs["dim"] < len(x):
        return f"dim {attrs['dim']} is outside a {len(x)}-d x"
    axis = attrs["dim"] % len(x)
    half = (*x[:axis], x[axis] // 2, *x[axis + 1:])
    return None if x[axis] % 2 == 0 and tuple(descs["yGrad"].shape) == half else "yGrad is not x with dim halved"


SPEC = register(OpSpec(
    name="aclnnMySwiGluGrad", key="my_swi_glu_grad",
    summary="Gradient of SwiGlu, silu(A) * B, x = [A, B] split in halves along dim.",
    formula="s = sigmoid(A); out = [yGrad * B * s * (1 + A * (1 - s)), yGrad * A * s] along dim",
    tensors=(TensorSpec("yGrad", "input", {"normal": [0, 1]}),
             TensorSpec("x", "input", {"uniform": [-8, 8]}),
             TensorSpec("out", "output", {"constant": 0})),
    attributes=(AttrSpec("dim", "int", default=-1),),
    products={p: ("float32", "float16", "bfloat16") for p in ("950", "A3", "A2")},
    dims=(1, 8), empty_ok=False,
    family=Split(driver="x", halves=("yGrad",)),
    reference=reference, exact=exact, kernel=kernel,
    contract=Contract(shape_rule=_dim_rule),
    variants={"my-swiglu-out-b-without-a": _out_b_without_a},
))
