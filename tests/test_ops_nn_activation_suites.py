"""ops-nn's own suites of the activation backward ops bundled for issue 30, unmodified (tests/ops_nn_suites/), through
convert (the importers), gen, the emulated 950 kernel and verify.

Each file: how many of its cases import, the rest skipped with the importer's reason (at most a quarter of a file),
the TTK graph ops named by their graph names (EluGrad, EluGradV2, HardtanhGrad, ReluGrad, GeluGrad,
MishGrad, GeluGradV2, SigmoidGrad), and every imported case PASSes
the op's kernel (MISTRUSTED, a pass with a warning, where every input of a case is one constant).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from helpers import read_yaml, run_cli, verify_records

SUITES = Path(__file__).parent / "ops_nn_suites"

# file -> (the op, cases in the file, cases imported, what the skipped ones are); every imported case is run, but in
# the files of LARGE only those of up to QUICK_ELEMENTS elements (how many: the second number)
QUICK_ELEMENTS = 100_000
LARGE = {"atk_aclnnSoftshrinkBackward.json": (201, 123), "atk_aclnnThresholdBackward.json": (297, 162),
         "atk_aclnnSeluBackward.json": (201, 161),
         "ttk_kernel_sigmoid_grad_st.csv": (5, 1)}  # (its four others: 2 M to 6.2 M elements)  # (its largest cases: 1.3 G elements, 67.6 GiB in all)
FILES = {
    "atk_aclnnEluBackward.json": ("aclnnEluBackward", 240, 240, ""),
    "ttk_kernel_elu_grad_v2_st.csv": ("aclnnEluBackward", 5, 5, ""),
    "ttk_kernel_elu_grad_st.csv": ("aclnnEluBackward", 5, 5, ""),
    "ttk_kernel_hardtanh_grad_st.csv": ("aclnnHardtanhBackward", 5, 5, ""),
    "atk_aclnnSoftshrinkBackward.json": ("aclnnSoftshrinkBackward", 201, 201, ""),  # (unnamed inputs: by position)
    # 3 give an integer tensor a NaN, which no integer is (an infinity is the dtype's extreme: decision 94)
    "atk_aclnnThresholdBackward.json": ("aclnnThresholdBackward", 300, 297, "'constant' value nan is not an integer"),
    "ttk_kernel_relu_grad_st.csv": ("aclnnThresholdBackward", 5, 5, ""),  # (graph op ReluGrad: threshold 0)
    "atk_aclnnGeluBackward.json": ("aclnnGeluBackward", 201, 201, ""),
    "atk_aclnnSeluBackward.json": ("aclnnSeluBackward", 201, 201, ""),  # (up to 13 M elements: 161 run)
    # (graph op MishGrad: its generated API aclnnMishGrad, which takes the optional tanhx 3 of 5 give)
    "ttk_kernel_mish_grad_st.csv": ("aclnnMishGrad", 5, 5, ""),
    "ttk_kernel_gelu_grad_v2_st.csv": ("aclnnGeluBackwardV2", 3, 3, ""),  # (graph op GeluGradV2)
    "ttk_kernel_sigmoid_grad_st.csv": ("aclnnSigmoidBackward", 5, 5, ""),  # (graph op SigmoidGrad(y, dy))
}
# cases whose every input is one constant (ATK's range_values: 9, inf, nan...): verify's MISTRUSTED, a warning
MISTRUSTED = {"atk_aclnnGeluBackward.json": 3, "ttk_kernel_mish_grad_st.csv": 1, "ttk_kernel_gelu_grad_v2_st.csv": 1}


def op_key(op: str) -> str:
    from aclnn_cli.ops import find_op

    return find_op(op).key


def _converted(path: Path, tmp_path: Path) -> tuple[str, list[dict]]:
    r = run_cli("convert", "--skip-unsupported", path, "-o", tmp_path / "yaml")
    assert r.exit_code == 0, r.output
    docs = [read_yaml(p) for p in sorted((tmp_path / "yaml").glob("*.yaml"))]
    return r.output, [dict(c, op=d["op"]) for d in docs for c in d["cases"]]


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_suite_imports_and_every_case_passes_the_kernel(name, tmp_path):
    op, total, imported, why = FILES[name]
    output, cases = _converted(SUITES / name, tmp_path)
    assert len(cases) == imported and {c["op"] for c in cases} == {op}, output
    assert total - imported <= total // 4
    if imported < total:
        assert f"skipped {total - imported}" in output and why in output, output
    picks: list = []
    if name in LARGE:
        small = [c["name"] for c in cases if math.prod(c["shape"]) <= QUICK_ELEMENTS]
        assert len(small) == LARGE[name][1]
        picks = [a for n in small for a in ("--case", f"{op_key(op)}-{n}")]
        imported = len(small)
    out = tmp_path / "out"
    for args in (("gen", tmp_path / "yaml", "-o", out, *picks), ("emulate", out)):
        r = run_cli(*args)
        assert r.exit_code == 0, r.output[-3000:]
    code, records = verify_records(out)
    cases_run = list(records.values())
    assert code == 0 and len(cases_run) == imported, [(k, c["reason"]) for k, c in records.items() if c["status"] != "PASS"]
    statuses = [c["status"] for c in cases_run]
    assert set(statuses) <= {"PASS", "MISTRUSTED"} and statuses.count("MISTRUSTED") == MISTRUSTED.get(name, 0)


def test_elu_grad_is_the_result_form_at_unit_constants(tmp_path):
    """The graph op EluGrad (no attributes) imports as aclnnEluBackward(isResult, alpha = scale = inputScale = 1);
    EluGradV2's alpha, scale, input_scale, is_result map by name."""
    _, cases = _converted(SUITES / "ttk_kernel_elu_grad_st.csv", tmp_path / "a")
    assert {json.dumps(c["attributes"], sort_keys=True) for c in cases} == {
        json.dumps({"alpha": 1.0, "scale": 1.0, "inputScale": 1.0, "isResult": True}, sort_keys=True)}
    _, cases = _converted(SUITES / "ttk_kernel_elu_grad_v2_st.csv", tmp_path / "b")
    by_name = {c["name"]: c["attributes"] for c in cases}
    assert by_name["elu_grad_v2_fuzz_73"] == {"alpha": 986.4371148691198, "scale": 1.0, "inputScale": 1.0,
                                              "isResult": True}


def test_hardtanh_grad_takes_result_then_grad(tmp_path):
    """HardtanhGrad's inputs are (result, grad): self first; min_val, max_val are min, max (min > max kept)."""
    _, cases = _converted(SUITES / "ttk_kernel_hardtanh_grad_st.csv", tmp_path)
    by_name = {c["name"]: c for c in cases}
    assert by_name["hardtanh_grad_fuzz_71"]["attributes"] == {"min": 511.063293386145, "max": -523.0673494537621}
    assert by_name["hardtanh_grad_bf16_029"]["shape"] == [16, 192, 64, 64]


def test_relu_grad_is_threshold_zero(tmp_path):
    """The graph op ReluGrad (no attributes) is aclnnThresholdBackward at threshold 0, which the op_api sends to it."""
    _, cases = _converted(SUITES / "ttk_kernel_relu_grad_st.csv", tmp_path)
    assert len(cases) == 5 and all(c["attributes"] == {"threshold": 0.0} for c in cases)


def test_gelu_grad_drops_y_and_is_imported_whole(tmp_path):
    """activation/gelu_grad's TTK file: one case of GeluGrad(dy, x, y), 120 x 197 x 16384 bfloat16 (387 M elements,
    774 MB an input: imported, not run here). y, the forward's output, is not an input of aclnnGeluBackward (the
    950 kernel does not read it)."""
    _, cases = _converted(SUITES / "ttk_kernel_gelu_grad_st.csv", tmp_path)
    assert [(c["op"], c["name"], c["shape"], c["dtype"], sorted(c["inputs"])) for c in cases] == [
        ("aclnnGeluBackward", "GeluGrad_ND_bf16_ID1002_000001", [120, 197, 16384], "bfloat16", ["gradOutput", "self"])]
