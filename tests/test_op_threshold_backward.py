"""aclnnThresholdBackward's integer dtypes (decision 94): the contract per product, the goldens against an oracle
of its own (Python integers and Fractions, not the op's code), the emulated kernels, and which defects an integer
result shows. (Its float behaviour: tests/test_op_activation_backward.py; the ATK suite:
tests/test_ops_nn_activation_suites.py; the shared integer layers: tests/test_integer_outputs.py.)
"""

from __future__ import annotations

import json
import shutil
from exactq import Fraction
from pathlib import Path

import numpy as np
import pytest

from aclnn_cli.ops import find_op
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, SUCCESS

from helpers import logical, manifest, read_yaml, run_cli, tensor, write_yaml
from rowblocks import bundled_emulated

INTEGERS = ("int8", "uint8", "int32", "int64")
OP = find_op("aclnnThresholdBackward")


@pytest.fixture(scope="module")
def bundled(tmp_path_factory, bundled_produced):
    """The op's bundled case file, generated and emulated (every case): the session's (rowblocks.bundled_emulated)."""
    return bundled_emulated(tmp_path_factory, bundled_produced, "threshold_backward")


def _integer_cases(out: Path) -> list[Path]:
    return sorted(d for d in out.iterdir() if (d / "case.json").is_file() and manifest(d)["expect_status"] == 0
                  and tensor(manifest(d), "out")["dtype"] in INTEGERS)


def _oracle(dy: int, x: int, threshold) -> int:
    """The doc's formula in exact arithmetic: gradOutput where self > threshold (the float32 the op receives), else 0;
    a NaN threshold compares false (x <= NaN), so gradOutput passes."""
    t = float(np.float32(threshold))
    if t != t:
        return dy
    if t in (float("inf"), float("-inf")):
        return dy if t < 0 else 0
    return dy if Fraction(x) > Fraction(t) else 0


def test_every_integer_dtype_and_edge_is_bundled(bundled):
    cases = _integer_cases(bundled)
    assert {tensor(manifest(d), "out")["dtype"] for d in cases} == set(INTEGERS)
    values = {dt: set() for dt in INTEGERS}
    for d in cases:
        m = manifest(d)
        values[tensor(m, "out")["dtype"]] |= set(logical(d, tensor(m, "self")).ravel().tolist())
    assert {-128, 127} <= values["int8"] and {0, 255} <= values["uint8"]
    assert {-2**31, 2**24} <= values["int32"] and {-2**63, 2**63 - 1, 2**53 + 1} <= values["int64"]


def test_integer_goldens_are_the_oracles(bundled):
    """Every element of every integer case: the golden equals the oracle's integer, self at the threshold giving 0."""
    at_threshold = 0
    for d in _integer_cases(bundled):
        m = manifest(d)
        t = next(a["value"] for a in m["attributes"] if a["name"] == "threshold")
        t = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}.get(t, t)
        out = tensor(m, "out")
        dy, x = (np.broadcast_to(logical(d, tensor(m, n)), out["shape"]) for n in ("gradOutput", "self"))
        golden = logical(d, out, "golden")
        want = [_oracle(int(a), int(b), t) for a, b in zip(dy.ravel().tolist(), x.ravel().tolist())]
        assert golden.ravel().tolist() == want, d.name
        at_threshold += int(np.count_nonzero(x.astype(np.float64) == float(np.float32(t))))
    assert at_threshold >= 8


def test_the_emulated_kernels_pass_every_case(bundled, tmp_path):
    r = run_cli("verify", bundled, "--json", tmp_path / "v.json")
    cases = json.loads((tmp_path / "v.json").read_text())["cases"]
    assert r.exit_code == 0 and {c["status"] for c in cases} == {"PASS"}
    assert {c["standard"] for c in cases if c["dtype"] in INTEGERS and c["kind"] == "precision"} == {"exact"}


# defect -> integer cases it fails (None: it cannot change an integer result, and passes them all)
DEFECTS = {
    "threshold-inclusive": "int8_edges-threshold2.0",  # (self = threshold passes gradOutput)
    "threshold-inverted": "uint8_edges-threshold-17.0",
    "threshold-ignored": "int8_edges-threshold-2.0",  # (x > 0 where x > -2 is asked)
    "threshold-nan-blocked": None,  # (an integer self is never NaN)
    "threshold-cast-to-dtype": "uint8_edges-threshold-17.0",  # (-17 cast to uint8 is 239)
    "threshold-int-through-half": "int32_edges-threshold2.0",  # (4097 and 100000 through half)
    "threshold-compare-wide": None,  # (legitimate)
}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_each_defect_on_integer_results(bundled, tmp_path, defect):
    out = Path(shutil.copytree(bundled, tmp_path / "out"))
    assert run_cli("emulate", out, "--defect", defect).exit_code == 0
    run_cli("verify", out, "--json", tmp_path / "v.json")
    cases = json.loads((tmp_path / "v.json").read_text())["cases"]
    failed = {c["case_id"].split("-", 1)[1] for c in cases if c["dtype"] in INTEGERS and c["status"] != "PASS"}
    if DEFECTS[defect] is None:
        assert not failed
    else:
        assert DEFECTS[defect] in failed, sorted(failed)


def test_the_threshold_cast_fails_only_where_the_cast_changes_the_compare(bundled, tmp_path):
    """An integral threshold inside the dtype casts to itself: the defect shows at -2.5, 200 (int8) and -17 (uint8)."""
    out = Path(shutil.copytree(bundled, tmp_path / "out"))
    assert run_cli("emulate", out, "--defect", "threshold-cast-to-dtype").exit_code == 0
    run_cli("verify", out, "--json", tmp_path / "v.json")
    cases = json.loads((tmp_path / "v.json").read_text())["cases"]
    failed = {c["case_id"].split("-", 1)[1] for c in cases if c["status"] != "PASS"}
    assert failed == {"int8_edges-threshold-2.5", "int8_edges-threshold200.0", "uint8_edges-threshold-17.0"}


def _desc(dtype: str) -> dict:
    d = D.lookup(dtype)
    return {n: TensorDesc(d, (3, 4)) for n in ("gradOutput", "self", "out")}


@pytest.mark.parametrize("product, dtype, threshold, status", [
    ("950", "int64", 0.0, SUCCESS), ("950", "int64", 1e-8, SUCCESS), ("950", "int64", 0.5, INVALID),
    ("A2", "int64", 0.0, INVALID), ("A3", "int64", 0.0, INVALID), ("910", "int64", 0.0, INVALID),
    ("950", "int32", 0.5, SUCCESS), ("A2", "uint8", 0.5, SUCCESS), ("910", "int8", 0.5, SUCCESS),
    ("310P", "int32", 0.0, SUCCESS), ("310P", "bfloat16", 0.0, INVALID), ("910", "bfloat16", 0.5, INVALID),
    ("A2", "int16", 0.0, INVALID),
])
def test_the_contract_per_product(product, dtype, threshold, status):
    """The op_api's lists: INT32, INT8, UINT8 on every product; INT64 on the 950 at |threshold| <= FLT_EPSILON only
    (ReluGrad's list); BF16 on the 950, A3 and A2."""
    outcome = check(OP, product, _desc(dtype), {"threshold": threshold})
    assert outcome.status == status, outcome.rule
    if status == INVALID and dtype == "int64" and product == "950":
        assert "only at |threshold| <= FLT_EPSILON" in outcome.rule


def test_mixed_integer_dtypes_are_refused():
    tensors = {**_desc("int32"), "self": TensorDesc(D.INT8, (3, 4))}
    assert check(OP, "950", tensors, {"threshold": 0.5}).status == INVALID


def test_int32_past_2_to_the_24_is_the_kernels_float32_not_the_docs_formula(tmp_path):
    """ThresholdGradV2D casts int32 to float32 (CAST_RINT) and back: past 2^24 the device's gradOutput comes back
    rounded (2^24 + 1 as 2^24), which the doc's formula does not say. The golden is the formula, so verify FAILs the
    emulated device there, and names the element; ReluGrad (threshold 0) computes in int32 and passes."""
    text = """
op: aclnnThresholdBackward
cases:
  - name: wide
    shape: [3]
    dtype: int32
    inputs: {self: {values: [5, 5, -5]}, gradOutput: {values: [16777217, 16777216, 16777217]}}
    attributes: {threshold: [0.0, 0.5]}
"""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    r = run_cli("verify", out, "--json", tmp_path / "v.json")
    cases = {c["case_id"]: c for c in json.loads((tmp_path / "v.json").read_text())["cases"]}
    assert r.exit_code == 1 and cases["threshold_backward-wide-threshold0.0"]["status"] == "PASS"
    select = cases["threshold_backward-wide-threshold0.5"]
    assert select["status"] == "FAIL" and select["rows"][0]["value"] == 1 and "first at element 0" in select["reason"]
    golden = np.fromfile(out / "threshold_backward-wide-threshold0.5" / "out.golden.bin", np.int32)
    assert golden.tolist() == [16777217, 16777216, 0]


def test_the_atk_files_infinite_integer_constants_import_as_the_dtypes_extremes(tmp_path):
    """Case 190 of ops-nn's ATK file gives an int32 gradOutput the range ['inf'] and self ['-inf']: held at int32's
    range (as its four other infinite integer ranges). Its three NaN integer tensors stay skipped, with the reason."""
    suite = Path(__file__).parent / "ops_nn_suites" / "atk_aclnnThresholdBackward.json"
    r = run_cli("convert", "--skip-unsupported", suite, "-o", tmp_path / "yaml")
    assert r.exit_code == 0 and "skipped 3" in r.output and "'constant' value nan is not an integer" in r.output

    doc = read_yaml(next((tmp_path / "yaml").glob("*.yaml")))
    by_name = {c["name"]: c for c in doc["cases"]}
    assert by_name["atk_aclnnThresholdBackward-190"]["inputs"] == {
        "gradOutput": {"constant": 2147483647}, "self": {"constant": -2147483648}}
