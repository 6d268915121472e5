"""aclnnGroupNormBackward: the gradients of group norm (docs: norm/group_norm_grad/docs/aclnnGroupNormBackward.md).

The input holds N * C * HxW elements in (n, c, hw) order; C is split into `group` groups of D = C / group
channels; mean and rstd hold one value per (n, g). Per (n, g), over its M = D * HxW elements, with a = dy * gamma[c]
and h = (x - mean) * rstd:
  gradInput = rstd * (a - sum(a) / M - h * sum(h a) / M)
  gradGammaOut[c] = sum over n and hw of dy * h,   gradBetaOut[c] = sum over n and hw of dy.
A null gamma is ones. The 950's kernel (group_norm_kernel.py) computes dx as gamma rstd dy + C2 x + C3, whose
terms cancel where |mean| dwarfs the group's spread: its error is judged against those terms (`_reference`).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..accumulation import ACCUMULATION_UNIT, sum_allowance
from ..base import AttrSpec, Contract, FLOATS, OpSpec, Reference, TensorSpec, products
from ..families import Groups
from .group_norm_kernel import C_, DY, G, GB, GG, GI, GROUP, HXW, MASK, MEAN, N_, RSTD, VARIANTS, X, kernel, split
from ..normgrad import SLACK, TINY, U, dx_exact, dx_reference, normalized
from ..registry import register
from ..treesum import exact_sum_factor, row_sum64

U32 = ACCUMULATION_UNIT
# The float32 roundings between C2's and C3's terms and their values on the 950 (group_norm_kernel.py): C2 six
# (sum2 * mean, - sum1, three * rstd, * s), C3 four beside C2's own (-C2 * mean, sum2 * rstd, * s, the
# difference); 8 bounds either, with the second-order terms.
ROUNDINGS = 8


def _orders(terms):
    """A channel's terms (k, n, d, hw) as (k * d, n * hw) in the two orders its sum may run in: (n, hw) and (hw, n)."""
    k, n, d, hw = terms.shape
    by_n = np.moveaxis(terms, 2, 1).reshape(k * d, n * hw)
    by_hw = np.moveaxis(terms, (2, 3), (1, 2)).reshape(k * d, hw * n)
    return [by_n, by_hw]


def _channel_sum(terms, units: float, roundings: int, extra=()) -> Reference:
    """A per-channel sum over n and hw of float64 terms (k, n, d, hw), each within `units` u of the exact term:
    value, bound, scale (k, d, 1) and the allowance of a float32 kernel's sum, derived from these terms and from
    `extra` (the terms of other arrangements the kernel may add: the 950's dy x and dy mean)."""
    k, n, d, hw = terms.shape
    orders = _orders(terms)
    flat = orders[0]
    mag = row_sum64(np.abs(flat).reshape(k * d, -1, 1)).reshape(k, d, 1) * SLACK
    value = row_sum64(flat.reshape(k * d, -1, 1)).reshape(k, d, 1)
    m = n * hw
    bound = (exact_sum_factor(m) + units) * U * mag + (m + 4) * TINY
    allowance = sum_allowance(orders, roundings)
    for more in extra:
        allowance = allowance + sum_allowance(_orders(more), roundings)
    return Reference(value, bound, mag, allowance.reshape(k, d, 1))


def _reference(t) -> dict:
    """float64 on whole groups. gradInput per (n, g) row as ops/normgrad.py derives it (a = dy gamma exact, h within
    2.01u; scale |rstd| T). The 950 computes it as gamma rstd dy + C2 x + C3 (as ATen's CPU kernel does), whose
    C2 x and C3 cancel where |mean| dwarfs the group's spread; what every element of a row shares there (the
    rounding of C2 and C3 and of the float32 sums they come from) is `shared`: the error balance leaves it out.
    Measured: the 950's arrangement passes with |mean| up to 10^4 times the spread in float32 (decision 81). gradGammaOut: terms dy h (3.02u),
    gradBetaOut: dy exact; their allowances derived from the terms of every arrangement a kernel may use."""
    dy, x, mean, rstd, gamma = split(t)
    h = normalized(x, mean, rstd)
    return {GI: _grad_input(dy, x, mean, rstd, gamma, h),
            GG: _channel_sum(dy * h, 3.02, 3, extra=(dy * x * rstd, dy * mean * rstd)),
            GB: _channel_sum(dy, 0, 0)}


def _grad_input(dy, x, mean, rstd, gamma, h) -> Reference:
    """`_reference`'s gradInput of (k, n, d, hw) groups, (k, n * d * hw, 1): each (sample, group) row from its own
    values, mean, rstd and its group's gamma alone (h: normalized(x, mean, rstd), which the channel sums read too)."""
    k, n, d, hw = x.shape
    a = dy * gamma
    rows = (k * n, d * hw, 1)
    value, bound, mag = dx_reference(a.reshape(rows), h.reshape(rows), rstd.reshape(k * n, 1, 1))
    with np.errstate(all="ignore"):
        m = max(d * hw, 1)
        big_a = row_sum64(np.abs(a).reshape(rows)).reshape(k, n, 1, 1)
        big_ax = row_sum64(np.abs(a * x).reshape(rows)).reshape(k, n, 1, 1)
        r3s = np.abs(rstd) ** 3 / m
        c2_terms = r3s * (big_a * np.abs(mean) + big_ax)            # |C2|'s terms
        c3_terms = c2_terms * np.abs(mean) + np.abs(rstd) * big_a / m
        sum2 = sum_allowance([a.reshape(k * n, -1)], 0).reshape(k, n, 1, 1)  # (sum1's and sum2's accumulation)
        sums = sum_allowance([(a * x).reshape(k * n, -1)], 1).reshape(k, n, 1, 1) + np.abs(mean) * sum2
        shared = (np.abs(x) + np.abs(mean)) * (r3s * sums + ROUNDINGS * U32 * c2_terms) + np.abs(rstd) / m * sum2 \
            + ROUNDINGS * U32 * c3_terms
    return Reference(value.reshape(k, -1, 1), bound.reshape(k, -1, 1), mag.reshape(k, -1, 1),
                     shared=np.broadcast_to(shared, x.shape).reshape(k, -1, 1))


def _reference_at(t, wanted) -> dict:
    """`_reference`'s gradInput at a few positions of whole groups: the (sample, group) rows that hold them taken as
    `_grad_input` takes every row (its sums are the row's own, pairwise along it: the same float64 steps, so the same
    values), and not the channel sums, whose allowances (six scans of every term) verify's relief of gradInput never
    reads. Other outputs: `_reference` whole, there."""
    if set(wanted) != {GI}:
        whole = _reference(t)
        return {name: _taken(whole[name], np.asarray(where, np.int64).reshape(-1)) for name, where in wanted.items()}
    dy, x, mean, rstd, gamma = split(t)
    k, n, d, hw = x.shape
    where = np.asarray(wanted[GI], np.int64).reshape(-1)
    row = where // (d * hw)  # (block * n + sample)
    rows, at = np.unique(row, return_inverse=True)
    block = rows // max(n, 1)
    pick = lambda v: v.reshape(k * n, *v.shape[2:])[rows][None]  # noqa: E731  (the rows as one block of len(rows))
    x, mean, rstd = pick(x), pick(mean), pick(rstd)
    gi = _grad_input(pick(dy), x, mean, rstd, gamma[block].reshape(1, rows.size, d, 1), normalized(x, mean, rstd))
    flat = at * (d * hw) + where % (d * hw)
    return {GI: _taken(gi, flat)}


def _taken(r: Reference, flat: np.ndarray) -> Reference:
    """A Reference at flat positions of its value (its other fields broadcast to the value's shape first)."""
    field = lambda v: None if v is None else np.broadcast_to(v, r.value.shape).reshape(-1)[flat]  # noqa: E731
    return Reference(r.value.reshape(-1)[flat], field(r.bound), field(r.scale), field(r.allowance),
                     shared=field(r.shared))


def _exact(t) -> dict:
    """The doc's formulas on Fraction object arrays (any k groups)."""
    dy, x, mean, rstd, gamma = split(t)
    k, n, d, hw = x.shape
    h = (x - mean) * rstd
    a = dy * gamma
    rows = (k * n, d * hw, 1)
    dx = dx_exact(a.reshape(rows), h.reshape(rows), rstd.reshape(k * n, 1, 1)).reshape(k, -1, 1)
    return {GI: dx, GG: (dy * h).sum(axis=(1, 3)).reshape(k, d, 1), GB: dy.sum(axis=(1, 3)).reshape(k, d, 1)}


def _exact_at(t, wanted) -> dict:
    """`_exact`'s values at a few positions of whole groups (float64 inputs, widened exactly): the sums of the rows
    (n, g) and of the channels in Fractions from exact per-channel sums, Fractions only where wanted."""
    from ..dyadic import exact_row_sums

    dy, x, mean, rstd, gamma = split(t)
    k, n, d, hw = x.shape
    q = lambda v: Fraction(float(v))  # noqa: E731
    s_dy = np.array(exact_row_sums(dy.reshape(-1, hw)) + [None], dtype=object)[:-1].reshape(k, n, d)
    s_dyx = np.array(exact_row_sums((dy * x).reshape(-1, hw)) + [None], dtype=object)[:-1].reshape(k, n, d)
    gam = [[q(v) for v in gamma.reshape(k, d)[b]] for b in range(k)] if t.get(G) is not None else [[Fraction(1)] * d] * k
    out = {}
    for name, where in wanted.items():
        values = []
        for p in np.asarray(where, np.int64).reshape(-1).tolist():
            if name == GI:
                b, rest = divmod(p, n * d * hw)
                i, rest = divmod(rest, d * hw)
                c, j = divmod(rest, hw)
                mu, r = q(mean[b, i, 0, 0]), q(rstd[b, i, 0, 0])
                sa = sum(g * s for g, s in zip(gam[b], s_dy[b, i]))
                sax = sum(g * s for g, s in zip(gam[b], s_dyx[b, i]))
                sha = r * (sax - mu * sa)
                ai = q(dy[b, i, c, j]) * gam[b][c]
                hi = (q(x[b, i, c, j]) - mu) * r
                m = d * hw
                values.append((ai - sa / m - hi * sha / m) * r)
            else:
                b, c = divmod(p, d)
                if name == GB:
                    values.append(sum(s_dy[b, :, c]))
                else:
                    values.append(sum(q(rstd[b, i, 0, 0]) * (s_dyx[b, i, c] - q(mean[b, i, 0, 0]) * s_dy[b, i, c])
                                      for i in range(n)))
        out[name] = np.array(values + [None], dtype=object)[:-1]
    return out


# ------------------------------------------------------------------ the contract

def _attribute_rule(attrs) -> str | None:
    """CheckAttr: group > 0, C divisible by group, C / group <= 8000 and C <= 240000 (the 950's limits)."""
    c, g = int(attrs[C_]), int(attrs[GROUP])
    if g <= 0:
        return f"group {g} is not greater than 0"
    if c % g:
        return f"C {c} is not divisible by group {g}"
    if c // g > 8000 or c > 240000:
        return f"C {c} / group {g} is over 8000 or C over 240000"
    if len(attrs[MASK]) != 3:
        return f"outputMask has {len(attrs[MASK])} values; it takes 3"
    return None


def _shape_rule(d, attrs) -> str | None:
    """A true outputMask entry beside a null output, the dtypes (input = gradOut = gradInput; rstd, gamma,
    gradGammaOut, gradBetaOut mean's dtype, which is input's or float32), then CheckShape: numel of gradOut and
    input N * C * HxW, of mean and rstd N * group, of gamma C; gradInput input's shape."""
    for i, name in enumerate((GI, GG, GB)):
        if attrs[MASK][i] and d[name].null:
            return f"{name} is a null pointer while outputMask[{i}] is true"
    x, m = d[X].dtype.name, d[MEAN].dtype.name
    if d[DY].dtype.name != x or (not d[GI].null and d[GI].dtype.name != x):
        return f"gradOut and gradInput must have input's dtype {x}"
    if m not in (x, "float32"):
        return f"mean dtype {m} is neither input's {x} nor float32"
    for name in (RSTD, G, GG, GB):
        if not d[name].null and d[name].dtype.name != m:
            return f"{name} dtype {d[name].dtype.name} is not mean's {m}"
    n, c, hxw, g = (int(attrs[a]) for a in (N_, C_, HXW, GROUP))
    numel = lambda name: int(np.prod(d[name].shape))  # noqa: E731
    for name, want in ((DY, n * c * hxw), (X, n * c * hxw), (MEAN, n * g), (RSTD, n * g), (G, c)):
        if not d[name].null and numel(name) != want:
            return f"{name} has {numel(name)} elements, not {want}"
    if not d[GI].null and d[GI].shape != d[X].shape:
        return f"gradInput shape {list(d[GI].shape)} is not input's {list(d[X].shape)}"
    for name in (GG, GB):
        if not d[name].null and numel(name) != c:
            return f"{name} has {numel(name)} elements, not C = {c}"
    return None


def _masked(name: str) -> TensorSpec:
    return TensorSpec(name, "output", {"constant": 0}, optional=True, dtypes=None if name == GI else FLOATS)


SPEC = register(OpSpec(
    name="aclnnGroupNormBackward",
    key="group_norm_backward",
    header="aclnnop/aclnn_group_norm_backward.h",
    signature=(DY, X, MEAN, RSTD, G, N_, C_, HXW, GROUP, MASK, GI, GG, GB),
    summary="Gradients of group norm: gradInput per element from its (sample, group) row, gradGammaOut and "
            "gradBetaOut per channel summed over the samples and HxW.",
    formula="h = (input - mean) * rstd per (n, group); gradInput = rstd * (a - mean(a) - h * mean(h * a)), a = "
            "gradOut * gamma, means over the group's C / group * HxW elements; gradGammaOut = sum(gradOut * h); "
            "gradBetaOut = sum(gradOut) per channel",
    tensors=(
        TensorSpec(DY, "input", {"normal": [0, 1]}),
        TensorSpec(X, "input", {"normal": [0, 1]}),
        TensorSpec(MEAN, "input", {"uniform": [-0.25, 0.25]}, dtypes=FLOATS),
        TensorSpec(RSTD, "input", {"uniform": [0.5, 2.0]}, dtypes=FLOATS),
        TensorSpec(G, "input", {"uniform": [-2.0, 2.0]}, optional=True, dtypes=FLOATS),
        _masked(GI), _masked(GG), _masked(GB),
    ),
    attributes=(AttrSpec(N_, "int"), AttrSpec(C_, "int"), AttrSpec(HXW, "int"), AttrSpec(GROUP, "int"),
                AttrSpec(MASK, "bool_list", default=(True, True, True))),
    products=products("950", "A3", "A2", "910", overrides={"910": ("float32", "float16")}),
    dims=(0, 8),
    empty_ok=False,
    family=Groups(driver=X, per_group=(MEAN, RSTD), per_channel=(G, GG, GB)),
    reference=_reference,
    exact=_exact,
    exact_at=_exact_at,
    reference_at=_reference_at,
    kernel=kernel,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", attribute_rule=_attribute_rule, shape_rule=_shape_rule),
    special_values="The doc defines none; the kernel's IEEE arithmetic: a NaN or infinity in a (sample, group) row "
                   "reaches its sums, so the row's gradInput is NaN (or inf), and the channel sums it feeds.",
))
