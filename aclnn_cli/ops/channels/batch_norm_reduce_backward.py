"""aclnnBatchNormReduceBackward: synchronised BatchNorm's backward, part one: per channel c (axis 1 of an (N, C, ...)
input), over its M = N * S elements,
  sumDy = gradBias = sum(gradOut),   sumDyXmu = sum(gradOut * (input - mean)),   gradWeight = invstd * sumDyXmu
(hicann/ops-nn norm/sync_batch_norm_backward_reduce/docs/aclnnBatchNormReduceBackward.md, e5c3fa93). inputG switches
sumDy and sumDyXmu on, weightG gradWeight, biasG gradBias; weight is taken (a null one is filled with ones) and never
read. Every output is rational in the inputs: the golden is the exact sum (Fractions, or ops/dyadic.py) rounded once.

The device (batch_norm_reduce_kernel.py) does not sum the doc's centred terms: it sums dy and fl(dy x) in float32 and
the DAG subtracts, fl(sumDyX - fl(mean sumDy)). The allowance of sumDyXmu and gradWeight is that computation's: the
two sums' (ops/accumulation.py: fl(dy x) one rounding, dy none) carried through the subtraction, the product and
their roundings. Where |mean| is large beside the spread of input, sumDyX and mean * sumDy cancel, and a correct
kernel's error is the error of those two sums, not of the small result (docs/allowances.md).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..accumulation import ACCUMULATION_UNIT, sum_allowance
from ..base import AttrSpec, Contract, FLOATS, OpSpec, Reference, TensorSpec, products
from ..dyadic import exact_row_sums
from ..families import Channels
from ..normgrad import SLACK, TINY, U
from ..registry import register
from ..treesum import exact_sum_factor, row_sum64
from .batch_norm_reduce_kernel import (BG, DY, GB, GW, IG, INV, MEAN, SAMPLES, SDXM, SDY, VARIANTS, W, WG, X, edge,
                                       kernel)

U32 = ACCUMULATION_UNIT
SUB32 = 2.0**-149  # a float32 product's absolute rounding below the normal range (half the smallest subnormal, twice)
OUTPUTS = ((SDY, IG), (SDXM, IG), (GW, WG), (GB, BG))  # each output and the mask that switches it on


def _case_values(shapes) -> dict[str, int]:
    return {SAMPLES: int(shapes[X][0]) if shapes[X] else 1}


def channel_orders(terms: np.ndarray, samples: int) -> list[np.ndarray]:
    """A channel's terms (k, M, 1) in the orders its sums may run in: (n, s) as stored and (s, n) (a transposed view,
    read by sum_allowance in C order)."""
    k, m = terms.shape[0], terms.shape[1]
    flat = terms.reshape(k, m)
    n = samples if samples > 1 and m % samples == 0 else 1
    return [flat, flat.reshape(k, n, m // n).transpose(0, 2, 1)] if n > 1 else [flat]


def _sum(terms: np.ndarray, samples: int, term_units: float):
    """(value, bound, sum|terms|) of a channel sum of float64 terms each within term_units u of its exact value."""
    m = terms.shape[1]
    mag = row_sum64(np.abs(terms)) * SLACK
    return row_sum64(terms), (exact_sum_factor(m) + term_units) * U * mag + (m + 4) * TINY, mag


def _reference(t) -> dict:
    """float64 on whole channels. sumDy: dy exact, summed pairwise. sumDyXmu: terms dy fl(x - mean) within 2.01u.
    Allowances (the device's computation, module docstring): A0 of sum(dy) (no term rounding), A1 of sum(fl(dy x))
    (one); sumDyXmu's error is A1 + |mean| A0 plus the product's and the difference's float32 roundings; gradWeight's
    |invstd| times that plus its own rounding."""
    dy, x, mean, inv = t[DY], t[X], t[MEAN], t[INV]
    samples = int(t[SAMPLES])
    s_dy, b_dy, m_dy = _sum(dy, samples, 0)
    xmu, b_xmu, _ = _sum(dy * (x - mean), samples, 2.01)
    dyx = dy * x
    m_dyx = row_sum64(np.abs(dyx)) * SLACK
    a0 = sum_allowance(channel_orders(dy, samples), 0).reshape(s_dy.shape)
    a1 = sum_allowance(channel_orders(dyx, samples), 1).reshape(s_dy.shape)
    with np.errstate(all="ignore"):
        product = np.abs(mean) * (np.abs(s_dy) + b_dy + a0)  # |mean * sumDy32| at most
        inner = a1 + np.abs(mean) * a0 + U32 * product + SUB32
        a_xmu = inner * (1 + U32) + U32 * (np.abs(xmu) + b_xmu)
        scale = m_dyx + np.abs(mean) * m_dy
        gw = xmu * inv
        b_gw = np.abs(inv) * b_xmu * (1 + 2 * U) + U * np.abs(gw) + TINY
        a_gw = np.abs(inv) * a_xmu * (1 + U32) + U32 * (np.abs(gw) + b_gw) + SUB32
    return {SDY: Reference(s_dy, b_dy, m_dy, a0), GB: Reference(s_dy, b_dy, m_dy, a0),
            SDXM: Reference(xmu, b_xmu, scale, a_xmu), GW: Reference(gw, b_gw, scale * np.abs(inv), a_gw)}


def _ieee(t) -> dict:
    """A channel with an inf or NaN input, in the device's IEEE order: sum(dy x) - mean sum(dy), times invstd (an
    infinity meeting 0, or infinities of both signs in a sum, make NaN)."""
    dy, x, mean, inv = t[DY], t[X], t[MEAN], t[INV]
    with np.errstate(all="ignore"):
        s_dy = dy.sum(axis=1, keepdims=True)
        xmu = (dy * x).sum(axis=1, keepdims=True) - mean * s_dy
        return {SDY: s_dy, SDXM: xmu, GW: xmu * inv, GB: s_dy}


def _exact(t) -> dict:
    """The doc's formulas on Fraction object arrays (any k channels)."""
    dy, x, mean, inv = t[DY], t[X], t[MEAN], t[INV]
    s_dy = dy.sum(axis=1, keepdims=True)
    xmu = (dy * (x - mean)).sum(axis=1, keepdims=True)
    return {SDY: s_dy, SDXM: xmu, GW: xmu * inv, GB: s_dy}


def _exact_at(t, wanted) -> dict:
    """`_exact` at a few channels (float64 inputs): sum(dy) and sum(dy x) exact through ops/dyadic.py (dy x is exact
    in float64), sum(dy (x - mean)) = sum(dy x) - mean sum(dy)."""
    dy, x = t[DY], t[X]
    k, m = dy.shape[0], dy.shape[1]
    mean, inv = ([Fraction(float(v)) for v in np.asarray(t[n], np.float64).reshape(-1)] for n in (MEAN, INV))
    s_dy = exact_row_sums(dy.reshape(k, m))
    s_dyx = exact_row_sums((dy * x).reshape(k, m))
    xmu = [sx - c * s for sx, c, s in zip(s_dyx, mean, s_dy)]
    by = {SDY: s_dy, GB: s_dy, SDXM: xmu, GW: [v * r for v, r in zip(xmu, inv)]}
    return {name: np.array([by[name][p] for p in np.asarray(where, np.int64).reshape(-1).tolist()] + [None],
                           dtype=object)[:-1] for name, where in wanted.items()}


def _edge(t) -> dict:
    return edge(t)


# ------------------------------------------------------------------ the contract

def _null_rule(d, attrs) -> str | None:
    """CheckOutputNotNull: an output whose mask is true may not be null (161001)."""
    for name, mask in OUTPUTS:
        if attrs[mask] and d[name].null:
            return f"{name} is a null pointer while {mask} is true"
    return None


def _dtype_rule(d) -> str | None:
    """CheckDtypeValid beyond each dtype's list: gradOut's dtype is input's (mean, invstd and the outputs are free)."""
    if d[DY].dtype.name != d[X].dtype.name:
        return f"gradOut dtype {d[DY].dtype.name} differs from input's {d[X].dtype.name}"
    return None


def _shape_rule(d, attrs) -> str | None:
    """CheckShape: gradOut and input 2-8 dims; input's channel axis not 0; each output its mask switches on [C]."""
    for name in (DY, X):
        if not 2 <= len(d[name].shape) <= 8:
            return f"{name} has {len(d[name].shape)} dims; it takes 2-8 (N, C, ...)"
    c = d[X].shape[1]
    if c == 0:
        return "input's channel axis (1) is 0"
    for name, mask in OUTPUTS:
        if attrs[mask] and d[name].shape != (c,):
            return f"{name} shape {list(d[name].shape)} is not [C] = [{c}]"
    return None


def _output(name: str) -> TensorSpec:
    return TensorSpec(name, "output", {"constant": 0}, optional=True)


SPEC = register(OpSpec(
    name="aclnnBatchNormReduceBackward",
    key="batch_norm_reduce_backward",
    header="aclnnop/aclnn_batch_norm_backward_reduce.h",
    summary="Synchronised BatchNorm's backward, its per-channel sums (axis 1): sumDy = gradBias = sum(gradOut), "
            "sumDyXmu = sum(gradOut * (input - mean)), gradWeight = invstd * sumDyXmu, each switched on by its mask.",
    formula="sumDy = gradBias = sum(gradOut); sumDyXmu = sum(gradOut * (input - mean)); gradWeight = invstd * sumDyXmu "
            "(sums over every axis but 1); inputG: sumDy, sumDyXmu; weightG: gradWeight; biasG: gradBias",
    tensors=(
        TensorSpec(DY, "input", {"normal": [0, 1]}),
        TensorSpec(X, "input", {"normal": [0, 1]}),
        TensorSpec(MEAN, "input", {"uniform": [-0.25, 0.25]}),
        TensorSpec(INV, "input", {"uniform": [0.5, 2.0]}),
        TensorSpec(W, "input", {"uniform": [-2.0, 2.0]}, read_by_kernel=False, optional=True, dtypes=FLOATS),
        _output(SDY), _output(SDXM), _output(GW), _output(GB),
    ),
    attributes=(AttrSpec(IG, "bool", default=True), AttrSpec(WG, "bool", default=True),
                AttrSpec(BG, "bool", default=True)),
    products=products("950", "A3", "A2", "910", overrides={"910": ("float32", "float16")}),
    dims=(1, 8),
    empty_ok=True,
    family=Channels(driver=X, per_row=(MEAN, INV, W, SDY, SDXM, GW, GB)),
    case_values=_case_values,
    reference=_reference,
    exact=_exact,
    exact_at=_exact_at,
    kernel=kernel,
    ieee=_ieee,
    edge=_edge,
    variants=VARIANTS,
    contract=Contract(dtypes="promote", null_rule=_null_rule, dtype_rule=_dtype_rule, shape_rule=_shape_rule),
    special_values="The doc defines none; the device's IEEE order: sumDy (and gradBias) sums gradOut, sumDyXmu is "
                   "sum(gradOut * input) - mean * sumDy, gradWeight that times invstd, so a NaN anywhere in a channel's "
                   "gradOut, input, mean or invstd, an infinity meeting 0, or infinities of both signs make NaN. Where "
                   "a float32 intermediate overflows while the inputs are finite (sum(gradOut * input) and mean * sumDy "
                   "both infinite: NaN), or the float32 result lies across an output dtype's overflow threshold from "
                   "the exact one, verify also accepts the device's value.",
))

CONTRACT_NOTES = """\
aclnnBatchNormReduceBackward phase one (norm/sync_batch_norm_backward_reduce/op_api/aclnn_batch_norm_backward_reduce.cpp,
e5c3fa93), in order:
- 161001: gradOut, input, mean or invstd null (weight may be: filled with ones); sumDy or sumDyXmu null with inputG,
  gradWeight with weightG, gradBias with biasG (CheckOutputNotNull).
- 161002: gradOut, input, mean, invstd outside {FLOAT, FLOAT16, BF16} on DAV_2201 and regbase SoCs (A2, A3, 950),
  {FLOAT, FLOAT16} elsewhere (910); gradOut not input's dtype; an output its mask switches on outside the list (mean,
  invstd and the outputs need not be input's dtype); weight's dtype is not checked (held to the float dtypes here).
- 161002: formats (gradOut's not input's; a private format); gradOut or input outside 2-8 dims; input's axis 1 of
  size 0; an output its mask switches on not of shape [C] (CheckShape). mean's, invstd's and weight's shapes are not
  checked (the channels family reads them as [C]: another shape is refused when a case loads); gradOut's shape is not
  checked against input's either (a case with another shape is refused when it loads).
- Empty gradOut, input, mean or invstd: success; on regbase SoCs (the 950) every output switched on is filled with
  zeros (OutputParamFillZeroForEmptyTensor), elsewhere nothing is written: the bundled empty case is the 950's.
- Not modelled: an output switched off but given (not null): the device leaves it unwritten, its golden is computed
  (give such an output `nullptr: true`); an unmasked output's dtype outside the list (phase one does not check it,
  the contract does).
"""
