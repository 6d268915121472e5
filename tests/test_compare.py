"""The comparison layer on hand-made arrays with known answers, including exact threshold boundaries."""

from __future__ import annotations

import numpy as np
import pytest

from aclnn_cli import dtypes as D
from aclnn_cli.compare import MERE_T, Metrics, element_errors, find_standard, special_mismatch, ulp_at


def judge(name, a, g, dtype):
    std = find_standard(name)
    a, g = np.asarray(a, float), np.asarray(g, float)
    den = np.maximum(np.abs(g), std.floor(dtype))
    m = Metrics()
    m.add(element_errors(a, g, den, dtype, std.rule(dtype)), 0)
    return std.judge(m, dtype), m


def test_special_values_must_agree():
    nan, inf = np.nan, np.inf
    a = np.array([nan, inf, -inf, inf, nan, 1.0, 1.0, -0.0])
    g = np.array([nan, inf, inf, 1.0, 1.0, nan, -inf, 0.0])
    assert special_mismatch(a, g).tolist() == [False, False, True, True, True, True, True, False]


def test_ulp_at_known_values():
    assert ulp_at(np.array([1.0, 1.5, 0.0, 2.0**-20, 65504.0]), D.FLOAT16).tolist() == [
        2.0**-10, 2.0**-10, 2.0**-24, 2.0**-24, 32.0]
    assert ulp_at(np.array([1.0, 0.0]), D.BFLOAT16).tolist() == [2.0**-7, 2.0**-133]
    assert ulp_at(np.array([1.0]), D.FLOAT32).tolist() == [2.0**-23]


def test_metrics_known_answers():
    g = np.array([1.0, 2.0, -4.0, 0.5])
    a = np.array([1.0, 2.5, -3.0, 0.5])
    verdict, m = judge("mere-mare", a, g, D.FLOAT32)
    assert m.max_abs == 1.0 and m.max_abs_at == 2
    assert m.max_rel == 0.25 and m.max_rel_at == 1
    assert m.mere == pytest.approx((0.25 + 0.25) / 4)
    assert m.rmse == pytest.approx(np.sqrt((0.25 + 1.0) / 4))
    assert m.error_balance == pytest.approx((0.25 - 0.25) / 4)  # one away from zero, one toward
    assert m.max_ulp == 2.0**21 and not verdict.passed


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16, D.FLOAT32], ids=lambda d: d.name)
def test_mere_mare_boundaries(dtype):
    t = MERE_T[dtype.name]
    n = 1000
    g = np.ones(n)
    # MERE exactly T fails (the rule is MERE < T), a hair below passes.
    a = g * (1 + t)
    a[1:] = g[1:] * (1 + t)
    assert not judge("mere-mare", a, g, dtype)[0].passed
    a = g * (1 + t * 0.999)
    assert judge("mere-mare", a, g, dtype)[0].passed
    # One element at exactly 10T fails (MARE < 10T), just under passes.
    a = g.copy()
    a[7] = 1 + 10 * t
    v, m = judge("mere-mare", a, g, dtype)
    assert not v.passed and "MARE" in v.reason and m.max_rel_at == 7
    a[7] = 1 + 10 * t * 0.999
    assert judge("mere-mare", a, g, dtype)[0].passed


def test_mere_mare_small_value_floor():
    # fp16 subnormal golden 2^-24, device 2^-23: relative 1.0 without a floor; 2^-24/2^-14 = 2^-10 with it.
    v, m = judge("mere-mare", [2.0**-23, 1.0], [2.0**-24, 1.0], D.FLOAT16)
    assert m.max_rel == 2.0**-10


def test_nan_where_a_number_is_expected_fails_every_standard():
    for name in ("mere-mare", "allclose", "absolute-threshold"):
        v, _ = judge(name, [1.0, np.nan], [1.0, 2.0], D.FLOAT32)
        assert not v.passed and "NaN/Inf" in v.reason


def test_allclose_boundary():
    rtol, atol = 1e-3, 1e-5  # float16
    g = np.array([2.0])
    assert judge("allclose", g + atol + rtol * 2.0, g, D.FLOAT16)[0].passed
    assert not judge("allclose", g + 1.001 * (atol + rtol * 2.0), g, D.FLOAT16)[0].passed


def test_absolute_threshold_uses_absolute_bound_for_small_goldens():
    small = 2.0**-11  # below small_value 2^-10 for fp16: absolute bound 2^-16
    assert judge("absolute-threshold", [small + 2.0**-16], [small], D.FLOAT16)[0].passed
    assert not judge("absolute-threshold", [small + 2.0**-15], [small], D.FLOAT16)[0].passed
    big = 1.0  # relative bound 2^-10
    assert judge("absolute-threshold", [big + 2.0**-10], [big], D.FLOAT16)[0].passed
    assert not judge("absolute-threshold", [big + 2.0**-9], [big], D.FLOAT16)[0].passed


def test_metrics_merge_equals_one_pass():
    rng = np.random.default_rng(1)
    g = rng.normal(size=1000)
    a = g * (1 + rng.normal(scale=1e-3, size=1000))
    a[17] = np.nan
    std = find_standard("mere-mare")
    rule = std.rule(D.FLOAT16)
    whole = Metrics()
    whole.add(element_errors(a, g, np.maximum(np.abs(g), 2.0**-14), D.FLOAT16, rule), 0)
    parts = []
    for s, e in ((0, 300), (300, 700), (700, 1000)):
        m = Metrics()
        m.add(element_errors(a[s:e], g[s:e], np.maximum(np.abs(g[s:e]), 2.0**-14), D.FLOAT16, rule), s)
        parts.append(m)
    merged = Metrics()
    for p in reversed(parts):
        merged.merge(p)
    assert merged.to_json() == pytest.approx(whole.to_json())
    assert (merged.max_rel_at, merged.first_special, merged.first_violation) == (whole.max_rel_at, 17, whole.first_violation)
