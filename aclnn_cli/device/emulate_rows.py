"""emulate for Rows-family ops: the op's float32 kernel on whole blocks, every output's dump.

16-bit inputs are widened exactly to float32 (integer inputs stay int64), the kernel runs on blocks of
about `chunk` elements, row outputs are cast to their dtype half to even (the 950 kernels' CAST_RINT) and
written as they come; outputs summed over every row are the float32 partials of the blocks added
pairwise, then cast.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..tensor import dtypes as D
from ..casedir import manifest as M
from ..golden.rows import widened
from ..pipeline.stages import block_at, block_chunks, gather_blocks, geometry, write_blocks
from ..tensor.storage import CHUNK, StorageFile, WriteError, check_file_sha256, check_size, copy_storage


class Pairwise:
    """Float32 partial sums added pairwise as they arrive (a binary counter: O(log n) arrays held)."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, np.ndarray]] = []

    def add(self, x: np.ndarray) -> None:
        level = 0
        while self._stack and self._stack[-1][0] == level:
            x = self._stack.pop()[1] + x
            level += 1
        self._stack.append((level, x))

    def total(self, size: int) -> np.ndarray:
        acc = np.zeros(size, dtype=np.float32)
        for i, (_, x) in enumerate(reversed(self._stack)):
            acc = x if i == 0 else x + acc
        return acc


def kernel_blocks(m: M.CaseManifest, blocks: dict, variant=None) -> dict[str, np.ndarray]:
    """The kernel's float32 results for whole blocks, per output (a defect's, with a variant)."""
    op = m.op
    kernel, wide_type = op.kernel or _reference_value(op), np.float32
    if variant is not None:
        if variant.op_kernel and variant.name in op.variants:
            kernel = op.variants[variant.name]
        if variant.compute == "float64":
            wide_type = np.float64
        elif variant.compute == "float16-native" and any(t.dtype is D.FLOAT16 for t in m.inputs):
            wide_type = np.float16
        if variant.swap_inputs:
            a, b = (t.name for t in op.inputs[:2])
            if a in blocks and b in blocks and blocks[a].shape == blocks[b].shape:
                blocks = {**blocks, a: blocks[b], b: blocks[a]}
    with np.errstate(all="ignore"):
        wide = widened(blocks, wide_type)
        attrs = {k: wide_type(v) if isinstance(v, float) else v for k, v in m.attribute_values.items()}
        result = op.by_output(kernel({**wide, **attrs}))
        if variant is not None and variant.post is not None:
            result = {k: variant.post(np.asarray(v)) for k, v in result.items()}
        return {k: np.asarray(v).astype(np.float32) for k, v in result.items()}


def _reference_value(op):
    return lambda t: {k: r.value for k, r in op.by_output(op.reference(t)).items()}


def cast_output(values: np.ndarray, dtype: D.DType, variant=None) -> np.ndarray:
    cast = variant.cast if variant is not None and variant.cast is not None else D.round_from_f32
    with np.errstate(all="ignore"):
        return D.canonical_nans(np.asarray(cast(np.asarray(values, dtype=np.float32), dtype, "rint")))


def emulate_rows_case(m: M.CaseManifest, chunk: int = CHUNK, variant=None) -> None:
    """Every non-null output's dump, each written to a temporary name and renamed when all are done."""
    outs = m.judged
    for t in (*[i for i in m.inputs if not i.null], *outs):
        check_size(t.file, t.dtype.np_dtype, t.layout.storage_size, f"input {t.name}" if t.role == "input" else
                   "initial output storage")
    tmps = {t.name: t.dump.with_name(f".{t.dump.name}.tmp-{os.getpid()}") for t in outs}
    try:
        for t in outs:
            copy_storage(t.file, tmps[t.name])  # the device writes into the initial output storage
            if not t.layout.is_contiguous:
                check_file_sha256(tmps[t.name], m.recorded_sha256(t.name), "initial output storage")
        _compute(m, tmps, chunk, variant)
        for t in outs:
            try:
                os.replace(tmps[t.name], t.dump)
            except OSError as exc:
                raise WriteError(f"cannot write: {exc.strerror}", where=str(t.dump)) from None
    except BaseException:
        for p in tmps.values():
            p.unlink(missing_ok=True)
        raise


def _compute(m: M.CaseManifest, tmps: dict[str, Path], chunk: int, variant) -> None:
    geo = geometry(m)
    across_names = set(m.op.family.across_rows)
    outs = {t.name: t for t in m.judged}
    ins = {t.name: StorageFile(t.file, t.dtype.np_dtype, t.layout.storage_size, what=f"input {t.name}",
                               sha256=m.recorded_sha256(t.name)) for t in m.inputs if not t.null}
    dumps = {n: StorageFile(p, outs[n].dtype.np_dtype, outs[n].layout.storage_size, writable=True)
             for n, p in tmps.items()}
    sums = {n: Pairwise() for n in outs if n in across_names}
    write = variant.write if variant is not None and variant.write is not None else None
    try:
        for b0, b1 in block_chunks(geo, 0, geo.a1, max(chunk, m.op.family.kernel_chunk)):
            result = kernel_blocks(m, gather_blocks(m, ins, geo, b0, b1), variant)
            for name, t in outs.items():
                if name in sums:
                    sums[name].add(result[name].reshape(-1))
                    continue
                values = cast_output(result[name].reshape(-1), t.dtype, variant)
                write_blocks(m, t, dumps[name], geo, b0, b1, values, write)
        for name, acc in sums.items():
            t = outs[name]
            values = cast_output(acc.total(t.layout.numel), t.dtype, variant)
            if write is None:
                dumps[name].write(t.layout, 0, t.layout.numel, values)
            else:
                write(dumps[name].map, t.layout, 0, t.layout.numel, values)
        for f in ins.values():
            f.check_sha256()
    finally:
        for f in (*ins.values(), *dumps.values()):
            f.close()


def emulated_range(m: M.CaseManifest, out: M.TensorEntry, files: dict | None, start: int, stop: int) -> np.ndarray:
    """The emulated device's values of output elements [start, stop), in the output dtype (for the bitwise
    and benchmark standards): the blocks holding them for a row output, every block for an across-rows one.
    files: input name -> an open reader (None: opened here)."""
    geo = geometry(m)
    own = files is None
    if own:
        files = {t.name: StorageFile(t.file, t.dtype.np_dtype, t.layout.storage_size, what=f"input {t.name}")
                 for t in m.inputs if not t.null}
    try:
        if out.name in m.op.family.across_rows:
            acc = Pairwise()
            for b0, b1 in block_chunks(geo, 0, geo.a1, CHUNK):
                acc.add(kernel_blocks(m, gather_blocks(m, files, geo, b0, b1))[out.name].reshape(-1))
            return cast_output(acc.total(out.layout.numel), out.dtype)[start:stop]
        block, at, size = block_at(m, out.name, geo, np.arange(start, stop, dtype=np.int64))
        b0, b1 = int(block.min(initial=0)), int(block.max(initial=-1)) + 1
        values = kernel_blocks(m, gather_blocks(m, files, geo, b0, b1))[out.name].reshape(-1)
        return cast_output(values[(block - b0) * size + at], out.dtype)
    finally:
        if own:
            for f in files.values():
                f.close()
