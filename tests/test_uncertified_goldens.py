"""A golden that is not certified is never silent, and a rational reference certifies itself.

An op without `exact` whose float64 bound straddles a rounding boundary: gen computes those elements through
the op's own reference on Fractions (golden/rational.py). Where the reference is rational they are exact and
correctly rounded (checked here against Fractions computed by this test); where it is not (a float constant,
np.exp) gen warns with the count, case.json records it (golden.uncertified_elements) and verify's reason says
it, in every report.
"""

from __future__ import annotations

import json
from exactq import Fraction

import ml_dtypes
import numpy as np

from aclnn_cli.tensor import dtypes as D
from test_user_modules import cli

OP = """\
import numpy as np
from aclnn_cli.ops import OpSpec, Reference, TensorSpec, register

def reference(t):
    # The value is exact; the bound is made loose on purpose (a thousandth), so that many elements straddle a
    # rounding boundary of the output dtype and need the exact path.
    v = {formula}
    return Reference(v, abs(v) / 1000, abs(v))

register(OpSpec(
    name="aclnnMyHalfProduct", key="my_half_product", summary="dy * x / 2", formula="dy * x / 2",
    tensors=(TensorSpec("gradOut", "input", {{"normal": [0, 1]}}), TensorSpec("self", "input", {{"normal": [0, 1]}}),
             TensorSpec("gradInput", "output", {{"constant": 0}})),
    products={{"950": ("float32", "float16", "bfloat16")}}, dims=(1, 8), empty_ok=False, reference=reference))
"""
CASES = """\
op: aclnnMyHalfProduct
defaults: {product: "950", seed: 5}
cases:
  - {name: c, shape: [4096], dtype: bfloat16}
"""


def _gen(tmp_path, formula: str):
    op = tmp_path / "my_op.py"
    op.write_text(OP.format(formula=formula))
    cases = tmp_path / "cases.yaml"
    cases.write_text(CASES)
    out = tmp_path / "out"
    return op, out, cli("--ops", op, "gen", cases, "-o", out)


def _case(out):
    d = next(out.glob("*/case.json")).parent
    return d, json.loads((d / "case.json").read_text())


def test_a_rational_reference_gives_correctly_rounded_goldens_with_no_exact_function(tmp_path):
    op, out, done = _gen(tmp_path, 't["gradOut"] * t["self"] / 2')
    assert done.returncode == 0 and "not certified" not in done.stderr, done.stderr
    d, m = _case(out)
    assert m["golden"]["method"].endswith("exact through the reference on Fractions")
    assert "uncertified_elements" not in m["golden"]
    bf16 = D.lookup("bfloat16")
    dy = np.fromfile(d / "gradOut.bin", ml_dtypes.bfloat16).astype(np.float64)
    x = np.fromfile(d / "self.bin", ml_dtypes.bfloat16).astype(np.float64)
    want = np.array([D.round_fraction(Fraction(a) * Fraction(b) / 2, bf16) for a, b in zip(dy, x)])
    gold = np.fromfile(d / "gradInput.golden.bin", ml_dtypes.bfloat16).astype(np.float64)
    assert np.array_equal(gold, want)
    # every element whose loose bound straddles a rounding boundary took the exact path, and case.json counts them
    v = dy * x / 2
    near = [(np.asarray(v + s * np.abs(v) / 1000).astype(ml_dtypes.bfloat16) != v.astype(ml_dtypes.bfloat16))
            for s in (-1, 1)]
    assert m["golden"]["exact_fallback_elements"] == int(np.count_nonzero(near[0] | near[1])) > 100


def test_an_irrational_reference_is_counted_warned_recorded_and_reported(tmp_path):
    op, out, done = _gen(tmp_path, '0.5 * t["gradOut"] * t["self"]')  # (0.5: a float, so not exact on Fractions)
    assert done.returncode == 0, done.stderr
    _, m = _case(out)
    n = m["golden"]["uncertified_elements"]
    assert n > 100 and m["golden"]["method"] == "float64, rounded once, not certified"
    assert m["golden"]["exact_fallback_elements"] == 0  # (none of them rational: none exact)
    assert f"warning: {n} golden elements in 1 cases are not certified" in done.stderr, done.stderr
    assert cli("--ops", op, "emulate", out).returncode == 0
    report = tmp_path / "v.json"
    done = cli("--ops", op, "verify", out, "--json", report)
    reason = json.loads(report.read_text())["cases"][0]["reason"]
    assert f"golden: {n} elements not certified" in reason and f"{n} elements not certified" in done.stdout
