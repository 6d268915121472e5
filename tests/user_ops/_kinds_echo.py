"""aclnnKindsEcho(gradOutput, self, eps, momentum, out): a test op taking a C double (eps) and a C float
(momentum), as aclnnBatchNormBackward takes `double eps`. out = gradOutput * momentum + eps.

`aclnn-cli --ops tests/user_ops/_kinds_echo.py ...` (a _ name: loading tests/user_ops as a folder skips it).
Its header (include/aclnnop/aclnn_kinds_echo.h) and an implementation that prints the bits it receives
(src/kinds_echo.cpp) let tests/test_kinds_float.py check that the runner passes each value exactly.
"""

from __future__ import annotations

import numpy as np

from aclnn_cli.ops import AttrSpec, OpSpec, Reference, TensorSpec, register

U = 2.0**-53


def reference(t):
    """Two float64 roundings (the product, the sum), each within U of its result."""
    product = t["gradOutput"] * t["momentum"]
    value = product + t["eps"]
    return Reference(value, 2 * U * (np.abs(product) + abs(t["eps"])), np.abs(product) + abs(t["eps"]))


def exact(t):
    return t["gradOutput"] * t["momentum"] + t["eps"]


SPEC = register(OpSpec(
    name="aclnnKindsEcho", key="kinds_echo", summary="A C double and a C float argument.",
    formula="out = gradOutput * momentum + eps",
    tensors=(TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
             TensorSpec("self", "input", {"uniform": [-1, 1]}, read_by_kernel=False),
             TensorSpec("out", "output", {"constant": 0})),
    attributes=(AttrSpec("eps", "double", default=1e-5), AttrSpec("momentum", "float", default=0.1)),
    products={"A2": ("float32", "float16", "bfloat16")}, dims=(0, 8), empty_ok=True,
    reference=reference, exact=exact,
))
