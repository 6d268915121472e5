"""High-precision scalar math for the elements whose float64 rounding cannot be certified.

Uses the standard library's decimal module at 60 significant digits (~199
bits). Only a handful of elements per million ever come here.

The last section holds float64 counterparts of the normal-distribution functions (vectorised, no
SciPy), each with a derived error bound, for the float64 references and the emulated kernels.
"""

from __future__ import annotations

from decimal import Decimal, getcontext, localcontext
from fractions import Fraction
from functools import lru_cache

import numpy as np

PRECISION_DIGITS = 60


def dec(q: Fraction | float) -> Decimal:
    q = Fraction(q)
    return Decimal(q.numerator) / Decimal(q.denominator)


def sigmoid(z: Decimal) -> Decimal:
    """1/(1+e^-z) without overflow: exp is only ever taken of -|z|."""
    e = (-abs(z)).exp()
    return 1 / (1 + e) if z >= 0 else e / (1 + e)


def swish_factor(z: Decimal) -> Decimal:
    """d/dz [z * sigmoid(z)] = s * (1 + z * (1 - s))."""
    s = sigmoid(z)
    return s * (1 + z * sigmoid(-z))


def evaluate(fn, *args):
    """Run fn under a 60-digit decimal context."""
    with localcontext() as ctx:
        ctx.prec = PRECISION_DIGITS
        ctx.Emax, ctx.Emin = 10**9, -(10**9)
        return fn(*args)


# --- erf, the normal distribution and tanh (GeluBackwardV2), in the current decimal context ---

NORMAL_SERIES_MAX = 6  # |x| below this: Phi by the power series, above: by the Mills-ratio continued fraction
GUARD_DIGITS = 12  # extra digits where a difference cancels (1 - erf, 1/2 - |x| phi S)


def evaluate_at(digits: int, fn, *args):
    """Run fn under a decimal context of `digits` significant digits (evaluate uses 60)."""
    with localcontext() as ctx:
        ctx.prec = digits
        ctx.Emax, ctx.Emin = 10**9, -(10**9)
        return fn(*args)


def _eps(scale: Decimal = Decimal(1)) -> Decimal:
    """A quantity below the current precision's last digit of `scale`."""
    return abs(scale) * Decimal(10) ** -(getcontext().prec + 3)


def _guarded(fn, *args, extra: int = GUARD_DIGITS):
    """fn evaluated with `extra` more digits, rounded back to the current precision."""
    with localcontext() as ctx:
        ctx.prec += extra
        value = fn(*args)
    return +value


def _square_digits(x: Decimal) -> int:
    """Guard digits for e^(-x^2): x^2's integer digits (its rounding error is e^-x^2's relative error)."""
    return max(0, 2 * x.adjusted()) + 2


@lru_cache(maxsize=None)
def _pi(digits: int) -> Decimal:
    """pi to `digits` digits by Machin's formula, 16 atan(1/5) - 4 atan(1/239)."""
    def atan_inv(n: int) -> Decimal:
        total, power, k, n2 = Decimal(0), Decimal(1) / n, 0, n * n
        while power > Decimal(10) ** -(digits + 5):
            total += (power if k % 2 == 0 else -power) / (2 * k + 1)
            power /= n2
            k += 1
        return total

    with localcontext() as ctx:
        ctx.prec = digits + 10
        value = 16 * atan_inv(5) - 4 * atan_inv(239)
        ctx.prec = digits
        return +value


def pi() -> Decimal:
    """pi to the current context's precision."""
    return _pi(getcontext().prec)


def normal_pdf(x: Decimal) -> Decimal:
    """phi(x) = e^(-x^2/2) / sqrt(2 pi), relative to phi(x) also for large |x| (x^2 with guard digits)."""
    return _guarded(lambda: (-(x * x) / 2).exp() / (2 * pi()).sqrt(), extra=_square_digits(x))


def normal_series(t: Decimal) -> Decimal:
    """S(t) = sum_n t^n / (2n+1)!! (t >= 0): Phi(x) = 1/2 + x phi(x) S(x^2), all terms positive."""
    total, term, n = Decimal(1), Decimal(1), 0
    while True:
        n += 1
        term = term * t / (2 * n + 1)
        total += term
        if term <= _eps(total) and 2 * t < 2 * n + 3:  # the rest is below 2 * term
            return total


def mills_ratio(y: Decimal) -> Decimal:
    """R(y) = (1 - Phi(y)) / phi(y) for y > 0, by Laplace's continued fraction
    1/(y + 1/(y + 2/(y + 3/(y + ...)))). Its elements are positive, so consecutive convergents
    bracket R: iterating until two agree to the precision bounds the truncation error."""
    a_prev, a, b_prev, b = Decimal(1), Decimal(0), Decimal(0), Decimal(1)  # Wallis: A_-1, A_0, B_-1, B_0
    previous, k = None, 0
    while True:
        k += 1
        numerator = Decimal(1) if k == 1 else Decimal(k - 1)
        a_prev, a = a, y * a + numerator * a_prev
        b_prev, b = b, y * b + numerator * b_prev
        scale = b.copy_abs()
        a_prev, a, b_prev, b = a_prev / scale, a / scale, b_prev / scale, b / scale
        current = a / b
        if previous is not None and abs(current - previous) <= _eps(current):
            return current
        previous = current


def normal_cdf(x: Decimal) -> Decimal:
    """Phi(x) to the context's precision, relative to Phi(x) itself (also far in the lower tail)."""
    y = abs(x)
    if y >= NORMAL_SERIES_MAX:
        tail = normal_pdf(y) * mills_ratio(y)
        return tail if x < 0 else 1 - tail
    return _guarded(lambda: Decimal("0.5") + x * normal_pdf(x) * normal_series(x * x))


def erf(z: Decimal) -> Decimal:
    """erf(z) = (2/sqrt(pi)) z e^(-z^2) S(2 z^2) for small |z| (relative accuracy near 0), 1 - erfc beyond."""
    if abs(z) * Decimal(2).sqrt() >= NORMAL_SERIES_MAX:
        tail = erfc(abs(z))
        return 1 - tail if z > 0 else tail - 1
    return 2 / pi().sqrt() * z * (-(z * z)).exp() * normal_series(2 * z * z)


def erfc(z: Decimal) -> Decimal:
    """erfc(z) = 2 Phi(-sqrt(2) z), to the context's precision relative to erfc(z)."""
    if z < 0:
        return 2 - erfc(-z)
    y = z * Decimal(2).sqrt()
    if y >= NORMAL_SERIES_MAX:  # sqrt(2)'s rounding, times y^2 in e^(-y^2/2): guard digits
        return _guarded(lambda: 2 * normal_pdf(z * Decimal(2).sqrt()) * mills_ratio(y), extra=_square_digits(z))
    return _guarded(lambda: 1 - erf(z))


def expm1(z: Decimal) -> Decimal:
    """e^z - 1 with relative accuracy near 0 (Taylor series for |z| < 1/2)."""
    if abs(z) >= Decimal("0.5"):
        return z.exp() - 1
    total, term, n = Decimal(0), Decimal(1), 0
    while True:
        n += 1
        term = term * z / n
        total += term
        if abs(term) <= _eps(total):
            return total


def tanh(z: Decimal) -> Decimal:
    """tanh(z) = -expm1(-2|z|) / (2 + expm1(-2|z|)) with the sign of z: no overflow, relative accuracy near 0."""
    m = expm1(-2 * abs(z))
    value = -m / (2 + m)
    return value if z >= 0 else -value


# --- float64, vectorised: the normal distribution with error bounds (u = 2^-53) ---

F64_U = 2.0**-53
F64_EXP_ULPS = 4.0  # error allowed for numpy's float64 exp, in ulps (it is within 1: a margin)
F64_INV_SQRT_2PI = 0.3989422804014327  # fl64(1/sqrt(2 pi))
F64_TWO_OVER_SQRT_PI = 1.1283791670955126  # fl64(2/sqrt(pi))
F64_SERIES_MAX, F64_SERIES_TERMS = 3.0, 40  # |x| < 3, t = x^2 < 9: the 40th term is below 1e-24 S(t)
F64_CF_DEPTHS = ((3.0, 80), (4.0, 44), (6.0, 24), (10.0, 14))  # from y: depth with truncation < 1e-18 R


def f64_normal_series(t: np.ndarray):
    """S(t) = sum t^n/(2n+1)!! for 0 <= t < 9 (t carrying <= 1 u). Returns (S, its relative rounding error
    in u, an absolute truncation bound). Term n carries <= 3n u (t^n, the division, the product); summing
    N positive terms adds <= N u: 4N + 4. The tail after term N is <= term_N q/(1-q), q = t/(2N+3)."""
    term, total = np.ones_like(t), np.ones_like(t)
    for n in range(1, F64_SERIES_TERMS + 1):
        term = term * (t / (2 * n + 1))
        total = total + term
    q = t / (2 * F64_SERIES_TERMS + 3)
    return total, 4.0 * F64_SERIES_TERMS + 4, term * q / (1 - q) * 1.01


def _f64_cf(y, depth):
    """The (depth+1)-th approximant of 1/(y + 1/(y + 2/(y + ...))), evaluated backwards."""
    t = y.copy()
    for k in range(depth, 0, -1):
        t = y + k / t
    return 1.0 / t


def f64_mills_ratio(y: np.ndarray):
    """R(y) = (1 - Phi(y))/phi(y) for y >= 3 (y exact) and an absolute bound on its error. Backwards,
    each level adds <= 2 u relative (positive terms: no growth), so an approximant carries <= (2 depth + 1) u;
    R lies between two consecutive approximants (positive elements), which bounds the truncation."""
    r, err = np.zeros_like(y), np.zeros_like(y)
    for i, (lo, depth) in enumerate(F64_CF_DEPTHS):
        hi = F64_CF_DEPTHS[i + 1][0] if i + 1 < len(F64_CF_DEPTHS) else np.inf
        sel = (y >= lo) & (y < hi)
        if sel.any():
            a, b = _f64_cf(y[sel], depth), _f64_cf(y[sel], depth - 1)
            r[sel], err[sel] = a, np.abs(a - b) + 2 * (2 * depth + 3) * F64_U * (a + b)
    return r, err


def f64_normal_pdf(x: np.ndarray):
    """phi(x) and its relative error in u: exp, the constant, the product, and x^2's rounding (u x^2/2 in exp)."""
    t = x * x
    return np.exp(-0.5 * t) * F64_INV_SQRT_2PI, F64_EXP_ULPS + 3 + 0.5 * t


def f64_normal_cdf(x: np.ndarray) -> np.ndarray:
    """Phi(x) to ~2e-13 relative (1/2 + x phi S cancels near x = -3), also in the lower tail down to
    x = -37.5 (below, Phi is a float64 subnormal), rounded once to x's dtype."""
    x64 = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        y, phi = np.abs(x64), f64_normal_pdf(x64)[0]
        near = y < F64_SERIES_MAX
        out = np.empty_like(y)
        xs = x64[near]
        out[near] = 0.5 + xs * phi[near] * f64_normal_series(xs * xs)[0]
        far = ~near
        tail = phi[far] * f64_mills_ratio(np.maximum(np.nan_to_num(y[far]), F64_SERIES_MAX))[0]
        out[far] = np.where(x64[far] < 0, tail, 1 - tail)
    return np.where(np.isnan(x64), np.nan, out).astype(np.asarray(x).dtype)


def f64_erf(z: np.ndarray) -> np.ndarray:
    """erf to ~1e-15 relative, rounded once to z's dtype (for float32: correctly rounded but for ~1e-7 of
    inputs): (2/sqrt(pi)) z e^(-z^2) S(2 z^2) for sqrt(2)|z| < 3, else +-(1 - 2 phi(sqrt2 |z|) R(sqrt2 |z|))."""
    z64 = np.asarray(z, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        a = np.where(np.isfinite(z64), np.abs(z64), 40.0)
        y = a * np.sqrt(2.0)
        near = y < F64_SERIES_MAX
        out = np.empty_like(a)
        an = a[near]
        small = np.minimum(an, F64_SERIES_MAX / np.sqrt(2.0))
        out[near] = F64_TWO_OVER_SQRT_PI * an * np.exp(-an * an) * f64_normal_series(2 * small * small)[0]
        far = ~near
        af = a[far]
        out[far] = 1 - 2 * F64_INV_SQRT_2PI * np.exp(-af * af) * f64_mills_ratio(np.maximum(y[far], F64_SERIES_MAX))[0]
        out = np.copysign(out, z64)
    return np.where(np.isnan(z64), np.nan, out).astype(np.asarray(z).dtype)
