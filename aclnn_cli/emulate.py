"""emulate: play the device. Phase one returns the contract's status; phase two computes like the kernel.

16-bit inputs are widened to float32, the op's float32 kernel runs, and the
result is cast to the compute dtype with the kernel's rounding mode
(REFERENCE.md section 3); where the output dtype differs (Hardsigmoid's
promotion), a final Cast rounds to it to nearest even, as l0op::Cast does.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Mapping

import numpy as np

from . import dtypes as D
from . import manifest as M
from .defects import Variant
from .ops.contract import compute_dtype
from .storage import CHUNK, atomic_write_text, chunks, gather, open_storage, write_view


def kernel_output(m: M.CaseManifest, inputs: Mapping[str, np.ndarray], variant: Variant | None = None) -> np.ndarray:
    """The device result for one chunk of logical elements, in the output dtype (optionally a defect's)."""
    inner = compute_dtype(m.op, {t.name: t.dtype for t in m.tensors})
    kernel, wide_type = m.op.kernel, np.float32
    if variant is not None:
        if variant.op_kernel and variant.name in m.op.variants:
            kernel = m.op.variants[variant.name]
        if variant.compute == "float64":
            wide_type = np.float64
        elif variant.compute == "float16-native" and inner is D.FLOAT16:
            wide_type = np.float16
        if variant.swap_inputs:
            inputs = {**inputs, "gradOutput": inputs["self"], "self": inputs["gradOutput"]}
    with np.errstate(all="ignore"):
        wide = {k: v.astype(wide_type) for k, v in inputs.items()}
        result = kernel(wide)
        if variant is not None and variant.post is not None:
            result = variant.post(result)
        result = np.asarray(result).astype(np.float32)
        mode = m.op.cast_mode.get(inner.name, "rint")
        cast = variant.cast if variant is not None and variant.cast is not None else D.round_from_f32
        result = cast(result, inner, mode)
        if inner != m.output.dtype:
            result = D.round_from_f32(result.astype(np.float32), m.output.dtype)
    return result


def emulate_case(m: M.CaseManifest, chunk: int = CHUNK, variant: Variant | None = None) -> Path | None:
    """Write phase one's status and, if the call succeeds, the output dump (returns the dump's path)."""
    outcome = m.phase_one()
    atomic_write_text(m.dir / M.STATUS_FILE, f"{outcome.status}\n")
    out = m.output
    if outcome.status != 0 or out.dump is None:
        return None
    ins = {t.name: open_storage(t.file, t.dtype.np_dtype, t.layout.storage_size, f"input {t.name}") for t in m.inputs}
    tmp = out.dump.with_name(f".{out.dump.name}.tmp-{os.getpid()}")
    shutil.copyfile(out.file, tmp)  # the device writes into the initial output storage
    try:
        if out.layout.numel:
            dump = np.memmap(tmp, dtype=out.dtype.np_dtype, mode="r+", shape=(out.layout.storage_size,))
            for start, stop in chunks(out.layout.numel, chunk):
                values = {t.name: gather(ins[t.name], t.layout, out.layout.shape, start, stop) for t in m.inputs}
                write = variant.write if variant is not None and variant.write is not None else write_view
                write(dump, out.layout, start, stop, kernel_output(m, values, variant))
            dump.flush()
            del dump
        os.replace(tmp, out.dump)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out.dump
