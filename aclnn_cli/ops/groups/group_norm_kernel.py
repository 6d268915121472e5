"""aclnnGroupNormBackward's 950 kernel and its variants (the declaration: group_norm_backward.py).

The 950 (hicann/ops-nn norm/group_norm_grad/op_kernel/arch35/group_norm_grad_base.h, _g_full_load.h), float32
after an exact widening of fp16/bf16, per sample n and group g of D channels of HxW elements (M = D * HxW):
  ds[c] = sum_hw fl(x * dy), db[c] = sum_hw dy               (binary-fold trees per channel)
  sum1 = sum_c fl(ds[c] * gamma[c]), sum2 = sum_c fl(db[c] * gamma[c])
  C2 = fl(fl(fl(fl(fl(sum2 * mean) - sum1) * rstd) * rstd) * rstd) * s),  s = fl(1 / M)
  C3 = fl(fl(-C2 * mean) - fl(fl(sum2 * rstd) * s))
  dx = fl(fl(fl(x * C2) + fl(dy * fl(gamma * rstd))) + C3)
  dgamma[c] = sum over n (float32, atomic adds) of fl(fl(ds[c] - fl(db[c] * mean)) * rstd); dbeta[c] = sum_n db[c]
gradGamma and gradBeta are rounded once to mean's dtype, gradInput to the input's.
"""

from __future__ import annotations

import numpy as np

from ..base import defect, legitimate
from ..treesum import running_sum, tree_sum

DY, X, MEAN, RSTD, G = "gradOut", "input", "mean", "rstd", "gamma"
GI, GG, GB = "gradInput", "gradGammaOut", "gradBetaOut"
N_, C_, HXW, GROUP, MASK = "N", "C", "HxW", "group", "outputMask"


def split(t):
    """(dy, x, mean, rstd, gamma) of blocks (k, N * D * HxW, 1) as (k, N, D, HxW) and (k, N, 1, 1), gamma
    (k, 1, D, 1) (ones for a null gamma), in the block's float type."""
    x = t[X]
    k, n = x.shape[0], t[MEAN].shape[1]
    d = t[G].shape[1] if t.get(G) is not None else int(t[C_]) // int(t[GROUP])
    hxw = x.shape[1] // max(n * d, 1) if n * d else int(t[HXW])
    shape = (k, n, d, hxw)
    gamma = t.get(G)
    gamma = np.ones((k, 1, d, 1), dtype=x.dtype) if gamma is None else gamma.reshape(k, 1, d, 1)
    return (t[DY].reshape(shape), x.reshape(shape), t[MEAN].reshape(k, n, 1, 1), t[RSTD].reshape(k, n, 1, 1), gamma)


def compute(t, hw_sum=tree_sum, c_sum=tree_sum, n_sum=running_sum, dx_form="950", rstd_power=3) -> dict:
    """The 950 kernel with replaceable pieces for the variants: the sums over HxW, over a group's channels and
    over the samples, the arrangement of dx, the power of rstd in C2."""
    dy, x, mean, rstd, gamma = split(t)
    k, n, d, hxw = x.shape
    one = x.dtype.type(1)
    with np.errstate(all="ignore"):
        ds, db = hw_sum(x * dy, axis=3), hw_sum(dy, axis=3)                      # (k, n, d, 1)
        sum1, sum2 = c_sum(ds * gamma, axis=2), c_sum(db * gamma, axis=2)        # (k, n, 1, 1)
        s = one / x.dtype.type(max(d * hxw, 1))
        c2 = ((sum2 * mean) - sum1) * rstd
        for _ in range(rstd_power - 1):
            c2 = c2 * rstd
        c2 = c2 * s
        c3 = (-c2 * mean) - ((sum2 * rstd) * s)
        if dx_form == "950":
            dx = ((x * c2) + (dy * (gamma * rstd))) + c3
        else:  # the centred form: rstd * (a - sum2 / M - h * sum(h a) / M), h = (x - mean) * rstd
            h = (x - mean) * rstd
            dx = rstd * (dy * gamma - sum2 * s - h * ((sum1 - sum2 * mean) * rstd * s))
        dgamma = n_sum(((ds - db * mean) * rstd), axis=1)                         # (k, 1, d, 1)
        dbeta = n_sum(db, axis=1)
    return {GI: dx.reshape(k, -1, 1), GG: dgamma.reshape(k, d, 1), GB: dbeta.reshape(k, d, 1)}


def kernel(t) -> dict:
    return compute(t)


def _pairwise(v, axis):
    return np.sum(v, axis=axis, keepdims=True)


@legitimate
def _centred(t):
    """Legitimate: dx in the centred form rstd (a - mean(a) - h mean(h a)), h = (x - mean) rstd."""
    return compute(t, dx_form="centred")


@legitimate
def _numpy_sums(t):
    """Legitimate: every sum in numpy's pairwise order (over HxW, the channels and the samples)."""
    return compute(t, hw_sum=_pairwise, c_sum=_pairwise, n_sum=_pairwise)


@legitimate
def _reversed_samples(t):
    """Legitimate: the samples' partials of dgamma and dbeta added last to first."""
    return compute(t, n_sum=lambda v, axis: running_sum(np.flip(v, axis=axis), axis))


@defect
def _first_sample_only(t):
    """Defect: dgamma and dbeta from the first sample only (the other samples' partials lost)."""
    return compute(t, n_sum=lambda v, axis: np.take(v, [0], axis=axis))


@defect
def _channel_sums_over_group(t):
    """Defect: dgamma and dbeta summed over the whole group (every channel of it given the group's sum)."""
    out = compute(t)
    d = out[GG].shape[1]
    for name in (GG, GB):
        out[name] = np.repeat(np.sum(out[name], axis=1, keepdims=True), d, axis=1)
    return out


@defect
def _rstd_squared(t):
    """Defect: C2 with rstd^2 instead of rstd^3."""
    return compute(t, rstd_power=2)


@defect
def _gamma_of_first_channel(t):
    """Defect: every channel of a group scaled by the group's first gamma."""
    gamma = t.get(G)
    if gamma is None:
        return compute(t)
    return {**compute(t), GI: compute({**t, G: np.repeat(gamma[:, :1], gamma.shape[1], axis=1)})[GI]}


VARIANTS = {"gn-centred": _centred, "gn-numpy-sums": _numpy_sums, "gn-reversed-samples": _reversed_samples,
            "gn-first-sample-only": _first_sample_only, "gn-channel-sums-over-group": _channel_sums_over_group,
            "gn-rstd-squared": _rstd_squared, "gn-gamma-of-first-channel": _gamma_of_first_channel}
