"""aclnnLeakyReluBackward beyond the exhaustive x sweep (test_golden_exhaustive.py, from the op's
`textbook`): every 16-bit gradient against an exact oracle (dy if x > 0 else dy * slope, slope as the
float32 the device sees: a Fraction, rounded by tests/oracle.py's fraction_bits), the kernel replica, its variants.
"""

from __future__ import annotations

import functools
import math
from exactq import Fraction

import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops.elementwise import leaky_relu_backward as M

from oracle import fraction_bits

SPEC = M.SPEC
F = np.float32
SLOPES = [0.01, 0.2]  # as written in a case file; the device sees fl32


def attrs(slope, self_is_result=False) -> dict:
    return {"negativeSlope": float(np.float32(slope)), "selfIsResult": self_is_result}


def all_values(dtype: D.DType) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype.np_dtype)


@functools.lru_cache(maxsize=None)
def oracle_bits(dtype_name: str, slope: float, sweep: str, fixed: float) -> np.ndarray:
    """Oracle bit patterns for every 16-bit value of the swept input (-1 where it is not finite): the textbook
    value exact as a Fraction (dy, or the product of two binary floats), rounded by oracle.fraction_bits (in
    integers, sharing nothing with the tool; checked against mpmath's rounding in test_golden_fp32.py)."""
    values = all_values(D.lookup(dtype_name)).astype(np.float64)
    out = np.full(values.size, -1, dtype=np.int64)
    exact_slope = Fraction(slope)
    for i, v in enumerate(values.tolist()):
        if math.isfinite(v):
            dy, x = (v, fixed) if sweep == "gradOutput" else (fixed, v)
            exact = Fraction(dy) if x > 0 else Fraction(dy) * exact_slope
            if exact == 0:  # dy = +-0: a Fraction has no signed zero; IEEE's sign of the product
                out[i] = 0x8000 if np.signbit(dy) != (x <= 0 and np.signbit(slope)) else 0
            else:
                out[i] = fraction_bits(exact, dtype_name)
    return out


def check_sweep(dtype, slope, sweep, fixed):
    values = all_values(dtype)
    other = np.full(values.shape, fixed).astype(np.float32).astype(dtype.np_dtype)
    inputs = {"gradOutput": values, "self": other} if sweep == "gradOutput" else {"gradOutput": other, "self": values}
    got, _ = golden(SPEC, inputs, dtype, attrs(slope))
    want = oracle_bits(dtype.name, float(np.float32(slope)), sweep, float(other[0]))
    compared = want >= 0
    bad = np.flatnonzero(compared & (got.view(np.uint16).astype(np.int64) != want))
    assert compared.sum() > 60000
    assert bad.size == 0, f"{bad.size} not correctly rounded, first: {[(float(values[i]), hex(int(want[i]))) for i in bad[:5]]}"


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16], ids=lambda d: d.name)
@pytest.mark.parametrize("slope", SLOPES + [-0.3])
def test_golden_is_correctly_rounded_for_every_16bit_gradient(dtype, slope):
    """x = -1: every dy * slope, including the subnormal results where the kernel double-rounds."""
    check_sweep(dtype, slope, "gradOutput", -1.0)


def run(fn, x, dy=1.0, slope=0.01):
    x = np.atleast_1d(np.asarray(x, dtype=F))
    dy = np.broadcast_to(np.asarray(dy, dtype=F), x.shape).copy()
    return fn({"gradOutput": dy, "self": x, "negativeSlope": F(slope), "selfIsResult": False})


def test_kernel_at_hand_computed_points():
    # The doc example (slope 0.01f, x > 0): dy unchanged.
    assert run(M._kernel, [1, 2, 3, 4], dy=[2, 3, 4, 5]).tolist() == [2, 3, 4, 5]
    # x <= 0: fl32(dy * 0.0099999998f); x = +-0 is on the slope branch; x > 0 strictly.
    got = run(M._kernel, [-1.0, 0.0, -0.0, 1e-45], dy=[3.0, 3.0, -2.0, 3.0])
    assert got.tolist() == [F(0.03), F(0.03), F(-0.02), 3.0]
    # fp32(dy * slope) rounds once: 0.1f * 0.01f = 0.0010000000474974513... -> 0.0010000000f (0x3A83126F).
    assert run(M._kernel, [-5.0], dy=0.1).view(np.uint32)[0] == 0x3A83126F
    # The trap: the float32 product is rounded again to float16: double rounding below fp16's normals.
    dy16 = np.float16(8.941e-06)
    kernel16 = run(M._kernel, [-1.0], dy=np.float32(dy16)).astype(np.float16)
    gold, _ = golden(SPEC, {"gradOutput": np.array([dy16]), "self": np.array([-1.0], np.float16)}, D.FLOAT16, attrs(0.01))
    assert float(gold[0]) == 2.0**-24 and float(kernel16[0]) == 2.0**-23  # exact 8.94e-08 = 1.4999 * 2^-24


def test_specials_of_kernel_and_ieee():
    inf, nan = np.inf, np.nan
    x = np.array([nan, inf, -inf, -1.0, 2.0, -1.0], dtype=F)
    dy = np.array([2.0, 3.0, 4.0, inf, nan, -5.0], dtype=F)
    for slope in (0.25, 0.0):
        k = run(M._kernel, x, dy=dy, slope=slope)
        ref = SPEC.golden_f64({"gradOutput": dy.astype(float), "self": x.astype(float), **attrs(slope)}).value
        for v in (k, ref):
            assert v[0] == 2.0 * slope and v[1] == 3.0 and v[2] == 4.0 * slope and np.isnan(v[4])
            assert (v[3] == inf) if slope else np.isnan(v[3])  # inf * 0 = NaN
            assert v[5] == -5.0 * slope and np.signbit(v[5])  # -5 * 0 = -0


def test_self_is_result_never_changes_the_result():
    rng = np.random.default_rng(2)
    x, dy = rng.standard_normal(100).astype(F), rng.standard_normal(100).astype(F)
    a, _ = golden(SPEC, {"gradOutput": dy, "self": x}, D.FLOAT32, attrs(0.2, False))
    b, _ = golden(SPEC, {"gradOutput": dy, "self": x}, D.FLOAT32, attrs(0.2, True))
    assert (a.view(np.uint32) == b.view(np.uint32)).all()


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16], ids=lambda d: d.name)
def test_kernel_departs_from_correct_rounding_only_by_double_rounding(dtype):
    """Every 16-bit dy at x = -1: the kernel (float32 product, then RINT) is off CR by one step, and
    only where the result is subnormal in the 16-bit dtype (numbers as measured)."""
    dy = all_values(dtype)
    with np.errstate(invalid="ignore"):
        dy = dy[np.isfinite(dy.astype(np.float64))]
    x = np.full(dy.shape, -1.0).astype(dtype.np_dtype)
    counts = {}
    for slope in (0.01, 0.2, -0.3):
        gold, _ = golden(SPEC, {"gradOutput": dy, "self": x}, dtype, attrs(slope))
        dev = D.round_from_f32(run(M._kernel, x.astype(F), dy=dy.astype(F), slope=slope), dtype)
        off = gold.view(np.uint16) != dev.view(np.uint16)
        steps = np.abs(gold.view(np.uint16).astype(int) - dev.view(np.uint16).astype(int))[off]
        assert (steps == 1).all() and (np.abs(gold[off].astype(np.float64)) < dtype.smallest_normal).all()
        counts[slope] = int(off.sum())
    assert counts == ({0.01: 40, 0.2: 0, -0.3: 126} if dtype is D.FLOAT16 else {0.01: 4, 0.2: 0, -0.3: 26})


def differs(a, b) -> int:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore"):
        far = np.abs(a - b) > 1e-3 * np.maximum(np.abs(b), 1e-30)
    return int((far | (np.isnan(a) != np.isnan(b))).sum())


_rng = np.random.default_rng(1)
DEFECT_RANGES = {  # plausible x on which the defect shows
    "swapped-branches": _rng.uniform(-8, 8, 1000),
    "inclusive-zero": np.maximum(_rng.standard_normal(1000), 0.0),  # self = the forward result: many zeros
    "zero-slope": _rng.uniform(-8, 8, 1000),
    "sign-slip": _rng.uniform(-8, 8, 1000),
}
LEGIT = ("mask-multiply", "blend-formula")


def test_every_variant_is_classified():
    assert set(M.VARIANTS) == set(DEFECT_RANGES) | set(LEGIT)


@pytest.mark.parametrize("name", sorted(DEFECT_RANGES))
def test_defect_differs_from_the_kernel(name):
    x = DEFECT_RANGES[name]
    dy = np.random.default_rng(5).standard_normal(len(x))
    assert differs(run(M.VARIANTS[name], x, dy=dy), run(M._kernel, x, dy=dy)) >= 10


@pytest.mark.parametrize("name", LEGIT)
def test_legitimate_variant_stays_within_a_few_ulps(name):
    rng = np.random.default_rng(6)
    x = np.concatenate([rng.uniform(-8, 8, 5000), [0.0, -0.0, np.inf, -np.inf]]).astype(F)
    dy = rng.standard_normal(x.size).astype(F)
    for slope in (0.01, 0.2, -0.3):
        gold, _ = golden(SPEC, {"gradOutput": dy, "self": x}, D.FLOAT32, attrs(slope))
        got = run(M.VARIANTS[name], x, dy=dy, slope=slope)
        err = np.abs(got.view(np.int32).astype(np.int64) - gold.view(np.int32).astype(np.int64))
        assert err.max() <= 1, (name, slope, int(err.max()))


def test_declaration():
    assert [(a.name, a.kind) for a in SPEC.attributes] == [("negativeSlope", "scalar"), ("selfIsResult", "bool")]
    assert SPEC.attributes[0].default is None and SPEC.attributes[1].default is False
    assert set(SPEC.products) == {"950", "A3", "A2", "310P", "910"} and "bfloat16" not in SPEC.products["310P"]
    assert set(SPEC.contract.broadcast_on) == set(SPEC.products)
    assert "selfIsResult" in M.CONTRACT_NOTES and "ToDouble" in M.CONTRACT_NOTES
