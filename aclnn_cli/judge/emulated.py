"""The emulated kernel's values of a range of an output, for the standards that judge against them (bitwise) or
beside them (benchmark): kept per process, so that a case judged under both, or by every row of the defect matrix,
emulates each range once.

What the emulator computes depends only on the op and the case's inputs and attributes (judge/memo.py): the memo
keys on them, the output and the range.
"""

from __future__ import annotations

import numpy as np

from ..casedir import manifest as M
from ..pipeline.stages import gather_inputs
from .memo import Memo

MEMO = Memo(64 << 20)  # (op, digest, output, start, stop) -> the values


def emulated(m: M.CaseManifest, out: M.TensorEntry, inputs, start: int, stop: int) -> np.ndarray:
    """The emulated device's values of `out`'s logical elements [start, stop) (inputs: name -> an open reader)."""
    values = MEMO.get(m, out.name, start, stop)
    if values is not None:
        return values
    if not m.op.family.element_local:
        from ..device.emulate_rows import emulated_range

        values = emulated_range(m, out, inputs, start, stop)
    else:
        from ..device.emulate import kernel_output

        values = kernel_output(m, gather_inputs(m, inputs, start, stop))
    values.flags.writeable = False  # (kept: shared by every later caller, none may change it)
    MEMO.put(m, (out.name, start, stop), values, values.nbytes)
    return values
