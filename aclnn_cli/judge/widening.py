"""Float16/bfloat16/float32 values widened exactly to the work type, and one ulp at a golden's exponent:
the cheap passes element_errors (compare.py) makes of every chunk."""

from __future__ import annotations

import numpy as np

from ..tensor.dtypes import DType


def ulp_at(g: np.ndarray, dtype: DType) -> np.ndarray:
    """One ulp of `dtype` at the exponent of |g| (never below the subnormal spacing); an integer dtype's is 1."""
    if dtype.is_integer:
        return np.ones(np.shape(g))
    _, e = np.frexp(np.abs(g))  # frexp(0) gives exponent 0: zero belongs to the smallest binade
    e = np.where(g == 0, dtype.emin, np.maximum(e - 1, dtype.emin))
    return np.ldexp(1.0, e - dtype.precision + 1)


_EXPONENT_BITS = {"float32": 0x7F800000, "float16": 0x7C00, "bfloat16": 0x7F80}


def ulp_of(g_native: np.ndarray, dtype: DType, work: np.dtype) -> np.ndarray:
    """ulp_at for values stored in `dtype`, from their exponent bits (three cheap passes)."""
    mask = _EXPONENT_BITS.get(dtype.name)
    if mask is None:
        return ulp_at(g_native.astype(np.float64), dtype).astype(work)
    u = dtype.uint_dtype
    power = (g_native.view(u) & u.type(mask)).view(dtype.np_dtype).astype(work)  # 2^e, or 0 when subnormal
    ulp = power * work.type(2.0 ** (1 - dtype.precision))
    return np.maximum(ulp, work.type(dtype.smallest_subnormal), out=ulp)


def _ulp_of_wide(g: np.ndarray, dtype: DType, out: np.ndarray | None = None, normal: bool = False) -> np.ndarray:
    """ulp_of for float16/bfloat16/float32 values already widened (exactly) to float32: the exponent
    bits of the float32 value are those of the stored one, and a subnormal's ulp is the floor either way.
    Bit for bit ulp_of's result (tested on every 16-bit value), without a second widening.
    normal: no |g| is below the dtype's smallest normal (no ulp below the floor: one pass less)."""
    power = np.bitwise_and(g.view(np.uint32), np.uint32(0x7F800000),
                           out=None if out is None else out.view(np.uint32)).view(np.float32)
    ulp = np.multiply(power, np.float32(2.0 ** (1 - dtype.precision)), out=power)
    return ulp if normal else np.maximum(ulp, np.float32(dtype.smallest_subnormal), out=ulp)


_F16_TO_F32: list[np.ndarray] = []  # every float16 bit pattern as float32, made on first use


def widen(x: np.ndarray, work: np.dtype, out: np.ndarray | None = None) -> np.ndarray:
    """x as `work` (exact), in `out` if given (unless x is already `work`: then x itself). float16 -> float32
    goes through a table of all 65536 values: numpy's float16 cast is a scalar loop, three times slower than
    the lookup (the same bits: the table is that cast)."""
    if x.dtype == work:
        return x
    if x.dtype == np.float16 and work == np.float32:
        if not _F16_TO_F32:
            _F16_TO_F32.append(np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32))
        return _F16_TO_F32[0].take(x.view(np.uint16), out=out)
    if out is None:
        return x.astype(work)
    np.copyto(out, x, casting="unsafe")
    return out
