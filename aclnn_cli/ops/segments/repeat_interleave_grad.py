"""aclnnRepeatInterleaveGrad: the gradient of repeat_interleave, each run of y_grad along the axis summed.

    out[..., j, ...] = sum of yGrad[..., p, ...] over the repeats[j] positions p of run j along axis
    (run j starts at repeats[0] + ... + repeats[j - 1]; one repeats value: every run that long)

The contract is hicann/ops-nn index/repeat_interleave_grad/docs/aclnnRepeatInterleaveGrad.md (ops-nn has no op_api
source for this API; the OpDef op_host/repeat_interleave_grad_def.cpp and the graph proto agree on the dtypes; the OpDef
also adds ascend910b and ascend910_93 configs, which the doc marks unsupported: the doc is followed): the 950 only; yGrad
FLOAT16, BFLOAT16, FLOAT, 0-8 dims, non-contiguous allowed; repeats INT32 or INT64, 0-d or 1-d, never empty (561002
on the device, the tiling's OP_CHECK_IF(repeatShapeSize == 0)); axis in [-n, n); out yGrad's dtype, any shape of the
reduced size. The values of repeats (natural numbers adding up to the axis, or one value dividing it) are a
constraint on the call the device does not check: a case breaking it is refused by gen, with the reason.

Goldens: the exact run sums rounded once to out's dtype; the float64 reference (numpy's ordered reduceat) certifies
most elements, the rest are summed exactly through integers (ops/dyadic.py). Each element's allowance is its own
run's (ops/accumulation.py: peak prefix, sum |t|, sum t^2, its length). The family is Segments
(ops/families/segments.py); the 950 kernel, variants and defects are in repeat_interleave_kernel.py.
"""

from __future__ import annotations

import math

import numpy as np

from ..accumulation import across_rows_allowance
from ..base import AttrSpec, Contract, OpSpec, Reference, TensorSpec, products
from ..dyadic import exact_row_sums
from ..families import Segments
from ..registry import register
from .repeat_interleave_kernel import AXIS, OUT, REP, VARIANTS, Y, kernel, runs

U = 2.0**-53


def _repeats_fill(shapes, attrs) -> dict:
    """Run lengths adding up to the axis: a seeded split of R into the counts' n runs (zeros and long runs both
    drawn), or, for one value, R over the output's runs along the axis."""
    fam = SPEC.family
    drv = tuple(shapes[Y])
    try:
        axis = fam.split_axis(drv, attrs)
    except (KeyError, TypeError, ValueError):
        return {"constant": 1}
    r, n = drv[axis], math.prod(shapes.get(REP, (1,)))
    if n <= 1:
        s = fam.runs(shapes, attrs)
        return {"values": [r // s if s else 0]}
    rng = np.random.default_rng(r * 1009 + n)
    cuts = np.sort(rng.integers(0, r + 1, size=n - 1))
    return {"values": np.diff(np.concatenate([[0], cuts, [r]])).tolist()}


def _cut(t, values):
    """Every run's start (and the end) and length, and each run's sum of `values` (k, S, A0) (an empty run 0):
    numpy's reduceat along the axis over the nonempty runs, which adds each run's elements in order."""
    starts = runs(t)
    lengths = np.diff(starts)
    k, _, a0 = values.shape
    out = np.zeros((k, lengths.size, a0), dtype=values.dtype)
    full = lengths > 0
    if full.any():
        out[:, full] = np.add.reduceat(values, starts[:-1][full], axis=1)
    return starts, lengths, out


def _reference(t) -> Reference:
    """float64 run sums added in order: at most (L - 1) roundings of u times sum |t| (Higham 4.2), so a bound of
    (L + 2) u sum|t|. scale: sum |t|. allowance: across_rows_allowance of each run's own terms in axis order (peak
    |prefix|, sum |t|, sum t^2, L), the float64 prefixes' error (R + 2) u64 sum over the block's axis |t| added."""
    y = np.asarray(t[Y], np.float64)
    starts, lengths, value = _cut(t, y)
    _, _, mag = _cut(t, np.abs(y))
    _, _, squares = _cut(t, np.square(y))
    with np.errstate(all="ignore"):
        prefix = np.cumsum(y, axis=1)
        before = np.concatenate([np.zeros((y.shape[0], 1, y.shape[2])), prefix], axis=1)[:, starts[:-1]]
        slack = (y.shape[1] + 2) * U * np.abs(y).sum(axis=1, keepdims=True)
        base = np.repeat(before, lengths, axis=1)
        peak = np.zeros_like(value)
        full = lengths > 0
        if full.any():
            peak[:, full] = np.maximum.reduceat(np.abs(prefix - base), starts[:-1][full], axis=1)
        grown = 1 + 2.0**-40
        rows = lengths.reshape(1, -1, 1)
        allowance = across_rows_allowance((peak + slack) * grown, (mag + slack) * grown, squares * grown,
                                          np.broadcast_to(rows, value.shape), 0)
        bound = (rows + 2) * U * mag * grown
    return Reference(value, bound, mag, allowance=np.where(rows > 1, allowance, 0.0))


def _exact(t) -> np.ndarray:
    """The exact run sums (Fractions), through integers (dyadic.exact_row_sums), every (block, run, column)."""
    y = np.asarray(t[Y], np.float64)
    starts = runs(t)
    k, _, a0 = y.shape
    out = np.empty((k, starts.size - 1, a0), dtype=object)
    for j, (a, b) in enumerate(zip(starts[:-1].tolist(), starts[1:].tolist())):
        sums = exact_row_sums(np.moveaxis(y[:, a:b], 1, -1).reshape(k * a0, b - a)) if b > a else [0] * (k * a0)
        out[:, j] = np.array(list(sums) + [None], dtype=object)[:-1].reshape(k, a0)
    return out


def _exact_at(t, wanted) -> dict:
    """`_exact` at a few elements (float64 inputs, no Fractions made of the block): each wanted (block, run, column)
    summed exactly, the elements of one run together."""
    y = np.asarray(t[Y], np.float64)
    starts = runs(t)
    _, _, a0 = y.shape
    count = starts.size - 1
    out = {}
    for name, where in wanted.items():
        where = np.asarray(where, np.int64).reshape(-1)
        block, rest = np.divmod(where, max(count * a0, 1))
        run, col = np.divmod(rest, max(a0, 1))
        values = np.zeros(where.size, dtype=object)
        for j in np.unique(run).tolist():
            at = np.flatnonzero(run == j)
            lo, hi = int(starts[j]), int(starts[j + 1])
            if hi > lo:
                sums = exact_row_sums(y[block[at], lo:hi, col[at]])
                values[at] = np.array(list(sums) + [None], dtype=object)[:-1]
        out[name] = values
    return out


# ------------------------------------------------------------------ the contract

def _shape_rule(d, attrs) -> str | None:
    """axis in [-n, n) of yGrad; repeats 0-d or 1-d and not empty (the tiling's 561002; 161002 here, as the other
    ops' tiling refusals); out of yGrad's size with the axis reduced to the repeats' length (one value: its runs'
    count along the axis, a divisor of the axis, which the values decide)."""
    y, rep, out = d[Y].shape, d[REP].shape, d[OUT].shape
    axis = int(attrs[AXIS])
    if not -len(y) <= axis < len(y):
        return f"axis {axis} is outside [-{len(y)}, {len(y)}) of the {len(y)}-d yGrad"
    if len(rep) > 1:
        return f"repeats has {len(rep)} dims; it is 0-d or 1-d"
    if math.prod(rep) == 0:
        return "repeats is empty (the tiling's 561002 on the device)"
    axis %= len(y)
    outer = math.prod(y) // y[axis] if y[axis] else math.prod(y[:axis] + y[axis + 1:])
    n = math.prod(rep)
    if n > 1 and math.prod(out) != outer * n:
        return f"out has {math.prod(out)} elements; yGrad {list(y)} reduced to {n} runs along axis {axis} has {outer * n}"
    if n == 1 and outer and math.prod(out) % outer:
        return f"out has {math.prod(out)} elements, not a multiple of yGrad's {outer} outside axis {axis}"
    return None


SPEC = register(OpSpec(
    name="aclnnRepeatInterleaveGrad",
    key="repeat_interleave_grad",
    header="aclnnop/aclnn_repeat_interleave_grad.h",
    summary="Gradient of repeat_interleave: each run of yGrad along axis (repeats[j] positions, or one length for "
            "every run) summed into one output position.",
    formula="out[..., j, ...] = sum(yGrad[..., p, ...] for p in run j of axis), |run j| = repeats[j]",
    tensors=(
        TensorSpec(Y, "input", {"uniform": [-2, 2]}),
        TensorSpec(REP, "input", _repeats_fill, dtypes=("int64", "int32")),
        TensorSpec(OUT, "output", {"constant": 0}),
    ),
    attributes=(AttrSpec(AXIS, "int", default=-1),),
    products=products("950"),
    dims=(0, 8),
    empty_ok=True,
    family=Segments(driver=Y, dim=AXIS, counts=REP, segments=(OUT,)),
    case_dtypes=lambda dtypes: {"itemsize": 4 if dtypes[Y] == "float32" else 2},
    reference=_reference,
    exact=_exact,
    exact_at=_exact_at,
    kernel=kernel,
    variants=VARIANTS,
    contract=Contract(dtypes="same", shape_rule=_shape_rule),
    special_values="The doc defines none; the kernel's IEEE additions: a NaN in a run makes its sum NaN, an infinity "
                   "inf (NaN beside the opposite infinity); a run of zero repeats is +0 whatever yGrad holds.",
))

CONTRACT_NOTES = """\
aclnnRepeatInterleaveGrad phase one (docs/aclnnRepeatInterleaveGrad.md; ops-nn ships no op_api source for it):
- 161001: yGrad, repeats or out null. 161002: yGrad or repeats of a dtype outside their lists, out not yGrad's dtype.
  561002: an empty repeats (the tiling); 161002 here, as the other ops' tiling refusals (the status table's one code
  for shapes). Beyond the doc's table, and 161002 here: axis outside [-n, n), repeats of 2 dims or more, and an out
  whose size is not yGrad's with the axis reduced (the doc's shape constraint).
- The 950 only (the doc: A3, A2, 310B, 310P, 910 unsupported; the OpDef lists ascend910b and ascend910_93 configs, the
  binaries the docs do not offer).
- The repeats values are a constraint on the call, not checked (the kernel reads them on the device): natural numbers
  adding up to the axis, or one value dividing it. gen refuses a case that breaks it: the result is undefined.
"""
