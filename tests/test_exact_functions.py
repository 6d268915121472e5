"""exact.py's erf, normal distribution and tanh (decimal, and the float64 versions with error bounds) vs mpmath."""

from __future__ import annotations

from decimal import Decimal

import mpmath
import math

import numpy as np
import pytest

from aclnn_cli.ops import exact as X

RNG = np.random.default_rng(2024)
SPECIAL = [0.0, -0.0, 1e-300, 2.0**-149, 1e-30, 1e-5, 0.1, 0.5, 1.0, 2.0, 2.9, 3.0, 4.0, 4.2426, 4.25, 5.0, 5.99,
           6.0, 6.01, 7.5, 8.0, 10.0, 20.0, 27.0, 37.0, 40.0, 100.0, 1e3, 3.0e4]
POINTS = sorted({*SPECIAL, *(-v for v in SPECIAL), *RNG.uniform(-12, 12, 150).tolist(),
                 *RNG.standard_normal(50).tolist(), *(10.0 ** RNG.uniform(-8, 2, 50)).tolist()})

DECIMAL = {  # exact.py function -> mpmath reference
    "erf": (X.erf, mpmath.erf),
    "erfc": (X.erfc, mpmath.erfc),
    "normal_cdf": (X.normal_cdf, mpmath.ncdf),
    "normal_pdf": (X.normal_pdf, mpmath.npdf),
    "tanh": (X.tanh, mpmath.tanh),
    "expm1": (X.expm1, mpmath.expm1),
}


def series(t):
    """sum t^n / (2n+1)!! in mpmath, by its terms until they are below 2^-260 of the sum."""
    t, term, total, n = mpmath.mpf(t), mpmath.mpf(1), mpmath.mpf(1), 0
    while term > total * mpmath.mpf(2) ** -260 or 2 * t >= 2 * n + 3:
        n += 1
        term = term * t / (2 * n + 1)
        total += term
    return total


def rel_error(value: Decimal, want) -> float:
    got = mpmath.mpf(str(value))
    return float(abs(got - want) / abs(want)) if want != 0 else float(abs(got))


def test_pi_to_the_context_precision():
    with mpmath.workdps(130):
        for digits in (60, 115):
            assert abs(mpmath.mpf(str(X.evaluate_at(digits, X.pi))) - mpmath.pi) < mpmath.mpf(10) ** (1 - digits)


@pytest.mark.parametrize("name", sorted(DECIMAL))
@pytest.mark.parametrize("digits", [X.PRECISION_DIGITS, 100])
def test_decimal_function_is_accurate_relative_to_its_value(name, digits):
    """At 60 (and 100) digits, every point to within 10^-(digits-3) relative, even deep in the tails
    (erfc(2e4), Phi(-3e4)): the digits follow the context's precision."""
    fn, ref = DECIMAL[name]
    if name == "expm1":  # e^(3e4) is fine in decimal; keep mpmath's work small
        points = [p for p in POINTS if abs(p) < 1e3]
    else:
        points = POINTS
    worst = []
    with mpmath.workprec(int(digits * 3.33) + 80):
        for p in points:
            want = ref(mpmath.mpf(p))
            err = rel_error(X.evaluate_at(digits, fn, Decimal(p)), want)
            if err > 10.0 ** (3 - digits):
                worst.append((p, err))
    assert not worst, f"{name}: {len(worst)} points off, first {worst[:3]}"


def test_mills_ratio_and_series():
    with mpmath.workprec(300):
        for y in [1.0, 2.5, 6.0, 9.0, 40.0, 1e6]:
            want = mpmath.erfc(y / mpmath.sqrt(2)) / 2 / mpmath.npdf(y)
            assert rel_error(X.evaluate(X.mills_ratio, Decimal(y)), want) < 1e-57
        for t in [0.0, 1e-20, 0.5, 9.0, 36.0, 100.0]:
            want = series(t)
            assert rel_error(X.evaluate(X.normal_series, Decimal(t)), want) < 1e-57


def test_decimal_erf_is_odd_and_erfc_complements():
    for z in ["0.3", "2.5", "4.5", "7"]:
        d = Decimal(z)
        assert X.evaluate(X.erf, -d) == X.evaluate(X.erf, d).copy_negate()
        total = X.evaluate(lambda: X.erf(d) + X.erfc(d))
        assert abs(total - 1) < Decimal(10) ** -57
    assert X.evaluate(X.erfc, Decimal(-3)) > Decimal("1.99997")


# float64 versions: results within their bounds, and close to correctly rounded.

def test_f64_normal_series_bound_is_safe():
    t = np.concatenate([[0.0, 1e-300, 8.999999], RNG.uniform(0, 9, 400), (RNG.uniform(-3, 3, 200).astype(np.float32).astype(float)) ** 2])
    s, rel, trunc = X.f64_normal_series(t)
    with mpmath.workprec(200):
        for ti, si, tr in zip(t, s, trunc):
            want = series(ti)
            assert abs(mpmath.mpf(si) - want) <= rel * X.F64_U * si + tr, ti
    assert (trunc <= 1e-22 * s).all()


def test_f64_mills_ratio_bound_is_safe_and_tight():
    y = np.concatenate([[3.0, 3.9999999, 4.0, 5.999, 6.0, 9.99, 10.0, 37.0, 1e3, 1e30], RNG.uniform(3, 40, 600)])
    r, err = X.f64_mills_ratio(y)
    for yi, ri, ei in zip(y, r, err):
        with mpmath.workprec(200 + 2 * int(np.log2(yi))):  # y^2/2 exactly enough for e^(y^2/2)
            want = mpmath.erfc(yi / mpmath.sqrt(2)) / 2 / mpmath.npdf(yi)
            assert abs(mpmath.mpf(ri) - want) <= ei, yi
    assert (err <= 1e-13 * r).all()


def test_f64_normal_pdf_bound_is_safe():
    x = np.concatenate([RNG.uniform(-38, 38, 500), RNG.uniform(-38, 38, 500).astype(np.float32)])
    phi, rel = X.f64_normal_pdf(x)
    with mpmath.workprec(200):
        for xi, pi, ri in zip(x, phi, rel):
            if pi > 1e-300:
                assert abs(mpmath.mpf(pi) - mpmath.npdf(xi)) <= ri * X.F64_U * pi, xi


def test_f64_erf_is_correctly_rounded_to_float32_on_a_sample():
    z = np.concatenate([RNG.uniform(-5, 5, 3000), RNG.uniform(-0.01, 0.01, 500), np.linspace(2.05, 2.2, 500),
                        [0.0, 1e-40, 30.0, -30.0, 1e30]]).astype(np.float32)
    got = X.f64_erf(z)
    assert got.dtype == np.float32
    with mpmath.workprec(200):
        want = np.array([np.float32(float(mpmath.erf(float(v)))) for v in z])  # no double rounding near here
    assert (got == want).sum() >= z.size - 1, z[got != want][:5]
    specials = X.f64_erf(np.array([np.inf, -np.inf, np.nan, -0.0]))
    assert specials[:2].tolist() == [1.0, -1.0] and np.isnan(specials[2]) and np.signbit(specials[3])
    assert X.f64_erf(np.array([0.5], np.float16)).dtype == np.float16


def test_f64_normal_cdf_tail_is_relatively_accurate():
    x = np.concatenate([RNG.uniform(-37.5, 37.5, 800), [-3.0, 3.0, 0.0]])
    got = X.f64_normal_cdf(x)
    with mpmath.workprec(200):
        worst = max(float(abs(mpmath.mpf(g) - mpmath.ncdf(v)) / mpmath.ncdf(v)) for v, g in zip(x, got))
    assert worst < 5e-13
    assert X.f64_normal_cdf(np.array([np.inf, -np.inf, np.nan])).tolist()[:2] == [1.0, 0.0]


def test_quantum_is_the_lowest_significand_bit_and_exact_sums_need_no_allowance_for_their_additions():
    """dyadic.quantum against Fractions (v / q an odd integer; inf for 0 and non-finite), and AcrossRows'
    certifying bound against the exact sum of the partials it was given: never smaller than the true error, and
    free of the additions' bound only where the float64 additions were exact."""
    from fractions import Fraction

    from aclnn_cli.golden.rows import AcrossRows
    from aclnn_cli.ops.base import Reference
    from aclnn_cli.ops.dyadic import quantum

    rng = np.random.default_rng(11)
    values = np.concatenate([rng.standard_normal(500), rng.standard_normal(500).astype(np.float32),
                             [0.0, -0.0, 3.0, 0.75, 2.0**-1074, 3 * 2.0**-1074, -6.0, 1.7e308, np.inf, -np.inf, np.nan]])
    for v, q in zip(values.tolist(), quantum(values).tolist()):
        if math.isfinite(v) and v != 0:
            ratio = Fraction(v) / Fraction(q)
            assert ratio.denominator == 1 and ratio.numerator % 2 == 1, (v, q)
        else:
            assert q == math.inf, (v, q)
    for trial in range(200):  # chunk partials: short float16 values (exact sums) or float64 ones that round
        columns, chunks = 8, int(rng.integers(1, 12))
        wide = trial % 2 == 1
        parts = [rng.standard_normal(columns) * 10.0 ** rng.integers(-3, 4) for _ in range(chunks)]
        parts = [p if wide else p.astype(np.float16).astype(np.float64) for p in parts]
        acc = AcrossRows(columns)
        for p in parts:
            acc.add(Reference(p, np.zeros(columns), np.abs(p)), 1)
        bound, total = acc.certifying_bound(), acc.total_bound()
        for c in range(columns):
            exact = sum(Fraction(p[c]) for p in parts)
            assert abs(Fraction(acc.value[c]) - exact) <= Fraction(bound[c]), (trial, c)
        assert (bound <= total).all()
        if not wide:  # (float16 values summed in float64: every addition exact)
            assert (bound == 0).all()


@pytest.mark.parametrize("piece, group", [(None, None), (7, 40), (3, 5)])
def test_exact_row_sums_against_a_fraction_per_term(monkeypatch, piece, group):
    """dyadic.exact_row_sums (many rows in one bincount, long rows in pieces: both forced small here) against the
    plain sum of each row's Fractions: many short rows, exponents across the whole float64 range (subnormals, the
    largest values, cancelling pairs), zeros, empty rows and no rows."""
    from fractions import Fraction

    from aclnn_cli.ops import dyadic

    if piece is not None:
        monkeypatch.setattr(dyadic, "PIECE", piece)
        monkeypatch.setattr(dyadic, "GROUP", group)
    rng = np.random.default_rng(12)
    wide = rng.standard_normal((60, 23)) * 2.0 ** rng.integers(-1074, 970, (60, 23)).astype(np.float64)
    edges = np.array([[1.7e308, -1.7e308, 2.0**-1074, -(2.0**-1074), 3 * 2.0**-1074, 0.0, -0.0, 1.0]])
    for values in (rng.standard_normal((300, 5)), wide, edges, np.zeros((4, 0)), np.zeros((0, 3)), np.zeros((2, 9))):
        want = [sum(map(Fraction, row), Fraction(0)) for row in values.tolist()]
        got = dyadic.exact_row_sums(values)
        assert got == want and all(type(v) is Fraction for v in got)


def test_over_common_gives_each_row_one_denominator():
    """dyadic.over_common: num / den is each value, den is common along the axis (the lcm: for dyadic values the
    largest power of two), and anything not rational (inf, NaN, a Decimal) gives None."""
    from fractions import Fraction

    from aclnn_cli.ops.dyadic import as_fractions_of, over_common

    q = np.array([[Fraction(1, 4), Fraction(-3, 8), 5], [Fraction(1, 3), Fraction(1, 6), Fraction(0)]], dtype=object)
    num, den = over_common(q)
    assert den.tolist() == [[8], [6]] and num.tolist() == [[2, -3, 40], [2, 1, 0]]
    assert as_fractions_of(num, den).tolist() == q.tolist()
    assert over_common(q, axis=0)[1].tolist() == [[12, 24, 1]]
    for bad in (math.inf, math.nan, Decimal(1)):
        assert over_common(np.array([[Fraction(1), bad]], dtype=object)) is None
