"""Integer outputs end to end, at the layers every elementwise op shares (not one op's special case): the golden is
the exact integer (golden/integers.py), the emulator hands integer inputs to the kernel as they are
(device/emulate.py), verify judges by standard `exact` (any difference FAILs, past float32's 2^24 and float64's 2^53
too: judge/compare.py's integer_errors), a case's own standard or tolerance is refused for an integer output in one
line, the run's --standard judges the float outputs only, and the report speaks of integers (no NaN row, ulp 1).
aclnnThresholdBackward is the op with integer outputs here; tests/test_op_threshold_backward.py tests the op itself.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from aclnn_cli.errors import UserError
from aclnn_cli.golden.integers import integer_golden
from aclnn_cli.judge.compare import element_errors
from aclnn_cli.ops.base import Reference
from aclnn_cli.standards.rules import INTEGER_STANDARD, find_standard, integer_refusal
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.values.fill import parse_fill

from helpers import one_line_error, run_cli, write_yaml

CASES = """
op: aclnnThresholdBackward
defaults: {seed: 4, product: "950"}
cases:
  - name: big
    shape: [6]
    dtype: int64
    inputs:
      self: {values: [1, 1, 1, -1, 9223372036854775807, 2]}
      gradOutput: {values: [9007199254740993, -9007199254740993, 9223372036854775807, 5, -9223372036854775808, 7]}
  - name: i32
    shape: [4, 5]
    dtype: int32
    inputs: {self: {randint: [-3, 3]}, gradOutput: {randint: [16777217, 16777300]}}
    attributes: {threshold: 0.0}
  - name: floats
    shape: [4, 5]
    dtype: float32
"""


@pytest.fixture(scope="module")
def produced(tmp_path_factory):
    root = tmp_path_factory.mktemp("ints")
    out = root / "out"
    assert run_cli("gen", write_yaml(root, CASES), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    return out


def _dump(out, case, change):
    """Change the dump of `case`'s output (change: the logical values -> new ones)."""
    path = out / case / "out.dump.bin"
    dtype = json.loads((out / case / "case.json").read_text())["tensors"][-1]["dtype"]
    values = np.fromfile(path, D.lookup(dtype).np_dtype)
    change(values).tofile(path)


def _statuses(out, tmp_path, *args):
    r = run_cli("verify", out, "--json", tmp_path / "v.json", *args)
    cases = json.loads((tmp_path / "v.json").read_text())["cases"]
    return r.exit_code, {c["case_id"].split("-", 1)[1]: c for c in cases}


def test_integer_goldens_are_exact_past_2_to_the_53(produced):
    """The golden of an int64 output holds gradOutput itself where float64 would round it (2^53 + 1), and the
    emulated ReluGrad (int64, threshold 0) gives the same: every case passes, judged by `exact`."""
    golden = np.fromfile(produced / "threshold_backward-big" / "out.golden.bin", np.int64)
    assert golden.tolist() == [9007199254740993, -9007199254740993, 9223372036854775807, 0, -9223372036854775808, 7]
    code, cases = _statuses(produced, produced.parent)
    assert code == 0 and {c["status"] for c in cases.values()} == {"PASS"}
    assert {n: c["standard"] for n, c in cases.items()} == {"big": "exact", "i32": "exact",
                                                          "floats": "mere-mare"}


@pytest.mark.parametrize("case", ["big", "i32"])
def test_a_difference_of_one_fails_where_floats_cannot_see_it(produced, case, tmp_path):
    """One element off by one: int64 past 2^53 (float64 sees no difference) and int32 past 2^24 (float32 sees
    none), each FAILs with one row naming the element; no NaN/Inf row (an integer has neither), ulp error 1."""
    import shutil

    out = shutil.copytree(produced, tmp_path / "out")
    _dump(out, f"threshold_backward-{case}", lambda v: np.concatenate([v[:1] + 1, v[1:]]))
    code, cases = _statuses(out, tmp_path)
    c = cases[case]
    assert code == 1 and c["status"] == "FAIL"
    assert [r["metric"] for r in c["rows"]] == ["elements differing from the golden"]
    assert c["rows"][0]["value"] == 1 and c["metrics"]["max_ulp_error"] == 1.0 and c["metrics"]["max_abs_error"] == 1


def test_the_runs_standard_judges_float_outputs_only(produced, tmp_path):
    """--standard allclose and --rtol judge the float case; the integer cases stay `exact` (no tolerance applies)."""
    code, cases = _statuses(produced, tmp_path, "--standard", "allclose", "--rtol", "0.01")
    assert code == 0 and cases["floats"]["standard"] == "allclose"
    assert cases["big"]["standard"] == cases["i32"]["standard"] == "exact"
    assert cases["big"]["params"] == {}


@pytest.mark.parametrize("extra, needle", [("standard: ulp", "standard 'ulp' has no integer rule"),
                                           ("tolerance: {rtol: 0.001}", "it takes no tolerance")])
def test_a_case_files_standard_or_tolerance_for_an_integer_output_is_refused(tmp_path, extra, needle):
    text = f"""
op: aclnnThresholdBackward
cases:
  - name: c
    shape: [4]
    dtype: [float32, int8]
    {extra}
"""
    r = run_cli("gen", write_yaml(tmp_path, text), "-o", tmp_path / "out")
    one_line_error(r, "a int8 output is judged exactly (standard exact)", needle)


def test_integer_refusal_and_the_exact_standard():
    assert integer_refusal(D.FLOAT32, "ulp", (("ulps", 2.0),)) is None
    assert integer_refusal(D.INT32, None, ()) is None and integer_refusal(D.INT32, INTEGER_STANDARD, ()) is None
    with pytest.raises(KeyError, match="has no tolerance 'rtol'"):
        find_standard(INTEGER_STANDARD).params(D.INT8, {"rtol": 0.1})


def test_integer_errors_are_exact_over_int64s_whole_range():
    """|a - g| from the integers (uint64 wrap-around): the extremes' difference is 2^64 - 1, not 0 or an overflow."""
    a = np.array([np.iinfo(np.int64).max, 5, -7], np.int64)
    g = np.array([np.iinfo(np.int64).min, 5, -6], np.int64)
    e = element_errors(a, g, 1.0, D.INT64)
    assert e.abs.tolist() == [2.0**64, 0.0, 1.0] and e.ulp.tolist() == e.abs.tolist() and not e.special.size
    u = element_errors(np.array([0, 255], np.uint8), np.array([255, 255], np.uint8), 1.0, D.UINT8)
    assert u.abs.tolist() == [255.0, 0.0]


def test_a_reference_that_is_not_an_exact_integer_is_refused():
    """An integer output's reference must give integers of the dtype, certain to the unit: else one line."""
    def op(value, bound):
        return SimpleNamespace(name="aclnnFake", output=SimpleNamespace(name="out"),
                               golden_f64=lambda t: Reference(np.array(value), np.array(bound), np.abs(value)))
    x = {"self": np.zeros(2, np.int8)}
    assert integer_golden(op([3.0, -4.0], [0.0, 0.25]), x, D.INT8, {}).tolist() == [3, -4]
    for value, bound, why in (([2.5, 1.0], [0.0, 0.0], "2.5"), ([1.0, 1.0], [0.0, 0.5], "bound 0.5"),
                              ([128.0, 0.0], [0.0, 0.0], "128.0")):
        with pytest.raises(UserError, match=f"aclnnFake's out is int8, but .*{why}.*not an exact integer"):
            integer_golden(op(value, bound), x, D.INT8, {})


def test_values_keep_int64s_past_2_to_the_53_and_floats_as_before():
    fill = parse_fill({"values": [9007199254740993, 2, 0.5, -9223372036854775808]})
    assert fill.params == (9007199254740993, 2.0, 0.5, -9.223372036854775808e18)
    assert [type(v) for v in fill.params] == [int, float, float, float]  # (a float case's fingerprint unchanged)
    ints = parse_fill({"values": [9007199254740993, -9223372036854775808]})
    assert ints.generate(D.INT64, 0, 0, 0, 3).tolist() == [9007199254740993, -9223372036854775808, 9007199254740993]


def test_an_integer_default_fill_is_picked_by_the_cases_dtype(tmp_path):
    """TensorSpec.integer_fill: ThresholdBackward's self draws uniform [-2, 2] as a float, randint [0, 3] as an
    integer, in one case entry listing both."""
    text = "op: aclnnThresholdBackward\ncases:\n  - name: c\n    shape: [64]\n    dtype: [float32, uint8]\n"
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    fills = {}
    for case in out.glob("*/case.json"):
        m = json.loads(case.read_text())
        fills[m["tensors"][0]["dtype"]] = {t["name"]: t["fill"] for t in m["tensors"] if t["role"] == "input"}
    assert fills["float32"]["self"] == {"uniform": [-2.0, 2.0]} and fills["uint8"]["self"] == {"randint": [0, 3]}
    assert fills["uint8"]["gradOutput"] == {"randint": [1, 100]}


def test_an_infinity_on_an_integer_tensor_imports_as_the_dtypes_extreme():
    from aclnn_cli.cases.importers.ranges import range_fill

    assert range_fill([float("inf")], "int32") == {"constant": 2147483647}
    assert range_fill([float("-inf")], "int8") == {"constant": -128}
    assert range_fill([float("-inf"), 5], "uint8") == {"randint": [0, 5]}
    assert range_fill([float("nan")], "int8") == {"constant": "nan"}  # (no integer: validation refuses it)
