"""aclnnNLLLossBackward: out[i, t_i] = -gradOutput * weight[t_i] (/ totalWeight for mean), every other entry 0.

A Rows op whose rows are the class axis of `self` ((N, C) or (C)); one block is one row of C classes.
Nothing is summed: totalWeight is the caller's (docs: for mean, the sum of weight[target] over the kept
targets), never recomputed, so the result is rational in the inputs (exact path: Fractions).

The 950 kernel (loss/nll_loss_grad/op_kernel/arch35/nll_loss_grad.h, SIMT, hicann/ops-nn e5c3fa93) zero-fills
out (ProcessMemset), then for every row whose target differs from ignoreIndex (an int64 compare) writes
  none: -T(fl32(float(g_i) * float(w_t)))          (SimtComputeNoReduce2d)
  sum:  -T(fl32(float(g_0) * float(w_t)))          (SimtComputeReduceSum2d)
  mean: q = fl32(g_0 / tw) once (Process: tmpOut_(0) = singleGrad_(0) / localTotalWeight_(0)),
        then -T(fl32(q * float(w_t)))              (SimtComputeReduceMean2d)
T(...) rounds half to even into the output dtype. The op_api (loss/nll_loss_grad/op_api/
aclnn_nll_loss_backward.cpp) unsqueezes a 1-D self to (1, C) and squeezes the result back; off the 950 it
casts fp16 to fp32 and target to int32 first (the same numbers: the 950 kernel computes in fp32 too). The
kernel only ASSERTs target in [0, C) and never checks totalWeight != 0.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ...errors import UserError
from ..base import AttrSpec, Contract, F64_UNIT, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..families import Rows, trailing_axes
from ..registry import register

NAME = "aclnnNLLLossBackward"
NONE, MEAN, SUM = 0, 1, 2
TARGET_DTYPES = ("int64", "int32", "uint8")
F32_MAX = float(np.finfo(np.float32).max)
F32_MIN_NORMAL = 2.0**-126


def target_fill(classes: int, attrs) -> dict:
    """Classes in [0, C - 1], an eighth of them equal to ignoreIndex (ATK's and PyTorch's -100 by default)."""
    return {"randint": [0, max(classes - 1, 0)], "sprinkle": {"value": int(attrs["ignoreIndex"]), "share": 0.125}}


def _target_fill(shapes, attrs) -> dict:
    """target_fill with C the last axis of self."""
    return target_fill(shapes["self"][-1] if shapes["self"] else 1, attrs)


def _shapes(shape: tuple[int, ...], attrs) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape from self's: target (N) or (), gradOutput (N) for reduction none with a 2-D self
    (else one element, 0-d), weight (C), totalWeight (1,)."""
    batch, classes = tuple(shape[:-1]), tuple(shape[-1:])
    return {"target": batch, "gradOutput": batch if attrs["reduction"] == NONE and len(shape) == 2 else (),
            "weight": classes, "totalWeight": (1,)}


def _first(a: np.ndarray) -> np.ndarray:
    """One value per row, (k, 1, 1), of an input that arrives per row or broadcast along it."""
    a = np.asarray(a)
    if a.shape[0] == 0:  # (no rows: aclnnNLLLoss2dBackward's sample of no positions)
        return a.reshape(0, 1, 1)
    return a.reshape(a.shape[0], -1, 1)[:, :1]


def _picked(t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hit: where the row's result goes, (k, C, 1); w[t] per row, (k, 1, 1); t per row, (k, 1, 1)).

    A target outside [0, C) that is not ignoreIndex hits nothing here; `reference` refuses it (the kernel's
    write there is undefined)."""
    w, target = t["weight"], _first(t["target"]).astype(np.int64)
    classes = w.shape[1]
    kept = target != int(t["ignoreIndex"])
    hit = (np.arange(classes).reshape(1, -1, 1) == target) & kept
    at = np.clip(target, 0, max(classes - 1, 0))
    w_t = np.take_along_axis(w, at, axis=1) if classes else np.zeros(target.shape, dtype=w.dtype)
    return hit, w_t, target


def _check_targets(t) -> None:
    w, target = t["weight"], _first(t["target"]).astype(np.int64)
    classes = w.shape[1]
    if classes == 0:  # an empty self: nothing is written
        return
    bad = (target != int(t["ignoreIndex"])) & ((target < 0) | (target >= classes))
    if bad.any():
        value = int(target[bad][0])
        raise UserError(f"{NAME}: a target is {value}, outside [0, {classes}) and not ignoreIndex "
                        f"{int(t['ignoreIndex'])}: the kernel's write there is undefined (give targets in [0, C - 1])",
                        key="inputs.target")


def _reference(t) -> Reference:
    """In float64: none and sum give -(g * w_t), exact (two factors of at most 24 bits, exponents within
    [-298, 256]: the product fits float64's 53 bits and range), bound 0. Mean gives -(g * w_t) / tw, the exact
    product rounded once: |value - exact| <= 2^-53 |exact| <= 2 F64_UNIT |value| (quotients lie in
    [2^-426, 2^405], float64 normal). totalWeight 0 with a kept target has no exact value: the value is the
    kernel's IEEE order -((g / tw) * w_t) (+-inf or NaN), bound 0. Every other entry is exactly 0.

    scale = |value| + bound (>= |exact|): a correct float32 kernel rounds at most twice (q, then q * w_t), so it is within
    ~2^-23 |exact| of it; nothing cancels."""
    _check_targets(t)
    hit, w_t, _ = _picked(t)
    g = _first(t["gradOutput"])
    v = g * w_t
    bound = np.zeros(hit.shape)
    if int(t["reduction"]) == MEAN:
        tw = _first(t["totalWeight"])
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(tw != 0, v / tw, (g / tw) * w_t)
        bound = np.where(hit & np.isfinite(v), 2.0 * F64_UNIT * np.abs(v), 0.0)
    value = np.where(hit, -v, 0.0)
    return Reference(value, bound, np.abs(value) + bound)


def _exact(t) -> np.ndarray:
    """Fractions: -(g * w_t), over totalWeight for mean; 0 elsewhere. Not defined at totalWeight 0 (the
    reference's IEEE value is final there, never uncertain)."""
    hit, w_t, _ = _picked(t)
    g = _first(t["gradOutput"])
    v = g * w_t
    if int(t["reduction"]) == MEAN:
        tw = _first(t["totalWeight"])
        if any(x == 0 for x in tw.reshape(-1)):
            raise ValueError(f"{NAME}: no exact value with totalWeight 0")
        v = v / tw
    out = np.full(hit.shape, Fraction(0), dtype=object)
    rows, cols, _ = np.nonzero(hit)
    out[rows, cols, 0] = -v[rows, 0, 0]
    return out


def _compute(t, quotient=None, factor=None) -> np.ndarray:
    """The kernel in the inputs' float type (float32 when emulated): the row's value -(g * w_t), with mean's
    g taken as quotient(g, tw) (default fl(g / tw)); factor(w_t, t) replaces w_t where a variant says."""
    hit, w_t, _ = _picked(t)
    g = _first(t["gradOutput"])
    if factor is not None:
        w_t = factor(w_t, t)
    with np.errstate(all="ignore"):
        if int(t["reduction"]) == MEAN:
            tw = _first(t["totalWeight"])
            g = quotient(g, tw) if quotient is not None else g / tw
        v = g * w_t
        return np.where(hit, -v, np.zeros((), dtype=v.dtype))


def _kernel(t) -> np.ndarray:
    """The 950 kernel (module docstring): fl(g * w_t), mean fl(fl(g / tw) * w_t), negated; 0 elsewhere."""
    return _compute(t)


def _edge(t) -> tuple[np.ndarray, np.ndarray]:
    """Mean only: where the kernel's quotient q = fl32(g / tw) leaves float32's normal range while g * w_t / tw
    need not (g = 1e30, tw = 1e-20: q = inf, w_t = 1e-30 gives exact -1e20; or q underflows into subnormals
    and a large w_t scales the lost bits up), the device value is the float32 kernel's."""
    hit = _picked(t)[0]
    where = np.zeros(hit.shape, dtype=bool)
    if int(t["reduction"]) != MEAN:
        return where, np.full(hit.shape, np.nan)
    f32 = {k: (np.asarray(v).astype(np.float32) if k in ("gradOutput", "weight", "totalWeight") else v)
           for k, v in t.items()}
    g, tw = _first(f32["gradOutput"]), _first(f32["totalWeight"])
    with np.errstate(all="ignore"):
        q = g / tw
        device = _compute(f32).astype(np.float64)
    inputs_finite = np.isfinite(g) & np.isfinite(tw) & (tw != 0) & np.isfinite(_picked(f32)[1])
    out_of_range = np.isinf(q) | ((q != 0) & (np.abs(q) < F32_MIN_NORMAL)) | ((q == 0) & (g != 0))
    return hit & inputs_finite & out_of_range, device


@defect
def _sign_flip(t):
    """Defect: the minus sign lost: +g * w_t (a flipped term)."""
    return -_compute(t)


@defect
def _no_weight(t):
    """Defect: the class weight never read: -g (or -g / tw), as NLL without weight (a missing term)."""
    return _compute(t, factor=lambda w_t, _: np.ones_like(w_t))


@defect
def _mean_no_divide(t):
    """Defect: mean computed as sum: the division by totalWeight dropped (a missing term)."""
    return _compute(t, quotient=lambda g, tw: g)


@defect
def _mean_batch_divisor(t):
    """Defect: mean divided by the batch size N (PyTorch's unweighted mean) instead of the caller's
    totalWeight (a wrong mean divisor)."""
    return _compute(t, quotient=lambda g, tw: g / g.dtype.type(t["batch"]))


@defect
def _ignore_unchecked(t):
    """Defect: rows whose target is ignoreIndex are written too (seen where ignoreIndex is a class)."""
    return _compute({**t, "ignoreIndex": -(1 << 62)})


@defect
def _drop_last_class(t):
    """Defect: one row element dropped: the range check is t < C - 1, so targets C - 1 are never written."""
    out = _compute(t)
    target = _first(t["target"])
    return np.where(target == t["weight"].shape[1] - 1, np.zeros((), dtype=out.dtype), out)


@defect
def _swapped_axes(t):
    """Defect: the wrong axis: row i's value written at out[t_i, i], the batch and class axes swapped
    (modelled within each block of rows the kernel is handed; a value whose swapped place lies outside it is
    lost)."""
    right = _compute(t)
    k, classes = right.shape[:2]
    out = np.zeros_like(right)
    rows, cols, _ = np.nonzero(_picked(t)[0])
    inside = (cols < k) & (rows < classes)
    out[cols[inside], rows[inside], 0] = right[rows[inside], cols[inside], 0]
    return out


@legitimate
def _reciprocal_mean(t):
    """Legitimate: mean as g * fl(1 / tw), then * w_t: three float32 roundings instead of two."""
    return _compute(t, quotient=lambda g, tw: g * (g.dtype.type(1) / tw))


@legitimate
def _weight_first(t):
    """Legitimate: mean as fl(w_t / tw) * g, the other association (a normalised class weight first)."""
    if int(t["reduction"]) != MEAN:
        return _compute(t)
    with np.errstate(all="ignore"):
        tw = _first(t["totalWeight"])
        return _compute({**t, "reduction": SUM}, factor=lambda w_t, _: w_t / tw)


VARIANTS = {
    "nll-sign-flip": _sign_flip,
    "nll-no-weight": _no_weight,
    "nll-mean-no-divide": _mean_no_divide,
    "nll-mean-batch-divisor": _mean_batch_divisor,
    "nll-ignore-unchecked": _ignore_unchecked,
    "nll-drop-last-class": _drop_last_class,
    "nll-swapped-axes": _swapped_axes,
    "nll-reciprocal-mean": _reciprocal_mean,
    "nll-weight-first": _weight_first,
}


def _attribute_rule(attrs) -> str | None:
    r = attrs["reduction"]
    return None if NONE <= r <= SUM else f"reduction {r} is not 0 (none), 1 (mean) or 2 (sum)"


def _shape_rule(descs, attrs) -> str | None:
    """CheckShape in op_api/aclnn_nll_loss_backward.cpp, in its order."""
    self_shape, target = descs["self"].shape, descs["target"].shape
    if not 1 <= len(self_shape) <= 2:
        return f"self has {len(self_shape)} dims; it must be (C) or (N, C)"
    if len(target) > 1:
        return f"target has {len(target)} dims; it must be 0-d or 1-d (multi-target not supported)"
    if not (len(self_shape) == 1 and len(target) == 0) and (not target or target[0] != self_shape[0]):
        return f"target shape {list(target)} does not match self {list(self_shape)} (target (N) with self (N, C), () with (C))"
    classes = self_shape[-1]
    if descs["weight"].shape != (classes,):
        return f"weight shape {list(descs['weight'].shape)} is not ({classes},), one weight per class"
    if math.prod(descs["totalWeight"].shape) != 1:
        return f"totalWeight shape {list(descs['totalWeight'].shape)} is not a single element"
    grad = descs["gradOutput"].shape
    if attrs["reduction"] == NONE and len(self_shape) == 2:
        if grad != self_shape[:1]:
            return f"gradOutput shape {list(grad)} is not [{self_shape[0]}] (reduction none with a 2-D self)"
    elif len(grad) > 1 or math.prod(grad) != 1:
        return f"gradOutput shape {list(grad)} is not a single element of at most 1 dim"
    if descs["out"].shape != self_shape:
        return f"out shape {list(descs['out'].shape)} is not self's {list(self_shape)}"
    return None


# both NLL APIs (this and aclnnNLLLoss2dBackward's) take these, in this order, on these products
SIGNATURE = ("gradOutput", "self", "target", "weight", "reduction", "ignoreIndex", "totalWeight", "out")
PRODUCTS = products("950", "A3", "A2", "910", overrides={"910": ("float32", "float16")})


def tensor_specs(target_fill) -> tuple[TensorSpec, ...]:
    """The tensors of SIGNATURE, both APIs' alike but for where target's classes lie (target_fill)."""
    return (TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
            TensorSpec("self", "input", {"uniform": [-4, 0]}, read_by_kernel=False),
            TensorSpec("target", "input", target_fill, dtypes=TARGET_DTYPES),
            TensorSpec("weight", "input", {"uniform": [-2, 2]}),
            TensorSpec("totalWeight", "input", {"uniform": [1, 100]}),
            TensorSpec("out", "output", {"constant": 0}))


SPEC = register(OpSpec(
    name=NAME,
    key="nll_loss_backward",
    header="aclnnop/aclnn_nll_loss_backward.h",
    signature=SIGNATURE,
    summary="Gradient of the negative log-likelihood loss: -gradOutput * weight[target] at each row's target "
            "class (over totalWeight for mean), 0 elsewhere and on rows whose target is ignoreIndex.",
    formula="out[i, t_i] = -g * w[t_i] (none: g = gradOutput[i]; sum: gradOutput; mean: gradOutput / totalWeight), "
            "t_i != ignoreIndex; every other element 0",
    tensors=tensor_specs(_target_fill),
    attributes=(AttrSpec("reduction", "int", default=MEAN), AttrSpec("ignoreIndex", "int", default=-100)),
    products=PRODUCTS,
    dims=(1, 2),
    empty_ok=True,
    family=Rows(driver="self", axes=trailing_axes("self", lambda s, a: 1), per_row=("target", "gradOutput"),
                shapes=_shapes),
    case_values=lambda shapes: {"batch": math.prod(shapes["self"][:-1])},
    reference=_reference,
    exact=_exact,
    kernel=_kernel,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="same", checks_dims=False, attribute_rule=_attribute_rule, shape_rule=_shape_rule),
    special_values="Only the target entry of a kept row is computed: there a NaN or inf in gradOutput, weight[t] "
                   "or totalWeight gives the IEEE value of the kernel's order, -(g * w[t]) or -((g / tw) * w[t]) "
                   "(inf * 0 = NaN); totalWeight 0 with a kept target gives +-inf (NaN where g or w[t] is 0). "
                   "Every other entry, and every entry of a row whose target is ignoreIndex, is +0 whatever the "
                   "inputs hold (all targets ignored: all zeros, whatever totalWeight). A uint8 target never "
                   "equals a negative ignoreIndex. self's values are never read. Where mean's float32 quotient "
                   "g / tw overflows or underflows but the result need not, the golden is exact; verify also "
                   "accepts the kernel's value.",
))

CONTRACT_NOTES = """\
aclnnNLLLossBackward phase one (loss/nll_loss_grad/op_api/aclnn_nll_loss_backward.cpp), beyond the Contract:
- Order: gradOutput, self, target, weight, totalWeight, out null -> 161001 (CheckNotNull); then dtypes
  (161002): weight, gradOutput, totalWeight must equal self's; self castable to out; self in {FLOAT,
  FLOAT16, BF16} on A2/A3/950 (DAV_2201, DAV_3510), {FLOAT, FLOAT16} else; target in {INT64, UINT8,
  INT32}; then reduction outside [0, 2] -> 161002; then shapes (CheckShape, 161002): self 1-2 dims,
  target <= 1 dim, target (N) with self (N, C) (a 1-d target beside a 1-d self must have self's length),
  weight (C), totalWeight one element (any rank), gradOutput (N) for reduction none with a 2-D self and
  else <= 1 dim with one element, out = self's shape; then an empty self -> ACLNN_SUCCESS, workspace 0.
- out's dtype: the source accepts any dtype self casts to (an extra Cast after the kernel, rounding
  twice); the doc says out has self's dtype. The Contract follows the doc; no case relies on either.
- No check of target values or ignoreIndex: a target outside [0, C) that is not ignoreIndex reaches an
  ASSERT only (an unguarded write in a release kernel); gen refuses such a case (one line, exit 2).
  totalWeight 0 is not refused: kept rows give +-inf or NaN.
- A null workspaceSize or executor is refused by L2_DFX_PHASE_1 (161001).
- Off the 950 (not emulated here) fp16 is cast to fp32 and target to int32 before the kernel.
"""
