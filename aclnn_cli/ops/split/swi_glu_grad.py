"""aclnnSwiGluGrad: the gradient of SwiGlu, y = silu(A) * B, where x = [A, B] is split in halves along `dim`.

With s = sigmoid(A) (docs: activation/swi_glu_grad/docs/aclnnSwiGluGrad.md):
  out_A = yGrad * [s + s (1 - s) A] * B = yGrad * B * s (1 + A (1 - s))
  out_B = yGrad * s * A
out has x's shape: out_A in the first half along dim, out_B in the second. yGrad has x's shape with dim halved.

The 950 (hicann/ops-nn activation/swi_glu_grad/op_kernel/arch35/swi_glu_grad_base.h, SwiGluGradBaseKernel::Compute):
A, B and yGrad widened to float32 in registers; beta = -1:
  s = 1 / (exp(-A) + 1)
  out_A = fl(fl(fl(fl(fl(1 - s) * A) + 1) * fl(yGrad * s)) * B),  out_B = fl(fl(s * yGrad) * A)
each rounded once (CAST_RINT) to the output dtype.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np

from .. import exact as X
from ..base import (AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, grad_linear_reference, legitimate,
                    products, sigmoid_pair)
from ..families import Split
from ..mathfns import exp
from ..registry import register
from ..elementwise.swish import swish_grad_reference

DY, X_, DIM, OUT = "yGrad", "x", "dim", "out"


def _halves(t):
    """(A, B, yGrad) of blocks (k, R, A0): A the first R/2 along the split axis, B the rest."""
    x = t[X_]
    h = x.shape[1] // 2
    return x[:, :h], x[:, h:], t[DY]


# ------------------------------------------------------------------ reference and exact

def _reference(t) -> Reference:
    """out_A from the swish gradient of A times yGrad * B (exact in float64: two <= 24-bit significands),
    out_B = yGrad * A * s within 16 float64 units of |yGrad A s|."""
    a, b, dy = _halves(t)
    ra = swish_grad_reference(dy * b, a)
    s, _ = sigmoid_pair(a)
    rb = grad_linear_reference(dy, a * s, np.abs(a) * s, 16.0)
    return Reference(*(np.concatenate([getattr(ra, f), getattr(rb, f)], axis=1) for f in ("value", "bound", "scale")))


def _element(a, b, dy, first: bool) -> Decimal:
    """One element to 60 digits: out_A (first half) or out_B."""
    def value():
        da, ddy = X.dec(a), X.dec(dy)
        if first:
            return ddy * X.dec(b) * X.swish_factor(da)
        return ddy * da * X.sigmoid(da)
    return X.evaluate(value)


def _exact_at(t, wanted):
    """The exact values of out at flat positions of the blocks (block-major, each block (R, A0))."""
    x, dy = t[X_], t[DY]
    k, r, a0 = x.shape
    h = r // 2
    where = np.asarray(wanted[OUT], dtype=np.int64)
    b, rest = where // (r * a0), where % (r * a0)
    row, col = rest // a0, rest % a0
    first = row < h
    at = np.where(first, row, row - h)
    values = []
    for i, j, c, f in zip(b.tolist(), at.tolist(), col.tolist(), first.tolist()):
        a_, b_, dy_ = x[i, j, c], x[i, j + h, c], dy[i, j, c]
        if all(np.isfinite(float(v)) for v in (a_, b_, dy_)):
            values.append(_element(a_, b_, dy_, f))
        else:  # (gen certifies these from the IEEE formula; here for a caller asking every element)
            one = _ieee({X_: np.array([[[float(a_)], [float(b_)]]]), DY: np.array([[[float(dy_)]]])})
            values.append(float(one[0, 0 if f else 1, 0]))
    return {OUT: np.array(values + [None], dtype=object)[:-1]}


def _exact(t):
    """Whole blocks, element by element (gen asks `exact_at` for the few elements the float64 bound leaves open)."""
    x = t[X_]
    wide = {X_: np.asarray(x, dtype=object), DY: np.asarray(t[DY], dtype=object)}
    k, r, a0 = x.shape
    return _exact_at(wide, {OUT: np.arange(k * r * a0)})[OUT].reshape(k, r, a0)


# ------------------------------------------------------------------ the device

def _kernel(t):
    """The 950's order (module docstring), in the inputs' float type (float32 on the device)."""
    a, b, dy = _halves(t)
    s = 1.0 / (exp(-a) + 1.0)
    tmp = dy * s
    out_a = ((1.0 - s) * a + 1.0) * tmp * b
    out_b = (s * dy) * a
    return np.concatenate([out_a, out_b], axis=1)


def _ieee(t):
    """The formula in IEEE float64 where an input is inf or NaN: the kernel's order (A = +inf: (1 - s) * A is
    0 * inf, NaN, as on the device)."""
    return _kernel({k: np.asarray(v, dtype=np.float64) for k, v in t.items()})


@legitimate
def _stable(t):
    """Legitimate: s from exp(-|A|), out_A as yGrad * B * (s + A s (1 - s))."""
    a, b, dy = _halves(t)
    e = exp(-np.abs(a))
    s = np.where(a >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    c = np.where(a >= 0, e / (1.0 + e), 1.0 / (1.0 + e))
    return np.concatenate([dy * b * (s + a * s * c), dy * a * s], axis=1)


@legitimate
def _silu_first(t):
    """Legitimate: silu(A) = A * s formed first, out_B = yGrad * silu(A)."""
    a, b, dy = _halves(t)
    s = 1.0 / (1.0 + exp(-a))
    return np.concatenate([dy * (s * (1.0 + a * (1.0 - s))) * b, dy * (a * s)], axis=1)


@defect
def _swapped(t):
    """Defect: the halves swapped (A taken from the second half, B from the first)."""
    a, b, dy = _halves(t)
    return _kernel({X_: np.concatenate([b, a], axis=1), DY: dy})


@defect
def _interleaved(t):
    """Defect: the halves taken as even and odd elements along dim, not first and second half."""
    x, dy = t[X_], t[DY]
    a, b = x[:, 0::2], x[:, 1::2]
    return _kernel({X_: np.concatenate([a, b], axis=1), DY: dy})


@defect
def _no_derivative_term(t):
    """Defect: out_A = yGrad * s * B, the sigmoid's derivative term A s (1 - s) dropped."""
    a, b, dy = _halves(t)
    s = 1.0 / (1.0 + exp(-a))
    return np.concatenate([dy * s * b, dy * s * a], axis=1)


@defect
def _sign_slip(t):
    """Defect: 1 - A (1 - s) for 1 + A (1 - s)."""
    a, b, dy = _halves(t)
    s = 1.0 / (1.0 + exp(-a))
    return np.concatenate([(1.0 - (1.0 - s) * a) * (dy * s) * b, (s * dy) * a], axis=1)


@defect
def _out_b_without_a(t):
    """Defect: out_B = yGrad * s (A dropped: the gradient of sigmoid(A) * B, not silu(A) * B)."""
    a, b, dy = _halves(t)
    out = _kernel(t)
    return np.concatenate([out[:, :a.shape[1]], dy * (1.0 / (1.0 + exp(-a)))], axis=1)


VARIANTS = {"swiglu-stable": _stable, "swiglu-silu-first": _silu_first, "swiglu-halves-swapped": _swapped,
            "swiglu-interleaved": _interleaved, "swiglu-no-derivative-term": _no_derivative_term,
            "swiglu-sign-slip": _sign_slip, "swiglu-out-b-without-a": _out_b_without_a}


# ------------------------------------------------------------------ phase one

def _shape_rule(descs, attrs) -> str | None:
    """dim in [-n, n - 1] for x's n dims; x even along dim; yGrad x's shape with dim halved; out x's shape."""
    x = tuple(descs[X_].shape)
    n, dim = len(x), int(attrs[DIM])
    if not -n <= dim < n:
        return f"dim {dim} is outside [{-n}, {n - 1}] for a {n}-d x"
    axis = dim + n if dim < 0 else dim
    if x[axis] % 2:
        return f"x has {x[axis]} elements along dim {dim}: not split in halves"
    half = (*x[:axis], x[axis] // 2, *x[axis + 1:])
    if tuple(descs[DY].shape) != half:
        return f"yGrad shape {list(descs[DY].shape)} is not x's with dim halved, {list(half)}"
    if tuple(descs[OUT].shape) != x:
        return f"out shape {list(descs[OUT].shape)} is not x's {list(x)}"
    return None


def _textbook_halves(a, b, dy, mp):
    """The doc's formula in mpmath for the tests' oracle: (out_A, out_B)."""
    s = 1 / (1 + mp.exp(-a))
    return dy * (s + s * (1 - s) * a) * b, dy * s * a


SPEC = register(OpSpec(
    name="aclnnSwiGluGrad",
    key="swi_glu_grad",
    header="aclnnop/aclnn_swi_glu_grad.h",
    signature=(DY, X_, DIM, OUT),
    summary="Gradient of SwiGlu (silu(A) * B, x = [A, B] split in halves along dim).",
    formula="s = sigmoid(A); out_A = yGrad * (s + s * (1 - s) * A) * B; out_B = yGrad * s * A; out = [out_A, out_B] "
            "along dim",
    tensors=(
        TensorSpec(DY, "input", {"normal": [0, 1]}),
        TensorSpec(X_, "input", {"uniform": [-8.0, 8.0]}),
        TensorSpec(OUT, "output", {"constant": 0}),
    ),
    attributes=(AttrSpec(DIM, "int", default=-1),),
    products=products("950", "A3", "A2", "310P", overrides={"310P": ("float32", "float16")}),
    dims=(1, 8),
    empty_ok=False,
    family=Split(driver=X_, halves=(DY,)),
    reference=_reference,
    exact=_exact,
    exact_at=_exact_at,
    kernel=_kernel,
    ieee=_ieee,
    variants=VARIANTS,
    contract=Contract(dtypes="same", shape_rule=_shape_rule),
    special_values="The doc defines none; the kernel's IEEE arithmetic: A = +inf gives NaN in out_A ((1 - s) * A = "
                   "0 * inf) and +-inf in out_B; A = -inf gives NaN in out_B (0 * -inf) and 0 * B in out_A (NaN where "
                   "B is infinite); NaN anywhere gives NaN in the elements it reaches.",
))
