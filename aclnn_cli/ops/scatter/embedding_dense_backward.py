"""aclnnEmbeddingDenseBackward: the gradient of an embedding lookup, rows of grad added into the rows indices name.

    out[w, :] = sum over the rows m of grad (..., D) with indices[m] == w of grad[m, :]   (w != paddingIdx)
    scaleGradByFreq: that sum divided by count(w), the rows whose index is w;   out[paddingIdx, :] = 0

out is (numWeights, D), numWeights an attribute (uint64_t); indices has one value per row of grad (any shape
of prod(grad.shape[:-1]) elements; they do not broadcast). paddingIdx is a uint64_t: -1 (any value outside
[0, numWeights)) means no padding row. The doc allows indices in [0, numWeights - 1] only; an index outside is
not added (both 950 kernels check it), and the goldens say so. Duplicates add in any order on the device.

Goldens: the exact sum of the duplicates rounded once to out's dtype (with scaleGradByFreq the exact quotient
rounded once); the float64 reference certifies most elements, the rest are summed exactly through integers
(ops/dyadic.py) at the wanted elements (`exact_at`). The family is Scatter (ops/families/scatter.py); the 950
kernel, its variants and defects are in ops/scatter/embedding_dense_kernel.py.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..base import AttrSpec, Contract, OpSpec, Reference, TensorSpec, products
from ..dyadic import EXACT_SUM_UNITS, exact_row_sums, quantum
from .embedding_dense_kernel import COUNT, GRAD, IDX, NW, OUT, PAD, SCALE, VARIANTS, kept, kernel
from ..registry import register
from ..families import Scatter
from ..families.scatter import as_rows

U = 2.0**-53
# The op_api's indices list (FLOAT16, FLOAT, DOUBLE, INT8, UINT8, INT16, INT32, INT64, BOOL), less the dtypes this
# tool has no tensors of (int8, int16, bool). The 950 casts double to int64 and the rest to int32 (floats
# truncated toward zero here, as a C cast does); the bundled cases give int64 and int32.
INDEX_DTYPES = ("int64", "int32", "uint8", "float32", "float16", "float64")


def _index_fill(shapes, attrs) -> dict:
    """Indices in [0, numWeights - 1], so duplicates abound wherever rows outnumber the weights."""
    return {"randint": [0, max(int(attrs[NW]) - 1, 0)]}


def _rows(t):
    """(grad rows (k, D), their index (k,), which rows add somewhere, each row's divisor: its index's count where
    scaleGradByFreq, else 1)."""
    g = t[GRAD][:, :, 0]
    index = as_rows(t[IDX]).reshape(-1)
    keep = kept(index, t)
    divisor = np.asarray(t[COUNT]).reshape(-1) if t[SCALE] else np.ones(index.size, np.int64)
    return g, index, keep, divisor


def _reference(t) -> Reference:
    """float64 partial over the rows given, shape (numWeights, D): np.add.at adds each index's terms in row order
    (n - 1 roundings of at most u times the running magnitude), each term g / count rounded once: a bound of
    (hits + 2) u sum|terms| per element. Where the terms are all multiples of a q with sum|terms| <= 2^52 q
    (dyadic.quantum: a weight hit by a few rows) the additions are exact and only the quotients' roundings
    remain (none without scaleGradByFreq). scale: sum|terms| (gen derives the allowance from the terms)."""
    g, index, keep, divisor = _rows(t)
    width, d = int(t[NW]), g.shape[1]
    terms = g[keep] / divisor[keep][:, None]
    value, mag, q = np.zeros((width, d)), np.zeros((width, d)), np.full((width, d), np.inf)
    np.add.at(value, index[keep], terms)
    np.add.at(mag, index[keep], np.abs(terms))
    np.minimum.at(q, index[keep], quantum(terms))
    hits = np.bincount(index[keep], minlength=width)[:, None]
    divided = divisor[keep] != 1
    quotients = np.zeros((width, d))
    np.add.at(quotients, index[keep][divided], np.abs(terms[divided]))
    with np.errstate(invalid="ignore"):
        bound = np.where(mag <= EXACT_SUM_UNITS * q, U * quotients, (hits + 2) * U * mag)
    return Reference(value, bound * (1 + 2.0**-40), mag)


def _exact(t) -> np.ndarray:
    """The doc's formula on Fractions: each kept row (divided by its index's count) added into its row."""
    g, index, keep, divisor = _rows(t)
    out = np.full((int(t[NW]), g.shape[1]), Fraction(0), dtype=object)
    for m in np.flatnonzero(keep).tolist():
        out[index[m]] = out[index[m]] + g[m] / int(divisor[m])
    return out


def _exact_at(t, wanted) -> dict:
    """The partial's exact values at flat positions w * D + d only: per wanted row w, the columns wanted of the
    rows that hit it summed exactly through integers (ops/dyadic.py), divided by the count."""
    g, index, keep, divisor = _rows(t)
    d = max(g.shape[1], 1)
    out = {}
    for name, where in wanted.items():
        where = np.asarray(where, np.int64).reshape(-1)
        values = [Fraction(0)] * where.size
        for w in np.unique(where // d).tolist():
            at = np.flatnonzero(where // d == w)
            rows = np.flatnonzero(keep & (index == w))
            if not rows.size:
                continue
            sums = exact_row_sums(g[np.ix_(rows, where[at] % d)].T)
            for i, s in zip(at.tolist(), sums):
                values[i] = s / int(divisor[rows[0]])
        out[name] = np.array(values + [None], dtype=object)[:-1]
    return out


# ------------------------------------------------------------------ the contract

def _shape_rule(d, attrs) -> str | None:
    """CheckDimension, then CheckOutShape (op_api): indices' numel equals grad's rows (unless D = 0); out is 2-d
    (numWeights, D)."""
    grad, index, out = d[GRAD].shape, d[IDX].shape, d[OUT].shape
    dim = grad[-1] if grad else 1
    if dim != 0 and math.prod(index) != math.prod(grad[:-1]):
        return (f"indices has {math.prod(index)} values ({list(index)}); grad {list(grad)} has "
                f"{math.prod(grad[:-1])} rows")
    if len(out) != 2:
        return f"out has {len(out)} dims; it is 2-d (numWeights, D)"
    if out != (int(attrs[NW]), dim):
        return f"out shape {list(out)} is not [numWeights, D] = [{int(attrs[NW])}, {dim}]"
    return None


SPEC = register(OpSpec(
    name="aclnnEmbeddingDenseBackward",
    key="embedding_dense_backward",
    header="aclnnop/aclnn_embedding_dense_backward.h",
    summary="Gradient of an embedding lookup: each row of grad added into the output row its index names "
            "(duplicates accumulate; the paddingIdx row stays zero; with scaleGradByFreq each sum divided by how "
            "many rows share the index).",
    formula="out[w, :] = sum(grad[m, :] for indices[m] == w) (/ count(w) if scaleGradByFreq); out[paddingIdx, :] = 0",
    tensors=(
        TensorSpec(GRAD, "input", {"normal": [0, 1]}),
        TensorSpec(IDX, "input", _index_fill, dtypes=INDEX_DTYPES),
        TensorSpec(OUT, "output", {"constant": 0}),
    ),
    attributes=(AttrSpec(NW, "int", default=8), AttrSpec(PAD, "int", default=-1),
                AttrSpec(SCALE, "bool", default=False)),
    products=products("950", "A3", "A2", "910", overrides={"910": ("float32", "float16")}),
    dims=(1, 8),
    empty_ok=True,
    family=Scatter(driver=GRAD, index=IDX, targets=NW, ignored=PAD, count=COUNT, per_row=(IDX,),
                   across_rows=(OUT,), term_roundings=1, sum_roundings=2),
    reference=_reference,
    exact=_exact,
    exact_at=_exact_at,
    kernel=kernel,
    variants=VARIANTS,
    redrawn=(IDX,),  # (ops-nn's executor_aclnnEmbeddingDenseBackward.py: randint(0, numWeights), the file's range aside)
    contract=Contract(dtypes="promote", shape_rule=_shape_rule),
    special_values="The doc defines none; the kernel's IEEE additions: a NaN in a row makes that column of its "
                   "index's output row NaN, an infinity inf (or NaN beside the opposite infinity); the paddingIdx "
                   "row stays zero whatever its rows hold.",
))

CONTRACT_NOTES = """\
aclnnEmbeddingDenseBackward phase one (index/embedding_dense_grad_v2/op_api/aclnn_embedding_dense_backward.cpp):
- Order: grad, indices or out null -> 161001; dtypes (161002): grad and out FLOAT, FLOAT16, BF16 (no BF16 on 910),
  indices FLOAT16, FLOAT, DOUBLE, INT8, UINT8, INT16, INT32, INT64, BOOL; any tensor over 8 dims; indices' numel
  not the product of grad's axes but the last (skipped where D = 0); out not 2-d or not (numWeights, D); a private
  format. An empty grad or indices: success, out zero-filled.
- out's dtype need not be grad's (the op_api casts the kernel's result, in grad's dtype, to out's): a case with
  different dtypes would be rounded twice on the device; the bundled cases give them alike. The doc says grad is
  2-8-d and indices 1-8-d; the op_api checks only the upper bound (a 1-d grad of one row is accepted; dims 1-8 here).
- The 950 runs V2 (a global stable sort, then per-index group sums) where grad has many rows, V1 (a sort per UB,
  atomic float32 adds) elsewhere; both add rows of one index in groups of 5 in row order and scale the whole
  sum by fl(1 / count).
"""
