"""aclnnBatchNormBackward's 950 kernel, its variants and its float32 edges (the declaration: batch_norm_backward.py).

The 950 (hicann/ops-nn norm/batch_norm_grad_v3, e5c3fa93), all float32 after an exact widening of fp16/bf16:
  training  t = fl(fl(fl(x - mean) * dy) * rstd); dgamma = sum(t), dbeta = sum(dy) (folded binary trees);
            dx = fl(rstd * fl(g * fl(dy - fl(fl(fl(fl(x - mean) * rstd) * dgamma) + dbeta) * fl(1 / M))))
  inference dx = fl(fl(dy * g) * invstd), invstd a float32 rsqrt of fl(var + eps32); gradWeight, gradBias from
            ReduceSum ops over terms fl(dy * fl(fl(x - mean) * invstd)).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..base import defect, legitimate
from ..treesum import running_sum, tree_sum
from .sums import accumulation_variants

DY, X, W, RM, RV, SM, SI = "gradOut", "input", "weight", "runningMean", "runningVar", "saveMean", "saveInvstd"
GI, GW, GB = "gradInput", "gradWeight", "gradBias"
TRAIN, EPS, MASK = "training", "eps", "outputMask"
SAMPLES = "sampleCount"  # a case value: N, the samples a channel's M elements come from (the (s, n) order needs it)
CHANNEL = (W, RM, RV, SM, SI, GW, GB)
FILLS = {W: 1.0, RM: 0.0, RV: 1.0, SM: 0.0, SI: 1.0}  # a null optional input, as the op_api's FillScalar makes it


def _get(t, name):
    """An input as the functions see it: its (k, 1, 1) values, or the op_api's fill for a null one."""
    v = t.get(name)
    if v is not None:
        return v
    x = t[X]
    return Fraction(FILLS[name]) if x.dtype == object else x.dtype.type(FILLS[name])


# ------------------------------------------------------------------ the 950 kernel and its variants

def _eps32(t):
    """eps in the kernel's float type (the op_api narrows the double to float32)."""
    return t[X].dtype.type(t[EPS])


def _inv_sqrt_f(v):
    """rsqrt in v's float type: the float64 1 / sqrt rounded to it (within an ulp of the exact value, as the device's
    Newton-refined rsqrt is; not bit for bit the device's)."""
    with np.errstate(all="ignore"):
        return (1.0 / np.sqrt(v.astype(np.float64))).astype(v.dtype)


def _dx_950(dy, g, xmu, rstd, dg, db, m):
    """dx = rstd * (g * (dy - ((xmu * rstd) * dgamma + dbeta) * fl(1 / M)))."""
    recip = dy.dtype.type(1) / dy.dtype.type(max(m, 1))
    return rstd * (g * (dy - ((xmu * rstd) * dg + db) * recip))


def _train(t, row_sum=tree_sum, dx=_dx_950, term=None, steps=None) -> dict:
    """The 950's training kernel with replaceable pieces (the sums, dx, the dgamma term) for the variants;
    steps: a list the float32 intermediates are appended to (the edge check)."""
    dy, x, g, mean, rstd = t[DY], t[X], _get(t, W), _get(t, SM), _get(t, SI)
    with np.errstate(all="ignore"):
        xmu = x - mean
        tt = term(xmu, dy, rstd) if term is not None else (xmu * dy) * rstd
        dg, db = row_sum(tt, axis=1), row_sum(dy, axis=1)
        gi = dx(dy, g, xmu, rstd, dg, db, x.shape[1])
    if steps is not None:
        steps += [xmu, tt, dg, db, (xmu * rstd) * dg]
    return {GI: gi, GW: dg, GB: db}


def _infer(t, row_sum=tree_sum, steps=None) -> dict:
    """The 950's inference path: the kernel's dx, the ReduceSum ops' gradWeight and gradBias."""
    dy, x, g, mean, var = t[DY], t[X], _get(t, W), _get(t, RM), _get(t, RV)
    with np.errstate(all="ignore"):
        inv = _inv_sqrt_f(np.asarray(var + _eps32(t)))
        terms = dy * ((x - mean) * inv)
        out = {GI: (dy * g) * inv, GW: row_sum(terms, axis=1), GB: row_sum(dy, axis=1)}
    if steps is not None:
        steps += [x - mean, terms, out[GW], out[GB]]
    return out


def _kernel(t, **pieces) -> dict:
    """The 950 kernel (module docstring): gradInput (k, M, 1), gradWeight and gradBias (k, 1, 1)."""
    if t[TRAIN]:
        return _train(t, **pieces)
    return _infer(t, **{k: v for k, v in pieces.items() if k in ("row_sum", "steps")})


def _lost_partial(x, axis):
    """A tree sum missing its last 1/48 of the terms: one of 48 cores' partials never added."""
    n = x.shape[axis]
    return tree_sum(np.take(x, range(n - max(1, -(-n // 48))), axis=axis), axis=axis)


@defect
def _dgamma_term_sign(t):
    """Defect: the x̂ * dgamma term added to gradInput's correction with the wrong sign."""
    return _kernel(t, dx=lambda dy, g, xmu, r, dg, db, m: _dx_950(dy, g, xmu, r, -dg, db, m))


@defect
def _no_dbeta_term(t):
    """Defect: the mean of dy (dbeta / M) left out of gradInput (a missing reduction term)."""
    return _kernel(t, dx=lambda dy, g, xmu, r, dg, db, m: _dx_950(dy, g, xmu, r, dg, 0 * db, m))


@defect
def _no_final_rstd(t):
    """Defect: gradInput not multiplied by rstd at the end (the chain rule through x̂ forgotten)."""
    return _kernel(t, dx=lambda dy, g, xmu, r, dg, db, m: _dx_950(dy, g, xmu, r, dg, db, m) / r)


@defect
def _stats_swapped(t):
    """Defect: saveMean and saveInvstd read in each other's place."""
    return _kernel({**t, SM: _get(t, SI), SI: _get(t, SM)})


@defect
def _weight_grad_without_rstd(t):
    """Defect: gradWeight summed from dy * (x - mean), without the rstd factor."""
    return _kernel(t, term=lambda xmu, dy, r: xmu * dy)


@defect
def _inference_formula_in_training(t):
    """Defect: training computed with the inference formula: gradInput = dy * g * saveInvstd (no mean terms)."""
    return _kernel(t, dx=lambda dy, g, xmu, r, dg, db, m: (dy * g) * r)


@defect
def _bessel_divisor(t):
    """Defect: a wrong mean divisor: M - 1 (an unbiased-variance habit) instead of M."""
    return _kernel(t, dx=lambda dy, g, xmu, r, dg, db, m: _dx_950(dy, g, xmu, r, dg, db, m - 1))


@defect
def _lost_core_partial(t):
    """Defect: one core's partial sums lost: each channel's sums miss their last 1/48 of the terms."""
    return _kernel(t, row_sum=_lost_partial)


_fp16_accumulation, _bf16_accumulation, _sequential = accumulation_variants(_kernel, "both channel sums")


@legitimate
def _sample_major(t):
    """Legitimate: the channel sums taken over the samples first, then over the spatial positions (the (s, n)
    order a kernel tiling N across cores gives), pairwise in float32."""
    n = int(t[SAMPLES])

    def by_samples(v, axis):
        k, m = v.shape[0], v.shape[1]
        if n <= 1 or m % n:
            return tree_sum(v, axis=axis)
        per_s = v.reshape(k, n, m // n).sum(axis=1, dtype=v.dtype)
        return per_s.sum(axis=1, dtype=v.dtype).reshape(k, 1, 1)
    return _kernel(t, row_sum=by_samples)


@legitimate
def _recompute_association(t):
    """Legitimate: the RARecompute template's association: dx = (rstd * g) * (dy - c)."""
    def dx(dy, g, xmu, r, dg, db, m):
        recip = dy.dtype.type(1) / dy.dtype.type(max(m, 1))
        return (r * g) * (dy - ((xmu * r) * dg + db) * recip)
    return _kernel(t, dx=dx)


@legitimate
def _aten(t):
    """Legitimate: ATen's CPU formula (aten/src/ATen/native/Normalization.cpp, batch_norm_backward_cpu_template)
    in float32: dotp = sum((x - mean) dy), k = dotp invstd^2 / M, dx = (dy - (x - mean) k - sum(dy) / M) invstd w;
    gradWeight = dotp invstd. Inference: dx = dy invstd w."""
    if not t[TRAIN]:
        return _kernel(t, row_sum=running_sum)
    dy, x, g, mean, rstd = t[DY], t[X], _get(t, W), _get(t, SM), _get(t, SI)
    m = dy.dtype.type(max(x.shape[1], 1))
    with np.errstate(all="ignore"):
        total, dotp = running_sum(dy, 1), running_sum((x - mean) * dy, 1)
        k = dotp * rstd * rstd / m
        return {GI: (dy - (x - mean) * k - total / m) * rstd * g, GW: dotp * rstd, GB: total}


VARIANTS = {
    "bn-dgamma-term-sign": _dgamma_term_sign,
    "bn-no-dbeta-term": _no_dbeta_term,
    "bn-no-final-rstd": _no_final_rstd,
    "bn-stats-swapped": _stats_swapped,
    "bn-weight-grad-without-rstd": _weight_grad_without_rstd,
    "bn-inference-formula-in-training": _inference_formula_in_training,
    "bn-bessel-divisor": _bessel_divisor,
    "bn-lost-core-partial": _lost_core_partial,
    "bn-fp16-accumulation": _fp16_accumulation,
    "bn-bf16-accumulation": _bf16_accumulation,
    "bn-sequential": _sequential,
    "bn-sample-major": _sample_major,
    "bn-recompute-association": _recompute_association,
    "bn-aten-formula": _aten,
}


def _edge(t) -> dict:
    """Where a float32 intermediate of the kernel overflows (x - mean, a term, a sum) while the channel's inputs
    are finite: the exact result may be finite there; the device value is the float32 kernel's."""
    f32 = {k: v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v for k, v in t.items()}
    steps: list = []
    with np.errstate(all="ignore"):
        device = {k: np.asarray(v, np.float64) for k, v in _kernel(f32, steps=steps).items()}
    k = t[X].shape[0]
    over = np.logical_or.reduce([~np.isfinite(v).reshape(k, -1).all(axis=1) for v in steps])
    finite = np.logical_and.reduce([np.isfinite(t[n]).reshape(k, -1).all(axis=1) for n in (DY, X, W, RM, RV, SM, SI)
                                    if isinstance(t.get(n), np.ndarray)])
    where = (finite & over).reshape(-1, 1, 1)
    return {name: (np.broadcast_to(where, v.shape), v) for name, v in device.items()}

