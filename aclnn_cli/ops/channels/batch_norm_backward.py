"""aclnnBatchNormBackward: the gradients of batch norm per channel (axis 1 of an (N, C, ...) input).

Per channel c, over its M = N * S elements (S: the spatial axes' product), with g = weight[c]:
  training (saveMean, saveInvstd used as given; eps and the running statistics unused):
    h = (x - saveMean) * saveInvstd
    gradInput  = g * saveInvstd * (dy - sum(dy) / M - h * sum(dy * h) / M)
    gradWeight = sum(dy * h),   gradBias = sum(dy)
  inference (invstd = 1 / sqrt(runningVar + eps)):
    gradInput  = dy * g * invstd
    gradWeight = sum(dy * (x - runningMean)) * invstd,   gradBias = sum(dy)
A null weight is ones, runningMean and saveMean zeros, runningVar and saveInvstd ones (the op_api's fills).
Training is rational (exact path: Fractions); inference's invstd is not, and is exact where it is rational and
to 60 digits elsewhere (`inv_sqrt`).

The 950 (hicann/ops-nn norm/batch_norm_grad_v3, e5c3fa93; its kernel, variants and edges: batch_norm_kernel.py): the op_api launches
BatchNormGradV3 with saveMean and saveInvstd cast to float32 and eps narrowed to float32; gradOut and input are
widened exactly in registers; all arithmetic is float32 (op_kernel/arch35/batch_norm_grad_v3_full_load_regbase.h):
  t = fl(fl(fl(x - mean) * dy) * rstd);  dgamma = sum(t), dbeta = sum(dy)  (folded binary trees per channel)
  c = fl(fl(fl(fl(fl(x - mean) * rstd) * dgamma) + dbeta) * fl(1 / M));  dx = fl(rstd * fl(g * fl(dy - c)))
  gradWeight, gradBias: dgamma, dbeta rounded once (RINT) to their dtype.
Inference: dx = fl(fl(dy * g) * invstd), invstd an fp32 rsqrt of fl(var + eps) (Newton-refined: emulated as the
float64 value rounded once); gradWeight and gradBias from separate ReduceSum ops: terms fl(dy * fl(fl(x - mean) * invstd)).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from ..accumulation import ACCUMULATION_UNIT, sum_allowance
from ..base import AttrSpec, Contract, FLOATS, OpSpec, Reference, TensorSpec, products
from ..dyadic import exact_row_sums
from ..families import Channels
from ..normgrad import SLACK, TINY, U, dx_exact, dx_reference, normalized
from ..registry import register
from .batch_norm_kernel import (CHANNEL, DY, EPS, FILLS, GB, GI, GW, MASK, RM, RV, SAMPLES, SI, SM, TRAIN,
                                VARIANTS, W, X, _edge, _get, _kernel)
from ..treesum import exact_sum_factor, row_sum64

INV_SQRT_DIGITS = 60


def _case_values(shapes) -> dict[str, int]:
    return {SAMPLES: int(shapes[X][0]) if shapes[X] else 1}


def _orders(terms: np.ndarray, samples: int) -> list[np.ndarray]:
    """A channel's terms (k, M, 1) in the two orders its sums may run in: (n, s) as stored, and (s, n) (a
    transposed view: sum_allowance reads its trailing axes in C order)."""
    k, m = terms.shape[0], terms.shape[1]
    flat = terms.reshape(k, m)
    n = samples if samples and m % max(samples, 1) == 0 else 1
    return [flat, flat.reshape(k, n, m // max(n, 1)).transpose(0, 2, 1)]


# ------------------------------------------------------------------ reference and exact

def _sum_ref(terms, samples: int, rounding_units: float, roundings: int, factor=None) -> Reference:
    """A channel sum's Reference: terms (k, M, 1) in float64, each within rounding_units u of the exact term;
    factor: a per-channel float64 factor applied after the sum (inference's invstd, within 4u), else none."""
    m = terms.shape[1]
    mag = row_sum64(np.abs(terms)) * SLACK
    value = row_sum64(terms)
    bound = (exact_sum_factor(m) + rounding_units) * U * mag + (m + 4) * TINY
    allowance = sum_allowance(_orders(terms, samples), roundings).reshape(value.shape)
    if factor is not None:
        value, mag = value * factor, mag * np.abs(factor)
        bound = bound * np.abs(factor) * (1 + 5 * U) + 5 * U * np.abs(value)
        # (the device's invstd is a float32 rsqrt: one common factor within 2 ulps, all terms alike)
        allowance = allowance * np.abs(factor) + 4 * ACCUMULATION_UNIT * np.abs(value)
    return Reference(value, bound, mag, allowance)


def _reference(t) -> dict:
    """float64 on whole channels. Training: gradInput as ops/normgrad.py derives it, with a = dy * g exact (two
    24-bit factors) and h = (x - mean) * rstd; gradWeight's terms dy h within 3.01u of the exact ones, gradBias's
    dy exact; each sum pairwise (F_M u sum|t|) and its allowance derived from its terms (ops/accumulation.py:
    3 float32 roundings make a gradWeight term, none a gradBias one). Inference: invstd = 1 / sqrt(var + eps)
    within 3.5u (a sum, a square root, a quotient), so gradInput = dy g invstd is within 5u of its value; the
    gradWeight sum of dy (x - mean) (terms within 2.01u) times invstd."""
    dy, x, g = t[DY], t[X], _get(t, W)
    samples = int(t[SAMPLES])
    if t[TRAIN]:
        rstd = _get(t, SI)
        h = normalized(x, _get(t, SM), rstd)
        value, bound, mag = dx_reference(dy * g, h, rstd)
        gw, gb = _sum_ref(dy * h, samples, 3.02, 3), _sum_ref(dy, samples, 0, 0)
        # what every element of the channel shares: dgamma's and dbeta's accumulation (their allowances) and the
        # rounding of fl(1 / M) (2 u32 of the correction), carried through g * rstd / M
        m = max(dy.shape[1], 1)
        shared = np.abs(g * rstd) / m * ((np.abs(h) * gw.allowance + gb.allowance)
                                         + 2 * ACCUMULATION_UNIT * (np.abs(h * gw.value) + np.abs(gb.value)))
        return {GI: Reference(value, bound, mag, shared=shared), GW: gw, GB: gb}
    with np.errstate(all="ignore"):
        inv = 1.0 / np.sqrt(_get(t, RV) + float(t[EPS]))
        value = dy * g * inv
        return {GI: Reference(value, 5 * U * np.abs(value) + TINY, np.abs(value)),
                GW: _sum_ref(dy * (x - _get(t, RM)), samples, 2.02, 3, factor=inv),
                GB: _sum_ref(dy, samples, 0, 0)}


def inv_sqrt(q: Fraction) -> Fraction:
    """1 / sqrt(q) for q > 0: exact where q is the square of a rational, else to 60 significant digits (an
    irrational result is no rounding boundary, so the digits only need to settle which side it lies on)."""
    p, d = q.numerator, q.denominator
    rp, rd = math.isqrt(p), math.isqrt(d)
    if rp * rp == p and rd * rd == d:
        return Fraction(rd, rp)
    with localcontext() as ctx:
        ctx.prec = INV_SQRT_DIGITS
        return Fraction(1 / (Decimal(p) / Decimal(d)).sqrt())


def _inv_exact(q: Fraction):
    """1 / sqrt(q) as the formula says: exact or to 60 digits for q > 0; +inf at 0; NaN below (IEEE's values)."""
    return inv_sqrt(q) if q > 0 else float("inf") if q == 0 else float("nan")


def _exact(t) -> dict:
    """The doc's formulas on Fraction object arrays (any k channels)."""
    dy, x, g = t[DY], t[X], _get(t, W)
    if t[TRAIN]:
        rstd = _get(t, SI)
        h = (x - _get(t, SM)) * rstd
        return {GI: dx_exact(dy * g, h, rstd), GW: (dy * h).sum(axis=1, keepdims=True),
                GB: dy.sum(axis=1, keepdims=True)}
    var = np.broadcast_to(np.asarray(_get(t, RV), dtype=object), (dy.shape[0], 1, 1))
    inv = np.array([[[_inv_exact(v + Fraction(t[EPS]))]] for v in var.reshape(-1)], dtype=object).reshape(var.shape)
    return {GI: dy * g * inv, GW: (dy * (x - _get(t, RM))).sum(axis=1, keepdims=True) * inv,
            GB: dy.sum(axis=1, keepdims=True)}


def _exact_at(t, wanted) -> dict:
    """`_exact`'s values at a few positions of whole channels (float64 inputs, exactly widened): each channel's
    sums exact through ops/dyadic.py (dy * x is exact in float64: two 24-bit significands), Fractions only for
    the wanted elements. sum(dy (x - mean)) = sum(dy x) - mean sum(dy)."""
    dy, x = t[DY], t[X]
    k, m = dy.shape[0], dy.shape[1]
    per = {n: [Fraction(float(v)) for v in np.broadcast_to(np.asarray(_get(t, n), np.float64), (k, 1, 1)).reshape(-1)]
           for n in FILLS}
    s_dy = exact_row_sums(dy.reshape(k, m))
    s_dyx = exact_row_sums((dy * x).reshape(k, m))
    train = bool(t[TRAIN])
    if train:
        centre, inv = per[SM], per[SI]
    else:  # (only where a wanted element needs it: gradBias does not)
        centre = per[RM]
        needed = set() if set(wanted) <= {GB} else set(range(k))
        inv = [_inv_exact(v + Fraction(t[EPS])) if c in needed else None for c, v in enumerate(per[RV])]
    dotp = [sxy - c * sy for sxy, c, sy in zip(s_dyx, centre, s_dy)]
    out = {}
    for name, where in wanted.items():
        values = []
        for p in np.asarray(where, np.int64).reshape(-1).tolist():
            if name == GI:
                c, i = divmod(p, m)
                d, xi = Fraction(float(dy.reshape(k, m)[c, i])), Fraction(float(x.reshape(k, m)[c, i]))
                g, r = per[W][c], inv[c]
                values.append(g * r * (d - s_dy[c] / m - (xi - centre[c]) * r * (dotp[c] * r) / m) if train
                              else d * g * r)
            else:
                values.append(dotp[p] * inv[p] if name == GW else s_dy[p])  # (inv: Fraction, or inf/NaN)
        out[name] = np.array(values + [None], dtype=object)[:-1]
    return out


# ------------------------------------------------------------------ the contract

def _attribute_rule(attrs) -> str | None:
    """outputMask's length (161001 on the 950's regbase path, reported as 161002 here: decision in CONTRACT_NOTES)."""
    mask = attrs[MASK]
    if len(mask) != 3:
        return f"outputMask has {len(mask)} values; it takes 3 (gradInput, gradWeight, gradBias)"
    return None


def _dtype_rule(d) -> str | None:
    """RegbaseCheckDtypeSame: gradOut = input = gradInput; the per-channel inputs float32 or input's dtype, pairs
    alike; gradWeight and gradBias float32 or weight's dtype (input's for a null weight), alike."""
    x = d[X].dtype.name
    if d[DY].dtype.name != x:
        return f"gradOut dtype {d[DY].dtype.name} differs from input's {x}"
    for name in (W, RM, RV, SM, SI):
        if not d[name].null and d[name].dtype.name not in ("float32", x):
            return f"{name} dtype {d[name].dtype.name} is neither float32 nor input's {x}"
    for a, b in ((RM, RV), (SM, SI), (GW, GB)):
        if not d[a].null and not d[b].null and d[a].dtype.name != d[b].dtype.name:
            return f"{b} dtype {d[b].dtype.name} differs from {a}'s {d[a].dtype.name}"
    if not d[GI].null and d[GI].dtype.name != x:
        return f"gradInput dtype {d[GI].dtype.name} is not input's {x}"
    w = x if d[W].null else d[W].dtype.name
    for name in (GW, GB):
        if not d[name].null and d[name].dtype.name not in ("float32", w):
            return f"{name} dtype {d[name].dtype.name} is neither float32 nor weight's {w}"
    return None


def _shape_rule(d, attrs) -> str | None:
    """A true outputMask entry beside a null output (161001 in the source, 161002 here), the dtype relations,
    then CheckShape: input 2-8 dims, gradOut and a requested gradInput input's shape, every per-channel tensor
    1-d of length C (input's axis 1)."""
    mask = attrs[MASK]
    for k, name in enumerate((GI, GW, GB)):
        if mask[k] and d[name].null:
            return f"{name} is a null pointer while outputMask[{k}] is true"
    rule = _dtype_rule(d)
    if rule:
        return rule
    shape = d[X].shape
    if not 2 <= len(shape) <= 8:
        return f"input has {len(shape)} dims; it takes 2-8 (N, C, ...)"
    if d[DY].shape != shape:
        return f"gradOut shape {list(d[DY].shape)} is not input's {list(shape)}"
    if not d[GI].null and d[GI].shape != shape:
        return f"gradInput shape {list(d[GI].shape)} is not input's {list(shape)}"
    for name in CHANNEL:
        if not d[name].null and d[name].shape != (shape[1],):
            return f"{name} shape {list(d[name].shape)} is not [C] = [{shape[1]}]"
    return None


def _masked_tensor(name: str) -> TensorSpec:
    return TensorSpec(name, "output", {"constant": 0}, optional=True, dtypes=None if name == GI else FLOATS,
                      formats=FORMATS if name == GI else {})


# The formats ops-nn's own suites give gradOut, input and gradInput (ATK's executor, by rank): the op_api refuses a
# 5-d ND tensor on the 950 and, in inference, reads the channel of anything but NCHW/NCDHW along the last axis.
FORMATS = {2: "NC", 3: "NCL", 4: "NCHW", 5: "NCDHW"}


SPEC = register(OpSpec(
    name="aclnnBatchNormBackward",
    key="batch_norm_backward",
    header="aclnnop/aclnn_batch_norm_backward.h",
    signature=(DY, X, W, RM, RV, SM, SI, TRAIN, EPS, MASK, GI, GW, GB),
    summary="Gradients of batch norm per channel (axis 1): gradInput per element, gradWeight and gradBias summed "
            "over each channel's N * S elements; training from the saved mean and invstd, inference from the "
            "running statistics.",
    formula="training: h = (input - saveMean) * saveInvstd; gradInput = weight * saveInvstd * (gradOut - mean(gradOut) "
            "- h * mean(gradOut * h)); gradWeight = sum(gradOut * h); gradBias = sum(gradOut). inference: invstd = "
            "1 / sqrt(runningVar + eps); gradInput = gradOut * weight * invstd; gradWeight = sum(gradOut * (input - "
            "runningMean)) * invstd; gradBias = sum(gradOut)",
    tensors=(
        TensorSpec(DY, "input", {"normal": [0, 1]}, formats=FORMATS),
        TensorSpec(X, "input", {"normal": [0, 1]}, formats=FORMATS),
        TensorSpec(W, "input", {"uniform": [-2.0, 2.0]}, optional=True, dtypes=FLOATS),
        TensorSpec(RM, "input", {"uniform": [-0.25, 0.25]}, optional=True, dtypes=FLOATS),
        TensorSpec(RV, "input", {"uniform": [0.25, 4.0]}, optional=True, dtypes=FLOATS),
        TensorSpec(SM, "input", {"uniform": [-0.25, 0.25]}, optional=True, dtypes=FLOATS),
        TensorSpec(SI, "input", {"uniform": [0.5, 2.0]}, optional=True, dtypes=FLOATS),
        _masked_tensor(GI), _masked_tensor(GW), _masked_tensor(GB),
    ),
    attributes=(AttrSpec(TRAIN, "bool", default=True), AttrSpec(EPS, "double", default=1e-5),
                AttrSpec(MASK, "bool_list", default=(True, True, True))),
    products=products("950", "A3", "A2", "910", overrides={"910": ("float32", "float16")}),
    dims=(1, 8),
    empty_ok=True,
    family=Channels(driver=X, per_row=CHANNEL),
    case_values=_case_values,
    reference=_reference,
    exact=_exact,
    exact_at=_exact_at,
    kernel=_kernel,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", attribute_rule=_attribute_rule, shape_rule=_shape_rule),
    special_values="The doc defines none; the kernel's IEEE arithmetic: a NaN anywhere in a channel (gradOut, input, "
                   "its weight or statistics) reaches both channel sums, so that channel of gradInput is NaN in "
                   "training, and its gradWeight (and, from gradOut, gradBias). An infinity gives inf or NaN by the "
                   "formula's order. saveInvstd = 0 gives a channel of zeros in training; runningVar + eps = 0 an "
                   "infinite invstd in inference. Where a float32 intermediate overflows while the inputs are finite, "
                   "the golden is exact; verify also accepts the kernel's value. A masked-off output is not written.",
))

CONTRACT_NOTES = """\
aclnnBatchNormBackward phase one (norm/batch_norm_grad_v3/op_host/op_api/aclnn_batch_norm_backward.cpp, e5c3fa93):
- Order: gradOut or input null -> 161001; an empty gradOut or input -> success before any other check, nothing
  written (gradWeight and gradBias are not zero-filled: no bundled case has N * S = 0 with C > 0); outputMask null,
  its size != 3 (on the 950) or a true entry beside a null output -> 161001 (the Contract has no hook for a rule
  on an attribute's length returning 161001: these are reported as 161002 and no bundled case relies on it);
  dtypes (161002): gradOut = input in {FLOAT, FLOAT16, BF16}, weight, the running and the saved statistics
  FLOAT or input's, runningMean = runningVar, saveMean = saveInvstd, gradInput = gradOut, gradWeight = gradBias
  in {FLOAT, weight's}; formats: a 5-d tensor NCDHW or NDHWC; shapes: 2-8 dims, gradOut = input (= gradInput),
  every per-channel tensor 1-d of length C; a length-0 saveMean/saveInvstd only in inference (not expressible
  by the channels family: the bundled cases give them length C); all of outputMask false -> success.
- C is axis 1 (NC, NCL, NCHW, NCDHW, ND for 6-8 dims: the harness passes those formats, FORMATS). NHWC and NDHWC storage formats take the last axis as C:
  an imported NHWC row becomes an (N, C, H, W) view of the same storage with channel-last strides (decision 76):
  the same values, judged per channel; the device then runs its strided NCHW path, not its channel-last kernels.
- eps is narrowed to float32 by the op_api (BatchNormBackwardRegbase takes float eps); the golden uses the double
  the API takes (the difference is within float32's rounding of var + eps).
- A 16-bit weight beside a float32 gradWeight: the training kernel rounds to the weight's dtype, the op_api casts
  back to float32 (two roundings): not a bundled case.
- Off the 950: BNTrainingUpdateGrad / BNTrainingReduceGrad / BNInferGrad through 5HD, not emulated here.
"""
