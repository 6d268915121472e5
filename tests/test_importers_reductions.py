"""Importing the six reduction ops' foreign suites: int attributes (dim, reduction, ignoreIndex), int and bool
arrays (normalizedShape, outputMask), integer tensors (NLL's target), optional tensors left out, graph ops whose
inputs, outputs and attributes map by name (SoftmaxGrad's softmax is the API's output; reduction 'sum' is 2).

The ops are tests/kinds_standins.py's stand-ins (the real APIs' names and signatures), added for each test.
Small files written here always run; ops-nn's own ATK and TTK files for the six ops run where they are on this
machine: ACLNN_OPS_NN_SUITES (a folder holding ops-nn's tree, or its files), else /tmp/ops-nn-suites, else a git
mirror of hicann/ops-nn (test_importers_batchnorm.suite: ACLNN_OPS_NN_GIT), else they are skipped with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aclnn_cli.cases import importers
from aclnn_cli.cases.loader import cases_from_doc
from aclnn_cli.errors import CaseError

import kinds_standins as S
from test_importers_batchnorm import suite  # (ACLNN_OPS_NN_SUITES, /tmp/ops-nn-suites, else a git mirror)

OPS_NN = {  # op folder in hicann/ops-nn -> its ATK and TTK files (tests/st/...)
    "activation/softmax_grad": ("aclnnSoftmaxBackward/atk_aclnnSoftmaxBackward.json", "arch35/ttk_kernel_softmax_grad.csv"),
    "activation/log_softmax_grad": ("aclnnLogSoftmaxBackward/atk_aclnnLogSoftmaxBackward.json",
                                    "arch35/ttk_kernel_log_softmax_grad_st.csv"),
    "loss/mse_loss_grad": ("aclnnMseLossBackward/atk_aclnnMseLossBackward.json", "arch35/ttk_kernel_mse_loss_grad_st.csv"),
    "norm/rms_norm_grad": ("aclnnRmsNormGrad/atk_aclnnRmsNormGrad.json", "arch35/ttk_kernel_rms_norm_grad_st.csv"),
    "norm/layer_norm_grad_v3": ("aclnnLayerNormBackward/atk_aclnnLayerNormBackward.json",
                                "arch35/ttk_kernel_layer_norm_grad_v3_st.csv"),
    "loss/nll_loss_grad": ("aclnnNLLLossBackward/atk_aclnnNLLLossBackward.json", "arch35/ttk_kernel_nll_loss_grad_st.csv"),
}
SUITE_FILES = [f"{folder}/tests/st/{f}" for folder, files in OPS_NN.items() for f in files]


@pytest.fixture(autouse=True)
def standins():
    with S.added():
        yield


def imported(path: Path, skip: bool = False) -> importers.Imported:
    """As gen imports it: skipping validates each case with the case files' reader."""
    from aclnn_cli.cases.loader import cases_from_doc

    return importers.import_file(path, path.read_bytes(), skip_unsupported=skip, validate=cases_from_doc)


def by_name(result: importers.Imported) -> dict[str, dict]:
    return {c["name"]: {**c, "op": d["op"]} for d in result.documents for c in d["cases"]}


def expand(result: importers.Imported):
    """Every case, validated and expanded as gen does: {case name: Case}."""
    return {c.name: c for d in result.documents for c in cases_from_doc("t", d)}


def tensors(case) -> dict:
    return {t.name: t for t in case.tensors}


# ---- ATK: attr and attrs entries, integer tensors, left-out optional tensors ----------------------------------

def atk_input(name, dtype="fp32", shape=(4, 6), rv=(-1, 1), **extra) -> dict:
    return {"name": name, "type": "tensor", "required": True, "dtype": dtype, "shape": None if shape is None else list(shape),
            "range_values": list(rv), **extra}


def attr(name, value, dtype="int", kind="attr") -> dict:
    return {"name": name, "type": kind, "required": True, "dtype": dtype, "shape": None, "range_values": value}


def atk_file(tmp_path: Path, cases: list[tuple[str, list]]) -> Path:
    body = [{"id": i, "name": "n", "aclnn_name": api, "api_type": "t", "standard": {}, "inputs": inputs}
            for i, (api, inputs) in enumerate(cases)]
    p = tmp_path / "atk_probe.json"
    p.write_text(json.dumps(body))
    return p


def test_atk_int_attributes_int_and_bool_arrays_and_integer_tensors(tmp_path):
    f = atk_file(tmp_path, [
        ("aclnnSoftmaxBackward", [atk_input("gradOutput"), atk_input("Output", rv=(0, 1)), attr("dim", 0)]),
        ("NLLLossBackward", [atk_input("gradOutput", shape=(5,)), atk_input("self", shape=(5, 7)),
                             atk_input("target", dtype="int32", shape=(5,), rv=(0, 6)), atk_input("weight", shape=(7,)),
                             attr("reduction", 0), attr("ignoreIndex", -100), atk_input("totalWeight", shape=(1,))]),
        ("LayerNormBackward", [atk_input("gradOut", dtype="fp16"), atk_input("input", dtype="fp16"),
                               [attr("normalizedShape", 6, kind="attrs")],
                               atk_input("mean", shape=(4, 1)), atk_input("rstd", shape=(4, 1), rv=(0.5, 2)),
                               atk_input("weightOptional", dtype="fp16", shape=(6,), required=False),
                               atk_input("biasOptional", dtype="fp16", shape=None),
                               [attr("outputMask", b, "bool", "attrs") for b in (True, False, True)]]),
        ("RmsNormGrad", [atk_input("dy", dtype="bf16"), atk_input("input", dtype="bf16"),
                         atk_input("rstd", shape=(4,)), atk_input("gamma", dtype="bf16", shape=(6,))]),
    ])
    cases = expand(imported(f))
    sm = cases["atk_probe-0"]
    assert sm.op.name == "aclnnSoftmaxBackward" and dict(sm.attributes) == {"dim": 0}
    assert tensors(sm)["output"].fill.describe() == {"uniform": [0.0, 1.0]}  # ATK's "Output"
    nll = cases["atk_probe-1"]
    assert dict(nll.attributes) == {"reduction": 0, "ignoreIndex": -100}
    target = tensors(nll)["target"]
    assert (target.dtype.name, target.fill.describe(), target.layout.shape) == ("int32", {"randint": [0, 6]}, (5,))
    ln = cases["atk_probe-2"]
    assert dict(ln.attributes) == {"normalizedShape": (6,), "outputMask": (True, False, True)}
    t = tensors(ln)
    assert t["weightOptional"].null and t["biasOptional"].null and not t["mean"].null
    assert (t["mean"].dtype.name, t["input"].dtype.name) == ("float32", "float16")  # fp32 statistics beside fp16
    rms = cases["atk_probe-3"]
    assert tensors(rms)["x"].dtype.name == "bfloat16" and tensors(rms)["rstd"].layout.shape == (4,)


def test_an_int_attribute_range_is_one_value_drawn_per_case(tmp_path):
    """ATK draws an attribute given as [lo, hi] per run; we draw it once per case, from the file and the case id."""
    inputs = [atk_input("gradOutput"), atk_input("self"), atk_input("target"), attr("reduction", [0, 2])]
    f = atk_file(tmp_path, [("MseLossBackward", inputs)] * 40)
    got = [dict(c.attributes)["reduction"] for c in expand(imported(f)).values()]
    assert set(got) == {0, 1, 2}
    assert got == [dict(c.attributes)["reduction"] for c in expand(imported(f)).values()]  # the same every import


@pytest.mark.parametrize("inputs, reason", [
    ([atk_input("gradOutput"), atk_input("output"), attr("dim", 1.5)], "expected an int64 integer"),
    ([atk_input("gradOutput"), atk_input("output"), [attr("dim", 1, kind="attrs")]], "a tensor or value list"),
    ([atk_input("gradOutput"), atk_input("output", required=False), attr("dim", 0)], "output is left out"),
    ([atk_input("gradOutput"), atk_input("output"), attr("axis", 0)], "'axis' is not an input"),
])
def test_what_atk_cannot_express_is_skipped_and_counted_with_its_reason(tmp_path, inputs, reason):
    f = atk_file(tmp_path, [("aclnnSoftmaxBackward", inputs), ("aclnnSoftmaxBackward",
                                                               [atk_input("gradOutput"), atk_input("output"), attr("dim", 0)])])
    result = imported(f, skip=True)
    assert len(result.skipped) == 1 and reason in result.skipped[0].reason, result.skipped
    assert len(by_name(result)) == 1
    with pytest.raises(CaseError, match=None) as exc:
        expand(imported(f))
    assert reason in str(exc.value)


# ---- TTK kernel mode: graph ops ------------------------------------------------------------------------------

TTK_HEADER = ("testcase_name,op_name,input_shapes,input_dtypes,output_shapes,output_dtypes,attributes,"
              "input_data_ranges,is_enabled\n")


def ttk_file(tmp_path: Path, rows: list[str]) -> Path:
    p = tmp_path / "ttk_probe.csv"
    p.write_text(TTK_HEADER + "".join(r + "\n" for r in rows))
    return p


def test_ttk_graph_ops_map_inputs_outputs_and_attributes_by_name(tmp_path):
    f = ttk_file(tmp_path, [
        'sm,softmax_grad,"((3, 8), (3, 8))","(\'float16\',)","((3, 8),)","(\'float16\',)",{\'axes\': [1]},'
        '"((0, 1), (-5, -4))",1',
        'mse,mse_loss_grad,"((6, 2), (6, 2), ())","(\'bfloat16\',)","((6, 2),)","(\'bfloat16\',)",{\'reduction\': \'sum\'},,1',
        'nll,nll_loss_grad,"((9, 4), (), (9,), (4,), ())","(\'float32\', \'float32\', \'int32\', \'float32\', \'float32\')",'
        '"((9, 4),)","(\'float32\',)","{\'ignore_index\': -100, \'reduction\': \'mean\'}",'
        '"((-1, 1), (-1, 1), (0, 3), (-1, 1), (1, 2))",1',
        'ln,layer_norm_grad_v3,"((5, 6), (5, 6), (5, 1), (5, 1), (6,))",'
        '"(\'float16\', \'float16\', \'float32\', \'float32\', \'float16\')","((5, 6), (6,), (6,))",'
        '"(\'float16\', \'float32\', \'float32\')","{\'output_mask\': [False, True, True]}",'
        '"((-3, 3), (-3, 3), (0.5, 3), (-3, 3), (-3, 3))",1',
        'rms,rms_norm_grad,"((4, 16), (4, 16), (4,), (16,))","(\'float32\',)","((4, 16), (16,))","(\'float32\',)",'
        '{\'epsilon\': 1e-05},,1',
    ])
    c = expand(imported(f))
    sm = tensors(c["sm"])
    assert dict(c["sm"].attributes) == {"dim": 1}
    assert sm["output"].fill.describe() == {"uniform": [0.0, 1.0]}  # graph input 0 (softmax) is the API's output
    assert sm["gradOutput"].fill.describe() == {"uniform": [-5.0, -4.0]}
    mse = tensors(c["mse"])
    assert dict(c["mse"].attributes) == {"reduction": 2} and mse["gradOutput"].layout.shape == ()  # dout
    nll = tensors(c["nll"])
    assert dict(c["nll"].attributes) == {"reduction": 1, "ignoreIndex": -100}
    assert (nll["target"].dtype.name, nll["target"].fill.describe()) == ("int32", {"randint": [0, 3]})
    assert nll["gradOutput"].layout.shape == () and nll["totalWeight"].fill.describe() == {"uniform": [1.0, 2.0]}
    ln = c["ln"]
    assert dict(ln.attributes) == {"normalizedShape": (6,), "outputMask": (False, True, True)}  # gamma's shape
    t = tensors(ln)
    assert t["rstd"].fill.describe() == {"uniform": [0.5, 3.0]} and t["mean"].fill.describe() == {"uniform": [-3.0, 3.0]}
    assert t["biasOptional"].null and t["weightOptional"].dtype.name == "float16"  # LayerNormGradV3 has no beta
    assert (t["gradWeightOut"].dtype.name, t["gradInputOut"].dtype.name) == ("float32", "float16")  # as the row says
    rms = tensors(c["rms"])
    assert rms["rstd"].layout.shape == (4,) and rms["dgammaOut"].layout.shape == (16,) and dict(c["rms"].attributes) == {}


@pytest.mark.parametrize("row, reason", [
    ('a,softmax_grad,"((3, 8), (3, 8))","(\'float16\',)","((3, 8),)","(\'float16\',)","{\'axes\': [0, 1]}",,1',
     "the aclnn API takes one dim"),
    ('a,mse_loss_grad,"((6, 2), (6, 2), ())","(\'float32\',)","((6, 2),)","(\'float32\',)",{\'reduction\': \'avg\'},,1',
     "reduction 'avg' is not none, mean or sum"),
    ('a,nll_loss_grad,"((9, 4), (), (9,), (4,), ())","(\'float32\', \'float32\', \'int32\', \'float32\', \'float32\')",'
     '"((9, 4),)","(\'float32\',)","{\'label_smoothing\': 0.1}",,1', "'label_smoothing' is not supported"),
    ('a,nll_loss_grad,"((9, 4), (), (9,), (4,), ())","(\'float32\', \'float32\', \'int32\', \'float32\', \'float32\')",'
     '"((9, 4),)","(\'float32\',)",{},"((-1, 1), (-1, 1), (-1.5, -1.2), (-1, 1), (1, 2))",1', "not an integer"),
])
def test_what_ttk_cannot_express_is_skipped_and_counted(tmp_path, row, reason):
    f = ttk_file(tmp_path, [row])
    result = imported(f, skip=True)
    assert [s.case for s in result.skipped] == ["a"] and reason in result.skipped[0].reason, result.skipped
    assert importers.describe_skipped(result.skipped)[0] == "skipped 1 unsupported foreign case:"


# ---- ops-nn's own suites ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("rel", SUITE_FILES, ids=[Path(f).name for f in SUITE_FILES])
def test_ops_nn_suites_import_and_validate(rel):
    """Every case of each file imports and validates as gen would, or is skipped with its reason; at most a
    quarter skipped (issue 19). With the stand-ins nothing is skipped: their contracts check no shapes."""
    result = imported(suite(rel), skip=True)
    total = len(by_name(result)) + len(result.skipped)
    assert total > 0 and len(result.skipped) <= total // 4, importers.describe_skipped(result.skipped)
    cases = expand(result)
    assert len(cases) == len(by_name(result))


def test_ops_nn_fields_map_as_docs_say():
    """A few cases read by hand from the files (hicann/ops-nn e5c3fa93)."""
    nll = by_name(imported(suite(SUITE_FILES[-1])))["nll_loss_grad_1"]  # ((12048, 2), (), (12048,), (2,), ())
    assert nll["attributes"] == {"reduction": 2, "ignoreIndex": -100} and nll["shape"] == [12048, 2]
    assert nll["tensors"]["target"] == {"dtype": "int32"} and nll["inputs"]["target"] == {"randint": [0, 1]}
    ln = expand(imported(suite(SUITE_FILES[9])))["layer_norm_grad_v3_recompute_504_3"]
    assert dict(ln.attributes) == {"normalizedShape": (100,), "outputMask": (False, False, True)}
    assert {t.name: t.dtype.name for t in ln.tensors if t.role == "output"} == \
        {"gradInputOut": "bfloat16", "gradWeightOut": "float32", "gradBiasOut": "float32"}
    sm = by_name(imported(suite(SUITE_FILES[1])))["softmax_grad_recompute_bfloat16_018"]
    assert sm["attributes"] == {"dim": 7} and sm["shape"] == [1, 2, 1, 1, 1, 4, 13, 44425]
    rms = by_name(imported(suite(SUITE_FILES[6])))["atk_aclnnRmsNormGrad-0"]
    assert set(rms["inputs"]) == {"dy", "x", "rstd", "gamma"} and rms["inputs"]["x"]["normal"][1] >= 1
    mse = by_name(imported(suite(SUITE_FILES[5])))["mse_loss_grad_benchmarktraining910_ID0431_00042578"]
    assert mse["attributes"] == {"reduction": 2} and mse["tensors"]["gradOutput"] == {"shape": []}
