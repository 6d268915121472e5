"""Inputs an op derives from its other inputs (OpSpec.derived; a fill {derived: true}): MaxPool's indices, the
forward's argmax of self. They cannot be drawn element by element: gen writes every other input first, then reads
them back block by block as the op's functions take them (the family's blocks, docs/families.md) and writes the
derived input's blocks where its own geometry puts them. The bytes follow from the other inputs' bytes, so they do
not depend on the chunk size or the worker count either."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..casedir import manifest as M
from ..pipeline.stages import block_chunks, gather_blocks, geometry, own_geometry, write_blocks
from ..tensor.storage import CHUNK, StorageFile
from .rows import widened

KIND = "derived"


def is_derived(t) -> bool:
    """A case's input whose values the op computes (its fill is {derived: true})."""
    return t.role == "input" and not t.null and t.fill.kind == KIND


def derive_inputs(case, tmp: Path, chunk: int = CHUNK) -> None:
    """Write each derived input of `case` from the other inputs in `tmp` (already written)."""
    derived = [t for t in case.inputs if is_derived(t)]
    if not derived:
        return
    op, geo, attrs = case.op, geometry(case), dict(case.attribute_values)
    sources = {t.name: StorageFile(tmp / M.input_file(t.name), t.dtype.np_dtype, t.layout.storage_size)
               for t in case.inputs if not t.null and not is_derived(t)}
    outs = {t.name: StorageFile(tmp / M.input_file(t.name), t.dtype.np_dtype, t.layout.storage_size, writable=True)
            for t in derived}
    try:
        for b0, b1 in block_chunks(geo, 0, geo.a1, chunk):
            blocks = widened(_sources_only(case, sources, geo, b0, b1))
            for t in derived:
                values = np.asarray(op.derived[t.name]({**blocks, **attrs}))
                own = own_geometry(case, t.name, geo) or geo
                want = (b1 - b0, own.r, own.a0)
                if values.size != (b1 - b0) * own.block:
                    raise ValueError(f"{op.name}: derived {t.name} returned {list(values.shape)} for blocks "
                                     f"{list(want)}")
                if t.dtype.is_integer:
                    lo, hi = t.dtype.int_range
                    if values.size and (values.min() < lo or values.max() > hi):
                        raise ValueError(f"{op.name}: derived {t.name} holds values outside {t.dtype.name}")
                write_blocks(case, t, outs[t.name], geo, b0, b1, values.astype(t.dtype.np_dtype))
    finally:
        for f in (*sources.values(), *outs.values()):
            f.close()


def _sources_only(case, files: dict, geo, b0: int, b1: int) -> dict:
    """gather_blocks of the inputs a derivation reads (the derived ones are not written yet)."""

    class _Only:  # (gather_blocks reads m.inputs, m.tensors and m.op: a view of the case without the derived)
        op, tensors, attribute_values = case.op, case.tensors, case.attribute_values
        inputs = tuple(t for t in case.inputs if not is_derived(t))

    return gather_blocks(_Only, files, geo, b0, b1)
