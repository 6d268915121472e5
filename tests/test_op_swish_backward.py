"""aclnnSwishBackward beyond the exhaustive oracle test (test_golden_exhaustive.py, from the op's
`textbook`): beta = 1 is Silu, float32 goldens, the kernel replica, the variants.
"""

from __future__ import annotations


import mpmath
import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops import OPS
from aclnn_cli.ops.elementwise.swish_backward import CONTRACT_NOTES, SPEC

from oracle import PREC
from test_golden_exhaustive import all_values

F32 = np.float32
OTHER_DY = -0.0013


def run_golden(x, dy_value, dtype, beta):
    dy = np.full(x.shape, dy_value, dtype=np.float64).astype(F32).astype(dtype.np_dtype)
    got, _ = golden(SPEC, {"gradOutput": dy, "self": x}, dtype, {"betaOptional": beta})
    return dy, got


def test_beta_one_is_silu():
    """beta = 1 is SiluBackward: both goldens are correctly rounded, so they agree bit for bit."""
    x = all_values(D.FLOAT16)
    dy, got = run_golden(x, OTHER_DY, D.FLOAT16, 1.0)
    silu, _ = golden(OPS["aclnnSiluBackward"], {"gradOutput": dy, "self": x}, D.FLOAT16)
    assert np.array_equal(got.view(np.uint16), silu.view(np.uint16))


def test_beta_zero_halves_the_gradient_and_signature():
    x = np.array([-3e38, -5.0, 0.0, 7.0, 3e38], dtype=F32)
    dy = np.array([1.0, -2.0, 3.0, 0.5, -1.0], dtype=F32)
    got, _ = golden(SPEC, {"gradOutput": dy, "self": x}, D.FLOAT32, {"betaOptional": 0.0})
    assert got.tolist() == [0.5, -1.0, 1.5, 0.25, -0.5]
    assert [a.name for a in SPEC.attributes] == ["betaOptional"] and SPEC.attributes[0].default == 1.0
    assert "161002" in CONTRACT_NOTES


def around_root(beta: float, n: int) -> np.ndarray:
    """The 2n float32 values around the derivative's zero, beta x = -1.2784645427610738."""
    return (F32(-1.2784645427610738 / beta).view(np.int32) + np.arange(-n, n, dtype=np.int32)).view(F32)


def round_f32(v) -> float:
    """mpmath's own rounding to float32 (normal range)."""
    with mpmath.workprec(24):
        return float(+v)


@pytest.mark.parametrize("beta", [float(F32(1.7)), -0.75])
def test_fp32_golden_is_correctly_rounded_at_the_derivative_zero(beta):
    """Around beta x = -1.278465 float64 cancels and the exact path decides: checked against mpmath."""
    x = around_root(beta, 300)
    dy = np.ones_like(x)
    got, hard = golden(SPEC, {"gradOutput": dy, "self": x}, D.FLOAT32, {"betaOptional": beta})
    assert hard.exact > 0
    with mpmath.workprec(PREC):
        b = mpmath.mpf(beta)
        for xi, gi in zip(x, got):
            z = b * mpmath.mpf(float(xi))
            sig = 1 / (1 + mpmath.exp(-z))
            assert float(gi) == round_f32(sig * (1 + z * (1 - sig))), float(xi)


def kernel(x, beta, dy):
    t = {"self": np.asarray(x, dtype=F32), "gradOutput": np.asarray(dy, dtype=F32), "betaOptional": F32(beta)}
    with np.errstate(all="ignore"):
        return SPEC.kernel(t)


@pytest.mark.parametrize("x,beta,dy,bits", [
    # each step rounded to float32 by hand (mpmath): v = x*beta, e = exp(-v), s = 1/(e+1), ((1-s)v)s + s, *dy
    (1.0, 1.0, 1.0, 0x3F6D7BD1),  # 0.92767054
    (2.0, 1.7, -0.5, 0xBF09779D),  # -0.5369814
    (-0.75, -0.75, 3.0, 0x4013482E),  # negative beta: 2.3012805
    (-52.0, 1.7, 1.0, 0x82F167EE),  # v = -88.4: s is subnormal, -3.547142e-37
    (-1.2784645, 1.0, 1.0, 0x00000000),  # at the derivative's zero (s - s cancels): +0
    (-60.0, 1.7, 1.0, 0x00000000),  # v = -102 < -88.72: exp overflows, s = 0, +0 (exact: -7e-43)
    (-60.0, 1.7, -1.0, 0x80000000),  # ... and -0 with dy < 0
    (100.0, 1.0, 1.0, 0x3F800000),  # s = 1: gradOutput exactly
    (3.0, 0.0, 2.0, 0x3F800000),  # beta = 0: 0.5 dy
])
def test_kernel_matches_hand_computed_float32(x, beta, dy, bits):
    out = kernel([x], beta, [dy])
    assert out.dtype == F32 and int(out.view(np.uint32)[0]) == bits


def test_kernel_specials_and_edge():
    x = np.array([np.inf, -np.inf, np.nan, 1.0, 3e38, -3e38, 1.0], dtype=F32)
    dy = np.array([1.0, 1.0, 1.0, np.nan, 1.0, 1.0, np.inf], dtype=F32)
    out = kernel(x, 2.0, dy)
    assert np.isnan(out[:6]).all() and out[6] == np.inf
    where, device = SPEC.edge({"self": x.astype(np.float64), "gradOutput": dy, "betaOptional": 2.0})
    assert where.tolist() == [False, False, False, False, True, True, False] and np.isnan(device[where]).all()
    ref = SPEC.golden_f64({"self": x.astype(np.float64), "gradOutput": dy.astype(np.float64), "betaOptional": 2.0})
    assert np.isnan(ref.value[:4]).all() and ref.value[4] == 1.0 and -1e-300 < ref.value[5] <= 0
    assert ref.value[6] == np.inf
    for beta in (np.inf, np.nan):  # a non-finite beta: NaN, as the kernel gives
        ref = SPEC.golden_f64({"self": np.array([-1.0, 0.0, 2.0]), "gradOutput": np.ones(3), "betaOptional": beta})
        assert np.isnan(ref.value).all()


def exact_f32(x, beta, dy):
    got, _ = golden(SPEC, {"gradOutput": dy, "self": x}, D.FLOAT32, {"betaOptional": beta})
    ref = SPEC.golden_f64({"gradOutput": dy.astype(np.float64), "self": x.astype(np.float64), "betaOptional": beta})
    return got.astype(np.float64), np.maximum(np.abs(got), ref.scale)


def within_kernel_rounding(out, x, beta, gold, scale):
    """|out - gold| <= (8 + |beta x|) float32 ulps of max(|gold|, term scale) (verify's relief denominator).

    What a correct float32 kernel loses: a few roundings, plus |v| times the rounding of v = beta x
    (exp amplifies it) and |v| ulp(s) in (1 - s) v, the 1 - s by subtraction for v > 0.
    """
    ulps = np.abs(out.astype(np.float64) - gold) / (scale * 2.0**-23)
    return ulps <= 8 + np.abs(x.astype(np.float64) * beta)


def sample(lo, hi, n=4000, seed=1):
    rng = np.random.default_rng(seed)
    return rng.uniform(lo, hi, n).astype(F32), rng.standard_normal(n).astype(F32)


@pytest.mark.parametrize("beta", [1.0, float(F32(1.7)), -0.75])
def test_kernel_is_within_its_rounding_of_the_exact_result(beta):
    """Including around the derivative's zero (beta x ~ -1.278465) where the kernel cancels."""
    x = np.concatenate([sample(-40, 40)[0], around_root(beta, 500)])
    dy = np.ones_like(x)
    gold, scale = exact_f32(x, beta, dy)
    assert within_kernel_rounding(kernel(x, beta, dy), x, beta, gold, scale).all()


def test_kernel_16bit_deviations_from_correct_rounding():
    """The emulated device (float32 kernel, RINT to float16) on every fp16 x, dy = 1: within 1 ulp of CR
    except x beta < -88.72, where exp overflows and it gives +0 for a tiny negative result."""
    x = all_values(D.FLOAT16)
    x = x[np.isfinite(x.astype(np.float64))]
    for beta in (1.0, float(F32(1.7))):
        dy = np.ones_like(x)
        gold, _ = golden(SPEC, {"gradOutput": dy, "self": x}, D.FLOAT16, {"betaOptional": beta})
        dev = D.round_from_f32(kernel(x.astype(F32), beta, dy.astype(F32)), D.FLOAT16)
        gb, db = gold.view(np.uint16).astype(np.int64), dev.view(np.uint16).astype(np.int64)
        overflow = x.astype(np.float64) * beta < -88.72
        assert (db[overflow] == 0).all() and (gb[overflow] == 0x8000).all()
        diff = np.abs(gb - db)[~overflow]
        assert diff.max() <= 1 and (diff == 1).sum() < 40


DEFECT_RANGES = {  # a plausible range of self where each defect shows (beta = 1.7, dy ~ N(0, 1))
    "exp-overflow": (-100, 100),  # NaN once beta x > 88.7
    "expanded-formula": (-1e8, 1e8),  # 1 + z - z s = 0 once z >= 2^24 (bf16 and float32 inputs)
    "sign-slip": (-8, 8),
    "beta-ignored": (-8, 8),
    "beta-once": (-8, 8),
    "y-as-forward-output": (-8, 8),
}
LEGITIMATE = ("stable-formula", "fused-multiply-add")


def test_variants_are_classified():
    assert set(SPEC.variants) == set(DEFECT_RANGES) | set(LEGITIMATE)  # (their names: test_conformance.py)


@pytest.mark.parametrize("name", sorted(DEFECT_RANGES))
def test_defect_differs_from_the_kernel(name):
    beta = float(F32(1.7))
    x, dy = sample(*DEFECT_RANGES[name])
    t = {"self": x, "gradOutput": dy, "betaOptional": F32(beta)}
    with np.errstate(all="ignore"):
        good, bad = SPEC.kernel(t), SPEC.variants[name](t)
        assert bad.dtype == F32
        off = (np.isnan(bad) != np.isnan(good)) | (np.abs(bad - good) > 2.0**-13 * np.abs(good) + 1e-30)
    assert off.mean() > 0.01, f"{name}: differs on {off.sum()} of {x.size}"


@pytest.mark.parametrize("name", LEGITIMATE)
def test_legitimate_variant_stays_within_a_few_ulps(name):
    beta = float(F32(1.7))
    x, dy = sample(-40, 40)
    gold, scale = exact_f32(x, beta, dy)
    with np.errstate(all="ignore"):
        out = SPEC.variants[name]({"self": x, "gradOutput": dy, "betaOptional": F32(beta)})
    assert out.dtype == F32 and within_kernel_rounding(out, x, beta, gold, scale).all()
