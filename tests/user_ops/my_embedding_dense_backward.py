"""A user op of the Scatter family, written from ops-nn's doc (index/embedding_dense_grad_v2/docs/
aclnnEmbeddingDenseBackward.md): each row of grad (..., D) added into the row of out (numWeights, D) its index names,

    out[w, :] = sum of grad[m, :] over the rows m with indices[m] == w      (/ count(w) with scaleGradByFreq)

and the paddingIdx row left zero. numWeights and paddingIdx are the header's uint64_t, declared `int` (an int64_t:
the same bits; -1 means no padding row); scaleGradByFreq a C bool. aclnnEmbeddingDenseBackward is bundled, so this
one is named aclnnMyEmbeddingDenseBackward.
"""

import numpy as np

from aclnn_cli.ops import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, register
from aclnn_cli.ops.families import Scatter

U = 2.0**-53


def _rows(t, padding=True):
    """The chunk's rows (k, D), their indices (k,), which rows add somewhere, each row's divisor."""
    g, index = t["grad"][:, :, 0], np.asarray(t["indices"]).reshape(-1).astype(np.int64)
    keep = (index >= 0) & (index < t["numWeights"]) & ((index != t["paddingIdx"]) if padding else True)
    divisor = np.asarray(t["indexCount"]).reshape(-1) if t["scaleGradByFreq"] else np.ones(index.size, np.int64)
    return g, index, keep, divisor


def _scatter(t, g, index, keep, terms):
    """Each kept row's terms added into its index's row of a (numWeights, D) array of terms' type."""
    out = np.zeros((t["numWeights"], g.shape[1]), dtype=terms.dtype)
    np.add.at(out, index[keep], terms)
    return out


def reference(t):
    """The partial over the rows given, (numWeights, D): np.add.at adds in row order (hits roundings of at most
    u sum|terms|), each term g / count rounded once. Rational: on Fractions (gen's exact pass, a chunk of rows at
    a time) it gives the exact partial, so no `exact` is needed."""
    g, index, keep, divisor = _rows(t)
    terms = g[keep] / divisor[keep][:, None]
    mag = _scatter(t, g, index, keep, np.abs(terms))
    hits = np.bincount(index[keep], minlength=t["numWeights"])[:, None]
    return Reference(_scatter(t, g, index, keep, terms), (hits + 2) * U * mag, mag)


def kernel(t, padding=True):
    """float32: the rows added per index in row order, then scaled by fl(1 / count)."""
    g, index, keep, divisor = _rows(t, padding)
    out = _scatter(t, g, index, keep, g[keep])
    if t["scaleGradByFreq"]:
        inv = np.ones(t["numWeights"], g.dtype)
        inv[index[keep]] = 1 / divisor[keep].astype(g.dtype)
        out = out * inv[:, None]
    return out


@defect
def _padding_added(t):
    """Defect: the paddingIdx row gets its rows like any other."""
    return kernel(t, padding=False)


def _shapes(descs, attrs):
    """161002: indices not one value per row of grad; out not (numWeights, D)."""
    grad, out = descs["grad"].shape, descs["out"].shape
    if np.prod(descs["indices"].shape) != np.prod(grad[:-1]):
        return "indices is not one value per row of grad"
    return None if tuple(out) == (attrs["numWeights"], grad[-1]) else "out is not (numWeights, D)"


SPEC = register(OpSpec(
    name="aclnnMyEmbeddingDenseBackward", key="my_embedding_dense_backward",
    summary="Gradient of an embedding lookup: rows of grad added into the rows of out their indices name.",
    formula="out[w, :] = sum(grad[m, :] for indices[m] == w) (/ count(w) if scaleGradByFreq); out[paddingIdx, :] = 0",
    tensors=(TensorSpec("grad", "input", {"normal": [0, 1]}),
             TensorSpec("indices", "input", lambda shapes, attrs: {"randint": [0, attrs["numWeights"] - 1]},
                        dtypes=("int64", "int32")),
             TensorSpec("out", "output", {"constant": 0})),
    attributes=(AttrSpec("numWeights", "int", default=8), AttrSpec("paddingIdx", "int", default=-1),
                AttrSpec("scaleGradByFreq", "bool", default=False)),
    products={p: ("float32", "float16", "bfloat16") for p in ("950", "A3", "A2")},
    dims=(1, 8), empty_ok=False,
    family=Scatter(driver="grad", index="indices", targets="numWeights", ignored="paddingIdx",
                   per_row=("indices",), across_rows=("out",), term_roundings=1, sum_roundings=2),
    reference=reference, kernel=kernel,
    contract=Contract(shape_rule=_shapes),
    variants={"my-embedding-padding-added": _padding_added},
))
