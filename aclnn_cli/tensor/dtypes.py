"""Device data types and exactly-once rounding into them.

Every golden is computed in float64 and must be rounded to the output dtype
exactly once. NumPy rounds float64 -> float16/float32 correctly, but
ml_dtypes rounds float64 -> bfloat16 through float32, i.e. twice. We avoid
that with round-to-odd into float32 (24 bits >= 8 + 2, so the second rounding
is then exact-once), the standard remedy for double rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np

if TYPE_CHECKING:  # (round_fraction's argument: its callers, the exact paths, import fractions themselves)
    from fractions import Fraction


@dataclass(frozen=True)
class DType:
    """One device dtype: storage type, ACL enum and IEEE-like format parameters."""

    name: str
    np_dtype: np.dtype
    acl_id: int
    acl_name: str
    precision: int  # significand bits including the implicit one
    emin: int  # exponent of the smallest normal
    max_finite: float

    def __reduce__(self):
        """Pickle by name, so worker processes get the same singletons (rounding dispatches on identity)."""
        return (lookup, (self.name,))

    @property
    def itemsize(self) -> int:
        return self.np_dtype.itemsize

    @property
    def smallest_normal(self) -> float:
        return 2.0**self.emin

    @property
    def smallest_subnormal(self) -> float:
        return 2.0 ** (self.emin - self.precision + 1)

    @property
    def eps(self) -> float:
        """Spacing of 1.0 and the next value (one ulp at exponent 0)."""
        return 2.0 ** (1 - self.precision)

    @property
    def is16bit(self) -> bool:
        return self.itemsize == 2

    @property
    def uint_dtype(self) -> np.dtype:
        """The unsigned integer of the element's bits (a complex element: a pair of them, its components' bits,
        compared field by field: there is no 128-bit integer)."""
        if self.is_complex:
            c = f"<u{self.itemsize // 2}"
            return np.dtype([("re", c), ("im", c)])
        return np.dtype(f"<u{self.itemsize}")

    @property
    def is_complex(self) -> bool:
        """A complex tensor dtype: interleaved (real, imag) pairs of its component float (`component`)."""
        return self.np_dtype.kind == "c"

    @property
    def component(self) -> "DType":
        """A complex dtype's real and imaginary float dtype (float32 of complex64); any other dtype itself.
        precision, emin and max_finite of a complex dtype are its component's."""
        return {"complex64": FLOAT32, "complex128": FLOAT64}.get(self.name, self)

    @property
    def is_integer(self) -> bool:
        """An integer tensor dtype (class indices): no rounding, no float fills beyond its integers."""
        return self.np_dtype.kind in "iu"

    @property
    def int_range(self) -> tuple[int, int]:
        """(min, max) of an integer dtype; for a float dtype, the integers it holds exactly (+-2^precision)."""
        if self.is_integer:
            info = np.iinfo(self.np_dtype)
            return int(info.min), int(info.max)
        return -(1 << self.precision), 1 << self.precision


FLOAT32 = DType("float32", np.dtype("<f4"), 0, "ACL_FLOAT", 24, -126, float(np.finfo(np.float32).max))
FLOAT16 = DType("float16", np.dtype("<f2"), 1, "ACL_FLOAT16", 11, -14, 65504.0)
BFLOAT16 = DType("bfloat16", np.dtype(ml_dtypes.bfloat16), 27, "ACL_BF16", 8, -126, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max))

# float64 exists for the API's rejection cases (ACL_DOUBLE): no op here accepts it.
FLOAT64 = DType("float64", np.dtype("<f8"), 11, "ACL_DOUBLE", 53, -1022, float(np.finfo(np.float64).max))

# Integer tensors (NLL's class indices). precision: the value bits (every integer of the dtype is exact);
# emin 0 and max_finite the largest value keep the float-only fields meaningful where they are read.
INT64 = DType("int64", np.dtype("<i8"), 9, "ACL_INT64", 63, 0, float(2**63 - 1))
INT32 = DType("int32", np.dtype("<i4"), 3, "ACL_INT32", 31, 0, float(2**31 - 1))
UINT8 = DType("uint8", np.dtype("u1"), 4, "ACL_UINT8", 8, 0, 255.0)
# (inputs an op casts to float itself: SoftplusBackward's self)
INT16 = DType("int16", np.dtype("<i2"), 6, "ACL_INT16", 15, 0, float(2**15 - 1))
INT8 = DType("int8", np.dtype("i1"), 2, "ACL_INT8", 7, 0, 127.0)
INTEGERS = ("int64", "int32", "uint8", "int16", "int8")

# Complex tensors (SigmoidBackward's AI CPU path): numpy's layout, which is the device's, interleaved little-endian
# (real, imag) pairs of float32 or float64. ACL_COMPLEX64 = 16, ACL_COMPLEX128 = 17 (aclDataType in CANN's
# acl/acl_base_rt.h, as tests/stub_cann/include/acl/acl_base_rt.h copies it). Format fields: the component's.
COMPLEX64 = DType("complex64", np.dtype("<c8"), 16, "ACL_COMPLEX64", 24, -126, float(np.finfo(np.float32).max))
COMPLEX128 = DType("complex128", np.dtype("<c16"), 17, "ACL_COMPLEX128", 53, -1022, float(np.finfo(np.float64).max))
COMPLEXES = ("complex64", "complex128")

DTYPES: dict[str, DType] = {d.name: d for d in (FLOAT32, FLOAT16, BFLOAT16, FLOAT64, INT64, INT32, UINT8, INT16, INT8,
                                                COMPLEX64, COMPLEX128)}
_ALIASES = {"fp32": "float32", "float": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16",
            "fp64": "float64", "double": "float64", "long": "int64", "int": "int32", "cfloat": "complex64",
            "cdouble": "complex128"}


def lookup(name: str) -> DType:
    """Find a dtype by name or common alias; KeyError lists the valid names."""
    known = DTYPES.get(name) if type(name) is str else None  # (a manifest's names: as gen writes them)
    if known is not None:
        return known
    key = _ALIASES.get(str(name).lower(), str(name).lower())
    if key not in DTYPES:
        raise KeyError(f"unknown dtype '{name}' (valid: {', '.join(DTYPES)})")
    return DTYPES[key]


_LOW29 = np.uint64((1 << 29) - 1)  # float64 mantissa bits below float32's 23


def _f64_to_f32_round_to_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounding to odd, on the bits: drop the 29 low mantissa bits, keep a sticky one.

    Exact for every float64 outside float32's subnormal range (including inf and NaN);
    those few elements take the general path.
    """
    bits = x.view(np.uint64)
    sticky = ((bits & _LOW29) != 0).astype(np.uint64) << np.uint64(29)
    out = ((bits & ~_LOW29) | sticky).view(np.float64).astype(np.float32)
    with np.errstate(invalid="ignore"):
        tiny = np.abs(x) < 2.0**-126  # (a mask: x may have any shape, e.g. a Rows block)
    if tiny.size:
        out[tiny] = _round_to_odd_general(x[tiny])
    return out


def _round_to_odd_general(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounding to odd: truncate, then set the last bit if inexact."""
    nearest = x.astype(np.float32)
    back = nearest.astype(np.float64)
    with np.errstate(invalid="ignore"):
        inexact = (back != x) & np.isfinite(x)
        overshoot = inexact & (np.abs(back) > np.abs(x))
    bits = nearest.view(np.uint32).copy()
    bits[overshoot] -= np.uint32(1)  # one step toward zero (sign-magnitude encoding); inf -> max finite
    bits[inexact] |= np.uint32(1)
    return bits.view(np.float32)


def round_from_f64(x: np.ndarray, dtype: DType) -> np.ndarray:
    """Round float64 values to `dtype` once, to nearest, ties to even (complex128 to complex64: each component
    once, as NumPy's cast does; a real value to a complex dtype: with a zero imaginary part)."""
    if dtype.is_complex:
        return np.asarray(x).astype(dtype.np_dtype)
    x = np.asarray(x, dtype=np.float64)
    if dtype.is_integer:  # (fills check first that every value is an integer of the dtype)
        return x.astype(dtype.np_dtype)
    if dtype is BFLOAT16:
        return _f64_to_f32_round_to_odd(x).astype(BFLOAT16.np_dtype)
    return x.astype(dtype.np_dtype)


def round_f32_half_away(x: np.ndarray, dtype: DType) -> np.ndarray:
    """float32 -> 16-bit dtype rounding to nearest, ties away from zero (Ascend CAST_ROUND)."""
    x = np.asarray(x, dtype=np.float32)
    if dtype is FLOAT32:
        return x.copy()
    if dtype is BFLOAT16:
        bits = x.view(np.uint32)
        rounded = ((bits + np.uint32(0x8000)) >> np.uint32(16)).astype(np.uint16)
        nan = np.isnan(x)
        rounded[nan] = ((bits[nan] >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
        return rounded.view(BFLOAT16.np_dtype)
    # float16: round the exact float32 value half away from zero by nudging ties outward.
    nearest = x.astype(np.float16)
    with np.errstate(invalid="ignore", over="ignore"):
        err = x.astype(np.float64) - nearest.astype(np.float64)
        away = np.nextafter(nearest, np.copysign(np.float16(np.inf), x).astype(np.float16))
        ulp_half = np.abs(away.astype(np.float64) - nearest.astype(np.float64)) / 2
        tie_toward_zero = (np.abs(err) == ulp_half) & (np.abs(nearest) < np.abs(x)) & np.isfinite(x)
    return np.where(tie_toward_zero, away, nearest)


def round_from_f32(x: np.ndarray, dtype: DType, mode: str = "rint") -> np.ndarray:
    """How a kernel casts its float32 result back: 'rint' (half to even) or 'round' (half away)."""
    x = np.asarray(x, dtype=np.float32)
    if mode == "round":
        return round_f32_half_away(x, dtype)
    return x.astype(dtype.np_dtype)


def round_fraction(q: Fraction, dtype: DType) -> float:
    """Round an exact rational to `dtype` (nearest, ties to even), with subnormals and overflow. In integers: the
    quotient by the quantum of q's binade (that of the smallest normal below it) and its remainder (a Fraction
    operation allocates and normalises a new rational at every step; the exact paths round many)."""
    return round_ratio(q.numerator, q.denominator, dtype)


def round_ratio(n: int, d: int, dtype: DType) -> float:
    """Round n / d (integers, d > 0, not necessarily in lowest terms) to `dtype` as round_fraction does: the
    complex goldens' components are integers over one power of two (golden/complexes.py)."""
    if n == 0:
        return 0.0
    a = -n if n < 0 else n
    e = a.bit_length() - d.bit_length()  # 2^e <= a / d < 2^(e + 2)
    if (a << -e if e < 0 else a) < (d << e if e > 0 else d):
        e -= 1
    shift = max(e, dtype.emin) - dtype.precision + 1  # the quantum 2^shift
    num, den = (a, d << shift) if shift >= 0 else (a << -shift, d)
    m, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and m & 1):  # (half to even)
        m += 1
    try:
        value = math.ldexp(m, shift)  # (m has at most precision + 1 bits: exact)
    except OverflowError:
        value = math.inf
    result = math.inf if value > dtype.max_finite else value
    return -result if n < 0 else result


def canonical_nans(x: np.ndarray) -> np.ndarray:
    """x with every NaN the positive quiet NaN of its dtype: which NaN an operation gives (sign, payload) depends
    on the CPU's code path, and the emulated device must write the same bytes on every machine. A complex element
    with a NaN component is NaN (verify's rule): both components become the quiet NaN."""
    if x.dtype.kind == "c":
        nan = np.isnan(x)
        return np.where(nan, np.array(complex(math.nan, math.nan), dtype=x.dtype), x) if nan.any() else x
    nan = np.isnan(x.astype(np.float32)) if x.dtype.kind != "f" else np.isnan(x)
    return np.where(nan, np.array(np.nan).astype(x.dtype), x) if nan.any() else x
