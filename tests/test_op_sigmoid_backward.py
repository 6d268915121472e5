"""aclnnSigmoidBackward: exhaustive goldens against mpmath, the kernel replica, the variants.

Oracle: the doc's grad_output * y * (1 - y) at 200 bits (exact for these inputs) on arb balls, rounded
in integers where float64 cannot decide (tests/arbmp.py's round_products; mpmath and tests/oracle.py's
Rounder on a random sample, which must agree), written here (no code shared with aclnn_cli). Exact
zeros (y = 0 or 1) carry the IEEE sign of the product dy * y * (1 - y), with 1 - 1 = +0.
"""

from __future__ import annotations

import functools
from exactq import PackageFraction

import flint
import mpmath
import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops.contract import broadcast_shape
from aclnn_cli.ops.elementwise.sigmoid_backward import CONTRACT_NOTES, SPEC

import arbmp
from oracle import PREC, rounder
from test_golden_exhaustive import all_values

F32 = np.float32
DY_VALUES = [1.0, -0.0013, 3.0e4]  # the last one overflows float16 for |y| >~ 1.5
DTYPES = [D.FLOAT16, D.BFLOAT16]


@functools.lru_cache(maxsize=None)
def oracle_bits(dtype_name: str, dy_value: float) -> tuple[np.ndarray, np.ndarray]:
    """(finite indices, correctly rounded bits) of dy * y * (1 - y) for every finite 16-bit y."""
    dtype = D.lookup(dtype_name)
    y = all_values(dtype)
    dy = float(np.array(dy_value, dtype=F32).astype(dtype.np_dtype))
    r = rounder(dtype.np_dtype)
    finite = np.flatnonzero(np.isfinite(y.astype(np.float64)))
    ys = y[finite].astype(np.float64)
    with arbmp.precision(PREC):
        balls = [flint.arb(v) * (1 - flint.arb(v)) for v in ys.tolist()]

    def in_mpmath(k):
        yi = mpmath.mpf(float(ys[k]))
        return mpmath.mpf(dy) * yi * (1 - yi)

    bits, fallen = arbmp.round_products(dy, balls, r, in_mpmath)
    assert fallen == 0  # (exact balls: rounded in integers at worst)
    zero = np.array([b.is_zero() for b in balls]) | (dy == 0)
    # exact zeros: the IEEE sign of the product, dy's sign times y's sign (1 - y is +1 or +0)
    bits[zero] = np.where((dy < 0) != np.signbit(ys[zero]), 0x8000, 0)
    return finite, bits


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("dy_value", DY_VALUES, ids=["dy=1", "dy=other", "dy=big"])
def test_golden_is_correctly_rounded_for_every_16bit_y(dy_value, dtype):
    y = all_values(dtype)
    dy = np.full(y.shape, dy_value, dtype=np.float64).astype(F32).astype(dtype.np_dtype)
    got, _ = golden(SPEC, {"gradOutput": dy, "output": y}, dtype)
    finite, want = oracle_bits(dtype.name, dy_value)
    assert finite.size > 60000
    have = got.view(np.uint16)[finite].astype(np.int64)
    bad = np.flatnonzero(have != want)
    assert bad.size == 0, f"{bad.size} not correctly rounded, first: " + str(
        [(float(y[finite[k]]), hex(have[k]), hex(want[k])) for k in bad[:5]])


def test_ties_and_the_exact_path():
    """Rational results land exactly on midpoints: those go to the exact path and round to even."""
    dy = np.array([1, 3, 5], dtype=np.float16) * np.float16(2.0**-23)  # times y(1-y) = 1/4: 0.5, 1.5, 2.5 x 2^-24
    y = np.full(3, 0.5, dtype=np.float16)
    got, hard = golden(SPEC, {"gradOutput": dy, "output": y}, D.FLOAT16)
    assert hard.exact == 3 and got.astype(np.float64).tolist() == [0.0, 2.0**-23, 2.0**-23]
    assert SPEC.exact({"gradOutput": PackageFraction(3), "output": PackageFraction(1, 3)}) == PackageFraction(2, 3)


def test_fp32_golden_is_correctly_rounded_on_a_wide_sample():
    rng = np.random.default_rng(11)
    y = np.concatenate([rng.uniform(-3, 3, 1500), 1 - np.exp(rng.uniform(-17, -1, 500)),
                        rng.choice([-1, 1], 500) * np.exp(rng.uniform(-30, 30, 500))]).astype(F32)
    dy = (rng.standard_normal(y.size) * np.exp(rng.uniform(-10, 10, y.size))).astype(F32)  # results in the normal range
    got, _ = golden(SPEC, {"gradOutput": dy, "output": y}, D.FLOAT32)
    with mpmath.workprec(PREC):
        for yi, dyi, gi in zip(y, dy, got):
            yv = mpmath.mpf(float(yi))
            v = mpmath.mpf(float(dyi)) * yv * (1 - yv)
            with mpmath.workprec(24):
                assert float(gi) == float(+v), (float(yi), float(dyi))


def kernel(y, dy):
    with np.errstate(all="ignore"):
        return SPEC.kernel({"output": np.asarray(y, dtype=F32), "gradOutput": np.asarray(dy, dtype=F32)})


@pytest.mark.parametrize("y,dy,bits", [
    # (dy * (1 - y)) * y, each step rounded to float32 by hand (exact fractions)
    (0.1, 0.3, 0x3CDD2F1B),  # 0.027
    (0.7, -1.3, 0xBE8BC6A8),  # -0.273
    (0.3416752, 0.846813, 0x3E430C41),  # 2 ulps above the correctly rounded 0x3E430C3F
    (2.0, 1.0, 0xC0000000), (3.0, 1.0, 0xC0C00000), (4.0, 1.0, 0xC1400000),  # the doc's example: -2, -6, -12
    (1.0, 1.0, 0x00000000), (1.0, -1.0, 0x80000000), (-0.0, 1.0, 0x80000000),  # exact zeros: IEEE signs
    (np.inf, 1.0, 0xFF800000), (-np.inf, 1.0, 0xFF800000), (np.inf, -2.0, 0x7F800000),  # -inf * sign(dy)
    (-0.5, 3e38, 0xFF800000),  # dy (1 - y) overflows: -inf, exact -2.25e38
])
def test_kernel_matches_hand_computed_float32(y, dy, bits):
    out = kernel([y], [dy])
    assert out.dtype == F32 and int(out.view(np.uint32)[0]) == bits


def test_kernel_nan_and_ieee_specials():
    y = np.array([np.nan, 0.5, np.inf, 0.5, 1.0, 2.0**-120], dtype=F32)
    dy = np.array([1.0, np.nan, 0.0, np.inf, np.inf, np.inf], dtype=F32)
    out = kernel(y, dy)
    assert np.isnan(out[[0, 1, 2, 4]]).all() and out[3] == np.inf and out[5] == np.inf
    ref = SPEC.golden_f64({"output": y.astype(np.float64), "gradOutput": dy.astype(np.float64)})
    assert np.isnan(ref.value[[0, 1, 2, 4]]).all() and ref.value[3] == np.inf and ref.value[5] == np.inf


def test_base_helpers_work_with_the_output_input():
    """golden_f64 and device_edges read 'output' as the non-gradient input (no 'self' anywhere)."""
    y = np.array([-0.5, 0.25, 3.0, np.inf, 0.5], dtype=np.float64)
    dy = np.array([3e38, 1.0, np.inf, 1.0, 2.0**-149], dtype=F32).astype(np.float64)
    ref = SPEC.golden_f64({"gradOutput": dy, "output": y})
    assert ref.value[0] == dy[0] * -0.75 and ref.value[1] == 0.1875 and ref.value[2] == -np.inf
    assert ref.value[3] == -np.inf and ref.value[4] == 2.0**-151
    where, device = SPEC.device_edges({"gradOutput": dy, "output": y})
    assert where.tolist() == [True, False, False, False, True] and device[0] == -np.inf
    assert device[4] == 0.0  # 2^-149 * 0.5 underflows to 0 (ties to even) before the final * 0.5
    got, _ = golden(SPEC, {"gradOutput": dy.astype(F32), "output": y.astype(F32)}, D.FLOAT32)
    assert got[0] == F32(dy[0] * -0.75)


def test_declaration():
    assert [t.name for t in SPEC.inputs] == ["gradOutput", "output"] and SPEC.output.name == "gradInput"
    assert SPEC.contract.dtypes == "promote"
    assert set(SPEC.contract.broadcast_on) == set(SPEC.products) and broadcast_shape((3, 1), (4,)) == (3, 4)
    assert "bfloat16" not in SPEC.products["910"] and "161002" in CONTRACT_NOTES


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in float32 steps."""
    def key(v):
        i = np.asarray(v, dtype=F32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(key(a) - key(b))


def sample(lo=0.0, hi=1.0, n=20000, seed=5):
    rng = np.random.default_rng(seed)
    return rng.uniform(lo, hi, n).astype(F32), rng.standard_normal(n).astype(F32)


def cr_f32(y, dy):
    got, _ = golden(SPEC, {"gradOutput": dy, "output": y}, D.FLOAT32)
    return got


def test_kernel_is_within_two_ulps_of_correct_rounding():
    """Three float32 roundings: 31% of random y in [0, 1] (dy normal) off the correctly rounded value, by <= 2 ulps."""
    y, dy = sample()
    d = ulps(kernel(y, dy), cr_f32(y, dy))
    assert d.max() == 2 and 0.25 < (d > 0).mean() < 0.37
    y, dy = sample(-1e4, 1e4)
    assert ulps(kernel(y, dy), cr_f32(y, dy)).max() <= 2


DEFECT_RANGES = {  # a plausible range of output where each defect shows (dy ~ N(0, 1))
    "sign-slip": (0.0, 1.0),
    "output-as-input": (0.0, 1.0),
    "graph-input-order": (0.0, 1.0),
    "cancelling-formula": (1 - 2.0**-10, 1.0),  # y - y*y cancels next to 1 (float32 outputs)
    "product-first": (2e19, 1e20),  # y * (1 - y) overflows where dy * (1 - y) * y is still finite
}


COMPLEX_ONLY = {"conj-missing", "real-part-only", "complex64-compute", "conj-each"}  # (test_op_sigmoid_backward_complex.py)


def test_variants_are_classified():
    assert set(SPEC.variants) == set(DEFECT_RANGES) | COMPLEX_ONLY


@pytest.mark.parametrize("name", sorted(DEFECT_RANGES))
def test_defect_differs_from_the_kernel(name):
    y, dy = sample(*DEFECT_RANGES[name])
    t = {"output": y, "gradOutput": dy}
    with np.errstate(all="ignore"):
        good, bad = SPEC.kernel(t), SPEC.variants[name](t)
        assert bad.dtype == F32
        off = np.abs(bad - good) > 2.0**-13 * np.abs(good) + 1e-30
    assert off.mean() > 0.02, f"{name}: differs on {off.sum()} of {y.size}"
