"""The error balance is the mean signed error over the elements whose golden is not zero (decision 237).

A max-pool gradient is mostly exact zeros (positions no window picked), met by zeros: averaged over them, a kernel
that scales every result by 1 + T/3 had a balance under its limit and passed (a helper found 146 fp32 bundled cases
so). The correct kernel still passes; the biased one fails on its balance whatever the share of zeros.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from aclnn_cli.judge.compare import Metrics, element_errors
from aclnn_cli.tensor.dtypes import DTYPES

from helpers import run_cli

T32 = 2.0**-13


def test_zeros_met_by_zeros_do_not_dilute_the_balance():
    """Independent arithmetic: k nonzero goldens each off by +T/3 relative, then any number of zeros."""
    f32 = DTYPES["float32"]
    g = np.concatenate([np.linspace(1, 2, 100, dtype=np.float32), np.zeros(9900, np.float32)])
    a = (g.astype(np.float64) * (1 + T32 / 3)).astype(np.float32)
    m = Metrics()
    m.add(element_errors(a, g, f32.smallest_normal, f32), 0)
    expected = np.mean((np.abs(a[:100].astype(np.float64)) - g[:100]) / g[:100])
    assert m.balanced_elements == 100
    assert m.error_balance == pytest.approx(expected, rel=1e-6)
    assert m.error_balance > T32 / 4  # (averaged over all 10,000 it was 1/100 of this)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_scaled_max_pool_gradient_fails_and_the_correct_one_passes(tmp_path, dtype):
    text = f"""op: aclnnMaxPool2dWithIndicesBackward
cases:
  - {{name: sparse, dtype: {dtype}, shape: [2, 3, 32, 32], seed: 4,
     product: "950", attributes: {{kernelSize: [2], stride: [4], padding: [0]}}}}
"""
    (tmp_path / "c.yaml").write_text(text)
    out = tmp_path / "out"
    assert run_cli("gen", tmp_path / "c.yaml", "-o", out).exit_code == 0, "gen"
    assert run_cli("emulate", out).exit_code == 0
    assert run_cli("verify", out).exit_code == 0  # the correct kernel
    case = next(p for p in out.iterdir() if (p / "case.json").is_file())
    manifest = json.loads((case / "case.json").read_text())
    output = next(t for t in manifest["tensors"] if t["role"] == "output")
    dump = case / output["dump"]
    np_dtype = np.dtype(dtype)
    g = np.fromfile(case / output["golden"], np_dtype)
    assert (g == 0).mean() > 0.9  # (the point: most of the gradient is zeros)
    t = {"float32": T32, "float16": 2.0**-10}[dtype]
    (g.astype(np.float64) * (1 + t / 3)).astype(np_dtype).tofile(dump)
    result = run_cli("verify", out, "--json", tmp_path / "v.json")
    assert result.exit_code == 1, result.output
    verdict = json.loads((tmp_path / "v.json").read_text())["cases"][0]
    assert verdict["status"] == "FAIL" and "error balance" in verdict["reason"], verdict["reason"]
