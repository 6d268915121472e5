"""aclnnHardswishBackward: golden vs an independent oracle, the kernel replica and what verify needs of it.

The oracle is the doc's piecewise formula (0 below -3, x/3 + 1/2 on the closed [-3, 3], 1 above): decided in
float64 where it is conclusive, else in mpmath at 200 bits with tests/oracle.py's Rounder (oracle_bits of
test_op_gelu_backward_v2). An exact zero result has the sign of dy * (+0), as the IEEE product (and the kernel).
"""

from __future__ import annotations

from exactq import Fraction, PackageFraction

import mpmath
import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops.elementwise import hardswish_backward as M

from oracle import PREC
from test_op_gelu_backward_v2 import all_values, oracle_bits

SPEC = M.SPEC
F = np.float32
OTHER_DY = -0.0013
EDGES = np.array([-3.0, 3.0, -2.9999998, 2.9999998, -3.0000002, 3.0000002, -1.5, -1.4999999, 0.0, -0.0], F)


def textbook64(x):
    with np.errstate(invalid="ignore"):
        g = np.where(x < -3, 0.0, np.where(x <= 3, x / 3 + 0.5, 1.0))
        return g, np.where(x < -3, 0.0, np.where(x <= 3, np.abs(x) / 3 + 0.5, 1.0))


def textbook(x):
    x = mpmath.mpf(x)
    return mpmath.mpf(0) if x < -3 else (x / 3 + mpmath.mpf(1) / 2 if x <= 3 else mpmath.mpf(1))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16], ids=lambda d: d.name)
@pytest.mark.parametrize("dy_value", [1.0, OTHER_DY], ids=["dy=1", "dy=other"])
def test_golden_is_correctly_rounded_for_every_16bit_x(dtype, dy_value):
    x = all_values(dtype)
    x64 = x.astype(np.float64)
    dy = np.full(x.shape, dy_value).astype(F).astype(dtype.np_dtype)
    got, _ = golden(SPEC, {"gradOutput": dy, "self": x}, dtype)
    est, terms = textbook64(np.where(np.isfinite(x64), x64, 0.0))
    with mpmath.workprec(PREC):
        want, hard = oracle_bits(x64, dy.astype(np.float64), est, terms, dtype, lambda i: textbook(x64[i]),
                                 sign=np.ones(x.size))
    finite = np.isfinite(x64)
    bad = np.flatnonzero(finite & (got.view(np.uint16).astype(np.int64) != want))
    assert finite.sum() > 60000 and hard < 2000  # x/3 + 1/2 on a 16-bit midpoint (a tie), x = -1.5
    assert not bad.size, f"{bad.size} not correctly rounded, first: {[(float(x[i]), hex(want[i])) for i in bad[:5]]}"


def test_fp32_golden_reference_bound_and_exact_path():
    rng = np.random.default_rng(5)
    near = [(F(v).view(np.int32) + np.arange(-30, 31, dtype=np.int32)).view(F) for v in (-3.0, 3.0, -1.5)]
    x = np.concatenate([rng.uniform(-5, 5, 2000).astype(F), *near, EDGES, np.array([1e30, -1e30, 2.0**-149], F)])
    dy = rng.standard_normal(x.size).astype(F)
    got, _ = golden(SPEC, {"gradOutput": dy, "self": x}, D.FLOAT32)
    ref = SPEC.golden_f64({"gradOutput": dy.astype(float), "self": x.astype(float)})
    for v, d, g, value, bound in zip(x.astype(float), dy.astype(float), got, ref.value, ref.bound):
        exact = Fraction(d) * (0 if v < -3 else (Fraction(v) / 3 + Fraction(1, 2) if v <= 3 else 1))
        assert abs(Fraction(value) - exact) <= Fraction(bound), v
        assert Fraction(float(g)) == Fraction(D.round_fraction(exact, D.FLOAT32)), v
        assert SPEC.exact({"gradOutput": PackageFraction(d), "self": PackageFraction(v)}) == exact
    assert (ref.bound <= 4.01 * 2.0**-53 * np.abs(ref.value) + np.abs(dy.astype(float)) * 2.0**-1059).all()


def run(fn, x, dy=1.0):
    x = np.atleast_1d(np.asarray(x, dtype=F))
    return fn({"gradOutput": np.broadcast_to(np.asarray(dy, dtype=F), x.shape).copy(), "self": x})


def test_kernel_at_hand_computed_points():
    """g = fl32(fl32(x * 0.33333334f) + 0.5f), closed ends: -3 -> -0.5, 3 -> 1.5; x = -1.5 -> exactly 0."""
    got = run(M._kernel, EDGES)
    assert got.tolist() == [-0.5, 1.5, -0.4999999403953552, 1.5, 0.0, 1.0, 0.0, 2.9802322387695312e-08, 0.5, 0.5]
    # Not correctly rounded: -1.4999999 (-1.5 + 2^-23) gives 2^-25 where x/3 + 1/2 = 2^-23/3 (25% low);
    # 2.9999998 gives 1.5 (x * 0.33333334f rounds to 0.99999994) where the exact value is 1.49999992.
    assert run(M._kernel, [1.2], dy=-2.0)[0] == F(-2) * (F(1.2) * F(1 / 3) + F(0.5))
    assert run(M._kernel, [-4.0], dy=-1.0)[0] == 0 and np.signbit(run(M._kernel, [-4.0], dy=-1.0)[0])


def test_specials_of_kernel_and_ieee():
    inf, nan = np.inf, np.nan
    x = np.array([nan, inf, -inf, -1.5, -5.0, 1.0, 1.0], F)
    dy = np.array([2.0, 3.0, 4.0, inf, inf, nan, -inf], F)
    k = run(M._kernel, x, dy)
    ieee = M._ieee({"gradOutput": dy.astype(float), "self": x.astype(float)})
    assert k[:3].tolist() == [2.0, 3.0, 0.0] and np.isnan(k[3:6]).all() and k[6] == -inf
    assert np.array_equal(np.isnan(ieee), np.isnan(k)) and ieee[:3].tolist() == [2.0, 3.0, 0.0] and ieee[6] == -inf


def relieved_error(dev, x, dy):
    """Relative error of a float32 result as the default standard re-judges it: against max(|g|, scale)."""
    ref = SPEC.golden_f64({"gradOutput": dy.astype(float), "self": x.astype(float)})
    gold, _ = golden(SPEC, {"gradOutput": dy, "self": x}, D.FLOAT32)
    g = gold.astype(float)
    return np.abs(dev.astype(float) - g) / np.maximum(np.abs(g), ref.scale), np.abs(dev.astype(float) - g) / np.maximum(
        np.abs(g), D.FLOAT32.smallest_normal), gold


def test_float32_kernel_is_far_from_correct_rounding_near_the_zero_but_ordinary_against_the_scale():
    """Measured: 38.5% of random float32 x in [-3, 3] off CR, up to 21,845 ulps near -1.5. Against the
    scale |dy| (|x|/3 + 1/2) every error is below 2^-22: verify's relief forgives it."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-3, 3, 100_000).astype(F), (F(-1.5).view(np.int32) + np.arange(-500, 501)).view(F)])
    dy = np.ones(x.size, F)
    dev = run(M._kernel, x)
    relieved, plain, gold = relieved_error(dev, x, dy)
    off = dev != gold
    ulps = np.abs(dev.view(np.int32).astype(np.int64) - gold.view(np.int32).astype(np.int64))
    assert 0.35 < off[:100_000].mean() < 0.42 and ulps[np.abs(gold) > 1e-30].max() >= 20_000
    assert relieved.max() < 2.0**-22 and plain.max() > 0.1


def test_defects_fail_and_legitimate_variants_pass_against_the_scale():
    """On x in [-5, 5] plus the ends: every defect is off by >= 1/3 of the scale somewhere (the open ends
    only at x = +-3 exactly: a case must hold them); legitimate variants stay below 2^-21 of it."""
    x = np.concatenate([np.linspace(-5, 5, 4001, dtype=F), EDGES])
    dy = np.random.default_rng(1).standard_normal(x.size).astype(F)
    for name, fn in M.VARIANTS.items():
        relieved, _, _ = relieved_error(run(fn, x, dy), x, dy)
        if fn.variant_kind == "defect":
            assert relieved.max() >= 1 / 3 - 1e-6, name
        else:
            assert fn.variant_kind == "legitimate" and relieved.max() < 2.0**-21, name
    ends = np.abs(x) == 3
    relieved, _, _ = relieved_error(run(M.VARIANTS["exclusive-bounds"], x, dy), x, dy)
    assert (relieved[~ends] < 2.0**-21).all() and (relieved[ends] >= 1 / 3 - 1e-6).all()
