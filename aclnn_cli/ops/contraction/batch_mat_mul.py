"""aclnnBatchMatMul: out[b] = self[b] @ mat2[b], self (B, M, K), mat2 (B, K, N), out (B, M, N).

hicann/ops-nn matmul/batch_mat_mul_v3/docs/aclnnBatchMatMul.md: 3-d tensors only; the first axis is the batch,
the last two multiplied; self's last axis equals mat2's middle one (161002 otherwise); out (B, M, N); float32,
float16, bfloat16 (950, A3, A2); cubeMathType (int8_t): 0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION (float32 as
HFLOAT32), 2 USE_FP16 (float32 as float16), 3 USE_HF32; 16-bit inputs are computed as they are whatever the value.
The op_api (op_host/op_api/aclnn_batch_matmul.cpp, CheckShape) refuses non-3-d tensors, a K mismatch, batches
that differ with neither 1, and an out of another shape.

A batch of 1 broadcasts against the other operand's (the family's rules, which are torch.matmul's: see
ops/families/contraction.py). Not here yet: mixed dtypes (float16 inputs with a float32 out on the 950), the 910
and 310P products (no bfloat16, no KEEP_DTYPE for float32). cubeMathType is declared an `int` (int64_t)
attribute: the header's int8_t takes it by conversion.

The functions are aclnnMatmul's too (ops/contraction/matmuls.py): the golden is the exact product rounded once
(ops/contraction/dots.py); cubeMathType's rounding of float32 operands (HFLOAT32, float16) is in the allowance,
and USE_FP16's float16 operands and result are emulated; the kernel is the 950's cube (ops/contraction/cube.py).
"""

from __future__ import annotations

from ..base import Contract, OpSpec
from ..registry import register
from . import matmuls
from .matmuls import MAT2, OUT, SELF

# (no wrong-batch: a 3-d operand broadcasts a batch of 1 only, which every index reads alike)
VARIANTS = matmuls.variants("bmm", "split-k", "not-transposed", "k-tail-dropped", "fp16-accumulation",
                            "bf16-accumulation", "halved", "zeros")


def _shape_rule(descs, attrs) -> str | None:
    """CheckShape (aclnn_batch_matmul.cpp): 3-d tensors, self's K = mat2's, batches equal or one of them 1, out
    (max batch, M, N)."""
    s, m, o = (tuple(descs[n].shape) for n in (SELF, MAT2, OUT))
    if len(s) != 3 or len(m) != 3 or len(o) != 3:
        return f"self {list(s)}, mat2 {list(m)} and out {list(o)} must be 3-d"
    if s[2] != m[1]:
        return f"self's last dim {s[2]} is not mat2's middle dim {m[1]}"
    if s[0] != m[0] and 1 not in (s[0], m[0]):
        return f"batches {s[0]} and {m[0]} differ and neither is 1"
    want = (max(s[0], m[0]), s[1], m[2])
    if o != want:
        return f"out shape {list(o)} is not {list(want)}"
    return None


SPEC = register(OpSpec(**matmuls.declared(
    name="aclnnBatchMatMul",
    key="batch_mat_mul",
    header="aclnnop/aclnn_batch_matmul.h",
    summary="Batched matrix product of 3-d tensors, out[b] = self[b] @ mat2[b].",
    formula="out[b, m, n] = sum over k of self[b, m, k] * mat2[b, k, n]",
    dims=(3, 3),
    variants=VARIANTS,
    contract=Contract(dtypes="same", shape_rule=_shape_rule),
)))
