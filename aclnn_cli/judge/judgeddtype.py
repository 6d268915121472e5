"""Which dtype's thresholds judge an output, and the relative-error floor (shared by the comparison and
the element descriptions)."""

from __future__ import annotations

from ..casedir import manifest as M
from ..tensor.dtypes import DType
from ..ops.contract import rounded_through, roundings


def tolerance_dtype(m: M.CaseManifest, out: M.TensorEntry | None = None) -> tuple[DType, float]:
    """(dtype whose thresholds apply, relative-error floor).

    A result rounded through a narrower compute dtype (Hardsigmoid's promoted type) can be no
    more precise than it: thresholds follow the coarser precision, the floor the larger one.
    """
    out = out or m.output
    dtypes = {t.name: t.dtype for t in m.tensors}
    through = rounded_through(m.op, out.name, m.attribute_values, dtypes,
                              {t.name: tuple(t.layout.shape) for t in m.tensors}) if m.op.rounded_through else None
    key = (m.op.name, out.name, tuple(t.dtype.name for t in m.tensors), through and through.name)
    if key not in _TOLERANCE_DTYPES:
        # (a Rows op's outputs are each rounded once from float32 to their own dtype: no compute dtype between,
        # unless the op says the device rounds them through a narrower one: `rounded_through`)
        ways = roundings(m.op, out.name, dtypes, through)
        _TOLERANCE_DTYPES[key] = (min(ways, key=lambda d: d.precision), max(d.smallest_normal for d in ways))
    return _TOLERANCE_DTYPES[key]


_TOLERANCE_DTYPES: dict[tuple, tuple[DType, float]] = {}  # per (op, tensor dtypes): thousands of cases share a few
