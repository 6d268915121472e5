"""emulate: play the device. Each output's dump is computed the way the kernel computes it.

16-bit inputs are widened to float32, the op's float32 kernel runs, and the
result is cast back with the kernel's rounding mode (REFERENCE.md section 3).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from . import manifest as M
from .dtypes import round_from_f32
from .storage import CHUNK, chunks, open_storage, read_view, write_view


def kernel_output(m: M.CaseManifest, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The device result for one chunk of logical elements, in the output dtype."""
    wide = {k: v.astype(np.float32) for k, v in inputs.items()}
    with np.errstate(all="ignore"):
        result = m.op.kernel(wide)
    out = m.output
    return round_from_f32(result, out.dtype, m.op.cast_mode.get(out.dtype.name, "rint"))


def emulate_case(m: M.CaseManifest, chunk: int = CHUNK) -> Path | None:
    """Write the output dump of one case (returns its path; None for negative cases)."""
    out = m.output
    if out.dump is None:
        return None
    ins = {t.name: open_storage(t.file, t.dtype.np_dtype, t.layout.storage_size, f"input {t.name}") for t in m.inputs}
    tmp = out.dump.with_name(f".{out.dump.name}.tmp-{os.getpid()}")
    shutil.copyfile(out.file, tmp)  # the device writes into the initial output storage
    try:
        if out.layout.numel:
            dump = np.memmap(tmp, dtype=out.dtype.np_dtype, mode="r+", shape=(out.layout.storage_size,))
            for start, stop in chunks(out.layout.numel, chunk):
                values = {t.name: read_view(ins[t.name], t.layout, start, stop) for t in m.inputs}
                write_view(dump, out.layout, start, stop, kernel_output(m, values))
            dump.flush()
            del dump
        os.replace(tmp, out.dump)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out.dump
