"""A complex output's errors: the error as a complex quantity, against an allowance derived from the computation.

A per-component relative error is wrong for a complex result: a component that cancels (Re(conj(q) dy) = 0 while
|q dy| is large) is correctly off by many of its own ulps, since the kernel's roundings are of the size of the
whole product, not of that component. The error is judged in modulus, |a - g|, against (docs/allowances.md,
"Complex outputs")

    allowance = gamma |g| + (1 + gamma) h,

gamma the op's own expression's relative error bound, traced from its complex_formula (ops/complexparts.py,
Roundings: (1 + u)^sums (1 + sqrt(5) u)^products - 1 with u the component dtype's unit roundoff, 2^-24 complex64,
2^-53 complex128; SigmoidBackward's conj((1 - y) y) dy is one subtraction and two products), and h the golden's own
rounding, half an ulp of each component, sqrt(h_re^2 + h_im^2) (an ulp never below the subnormal spacing). `rel` is
|a - g| / allowance: an element passes at rel <= 1 (standard `complex`). The `a` and `g` the reports read are the
moduli; an element with a NaN component is NaN, infinities are compared component by component.
"""

from __future__ import annotations

import numpy as np

from ..tensor.dtypes import DType
from .widening import ulp_at

def modulus(z: np.ndarray) -> np.ndarray:
    """|z| in float64, the same bits on every CPU (NumPy's np.abs of a complex takes a SIMD loop on AVX2 and
    AVX-512 machines whose last bit differs from its scalar loop's): `hypot` of its parts."""
    z = np.asarray(z)
    return hypot(z.real, z.imag)


def hypot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """sqrt(x^2 + y^2) in float64 from IEEE's basic operations alone (not the C library's hypot, which differs
    between libraries): the larger magnitude times sqrt(1 + (smaller / larger)^2); an infinite part gives inf, a
    NaN part (with no infinite one) NaN."""
    x, y = np.abs(np.asarray(x, np.float64)), np.abs(np.asarray(y, np.float64))
    with np.errstate(all="ignore"):
        big, small = np.maximum(x, y), np.minimum(x, y)
        ratio = np.where(big > 0, small / big, 0.0)
        out = np.asarray(big * np.sqrt(1 + ratio * ratio))
        out[np.isinf(x) | np.isinf(y)] = np.inf
    return out


def allowance(g: np.ndarray, dtype: DType, gamma: float, g_abs: np.ndarray | None = None) -> np.ndarray:
    """Each element's allowance from its golden (complex128): gamma |g| + (1 + gamma) h (module docstring)."""
    part = dtype.component
    h = hypot(ulp_at(g.real, part), ulp_at(g.imag, part)) / 2
    # (never below one subnormal step: at a zero golden complex128's half step rounds to 0, and an exact element's
    # 0 / 0 would be NaN, which the metrics' maximum skips, hiding every other element's error)
    return gamma * (modulus(g) if g_abs is None else g_abs) + (1 + gamma) * np.maximum(h, part.smallest_subnormal)


def complex_errors(a_native: np.ndarray, g_native: np.ndarray, floor: float, dtype: DType, gamma: float):
    """ElementErrors of a complex chunk (compare.ElementErrors' fields, moduli where it holds values): abs |a - g|,
    rel |a - g| / allowance, ulp |a - g| over the ulp at |g|, signed (|a| - |g|) / max(|g|, floor)."""
    from .compare import NO_INDEX, ElementErrors

    a, g = (np.asarray(x).astype(np.complex128).reshape(-1) for x in (a_native, g_native))
    with np.errstate(all="ignore"):
        finite = np.isfinite(a) & np.isfinite(g)  # (np.isfinite of a complex: both components finite)
        a_abs, g_abs = modulus(a), modulus(g)
        abs_err = modulus(a - g)
        rel = np.where(abs_err == 0, 0.0, abs_err / allowance(g, dtype, gamma, g_abs))
        ulp = abs_err / ulp_at(g_abs, dtype.component)
        signed = (a_abs - g_abs) / np.maximum(g_abs, floor)
    nonfinite = np.flatnonzero(~finite)
    special = nonfinite[special_mismatch(a[nonfinite], g[nonfinite])] if nonfinite.size else NO_INDEX
    for arr in (abs_err, rel, signed, ulp, g_abs):
        arr[nonfinite] = 0
    e = ElementErrors(a_abs, g_abs, abs_err, rel, signed, ulp, g_abs.copy(), dtype,
                      nonfinite if nonfinite.size else NO_INDEX, special)
    e.nonzero_goldens = int(np.count_nonzero(g_abs))
    return e


def special_mismatch(a: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Non-finite complex elements that disagree: a NaN component on one side only (an element with one is NaN),
    or, with no NaN on either side, a component that differs where either is infinite."""
    nan_a, nan_g = np.isnan(a), np.isnan(g)  # (either component)
    bad = nan_a != nan_g
    with np.errstate(invalid="ignore"):
        for x, y in ((a.real, g.real), (a.imag, g.imag)):
            bad |= ~nan_a & ~nan_g & (np.isinf(x) | np.isinf(y)) & (x != y)
    return bad
