"""A user op, declared outside aclnn-cli (the worked example of docs/adding-an-op.md).

aclnnMyHardtanhBackward(gradOutput, self, min, max, out): out = gradOutput where min < self < max,
else 0. Load it with `aclnn-cli --ops tests/user_ops/my_hardtanh_backward.py gen ...`. The "My" keeps it
clear of a bundled op of the same name (a name registered twice is an error).

Only the required parts are given: the signature, attributes, products and a float64 reference.
With no `exact`, goldens are the float64 value, and where its bound is not enough the reference
run on Fractions (certified where it is rational, as here: dy or 0). With no `kernel`, emulate plays the reference.
"""

from __future__ import annotations

import numpy as np

from aclnn_cli.ops import AttrSpec, OpSpec, Reference, TensorSpec, defect, register


def reference(t):
    """dy inside the open window (min, max), else +0; exact in float64, so the bound is 0."""
    x, dy = t["self"], t["gradOutput"]
    with np.errstate(invalid="ignore"):
        inside = (x > t["min"]) & (x < t["max"])
    value = np.where(inside, dy, 0.0)
    return Reference(value, np.zeros_like(value), np.abs(dy))


@defect
def _inclusive(t):
    """Defect: the window closed at both ends (x == min or x == max passes dy)."""
    x = t["self"]
    return np.where((x >= t["min"]) & (x <= t["max"]), t["gradOutput"], 0.0).astype(x.dtype)


SPEC = register(OpSpec(
    name="aclnnMyHardtanhBackward",
    key="my_hardtanh_backward",
    summary="Gradient of hardtanh (clamp to [min, max]).",
    formula="out = gradOutput where min < self < max, else 0",
    tensors=(TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
             TensorSpec("self", "input", {"uniform": [-2, 2]}),
             TensorSpec("out", "output", {"constant": 0})),
    attributes=(AttrSpec("min", "scalar", default=-1.0), AttrSpec("max", "scalar", default=1.0)),
    products={"A2": ("float32", "float16", "bfloat16")},
    dims=(0, 8),
    empty_ok=True,
    reference=reference,
    variants={"inclusive-window": _inclusive},
))
