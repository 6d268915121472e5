"""golden/exactcheck.py's integer test of an exact value against its reference's bound says what the Fraction
formula says, at the bound's edge too (where a rounding of either side would decide it wrongly)."""

from fractions import Fraction

from hypothesis import given, strategies as st

from aclnn_cli.golden.exactcheck import _problem

FINITE = st.floats(allow_nan=False, allow_infinity=False, width=64)


def _fraction_formula(e, v: float, b: float) -> bool:
    return abs(Fraction(e) - Fraction(v)) > Fraction(b)


@given(st.integers(-2**70, 2**70), st.integers(1, 2**70), FINITE, FINITE)
def test_any_fraction_against_any_bound(n, d, v, b):
    e = Fraction(n, d)
    assert (_problem(e, v, b) is not None) == _fraction_formula(e, v, b)


@given(FINITE, st.floats(min_value=0, allow_nan=False, allow_infinity=False), st.sampled_from([-1, 1]),
       st.integers(-2, 2))
def test_at_the_edge_of_the_bound(v, b, side, nudge):
    """v +- b exactly, and a hair either side of it (2^-1100: below any float's spacing)."""
    e = Fraction(v) + side * Fraction(b) + nudge * Fraction(1, 2**1100)
    outside = nudge != 0 if b == 0 else nudge * side > 0
    assert (_problem(e, v, b) is not None) == _fraction_formula(e, v, b) == outside


@given(st.integers(-2**80, 2**80), FINITE, FINITE)
def test_an_integer_exact_value(n, v, b):
    assert (_problem(n, v, b) is not None) == _fraction_formula(n, v, b)


def test_the_message_names_the_value_and_the_bound():
    assert _problem(Fraction(3), 1.0, 0.5) == ("3.0, outside its reference's 1.0 +- 0.5 (the exact function or the "
                                               "bound is wrong; goldens are certified by the bound)")
    assert _problem(Fraction(3, 2), 1.0, 0.5) is None


def test_a_value_beyond_float64_is_still_a_message():
    assert _problem(Fraction(2**1100), 1.0, 0.5).startswith("about 2^1100, outside its reference's 1.0")
