"""aclnnInstanceNormGrad: the graph op InstanceNormGrad (hicann/ops-nn norm/instance_norm_grad), channel-last, from
the forward's per-instance mean and variance.

ops-nn has no op_api for it: CANN generates a single-op aclnn API from the OpDef (op_host/instance_norm_grad_def.cpp),
aclnnInstanceNormGrad(dy, x, variance, mean, gamma, pd_x, pd_gamma, pd_beta) in OpDef order, no attributes, header
aclnnop/aclnn_instance_norm_grad.h (the generated one: there is no public header in ops-nn to compare).

x and dy are (N, D, H, W, C) (any rank >= 2: N first, C last, the axes between spatial), variance and mean one value
per instance (n, c) ([N, 1, 1, 1, C]), gamma (C,). Per instance over its M = D * H * W positions, with
rstd = (variance + eps)^(-1/2), eps the kernel's float constant 1e-6f (no attribute), x̂ = (x - mean) rstd and
a = dy * gamma (the README's pd_var / pd_mean algebra, rearranged):
  pd_x = rstd (a - sum(a) / M - x̂ sum(x̂ a) / M);  pd_gamma[c] = sum over n and the positions of dy x̂;
  pd_beta[c] = the same sum of dy.
The Groups family with `channels_last` cuts it: a block is one channel c over every sample, (n, hw) order, the
instance statistics (k, N, 1), gamma and the channel sums (k, 1, 1). The golden takes rstd exactly (rational where
variance + eps is a rational square, else to 60 digits, as aclnnLayerNormGrad's). The kernel: instance_norm_kernel.py.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..base import Contract, OpSpec, Reference, TensorSpec, products
from ..families import Groups
from ..normgrad import U, as_fractions, dx_exact, dx_exact_at, dx_reference, normalized
from ..registry import register
from ..rows.layer_norm_grad import exact_rstd
from .group_norm_backward import _channel_sum
from .instance_norm_kernel import DY, EPS, G, MEAN, PDB, PDG, PDX, VAR, VARIANTS, X, kernel, split

# float64 rstd = 1 / sqrt(variance + eps): a sum, a square root, a quotient, within 3u (aclnnLayerNormGrad's RSTD_REL).
# pd_x is cubic in rstd (x̂ and sum(x̂ a) each carry one): (1 + 3u)^3 - 1 < 10u of its scale. A term dy x̂ of
# pd_gamma: x̂ within 2.01u with an exact rstd (normgrad.dx_reference), 3u more from rstd's, the product one: 6.1u.
DX_RSTD_UNITS, TERM_UNITS = 10, 6.1
# float32 roundings of a kernel's term dy * fl(fl(x - mean) * rstd); its rstd's own three (Adds, Sqrt, Div) are
# shared by a sample's every term: they enter the allowance as the sample's partial sum, three roundings of it.
TERM_ROUNDINGS, RSTD_ROUNDINGS = 3, 3


def _rstd64(var):
    with np.errstate(all="ignore"):
        return 1.0 / np.sqrt(var + EPS)


def _reference(t) -> dict:
    """float64 on whole channels: pd_x per instance as ops/normgrad.py derives it (scale |rstd| T), its bound widened
    by rstd's float64 error; pd_gamma and pd_beta channel sums with the allowance of a float32 kernel's sum in either
    order, (n, hw) or (hw, n) (group_norm_backward._channel_sum), pd_gamma's with each sample's share of rstd's
    rounding."""
    dy, x, var, mean, gamma = split(t)
    k, n, m = x.shape
    rstd = _rstd64(var)
    h = normalized(x, mean, rstd)
    value, bound, mag = dx_reference((dy * gamma).reshape(k * n, m, 1), h.reshape(k * n, m, 1),
                                     rstd.reshape(k * n, 1, 1))
    terms = (dy * h).reshape(k, n, 1, m)
    with np.errstate(all="ignore"):
        partials = terms.sum(axis=3, keepdims=True)
    grad = _channel_sum(terms, TERM_UNITS, TERM_ROUNDINGS)
    shared = _channel_sum(partials, 0, RSTD_ROUNDINGS).allowance
    return {PDX: Reference(value.reshape(k, -1, 1), (bound + DX_RSTD_UNITS * U * mag).reshape(k, -1, 1),
                           mag.reshape(k, -1, 1)),
            PDG: Reference(grad.value, grad.bound, grad.scale, grad.allowance + shared),
            PDB: _channel_sum(dy.reshape(k, n, 1, m), 0, 0)}


def _exact(t) -> dict:
    """The formulas on Fraction object arrays (any k channels), rstd exact or to 60 digits."""
    dy, x, var, mean, gamma = split(t)
    k, n, m = x.shape
    rstd = exact_rstd(var, EPS)
    h = (x - mean) * rstd
    rows = (k * n, m, 1)
    dx = dx_exact((dy * gamma).reshape(rows), h.reshape(rows), rstd.reshape(k * n, 1, 1))
    return {PDX: dx.reshape(k, -1, 1), PDG: (dy * h).sum(axis=(1, 2)).reshape(k, 1, 1),
            PDB: dy.sum(axis=(1, 2)).reshape(k, 1, 1)}


def _exact_at(t, wanted) -> dict:
    """`_exact`'s pd_x at a few positions of a block of channels, from each instance's exact sums and its exact rstd
    (ops/normgrad.py, ExactRows: the same rationals, the sums taken in integers): a few uncertain elements of an
    instance of 16,384 positions cost a few Fractions, not three per position. pd_gamma and pd_beta, an rstd that is
    not finite and inputs too wide for an exact split take `_exact` whole."""
    dy, x, var, mean, gamma = (np.asarray(v, np.float64) for v in split(t))
    k, n, m = x.shape
    exact = None
    if set(wanted) == {PDX} and m and all(np.isfinite(v).all() for v in (dy, x, var, mean, gamma)):
        rstd = exact_rstd(var.reshape(-1), EPS)
        if all(isinstance(r, Fraction) for r in rstd.tolist()) and all(
                (v.astype(np.float32) == v).all() for v in (dy, gamma)):  # (a = dy gamma exact in float64)
            rows = k * n
            exact = dx_exact_at((dy * gamma).reshape(rows, m), x.reshape(rows, m), mean.reshape(rows, 1),
                                rstd.reshape(rows, 1))
    if exact is None:
        whole = _exact({**t, **{name: as_fractions(t[name]) for name in (DY, X, VAR, MEAN, G)}})
        return {name: np.asarray(whole[name]).reshape(-1)[np.asarray(where, np.int64)] for name, where in wanted.items()}
    where = np.asarray(wanted[PDX], np.int64).reshape(-1)
    row, col = np.divmod(where, m)
    return {PDX: np.array(exact.at(row, col) + [None], dtype=object)[:-1]}


# ------------------------------------------------------------------ the contract


def _shape_rule(d, attrs) -> str | None:
    """The tiling's checks (op_host/arch35/instance_norm_grad_tiling_arch35.cpp; 561002 on the device, 161002 here,
    as aclnnLayerNormGrad's), which an empty x skips (the empty tiling checks nothing); then the proto's pd_gamma and
    pd_beta, gamma's shape (the tiling does not check them: the kernel writes C values)."""
    xs = d[X].shape
    if math.prod(xs) and len(d[DY].shape) < 2:
        return f"dy has {len(d[DY].shape)} dims; it takes [N, ..., C], 2 or more"
    if math.prod(xs):
        n, c = d[DY].shape[0], d[DY].shape[-1]
        for name in (X, PDX):
            if d[name].shape != d[DY].shape:
                return f"{name} shape {list(d[name].shape)} is not dy's {list(d[DY].shape)}"
        if math.prod(d[G].shape) != c:
            return f"gamma has {math.prod(d[G].shape)} elements, not C = {c} (dy's last axis)"
        for name in (VAR, MEAN):
            if math.prod(d[name].shape) != n * c:
                return f"{name} has {math.prod(d[name].shape)} elements, not N * C = {n * c}"
    for name in (PDG, PDB):
        if d[name].shape != d[G].shape:
            return f"{name} shape {list(d[name].shape)} is not gamma's {list(d[G].shape)}"
    return None


def _shapes(shape: tuple[int, ...], attrs) -> dict:
    """A case gives x's shape (N, ..., C): variance and mean [N, 1, ..., 1, C] (the proto's), gamma (C,)."""
    stats = tuple(shape[:1]) + (1,) * max(len(shape) - 2, 0) + tuple(shape[-1:]) if len(shape) > 1 else tuple(shape)
    return {VAR: stats, MEAN: stats, G: tuple(shape[-1:])}


SPEC = register(OpSpec(
    name="aclnnInstanceNormGrad",
    key="instance_norm_grad",
    header="aclnnop/aclnn_instance_norm_grad.h",
    summary="The graph op InstanceNormGrad through its generated aclnn API: gradients of instance norm over the "
            "spatial axes of a channel-last (N, ..., C) x from the forward's per-instance mean and variance (rstd = "
            "(variance + 1e-6)^(-1/2)): pd_x per instance, pd_gamma and pd_beta per channel over every sample.",
    formula="rstd = (variance + 1e-6)^(-1/2), x̂ = (x - mean) * rstd, a = dy * gamma per instance (n, c); pd_x = rstd "
            "* (a - mean_M(a) - x̂ * mean_M(x̂ * a)); pd_gamma = sum over n and M of dy * x̂; pd_beta = sum of dy",
    tensors=(
        TensorSpec(DY, "input", {"normal": [0, 1]}),
        TensorSpec(X, "input", {"normal": [0, 1]}),
        TensorSpec(VAR, "input", {"uniform": [0.25, 4.0]}),
        TensorSpec(MEAN, "input", {"uniform": [-0.25, 0.25]}),
        TensorSpec(G, "input", {"uniform": [-2.0, 2.0]}),
        TensorSpec(PDX, "output", {"constant": 0}),
        TensorSpec(PDG, "output", {"constant": 0}),
        TensorSpec(PDB, "output", {"constant": 0}),
    ),
    products=products("950", dtypes=("float32", "float16")),
    dims=(1, 8),
    empty_ok=True,
    family=Groups(driver=X, per_group=(VAR, MEAN), per_channel=(G, PDG, PDB), channels_last=True, shapes=_shapes,
                  kernel_chunk=1 << 20),
    reference=_reference,
    exact=_exact,
    exact_at=_exact_at,
    kernel=kernel,
    variants=VARIANTS,
    contract=Contract(dtypes="same", shape_rule=_shape_rule),
    special_values="The proto defines none; the kernel's IEEE arithmetic: a NaN or infinity in an instance reaches "
                   "its sums (an infinite sum stays infinite: the Kahan compensation's NaN is reset), so that "
                   "instance's pd_x and its channel's pd_gamma, pd_beta. variance + eps = 0 gives rstd = +inf, a "
                   "negative one NaN. An empty x gives an empty pd_x and zeros in pd_gamma, pd_beta (README).",
))

CONTRACT_NOTES = """\
aclnnInstanceNormGrad phase one: no op_api; the aclnn is generated from the OpDef (op_host/instance_norm_grad_def.cpp),
the shape checks are the tiling's (op_host/arch35/instance_norm_grad_tiling_arch35.cpp).
- Nulls -> 161001; the OpDef's combinations are the eight tensors all float32 or all float16 (ND or NDHWC): any other
  -> 161002 (the tiling's InputCheck says the same: dy = x = pd_x, variance, mean, gamma, pd_gamma, pd_beta dy's).
  Only ascend950 is configured (the README's table lists older products, which run the TBE kernel, not this one).
- Tiling (561002 on the device; 161002 here), unless x is empty (the empty tiling checks nothing and zeroes pd_gamma,
  pd_beta): dy of 2 dims or more, N, C, M = prod(dims between) > 0, x and pd_x dy's shape, numel(gamma) = C,
  numel(variance) = numel(mean) = N * C. pd_gamma and pd_beta are not checked (the kernel writes C values): the
  Contract follows the proto, gamma's shape.
- eps is not an input: 1e-6f in the kernel (INSTANCE_NORM_GRAD_EPS).
"""
