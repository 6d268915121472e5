"""Which dtype's thresholds judge an output, and the relative-error floor (shared by the comparison and
the element descriptions)."""

from __future__ import annotations

from ..casedir import manifest as M
from ..tensor.dtypes import DType
from ..ops.contract import compute_dtype


def tolerance_dtype(m: M.CaseManifest, out: M.TensorEntry | None = None) -> tuple[DType, float]:
    """(dtype whose thresholds apply, relative-error floor).

    A result rounded through a narrower compute dtype (Hardsigmoid's promoted type) can be no
    more precise than it: thresholds follow the coarser precision, the floor the larger one.
    """
    out = out or m.output
    key = (m.op.name, out.name, tuple(t.dtype.name for t in m.tensors))
    if key not in _TOLERANCE_DTYPES:
        dtype = out.dtype
        # (a Rows op's outputs are each rounded once from float32 to their own dtype: no compute dtype between)
        inner = dtype if m.op.family.rounded_once else compute_dtype(m.op, {t.name: t.dtype for t in m.tensors})
        _TOLERANCE_DTYPES[key] = (min((dtype, inner), key=lambda d: d.precision),
                                  max(dtype.smallest_normal, inner.smallest_normal))
    return _TOLERANCE_DTYPES[key]


_TOLERANCE_DTYPES: dict[tuple, tuple[DType, float]] = {}  # per (op, tensor dtypes): thousands of cases share a few
