"""Importers take what ops-nn writes for user ops as for bundled ones (issue 30, item 3).

A user op's `graph_ops` join the one table TTK kernel mode and msOpST look graph ops up in (ops/graphops.py), and
its `aliases` the foreign spellings the importers map input names by; register refuses, in one line naming the
module and the key, a graph op name already taken or one naming tensors or attributes the op has not. gen with
--skip-unsupported that skips every case exits 2 saying so.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from aclnn_cli.cases import importers
from aclnn_cli.errors import CaseError, UserError
from aclnn_cli.ops import AttrSpec, OpSpec, Reference, TensorSpec, find_graph_op, register
from aclnn_cli.ops import graphops
from aclnn_cli.ops.graphops import GraphOp, number
from aclnn_cli.ops.registry import DECLARED_IN, OPS

from helpers import read_yaml, run_cli
from test_importers import TTK_HEADER, ttk_row
from clifork import cli_process

HERE = __file__
USER_OPS = Path(__file__).parent / "user_ops"


@pytest.fixture
def registry():
    """Registrations made by a test are undone: the ops, and the graph ops they added."""
    ops, declared = dict(OPS), dict(DECLARED_IN)
    table, keys = dict(graphops.GRAPH_OPS), dict(graphops._KEYS)
    yield
    OPS.clear(), OPS.update(ops), DECLARED_IN.clear(), DECLARED_IN.update(declared)
    graphops.GRAPH_OPS.clear(), graphops.GRAPH_OPS.update(table), graphops._KEYS.clear(), graphops._KEYS.update(keys)


def _reference(t):
    value = np.asarray(t["gradOutput"], dtype=np.float64)
    return Reference(value, np.zeros_like(value), np.abs(value))


PROBE_GRAPH = GraphOp("aclnnUserGraphProbe", ("dy", "x"), to_inputs=("gradOutput", "self"), outputs=("z",),
                      to_outputs=("out",), attrs={"slope": ("alpha", number)})
PROBE = OpSpec(name="aclnnUserGraphProbe", key="user_graph_probe", summary="probe", formula="out = gradOutput",
               tensors=(TensorSpec("gradOutput", "input", {"normal": [0, 1]}),
                        TensorSpec("self", "input", {"uniform": [-2, 2]}), TensorSpec("out", "output", {"constant": 0})),
               attributes=(AttrSpec("alpha", "scalar", default=1.0),), products={"A2": ("float32", "float16")},
               dims=(0, 8), empty_ok=True, reference=_reference,
               graph_ops={"ProbeGraphGrad": PROBE_GRAPH}, aliases={"x": "self", "slope": "alpha"})


def _imported(tmp_path: Path, name: str, text: str) -> list[dict]:
    path = tmp_path / name
    path.write_text(text)
    return importers.import_file(path, path.read_bytes()).documents


def test_a_user_graph_op_is_found_as_a_bundled_one_is(registry, tmp_path):
    assert find_graph_op("ProbeGraphGrad") is None
    register(PROBE)
    assert find_graph_op("probe_graph_grad") is PROBE_GRAPH and find_graph_op("SiluGrad").api == "aclnnSiluBackward"
    ttk = TTK_HEADER + ttk_row("one", op="probe_graph_grad", attrs="{'slope': 0.5}")
    [doc] = _imported(tmp_path, "suite.csv", ttk)
    assert doc["op"] == "aclnnUserGraphProbe"
    [case] = doc["cases"]
    assert set(case["inputs"]) == {"gradOutput", "self"} and case["attributes"] == {"alpha": 0.5}, case
    msopst = json.dumps([{"case_name": "m", "op": "ProbeGraphGrad", "input_desc": [
        {"name": "x", "format": "ND", "type": "float16", "shape": [3]},
        {"name": "dy", "format": "ND", "type": "float16", "shape": [3]}],
        "output_desc": [{"format": "ND", "type": "float16", "shape": [3]}]}])
    [doc] = _imported(tmp_path, "suite.json", msopst)
    assert doc["op"] == "aclnnUserGraphProbe" and [c["name"] for c in doc["cases"]] == ["m"]


def _ttk3(name: str, third: str) -> str:
    """A TTK row of three float16 inputs of 7 elements, the third `None` (left out) or given."""
    dt, sh, fm = ("'float16'", "(7,)", "'ND'") if third == "given" else ("None", "None", "None")
    shapes = f"((7,), (7,), {sh})"
    return (f'{name},probe_graph_grad,"(\'float16\', \'float16\', {dt})","{shapes}","((7,),)",'
            f'"(\'ND\', \'ND\', {fm})","(\'ND\',)","{{}}","{shapes}","(\'float16\',)","((7,),)",'
            f'"(\'ND\', \'ND\', {fm})","(\'ND\',)","((-1, 1),)",,1e-08,\n')


def test_an_absent_only_input_given_makes_the_case_unsupported(registry, tmp_path):
    """`absent_only`: an optional graph input the API has no argument for and whose value changes the result (no
    bundled graph op has one since MishGrad went to its generated API, which takes tanhx): left out the case
    imports, given it is skipped with the declared reason."""
    graph = dataclasses.replace(PROBE_GRAPH, inputs=("dy", "x", "y"), to_inputs=("gradOutput", "self", None),
                                attrs={}, absent_only={"y": "the probe computes y itself"})
    register(dataclasses.replace(PROBE, graph_ops={"ProbeGraphGrad": graph}))
    src = tmp_path / "suite.csv"
    src.write_text(TTK_HEADER + _ttk3("left_out", "none") + _ttk3("given", "given"))
    result = run_cli("convert", src, "-o", tmp_path / "yaml")
    assert result.exit_code == 2 and "the probe computes y itself" in result.output, result.output
    result = run_cli("convert", src, "-o", tmp_path / "yaml", "--skip-unsupported")
    assert result.exit_code == 0 and "skipped 1 unsupported foreign case:" in result.output, result.output
    assert "y is given: the probe computes y itself" in result.output
    [doc] = [read_yaml(p) for p in (tmp_path / "yaml").glob("*.yaml")]
    [case] = doc["cases"]
    assert case["name"] == "left_out" and set(case["inputs"]) == {"gradOutput", "self"}


def test_a_user_ops_aliases_map_foreign_input_names(registry, tmp_path):
    register(PROBE)
    atk = json.dumps([{"id": 0, "aclnn_name": "aclnnUserGraphProbe", "inputs": [
        {"name": "gradOutput", "dtype": "fp16", "shape": [2], "range_values": [0, 1]},
        {"name": "x", "dtype": "fp16", "shape": [2], "range_values": [-1, 1]}]}])
    [doc] = _imported(tmp_path, "atk.json", atk)
    assert doc["cases"][0]["inputs"] == {"gradOutput": {"uniform": [0, 1]}, "self": {"uniform": [-1, 1]}}
    unknown = atk.replace('"x"', '"y"')
    with pytest.raises(importers.Unsupported, match="'y' is not an input of aclnnUserGraphProbe"):
        _imported(tmp_path, "atk2.json", unknown)
    msopst = json.dumps([{"case_name": "m", "op": "aclnnUserGraphProbe", "input_desc": [
        {"name": "gradOutput", "format": "ND", "type": "float16", "shape": [3]},
        {"name": "x", "format": "ND", "type": "float16", "shape": [3]}],
        "output_desc": [{"format": "ND", "type": "float16", "shape": [3]}]}])
    [doc] = _imported(tmp_path, "suite.json", msopst)  # (msOpST: the alias as an input_desc's name)
    assert doc["op"] == "aclnnUserGraphProbe" and [c["name"] for c in doc["cases"]] == ["m"]


def _broken_derive(shapes):
    raise ZeroDivisionError("no")


def test_an_input_made_from_a_shape_attribute(registry, tmp_path):
    """GraphOp.shaped (AdaptiveAvgPool2dGrad's orig_input_shape): the API input no graph input maps to is made of the
    attribute's shape in the first input's dtype, from TTK and msOpST alike; a case without the attribute, or with
    something else than sizes there, is unsupported naming it."""
    graph = GraphOp("aclnnUserGraphProbe", ("dy",), to_inputs=("gradOutput",), outputs=("z",), to_outputs=("out",),
                    shaped={"self": "orig_shape"})
    register(dataclasses.replace(PROBE, graph_ops={"ShapedProbeGrad": graph}))
    def one_input(name, attrs):  # (ttk_row's two input dtypes as one)
        return ttk_row(name, op="ShapedProbeGrad", shapes="((7,),)", attrs=attrs).replace(
            "\"('float16', 'float16')\"", "\"('float16',)\"", 1).replace("\"('ND', 'ND')\"", "\"('ND',)\"")

    row = TTK_HEADER + one_input("one", "{'orig_shape': [7]}")
    [doc] = _imported(tmp_path, "suite.csv", row)
    [case] = doc["cases"]
    assert case["shape"] == [7] and case["dtype"] == "float16" and set(case["inputs"]) == {"gradOutput", "self"}, case
    msopst = json.dumps([{"case_name": "m", "op": "ShapedProbeGrad", "attr": [{"name": "orig_shape", "value": [3]}],
                          "input_desc": [{"name": "dy", "format": "ND", "type": "float16", "shape": [3]}],
                          "output_desc": [{"format": "ND", "type": "float16", "shape": [3]}]}])
    [doc] = _imported(tmp_path, "suite.json", msopst)
    assert doc["cases"][0]["shape"] == [3]
    for attrs in ("{}", "{'orig_shape': 7}"):
        with pytest.raises(importers.Unsupported, match="it gives self's shape, a list of sizes"):
            _imported(tmp_path, "bad.csv", TTK_HEADER + one_input("bad", attrs))


def test_a_user_graph_ops_derive_that_fails_is_one_line(registry, tmp_path):
    graph = dataclasses.replace(PROBE_GRAPH, derive=_broken_derive)
    register(dataclasses.replace(PROBE, graph_ops={"ProbeGraphGrad": graph}))
    with pytest.raises(CaseError) as caught:
        _imported(tmp_path, "suite.csv", TTK_HEADER + ttk_row("one", op="ProbeGraphGrad"))
    assert "the graph op's derive({'gradOutput': (7,), 'out': (7,), 'self': (7,)}) failed: ZeroDivisionError: no" in str(caught.value)


REFUSED = {  # id -> (graph_ops / aliases replaced in PROBE, "field: message" the refusal ends with)
    "bundled_graph_name": (dict(graph_ops={"EluGrad": dataclasses.replace(PROBE_GRAPH)}),
                           "graph_ops[EluGrad]: EluGrad (aclnnEluBackward) is a bundled graph op: give this one "
                           "another name"),
    "bundled_graph_name_snake": (dict(graph_ops={"silu_grad": PROBE_GRAPH}),
                                 "graph_ops[silu_grad]: SiluGrad (aclnnSiluBackward) is a bundled graph op: give this "
                                 "one another name"),
    "not_a_graph_op": (dict(graph_ops={"ProbeGraphGrad": ("dy", "x")}),
                       "graph_ops[ProbeGraphGrad]: expected a GraphOp (from aclnn_cli.ops.graphops import GraphOp), "
                       "got ('dy', 'x')"),
    "another_api": (dict(graph_ops={"ProbeGraphGrad": dataclasses.replace(PROBE_GRAPH, api="aclnnSiluBackward")}),
                    "graph_ops[ProbeGraphGrad].api: expected this op's name aclnnUserGraphProbe, got "
                    "'aclnnSiluBackward'"),
    "unknown_input": (dict(graph_ops={"ProbeGraphGrad": dataclasses.replace(PROBE_GRAPH, to_inputs=("gradOutput", "x"))}),
                      "graph_ops[ProbeGraphGrad].to_inputs[1]: aclnnUserGraphProbe has no input 'x' (gradOutput, self)"),
    "unknown_output": (dict(graph_ops={"ProbeGraphGrad": dataclasses.replace(PROBE_GRAPH, to_outputs=("dx",))}),
                       "graph_ops[ProbeGraphGrad].to_outputs[0]: aclnnUserGraphProbe has no output 'dx' (out)"),
    "unknown_attribute": (dict(graph_ops={"ProbeGraphGrad": dataclasses.replace(
        PROBE_GRAPH, attrs={"slope": ("beta", number)})}),
        "graph_ops[ProbeGraphGrad].attrs[slope]: aclnnUserGraphProbe has no attribute 'beta' (alpha)"),
    "too_many_inputs": (dict(graph_ops={"ProbeGraphGrad": GraphOp("aclnnUserGraphProbe", ("dy", "x", "y"))}),
                        "graph_ops[ProbeGraphGrad].inputs: 3 graph inputs, aclnnUserGraphProbe has 2 (gradOutput, "
                        "self): map them with to_inputs"),
    "absent_only_of_a_mapped_input": (dict(graph_ops={"ProbeGraphGrad": dataclasses.replace(
        PROBE_GRAPH, absent_only={"x": "computed by the API"})}),
        "graph_ops[ProbeGraphGrad].absent_only['x']: expected a graph input mapped to None in to_inputs"),
    "when_of_another_length": (dict(graph_ops={"ProbeGraphGrad": dataclasses.replace(
        PROBE_GRAPH, when=(("mode", 1, ("gradOutput",)),))}),
        "graph_ops[ProbeGraphGrad].when[0]: expected (graph attribute, value, one API input name or None per graph "
        "input), got ('mode', 1, ('gradOutput',))"),
    "when_naming_no_input": (dict(graph_ops={"ProbeGraphGrad": dataclasses.replace(
        PROBE_GRAPH, when=(("mode", 1, ("gradOutput", "x")),))}),
        "graph_ops[ProbeGraphGrad].when[0][1]: aclnnUserGraphProbe has no input 'x' (gradOutput, self)"),
    "shaped_of_a_mapped_input": (dict(graph_ops={"ProbeGraphGrad": dataclasses.replace(
        PROBE_GRAPH, shaped={"self": "orig_shape"})}),
        "graph_ops[ProbeGraphGrad].shaped['self']: expected an input of the op no graph input maps to -> the graph "
        "attribute holding its shape"),
    "alias_to_nothing": (dict(aliases={"x": "input"}),
                         "aliases[x]: expected one of gradOutput, self, out, alpha, got 'input'"),
    "alias_of_its_own_name": (dict(aliases={"Self": "self"}),
                              "aliases[Self]: 'Self' already names a tensor or attribute of this op"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_register_refuses_graph_ops_and_aliases_the_op_cannot_have(registry, case):
    fields, message = REFUSED[case]
    with pytest.raises(UserError) as caught:
        register(dataclasses.replace(PROBE, **fields))
    assert str(caught.value) == f"{HERE}: op aclnnUserGraphProbe: {message}"
    assert "aclnnUserGraphProbe" not in OPS and find_graph_op("ProbeGraphGrad") is None


ELU_GRAPH = ('    graph_ops={"MyEluGradX": GraphOp("aclnnMyEluBackward", ("grads", "activations"), '
             'to_inputs=("gradOutput", "selfOrResult"), outputs=("y",), to_outputs=("gradInput",), '
             'attrs={"alpha": ("alpha", number)})},\n    aliases={"x": "selfOrResult"},\n))\n')


def _elu_module(tmp_path: Path, graph: str = ELU_GRAPH) -> Path:
    text = (USER_OPS / "my_elu_backward.py").read_text()
    assert text.endswith("))\n")
    module = tmp_path / "my_elu.py"
    module.write_text("from aclnn_cli.ops.graphops import GraphOp, number\n" + text.removesuffix("))\n") + graph)
    return module


def _cli(*args, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ACLNN_CLI_OPS"}
    env.update(env_extra or {})
    return cli_process(*map(str, args), env=env, timeout=120)


def test_a_user_modules_graph_op_imports_from_ttk_and_a_taken_name_is_one_line(tmp_path):
    module = _elu_module(tmp_path)
    src = tmp_path / "suite.csv"
    src.write_text(TTK_HEADER + ttk_row("e", op="my_elu_grad_x", attrs="{'alpha': 0.5}"))
    done = _cli("convert", src, "-o", tmp_path / "yaml", env_extra={"ACLNN_CLI_OPS": str(module)})
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "yaml" / "suite.yaml").read_text()
    assert "aclnnMyEluBackward" in text and "selfOrResult" in text and "alpha: 0.5" in text, text
    taken = _elu_module(tmp_path, ELU_GRAPH.replace("MyEluGradX", "EluGradV2"))
    done = _cli("--ops", taken, "convert", src, "-o", tmp_path / "yaml2")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == (f"aclnn-cli: error: {taken}: op aclnnMyEluBackward: graph_ops[EluGradV2]: EluGradV2 "
                           "(aclnnEluBackward) is a bundled graph op: give this one another name\n")


def test_gen_where_every_case_was_skipped_exits_2_saying_so(tmp_path):
    src = tmp_path / "suite.csv"
    src.write_text(TTK_HEADER + ttk_row("prelu", op="p_relu_grad") + ttk_row("conv", op="conv2d"))
    result = run_cli("gen", src, "-o", tmp_path / "out", "--skip-unsupported")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert lines[0] == "skipped 2 unsupported foreign cases:", lines
    assert lines[-1].startswith("aclnn-cli: error: every case was skipped, nothing is left to generate: "
                                "--skip-unsupported left out all 2 (the reasons above; e.g. key 'op_name': "
                                "op 'p_relu_grad' is not supported"), lines[-1]
    assert not (tmp_path / "out").exists()
