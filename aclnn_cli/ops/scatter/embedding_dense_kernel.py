"""aclnnEmbeddingDenseBackward's 950 kernel, its variants and defects (the declaration: embedding_dense_backward.py).

The 950 (hicann/ops-nn index/embedding_dense_grad arch35 and index/embedding_dense_grad_v2 v35; the op_api picks
one by shape, both add alike): the indices are sorted stably (the op_api's Sort(stable=true) for V2, a radix sort
of each UB's indices for V1), so the rows of one index keep their order; fp16 and bf16 rows are widened exactly to
float32 in registers; each index's rows are added in groups of PROCESS_GROUP = 5 (a group sum from 0, then added
to the index's running sum: ProcessPerGradGroup, AddGradPerIndice); partial sums of one index split across UBs or
cores meet by float32 atomic adds (any order). A row whose index is paddingIdx or outside [0, numWeights) is not
added (the output starts zeroed). scaleGradByFreq: the whole sum times fl(1 / count) (Muls by 1.0f / count, V1's
ComputeFinalValueWithFreq and V2's scaleFreq), then CAST_RINT to the output dtype.

Functions get a chunk of rows: grad (k, D, 1), indices (k, 1, 1), indexCount (k, 1, 1, how many rows of the case
share the row's index); they return the chunk's partial (numWeights, D), which the pipeline adds pairwise in
float32. With scaleGradByFreq each chunk's partial is scaled before that addition (the device scales the whole
sum once; a chunk is one UB's worth of the device's own partials, and the difference is inside the allowance).
"""

from __future__ import annotations

import numpy as np

from ..base import defect, legitimate
from ..families.scatter import as_rows
from ..treesum import tree_sum

GRAD, IDX, OUT = "grad", "indices", "out"
NW, PAD, SCALE = "numWeights", "paddingIdx", "scaleGradByFreq"
COUNT = "indexCount"
GROUP = 5  # PROCESS_GROUP in both kernels


def kept(index: np.ndarray, t, padding: bool = True) -> np.ndarray:
    """Rows that add somewhere: an index inside [0, numWeights), and not paddingIdx (unless padding=False)."""
    keep = (index >= 0) & (index < int(t[NW]))
    return keep & (index != int(t[PAD])) if padding else keep


def segments(t, padding: bool = True, reverse: bool = False, shift: int = 0):
    """The kept rows in the kernel's order: sorted by index, stably (reverse: each index's rows last first).
    Returns (rows in that order, their index, segment number of each, rank inside its segment, segment starts)."""
    index = as_rows(t[IDX]).reshape(-1) + shift
    rows = np.flatnonzero(kept(index, t, padding))
    key = -rows if reverse else rows
    order = rows[np.lexsort((key, index[rows]))]
    w = index[order]
    new = np.ones(w.size, dtype=bool)
    new[1:] = w[1:] != w[:-1]
    seg = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    rank = np.arange(w.size) - starts[seg] if w.size else np.zeros(0, np.int64)
    return order, w, seg, rank, starts


def grouped_sum(values: np.ndarray, seg: np.ndarray, rank: np.ndarray, nseg: int, group: int = GROUP,
                store=None) -> np.ndarray:
    """Per segment, its values (in order) added in groups of `group`: each group summed from 0 in order, the group
    sums added in order to the segment's running sum, in values' dtype (store: the running sum kept in that dtype
    after every addition, a 16-bit accumulator's defect)."""
    dtype = values.dtype
    gkey = seg * (rank.max(initial=0) // group + 1) + rank // group
    gid = np.unique(gkey, return_inverse=True)[1].reshape(-1) if gkey.size else gkey
    ngroups = int(gid.max(initial=-1)) + 1
    sums = np.zeros((ngroups, values.shape[1]), dtype=dtype)
    for p in range(group):  # (at most one row of a group at each position: no two writes collide)
        at = rank % group == p
        sums[gid[at]] += values[at]
    gseg = np.zeros(ngroups, np.int64)
    gq = np.zeros(ngroups, np.int64)
    gseg[gid], gq[gid] = seg, rank // group
    acc = np.zeros((nseg, values.shape[1]), dtype=dtype)
    by_q = np.argsort(gq, kind="stable")  # (the groups of each q in one run: one pass over them, not one per q)
    cuts = np.searchsorted(gq[by_q], np.arange(int(gq.max(initial=-1)) + 2))
    for q in range(cuts.size - 1):
        at = by_q[cuts[q]:cuts[q + 1]]  # (at most one group of a segment per q: no two writes collide)
        if store is None:
            acc[gseg[at]] += sums[at]
        else:
            acc[gseg[at]] = (acc[gseg[at]].astype(np.float32) + sums[at].astype(np.float32)).astype(store).astype(dtype)
    return acc


def _scaled(acc: np.ndarray, t, order: np.ndarray, starts: np.ndarray, times: int = 1) -> np.ndarray:
    """acc times fl(1 / count) per segment (`times` times), when scaleGradByFreq."""
    if not t[SCALE] or not starts.size:
        return acc
    count = np.asarray(t[COUNT]).reshape(-1)[order[starts]].astype(acc.dtype)
    recip = (acc.dtype.type(1) / count)[:, None]
    for _ in range(times):
        acc = acc * recip
    return acc


def _partial(t, acc: np.ndarray, w: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The chunk's partial (numWeights, D): each segment's sum in its index's row, zeros elsewhere."""
    g = t[GRAD]
    out = np.zeros((int(t[NW]), g.shape[1]), dtype=g.dtype)
    out[w[starts]] = acc
    return out


def kernel(t, group: int = GROUP, store=None, reverse: bool = False, padding: bool = True, shift: int = 0,
           times: int = 1, rows=None) -> np.ndarray:
    """The 950 kernel on a chunk of rows (module docstring), with replaceable pieces for the variants."""
    g = t[GRAD][:, :, 0] if rows is None else rows
    order, w, seg, rank, starts = segments(t, padding, reverse, shift)
    with np.errstate(all="ignore"):
        acc = grouped_sum(g[order], seg, rank, starts.size, group, store)
        return _partial(t, _scaled(acc, t, order, starts, times), w, starts)


@legitimate
def _sequential(t):
    """Legitimate: each index's rows added one by one in row order (ATen's CPU index_add order)."""
    return kernel(t, group=1)


@legitimate
def _reversed(t):
    """Legitimate: each index's rows added one by one, last row first (a descending sort)."""
    return kernel(t, group=1, reverse=True)


@legitimate
def _pairwise(t):
    """Legitimate: each index's rows summed as a binary tree (the 950's folded tree over the duplicates)."""
    g = t[GRAD][:, :, 0]
    order, w, seg, rank, starts = segments(t)
    ends = np.r_[starts[1:], order.size]
    with np.errstate(all="ignore"):
        acc = np.array([tree_sum(g[order[a:b]].T, axis=1, keepdims=False) for a, b in zip(starts, ends)],
                       dtype=g.dtype).reshape(starts.size, g.shape[1])
        return _partial(t, _scaled(acc, t, order, starts), w, starts)


@legitimate
def _core_partials(t):
    """Legitimate: the chunk's rows dealt to 48 cores in contiguous ranges, each core's sums made as the 950 does,
    the cores' partials added in a shuffled order (atomic adds land in any order)."""
    k = t[GRAD].shape[0]
    cuts = np.linspace(0, k, 49).astype(int)
    parts = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        if b > a:
            piece = {**t, GRAD: t[GRAD][a:b], IDX: t[IDX][a:b], COUNT: t[COUNT][a:b]}
            with np.errstate(all="ignore"):
                order, w, seg, rank, starts = segments(piece)
                acc = grouped_sum(piece[GRAD][:, :, 0][order], seg, rank, starts.size)
                parts.append(_partial(piece, _scaled(acc, piece, order, starts), w, starts))
    total = np.zeros((int(t[NW]), t[GRAD].shape[1]), dtype=t[GRAD].dtype)
    for i in np.random.default_rng(k).permutation(len(parts)):
        with np.errstate(all="ignore"):
            total = total + parts[i]
    return total


@defect
def _last_write_wins(t):
    """Defect: duplicates stored, not accumulated: each index keeps the last of its rows (a plain scatter)."""
    g = t[GRAD][:, :, 0]
    order, w, seg, rank, starts = segments(t)
    last = (np.r_[starts[1:], order.size] - 1)[:starts.size]  # (no index in the chunk: none)
    return _partial(t, _scaled(g[order[last]], t, order, starts), w, starts)


@defect
def _padding_kept(t):
    """Defect: the paddingIdx row accumulated like any other instead of left zero."""
    return kernel(t, padding=False)


@defect
def _scale_missing(t):
    """Defect: scaleGradByFreq ignored: the sums never divided by the index's count."""
    return kernel(t, times=0)


@defect
def _scale_twice(t):
    """Defect: the frequency scale applied twice (once per row, once on the sum)."""
    return kernel(t, times=2)


@defect
def _fp16_accumulation(t):
    """Defect: each index's running sum kept in float16 (stalls once it outgrows its terms' ulp)."""
    return kernel(t, group=1, store=np.float16)


@defect
def _bf16_accumulation(t):
    """Defect: each index's running sum kept in bfloat16 (8 significant bits)."""
    import ml_dtypes

    return kernel(t, group=1, store=ml_dtypes.bfloat16)


@defect
def _off_by_one(t):
    """Defect: every row added into the next output row (index + 1; the last one falls off the end)."""
    return kernel(t, shift=1)


@defect
def _row_stride(t):
    """Defect: grad rows read with a stride of D + 1 elements instead of D (a padded row pitch assumed)."""
    g = t[GRAD][:, :, 0]
    k, d = g.shape
    flat = g.reshape(-1)
    at = np.minimum(np.arange(k)[:, None] * (d + 1) + np.arange(d)[None, :], max(flat.size - 1, 0))
    return kernel(t, rows=flat[at] if flat.size else g)


@defect
def _zeros(t):
    """Defect: the output left as the zeros it was initialised with."""
    return np.zeros((int(t[NW]), t[GRAD].shape[1]), dtype=t[GRAD].dtype)


VARIANTS = {
    "emb-sequential": _sequential,
    "emb-reversed": _reversed,
    "emb-pairwise": _pairwise,
    "emb-core-partials": _core_partials,
    "emb-last-write-wins": _last_write_wins,
    "emb-padding-kept": _padding_kept,
    "emb-scale-missing": _scale_missing,
    "emb-scale-twice": _scale_twice,
    "emb-fp16-accumulation": _fp16_accumulation,
    "emb-bf16-accumulation": _bf16_accumulation,
    "emb-off-by-one": _off_by_one,
    "emb-row-stride": _row_stride,
    "emb-zeros": _zeros,
}
