"""sums.magnitude_sum, the sums of a chunk's relative and ulp errors (the MERE's, the mean ulp error's): within its
stated bound, (log2 n + 27) u of the sum, of the exact sum, at every length and for data that makes float32 sums err
most; float64 where float32 would overflow."""

from __future__ import annotations

import math
from exactq import Fraction

import numpy as np
import pytest

from aclnn_cli.judge.sums import magnitude_sum

U = 2.0**-24


def _exact(x: np.ndarray) -> Fraction:
    return sum((Fraction(float(v)) for v in x.tolist()), Fraction(0))


def _data(kind: str, n: int, rng) -> np.ndarray:
    if kind == "uniform":
        return rng.random(n).astype(np.float32)
    if kind == "ascending":  # (small terms first: a sequential float32 sum loses most of them)
        return np.sort(rng.random(n).astype(np.float32) ** 8)
    if kind == "descending":  # (the largest first: every later term meets a large partial sum)
        return np.sort(rng.random(n).astype(np.float32))[::-1].copy()
    if kind == "one-third":  # (1/3 rounds the same way every time: the sum's errors all lean one way)
        return np.full(n, 1 / 3, np.float32)
    if kind == "decades":  # (relative errors over six decades)
        return (rng.random(n) * 10.0 ** rng.integers(-3, 3, n)).astype(np.float32)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["uniform", "ascending", "descending", "one-third", "decades"])
@pytest.mark.parametrize("n", [1, 7, 8, 9, 127, 128, 129, 1000, 4095, 65536, 65543, 1 << 18])
def test_a_float32_magnitude_sum_is_within_its_bound_of_the_exact_sum(kind, n):
    x = _data(kind, n, np.random.default_rng(n))
    exact = _exact(x)
    bound = (math.log2(n) + 27) * U * float(x.astype(np.float64).sum())
    assert abs(Fraction(magnitude_sum(x)) - exact) <= Fraction(bound), (kind, n)


def test_a_float32_sum_that_would_overflow_is_taken_in_float64():
    x = np.full(1000, 3.0e38, np.float32)
    assert magnitude_sum(x) == float(np.float32(3.0e38)) * 1000  # (exact in float64)
    assert magnitude_sum(np.array([np.inf, 1.0], np.float32)) == math.inf  # (an infinite term stays infinite)


def test_float64_errors_are_summed_in_float64():
    x = np.full(10, 0.1)
    assert magnitude_sum(x) == pytest.approx(1.0, abs=1e-15)
