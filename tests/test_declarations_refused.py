"""A user declaration that cannot work is one clear line (exit 2), never a traceback and never wrong goldens:

- shapes the op accepts but its family cannot relate (a (C,) weight beside [N, C, H, W] would be broadcast
  along W: with W = C, 48 of 72 goldens were wrong and the op's own loop passed; with W != C, a traceback);
- a function that returns an output of another shape than the pieces it was given (an elementwise op's flat
  piece, a Rows op's (k, R, A0) block): written, it would be a golden of the wrong elements;
- and an op with a single input works end to end (the contract asked for a second input: a traceback).
"""

from __future__ import annotations

import textwrap

import pytest

from test_user_modules import cli, one_line

HEADER = """\
import numpy as np
from aclnn_cli.ops import OpSpec, Reference, TensorSpec, register
from aclnn_cli.ops.families import Rows

def twice(t):
    v = t["gradOut"] * 2
    return Reference(v, np.zeros_like(v), np.abs(v))
"""


def _op(tmp_path, body: str):
    p = tmp_path / "my_op.py"
    p.write_text(HEADER + textwrap.dedent(body))
    return p


def _cases(tmp_path, op: str, *cases: str):
    p = tmp_path / "cases.yaml"
    p.write_text(f"op: {op}\ndefaults: {{dtype: float32, seed: 1, product: \"950\"}}\ncases:\n"
                 + "".join(f"  - {c}\n" for c in cases))
    return p


CHANNEL = """
def reference(t):
    v = t["gradOut"] * t["weight"]
    return Reference(v, np.zeros_like(v), np.abs(v))

register(OpSpec(
    name="aclnnMyChannelGrad", key="my_channel_grad", summary="dy * weight[c]", formula="dy * weight[c]",
    tensors=(TensorSpec("gradOut", "input", {"normal": [0, 1]}), TensorSpec("weight", "input", {"uniform": [1, 2]}),
             TensorSpec("gradInput", "output", {"constant": 0})),
    products={"950": ("float32",)}, dims=(1, 8), empty_ok=False,
    family=Rows(driver="gradOut", axes=lambda s, a: (0, len(s["gradOut"]))),
    reference=reference))
"""


@pytest.mark.parametrize("shape", [[2, 3, 4, 3], [2, 3, 4, 5]])
def test_a_channel_weight_the_rows_family_would_read_along_the_last_axis_is_refused(tmp_path, shape):
    op = _op(tmp_path, CHANNEL)
    cases = _cases(tmp_path, "aclnnMyChannelGrad", f"{{name: c, shape: {shape}, tensors: {{weight: {{shape: [3]}}}}}}")
    line = one_line(cli("--ops", op, "gen", cases, "-o", tmp_path / "out"))
    assert "case 'c'" in line and "key 'shape'" in line and "weight has shape [3]" in line, line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_the_shapes_the_rows_family_relates_still_generate(tmp_path):
    op = _op(tmp_path, CHANNEL)
    cases = _cases(tmp_path, "aclnnMyChannelGrad", "{name: full, shape: [2, 3, 4, 3]}",
                   "{name: one, shape: [2, 3], tensors: {weight: {shape: [1]}}}")
    done = cli("--ops", op, "gen", cases, "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("family, shown", [
    ("", "returned gradInput of shape [19] for pieces of shape [20]"),
    ("family=Rows(driver='gradOut', axes=lambda s, a: (1, 2)),", "returned gradInput of shape [4, 4, 1] for pieces of "
                                                                 "shape [4, 5, 1]"),
])
def test_a_reference_returning_another_shape_is_one_line(tmp_path, family, shown):
    op = _op(tmp_path, f"""
    def reference(t):
        r = twice(t)
        cut = (lambda a: a[..., :-1]) if r.value.ndim == 1 else (lambda a: a[:, :-1])
        return Reference(cut(r.value), cut(r.bound), cut(r.scale))

    register(OpSpec(
        name="aclnnMyCut", key="my_cut", summary="x", formula="x",
        tensors=(TensorSpec("gradOut", "input", {{"normal": [0, 1]}}), TensorSpec("other", "input", {{"normal": [0, 1]}}),
                 TensorSpec("gradInput", "output", {{"constant": 0}})),
        products={{"950": ("float32",)}}, dims=(1, 8), empty_ok=False, {family}
        reference=reference))
    """)
    line = one_line(cli("--ops", op, "gen", _cases(tmp_path, "aclnnMyCut", "{name: c, shape: [4, 5]}"), "-o",
                        tmp_path / "out"))
    assert "op aclnnMyCut: reference " + shown in line, line


def test_an_op_with_one_input_runs_end_to_end(tmp_path):
    op = _op(tmp_path, """
    register(OpSpec(
        name="aclnnMyTwice", key="my_twice", summary="2 dy", formula="2 dy",
        tensors=(TensorSpec("gradOut", "input", {"normal": [0, 1]}), TensorSpec("gradInput", "output", {"constant": 0})),
        products={"950": ("float32", "float16")}, dims=(1, 8), empty_ok=False, reference=twice))
    """)
    out = tmp_path / "out"
    cases = _cases(tmp_path, "aclnnMyTwice", "{name: c, shape: [4, 5], dtype: [float32, float16]}",
                   "{name: contract, shape: [3, 4], contract: true}")
    for command in (("gen", cases, "-o", out), ("emulate", out), ("verify", out)):
        done = cli("--ops", op, *command)
        assert done.returncode == 0, (command, done.stderr[-2000:])
    assert "(2 precision," in done.stdout and "all cases pass" in done.stdout, done.stdout[-500:]
