"""gen for Rows-family ops: every output's golden from whole blocks, in flat memory.

Blocks are read about `chunk` elements at a time (never part of a block), so memory is bounded by the
chunk or by one row, whichever is larger. Outputs summed over every row also get an allowance file
(`<name>.allowance.bin`, float64): how far a correct float32 kernel's sum may stand from the exact one
(ops/accumulation.py), since verify cannot re-derive a sum over every row from the rows it looks at. An op
with such outputs is read about sqrt(rows) rows at a time (golden/rows.py, across_chunk_rows).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..casedir import manifest as M

from ..casedir import dirs as casedirs
from ..pipeline.stages import block_chunks, gather_blocks, geometry, write_blocks
from ..tensor.storage import CHUNK, StorageFile, write_new_file
from .rational import NotRational
from .rounding import ExactPath
from .exactcheck import check_exact
from .rows import (AcrossRows, across_chunk_rows, certify, exact_block, exact_elements, finite_blocks, reference_blocks,
                   round_exact)

# A golden_reference's cheap bound is tightened (Reference.tighter) where more than one element in this many is left
# uncertain: each such element's exact value costs its K products summed exactly (about 120 ns a term, measured:
# dots.exact_at, K = 4096), the tighter bound a second product (about 0.027 ns a multiply-add: dots.magnitude's sgemm),
# so the tighter one pays from about one element in 4,300; random operands leave none to a handful in millions.
TIGHTEN_SHARE = 4096


def fill_rows_goldens(case, tmp: Path, chunk: int = CHUNK) -> ExactPath:
    """Write every non-null output's golden (and allowance files); returns how the uncertain elements were settled
    (an op without `exact`: exactly where its reference is rational, else left uncertified)."""
    if case.expect_status != 0:
        return ExactPath()
    op, geo, attrs = case.op, geometry(case), case.attribute_values
    across_names = set(op.family.across_rows)
    outs = [t for t in case.tensors if t.role == "output" and not t.null]
    rows_out = [t for t in outs if t.name not in across_names]
    across = {t.name: AcrossRows(t.layout.numel) for t in outs if t.name in across_names}
    ins = {t.name: StorageFile(tmp / M.input_file(t.name), t.dtype.np_dtype, t.layout.storage_size)
           for t in case.inputs if not t.null}
    golds = {t.name: StorageFile(tmp / M.golden_file(t.name), t.dtype.np_dtype, t.layout.storage_size, writable=True)
             for t in rows_out}
    fallbacks = uncertified = 0
    step = chunk if not across else min(chunk, across_chunk_rows(geo.a1) * max(geo.block, 1))
    try:
        for b0, b1 in block_chunks(geo, 0, geo.a1, step):
            blocks = gather_blocks(case, ins, geo, b0, b1)
            if across:
                refs = reference_blocks(op, blocks, attrs)
                for name, acc in across.items():
                    acc.add(refs[name], op.family.across_terms(blocks, attrs, b1 - b0))
                pieces = [(blocks, refs, None)]
            else:
                # (a block with a non-finite input stays whole: reference_blocks takes it through the IEEE formula,
                #  its finite elements' goldens the float64 sums rounded, where a tile of them alone would certify them)
                tiles = op.family.golden_tiles(blocks)
                shape, tiles = tiles if tiles and finite_blocks(op, blocks).all() else (None, [(blocks, None)])
                pieces = ((piece, reference_blocks(op, piece, attrs, golden=True), at) for piece, at in tiles)
            whole: dict[str, np.ndarray] = {}
            for piece, refs, at in pieces:
                for t in rows_out:
                    tiled = getattr(refs, "tiles", None) if at is None else None
                    rounded, path = (_settled_tiles(op, piece, attrs, t, *tiled(t.name)) if tiled is not None
                                     else _settled(op, piece, attrs, t, refs[t.name]))
                    fallbacks, uncertified = fallbacks + path.exact, uncertified + path.uncertified
                    if at is None:
                        whole[t.name] = rounded
                    else:
                        whole.setdefault(t.name, np.empty(shape, rounded.dtype))[at] = rounded
            for t in rows_out:
                write_blocks(case, t, golds[t.name], geo, b0, b1, whole[t.name])
        for t in outs:
            if t.name in across:
                done = _write_across(case, tmp, t, across[t.name], ins, geo, chunk)
                fallbacks, uncertified = fallbacks + done.exact, uncertified + done.uncertified
    finally:
        for f in (*ins.values(), *golds.values()):
            f.close()
    return ExactPath(fallbacks, uncertified)


def _settled_tiles(op, blocks, attrs, t, shape, tiles) -> tuple[np.ndarray, ExactPath]:
    """Output t's golden over one block of `shape` (1, ...) settled tile by tile: tiles yield (flat positions in
    the block, Reference of value and bound there), each certified and its uncertain elements taken exactly as
    `_settled` takes them (a golden_reference's `tiles`, ConvolutionBackward's: one tile's float64 arrays at a time,
    never the output's)."""
    out, path = np.empty(shape, t.dtype.np_dtype), ExactPath()
    for at, r in tiles:
        rounded, done = _settled(op, blocks, attrs, t, r, at)
        out.reshape(-1)[at] = rounded
        path += done
    return out, path


def _settled(op, blocks, attrs, t, r, at=None) -> tuple[np.ndarray, ExactPath]:
    """Output t's golden over these blocks from its reference r: certified where the bound decides the rounding, the
    rest through the op's exact values of those elements (uncertified, counted, where it has none). at: r holds the
    elements at these flat positions of one block (a tile, `_settled_tiles`), 1-d."""
    value, bound = (r.value, r.bound) if at is None else (r.value.reshape(1, -1), np.reshape(r.bound, (1, -1)))
    rounded, unsure = certify(value, bound, t.dtype)
    if r.tighter is not None and np.count_nonzero(unsure) * TIGHTEN_SHARE > unsure.size:
        bound = r.tighter() if at is None else np.reshape(r.tighter(), (1, -1))
        rounded, unsure = certify(value, bound, t.dtype)
    fallbacks = uncertified = 0
    if unsure.any():
        rounded = rounded.copy()
        k = unsure.shape[0]
        for b in np.flatnonzero(unsure.reshape(k, -1).any(axis=1)):
            one = {name: v[b:b + 1] for name, v in blocks.items()}
            where = np.flatnonzero(unsure[b].reshape(-1))
            try:
                exact = exact_elements(op, one, attrs, t.name, where if at is None else at[where])
            except NotRational:  # (no exact path: these elements stay uncertified, counted)
                uncertified += where.size
                continue
            check_exact(op, t.name, exact, value[b].reshape(-1)[where],
                        np.broadcast_to(bound, np.shape(value))[b].reshape(-1)[where], where)
            rounded[b].reshape(-1)[where] = round_exact(exact, t.dtype)
            fallbacks += where.size
    return (rounded if at is None else rounded.reshape(-1)), ExactPath(fallbacks, uncertified)


def _write_across(case, tmp: Path, t, acc: AcrossRows, ins: dict, geo, chunk: int) -> int:
    """An across-rows output's golden and allowance file; uncertain elements summed exactly over every block.

    An across-rows output is column-local (docs/families.md): its element (r, a0) depends on that column
    of each row input and on per-row inputs only. So the exact pass hands `exact` only the uncertain
    columns, as (k, columns, 1) arrays, a chunk of rows at a time: a handful of columns of a huge case
    cost a handful of Fractions per row, not the whole case's."""
    rounded, unsure = certify(acc.value, acc.certifying_bound(), t.dtype)
    where = np.flatnonzero(unsure)
    certified = True
    if where.size:
        exact = np.zeros(where.size, dtype=object)
        per_row = set(case.op.family.per_row)
        try:
            for b0, b1 in block_chunks(geo, 0, geo.a1, chunk):
                blocks = gather_blocks(case, ins, geo, b0, b1)
                if not case.op.family.column_local:  # (Scatter: an element depends on the rows that hit it)
                    exact += exact_elements(case.op, blocks, case.attribute_values, t.name, where)
                    continue
                columns = {k: v if k in per_row else v.reshape(b1 - b0, -1)[:, where].reshape(b1 - b0, where.size, 1)
                           for k, v in blocks.items()}
                exact += exact_block(case.op, columns, case.attribute_values)[t.name].reshape(-1)
        except NotRational:  # (no exact path: these elements stay uncertified, counted)
            certified = False
        if certified:
            check_exact(case.op, t.name, exact, acc.value[where], acc.certifying_bound()[where], where)
            rounded = rounded.copy()
            rounded[where] = round_exact(exact, t.dtype)
    with StorageFile(tmp / M.golden_file(t.name), t.dtype.np_dtype, t.layout.storage_size, writable=True) as gold:
        gold.write(t.layout, 0, t.layout.numel, rounded)
    allowance = acc.allowance(case.op.family.term_roundings, case.op.family.sum_roundings)
    write_new_file(casedirs.join(str(tmp), M.allowance_file(t.name)), np.ascontiguousarray(allowance).tobytes())
    return ExactPath(int(where.size)) if certified else ExactPath(0, int(where.size))
