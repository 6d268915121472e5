"""aclnnBatchNormElemtBackward: synchronised BatchNorm's backward, part two: per element of an (N, C, ...) input, with
channel c's (axis 1) mean, invstd, weight, sumDy and sumDyXmu and count = the sum of counter's elements,
  gradInput = ((gradOut - sumDy / count) - (input - mean) * (invstd^2 * (sumDyXmu / count))) * invstd * weight
(hicann/ops-nn norm/sync_batch_norm_backward_elemt/docs/aclnnBatchNormElemtBackward.md, e5c3fa93; counter holds each
device's element count, its sum the whole batch's, as the ATK executor sums it). A null weight is ones. The result is
rational in the inputs: the golden is the exact value (Fractions) rounded once. A count of 0 makes the means infinite
or NaN: the golden is then the formula's IEEE value in float64, and verify also accepts the device's.

The device (batch_norm_elemt_kernel.py) computes in float32, except that where every input but counter is float16
the op_api rounds the means, and the result, to float16 (P). The reference's scale is the magnitude of the terms that
cancel, |gradOut| + |meanDy| + |(input - mean) invstd^2 meanDyXmu|, times |invstd weight|; what a channel's elements
share (the rounding of meanDy, of invstd^2 meanDyXmu, of invstd weight and of the count: one per channel, or per case)
is `Reference.shared`, so the error balance does not count it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ...tensor.dtypes import lookup
from ..accumulation import ACCUMULATION_UNIT
from ..base import Contract, OpSpec, Reference, TensorSpec, products
from ..dyadic import exact_row_sums
from ..families import Channels
from ..normgrad import TINY, U, as_fractions
from ..registry import register
from .batch_norm_elemt_kernel import (CNT, DY, GI, INV, MEAN, PROMOTED, SDXM, SDY, VARIANTS, W, X, edge, half,
                                      kernel, weight)

U32 = ACCUMULATION_UNIT
HALF = 2.0**-11  # float16's rounding of the means where the op_api's P is float16
PER_CHANNEL = (MEAN, INV, W, SDY, SDXM)


def _count(t):
    """(the count, exact: a Fraction, or the IEEE float64 sum where counter holds an inf or NaN; sum |counter|)
    from block 0 (every block holds counter whole)."""
    wide = np.asarray(t[CNT])[0].reshape(-1).astype(np.float64)
    if not np.isfinite(wide).all():
        return float(wide.sum()), float(np.abs(wide).sum())
    return (exact_row_sums(wide.reshape(1, -1))[0] if wide.size else Fraction(0)), float(np.abs(wide).sum())


def _parts(t, cnt):
    """The doc's formula in t's arithmetic (float64 arrays, or Fraction object arrays): (meanDy, input - mean,
    invstd^2 meanDyXmu, invstd weight, gradInput)."""
    dy, x, mean, inv, sdy, sdxm = (t[n] for n in (DY, X, MEAN, INV, SDY, SDXM))
    b, c, d, e = sdy / cnt, x - mean, inv * inv * sdxm / cnt, inv * weight(t)
    return b, c, d, e, ((dy - b) - c * d) * e


PIECE = 1 << 20  # elements a function evaluates at once: a channel of 49 M elements (ops-nn's ATK case 78) in pieces


def _in_pieces(fn):
    """fn evaluated on pieces of the blocks' elements (axis 1 of the (k, M, 1) arrays; the per-channel ones and counter
    whole), the results joined: an element depends on its own values and its channel's only, so a huge channel need
    not hold every temporary at once."""
    def run(t) -> dict:
        dy = t[DY]
        k, m = dy.shape[0], dy.shape[1]
        step = max(1, PIECE // max(k, 1))
        if m <= step:
            return fn(t)
        parts = [fn({n: v[:, s:s + step] if isinstance(v, np.ndarray) and v.ndim == 3 and v.shape[1] == m and n != CNT
                     else v for n, v in t.items()}) for s in range(0, m, step)]
        return {name: _join([p[name] for p in parts]) for name in parts[0]}
    return run


def _join(parts):
    if isinstance(parts[0], Reference):
        fields = ("value", "bound", "scale", "allowance", "shared")
        return Reference(**{f: None if getattr(parts[0], f) is None else
                            np.concatenate([np.broadcast_to(getattr(p, f), p.value.shape) for p in parts], axis=1)
                            for f in fields})
    return np.concatenate([np.broadcast_to(p, p.shape) for p in parts], axis=1)


def _rounding(a, b, s):
    """The exact rounding error of the float64 sum s = fl(a + b) (TwoSum; finite values)."""
    bb = s - a
    return (a - (s - bb)) + (b - bb)


def _reference(t) -> dict:
    """float64, each step's error tracked (a running error bound): the count exact, rounded once (u; 0 where it is
    exact), meanDy = sumDy / count one rounding (none for a count that is a power of two), input - mean and the two
    differences their exact TwoSum errors, invstd^2 and invstd weight exact (two 24-bit factors), invstd^2 sumDyXmu /
    count two roundings, their product one, the last product one. So an element whose steps are exact (equal
    operands cancelling, a 0 factor) is certified without the exact path. The scale: |invstd weight| (|dy| + |meanDy| +
    |(x - mean) invstd^2 meanDyXmu|). A count of 0 (or an inf or NaN it meets) is exact: bound 0."""
    exact_cnt, mag_cnt = _count(t)
    cnt = float(exact_cnt)
    dy, x, mean, inv, sdy, sdxm = (t[n] for n in (DY, X, MEAN, INV, SDY, SDXM))
    with np.errstate(all="ignore"):
        r_cnt = U if isinstance(exact_cnt, Fraction) and Fraction(cnt) != exact_cnt else 0.0
        r_div = 0.0 if cnt and abs(cnt) == 2.0 ** np.frexp(abs(cnt))[1] / 2 and not r_cnt else U  # (2^k: exact)
        b = sdy / cnt
        e_b = (r_div + r_cnt * (1 + U)) * np.abs(b)
        c = x - mean
        e_c = np.abs(_rounding(x, -mean, c))
        d = inv * inv * sdxm / cnt
        e_d = (U + r_div + r_cnt) * (1 + 4 * U) * np.abs(d)
        p = c * d
        e_p = U * np.abs(p) + np.abs(c) * e_d + np.abs(d) * e_c + e_c * e_d
        t1 = dy - b
        e_t1 = np.abs(_rounding(dy, -b, t1)) + e_b
        t2 = t1 - p
        e_t2 = np.abs(_rounding(t1, -p, t2)) + e_t1 + e_p
        e = inv * weight(t)
        value = t2 * e
        bound = (U * np.abs(value) + np.abs(e) * e_t2) * (1 + 4 * U) + TINY
        scale = (np.abs(dy) + np.abs(b) + np.abs(p)) * np.abs(e)
        finite = np.isfinite(value) & np.isfinite(scale) & np.isfinite(bound)
        n = np.shape(t[CNT])[2]
        count_error = (n + 1) * U32 * mag_cnt / abs(cnt) if cnt else 0.0  # (counter's cast and float32 sums)
        p16 = HALF if half(t) else 0.0
        shared = np.abs(e) * ((2 * U32 + p16 + count_error) * np.abs(b) + (4 * U32 + p16 + count_error) * np.abs(p)) \
            + U32 * np.abs(value)
    return {GI: Reference(value, np.where(finite, bound, 0.0), np.where(finite, scale, 0.0),
                          shared=np.where(finite, shared, 0.0))}


_reference = _in_pieces(_reference)


def _elements(t, wanted) -> dict:
    """The blocks' elements at flat positions `wanted` alone, as one block of them: gradOut and input gathered, each
    per-channel input taken at its element's channel, counter and the bits whole (every block holds the same). An
    element depends on its own values and its channel's only, so a function of the blocks (the reference, the edge)
    gives on these what it gives on the blocks at those positions, bit for bit: the same float64 steps per element."""
    k, m = t[DY].shape[0], t[DY].shape[1]
    at = np.asarray(wanted, np.int64).reshape(-1)

    def take(name, v):
        if not isinstance(v, np.ndarray) or v.ndim != 3 or v.shape[0] != k:
            return v  # (an attribute)
        if name in (DY, X):
            return v.reshape(k * m)[at].reshape(1, -1, 1)
        if name in PER_CHANNEL:
            return v.reshape(k)[at // m].reshape(1, -1, 1)
        return v[:1]  # (counter, read whole by every block; the bits, one value for the case)
    return {n: take(n, v) for n, v in t.items()}


def _flat(got):
    return None if got is None else np.asarray(got).reshape(-1)


def _reference_at(t, wanted) -> dict:
    """`_reference` at a few elements (verify's relief of the ones a correct kernel's rounding flags), from their own
    values and their channels': a channel of millions of elements is not evaluated for one of them."""
    ref = _reference(_elements(t, wanted[GI]))[GI]
    return {GI: Reference(*(_flat(getattr(ref, f)) for f in ("value", "bound", "scale", "allowance", "shared")))}


def _edge_at(t, wanted) -> dict:
    """`_edges` at a few elements, likewise."""
    where, device = _edges(_elements(t, wanted[GI]))[GI]
    return {GI: (_flat(where), _flat(device))}


def _ieee(t) -> dict:
    """A block with an inf or NaN input: the formula's IEEE value in float64 (the count summed likewise)."""
    with np.errstate(all="ignore"):
        return {GI: _parts(t, float(np.asarray(t[CNT])[0].astype(np.float64).sum()))[-1]}


def _exact(t) -> dict:
    """The doc's formula on Fraction object arrays (any k channels); a count of 0: the float64 IEEE value (exact:
    its bound is 0, so gen never asks)."""
    cnt = sum(np.asarray(t[CNT])[0].reshape(-1).tolist(), Fraction(0))
    if cnt == 0:
        return _ieee({k: v.astype(np.float64) if isinstance(v, np.ndarray) else v for k, v in t.items()})
    return {GI: _parts(t, cnt)[-1]}


def _exact_at(t, wanted) -> dict:
    """`_exact` at a few elements (float64 inputs), on them alone (`_elements`): each from its own values and its
    channel's, in Fractions; a count of 0 or one an inf or NaN reaches, the formula's IEEE value."""
    one = _elements(t, wanted[GI])
    exact_cnt, _ = _count(one)
    if exact_cnt == 0 or not isinstance(exact_cnt, Fraction):
        values = _ieee(one)[GI]
    else:
        values = _parts({n: as_fractions(v) if n in (DY, X, *PER_CHANNEL) and v is not None else v
                         for n, v in one.items()}, exact_cnt)[-1]
    return {GI: np.array(list(np.asarray(values, dtype=object).reshape(-1)) + [None], dtype=object)[:-1]}


@_in_pieces
def _edge(t) -> dict:
    with np.errstate(all="ignore"):
        where, device = edge(t, _parts(t, float(np.asarray(t[CNT])[0].astype(np.float64).sum()))[-1])[GI]
    return {GI: where, "device": device}


def _edges(t) -> dict:
    got = _edge(t)
    return {GI: (got[GI], got["device"])}


def _rounded_through(attrs, dtypes, shapes) -> dict:
    """float16 where every input but counter is float16 (the op_api's P; a null weight makes it float32: not told
    apart here, so such a call is judged by float16's thresholds too)."""
    return {GI: lookup("float16")} if all(n in dtypes and dtypes[n].name == "float16" for n in PROMOTED) else {}


def _shape_rule(d, attrs) -> str | None:
    """CheckShape: input 2-8 dims (every tensor 1-8: the contract's dims), C not 0, gradOut and gradInput input's
    shape, mean, invstd, sumDy, sumDyXmu and a non-null weight [C]."""
    x = d[X].shape
    if not 2 <= len(x) <= 8:
        return f"input has {len(x)} dims; it takes 2-8 (N, C, ...)"
    if x[1] == 0:
        return "input's channel axis (1) is 0"
    for name in (DY, GI):
        if d[name].shape != x:
            return f"{name} shape {list(d[name].shape)} is not input's {list(x)}"
    for name in PER_CHANNEL:
        if not d[name].null and d[name].shape != (x[1],):
            return f"{name} shape {list(d[name].shape)} is not [C] = [{x[1]}]"
    return None


SPEC = register(OpSpec(
    name="aclnnBatchNormElemtBackward",
    key="batch_norm_elemt_backward",
    header="aclnnop/aclnn_batch_norm_elemt_backward.h",
    summary="Synchronised BatchNorm's backward per element: gradInput = ((gradOut - sumDy / count) - (input - mean) * "
            "invstd^2 * sumDyXmu / count) * invstd * weight, per channel (axis 1), count the sum of counter.",
    formula="gradInput = ((gradOut - sumDy / count) - (input - mean) * (invstd^2 * (sumDyXmu / count))) * invstd * "
            "weight; mean, invstd, weight, sumDy, sumDyXmu per channel (axis 1); count = sum(counter)",
    tensors=(
        TensorSpec(DY, "input", {"normal": [0, 1]}),
        TensorSpec(X, "input", {"normal": [0, 1]}),
        TensorSpec(MEAN, "input", {"uniform": [-0.25, 0.25]}),
        TensorSpec(INV, "input", {"uniform": [0.5, 2.0]}),
        TensorSpec(W, "input", {"uniform": [-2.0, 2.0]}, optional=True),
        TensorSpec(SDY, "input", {"uniform": [-1.0, 1.0]}),
        TensorSpec(SDXM, "input", {"uniform": [-1.0, 1.0]}),
        TensorSpec(CNT, "input", {"constant": 1}, dtypes=("float32", "float16", "int32")),
        TensorSpec(GI, "output", {"constant": 0}),
    ),
    products=products("950", "A3", "A2", "910", overrides={"910": ("float32", "float16")}),
    dims=(1, 8),
    empty_ok=True,
    family=Channels(driver=X, per_row=PER_CHANNEL, bits_of=PROMOTED, whole=(CNT,)),
    reference=_reference,
    exact=_exact,
    exact_at=_exact_at,
    kernel=_in_pieces(kernel),
    ieee=_in_pieces(_ieee),
    edge=_edges,
    reference_at=_reference_at,
    edge_at=_edge_at,
    reference_at_share=1.0,
    rounded_through=_rounded_through,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", shape_rule=_shape_rule),
    special_values="The doc defines none; the formula's IEEE order as the device computes it: an inf or NaN input "
                   "propagates through its element (a channel's mean, invstd, weight, sumDy or sumDyXmu: through the "
                   "channel; counter: everywhere); a count of 0 makes meanDy and meanDyXmu infinite or NaN. Where a "
                   "float32 intermediate overflows while the inputs are finite (invstd squared), or the float32 result "
                   "lies across an output dtype's overflow threshold from the exact one, verify also accepts the "
                   "device's value.",
))

CONTRACT_NOTES = """\
aclnnBatchNormElemtBackward phase one (norm/sync_batch_norm_backward_elemt/op_api/aclnn_batch_norm_elemt_backward.cpp,
e5c3fa93), in order:
- 161001: gradOut, input, mean, invstd, sumDy, sumDyXmu, counter or gradInput null (weight may be: ones).
- 161002: gradOut, input, mean, invstd, a non-null weight, sumDy, sumDyXmu, gradInput outside {FLOAT, FLOAT16, BF16}
  on ASCEND910B, ASCEND910_93 and regbase SoCs (A2, A3, 950), {FLOAT, FLOAT16} elsewhere (910); counter outside
  {FLOAT, FLOAT16, INT32}. No dtype relation: each is cast to P (float16 where all of the first seven are, else
  float32), gradInput's result cast from P to its own dtype.
- 161002: a private format of gradOut, input or gradInput; input outside 2-8 dims, gradOut, gradInput or counter over
  8; input's axis 1 of size 0; gradOut or gradInput not input's shape; mean, invstd, sumDy, sumDyXmu or a non-null
  weight not of shape [C]. counter may have any shape (the doc: 1-8 dims; the contract holds every tensor to 1-8).
- Empty gradOut or input: success, nothing launched (gradInput, of input's shape, is empty too).
- counter is summed whole (ReduceSumOp over all its axes) into one count for every channel.
"""
