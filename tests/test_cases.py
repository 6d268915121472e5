"""Case files: expansion, defaults, and every kind of bad input -> one line naming file/case/key, exit 2."""

from __future__ import annotations

import pytest

from aclnn_cli.cases.loader import load_file

from helpers import run_cli, write_yaml

GOOD = """
op: SiluBackward
defaults: {seed: 5}
cases:
  - name: grid
    dtype: [float16, bfloat16]
    shape: [[1], [2, 3]]
    product: [A2, A3]
  - name: one
    dtype: float32
    shape: [4]
    inputs: {self: {values: [nan, inf, -inf, -0.0]}}
"""


def test_lists_expand_to_every_combination(tmp_path):
    cases = load_file(write_yaml(tmp_path, GOOD))
    ids = [c.case_id for c in cases]
    assert len(ids) == 8 + 1
    assert "silu_backward-grid-float16-2x3-A3" in ids
    assert "silu_backward-one" in ids
    one = cases[-1]
    assert one.seed == 5 and one.product == "A2" and one.output.layout.shape == (4,)
    assert one.inputs[1].fill.params[:3] == (pytest.approx(float("nan"), nan_ok=True), float("inf"), float("-inf"))


def test_all_values_gives_the_shape(tmp_path):
    p = write_yaml(tmp_path, "op: aclnnHardsigmoidBackward\ncases:\n  - {name: ev, dtype: bfloat16, inputs: {self: {all_values: true}}}\n")
    from aclnn_cli.cases.loader import load_cases
    (case,) = load_cases([p])
    assert case.output.layout.shape == (65536,)


BAD = [
    ("op: NoSuchOp\ncases: [{name: a, shape: [1]}]", "unknown op 'NoSuchOp'", "key 'op'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], dtype: float128}]", "unknown dtype 'float128'", "key 'dtype'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], dtype: float64}]", "gradOutput dtype float64 is not supported on A2", "key 'dtype'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [2, -1]}]", "negative dimension", "key 'shape'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], dtype: float16, inputs: {self: {uniform: [-1.0e6, 1]}}}]",
     "overflows float16", "key 'inputs.self'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], dtype: float32, inputs: {self: {all_values: true}}}]",
     "needs a 16-bit dtype", "key 'inputs.self'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], dtpye: float16}]", "did you mean 'dtype'", "key 'dtpye'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], inputs: {slef: {constant: 1}}}]", "did you mean 'self'", "key 'inputs.slef'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], inputs: {self: {gaussian: [0, 1]}}}]", "unknown generator", "key 'inputs.self'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], inputs: {self: {uniform: [2, 1]}}}]", "lo <= hi", "key 'inputs.self'"),
    ("op: SiluBackward\ncases: [{name: ../../etc, shape: [1]}]", "needs a name", "key 'name'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], product: 310P}]", "not supported on product '310P'", "key 'product'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], product: '910', dtype: bfloat16}]", "dtype bfloat16 is not supported on 910", "key 'dtype'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1,1,1,1,1,1,1,1,1]}]", "gradOutput has 9 dims; aclnnSiluBackward takes 1-8", "key 'shape'"),
    ("op: SiluBackward\ncases: [{name: a}]", "missing 'shape'", "key 'shape'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], seed: -3}]", "seed must be", "key 'seed'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], expect_status: 7}]", "unknown status", "key 'expect_status'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1]}, {name: a, shape: [2]}]", "same id", "key 'name'"),
    ("op: FastGeluBackward\ncases: [{name: a, shape: [0, 3]}]", "does not support empty", "key 'shape'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1]}]\nextra: 1", "unknown key 'extra'", "key 'extra'"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1]\n", "not valid YAML", ""),
    ("- just\n- a list\n", "a case file is a mapping", ""),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], inputs: {self: !!python/object/apply:os.system [ls]}}]",
     "not valid YAML", ""),
]


@pytest.mark.parametrize("text,message,key", BAD, ids=[b[1][:30] for b in BAD])
def test_bad_case_file_is_one_clear_line_with_exit_2(tmp_path, text, message, key):
    p = write_yaml(tmp_path, text)
    result = run_cli("gen", p, "-o", tmp_path / "out")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert str(p) in lines[0] and message in lines[0] and key in lines[0]
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_missing_case_file_is_exit_2(tmp_path):
    result = run_cli("gen", tmp_path / "nope.yaml", "-o", tmp_path / "out")
    assert result.exit_code == 2 and "no such file" in result.output
