"""aclnnGeGluBackward: the gradient of GeGlu, y = A * gelu(B), where self = [A, B] is split in halves along `dim`.

The forward (activation/ge_glu_v2/docs/aclnnGeGlu.md) gelus the second half B and saves gelu(B) as its second
output; the backward takes that saved `gelu` as an input and uses it as given (it is never recomputed):
  grad_A = gradOutput * gelu
  grad_B = gradOutput * A * gelu'(B)
gradInput has self's shape, grad_A in A's place and grad_B in B's; gradOutput and gelu have self's shape with
dim halved. approximate (int64): 0 the erf form, gelu' = Phi(x) + x phi(x); 1 the tanh form (PyTorch's
'none' and 'tanh'). aclnnGeGluV3Backward (ge_glu_v3_backward.py) is the same kernel with activateLeft: true
swaps the halves' roles (A gelu'd, B linear); aclnnGeGluBackward passes false.

The 950 (hicann/ops-nn activation/ge_glu_grad_v2/op_kernel/arch35/ge_glu_grad_v2_{erf,tanh}_*.h), x1 the linear
half and x2 the activated one, in float32 registers (bfloat16 widened first, float16 see below):
  dx1 = fl(gelu * dy);  p = fl(x1 * dy)
  erf:  y = min(max(fl(x2 * 0.70710678118f), -3.92), 3.92); t1 = y*y; erf = P(t1) y / Q(t1) (a rational
        polynomial, Horner, every step rounded: `_erf`); cdf = erf*0.5 + 0.5;
        pdf = exp((x2*x2) * -0.5) * 0.3989422804f; dx2 = p * (cdf + pdf * x2)
  tanh: g1 = 1 / (exp((x2*x2*A1 + A2) * x2) + 1); g2 = x2*x2*A3 + A4; dx2 = ((((g1 - 1) x2) g2 + 1) g1) p
each rounded once (CAST_RINT) to the output dtype. The float16 kernel multiplies x1 * dy (and gelu * dy) in
half: p is rounded to float16 before the float32 gelu', one rounding (2^-11 relative) the emulated kernel does
not make (a kernel function is not told the case's dtype; decision 80). The 310P runs tanh only (its tiling
refuses approximate 0 at run time, after phase one accepts it).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..base import (AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, grad_linear_reference, legitimate,
                    products)
from ..families import Split
from ..elementwise.gelu_backward_v2 import SPEC as GELU_GRAD
from ..mathfns import exp
from ..registry import register

DY, X_, GELU, DIM, APPROX, LEFT, OUT = "gradOutput", "self", "gelu", "dim", "approximate", "activateLeft", "gradInput"

# The 950 kernels' float32 literals (ge_glu_grad_v2_erf_base.h, ge_glu_grad_v2_tanh_base.h).
SQRT_HALF, INV_SQRT_2PI, ERF_CLAMP = 0.70710678118, 0.3989422804, 3.92
ERF_P = (0.53443748819e-1, 0.75517016694e1, 0.10162808918e3, 0.13938061484e4, 0.50637915060e4, 0.29639384698e5)
ERF_Q = (0.31212858877e2, 0.39856963806e3, 0.30231248150e4, 0.13243365831e5, 0.26267224157e5)
TANH_A1, TANH_A2 = -0.0713548162726002527220, -1.5957691216057308
TANH_A3, TANH_A4 = -0.21406444881780074632901625683959062, -1.5957691216057307117597842397375274738


def _halves(t):
    """(linear half, activated half, gradOutput, gelu) of blocks (k, R, A0): activateLeft gelus the first."""
    x = t[X_]
    h = x.shape[1] // 2
    a, b = x[:, :h], x[:, h:]
    lin, act = (b, a) if t.get(LEFT, False) else (a, b)
    return lin, act, t[DY], t[GELU]


def _join(t, d_lin, d_act):
    """gradInput from the halves' gradients, each in its half's place."""
    return np.concatenate([d_act, d_lin] if t.get(LEFT, False) else [d_lin, d_act], axis=1)


def _mode(t) -> str:
    return "none" if int(t[APPROX]) == 0 else "tanh"


# ------------------------------------------------------------------ reference and exact

def _reference(t) -> Reference:
    """grad_A = dy * gelu exactly (two <= 24-bit significands); grad_B = gelu_backward_v2's dy * gelu'(B), bound and
    all, with dy * A (exact in float64) for dy."""
    lin, act, dy, gelu = _halves(t)
    r_lin = grad_linear_reference(dy, gelu, np.abs(gelu), 0.0)
    r_act = gelu_grad_reference(dy * lin, act, _mode(t))
    return Reference(*(_join(t, getattr(r_lin, f), getattr(r_act, f)) for f in ("value", "bound", "scale")))


def gelu_grad_reference(dy, x, mode: str) -> Reference:
    """GeluBackwardV2's reference of dy * gelu'(x), bound and all (dy exact in float64)."""
    return GELU_GRAD.reference({"gradOutput": dy, "self": x, "approximate": mode})


def gelu_grad_exact(dy: Fraction, x: Fraction, mode: str):
    """GeluBackwardV2's exact dy * gelu'(x) (>= 48 significant digits)."""
    return GELU_GRAD.exact({"gradOutput": dy, "self": x, "approximate": mode})


def _fraction(v) -> Fraction:
    return v if isinstance(v, Fraction) else Fraction(float(v))


def _exact_at(t, wanted):
    """The exact values of gradInput at flat positions of the blocks (block-major, each block (R, A0)): a Fraction
    on the linear half's side, gelu_backward_v2's decimal gelu' (>= 48 digits) on the other."""
    x = t[X_]
    k, r, a0 = x.shape
    h = r // 2
    where = np.asarray(wanted[OUT], dtype=np.int64)
    b, rest = where // (r * a0), where % (r * a0)
    row, col = rest // a0, rest % a0
    first = row < h
    at = np.where(first, row, row - h)
    act_first = bool(t.get(LEFT, False))
    values = []
    for i, j, c, f in zip(b.tolist(), at.tolist(), col.tolist(), first.tolist()):
        lin, act = (x[i, j + h, c], x[i, j, c]) if act_first else (x[i, j, c], x[i, j + h, c])
        dy, gelu = t[DY][i, j, c], t[GELU][i, j, c]
        linear_side = f != act_first
        if not all(np.isfinite(float(v)) for v in (lin, act, dy, gelu)):
            one = _ieee({X_: np.array([[[float(x[i, j, c])], [float(x[i, j + h, c])]]]), DY: np.array([[[float(dy)]]]),
                         GELU: np.array([[[float(gelu)]]]), APPROX: t[APPROX], LEFT: act_first})
            values.append(float(one[0, 0 if f else 1, 0]))
        elif linear_side:
            values.append(_fraction(dy) * _fraction(gelu))
        else:
            values.append(gelu_grad_exact(_fraction(dy) * _fraction(lin), _fraction(act), _mode(t)))
    return {OUT: np.array(values + [None], dtype=object)[:-1]}


def _exact(t):
    """Whole blocks, element by element (gen asks `exact_at` for the few elements the float64 bound leaves open)."""
    x = t[X_]
    k, r, a0 = x.shape
    return _exact_at(t, {OUT: np.arange(k * r * a0)})[OUT].reshape(k, r, a0)


# ------------------------------------------------------------------ the device

def _erf(y):
    """The 950's erf of an already clamped y: y P(y^2) / Q(y^2), Horner, each Muls/Adds/Mul rounded."""
    t1 = y * y
    p = t1 * ERF_P[0]
    for c in ERF_P[1:-1]:
        p = (p + c) * t1
    p = (p + ERF_P[-1]) * y
    q = t1 + ERF_Q[0]
    for c in ERF_Q[1:]:
        q = q * t1 + c
    return p / q


def _grad_erf(p, x, erf=_erf, pdf_scale=-0.5, with_pdf=True):
    """p * (cdf + pdf * x), the erf kernel's ComputeGeluGrad."""
    y = np.maximum(np.minimum(x * SQRT_HALF, ERF_CLAMP), -ERF_CLAMP)
    cdf = erf(y) * 0.5 + 0.5
    pdf = exp((x * x) * pdf_scale) * INV_SQRT_2PI
    return p * (cdf + pdf * x) if with_pdf else p * cdf


def _grad_tanh(p, x):
    """((((g1 - 1) x) g2 + 1) g1) p, the tanh kernel's ComputeGeluGrad."""
    x2 = x * x
    g1 = 1.0 / (exp((x2 * TANH_A1 + TANH_A2) * x) + 1.0)
    g2 = x2 * TANH_A3 + TANH_A4
    return ((((g1 - 1.0) * x) * g2 + 1.0) * g1) * p


def _run(t, grad=None, lin_side=lambda dy, gelu, act: gelu * dy, times_lin=True, swap=False):
    """The kernel with parts replaced by a variant's, in the inputs' float type (float32 on the device)."""
    lin, act, dy, gelu = _halves(t)
    if swap:
        lin, act = act, lin
    with np.errstate(all="ignore"):
        g = grad or (_grad_erf if _mode(t) == "none" else _grad_tanh)
        return _join(t, lin_side(dy, gelu, act), g(lin * dy if times_lin else dy, act))


def _kernel(t):
    """The 950's order (module docstring)."""
    return _run(t)


def _ieee(t):
    """Blocks holding an inf or NaN: the reference where an element's inputs are finite, elsewhere the kernel in
    IEEE float64 (B = +-inf: NaN in grad_B, pdf * x = 0 * inf (erf), (g1 - 1) x = 0 * inf or g1 = 0 times inf
    (tanh))."""
    w = {k: (np.asarray(v, dtype=np.float64) if k in (X_, DY, GELU) else v) for k, v in t.items()}
    lin, act, dy, gelu = _halves(w)
    fin = np.isfinite
    ok = _join(w, fin(dy) & fin(gelu), fin(dy) & fin(lin) & fin(act))
    clean = {**w, **{k: np.where(fin(w[k]), w[k], 0.0) for k in (X_, DY, GELU)}}
    with np.errstate(all="ignore"):
        return np.where(ok, _reference(clean).value, _kernel(w))


def _accurate(p, x, mode):
    """gelu'(x) from the float64 formula rounded once to p's type, times p."""
    f = gelu_grad_reference(np.ones(np.shape(x)), np.asarray(x, dtype=np.float64), mode).value
    return p * f.astype(p.dtype)


@legitimate
def _accurate_gelu_grad(t):
    """Legitimate: gelu'(B) correctly rounded to float32 (a libm erf / tanh), then times fl(dy * A)."""
    return _run(t, grad=lambda p, x: _accurate(p, x, _mode(t)))


@legitimate
def _linear_last(t):
    """Legitimate: grad_B = dy * (A * gelu'(B)), the product formed in another order."""
    lin, _, _, _ = _halves(t)
    g = _grad_erf if _mode(t) == "none" else _grad_tanh
    return _run(t, grad=lambda p, x: g(np.ones_like(x), x) * lin * t[DY])


@defect
def _wrong_half(t):
    """Defect: the linear half gelu'd and the activated one taken as linear (activateLeft read inverted)."""
    return _run(t, swap=True)


@defect
def _approximate_ignored(t):
    """Defect (approximate 1): the attribute not passed on, the erf form always. (The tanh form in place of the
    erf one stays within float32's tolerance of the erf golden, whose scale is 1/2 + ...: not a defect the gate
    can see, as in gelu_backward_v2.)"""
    return _run(t, grad=_grad_erf)


@defect
def _gelu_recomputed(t):
    """Defect: grad_A from gelu(B) recomputed (tanh form), not the saved gelu the API takes."""
    def lin_side(dy, gelu, act):
        g1 = 1.0 / (exp((act * act * TANH_A1 + TANH_A2) * act) + 1.0)
        return act * g1 * dy
    return _run(t, lin_side=lin_side)


@defect
def _no_pdf_term(t):
    """Defect: gelu'(B) taken as Phi(B) (erf) or the tanh form's g1, the x phi(x) term dropped."""
    if _mode(t) == "none":
        return _run(t, grad=lambda p, x: _grad_erf(p, x, with_pdf=False))
    return _run(t, grad=lambda p, x: p / (exp((x * x * TANH_A1 + TANH_A2) * x) + 1.0))


@defect
def _linear_half_dropped(t):
    """Defect: grad_B = dy * gelu'(B), A not multiplied in (the gradient of gelu(B), not A * gelu(B))."""
    return _run(t, times_lin=False)


VARIANTS = {"geglu-accurate-gelu-grad": _accurate_gelu_grad, "geglu-linear-last": _linear_last,
            "geglu-wrong-half": _wrong_half, "geglu-approximate-ignored": _approximate_ignored,
            "geglu-gelu-recomputed": _gelu_recomputed, "geglu-no-pdf-term": _no_pdf_term,
            "geglu-linear-half-dropped": _linear_half_dropped}


# ------------------------------------------------------------------ phase one

def shape_rule(descs, attrs) -> str | None:
    """aclnn_geglu_backward.cpp's CheckShape, then CheckAttributeValue, in its order: gelu gradOutput's shape,
    gradInput self's; dim in [-n, n - 1] (a 0-d self counts as 1-d); gradOutput self's dims with dim halved
    (an odd self along dim has no such gradOutput); approximate 0 or 1."""
    x, dy = tuple(descs[X_].shape), tuple(descs[DY].shape)
    if tuple(descs[GELU].shape) != dy:
        return f"gelu shape {list(descs[GELU].shape)} is not gradOutput's {list(dy)}"
    if tuple(descs[OUT].shape) != x:
        return f"gradInput shape {list(descs[OUT].shape)} is not self's {list(x)}"
    n, dim = max(len(x), 1), int(attrs[DIM])
    if not -n <= dim < n:
        return f"dim {dim} is outside [{-n}, {n - 1}] for a {len(x)}-d self"
    axis = dim + n if dim < 0 else dim
    half = (*x[:axis], x[axis] // 2, *x[axis + 1:]) if x else ()
    if len(dy) != len(x) or not x or dy[axis] * 2 != x[axis] or dy != half:
        return f"gradOutput shape {list(dy)} is not self's {list(x)} with dim {dim} halved"
    if int(attrs[APPROX]) not in (0, 1):
        return f"approximate {attrs[APPROX]} is not 0 (erf) or 1 (tanh)"
    return None


def spec(name: str, key: str, header: str, attributes: tuple[AttrSpec, ...], summary: str) -> OpSpec:
    """The declaration both APIs share (V3 adds activateLeft); each module registers its own (the registry reads
    the op's file from the caller of register)."""
    return OpSpec(
        name=name,
        key=key,
        header=header,
        signature=(DY, X_, GELU, *(a.name for a in attributes), OUT),
        summary=summary,
        formula="self = [A, B] along dim (activateLeft: B linear, A gelu'd); grad_A = gradOutput * gelu; grad_B = "
                "gradOutput * A * gelu'(B), gelu' = Phi(x) + x phi(x) (approximate 0) or its tanh form (1)",
        tensors=(
            TensorSpec(DY, "input", {"normal": [0, 1]}),
            TensorSpec(X_, "input", {"uniform": [-6.0, 6.0]}),
            TensorSpec(GELU, "input", {"uniform": [-0.2, 6.0]}),
            TensorSpec(OUT, "output", {"constant": 0}),
        ),
        attributes=attributes,
        products=products("950", "A3", "A2", "310P", overrides={"310P": ("float32", "float16")}),
        dims=(1, 8),
        empty_ok=True,
        family=Split(driver=X_, halves=(DY, GELU)),
        reference=_reference,
        exact=_exact,
        exact_at=_exact_at,
        kernel=_kernel,
        ieee=_ieee,
        variants=VARIANTS,
        contract=Contract(dtypes="same", shape_rule=shape_rule),
        special_values="The doc defines none; the kernel's IEEE arithmetic: an infinite gelu'd element gives NaN in "
                       "its gradient (erf: pdf * x = 0 * inf; tanh: 0 * inf or inf * 0), the linear side's "
                       "gradient is gradOutput * gelu; NaN reaches the elements it touches. The tanh kernel gives "
                       "NaN for |B| > 1.8e19 too (x^2 overflows), the golden its limit.",
    )


SPEC = register(spec("aclnnGeGluBackward", "ge_glu_backward", "aclnnop/aclnn_geglu_backward.h",
                         (AttrSpec(DIM, "int", default=-1), AttrSpec(APPROX, "int", default=1)),
                         "Gradient of GeGlu (A * gelu(B), self = [A, B] split in halves along dim; gelu the saved forward output)."))
