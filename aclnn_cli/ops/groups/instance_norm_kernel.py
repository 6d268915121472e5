"""aclnnInstanceNormGrad's 950 kernel and its variants (the declaration: instance_norm_grad.py).

hicann/ops-nn norm/instance_norm_grad/op_kernel/arch35 (instance_norm_grad_common.h, _base.h, _full_load.h,
_recompute.h), float32 after an exact widening of fp16, per instance (n, c) over its M = D * H * W positions:
  rstd = fl(1 / fl(sqrt(fl(variance + 1e-6f))))                     (ComputeRstd: Adds, Sqrt, Div)
  rstd3 = fl(fl(rstd * rstd) * rstd)
  pass 1, the M positions in order, each sum Kahan-compensated (y = t - c; s' = s + y; c = (s' - s) - y, a NaN c
  reset to 0 so an infinite sum stays infinite):
    xc = fl(x - mean), a = fl(dy * gamma)
    dbeta += dy,  dgamma += fl(dy * fl(xc * rstd)),  pdMean += -fl(a * rstd),  pdVar += -0.5 fl(fl(a * xc) * rstd3)
  pd_gamma, pd_beta: the N per-sample partials (float32 in the workspace) Kahan-added in sample order (stage 2);
  one sample: its partial itself.
  pass 2: s = fl(1 / M), cVar = fl(pdVar * fl(2 s)), cMean = fl(pdMean * s),
    pd_x = fl(fl(fl(a * rstd) + fl(cVar * xc)) + cMean)              (MulAddDst unfused, as RmsNormGrad's and
                                                                      SoftmaxBackward's: fused is a legitimate variant)
Each output is rounded once (CAST_RINT) to the inputs' dtype.
"""

from __future__ import annotations

import numpy as np

from ..base import defect, legitimate
from ..treesum import kahan_sum, narrow_running_sum, running_sum, tree_sum

DY, X, VAR, MEAN, G = "dy", "x", "variance", "mean", "gamma"
PDX, PDG, PDB = "pd_x", "pd_gamma", "pd_beta"
EPS = float(np.float32(1e-6))  # INSTANCE_NORM_GRAD_EPS, a float constant of the kernel (no attribute)


def split(t):
    """(dy, x, variance, mean, gamma) of a block of channels: dy and x (k, N, HxW) in (n, hw) order, variance and
    mean (k, N, 1), gamma (k, 1, 1); in the block's float type."""
    x = t[X]
    k, n = x.shape[0], t[MEAN].shape[1]
    shape = (k, n, x.shape[1] // n if n else 0)
    return (t[DY].reshape(shape), x.reshape(shape), t[VAR].reshape(k, n, 1), t[MEAN].reshape(k, n, 1),
            t[G].reshape(k, 1, 1))


def kahan(terms: np.ndarray, axis: int) -> np.ndarray:
    """Pass 1's and stage 2's sum along `axis` in index order, Kahan-compensated with the kernel's NaN guard;
    keepdims, in the terms' dtype."""
    return kahan_sum(terms, axis, reset_nan=True)


def rstd_of(var, eps: float = EPS):
    """ComputeRstd: fl(1 / fl(sqrt(fl(var + eps)))), in var's float type."""
    one = var.dtype.type(1)
    with np.errstate(all="ignore"):
        return one / np.sqrt(var + var.dtype.type(eps))


def compute(t, m_sum=kahan, n_sum=kahan, rstd=rstd_of, fused=False, two=2.0, var_term=True, dx_form="950",
            stats_over_samples=False, rstd_power=3) -> dict:
    """The 950 kernel with replaceable pieces for the variants: the sums over the positions (m_sum) and over the
    samples (n_sum), rstd from the variance, MulAddDst fused or not, the 2 of pdVar's 2 / M, pdVar's term kept or
    not, the arrangement of pd_x, the instance sums taken per sample or over every sample of the channel, the
    power of rstd in pdVar."""
    dy, x, var, mean, gamma = split(t)
    ft = x.dtype.type
    k, n, m = x.shape
    with np.errstate(all="ignore"):
        r = rstd(var)
        r3 = r
        for _ in range(rstd_power - 1):
            r3 = r3 * r
        xc = x - mean
        a = dy * gamma
        per_n = (lambda v: np.broadcast_to(m_sum(v.reshape(k, 1, -1), 2), (k, n, 1))) if stats_over_samples else \
            (lambda v: m_sum(v, 2))
        terms = [dy, dy * (xc * r), -(a * r), ft(-0.5) * ((a * xc) * r3)]
        if stats_over_samples:
            db, dg = m_sum(np.stack(terms[:2]), 3)
            p_mean, p_var = np.broadcast_to(m_sum(np.stack(terms[2:]).reshape(2, k, 1, -1), 3), (2, k, n, 1))
        else:  # (the four instance sums are independent: one pass of the sum over them all)
            db, dg, p_mean, p_var = m_sum(np.stack(terms), 3)
        s = ft(1) / ft(max(m, 1))
        c_var, c_mean = p_var * (ft(two) * s), p_mean * s
        if dx_form == "centred":  # rstd (a - sum(a) / M - h sum(h a) / M), h = xc rstd
            h = xc * r
            dx = r * ((a - per_n(a) * s) - h * (per_n(h * a) * s))
        else:
            ar = a * r
            prod = c_var * xc if var_term else ft(0) * xc
            dx = (ar.astype(np.float64) + c_var.astype(np.float64) * xc).astype(ft) if fused else ar + prod
            dx = dx + c_mean
        pd_gamma, pd_beta = n_sum(dg, 1), n_sum(db, 1)
    return {PDX: dx.reshape(k, -1, 1), PDG: pd_gamma.reshape(k, 1, 1), PDB: pd_beta.reshape(k, 1, 1)}


def kernel(t) -> dict:
    return compute(t)


# ------------------------------------------------------------------ variants


@legitimate
def _fused(t):
    """Legitimate: MulAddDst as a fused multiply-add (a * rstd + cVar * xc rounded once: the exact float32 product
    added in float64, then rounded to float32, a double rounding at worst)."""
    return compute(t, fused=True)


@legitimate
def _tree_sums(t):
    """Legitimate: plain float32 sums, no Kahan: the 950's binary-fold tree over the positions, a running sum over
    the samples (another kernel's orders)."""
    return compute(t, m_sum=tree_sum, n_sum=running_sum)


@legitimate
def _centred(t):
    """Legitimate: pd_x in the centred form rstd (a - mean(a) - x̂ mean(x̂ a)) (PyTorch's algebra)."""
    return compute(t, dx_form="centred")


@legitimate
def _rounded_rsqrt(t):
    """Legitimate: rstd the correctly rounded float32 of 1 / sqrt(fl(variance + eps)) (an rsqrt of its own)."""
    def rsqrt(var):
        with np.errstate(all="ignore"):
            v = (var + var.dtype.type(EPS)).astype(np.float64)
            return (1.0 / np.sqrt(v)).astype(var.dtype)
    return compute(t, rstd=rsqrt)


@defect
def _no_var_term(t):
    """Defect: pd_x without pdVar's term (the x̂ mean(x̂ a) part of the gradient dropped)."""
    return compute(t, var_term=False)


@defect
def _unbiased(t):
    """Defect: pdVar scaled by 2 / (M - 1) where the variance is the biased one (a Bessel-corrected mix)."""
    return compute(t, two=_bessel_two(t))


def _bessel_two(t) -> float:
    """2 M / (M - 1): pdVar's factor 2 / M turned into 2 / (M - 1) (one position: 4, a defect all the same)."""
    n = t[MEAN].shape[1]
    m = t[X].shape[1] // max(n, 1)
    return 2.0 * m / (m - 1) if m > 1 else 4.0


@defect
def _stats_over_samples(t):
    """Defect: pdMean and pdVar summed over every sample of the channel (a batch norm's axes, not the instance's)."""
    return compute(t, stats_over_samples=True)


@defect
def _gamma_last_sample_only(t):
    """Defect: pd_gamma and pd_beta from the last sample only (stage 2's cross-sample reduction skipped: each task
    overwrote the output)."""
    def last(v, axis):
        return np.take(v, [-1], axis=axis) if v.shape[axis] else running_sum(v, axis)
    return compute(t, n_sum=last)


@defect
def _fp16_accumulation(t):
    """Defect: every sum accumulated in float16 (fp16 inputs summed in their own dtype)."""
    run = narrow_running_sum(np.float16)
    return compute(t, m_sum=run, n_sum=run)


@defect
def _no_epsilon(t):
    """Defect: eps left out (rstd = 1 / sqrt(variance)): off wherever the variance is near 1e-6 or zero."""
    return compute(t, rstd=lambda var: rstd_of(var, 0.0))


@defect
def _variance_as_rstd(t):
    """Defect: the variance input read as rstd (the saved statistic mistaken for the forward's rstd)."""
    return compute(t, rstd=lambda var: var)


@defect
def _rstd_squared(t):
    """Defect: pdVar with rstd^2 where (variance + eps)^(-3/2) is rstd^3."""
    return compute(t, rstd_power=2)


@defect
def _variance_mean_swapped(t):
    """Defect: variance and mean read in each other's place (the graph op takes (dy, x, variance, mean, gamma))."""
    return compute({**t, VAR: t[MEAN], MEAN: t[VAR]})


VARIANTS = {"in-fused-muladd": _fused, "in-tree-sums": _tree_sums, "in-centred": _centred,
            "in-rounded-rsqrt": _rounded_rsqrt,
            "in-no-var-term": _no_var_term, "in-unbiased-var-factor": _unbiased,
            "in-stats-over-samples": _stats_over_samples, "in-gamma-last-sample-only": _gamma_last_sample_only,
            "in-fp16-accumulation": _fp16_accumulation, "in-no-epsilon": _no_epsilon,
            "in-variance-as-rstd": _variance_as_rstd, "in-rstd-squared": _rstd_squared,
            "in-variance-mean-swapped": _variance_mean_swapped}
