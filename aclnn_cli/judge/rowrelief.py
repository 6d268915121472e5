"""Relief for Rows-family ops: what a flagged element is judged against, from whole rows.

An element of a row output depends on its whole row, so the op's reference is evaluated on every block
that holds a flagged element, never on the element alone (docs/families.md). An element of an output
summed over every row (dgamma) depends on every row: gen recorded its allowance, how far a correct float32
kernel's sum may stand from the exact one (ops/accumulation.py, docs/allowances.md; the allowance file,
checked against its sha256 when read), and verify does not re-read the case for it. It is judged against
max(|golden|, allowance / T): an error within the allowance is within the standard's T.

The blocks' reference depends only on the case's inputs and attributes, which its manifest's digest covers (with
the inputs' checksums): a process that judges a case again (the defect matrix, a library caller judging one
suite under several standards or dumps) finds it in a memo of bounded size instead of evaluating it again.
"""

from __future__ import annotations

import numpy as np

from ..casedir import manifest as M
from ..golden.rows import finite_blocks, reference_blocks, widened
from .memo import Memo
from ..pipeline.stages import block_at, gather_blocks, geometry
from ..tensor.wholefiles import LoadedFile


def rows_relief(m: M.CaseManifest, out: M.TensorEntry, files: dict, flat: np.ndarray, limit: float,
                last: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(term scale, where the device may differ, the device's value there, the error a correct kernel shares
    with the element's row: Reference.shared) of logical elements `flat` of output `out`. files: input name ->
    an open storage reader; limit: the standard's relative limit per element (T), which an across-rows
    output's allowance is divided by. last: a dict the caller keeps for one case, holding the blocks of the previous
    call and the reference and edges of every output on them: a row longer than a chunk is flagged chunk after
    chunk, a failing case's outputs are relieved one after the other and judged again with every element
    (Options.relieve_all), and the blocks' reference is evaluated once for all of them."""
    if out.name in m.op.family.across_rows:
        with np.errstate(all="ignore"):  # (T below 2^-100 counts as 2^-100: a subnormal T would make the
            #                                 divisor infinite and every error 0, or below float32's range)
            scale = across_allowance(m, out)[flat] / max(limit, 2.0**-100)
        return scale, np.zeros(flat.size, bool), np.full(flat.size, np.nan), np.zeros(flat.size)
    if flat.size == 0:  # (nothing flagged in this piece)
        return np.zeros(0), np.zeros(0, bool), np.zeros(0), np.zeros(0)
    geo = geometry(m)
    block_of, inside, size = block_at(m, out.name, geo, flat)  # (a per-row output: one value per block)
    wanted, among = _distinct(block_of)
    key = wanted.tobytes()
    known = last if last is not None and last.get("key") == key else MEMO.get(m, key) or {}
    if out.name not in known.get("refs", ()) and m.op.reference_at is not None \
            and (m.op.edge is None or m.op.edge_at is not None) \
            and (m.op.reference_at_share >= 1
                 or _asked(last, key, out.name, flat.size) <= m.op.reference_at_share * wanted.size * size):
        got = _relief_at(m, out, files, geo, wanted, among * size + inside, limit, last)
        if got is not None:
            return got
    if last is not None:
        last.pop("at", None)  # (_relief_at's blocks let go before the blocks' whole reference is made)
    if out.name in known.get("refs", ()):
        found = known
    elif out.name in known.get("spare", ()):  # (made with another output's reference, and kept for this one)
        found = _for_output(known, out.name, wanted.size)
        MEMO.put(m, (key,), found, _nbytes(found))
    else:
        blocks = _gather_wanted(m, files, geo, wanted)
        with np.errstate(all="ignore"):
            refs = reference_blocks(m.op, blocks, m.attribute_values)
            edges = _edges(m, blocks)
            # (the other outputs' references are kept as spares where they are small together: a failing case's
            # outputs are relieved one after the other, and the reference makes them all at once; beyond that an
            # output of whole rows is let go, as it would double the memory)
            found = _for_output({"key": key, "refs": refs, "edges": edges}, out.name, wanted.size,
                                spares=_refs_nbytes(refs) <= KEEP_EVERY_OUTPUT)
        MEMO.put(m, (key,), found, _nbytes(found))
    if last is not None and found is not last:
        last.clear()
        last.update(found)
    ref = found["refs"][out.name]
    edges = None if found["edges"] is None else found["edges"].get(out.name)
    with np.errstate(all="ignore"):
        at = among * size + inside
        scale = ref.scale.reshape(-1)[at]
        if ref.allowance is not None:  # (a sum's derived allowance: within it is within the standard's T)
            scale = np.broadcast_to(ref.allowance, ref.value.shape).reshape(-1)[at] / max(limit, 2.0**-100)
        shared = np.zeros(flat.size) if ref.shared is None else np.broadcast_to(ref.shared, ref.value.shape).reshape(-1)[at]
        where, device = np.zeros(flat.size, bool), np.full(flat.size, np.nan)
        if edges is not None:
            w, d = edges
            where = np.asarray(w, bool).reshape(-1)[at]
            device = np.asarray(d, np.float64).reshape(-1)[at]
    return scale, where, device, shared


def _distinct(block_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct blocks, sorted; each element's place among them). Flagged elements come in flat order, and
    where the blocks lie in that order too (a row per block along the last axis) no sort is needed."""
    if block_of.size and not (block_of[1:] < block_of[:-1]).any():
        first = np.empty(block_of.size, bool)
        first[0] = True
        np.not_equal(block_of[1:], block_of[:-1], out=first[1:])
        return block_of[first], np.cumsum(first) - 1
    wanted, among = np.unique(block_of, return_inverse=True)
    return wanted, among.reshape(-1)


MEMO = Memo(64 << 20)  # (op, digest, blocks) -> a rows_relief `found`
KEEP_EVERY_OUTPUT = 8 << 20  # bytes of the blocks' references up to which the other outputs' are kept as spares


def _for_output(found: dict, name: str, per_block: int, spares: bool = True) -> dict:
    """`found` as an evaluation for output `name` keeps it: in "refs" name's reference and those of one value per
    block (the case's other outputs' relief does not make these), the others' in "spare" (none if not `spares`).
    A spare answers only where the blocks' whole reference would be made: the choice of reference_at stays what
    it was, whatever was made before."""
    every = {**found["refs"], **found.get("spare", {})}
    refs = {k: r for k, r in every.items() if k == name or np.size(r.value) <= per_block}
    spare = {k: r for k, r in every.items() if k not in refs} if spares else {}
    edges = found["edges"]
    return {"key": found["key"], "refs": refs, "spare": spare,
            "edges": None if edges is None else {k: v for k, v in edges.items() if k in refs or k in spare}}


def _asked(last: dict | None, key: bytes, name: str, flagged: int) -> int:
    """How many elements of output `name` on the blocks `key` relief has been asked for in this case, these `flagged`
    included. A defect that flags every element of one large contraction asks chunk after chunk, each chunk under
    the share, and the elements' own dot products, taken chunk after chunk, cost several times the whole reference
    made once (decision 246). Past op.reference_at_share of the blocks' elements, the whole reference is made and
    kept (an op whose share is 1, cheaper element by element at any share, is never counted)."""
    if last is None:
        return flagged
    seen = last.get("asked")
    total = flagged + (seen[2] if seen is not None and seen[:2] == (key, name) else 0)
    last["asked"] = (key, name, total)
    return total


def _nbytes(found: dict) -> int:
    arrays = [a for pair in (found["edges"] or {}).values() for a in pair]
    refs = {**found["refs"], **found.get("spare", {})}
    return _refs_nbytes(refs) + sum(np.asarray(a).nbytes for a in arrays if a is not None)


def _refs_nbytes(refs: dict) -> int:
    arrays = [a for r in refs.values() for a in (r.value, r.bound, r.scale, r.allowance, r.shared)]
    return sum(np.asarray(a).nbytes for a in arrays if a is not None)


def _relief_at(m: M.CaseManifest, out: M.TensorEntry, files: dict, geo, wanted: np.ndarray, at: np.ndarray,
               limit: float, last: dict | None = None) -> tuple | None:
    """rows_relief's answer from op.reference_at at the flagged elements `at` (flat positions in the blocks
    `wanted`), where a block is a whole contraction (a few dot products, not the whole tensor's) or a channel whose
    elements each depend on their own values and the channel's (op.edge_at: the edge there too). None where a
    block holds a non-finite input (reference_blocks' IEEE path, bound 0, judges those). last (rows_relief's):
    keeps the widened blocks for the next call on the same blocks: one 4096 x 4096 matrix product is one block,
    flagged in every chunk, and gathering it chunk after chunk was nine tenths of its verify."""
    key = wanted.tobytes()
    held = None if last is None else last.get("at")
    if held is not None and held[0] == key:
        wide, finite = held[1], held[2]
    else:
        narrow = getattr(m.op.reference_at, "narrow_blocks", False)  # (ops/base.narrow_blocks: taken as stored)
        wide = _gather_wanted(m, files, geo, wanted, views=narrow)
        finite = bool(finite_blocks(m.op, wide).all())
        if not narrow:
            wide = widened(wide)
        if last is not None:
            last["at"] = (key, wide, finite)
    if not finite:
        return None
    t, asked = {**wide, **m.attribute_values}, {out.name: at}
    with np.errstate(all="ignore"):
        ref = m.op.by_output(m.op.reference_at(t, asked))[out.name]
        scale = ref.scale if ref.allowance is None else ref.allowance / max(limit, 2.0**-100)
        edges = None if m.op.edge_at is None else m.op.by_output(m.op.edge_at(t, asked)).get(out.name)
    shared = np.zeros(at.size) if ref.shared is None else np.asarray(ref.shared, np.float64)
    where, device = np.zeros(at.size, bool), np.full(at.size, np.nan)
    if edges is not None:  # (as rows_relief reads the blocks' edges)
        where, device = np.asarray(edges[0], bool).reshape(-1), np.asarray(edges[1], np.float64).reshape(-1)
    return np.asarray(scale, np.float64), where, device, shared


def _edges(m: M.CaseManifest, blocks: dict) -> dict | None:
    """The op's edge results on these blocks (output name -> (where, device value)), or None."""
    if m.op.edge is None:
        return None
    return m.op.by_output(m.op.edge({**widened(blocks), **m.attribute_values}))


def _gather_wanted(m: M.CaseManifest, files: dict, geo, wanted: np.ndarray,
                   views: bool = False) -> dict[str, np.ndarray]:
    """The blocks `wanted` (sorted, unique), gathered a run of consecutive blocks at a time (a block at a
    time is a Python call per row: a defect that flags every row made relief the bulk of verify). views: as
    gather_blocks' (a narrow reference_at reads a few rows and columns of them)."""
    cuts = np.flatnonzero(np.diff(wanted) != 1) + 1
    pieces = [gather_blocks(m, files, geo, int(run[0]), int(run[-1]) + 1, views=views)
              for run in np.split(wanted, cuts)]
    if len(pieces) == 1:
        return pieces[0]
    return {k: np.concatenate([p[k] for p in pieces]) for k in pieces[0]}


def across_allowance(m: M.CaseManifest, out: M.TensorEntry) -> np.ndarray:
    """The recorded allowance of an across-rows output (float64 per element), its checksum checked."""
    if out.allowance_path is None:
        raise ValueError(f"{out.name}: no allowance file recorded (gen wrote this case before allowances were "
                         f"derived from the computation: run gen again)")
    f = LoadedFile(out.allowance_path, np.float64, out.layout.numel, sha256=m.recorded_sha256(out.name, "allowance_sha256"),
                   what=f"{out.name} allowance")
    try:
        values = np.array(f.map)
        f.check_sha256()
    finally:
        f.close()
    return values
