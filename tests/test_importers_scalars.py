"""ops-nn's ATK files write an aclScalar* argument as type "scalar" and name some inputs as the forward does
(LeakyRelu's "x" and "a", Softplus's "x"); its TTK files name LeakyReluBackward's graph op leaky_relu_grad. Cases
written in those shapes (copied from activation/swish_grad, leaky_relu_grad and softplus_v2_grad) import, generate
and pass; what cannot be a value (a distribution for a scalar) is skipped with its reason."""

from __future__ import annotations

import json

import yaml

from helpers import run_cli


def _tensor(name, dtype="fp32", shape=(4, 5), rv=(-5, 5)):
    return {"name": name, "type": "tensor", "required": True, "dtype": dtype, "shape": list(shape),
            "range_values": list(rv), "backward": False, "align_32B": None}


def _scalar(name, rv, dtype="fp32"):
    return {"name": name, "type": "scalar", "required": True, "dtype": dtype, "shape": None, "range_values": rv,
            "backward": False, "align_32B": None}


def _atk(api, cases):
    return [{"id": i, "name": "x", "aclnn_name": api, "api_type": "x", "standard": {"acc": "single_bm"},
             "inputs": inputs} for i, inputs in enumerate(cases)]


def _converted(tmp_path, name, doc) -> tuple[object, list]:
    src = tmp_path / name
    src.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    r = run_cli("convert", "--skip-unsupported", src, "-o", tmp_path / "yaml")
    docs = [yaml.safe_load(p.read_text()) for p in sorted((tmp_path / "yaml").glob("*.yaml"))]
    return r, [c for d in docs for c in d["cases"]]


def test_an_atk_scalar_is_a_value_or_a_range_drawn_per_case(tmp_path):
    doc = _atk("aclnnSwishBackward", [
        [_tensor("gradOutput"), _tensor("self"), _scalar("betaOptional", -2, "int64")],
        [_tensor("gradOutput"), _tensor("self"), _scalar("betaOptional", [0.5, 1.5])],
        [_tensor("gradOutput"), _tensor("self"), _scalar("betaOptional", ["nan"])],
        [_tensor("gradOutput"), _tensor("self"), _scalar("betaOptional", {"name": "nd", "mean": [0, 1], "std": [1, 2]})],
    ])
    r, cases = _converted(tmp_path, "atk_swish.json", doc)
    assert r.exit_code == 0, r.output
    assert "1 x key 'betaOptional.range_values': betaOptional is an aclScalar" in r.output and "distribution" in r.output
    betas = [c["attributes"]["betaOptional"] for c in cases]
    assert len(betas) == 3 and betas[0] == -2 and 0.5 <= betas[1] <= 1.5 and betas[2] != betas[2]  # (NaN)
    (tmp_path / "again").mkdir()
    _, again = _converted(tmp_path / "again", "atk_swish.json", doc)
    assert again[1]["attributes"]["betaOptional"] == betas[1]  # (drawn from the file's name and the case's id)


def test_inputs_named_as_the_forward_names_them_import(tmp_path):
    doc = _atk("aclnnLeakyReluBackward", [[_tensor("gradOutput"), _tensor("x"), _scalar("a", 0.25, "fp32"),
                                           {"name": "selfIsResult", "type": "attr", "required": True, "dtype": "bool",
                                            "shape": None, "range_values": False}]])
    r, cases = _converted(tmp_path, "atk_leaky.json", doc)
    assert r.exit_code == 0 and len(cases) == 1, r.output
    assert cases[0]["attributes"] == {"negativeSlope": 0.25, "selfIsResult": False}
    out = tmp_path / "out"
    for args in (("gen", tmp_path / "yaml", "-o", out), ("emulate", out), ("verify", out)):
        assert run_cli(*args).exit_code == 0


def test_the_ttk_graph_op_leaky_relu_grad_is_leaky_relu_backward(tmp_path):
    csv = ("testcase_name,op_name,input_dtypes,input_ori_shapes,output_ori_shapes,input_ori_formats,output_ori_formats,"
           "attributes,input_shapes,output_dtypes,output_shapes,input_formats,output_formats,input_data_ranges,"
           "precision_tolerances,absolute_precision,soc_series\n"
           "leaky_relu_grad_fuzz_1,leaky_relu_grad,\"('float32', 'float32')\",\"((18, 24), (18, 24))\",\"((18, 24),)\","
           "\"('ND', 'ND')\",\"('ND',)\",{'negative_slope': 0.125},\"((18, 24), (18, 24))\",\"('float32',)\","
           "\"((18, 24),)\",\"('ND', 'ND')\",\"('ND',)\",\"((-2, 2),)\",,1e-08,\n")
    r, cases = _converted(tmp_path, "ttk_kernel_leaky_relu_grad_st.csv", csv)
    assert r.exit_code == 0 and len(cases) == 1, r.output
    assert cases[0]["attributes"]["negativeSlope"] == 0.125
    out = tmp_path / "out"
    for args in (("gen", tmp_path / "yaml", "-o", out), ("emulate", out), ("verify", out)):
        assert run_cli(*args).exit_code == 0
