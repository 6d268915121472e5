"""What aclnnBatchMatMul and aclnnMatmul share: their functions over the family's blocks, what cubeMathType does to
them, and their variants. Both take (self, mat2, out, cubeMathType) and reach the same cube (the op_api's
ExecBmmOpWithBiasV2 / MatmulCommonProcess, hicann/ops-nn matmul/common/op_host/op_api/), so one set of functions
serves both; each op module declares its own contract and products.

cubeMathType (matmul/common/op_host/op_api/matmul_util.cpp, Dav2201MatMulRule::GetUpperDtypeByLookUpTable, the
rule of the 950, A3 and A2; CreateMatmulOpInfo, enableHf32):

- 0 KEEP_DTYPE and 4 USE_FP32_ADD: the operands as they are. USE_FP32_ADD only changes the order of the float32
  additions (the 950 sends some float32 calls to a vector kernel, the A2 and A3 accumulate in groups past K = 2048:
  the doc): an order, inside the allowance, not emulated.
- 1 ALLOW_FP32_DOWN_PRECISION and 3 USE_HF32: float32 operands as HFLOAT32 (enableHf32): 11 significant bits.
  Its rounding (truncation or to nearest) is not in the sources: in the allowance, not emulated (decision 88).
- 2 USE_FP16: float32 operands cast to float16 (the table's FP16 for FP32+FP32), and the kernel's output dtype
  float16 too (Dav2201MatMulRule::UpdateOutputDtype returns the FP16 upper dtype under USE_FP16, and
  NeedEnableFp32Output is false for float32 inputs): the result is rounded to float16 and then cast to out's
  float32. Emulated (inputs rounded to nearest, the result too), and in the allowance.
- 16-bit operands: nothing changes (the table keeps FP16 and BF16; USE_FP16 on BF16 is ignored with a warning).
- 1-d @ 1-d (aclnnMatmul only): the op_api's MatMulDotGraph runs l0op::Dot, no cube: cubeMathType does nothing
  (the doc: "self和mat2都是1维时，cubeMathType不生效").

The family tells the functions what float values cannot: whether an operand is float32 and whether the call is a
dot product (`families.contraction.block_values`); a test calling a function without them gets float32 operands
and no dot.
"""

from __future__ import annotations

import numpy as np

from ...tensor.dtypes import BFLOAT16, FLOAT16
from ..base import AttrSpec, Reference, TensorSpec, defect, legitimate, narrow_blocks, products
from ..families import Contraction
from ..families.contraction import FLOAT32_OPERANDS, LEFT_BATCH, OUT_BATCH, RIGHT_BATCH, VECTOR_DOT
from . import cube, dots

SELF, MAT2, OUT, MATH = "self", "mat2", "out", "cubeMathType"
KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION, USE_FP16, USE_HF32, USE_FP32_ADD = 0, 1, 2, 3, 4
MATH_TYPES = (KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION, USE_FP16, USE_HF32, USE_FP32_ADD)
NARROW = 2.0**-10  # an operand rounded to 11 significant bits (HFLOAT32, float16), truncated or rounded
FP16_HALF_ULP = 2.0**-11  # a float16 rounding to nearest, relative, in the normal range
FP16_TINY = 2.0**-25  # half float16's subnormal spacing: its rounding's absolute error below the normal range
F32 = np.float32


def _eleven_bits(x: np.ndarray) -> np.ndarray:
    """Values with at most 11 significant bits (what HFLOAT32 and float16 keep): unchanged by the cube's rounding."""
    m, _ = np.frexp(x)
    return np.ldexp(m, 11) == np.trunc(np.ldexp(m, 11))


def _fp16_exact(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return x.astype(np.float16).astype(np.float64) == x


def _flag(t, name: str, default: int) -> bool:
    v = t.get(name)
    return bool(default) if v is None else bool(np.asarray(v).reshape(-1)[:1].any())


def cube_rounding(t) -> str | None:
    """What cubeMathType does to this call's operands: "hf32", "fp16" (and the result through float16), or None."""
    math_type = int(t.get(MATH, KEEP_DTYPE))
    if not _flag(t, FLOAT32_OPERANDS, 1) or _flag(t, VECTOR_DOT, 0):
        return None
    return {ALLOW_FP32_DOWN_PRECISION: "hf32", USE_HF32: "hf32", USE_FP16: "fp16"}.get(math_type)


def rounded_through(attrs, dtypes, shapes) -> dict:
    """USE_FP16 on float32 or mixed operands (not a 1-d dot product): the result leaves the cube as float16, whose
    thresholds judge it (its rounding errors, unbiased but of float16's size, are not float32's)."""
    kinds = {dtypes[n].name for n in (SELF, MAT2)}
    dot = len(shapes.get(SELF, ())) == 1 and len(shapes.get(MAT2, ())) == 1
    if int(attrs.get(MATH, KEEP_DTYPE)) != USE_FP16 or dot or not ("float32" in kinds or len(kinds) > 1):
        return {}
    return {OUT: FLOAT16}


def reference(t) -> Reference:
    """float64 matmul, bound gamma_K |A|.|B|, scale |A|.|B|, and the allowance of the cube's float32 sum, with what
    cubeMathType's rounding can move it (each rounded operand value's share of |A|.|B|, and under USE_FP16 the
    result's own float16 rounding)."""
    a, b = t[SELF], t[MAT2]
    return _rounded(t, *dots.reference(a, b), lambda representable, floor=0.0: dots.input_rounding_error(
        a, b, representable, NARROW, floor))


def golden_reference(t) -> Reference:
    """What gen certifies the golden with: the value and its bound (dots.certified), no allowance."""
    value, bound, scale, tighter = dots.certified(t[SELF], t[MAT2])
    return Reference(value, bound, scale, tighter=tighter)


@narrow_blocks
def reference_at(t, wanted) -> dict:
    """`reference` of single elements (verify's relief of a few flagged ones), each from its own row and column,
    widened as they are read (the operands as stored: a 4096 x 4096 pair's float64 copies were a third of verify)."""
    a, b, where = t[SELF], t[MAT2], np.asarray(wanted[OUT], np.int64)

    def moved(representable, floor=0.0):
        out = np.zeros(where.size)
        for sl, row, column in dots._operands_at(a, b, where):
            da = np.where(representable(row), 0.0, np.maximum(NARROW * np.abs(row), floor))
            db = np.where(representable(column), 0.0, np.maximum(NARROW * np.abs(column), floor))
            out[sl] = dots.SLACK * ((da * np.abs(column)).sum(axis=1) + (np.abs(row) * db).sum(axis=1)
                                    + (da * db).sum(axis=1))
        return out

    return {OUT: _rounded(t, *dots.reference_at(a, b, where), moved)}


def _rounded(t, value, bound, scale, allowance, moved) -> Reference:
    """The reference with cubeMathType's rounding in its allowance; moved(representable, floor): how far the
    operands' rounding moves each element (dots.input_rounding_error)."""
    mode = cube_rounding(t)
    if mode == "hf32":
        allowance = allowance + moved(_eleven_bits)
    elif mode == "fp16":
        shifted = allowance + moved(_fp16_exact, FP16_TINY)
        allowance = shifted + (FP16_HALF_ULP * (np.abs(value) + bound + shifted) + FP16_TINY) * dots.SLACK
    return Reference(value, bound, scale, allowance=allowance)


def exact_at(t, wanted):
    return {OUT: dots.exact_at(t[SELF], t[MAT2], wanted[OUT])}


def exact(t):
    return dots.exact(t[SELF], t[MAT2])


def kernel(t):
    """The 950's cube (ops/contraction/cube.py): mmad steps of 16 along K into L0C in float32, rounds of at most 8192
    for a long K added in order; under USE_FP16 on float32 operands, the operands and the result in float16."""
    a, b = t[SELF], t[MAT2]
    if cube_rounding(t) == "fp16":
        with np.errstate(over="ignore"):
            narrow = lambda x: np.asarray(x, F32).astype(np.float16).astype(F32)
            return narrow(cube.cube(narrow(a), narrow(b)))
    return cube.cube(a, b)


def ieee(t):
    return dots.ieee(np.asarray(t[SELF], np.float64), np.asarray(t[MAT2], np.float64))


@legitimate
def split_k(t):
    """Legitimate: K split across 8 cores, each partial accumulated on its own, added in a shuffled order (stream-K
    and split-K tilings)."""
    return cube.split_k(t[SELF], t[MAT2])


@defect
def not_transposed(t):
    """Defect: mat2's transpose flag misread (its elements read in the other order)."""
    return cube.not_transposed(t[SELF], t[MAT2])


@defect
def self_not_transposed(t):
    """Defect: self's transpose flag misread (its M x K elements read as if stored (K, M))."""
    return cube.self_not_transposed(t[SELF], t[MAT2])


@defect
def tail_dropped(t):
    """Defect: the last K % 16 values of K dropped."""
    return cube.tail_dropped(t[SELF], t[MAT2])


@defect
def fp16_accumulation(t):
    """Defect: the products accumulated in float16."""
    return cube.narrow_accumulator(t[SELF], t[MAT2], np.float16)


@defect
def bf16_accumulation(t):
    """Defect: the products accumulated in bfloat16."""
    return cube.narrow_accumulator(t[SELF], t[MAT2], BFLOAT16.np_dtype)


@defect
def halved(t):
    """Defect: the result halved (a scale applied twice)."""
    return cube.cube(t[SELF], t[MAT2]) * F32(0.5)


@defect
def zeros(t):
    """Defect: the output never computed (zeros)."""
    return np.zeros((t[SELF].shape[0], t[SELF].shape[1], t[MAT2].shape[2]), dtype=F32)


def _misread_batches(blocks: np.ndarray, source: np.ndarray, out: np.ndarray) -> np.ndarray:
    """An operand's blocks as a kernel reads them that steps a broadcast operand's batch by its own stride instead
    of 0: output batch b takes the operand's matrix b mod (its matrix count), not its broadcast index. A matrix is
    taken from the chunk's blocks (every one is there when the chunk holds the whole case, as in the tests); one the
    chunk lacks stays the right one."""
    source, out = source.reshape(-1), out.reshape(-1)
    count = int(source.max(initial=0)) + 1
    where = {int(s): i for i, s in enumerate(source)}
    pick = [where.get(int(b) % count, i) for i, b in enumerate(out)]
    return blocks[np.asarray(pick, dtype=np.int64)]


@defect
def wrong_batch(t):
    """Defect: a broadcast operand's batch read at the output's batch index modulo its own count, not at the
    broadcast index (its batch stride taken for the matrix size, not 0)."""
    a, b = t[SELF], t[MAT2]
    if t.get(OUT_BATCH) is not None:
        a = _misread_batches(a, t[LEFT_BATCH], t[OUT_BATCH])
        b = _misread_batches(b, t[RIGHT_BATCH], t[OUT_BATCH])
    return kernel({**t, SELF: a, MAT2: b})


def variants(prefix: str, *names: str) -> dict:
    """The variants named (all when none), keyed `<prefix>-<name>`."""
    table = {"split-k": split_k, "not-transposed": not_transposed, "self-not-transposed": self_not_transposed,
             "k-tail-dropped": tail_dropped, "fp16-accumulation": fp16_accumulation,
             "bf16-accumulation": bf16_accumulation, "halved": halved, "zeros": zeros, "wrong-batch": wrong_batch}
    return {f"{prefix}-{n}": table[n] for n in (names or tuple(table))}


SPECIAL_VALUES = ("The doc defines none; IEEE sums of products: an inf meeting a 0 gives NaN, infinities of both "
                  "signs in one sum give NaN, NaN reaches its row of out (self) or column (mat2).")


def declared(**own) -> dict:
    """The OpSpec fields BatchMatMul and Matmul declare alike (their tensors, cubeMathType, products, family and
    functions), with each op's `own` (name, key, header, summary, formula, dims, variants, contract)."""
    return dict(
        signature=(SELF, MAT2, OUT, MATH),
        tensors=(TensorSpec(SELF, "input", {"normal": [0, 1]}), TensorSpec(MAT2, "input", {"normal": [0, 1]}),
                 TensorSpec(OUT, "output", {"constant": 0})),
        attributes=(AttrSpec(MATH, "int", default=KEEP_DTYPE),),
        products=products("950", "A3", "A2"),
        empty_ok=False,
        family=Contraction(driver=SELF, right=MAT2, out=OUT),
        reference=reference, golden_reference=golden_reference, exact=exact, exact_at=exact_at,
        reference_at=reference_at, kernel=kernel, ieee=ieee,
        rounded_through=rounded_through, special_values=SPECIAL_VALUES,
        **own)
