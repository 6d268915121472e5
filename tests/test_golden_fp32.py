"""float32 goldens where float64 alone is not enough: around the zeros of the derivatives.

Near x ~ -1.2785 (Silu) and x ~ -0.7512 (FastGelu) s(1 + z(1-s)) cancels, float64
loses up to ~30 bits there, and only the certified-rounding fallback keeps the
golden correctly rounded. Oracle: mpmath at 200 bits, rounded to 24 bits by mpmath.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops import OPS

from oracle import PREC

DECLARED = sorted(name for name, op in OPS.items() if op.textbook is not None)


def round_to_f32(v) -> float:
    """Nearest float32 by mpmath's own rounding (normal range; subnormals on the 2^-149 grid)."""
    with mpmath.workprec(PREC):
        if abs(v) < mpmath.mpf(2) ** -126:
            return float(mpmath.floor(v * mpmath.mpf(2) ** 149 + mpmath.mpf("0.5")) * mpmath.mpf(2) ** -149)
    with mpmath.workprec(24):
        return float(+v)


def around(root: float, n: int) -> np.ndarray:
    centre = np.float32(root).view(np.int32)
    return (centre + np.arange(-n, n + 1, dtype=np.int32)).view(np.float32)


def check(op_name: str, x: np.ndarray, dy: np.ndarray, attrs: dict | None = None) -> list:
    """Elements whose float32 golden differs from the op's textbook formula at 200 bits, rounded once."""
    op, attrs = OPS[op_name], dict(attrs or {})
    ins = {t.name: np.zeros_like(x) for t in op.inputs} | {op.inputs[0].name: dy, op.inputs[1].name: x}
    got, _ = golden(op, ins, D.FLOAT32, attrs)
    bad = []
    with mpmath.workprec(PREC):
        for xi, dyi, gi in zip(x, dy, got):
            want = round_to_f32(mpmath.mpf(float(dyi)) * op.textbook(mpmath.mpf(float(xi)), attrs, mpmath))
            if want != float(gi):
                bad.append((float(xi), float(dyi), float(gi), want))
    return bad


@pytest.mark.parametrize("op_name,root", [("aclnnSiluBackward", -1.2784645), ("aclnnFastGeluBackward", -0.7511661)])
def test_fp32_golden_is_correctly_rounded_at_the_derivative_zero(op_name, root):
    x = around(root, 3000)
    dy = np.ones_like(x)
    assert check(op_name, x, dy) == []


@pytest.mark.parametrize("op_name", DECLARED)  # every op that declares its textbook formula
def test_fp32_golden_is_correctly_rounded_on_a_wide_sample(op_name):
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-12, 12, 3000), rng.choice([-1, 1], 1000) * np.exp(rng.uniform(-30, 5.5, 1000))])
    x = np.concatenate([x, [88.5, 89.0, 103.0, -88.5, -89.0, -103.0, 2.9999998, -2.9999998]]).astype(np.float32)
    dy = rng.standard_normal(x.size).astype(np.float32)
    for attrs in OPS[op_name].oracle_attributes:
        assert check(op_name, x, dy, attrs) == [], attrs


def test_round_to_odd_avoids_double_rounding_into_bf16():
    # docs/standards.md ("Facts"): via float32 RNE this becomes 1.0; correct rounding gives 1.0078125.
    x = np.array([1 + 2**-8 + 2**-30, -(1 + 2**-8 + 2**-30), 1 + 2**-8, 1 + 3 * 2**-8])
    got = D.round_from_f64(x, D.BFLOAT16).astype(np.float64)
    assert got.tolist() == [1.0078125, -1.0078125, 1.0, 1.015625]


def test_bf16_rounding_matches_exact_rational_rounding():
    """Values placed just off bf16 midpoints (where double rounding bites), normals and subnormals."""
    import mpmath

    from oracle import Rounder

    rounder = Rounder(D.BFLOAT16.np_dtype)
    rng = np.random.default_rng(3)
    mant = rng.integers(128, 256, 4000).astype(np.float64)
    exps = rng.integers(-140, 120, 4000)
    offsets = rng.choice([-1, 1], 4000) * 2.0 ** rng.integers(-40, -24, 4000)
    x = np.ldexp(mant + 0.5 + offsets, exps - 7)  # midpoint of two bf16 neighbours, nudged
    got = D.round_from_f64(x, D.BFLOAT16).astype(np.float64)
    want_bits = [rounder(mpmath.mpf(v)) for v in x]
    want = np.array(want_bits, dtype=np.uint16).view(D.BFLOAT16.np_dtype).astype(np.float64)
    assert got.tolist() == want.tolist()
    # The exact-fallback rounding agrees with the oracle too.
    from fractions import Fraction
    assert [D.round_fraction(Fraction(v), D.BFLOAT16) for v in x[:500]] == want[:500].tolist()
    naive = x.astype(D.BFLOAT16.np_dtype).astype(np.float64)
    assert (naive != want).sum() > 100  # the data does exercise double rounding


def test_the_oracles_integer_rounding_agrees_with_mpmath_at_ties_subnormals_and_overflow():
    """oracle.fraction_bits (the oracle tests' fast rounding of exact values) and dtypes.round_fraction against mpmath's, on rationals
    around ties (a grid point's midpoint moved by 2^-300), across the subnormals, and past the largest finite."""
    import random
    from fractions import Fraction

    from oracle import _mpmath_bits, fraction_bits
    from aclnn_cli.tensor import dtypes as D

    rng = random.Random(1)
    for name in ("float32", "float16", "bfloat16"):
        values = []
        for _ in range(1500):
            kind = rng.randrange(4)
            if kind == 0:
                v = Fraction(rng.randint(-10**30, 10**30), rng.randint(1, 10**30))
            elif kind == 1:  # a midpoint of some grid, exactly or 2^-300 off
                v = Fraction(2 * rng.randint(1, 2**26) + 1, 2) * Fraction(2) ** rng.randint(-170, 130)
                v += rng.choice([0, 1, -1]) * Fraction(1, 2**300)
            elif kind == 2:
                v = Fraction(rng.randint(1, 2**40), 2 ** rng.randint(100, 200))
            else:
                v = Fraction(rng.randint(-2**30, 2**30)) * Fraction(2) ** rng.randint(90, 140)
            values.append(v)
        want = [int(b) for b in _mpmath_bits(values, D.lookup(name))]
        assert [fraction_bits(v, name) for v in values] == want, name
        # the tool's own rounding of an exact value (dtypes.round_fraction, the exact paths' last step), bit for bit
        dtype = D.lookup(name)
        bits = np.array([D.round_fraction(v, dtype) for v in values]).astype(dtype.np_dtype).view(f"u{dtype.itemsize}")
        assert bits.tolist() == want, name
