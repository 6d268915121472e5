"""A non-finite input reaching a Rows op's exact pass (LayerNorm with an infinite rstd in one row): the outputs it
touches come out inf or NaN, as the IEEE formula says, and the others exact (it was an OverflowError traceback:
Fraction(inf)). gen through verify then runs clean whatever rows hold the infinity."""

from __future__ import annotations

from exactq import Fraction

import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.golden.rows import exact_block, round_exact
from aclnn_cli.ops import find_op
from helpers import run_cli, write_yaml


def test_exact_block_carries_an_infinity_through_and_keeps_the_rest_exact():
    op = find_op("aclnnLayerNormBackward")
    rng = np.random.default_rng(4)
    k, n = 3, 5
    block = {"gradOut": rng.standard_normal((k, n, 1)).astype(np.float32),
             "input": rng.standard_normal((k, n, 1)).astype(np.float32),
             "mean": np.zeros((k, 1, 1), np.float32), "rstd": np.array([1, np.inf, 1], np.float32).reshape(k, 1, 1)}
    got = exact_block(op, block, {"normalizedShape": (n,), "outputMask": (True, True, True)})
    bias = round_exact(got["gradBiasOut"], D.FLOAT32)
    want = [D.round_fraction(sum(Fraction(float(v)) for v in block["gradOut"][:, j, 0]), D.FLOAT32) for j in range(n)]
    assert list(bias) == want  # (gradBias does not touch rstd: exact)
    weight = round_exact(got["gradWeightOut"], D.FLOAT32)
    assert not np.isfinite(weight).any()  # (every column meets the infinite row)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape, rows", [([4, 8], 4), ([300, 7], 300), ([2, 3, 40], 6)])
def test_an_infinite_rstd_runs_gen_emulate_verify_clean(tmp_path, dtype, shape, rows):
    values = ["1"] * rows
    values[1] = ".inf"
    text = (f"op: aclnnLayerNormBackward\ndefaults: {{product: \"950\", seed: 3}}\ncases:\n"
            f"  - {{name: c, dtype: {dtype}, shape: {shape}, attributes: {{normalizedShape: [{shape[-1]}]}}, "
            f"inputs: {{rstd: {{values: [{', '.join(values)}]}}}}}}\n")
    out = tmp_path / "out"
    for args in (("gen", write_yaml(tmp_path, text), "-o", out), ("emulate", out), ("verify", out)):
        r = run_cli(*args)
        assert r.exit_code == 0, r.output
