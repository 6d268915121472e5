"""A kernel's float32 literals lean every element the same way (Reference.lean, decision 243): SeluBackward at the
forward's saturation, where every 16-bit result is -1.7578125 and y + alpha scale (2.9e-4) carries the float32
literal's rounding, 8e-5 of each element, one way. The error balance's allowance shrinks with the elements (noise
over sqrt(n)) to T/16 = 6.1e-5 in float16: the correct kernel failed from about 100,000 elements on. Both sides, at
every size up to 4M: the correct kernel and every legitimate variant pass; a kernel rounding toward zero, or away
from it, fails."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from aclnn_cli.ops.elementwise import selu_backward as S
from helpers import manifest, read_storage, run_cli, tensor, verify_records, write_yaml

SIZES = {"float16": [8192, 1 << 20, 1 << 22], "bfloat16": [8192, 1 << 20], "float32": [8192, 1 << 20]}
SUITE = "op: aclnnSeluBackward\ncases:\n" + "".join(
    f"  - {{name: sat_{d}, dtype: {d}, shape: {[[n] for n in ns]}, seed: 5,"
    f" inputs: {{result: {{uniform: [-1.7582, -1.7580]}}}}}}\n" for d, ns in SIZES.items())


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lean")
    out = root / "out"
    assert run_cli("gen", write_yaml(root, SUITE), "-o", out, "-j", 2).exit_code == 0
    return out


def _statuses(out: Path) -> dict[str, str]:
    return {cid: c["status"] for cid, c in verify_records(out, jobs=2)[1].items()}


def test_the_literals_lean_is_what_the_balance_saw():
    """The declared lean against an independent answer: how far |dy (y + K)| stands from |dy (y + alpha scale)|, in
    exact rationals, K the float32 rounding of selu_grad.h's literal and alpha, scale the doc's decimals; at
    saturation it is 8e-5 of the result, more than the float16 balance's T/16."""
    from fractions import Fraction

    k_neg = Fraction(float(np.float32("1.7580993408473768599402175208123")))
    k_pos = Fraction(float(np.float32("1.0507009873554804934193349852946")))
    scale = Fraction("1.0507009873554804934193349852946")
    negcoef = Fraction("1.6732632423543772848170429916717") * scale
    y, dy = np.array([float(np.float16(-1.7580993)), -0.5, 0.5]), np.array([2.0, -3.0, -3.0])
    ref = S._reference({"result": y, "gradOutput": dy})
    for i, (yi, di) in enumerate(zip(map(Fraction, y), map(Fraction, dy))):
        device, exact = (di * (yi + k_neg), di * (yi + negcoef)) if yi <= 0 else (di * k_pos, di * scale)
        assert ref.lean[i] == pytest.approx(float(abs(device) - abs(exact)), rel=1e-12)
    assert abs(ref.lean[0]) / abs(dy[0] * (y[0] + float(negcoef))) > 2.0**-10 / 16


@pytest.mark.parametrize("variant", [None, "round-half-away", "flush-subnormals", "fp64-compute", "selu-one-rounding"])
def test_correct_and_legitimate_kernels_pass_at_every_size(suite, variant):
    assert run_cli("emulate", suite, "-j", 2, *(("--defect", variant) if variant else ())).exit_code == 0
    statuses = _statuses(suite)
    assert len(statuses) == sum(map(len, SIZES.values()))
    assert set(statuses.values()) == {"PASS"}, statuses


def _rounded(x: np.ndarray, dtype: str, way: str) -> np.ndarray:
    """float32 results into a 16-bit float dtype toward zero or away from it: round to nearest, then one step of the
    magnitude's bits (sign and magnitude, in both formats) where it took the other side."""
    np_dtype = np.dtype(np.float16) if dtype == "float16" else np.dtype(ml_dtypes.bfloat16)
    near = x.astype(np_dtype)
    wide = np.abs(near.astype(np.float32))
    step = np.where(wide > np.abs(x), -1, 0) if way == "toward zero" else np.where(wide < np.abs(x), 1, 0)
    return (near.view(np.uint16).astype(np.int32) + step).astype(np.uint16).view(np_dtype)


@pytest.mark.parametrize("way", ["toward zero", "away from zero"])
def test_a_kernel_rounding_one_way_fails_at_every_size(suite, way):
    """The kernel's float32 results (its literals, as selu_grad.h) rounded one way into the 16-bit output: every
    element off by at most an ulp, half an ulp on average, one way. Every 16-bit case fails, at every size."""
    run_cli("emulate", suite, "-j", 2)  # (the cases' status files)
    cases = sorted(d for d in suite.iterdir() if (d / "case.json").is_file())
    sixteen = []
    for case in cases:
        m = manifest(case)
        out = tensor(m, "gradInput")
        if out["dtype"] == "float32":
            continue
        y, dy = (read_storage(case, tensor(m, name)).astype(np.float32)  # (1-D, contiguous: storage order)
                 for name in ("result", "gradOutput"))
        device = S._kernel({"result": y, "gradOutput": dy})
        _rounded(device, out["dtype"], way).tofile(case / out["dump"])
        sixteen.append(case.name)
    records = verify_records(suite, jobs=2)[1]
    assert len(sixteen) == len(SIZES["float16"]) + len(SIZES["bfloat16"])
    assert {records[n]["status"] for n in sixteen} == {"FAIL"}, json.dumps(records)[:2000]
    assert all("balance" in records[n]["reason"] for n in sixteen), json.dumps(records)[:2000]


def test_the_bundled_lean_is_a_literals_rounding_of_the_terms():
    """What the guard holds a user op's lean to (ops/guard.LEAN_SHARE: half an ulp of a float32 literal, times what it
    multiplies, within the scale), SeluBackward's holds too, across both branches and the saturation."""
    from aclnn_cli.ops.guard import LEAN_SHARE

    rng = np.random.default_rng(3)
    y = np.concatenate([rng.uniform(-1.7582, -1.758, 1000), rng.uniform(-2, 3, 1000), [0.0, -0.0, 1e-30]])
    ref = S._reference({"result": y, "gradOutput": rng.standard_normal(y.size)})
    assert np.all(np.abs(ref.lean) <= LEAN_SHARE * ref.scale) and np.count_nonzero(ref.lean) == y.size


LEANING_OP = """\
import numpy as np
from aclnn_cli.ops import OpSpec, Reference, TensorSpec, register

def reference(t):
    v = t["gradOut"] * 2
    return Reference(v, np.zeros_like(v), np.abs(v) + 1, lean={lean})

register(OpSpec(name="aclnnMyLeaning", key="my_leaning", summary="x", formula="x",
    tensors=(TensorSpec("gradOut", "input", {{"normal": [0, 1]}}), TensorSpec("gradInput", "output", {{"constant": 0}})),
    products={{"950": ("float32",)}}, dims=(1, 8), empty_ok=False, reference=reference))
"""


@pytest.mark.parametrize("lean, shown", [("np.full_like(v, np.inf)", "a lean of inf"),
                                         ("np.full_like(v, np.nan)", "a lean of nan"),
                                         ("np.full_like(v, -1e-3)", "a lean of -0.001"),
                                         ("np.zeros(3)", "a lean of shape [3]"),
                                         ("None", None), ("1e-9 * (np.abs(v) + 1)", None)])
def test_a_user_ops_lean_past_a_literals_rounding_is_one_line(tmp_path, lean, shown):
    """A lean is taken off every element's in the error balance: one larger than a float32 literal's rounding of the
    terms would excuse a kernel biased by more. Refused where the reference returns it, naming the op and output."""
    from test_user_modules import cli, one_line

    op = tmp_path / "my_leaning.py"
    op.write_text(LEANING_OP.format(lean=lean))
    cases = tmp_path / "c.yaml"
    cases.write_text('op: aclnnMyLeaning\ndefaults: {dtype: float32, seed: 1, product: "950"}\ncases:\n'
                     '  - {name: a, shape: [4, 5]}\n')
    r = cli("--ops", op, "gen", cases, "-o", tmp_path / "out")
    if shown is None:
        assert r.returncode == 0, r.stdout + r.stderr
    else:
        line = one_line(r)
        assert "op aclnnMyLeaning: reference returned gradInput with " + shown in line, line
