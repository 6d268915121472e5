"""Metrics and standards on hand-made arrays with known answers, including exact threshold boundaries."""

from __future__ import annotations

import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.judge.compare import WORST_K, Metrics, apply_rule, element_errors, special_mismatch
from aclnn_cli.judge.widening import ulp_of, ulp_at
from aclnn_cli.standards.rules import MERE_T, STANDARDS, benchmark_ratios, find_standard


def judge(name, a, g, dtype, bench=None, **overrides):
    std = find_standard(name)
    p = std.params(dtype, overrides)
    a, g = np.asarray(a, float), np.asarray(g, float)
    m = measure(std, p, a, g, dtype)
    b = measure(std, p, np.asarray(bench, float), g, dtype) if bench is not None else None
    return std.judge(m, p, dtype, b), m


def measure(std, p, a, g, dtype):
    e = element_errors(a, g, dtype.smallest_normal, dtype, flush_ok=std.flush_ok)
    apply_rule(e, std.rule(p))
    m = Metrics()
    m.add(e, 0, track_small=True)
    return m


def test_special_values_must_agree():
    nan, inf = np.nan, np.inf
    a = np.array([nan, inf, -inf, inf, nan, 1.0, 1.0, -0.0])
    g = np.array([nan, inf, inf, 1.0, 1.0, nan, -inf, 0.0])
    assert special_mismatch(a, g).tolist() == [False, False, True, True, True, True, True, False]
    assert special_mismatch(a, g, signed_zeros=True).tolist()[-1] is True


def test_ulp_at_known_values():
    assert ulp_at(np.array([1.0, 1.5, 0.0, 2.0**-20, 65504.0]), D.FLOAT16).tolist() == [
        2.0**-10, 2.0**-10, 2.0**-24, 2.0**-24, 32.0]
    assert ulp_at(np.array([1.0, 0.0]), D.BFLOAT16).tolist() == [2.0**-7, 2.0**-133]
    assert ulp_at(np.array([1.0]), D.FLOAT32).tolist() == [2.0**-23]


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16, D.FLOAT32], ids=lambda d: d.name)
def test_ulp_from_exponent_bits_matches_frexp_for_every_value(dtype):
    bits = np.arange(1 << 16, dtype=np.uint32)
    if dtype.itemsize == 4:
        bits = np.random.default_rng(0).integers(0, 2**32, 1 << 16, dtype=np.uint64).astype(np.uint32)
    g = bits.astype(dtype.uint_dtype).view(dtype.np_dtype)
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(g.astype(np.float64))
        want = ulp_at(g.astype(np.float64)[finite], dtype)
    got = ulp_of(g[finite], dtype, np.dtype(np.float32)).astype(np.float64)
    np.testing.assert_array_equal(got, want)


def test_metrics_known_answers():
    g = np.array([1.0, 2.0, -4.0, 0.5])
    a = np.array([1.0, 2.5, -3.0, 0.5])
    verdict, m = judge("mere-mare", a, g, D.FLOAT32)
    assert m.max_abs == 1.0 and m.max_abs_at == 2
    assert m.max_rel == 0.25 and m.max_rel_at == 1
    assert m.mere == pytest.approx((0.25 + 0.25) / 4)
    assert m.rmse == pytest.approx(np.sqrt((0.25 + 1.0) / 4))
    assert m.error_balance == pytest.approx((0.25 - 0.25) / 4)  # one away from zero, one toward
    assert m.max_ulp == 2.0**21 and m.mean_ulp == pytest.approx((2.0**21 + 2.0**21) / 4)
    assert m.worst_indices() == [2, 1] or m.worst_indices() == [1, 2]
    assert not verdict.passed


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16, D.FLOAT32], ids=lambda d: d.name)
def test_mere_mare_boundaries(dtype):
    t = MERE_T[dtype.name]
    g = np.ones(1000)
    loose = {"balance": 1.0}  # isolate MERE and MARE from the bias bound
    assert not judge("mere-mare", g * (1 + t), g, dtype, **loose)[0].passed  # MERE exactly T fails
    assert judge("mere-mare", g * (1 + t * 0.999), g, dtype, **loose)[0].passed
    a = g.copy()
    a[7] = 1 + 10 * t
    v, m = judge("mere-mare", a, g, dtype)
    assert not v.passed and "MARE" in v.reason and m.max_rel_at == 7  # exactly 10T fails
    a[7] = 1 + 10 * t * 0.999
    assert judge("mere-mare", a, g, dtype)[0].passed


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16, D.FLOAT32], ids=lambda d: d.name)
def test_error_balance_catches_bias_that_mere_mare_passes(dtype):
    t = MERE_T[dtype.name]
    rng = np.random.default_rng(0)
    g = rng.uniform(0.5, 2, 100_000) * rng.choice([-1, 1], 100_000)
    toward_zero = g * (1 - 0.3 * t)  # MERE 0.3T, MARE 0.3T: the published rule passes
    v, m = judge("mere-mare", toward_zero, g, dtype)
    assert not v.passed and "toward zero" in v.reason and m.error_balance == pytest.approx(-0.3 * t)
    assert judge("mere-mare", toward_zero, g, dtype, balance=1.0)[0].passed
    u = 2.0 ** -dtype.precision  # unbiased errors of up to half an ulp: passes
    noisy = g * (1 + rng.uniform(-u, u, g.size))
    assert judge("mere-mare", noisy, g, dtype)[0].passed


def test_balance_limit_widens_for_small_samples():
    p = find_standard("mere-mare").params(D.BFLOAT16)
    from aclnn_cli.standards.rules import balance_limit

    assert balance_limit(p, D.BFLOAT16, 1) == pytest.approx(2.0**-7 / 16 + 4 * 2.0**-8)
    assert balance_limit(p, D.BFLOAT16, 10**6) == pytest.approx(2.0**-7 / 16 + 4 * 2.0**-8 / 1000)
    # one element one ulp low (relative 2^-8 at 1.0): a correct rounding, not a bias
    assert judge("mere-mare", [1.0 - 2.0**-8], [1.0], D.BFLOAT16)[0].passed


def test_mere_mare_small_value_floor():
    # fp16 subnormal golden 2^-24, device 2^-23: relative 1.0 without a floor; 2^-24/2^-14 = 2^-10 with it.
    _, m = judge("mere-mare", [2.0**-23, 1.0], [2.0**-24, 1.0], D.FLOAT16)
    assert m.max_rel == 2.0**-10


def test_flushed_subnormal_golden_passes_every_standard_but_bitwise():
    for name in STANDARDS:
        if name in ("bitwise", "exact"):  # (equality: no flush-to-zero leniency)
            continue
        assert judge(name, [0.0, 1.0], [2.0**-130, 1.0], D.FLOAT32, bench=[2.0**-130, 1.0])[0].passed, name


def test_nan_where_a_number_is_expected_fails_every_standard():
    for name in STANDARDS:
        v, _ = judge(name, [1.0, np.nan], [1.0, 2.0], D.FLOAT32, bench=[1.0, 2.0])
        assert not v.passed and "NaN/Inf" in v.reason, name


def test_allclose_boundary():
    rtol, atol = 1e-3, 1e-5  # float16
    g = np.array([2.0])
    assert judge("allclose", g + atol + rtol * 2.0, g, D.FLOAT16)[0].passed
    assert not judge("allclose", g + 1.001 * (atol + rtol * 2.0), g, D.FLOAT16)[0].passed
    assert judge("allclose", g + 0.01, g, D.FLOAT16, rtol=0.01)[0].passed


def test_absolute_threshold_uses_absolute_bound_for_small_goldens():
    small = 2.0**-11  # below small_value 2^-10 for fp16: absolute bound 2^-16
    assert judge("absolute-threshold", [small + 2.0**-16], [small], D.FLOAT16)[0].passed
    assert not judge("absolute-threshold", [small + 2.0**-15], [small], D.FLOAT16)[0].passed
    assert judge("absolute-threshold", [1.0 + 2.0**-10], [1.0], D.FLOAT16)[0].passed
    assert not judge("absolute-threshold", [1.0 + 2.0**-9], [1.0], D.FLOAT16)[0].passed


def test_ulp_standard_boundaries():
    g = np.ones(10_000)
    a = g.copy()
    a[:9] += 2 * 2.0**-10  # 9 of 10,000 fp16 elements 2 ulp off: share 0.0009 < 0.001
    assert judge("ulp", a, g, D.FLOAT16)[0].passed
    a[:10] += 2 * 2.0**-10  # share exactly 0.001: fails (< is required)
    assert not judge("ulp", a, g, D.FLOAT16)[0].passed
    a = g.copy()
    a[:] += 1 * 2.0**-10  # everything exactly 1 ulp off: not "over 1 ulp"
    assert judge("ulp", a, g, D.FLOAT16)[0].passed
    # fp32: 10% over 32 ulp fails the share rule but passes on mean ulp < 64
    a = g.copy()
    a[:1000] += 40 * 2.0**-23
    v, m = judge("ulp", a, g, D.FLOAT32)
    assert v.passed and "mean ulp" in v.reason and m.mean_ulp == pytest.approx(4.0)
    a[:1000] += 700 * 2.0**-23  # mean 74 ulp
    assert not judge("ulp", a, g, D.FLOAT32)[0].passed


def test_thousandth_boundaries_and_fp32_variant():
    g = np.ones(10_000)
    a = g.copy()
    a[:9] = 1.002  # 99.91% within 1e-3
    assert judge("thousandth", a, g, D.FLOAT16)[0].passed
    a[:10] = 1.002  # exactly 99.9%: needs more than 0.999
    assert not judge("thousandth", a, g, D.FLOAT16)[0].passed
    a = g * (1 + 5e-4)  # within 1e-3 but not within the fp32 variant's 1e-4
    assert judge("thousandth", a, g, D.FLOAT16)[0].passed
    assert not judge("thousandth", a, g, D.FLOAT32)[0].passed


def test_msopst_boundaries():
    g = np.ones(100)
    a = g.copy()
    a[:5] = 1.05  # 5% err (allowed: <= 5%), max rel diff 0.05
    assert judge("msopst", a, g, D.FLOAT32)[0].passed
    a[5] = 1.05
    assert not judge("msopst", a, g, D.FLOAT32)[0].passed
    a = g.copy()
    a[0] = 1.1  # max rel diff exactly 0.1 fails
    assert not judge("msopst", a, g, D.FLOAT32)[0].passed


def test_bitwise_needs_identical_bits_but_any_nan():
    assert judge("bitwise", [1.0, np.nan, 0.0], [1.0, np.nan, 0.0], D.FLOAT16)[0].passed
    assert not judge("bitwise", [1.0, 0.0], [1.0 + 2.0**-10, 0.0], D.FLOAT16)[0].passed
    assert not judge("bitwise", [-0.0], [0.0], D.FLOAT16)[0].passed
    assert not judge("bitwise", [0.0], [2.0**-130], D.FLOAT32)[0].passed  # no flush-to-zero leniency


def test_benchmark_ratio_known_answers():
    g = np.tile(2.0 ** np.arange(-5, 5), 100)  # powers of two keep every ratio exact
    bench = g * (1 + 2.0**-12)
    dev = g * (1 + 2.0**-11)  # every relative metric exactly twice the benchmark's
    v, m = judge("benchmark", dev, g, D.FLOAT32, bench=bench)
    assert v.passed  # ratio 2 is allowed (fail only above 2)
    dev = g * (1 + 2.0**-10)  # 4x
    v, _ = judge("benchmark", dev, g, D.FLOAT32, bench=bench)
    assert not v.passed and "mere 4.00x" in v.reason
    # In fp16 the same errors sit under the half-ulp floor (2^-11): ratios are judged against it.
    assert judge("benchmark", dev, g, D.FLOAT16, bench=bench)[0].passed
    r = benchmark_ratios(measure(find_standard("benchmark"), {}, g, g, D.FLOAT16),
                         measure(find_standard("benchmark"), {}, g, g, D.FLOAT16), D.FLOAT16)
    assert set(r.values()) == {1.0}  # both exact: every metric at its floor


def test_tolerance_overrides_are_checked():
    std = find_standard("mere-mare")
    assert std.params(D.FLOAT16, {"rtol": 0.01})["T"] == 0.01
    with pytest.raises(KeyError, match="no tolerance 'atol'"):
        std.params(D.FLOAT16, {"atol": 1.0})


def test_metrics_merge_equals_one_pass():
    rng = np.random.default_rng(1)
    g = rng.normal(size=1000)
    a = g * (1 + rng.normal(scale=1e-3, size=1000))
    a[17] = np.nan
    std = find_standard("mere-mare")
    p = std.params(D.FLOAT16)
    whole = measure(std, p, a, g, D.FLOAT16)
    merged = Metrics()
    for s, e in ((700, 1000), (300, 700), (0, 300)):
        part = Metrics()
        errs = element_errors(a[s:e], g[s:e], 2.0**-14, D.FLOAT16)
        apply_rule(errs, std.rule(p))
        part.add(errs, s, track_small=True)
        merged.merge(part)
    assert merged.to_json() == pytest.approx(whole.to_json())
    assert (merged.max_rel_at, merged.first_special, merged.first_violation) == (whole.max_rel_at, 17, whole.first_violation)
    assert merged.worst_indices() == whole.worst_indices()


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000, 4096])
def test_the_worst_elements_do_not_depend_on_the_chunks(chunk):
    """Many equal errors and several NaN mismatches: the worst k are the largest errors, ties going to the
    first index, whatever the chunk size (an oracle: sort by (-error, index) over the whole tensor)."""
    dt = D.FLOAT16
    g = np.tile(np.array([1.0, 2.0, 4.0, 0.5], np.float16), 1024)
    a = g.copy()
    a[::3] = np.nextafter(g[::3], np.float16(np.inf))  # one ulp up: four distinct errors, each many times
    a[[100, 2000, 3001, 3500, 3999, 4000, 4001]] = np.nan
    rel = np.abs(a.astype(np.float64) - g) / np.abs(g.astype(np.float64))
    rel[np.isnan(a)] = np.inf
    oracle = sorted(range(g.size), key=lambda i: (-rel[i], i))[:WORST_K]
    m = Metrics()
    for s in range(0, g.size, chunk):
        e = element_errors(a[s:s + chunk], g[s:s + chunk], dt.smallest_normal, dt)
        m.add(e, s)
    assert m.worst_indices() == oracle == [100, 2000, 3001, 3500, 3999]
    m = Metrics()
    for s in range(0, g.size, chunk):
        a2 = a[s:s + chunk].copy()
        a2[np.isnan(a2)] = g[s:s + chunk][np.isnan(a2)]  # (no NaN: the ties of the largest finite error)
        m.add(element_errors(a2, g[s:s + chunk], dt.smallest_normal, dt), s)
    finite = np.where(np.isinf(rel), 0, rel)
    assert m.worst_indices() == sorted(range(g.size), key=lambda i: (-finite[i], i))[:WORST_K]


def test_a_nan_error_ratio_is_the_worst_not_skipped():
    """argmax stops at the first NaN: a NaN ratio (an error nothing measured) was the chunk's maximum and, never
    greater than the running one, dropped with every real error of its chunk (the complex gate's 0/0, decision 208).
    It counts as infinite now."""
    e = element_errors(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0]), D.FLOAT32.smallest_normal, D.FLOAT32)
    e.rel[:] = [np.nan, 1e15, 2e15]
    m = Metrics()
    m.add(e, 0)
    assert m.max_rel == np.inf and m.max_rel_at == 0
