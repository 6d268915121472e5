"""tests/arbmp.py, the oracles' arb shim: balls behave as mpf where decided, hand what they cannot decide to mpmath,
round rigorously, and a shim that computes wrong is caught by the sample check."""

from __future__ import annotations

import math
from exactq import Fraction

import flint
import mpmath
import numpy as np
import pytest

import arbmp
from oracle import PREC, Rounder, fraction_bits

R16 = Rounder(np.float16)


def ball(v) -> arbmp.Ball:
    return arbmp.ARB.mpf(v)


def test_comparisons_decided_or_undecided():
    with arbmp.precision():
        third = ball(1) / 3
        assert third < 1 and not third > 1 and third >= 0 and ball(0.5) == 0.5 and ball(0.5) != 1
        assert bool(ball(2)) and not bool(ball(0))
        other = ball(2) / 6
        for undecided in (lambda: third < other, lambda: third == other, lambda: bool(third - other)):
            with pytest.raises(arbmp.Undecided):
                undecided()


def test_foreign_names_and_numbers_fall_back():
    with arbmp.precision():
        for call in (lambda: arbmp.ARB.besselj, lambda: arbmp.ARB.mp.dps, lambda: float(ball(1) / 3),
                     lambda: ball(1) + mpmath.mpf(1), lambda: arbmp.ARB.mpf(float("nan"))):
            with pytest.raises(arbmp.Fallback) as e:
                call()
            assert not isinstance(e.value, arbmp.Undecided)


def test_precision_keys_stay_apart():
    """A textbook's constants cached by mp.mp.prec (gelu's, selu's) keep arb's balls apart from mpmath's mpf."""
    with arbmp.precision(PREC), mpmath.workprec(PREC):
        cache = {arbmp.ARB.mp.prec: "ball", mpmath.mp.prec: "mpf"}
        assert len(cache) == 2 and cache[mpmath.mp.prec] == "mpf" and int(arbmp.ARB.mp.prec) == PREC


def _sweep(textbook, xs):
    return arbmp.textbook_sweep(textbook, np.array(xs, dtype=np.float64), {})


def test_sweep_falls_back_per_element_and_per_op():
    def undecided_at_half(x, attrs, mp):  # (e^x against e^0.5: two inexact balls of one value at x = 0.5)
        return mp.mpf(1) if mp.exp(x) > mp.exp(mp.mpf(0.5)) else mp.mpf(0)

    entries, fallen = _sweep(undecided_at_half, [0.25, 0.5, 0.75, math.inf])
    assert fallen == 1 and entries[3] is None and isinstance(entries[1], mpmath.mpf) and entries[1] == 0
    assert [type(e) for e in (entries[0], entries[2])] == [flint.arb, flint.arb]

    def lacks_a_name(x, attrs, mp):
        return mp.besselj(0, x)

    entries, fallen = _sweep(lacks_a_name, [0.25, 0.5, 0.75])
    assert fallen == 3 and all(isinstance(e, mpmath.mpf) for e in entries)

    def cancels(x, attrs, mp):  # (1 + 2^-300 - 1 at 200 bits: a ball holding 0, at 800 bits its value)
        return (1 + mp.mpf(2) ** -300 * x) - 1

    entries, fallen = _sweep(cancels, [1.0])
    assert fallen == 0 and arbmp.fraction(entries[0].mid()) == Fraction(1, 2**300) and entries[0].is_exact()


def _in_mpmath(dy, factors):
    def f(k):
        with mpmath.workprec(PREC):
            v = factors[k]
            return mpmath.mpf(dy) * (arbmp.as_mpf(v.mid()) if type(v) is flint.arb else v)
    return f


def test_round_products_ties_and_tiny():
    tie = 1 + 2.0**-11  # (halfway between float16's 1 and 1 + 2^-10: to even, 1)
    with arbmp.precision():
        exact_one, third = flint.arb(1), flint.arb(1) / 3
        tiny = -flint.arb(2) ** -5000 / 3
    bits, fallen = arbmp.round_products(tie, [exact_one], R16, _in_mpmath(tie, [exact_one]), sample=1)
    assert fallen == 0 and bits.tolist() == [0x3C00]
    # (3 tie times a ball holding 1/3 holds the tie: mpmath decides, as before the shim)
    bits, fallen = arbmp.round_products(3 * tie, [third], R16, lambda k: mpmath.mpf(3 * tie) / 3, sample=1)
    assert fallen == 1
    bits, fallen = arbmp.round_products(1.0, [tiny], R16, _in_mpmath(1.0, [tiny]), sample=1)
    assert fallen == 0 and bits.tolist() == [0x8000]


def test_a_wrong_shim_is_caught_by_the_sample_check():
    xs = np.linspace(-4, 4, 400)
    entries, _ = _sweep(lambda x, attrs, mp: 1 / (1 + mp.exp(-x)), xs)
    with arbmp.precision():
        wrong = [e * (1 + flint.arb(2) ** -9) for e in entries]  # (a shim 2^-9 off: a bit of float16 changes)

    def in_mpmath(k):
        with mpmath.workprec(PREC):
            return 1 / (1 + mpmath.exp(-mpmath.mpf(float(xs[k]))))

    bits, _ = arbmp.round_products(1.0, entries, R16, in_mpmath)
    assert bits.tolist() == [R16(in_mpmath(k)) for k in range(len(xs))]
    with pytest.raises(AssertionError):
        arbmp.round_products(1.0, wrong, R16, in_mpmath)


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32"])
def test_quick_round_agrees_with_integers(name):
    rng = np.random.default_rng(3)
    values = rng.standard_normal(3000) * np.exp2(rng.integers(-160, 140, 3000))
    quick = [arbmp.quick_round(float(v), name) for v in values]
    decided = [(q, v) for q, v in zip(quick, values) if q is not None]
    assert len(decided) > 2900
    for q, v in decided:
        bits = fraction_bits(Fraction(float(v)), name)
        want = (np.array(bits, np.uint32).view(np.float32) if name == "float32"
                else np.array(bits, np.uint16).view(arbmp.D_NP[name]))
        assert q == float(want) and math.copysign(1, q) == math.copysign(1, float(want)), v
