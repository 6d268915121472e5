"""ops-nn's ATK files write an aclScalar* argument as type "scalar" and name some inputs as the forward does
(LeakyRelu's "x" and "a", Softplus's "x"); its TTK files name LeakyReluBackward's graph op leaky_relu_grad. Cases
written in those shapes (copied from activation/swish_grad, leaky_relu_grad and softplus_v2_grad) import, generate
and pass; a scalar given an "nd" distribution (softplus_v2_grad's) is one value drawn per case from a normal whose
mean and std are drawn as a tensor's are; a distribution of another name is skipped with its reason."""

from __future__ import annotations

import json
import math

import numpy as np

from helpers import read_yaml, run_cli


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
    docs = [read_yaml(p) for p in sorted((tmp_path / "yaml").glob("*.yaml"))]
    return r, [c for d in docs for c in d["cases"]]


def test_an_atk_scalar_is_a_value_or_a_range_drawn_per_case(tmp_path):
    doc = _atk("aclnnSwishBackward", [
        [_tensor("gradOutput"), _tensor("self"), _scalar("betaOptional", -2, "int64")],
        [_tensor("gradOutput"), _tensor("self"), _scalar("betaOptional", [0.5, 1.5])],
        [_tensor("gradOutput"), _tensor("self"), _scalar("betaOptional", ["nan"])],
        [_tensor("gradOutput"), _tensor("self"), _scalar("betaOptional", {"name": "nd", "mean": [0, 1], "std": [1, 2]})],
        [_tensor("gradOutput"), _tensor("self"), _scalar("betaOptional", {"name": "uniform"})],
    ])
    r, cases = _converted(tmp_path, "atk_swish.json", doc)
    assert r.exit_code == 0, r.output
    assert "1 x key 'betaOptional.range_values.name': betaOptional is an aclScalar" in r.output and "'uniform'" in r.output
    betas = [c["attributes"]["betaOptional"] for c in cases]
    assert len(betas) == 4 and betas[0] == -2 and 0.5 <= betas[1] <= 1.5 and betas[2] != betas[2]  # (NaN)
    assert isinstance(betas[3], float) and -10 < betas[3] < 11  # (mean in [0, 1], std in [1, 2]: within 5 std)
    (tmp_path / "again").mkdir()
    _, again = _converted(tmp_path / "again", "atk_swish.json", doc)
    assert [again[i]["attributes"]["betaOptional"] for i in (1, 3)] == [betas[1], betas[3]]  # (from the file's name
    #                                                                                             and the case's id)


def test_an_nd_scalar_is_a_normal_draw_per_case(tmp_path):
    """400 cases of nd(mean [10, 10], std [2, 2]): the drawn values have the normal's mean and spread, and differ."""
    nd = {"name": "nd", "mean": [10, 10], "std": [2, 2]}
    doc = _atk("aclnnSwishBackward", [[_tensor("gradOutput"), _tensor("self"), _scalar("betaOptional", nd)]] * 400)
    r, cases = _converted(tmp_path, "atk_nd.json", doc)
    assert r.exit_code == 0, r.output
    values = [c["attributes"]["betaOptional"] for c in cases]
    mean = sum(values) / len(values)
    spread = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    assert abs(mean - 10) < 0.4 and 1.7 < spread < 2.3 and len(set(values)) > 390


def test_an_infinite_or_nan_beta_gives_the_ieee_limits(tmp_path):
    """ops-nn's SoftplusBackward suite gives beta = +-inf and threshold = NaN: beta * self is then +-inf or NaN,
    the float64 bound is not finite and the exact pass takes the IEEE limits (it raised OverflowError before)."""
    cases = tmp_path / "c.yaml"
    cases.write_text("op: aclnnSoftplusBackward\ncases:\n"
                     "  - {name: a, dtype: float32, shape: [64], seed: 1, attributes: {beta: -.inf, threshold: .nan}}\n"
                     "  - {name: b, dtype: float32, shape: [64], seed: 2, attributes: {beta: .inf, threshold: 3.0}}\n")
    out = tmp_path / "out"
    assert run_cli("gen", cases, "-o", out).exit_code == 0
    for name, beta, thr in (("a", -math.inf, math.nan), ("b", math.inf, 3.0)):
        d = out / f"softplus_backward-{name}"
        dy, x, g = (np.fromfile(d / f, np.float32).astype(np.float64) for f in ("gradOutput.bin", "self.bin", "gradInput.golden.bin"))
        z = beta * x
        with np.errstate(invalid="ignore"):
            want = np.where(z > thr, dy, dy * np.where(np.isnan(z), np.nan, (z > 0).astype(float)))
        assert np.array_equal(g, want, equal_nan=True) and np.array_equal(np.signbit(g), np.signbit(want))
    for args in (("emulate", out), ("verify", out)):
        assert run_cli(*args).exit_code == 0


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


def test_the_ttk_graph_op_swish_grad_is_swish_backward(tmp_path):
    """ops-nn's swish_grad TTK file, unmodified: SwishGrad(grad, x, y; scale) is aclnnSwishBackward(gradOutput, self,
    betaOptional = scale); y = swish(x) is an input the API does not take (it computes it). Its 5 cases pass."""
    from pathlib import Path

    src = Path(__file__).parent / "ops_nn_suites" / "ttk_kernel_swish_grad_st.csv"
    r, cases = _converted(tmp_path, "ttk_kernel_swish_grad_st.csv", src.read_text())
    assert r.exit_code == 0 and len(cases) == 5, r.output
    by_name = {c["name"]: c for c in cases}
    assert by_name["swish_grad_fuzz_21"]["attributes"] == {"betaOptional": -842.4471245256836}
    assert all(set(c.get("inputs", {})) <= {"gradOutput", "self"} for c in cases)
    out = tmp_path / "out"
    for args in (("gen", src, "-o", out), ("emulate", out), ("verify", out)):
        assert run_cli(*args).exit_code == 0
