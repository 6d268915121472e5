"""gen's bound on a matmul's float64 value (ops/contraction/dots.py): the norms' bound on |A|.|B| is an upper bound
of the exact one in every dtype and at the edges of their ranges, and where it is loose (operands orthogonal in
magnitude) gen tightens it with the second product (Reference.tighter, golden/rowsgen) instead of sending every
element down the exact path."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from aclnn_cli.golden import rowsgen
from aclnn_cli.ops.contraction import dots
from aclnn_cli.ops.dyadic import exact_row_sums

from helpers import generated, logical, manifest, tensor

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}


def _operands(dtype, rng, k: int, spread: int) -> tuple[np.ndarray, np.ndarray]:
    """(1, 5, k) and (1, k, 3) operands of `dtype` values, their exponents spread over 2^-spread .. 2^spread, some
    at the dtype's largest and smallest (subnormal) values."""
    info = ml_dtypes.finfo(dtype)

    def draw(shape):
        x = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, shape))
        x = np.clip(x, -float(info.max), float(info.max))
        flat = x.reshape(-1)
        flat[:3] = [float(info.max), float(info.smallest_subnormal), -float(info.smallest_normal)]
        return x.astype(dtype).astype(np.float64)  # (as gen's blocks: the stored values, widened)
    return draw((1, 5, k)), draw((1, k, 3))


def _exact_magnitude(left: np.ndarray, right: np.ndarray) -> list[list[Fraction]]:
    """sum_k |a_ik| |b_kj| exactly (each product exact in float64, the sums exact)."""
    a, b = np.abs(left[0]), np.abs(right[0])
    return [exact_row_sums(a[i][None, :] * b.T) for i in range(a.shape[0])]


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("k", [1, 7, 300])
def test_the_norms_bound_is_at_least_the_exact_magnitude(dtype, k):
    rng = np.random.default_rng(k)
    for spread in (0, 8, 40):
        left, right = _operands(DTYPES[dtype], rng, k, spread)
        scale, factor = dots.norm_bound(left, right)
        assert factor == dots.gamma(k) and np.isfinite(scale).all()
        exact = _exact_magnitude(left, right)
        for i, row in enumerate(exact):
            for j, s in enumerate(row):
                assert Fraction(float(scale[0, i, j])) >= s, (dtype, k, spread, i, j)


def test_the_norms_bound_is_about_the_magnitude_for_random_operands():
    """What makes it worth taking first: for normal values ||a|| ||b|| is about pi / 2 times sum |a||b|."""
    rng = np.random.default_rng(0)
    left = rng.standard_normal((1, 64, 4096)).astype(np.float16).astype(np.float64)
    right = rng.standard_normal((1, 4096, 64)).astype(np.float16).astype(np.float64)
    ratio = dots.norm_bound(left, right)[0] / dots.magnitude(left, right)[0]
    assert 1.4 < float(np.median(ratio)) < 1.75


ORTHOGONAL = """
op: aclnnMatmul
cases:
  - name: orthogonal
    dtype: float32
    shape: [4, 4]
    tensors: {self: {shape: [4, 8]}, mat2: {shape: [8, 4]}}
    inputs:
      self: {values: [1, 2, 3, 4, 0, 0, 0, 0]}
      mat2: {values: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                      1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]}
"""


def _fallbacks(case_dir) -> int:
    return manifest(case_dir)["golden"]["exact_fallback_elements"]


def test_a_loose_bound_is_tightened_before_the_exact_path(tmp_path, monkeypatch):
    """Every product is 0 (a row's nonzero terms meet a column's zeros), the norms' bound is not: every element
    would be uncertain. gen tightens it with |A|.|B| (0 here) and certifies them all; never tightening sends all
    16 down the exact path, to the same golden."""
    out = generated(tmp_path / "tight", ORTHOGONAL)
    case = next(p for p in out.iterdir() if p.is_dir())
    m = manifest(case)
    assert np.array_equal(logical(case, tensor(m, "out"), "golden"), np.zeros((4, 4), np.float32))
    assert _fallbacks(case) == 0
    monkeypatch.setattr(rowsgen, "TIGHTEN_SHARE", 0)
    out = generated(tmp_path / "loose", ORTHOGONAL)
    case = next(p for p in out.iterdir() if p.is_dir())
    assert np.array_equal(logical(case, tensor(manifest(case), "out"), "golden"), np.zeros((4, 4), np.float32))
    assert _fallbacks(case) == 16
