"""Every fp16 and bf16 value of x, dy = 1 and one other dy: golden == correctly rounded exact result.

The oracle (tests/oracle.py) is mpmath at 200 bits on the textbook formulas,
rounded by exact comparison with the representable neighbours.
"""

from __future__ import annotations

import functools

import mpmath
import numpy as np
import pytest

from aclnn_cli import dtypes as D
from aclnn_cli.golden import golden
from aclnn_cli.ops import OPS

from oracle import FACTORS, PREC, Rounder, factors

DTYPES = [D.FLOAT16, D.BFLOAT16]
# A gradient with a full significand and a small exponent, so many results land among subnormals.
OTHER_DY = -0.0013


def all_values(dtype: D.DType) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype.np_dtype)


@functools.lru_cache(maxsize=None)
def oracle_factors(op_name: str, dtype_name: str):
    return factors(op_name, all_values(D.lookup(dtype_name)).astype(np.float64))


@functools.lru_cache(maxsize=None)
def rounder(dtype_name: str) -> Rounder:
    return Rounder(D.lookup(dtype_name).np_dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("op_name", sorted(FACTORS))  # the six newer ops: tests/test_op_*.py
@pytest.mark.parametrize("dy_value", [1.0, OTHER_DY], ids=["dy=1", "dy=other"])
def test_golden_is_correctly_rounded_for_every_16bit_x(op_name, dtype, dy_value):
    op = OPS[op_name]
    x = all_values(dtype)
    dy = np.full(x.shape, dy_value, dtype=np.float64).astype(np.float32).astype(dtype.np_dtype)
    dy_exact = mpmath.mpf(float(dy[0]))
    inputs = {"gradOutput": dy, "self": x, "buffer": np.zeros_like(x)}
    got, _ = golden(op, {t.name: inputs[t.name] for t in op.inputs}, dtype)
    got_bits = got.view(np.uint16)
    r = rounder(dtype.name)
    finite = np.isfinite(x.astype(np.float64))
    mismatches = []
    with mpmath.workprec(PREC):
        for i, f in enumerate(oracle_factors(op_name, dtype.name)):
            if f is None:
                continue
            want = r(dy_exact * f)
            if int(got_bits[i]) != want:
                mismatches.append((float(x[i]), hex(int(got_bits[i])), hex(want)))
    assert finite.sum() > 60000
    assert not mismatches, f"{len(mismatches)} elements not correctly rounded, first: {mismatches[:5]}"


def test_every_op_has_an_exhaustive_oracle_test():
    """The first four ops are checked above; each newer op brings its own in tests/test_op_<key>.py."""
    from pathlib import Path

    here = Path(__file__).parent
    for op in OPS.values():
        own = here / f"test_op_{op.key}.py"
        assert op.name in FACTORS or (own.is_file() and "every" in own.read_text() and "mpmath" in own.read_text()), \
            f"{op.name} has no exhaustive oracle test"
