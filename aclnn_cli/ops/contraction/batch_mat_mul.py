"""aclnnBatchMatMul: out[b] = self[b] @ mat2[b], self (B, M, K), mat2 (B, K, N), out (B, M, N).

hicann/ops-nn matmul/batch_mat_mul_v3/docs/aclnnBatchMatMul.md: 3-d tensors only; the first axis is the batch,
the last two multiplied; self's last axis equals mat2's middle one (161002 otherwise); out (B, M, N); float32,
float16, bfloat16 (950, A3, A2); cubeMathType (int8_t): 0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION (float32 as
HFLOAT32), 2 USE_FP16 (float32 as float16), 3 USE_HF32; 16-bit inputs are computed as they are whatever the value.
The op_api (op_host/op_api/aclnn_batch_matmul.cpp, CheckShape) refuses non-3-d tensors, a K mismatch, batches
that differ with neither 1, and an out of another shape.

Not here yet (docs/families.md, Contraction): a batch of 1 broadcast against the other operand's, mixed dtypes
(float16 inputs with a float32 out on the 950), the 910 and 310P products (no bfloat16, no KEEP_DTYPE for
float32). cubeMathType is declared an `int` (int64_t) attribute: the header's int8_t takes it by conversion.

The golden is the exact product rounded once (ops/contraction/dots.py); where cubeMathType lets the cube round
float32 operands to HFLOAT32 or float16 (11 significant bits), the allowance takes in what that rounding can move
the product (2^-10 of each changed operand value's share of |A|.|B|, truncation or rounding); the kernel is the
950's cube (ops/contraction/cube.py) and does not round them.
"""

from __future__ import annotations

import numpy as np

from ...tensor.dtypes import BFLOAT16
from ..base import AttrSpec, Contract, OpSpec, Reference, TensorSpec, defect, legitimate, products
from ..families import Contraction
from ..registry import register
from . import cube, dots

SELF, MAT2, OUT, MATH = "self", "mat2", "out", "cubeMathType"
KEEP_DTYPE, USE_FP16 = 0, 2
NARROW = 2.0**-10  # an operand rounded to 11 significant bits (HFLOAT32, float16), truncated or rounded


def _eleven_bits(x: np.ndarray) -> np.ndarray:
    """Values with at most 11 significant bits (what HFLOAT32 and float16 keep): unchanged by the cube's rounding."""
    m, _ = np.frexp(x)
    return np.ldexp(m, 11) == np.trunc(np.ldexp(m, 11))


def _fp16_exact(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return x.astype(np.float16).astype(np.float64) == x


def _reference(t) -> Reference:
    """float64 matmul, bound gamma_K |A|.|B|, scale |A|.|B|, and the allowance of the cube's float32 sum."""
    a, b = t[SELF], t[MAT2]
    value, bound, scale, allowance = dots.reference(a, b)
    math_type = int(t.get(MATH, KEEP_DTYPE))
    extra = 0.0
    if math_type != KEEP_DTYPE:  # (16-bit operands are 11-bit values already: nothing changes for them)
        extra = dots.input_rounding_error(a, b, _fp16_exact if math_type == USE_FP16 else _eleven_bits, NARROW)
    return Reference(value, bound, scale, allowance=allowance + extra)


def _exact_at(t, wanted):
    return {OUT: dots.exact_at(t[SELF], t[MAT2], wanted[OUT])}


def _exact(t):
    return dots.exact(t[SELF], t[MAT2])


def _kernel(t):
    """The 950's cube (ops/contraction/cube.py): mmad steps of 16 along K into L0C in float32, rounds of at most
    8192 for a long K added in order."""
    return cube.cube(t[SELF], t[MAT2])


def _ieee(t):
    return dots.ieee(np.asarray(t[SELF], np.float64), np.asarray(t[MAT2], np.float64))


@legitimate
def _split_k(t):
    """Legitimate: K split across 8 cores, each partial accumulated on its own, added in a shuffled order."""
    return cube.split_k(t[SELF], t[MAT2])


@defect
def _not_transposed(t):
    """Defect: mat2's transpose flag misread (its elements read in the other order)."""
    return cube.not_transposed(t[SELF], t[MAT2])


@defect
def _tail_dropped(t):
    """Defect: the last K % 16 values of K dropped."""
    return cube.tail_dropped(t[SELF], t[MAT2])


@defect
def _fp16_accumulation(t):
    """Defect: the products accumulated in float16."""
    return cube.narrow_accumulator(t[SELF], t[MAT2], np.float16)


@defect
def _bf16_accumulation(t):
    """Defect: the products accumulated in bfloat16."""
    return cube.narrow_accumulator(t[SELF], t[MAT2], BFLOAT16.np_dtype)


@defect
def _halved(t):
    """Defect: the result halved (a scale applied twice)."""
    return cube.cube(t[SELF], t[MAT2]) * np.float32(0.5)


@defect
def _zeros(t):
    """Defect: the output never computed (zeros)."""
    return np.zeros((t[SELF].shape[0], t[SELF].shape[1], t[MAT2].shape[2]), dtype=np.float32)


VARIANTS = {"bmm-split-k": _split_k, "bmm-not-transposed": _not_transposed, "bmm-k-tail-dropped": _tail_dropped,
            "bmm-fp16-accumulation": _fp16_accumulation, "bmm-bf16-accumulation": _bf16_accumulation,
            "bmm-halved": _halved, "bmm-zeros": _zeros}


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


SPEC = register(OpSpec(
    name="aclnnBatchMatMul",
    key="batch_mat_mul",
    header="aclnnop/aclnn_batch_matmul.h",
    signature=(SELF, MAT2, OUT, MATH),
    summary="Batched matrix product of 3-d tensors, out[b] = self[b] @ mat2[b].",
    formula="out[b, m, n] = sum over k of self[b, m, k] * mat2[b, k, n]",
    tensors=(
        TensorSpec(SELF, "input", {"normal": [0, 1]}),
        TensorSpec(MAT2, "input", {"normal": [0, 1]}),
        TensorSpec(OUT, "output", {"constant": 0}),
    ),
    attributes=(AttrSpec(MATH, "int", default=KEEP_DTYPE),),
    products=products("950", "A3", "A2"),
    dims=(3, 3),
    empty_ok=False,
    family=Contraction(driver=SELF, right=MAT2, out=OUT),
    reference=_reference,
    exact=_exact,
    exact_at=_exact_at,
    kernel=_kernel,
    ieee=_ieee,
    variants=VARIANTS,
    contract=Contract(dtypes="same", shape_rule=_shape_rule),
    special_values="The doc defines none; IEEE sums of products: an inf meeting a 0 gives NaN, infinities of both "
                   "signs in one sum give NaN, NaN reaches its row of out (self) or column (mat2).",
))
