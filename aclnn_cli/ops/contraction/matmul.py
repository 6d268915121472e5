"""aclnnMatmul: out = self @ mat2 for 1-d to 6-d operands, torch.matmul's shapes (the doc states the same rules).

hicann/ops-nn matmul/mat_mul_v3/docs/aclnnMatmul.md and op_host/op_api/aclnn_matmul.cpp. self (*, M, K) or (K),
mat2 (*, K, N) or (K); the batch dims broadcast; a 1-d self is (1, K) and a 1-d mat2 (K, 1), the padded dim removed
from out; two 1-d operands give a 0-d out (the dot product). Every linear layer's dX = dY W^T and dW = X^T dY runs
on it through transposed (strided) views. The family cuts it (ops/families/contraction.py); its functions are
aclnnBatchMatMul's (ops/contraction/matmuls.py), and the graphs the op_api builds (MatMulDotGraph's l0op::Dot for
two 1-d operands, MatMulV3 for a 2-d mat2 with self's batch folded into M, BatchMatMulV3 for a mat2 of 3 dims or
more) differ in their order of float32 additions only, which the allowance covers in any order.

Phase one (aclnnMatmulGetWorkspaceSize, CheckInputParams):
- a null self, mat2 or out: 161001 (CheckNotNull);
- dtypes (Dav2201MatMulRule::CheckInput, the 950's, A3's and A2's rule, matmul/common/op_host/op_api/
  matmul_util.cpp): each of self, mat2, out FLOAT, FLOAT16 or BF16; the inputs promote (FP32 with anything is
  FP32, FP16 with BF16 is FP32: the table GetUpperDtypeByLookUpTable) and every float casts to out's dtype;
- cubeMathType in 0-4 (cube_util.cpp CheckCubeMathType; another value 161002). USE_FP16 on BF16 and USE_HF32 on
  16-bit inputs only warn (CheckCubeMathTypeForMm), where the doc says "不支持": the code is what the device runs;
- shapes (CheckShapeValid): self and mat2 of 1 to 6 dims (OP_CHECK_MAX_DIM; 0 dims refused), K equal (self's last
  dim against mat2's first when mat2 has 1 or 2 dims, its second-to-last otherwise), the batch dims (all but the
  last two) broadcasting when both have 2 dims or more;
- out's shape is never checked: the graph reshapes its result to out's view shape (CommonPostProcessWithReshape),
  which fails later (an inner error, not 161002) where the element counts differ. The family refuses such a case
  when it loads (it cannot judge it); no negative case claims a status for it.

Not declared: the 910 and 310P, which the doc lists (no BF16; float32 only with cubeMathType 1 or 2, computed in
float16; DefaultMatMulRule's table has four columns, so USE_FP32_ADD indexes past its row), and cubeMathType -1
(FP16FP32_KEEP_DTYPE, accepted on the A2 and A3 by Dav2201MatMulRule::CheckInput, refused on the 950, absent
from the doc). Empty tensors are not declared either.
"""

from __future__ import annotations

from ..base import Contract, OpSpec
from ..families.contraction import matrices
from ..registry import register
from . import matmuls
from .matmuls import MAT2, MATH, MATH_TYPES, SELF

MAX_DIMS = 6  # MAX_SUPPORT_MATMUL_DIMS_NUMS (aclnn_matmul.cpp)

VARIANTS = matmuls.variants("matmul")


def _shape_rule(descs, attrs) -> str | None:
    """CheckShapeValid (aclnn_matmul.cpp): 1 to 6 dims each, K equal, batch dims broadcasting; out unchecked."""
    s, m = (tuple(descs[n].shape) for n in (SELF, MAT2))
    for name, shape in ((SELF, s), (MAT2, m)):
        if not 1 <= len(shape) <= MAX_DIMS:
            return f"{name} has {len(shape)} dims; aclnnMatmul takes 1-{MAX_DIMS}"
    got = matrices(s, m)
    return got if isinstance(got, str) else None


def _attribute_rule(attrs) -> str | None:
    """CheckCubeMathType (cube_util.cpp): 0 KEEP_DTYPE to 4 USE_FP32_ADD."""
    value = attrs.get(MATH)
    if value not in MATH_TYPES:
        return f"cubeMathType {value} is not one of 0-4 (KEEP_DTYPE ... USE_FP32_ADD)"
    return None


SPEC = register(OpSpec(**matmuls.declared(
    name="aclnnMatmul",
    key="matmul",
    header="aclnnop/aclnn_matmul.h",
    summary="Matrix product of 1-d to 6-d tensors, out = self @ mat2 (torch.matmul's shapes, batch dims broadcast).",
    formula="out[*b, m, n] = sum over k of self[*b, m, k] * mat2[*b, k, n] (batch dims broadcast; 1-d operands padded)",
    dims=(0, MAX_DIMS),  # (out is 0-d for two 1-d operands; self and mat2 need 1 or more: the shape rule)
    variants=VARIANTS,
    contract=Contract(dtypes="promote", shape_rule=_shape_rule, attribute_rule=_attribute_rule),
)))
