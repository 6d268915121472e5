"""Foreign case files (ATK JSON, TTK CSV, msOpST JSON): detection by content, field mapping to exact
generators and values, convert -> YAML giving byte-identical gen output, determinism, unsupported
cases (one line, exit 2, or skipped and counted) and malformed files (one line, exit 2)."""

from __future__ import annotations

import hashlib
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from aclnn_cli.cases import importers
from aclnn_cli.cases.loader import collect_files, load_cases, load_file, parse_yaml
from aclnn_cli.cases.importers.cli import to_yaml
from aclnn_cli.cases.importers.ttkcells import literal

from helpers import manifest, one_line_error, read_storage, run_cli, tensor

DATA = Path(__file__).parent / "data"
FILES = sorted(DATA.iterdir())
BF16_MAX = 3.3895313892515355e38
F32_MAX = float(np.finfo(np.float32).max)


def docs(name: str) -> dict[str, dict]:
    """Imported cases of one data file, by case name."""
    path = DATA / name
    result = importers.import_file(path, path.read_bytes())
    return {c["name"]: {**c, "op": d["op"]} for d in result.documents for c in d["cases"]}


@pytest.fixture(scope="module")
def direct(tmp_path_factory) -> Path:
    """gen of every data file, imported directly."""
    out = tmp_path_factory.mktemp("direct") / "out"
    result = run_cli("gen", *FILES, "-o", out, "--jobs", "1")
    assert result.exit_code == 0, result.output
    return out


def values(out: Path, case_id: str, name: str) -> np.ndarray:
    case = out / case_id
    return read_storage(case, tensor(manifest(case), name)).astype(np.float64)


# ---- detection by content -------------------------------------------------------------------


def test_formats_are_recognised_by_content_not_name(tmp_path):
    for src, fmt in (("atk_small.json", "ATK JSON"), ("ttk_kernel_small.csv", "TTK CSV"),
                     ("ttk_aclnn_small.csv", "TTK CSV"), ("msopst_small.json", "msOpST JSON")):
        renamed = tmp_path / (src.split(".")[0] + ".txt")
        shutil.copy(DATA / src, renamed)
        assert importers.recognises(renamed)
        assert importers.import_file(renamed, renamed.read_bytes()).format == fmt
        # the stem, not the extension, names and seeds the cases: same cases, same seeds
        assert [(c.case_id, c.seed) for c in load_file(renamed)] == [(c.case_id, c.seed) for c in load_file(DATA / src)]
    (tmp_path / "notes.txt").write_text("just some text\n")
    (tmp_path / "plain.json").write_text('[{"a": 1}]')
    assert not importers.recognises(tmp_path / "notes.txt")
    assert importers.to_documents(tmp_path / "plain.json", b'[{"a": 1}]') is None
    assert importers.to_documents(Path("x.yaml"), b"op: aclnnSiluBackward\ncases: []\n") is None
    found = {p.name for p in collect_files([tmp_path])}
    assert found == {"atk_small.txt", "ttk_kernel_small.txt", "ttk_aclnn_small.txt", "msopst_small.txt"}


# ---- mapping, field by field ------------------------------------------------------------------


def test_atk_fields_map_to_exact_generators():
    got = docs("atk_small.json")
    assert got["atk_small-0"] == {"name": "atk_small-0", "op": "aclnnSiluBackward", "dtype": "float32", "shape": [1],
                                  "seed": got["atk_small-0"]["seed"],
                                  "inputs": {"gradOutput": {"uniform": [-10, 10]}, "self": {"uniform": [-10, 10]}}}
    assert got["atk_small-1"]["inputs"]["gradOutput"] == {"constant": "nan"}
    assert got["atk_small-2"]["dtype"] == "bfloat16" and got["atk_small-2"]["shape"] == [7, 8, 1, 1, 21, 1, 1, 1]
    assert got["atk_small-2"]["inputs"]["self"] == {"constant": "-inf"}
    assert got["atk_small-3"]["shape"] == [131073] and got["atk_small-3"]["inputs"]["gradOutput"] == {"constant": "inf"}
    # nd: mean drawn from [-100, 100], std from [1, 25], per case and input, from the hash (pinned)
    assert got["atk_small-4"]["op"] == "aclnnFastGeluBackward" and got["atk_small-4"]["shape"] == []
    assert got["atk_small-4"]["inputs"] == {"gradOutput": {"normal": [66.5935, 10.1761]},
                                            "self": {"normal": [2.46548, 5.49645]}}
    assert got["atk_small-6"]["inputs"]["buffer"] == {"values": [1, 2, 3, 4, 5, 6, 7, 8]}
    assert got["atk_small-7"]["inputs"] == {"gradOutput": {"uniform": [1, 2]}, "self": {"constant": "-inf"},
                                            "buffer": {"constant": "nan"}}


def test_ttk_kernel_fields_map_to_exact_generators():
    got = docs("ttk_kernel_small.csv")
    assert got["silu_grad_shared_range"]["inputs"] == {"gradOutput": {"uniform": [-1, 1]}, "self": {"uniform": [-1, 1]}}
    special = [-1, 1, "nan", -0.0, "inf"]
    fuzz = got["fast_gelu_grad_fuzz_28"]
    assert fuzz["op"] == "aclnnFastGeluBackward" and fuzz["dtype"] == "float16" and fuzz["shape"] == [5, 6]
    assert fuzz["inputs"] == {"gradOutput": {"values": special},
                              "self": {"values": [v for v in special for _ in range(5)]}}
    assert got["FastGeluGrad_bfloat16_NDC1HWC0_boundary_000351"]["inputs"] == {
        "gradOutput": {"constant": BF16_MAX}, "self": {"uniform": [-3.0517578125e-05, 3.0517578125e-05]}}
    assert got["FastGeluGrad_bfloat16_FRACTAL_NZ_fuzz_000186"]["inputs"]["gradOutput"] == {"uniform": [0, 0.001]}
    assert got["log_sigmoid_grad_fuzz_61"]["inputs"] == {"gradOutput": {"constant": "nan"}, "self": {"constant": "nan"},
                                                         "buffer": {"constant": 0}}  # synthesized: the op's default
    assert got["log_sigmoid_grad_fuzz_142"]["inputs"]["self"] == {"constant": 65500.0}
    # 3.4028235e+38 is float32's max printed with 8 digits: it is the max
    assert got["silu_grad_baihe_98"]["dtype"] == "float32"
    assert got["silu_grad_baihe_98"]["inputs"]["self"] == {"uniform": [-F32_MAX, F32_MAX]}
    assert got["silu_grad_unwrapped"]["inputs"]["self"] == {"uniform": [-2, 2]}
    hs = got["hard_sigmoid_grad_attrs"]
    assert hs["op"] == "aclnnHardsigmoidBackward"
    assert hs["inputs"] == {"gradOutput": {"uniform": [-5, 5]}, "self": {"uniform": [-4, 4]}}


def test_ttk_aclnn_mode_maps_layouts_and_products():
    got = docs("ttk_aclnn_small.csv")
    assert got["aclnn_silu_fp16"]["product"] == "950"
    assert got["aclnn_silu_fp16"]["inputs"] == {"gradOutput": {"uniform": [-2, 2]}, "self": {"uniform": [-8, 8]}}
    strided = got["aclnn_silu_strided"]
    assert "product" not in strided  # empty soc_series: our default product
    assert strided["tensors"] == {"gradOutput": {"layout": {"strides": [6, 1], "offset": 2, "storage_shape": [20]}}}
    logsig = got["aclnn_logsig_bf16"]
    assert logsig["product"] == "A2" and logsig["inputs"]["buffer"] == {"constant": 0}  # None range: the op's default


def test_msopst_lists_expand_pairwise_and_names_map():
    got = docs("msopst_small.json")
    assert sorted(got) == ["Test_HardSigmoidGrad_003", "Test_LogSigmoidGrad_002-1", "Test_LogSigmoidGrad_002-2",
                           "Test_SiluGrad_001-1", "Test_SiluGrad_001-2"]
    assert [got[f"Test_SiluGrad_001-{i}"]["dtype"] for i in (1, 2)] == ["float16", "float32"]
    assert got["Test_SiluGrad_001-1"]["inputs"] == {"gradOutput": {"uniform": [-2.0, 2.0]},
                                                    "self": {"uniform": [-8.0, 8.0]}}
    one, two = got["Test_LogSigmoidGrad_002-1"], got["Test_LogSigmoidGrad_002-2"]
    assert (one["shape"], two["shape"]) == ([4, 5], [3, 1, 7])
    assert one["inputs"]["gradOutput"] == {"normal": [0.0, 1.0]}  # value_range [-3, 3] is mean +- 3 std
    assert two["inputs"] == {"gradOutput": {"uniform": [0.1, 1.0]}, "self": {"uniform": [-1, 1]},
                             "buffer": {"constant": 0}}
    hs = got["Test_HardSigmoidGrad_003"]  # named inputs, exact value, dynamic shape with typical_shape
    assert hs["shape"] == [2, 3] and hs["inputs"]["gradOutput"] == {"values": [1, 2, 3, 4, 5, 6]}


def test_generated_values_follow_the_foreign_ranges(direct):
    assert np.isnan(values(direct, "silu_backward-atk_small-1", "gradOutput")).all()
    x = values(direct, "silu_backward-atk_small-1", "self")
    assert (np.abs(x) <= 10).all() and len(np.unique(x)) == 9
    assert (values(direct, "silu_backward-atk_small-2", "self") == -np.inf).all()
    big = values(direct, "silu_backward-atk_small-3", "gradOutput")
    assert big.shape == (131073,) and (big == np.inf).all()
    buffer = values(direct, "log_sigmoid_backward-atk_small-6", "buffer")
    assert buffer.tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7]  # the list, repeated
    assert values(direct, "fast_gelu_backward-atk_small-4", "gradOutput").shape == (1,)
    dy = values(direct, "fast_gelu_backward-fast_gelu_grad_fuzz_28", "gradOutput")
    x = values(direct, "fast_gelu_backward-fast_gelu_grad_fuzz_28", "self")
    pairs = {(repr(a), repr(b)) for a, b in zip(dy[:25], x[:25])}
    assert len(pairs) == 25  # every combination of the five special values
    assert np.signbit(dy[3]) and dy[3] == 0 and np.isinf(dy[4])
    edge = "fast_gelu_backward-FastGeluGrad_bfloat16_NDC1HWC0_boundary_000351"
    assert (values(direct, edge, "gradOutput") == BF16_MAX).all()
    assert (np.abs(values(direct, edge, "self")) <= 3.0517578125e-05).all()
    f32 = values(direct, "silu_backward-silu_grad_baihe_98", "self")
    assert np.isfinite(f32).all() and np.abs(f32).max() > 1e37
    m = manifest(direct / "silu_backward-aclnn_silu_strided")
    t = tensor(m, "gradOutput")
    assert (t["strides"], t["offset"], t["storage_shape"]) == ([6, 1], 2, [20])
    assert values(direct, "hardsigmoid_backward-Test_HardSigmoidGrad_003", "gradOutput").tolist() == [1, 2, 3, 4, 5, 6]
    assert manifest(direct / "silu_backward-aclnn_silu_fp16")["product"] == "950"


# ---- convert: YAML that generates the same bytes ----------------------------------------------


def _bin_hashes(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.rglob("*.bin"))}


def test_convert_then_gen_gives_identical_bytes(direct, tmp_path):
    result = run_cli("convert", *FILES, "-o", tmp_path / "yaml")
    assert result.exit_code == 0, result.output
    assert "converted 25 cases from 4 files" in result.output
    written = sorted(p.name for p in (tmp_path / "yaml").iterdir())
    assert "atk_small.aclnnSiluBackward.yaml" not in written and "atk_small.silu_backward.yaml" in written
    result = run_cli("gen", tmp_path / "yaml", "-o", tmp_path / "out", "--jobs", "1")
    assert result.exit_code == 0, result.output
    direct_hashes = _bin_hashes(direct)
    assert len(direct_hashes) > 100 and _bin_hashes(tmp_path / "out") == direct_hashes


def test_reimport_is_deterministic(tmp_path):
    for f in FILES:
        first = importers.import_file(f, f.read_bytes()).documents
        moved = tmp_path / f.name
        shutil.copy(f, moved)
        assert importers.import_file(moved, moved.read_bytes()).documents == first
    a = run_cli("convert", *FILES, "-o", tmp_path / "a")
    b = run_cli("convert", *FILES, "-o", tmp_path / "b")
    assert a.exit_code == b.exit_code == 0
    for p in (tmp_path / "a").iterdir():
        assert p.read_text() == (tmp_path / "b" / p.name).read_text()


def test_yaml_round_trips_floats_exactly():
    nums = [BF16_MAX, F32_MAX, 1e-08, -0.0, 5e-324, 0.1, 65500.0, "nan", "inf", "-inf"]
    doc = {"op": "aclnnSiluBackward", "cases": [{"name": "a", "shape": [1], "inputs": {"self": {"values": nums}}}]}
    back = parse_yaml("x.yaml", to_yaml(doc, "x.json", "ATK JSON").encode())
    got = back["cases"][0]["inputs"]["self"]["values"]
    assert got[-3:] == ["nan", "inf", "-inf"]
    assert [repr(v) for v in got[:-3]] == [repr(float(v)) for v in nums[:-3]]
    assert math.copysign(1, got[3]) < 0


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=150)  # (any code point but a lone surrogate)
_SCALARS = _TEXT | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.booleans() | st.none()
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(_TEXT, inner, max_size=4),
                       max_leaves=30)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_VALUES)
def test_converted_text_reads_back_as_the_document(value):
    """Whatever text an outside case file carries (control characters, NEL, long lines folded) reads back from the
    converted YAML as it was: PyYAML's Python emitter turned U+0085 into a space, libyaml's keeps it (to_yaml)."""
    doc = {"op": "aclnnSiluBackward", "cases": [{"name": "a", "note": value}]}
    assert parse_yaml("x.yaml", to_yaml(doc, "x.json", "ATK JSON").encode()) == doc


# ---- unsupported cases: one line, exit 2; or skipped and counted ------------------------------

TTK_HEADER = ("testcase_name,op_name,input_dtypes,input_ori_shapes,output_ori_shapes,input_ori_formats,"
              "output_ori_formats,attributes,input_shapes,output_dtypes,output_shapes,input_formats,output_formats,"
              "input_data_ranges,precision_tolerances,absolute_precision,soc_series\n")


def ttk_row(name: str, op: str = "silu_grad", fmt: str = "ND", ranges: str = "((-1, 1),)", shapes: str = "((7,), (7,))",
            attrs: str = "{}") -> str:
    return (f'{name},{op},"(\'float16\', \'float16\')","{shapes}","((7,),)","(\'ND\', \'ND\')","(\'ND\',)",'
            f'"{attrs}","{shapes}","(\'float16\',)","((7,),)","(\'{fmt}\', \'{fmt}\')","(\'ND\',)",'
            f'"{ranges}",,1e-08,\n')


UNSUPPORTED = [
    (TTK_HEADER + ttk_row("ok", ) + ttk_row("prelu", op="p_relu_grad"), "op 'p_relu_grad' is not supported"),
    (TTK_HEADER + ttk_row("ok") + ttk_row("nz", fmt="FRACTAL_NZ"), "format 'FRACTAL_NZ' is not supported"),
    (TTK_HEADER + ttk_row("ok") + ttk_row("attr", op="hard_sigmoid_grad", attrs="{'alpha': 0.2}"),
     "attribute alpha=0.2 is not supported"),
    ('[{"id": 0, "aclnn_name": "aclnnSiluBackward", "inputs": [{"name": "self", "dtype": "fp16", "shape": [2], '
     '"range_values": [0, 1]}]}, {"id": 1, "aclnn_name": "aclnnChamferDistanceBackward", "inputs": []}]',
     "op 'aclnnChamferDistanceBackward' is not supported"),
    ('[{"id": 0, "aclnn_name": "aclnnSiluBackward", "inputs": [{"name": "self", "dtype": "fp16", "shape": [2], '
     '"range_values": [0, 1]}]}, {"id": 1, "aclnn_name": "aclnnSiluBackward", "inputs": [{"name": "self", '
     '"dtype": "fp16", "shape": [2], "range_values": [0, 1], "outlier_values": [9]}]}]', "outlier_values"),
    ('[{"case_name": "ok", "op": "SiluGrad", "input_desc": [{"format": "ND", "type": "float16", "shape": [3]}, '
     '{"format": "ND", "type": "float16", "shape": [3]}], "output_desc": [{"format": "ND", "type": "float16", '
     '"shape": [3]}]}, {"case_name": "conv", "op": "Conv2D", "input_desc": [{"format": "ND", "type": "float16", '
     '"shape": [3]}], "output_desc": [{"format": "ND", "type": "float16", "shape": [3]}]}]', "op 'Conv2D'"),
]


@pytest.mark.parametrize("text,message", UNSUPPORTED, ids=[u[1][:24] for u in UNSUPPORTED])
def test_unsupported_case_is_one_line_or_skipped_with_a_count(tmp_path, text, message):
    src = tmp_path / "suite.dat"
    src.write_text(text)
    one_line_error(run_cli("gen", src, "-o", tmp_path / "out"), message, "--skip-unsupported", str(src))
    one_line_error(run_cli("convert", src, "-o", tmp_path / "yaml"), message)
    assert not (tmp_path / "yaml").exists()
    result = run_cli("convert", src, "-o", tmp_path / "yaml", "--skip-unsupported")
    assert result.exit_code == 0, result.output
    assert "skipped 1 unsupported foreign case:" in result.output and message in result.output
    assert "converted 1 cases" in result.output
    result = run_cli("gen", src, "-o", tmp_path / "out", "--skip-unsupported")
    assert result.exit_code == 0 and "skipped 1 unsupported foreign case:" in result.output, result.output
    assert "generated 1 cases" in result.output and len(list((tmp_path / "out").iterdir())) == 1
    with importers.collecting(skip_unsupported=True) as skipped:
        cases = load_cases([src])
    assert len(cases) == 1 and len(skipped) == 1 and message in skipped[0].reason


def test_skip_also_covers_cases_our_validation_rejects(tmp_path):
    src = tmp_path / "suite.csv"
    src.write_text(TTK_HEADER + ttk_row("ok") + ttk_row("huge", ranges="((-1e6, 1e6),)"))
    one_line_error(run_cli("gen", src, "-o", tmp_path / "out"), "overflows float16", "huge")
    with importers.collecting(skip_unsupported=True) as skipped:
        assert [c.name for c in load_cases([src])] == ["ok"]
    assert "overflows float16" in skipped[0].reason


# ---- malformed foreign files: one line, exit 2, no traceback ---------------------------------

MALFORMED = [
    ('[{"id": 0, "aclnn_name": "aclnnSiluBackward", "inputs": [', "not valid ATK JSON"),
    ('[{"id": 0, "aclnn_name": "aclnnSiluBackward", "inputs": [{"name": "self", "dtype": "fp16", "shape": "big", '
     '"range_values": [0, 1]}]}]', "a shape is a list of integers"),
    ('[{"id": 0, "aclnn_name": "aclnnSiluBackward", "inputs": [{"name": "self", "dtype": "fp16", "shape": [2]}]}]',
     "needs dtype, shape and range_values"),
    ('[{"id": 0, "aclnn_name": "aclnnSiluBackward", "colour": 1, "inputs": []}]', "unknown ATK case key 'colour'"),
    ('[{"id": 0, "aclnn_name": "aclnnSiluBackward", "inputs": [{"name": "self", "dtype": "fp16", "shape": [2], '
     '"range_values": {"name": "nd", "mean": [5, 1], "std": [1, 2]}}]}]', "lo <= hi"),
    (TTK_HEADER + ttk_row("a", shapes="((7,), (7,)"), "cannot read"),
    (TTK_HEADER + ttk_row("a", ranges="(__import__('os').system('touch pwned'),)"), "cannot read"),
    (TTK_HEADER.replace("soc_series", "soc_serie") + ttk_row("a"), "unknown TTK column 'soc_serie'"),
    (TTK_HEADER + ttk_row("a").rstrip("\n") + ",extra,cells\n", "cells for 17 columns"),
    (TTK_HEADER + ttk_row("a", ranges="((2, 1),)"), "lo <= hi"),
    (TTK_HEADER + ttk_row("a", ranges="((-1, 1), (0, 1), (0, 2))"), "3 ranges for 2 tensors"),
    ('[{"case_name": "c", "op": "SiluGrad", "input_desc": [{"format": "ND", "type": ["float16", "float"], "shape": '
     '[[3], [4], [5]]}, {"format": "ND", "type": "float16", "shape": [3]}], "output_desc": [{"format": "ND", '
     '"type": "float16", "shape": [3]}]}]', "entries where other lists have 3"),
    ('[{"case_name": "c", "op": "SiluGrad", "output_desc": []}]', "'input_desc' must be a non-empty list"),
    ('[{"case_name": "c", "op": "SiluGrad", "input_desc": [{"format": "ND", "type": "float16", "shape": [3]}], '
     '"output_desc": [{"format": "ND", "type": "float16", "shape": [3]}]}]', "1 inputs for SiluGrad"),
]


@pytest.mark.parametrize("text,message", MALFORMED, ids=[m[1][:24] for m in MALFORMED])
def test_malformed_foreign_file_is_one_line_exit_2(tmp_path, text, message):
    src = tmp_path / "suite.in"
    src.write_text(text)
    one_line_error(run_cli("gen", src, "-o", tmp_path / "out"), message, str(src))
    one_line_error(run_cli("convert", src, "-o", tmp_path / "yaml"), message)
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_skipping_never_hides_a_malformed_file(tmp_path):
    src = tmp_path / "suite.json"
    src.write_text(MALFORMED[0][0])
    one_line_error(run_cli("convert", src, "-o", tmp_path / "yaml", "--skip-unsupported"), "not valid ATK JSON")
    src.write_text(TTK_HEADER + ttk_row("a", shapes="((7,), (7,)") + ttk_row("b", op="p_relu_grad"))
    one_line_error(run_cli("convert", src, "-o", tmp_path / "yaml", "--skip-unsupported"), "cannot read")


def test_not_utf8_and_not_foreign(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(TTK_HEADER.encode() + b"\xff\xfe,silu_grad\n")
    one_line_error(run_cli("gen", bad, "-o", tmp_path / "out"), "not UTF-8")
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    one_line_error(run_cli("convert", other, "-o", tmp_path / "yaml"), "not an ATK JSON, TTK CSV or msOpST JSON")


def test_unwritable_output_is_one_line(tmp_path):
    (tmp_path / "taken").write_text("a file where the output directory should go")
    one_line_error(run_cli("convert", DATA / "atk_small.json", "-o", tmp_path / "taken"), str(tmp_path / "taken"))


def test_literal_cells_are_parsed_not_evaluated():
    assert literal("((-1, 1, nan, -0.0, inf),)") == ((-1, 1, pytest.approx(math.nan, nan_ok=True), -0.0, math.inf),)
    assert literal("(-inf, None, 'ND', True)") == (-math.inf, None, "ND", True)
    assert literal("{'alpha': 0.16666666}") == {"alpha": 0.16666666}
    assert literal("[[2], [2]]") == ((2,), (2,))
    for text in ("__import__('os')", "(1, 2) + (3,)", "{**x}", "lambda: 1", "x.y"):
        with pytest.raises(ValueError):
            literal(text)
