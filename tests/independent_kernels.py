"""An independent float32 implementation of the four ops (not aclnn_cli's code, not its formulas' order).

Computes in float32 and rounds once to the output dtype, to nearest even,
the way a correct device kernel does. Used to show the default gate passes
a correct kernel that is not our emulator.
"""

from __future__ import annotations

import numpy as np

F = np.float32


def silu(dy, x):
    sig = F(1) / (F(1) + np.exp(-x))
    return dy * sig * (F(1) + x * (F(1) - sig))


def fast_gelu(dy, x):
    z = F(1.702) * x
    sig = F(1) / (F(1) + np.exp(-z))
    return dy * (sig + z * sig * (F(1) - sig))


def log_sigmoid(dy, x):
    return dy / (F(1) + np.exp(x))


def hardsigmoid(dy, x):
    return np.where((x > F(-3)) & (x < F(3)), dy / F(6), F(0))


KERNELS = {
    "aclnnSiluBackward": silu,
    "aclnnFastGeluBackward": fast_gelu,
    "aclnnLogSigmoidBackward": log_sigmoid,
    "aclnnHardsigmoidBackward": hardsigmoid,
}


def run(op_name: str, inputs: dict, tensors: dict) -> np.ndarray:
    """Compute in float32; round once to the output dtype (Hardsigmoid: through the promoted dtype)."""
    from aclnn_cli import dtypes as D

    dy, x = inputs["gradOutput"], inputs["self"]
    out = next(t for t in tensors.values() if t["role"] == "output")
    out_dtype = D.lookup(out["dtype"]).np_dtype
    with np.errstate(all="ignore"):
        result = KERNELS[op_name](dy.astype(F), x.astype(F))
        if op_name == "aclnnHardsigmoidBackward" and dy.dtype == x.dtype:
            result = result.astype(dy.dtype).astype(F)
        return result.astype(out_dtype)
