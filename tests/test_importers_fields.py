"""Foreign suites checked field by field (issue 18, part 5): every probe finding on ATK JSON, TTK CSV and
msOpST JSON files is one exact line, exit 2, naming file, case and field; files are read bounded (only
regular files); the real forms ops-nn's suites use are accepted."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from aclnn_cli.cases import importers

from helpers import one_line_error, run_cli

DATA = Path(__file__).parent / "data"
CLI = Path(sys.executable).parent / "aclnn-cli"


def error_line(tmp_path: Path, text: str | bytes, name: str = "suite.dat") -> tuple[Path, str]:
    """(the file, the one error line) of both gen and convert of a foreign file holding `text`."""
    src = tmp_path / name
    src.write_bytes(text if isinstance(text, bytes) else text.encode())
    lines = []
    for cmd in ("gen", "convert"):
        lines.append(one_line_error(run_cli(cmd, src, "-o", tmp_path / f"out-{cmd}")))
    assert lines[0] == lines[1]
    assert not (tmp_path / "out-convert").exists()
    return src, lines[0]


def atk(case: dict | None = None, first_input: dict | None = None, drop: str = "") -> str:
    c = {"id": 0, "aclnn_name": "aclnnSiluBackward",
         "inputs": [{"name": "gradOutput", "type": "tensor", "dtype": "fp16", "shape": [2], "range_values": [-1, 1]},
                    {"name": "self", "type": "tensor", "dtype": "fp16", "shape": [2], "range_values": [-1, 1]}]}
    c.update(case or {})
    c["inputs"][0].update(first_input or {})
    c.pop(drop, None)
    return json.dumps([c])


KERNEL = "testcase_name,op_name,input_dtypes,input_shapes,output_dtypes,output_shapes,input_data_ranges,is_enabled\n"


def kernel_row(name: str = "a", dtypes: str = "('float16', 'float16')", shapes: str = "((7,), (7,))",
               enabled: str = "1", ranges: str = "((-1, 1),)") -> str:
    return f'{name},silu_grad,"{dtypes}","{shapes}","(\'float16\',)","((7,),)","{ranges}",{enabled}\n'


ACLNN = "testcase_name,api_name,tensor_view_shapes,tensor_dtypes,tensor_view_strides,tensor_view_offsets,output_tensor_indexes\n"


def aclnn_row(strides: str = "((6,1),None,None)", offsets: str = "(2,0,0)", shapes: str = "((3,4),(3,4),(3,4))",
              outputs: str = "(2,)", dtypes: str = "('float32','float32','float32')") -> str:
    return f'x,aclnnSiluBackward,"{shapes}","{dtypes}","{strides}","{offsets}","{outputs}"\n'


def msopst(name) -> str:
    desc = {"format": "ND", "type": "float16", "shape": [3]}
    return json.dumps([{"case_name": name, "op": "SiluGrad", "input_desc": [desc, desc], "output_desc": [desc]}])


# ---- ATK ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("value,shown", [([1], "[1]"), ({"a": 1}, "{'a': 1}"), (None, "None"), (1.5, "1.5"),
                                         (True, "True"), ("../../etc/x", "'../../etc/x'"), (-1, None),
                                         (2**63, None)])
def test_atk_id_is_an_integer(tmp_path, value, shown):
    src, line = error_line(tmp_path, atk({"id": value}))
    if shown is None:
        assert line == f"aclnn-cli: error: {src}: case '#1': key 'id': id {value} is outside [0, 2^63 - 1]"
    else:
        assert line == f"aclnn-cli: error: {src}: case '#1': key 'id': id must be an integer, got {shown}"


def test_atk_id_is_required_and_unique(tmp_path):
    src, line = error_line(tmp_path, atk(drop="id"))
    assert line == f"aclnn-cli: error: {src}: case '#1': key 'id': an ATK case needs an id (an integer)"
    two = json.loads(atk()) * 2
    src, line = error_line(tmp_path, json.dumps(two))
    assert line == (f"aclnn-cli: error: {src}: case '#2': key 'id': id 0 is also case #1's: ids name and seed "
                    "cases, so they are unique")


def test_atk_numbers_written_as_strings_are_refused(tmp_path):
    src, line = error_line(tmp_path, atk(first_input={"range_values": ["-1", "1"]}))
    assert line == (f"aclnn-cli: error: {src}: case 'suite-0': key 'gradOutput.range_values': range_values[0]: "
                    "expected a number (or 'nan', 'inf', '-inf'), got '-1'")


def test_atk_duplicate_json_key_is_refused(tmp_path):
    src, line = error_line(tmp_path, atk().replace('"id": 0', '"id": 0, "id": 1'))
    assert line == f"aclnn-cli: error: {src}: duplicate key 'id'"


@pytest.mark.parametrize("field,value,message", [
    ("name", ["torch_silu_backward"], "name must be a string, got ['torch_silu_backward']"),
    ("is_boundary", "yes", "is_boundary must be true/false, got 'yes'"),
    ("aclnn_name", 5, "aclnn_name must be a string, got 5"),
])
def test_atk_fields_read_past_keep_their_type(tmp_path, field, value, message):
    src, line = error_line(tmp_path, atk({field: value}))
    assert line == f"aclnn-cli: error: {src}: case 'suite-0': key '{field}': {message}"


def test_atk_scalar_range_values_is_a_constant():
    """ops-nn's LeakyReluBackward, SwishBackward and GeluBackwardV2 suites write `"range_values": 0`, `8`, `"inf"`."""
    for value, fill in ((0, {"constant": 0}), (-8, {"constant": -8}), ("inf", {"constant": "inf"})):
        data = atk(first_input={"range_values": value}).encode()
        doc = importers.import_file(Path("s.json"), data).documents[0]
        assert doc["cases"][0]["inputs"]["gradOutput"] == fill


def test_atk_interval_range_values_is_a_range():
    """ops-nn's LogitGrad and Celu suites write intervals as strings: "(0, 1)", "[ -5, 0 )", "( 0, 5 ]"."""
    for value, fill in (("(0, 1)", {"uniform": [0.0, 1.0]}), ("[ -5, 0 )", {"uniform": [-5.0, 0.0]}),
                        ("( 0, 5 ]", {"uniform": [0.0, 5.0]}), ("[0.5, 0.5]", {"constant": 0.5})):
        data = atk(first_input={"range_values": value}).encode()
        doc = importers.import_file(Path("s.json"), data).documents[0]
        assert doc["cases"][0]["inputs"]["gradOutput"] == fill


@pytest.mark.parametrize("value,why", [
    ("(a, 1)", "an interval's end is a number, got 'a' in '(a, 1)'"),
    ("(0, 1, 2)", "expected an interval such as \"(0, 1)\" or \"[-5, 0)\", got '(0, 1, 2)'"),
    ("(0, 1", "expected an interval such as \"(0, 1)\" or \"[-5, 0)\", got '(0, 1'")])
def test_atk_bad_interval_is_one_line(tmp_path, value, why):
    src, line = error_line(tmp_path, atk(first_input={"range_values": value}))
    assert line == f"aclnn-cli: error: {src}: case 'suite-0': key 'gradOutput.range_values': {why}"


# ---- TTK ---------------------------------------------------------------------------------------

def test_ttk_duplicate_header_column_is_refused(tmp_path):
    src, line = error_line(tmp_path, KERNEL.replace("is_enabled", "input_dtypes") + kernel_row())
    assert line == (f"aclnn-cli: error: {src}: key 'input_dtypes': column 'input_dtypes' appears twice in the header "
                    "(csv would keep one of the two cells)")


def test_ttk_empty_dtype_lists_are_refused(tmp_path):
    src, line = error_line(tmp_path, KERNEL + kernel_row(dtypes="()"))
    assert line == f"aclnn-cli: error: {src}: case 'a': key 'input_dtypes': input_dtypes is empty: it needs one entry per tensor"
    src, line = error_line(tmp_path, ACLNN + aclnn_row(dtypes="()"))  # was imported as the default dtype
    assert line == f"aclnn-cli: error: {src}: case 'x': key 'tensor_dtypes': tensor_dtypes is empty: it needs one entry per tensor"


def test_ttk_one_dtype_serves_every_input():
    """ops-nn's kernel suites write `('bfloat16',)` for all inputs (mse_loss_grad, log_softmax_grad)."""
    data = (KERNEL + kernel_row(dtypes="('bfloat16',)")).encode()
    case = importers.import_file(Path("s.csv"), data).documents[0]["cases"][0]
    assert case["dtype"] == "float16"  # the output's
    assert case["tensors"] == {"gradOutput": {"dtype": "bfloat16"}, "self": {"dtype": "bfloat16"}}


def test_ttk_short_shape_list_is_refused(tmp_path):
    src, line = error_line(tmp_path, KERNEL + kernel_row(shapes="((7,),)"))
    assert line == f"aclnn-cli: error: {src}: case 'a': key 'input_shapes': 1 entry for 2 tensors"


def test_ttk_testcase_name_is_required_and_unique(tmp_path):
    src, line = error_line(tmp_path, KERNEL + kernel_row(name=""))
    assert line == (f"aclnn-cli: error: {src}: key 'testcase_name': line 2: testcase_name is empty "
                    "(it names and seeds the case)")
    src, line = error_line(tmp_path, KERNEL + kernel_row() + kernel_row())
    assert line == (f"aclnn-cli: error: {src}: case 'a': key 'testcase_name': line 3: testcase_name is also "
                    "line 2's (it names and seeds the case)")


@pytest.mark.parametrize("value", ["maybe", "2", "yes"])
def test_ttk_odd_is_enabled_is_refused(tmp_path, value):
    src, line = error_line(tmp_path, KERNEL + kernel_row(enabled=value))
    assert line == (f"aclnn-cli: error: {src}: case 'a': key 'is_enabled': is_enabled must be 1, 0, True, False "
                    f"or empty, got '{value}'")


def test_ttk_real_is_enabled_values_are_read():
    """ops-nn writes 1, True, TRUE, empty (enabled) and 0, False, FALSE (disabled)."""
    rows = "".join(kernel_row(name=f"r{i}", enabled=v) for i, v in enumerate(["1", "True", "TRUE", "", "0", "FALSE"]))
    result = importers.import_file(Path("s.csv"), (KERNEL + rows).encode(), skip_unsupported=True)
    assert [c["name"] for c in result.documents[0]["cases"]] == ["r0", "r1", "r2", "r3"]
    assert [s.case for s in result.skipped] == ["r4", "r5"]


@pytest.mark.parametrize("strides,message", [
    (f"(({10**30},1),None,None)", "strides entry 1000000000000000000000000000000 is over 2^63 - 1"),
    (f"(({2**63},1),None,None)", "strides entry 9223372036854775808 is over 2^63 - 1"),
    ("((-6,1),None,None)", "negative entry in strides [-6, 1]"),
    ("((6,),None,None)", "strides [6] for the 2-d view shape [3, 4]"),
])
def test_ttk_strides_are_int64_and_match_the_shape(tmp_path, strides, message):
    src, line = error_line(tmp_path, ACLNN + aclnn_row(strides=strides))
    assert line == f"aclnn-cli: error: {src}: case 'x': key 'tensor_view_strides': {message}"


@pytest.mark.parametrize("offset,shown", [("nan", "nan"), ("'a'", "'a'"), ("1.5", "1.5")])
def test_ttk_offsets_are_integers(tmp_path, offset, shown):
    src, line = error_line(tmp_path, ACLNN + aclnn_row(offsets=f"({offset},0,0)"))
    assert line == f"aclnn-cli: error: {src}: case 'x': key 'tensor_view_offsets': an offset must be an integer, got {shown}"


def test_ttk_output_index_minus_one_is_the_last_tensor(tmp_path):
    """ops-nn's ttk_aclnn_silu_backward_st.csv writes output_tensor_indexes "(-1,)"."""
    data = (ACLNN + aclnn_row(outputs="(-1,)")).encode()
    case = importers.import_file(Path("s.csv"), data).documents[0]["cases"][0]
    assert case["tensors"] == {"gradOutput": {"layout": {"strides": [6, 1], "offset": 2}}}
    src, line = error_line(tmp_path, ACLNN + aclnn_row(outputs="(-4,)"))
    assert line == f"aclnn-cli: error: {src}: case 'x': key 'output_tensor_indexes': an output index -4 is outside [-3, 2]"


def test_ttk_short_row_is_refused(tmp_path):
    src, line = error_line(tmp_path, KERNEL + kernel_row().rstrip("\n").rsplit(",", 1)[0] + "\n")
    assert line == f"aclnn-cli: error: {src}: line 2 has 7 cells for 8 columns"


def test_ttk_huge_cell_nul_and_parser_bombs(tmp_path):
    src, line = error_line(tmp_path, KERNEL + kernel_row(ranges="(" + "1," * 5_000_000 + ")"))
    assert line == f"aclnn-cli: error: {src}: line 2: a cell of more than 65536 characters"
    src, line = error_line(tmp_path, KERNEL + kernel_row(name="a\0b"))
    assert line == f"aclnn-cli: error: {src}: line 2: a NUL character (a TTK file is text)"
    src, line = error_line(tmp_path, KERNEL + kernel_row(ranges="-" * 60_000 + "1"))
    assert line == (f"aclnn-cli: error: {src}: case 'a': key 'input_data_ranges': cannot read "
                    f"'{'-' * 27}...{'-' * 27}1': more than three signs in a row")
    src, line = error_line(tmp_path, KERNEL + kernel_row(shapes="((" + "9" * 5000 + ",), (7,))"))
    assert line == (f"aclnn-cli: error: {src}: case 'a': key 'input_shapes': cannot read "
                    f"'(({'9' * 25}...{'9' * 19},), (7,))': a number of more than 40 digits")


# ---- msOpST and JSON limits --------------------------------------------------------------------

@pytest.mark.parametrize("name,shown", [(5, "5"), (["a"], "['a']"), ("", None)])
def test_msopst_case_name_is_a_string(tmp_path, name, shown):
    src, line = error_line(tmp_path, msopst(name))
    message = "case_name is empty" if shown is None else f"case_name must be a string, got {shown}"
    assert line == f"aclnn-cli: error: {src}: case '#1': key 'case_name': {message}"


def test_msopst_duplicate_case_name_is_refused(tmp_path):
    src, line = error_line(tmp_path, json.dumps(json.loads(msopst("c")) * 2))
    assert line == (f"aclnn-cli: error: {src}: case '#2': key 'case_name': case_name 'c' is also case #1's: "
                    "names seed cases, so they are unique")


def test_json_huge_numbers_and_deep_nesting_are_one_line(tmp_path):
    src, line = error_line(tmp_path, atk().replace('"id": 0', '"id": ' + "9" * 5000))
    assert line == f"aclnn-cli: error: {src}: a number of 5000 digits (at most 40)"
    src, line = error_line(tmp_path, msopst("c").replace('"shape": [3]', '"shape": [' + "7" * 5000 + "]", 1))
    assert line == f"aclnn-cli: error: {src}: a number of 5000 digits (at most 40)"
    deep = atk().replace('"range_values": [-1, 1]', '"range_values": ' + "[" * 100_000 + "]" * 100_000, 1)
    src, line = error_line(tmp_path, deep)
    assert line == f"aclnn-cli: error: {src}: nested more than 64 levels deep"


# ---- reading: only regular files, bounded --------------------------------------------------------

def _cli(*args, limit_memory: bool = True) -> subprocess.CompletedProcess:
    """The real CLI under a 1 GiB address-space limit (a read without bound fails fast instead of
    growing to gigabytes); a hang is a TimeoutExpired, not a slow test."""
    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=60,
                          preexec_fn=limits if limit_memory else None)


def test_convert_refuses_dev_zero_named_csv(tmp_path):
    zero = tmp_path / "zero.csv"
    zero.symlink_to("/dev/zero")
    result = _cli("convert", zero, "-o", tmp_path / "yaml")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip() == (f"aclnn-cli: error: {zero}: cannot read case file: not a regular file "
                                     "(device, FIFO or socket)")


def test_convert_and_gen_never_wait_on_a_fifo(tmp_path):
    fifo = tmp_path / "suite.json"
    os.mkfifo(fifo)
    for cmd in ("convert", "gen"):
        result = _cli(cmd, fifo, "-o", tmp_path / "out")  # TimeoutExpired (a failure) if it blocks
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
        assert len(result.stderr.strip().splitlines()) == 1
    assert "not a regular file" in result.stderr


def test_convert_refuses_a_file_over_the_limit_before_reading(tmp_path):
    big = tmp_path / "big.csv"
    with open(big, "wb") as f:
        f.write(KERNEL.encode())
        f.truncate((64 << 20) + 1)  # sparse: nothing to read until someone reads it
    result = _cli("convert", big, "-o", tmp_path / "yaml")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip() == f"aclnn-cli: error: {big}: case file is {(64 << 20) + 1} bytes; at most 64 MiB"


def test_recognising_a_file_never_waits_on_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "suite.csv")
    code = ("import sys; from pathlib import Path; from aclnn_cli.cases import importers; "
            "print(importers.recognises(Path(sys.argv[1])), importers.recognises(Path(sys.argv[2])))")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "suite.csv"), str(DATA / "ttk_kernel_small.csv")],
                            capture_output=True, text=True, timeout=60)  # TimeoutExpired if it blocks
    assert result.stdout.split() == ["False", "True"], result.stderr[-2000:]


def test_atk_null_strategy_and_default_seed_are_read_past():
    """ops-nn's MaxPool2dWithMaskBackward file gives `"strategy": null` in all 214 cases, SituGluGrad's
    `"default_seed": null` too: ATK's default draw, the data unchanged (aclnn-cli seeds from file and id)."""
    plain = importers.import_file(Path("s.json"), atk().encode()).documents
    nulls = importers.import_file(Path("s.json"), atk({"strategy": None, "default_seed": None}).encode()).documents
    assert nulls == plain


# ATK's later schema, as ops-nn's SituGluGrad, EmbeddingBag and FusedQuantMatmul files ("version": "v2.1") write
# every case: its run's labels, and null for what would ask for another run.
LATER_SCHEMA = {"default_seed": None, "triton_name": None, "kernel_name": None, "version": "v2.1",
                "expected_error_msg": None, "api": "pytorch", "api_type": "function_silu_backward",
                "aclnn_api_type": "aclnn_silu_backward", "triton_api_type": "triton_function",
                "fusion_api_type": "fusion_function", "fusion_mode": None, "dist_api_type": "dist_function",
                "kernel_api_type": "kernel_function", "backward": False, "outputs": None, "acl_json": "",
                "method_inputs": None, "tensor_input": None, "compute_times": None, "save_name": None, "uuid": None,
                "downloaded": False, "is_boundary": False, "xrun_cs_name": None, "xrun_data": None, "strategy": None}


def test_atk_later_schema_labels_are_read_past(tmp_path):
    """A case in ATK's later schema imports as the same case without its labels, and runs: gen, emulate, verify."""
    plain = importers.import_file(Path("s.json"), atk().encode()).documents
    later = importers.import_file(Path("s.json"), atk(dict(LATER_SCHEMA)).encode()).documents
    assert later == plain
    src = tmp_path / "s.json"
    src.write_text(atk(dict(LATER_SCHEMA)))
    out = tmp_path / "out"
    assert run_cli("gen", src, "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    assert run_cli("verify", out).exit_code == 0


@pytest.mark.parametrize("key,value", [("expected_error_msg", "EZ1001"), ("outputs", [{"name": "gradInput"}]),
                                       ("backward", True), ("method_inputs", []), ("tensor_input", "x"),
                                       ("xrun_data", {}), ("fusion_mode", "mode"), ("triton_name", "silu_bwd"),
                                       ("kernel_name", "SiluGrad"), ("default_seed", 0), ("backward", 0)])
def test_atk_later_schema_asking_for_another_run_skips_the_case_not_the_file(tmp_path, key, value):
    """A later-schema key that asks for a run aclnn-cli does not make (an expected error message, ATK's own outputs,
    autograd of a forward API, a Triton or kernel-level run, ...): that case is skipped saying so, the others import.
    (A 0 is not null: only null, and false for backward, are the case as its inputs describe it.)"""
    two = json.loads(atk(dict(LATER_SCHEMA))) + json.loads(atk({**LATER_SCHEMA, "id": 1, key: value}))
    got = importers.import_file(Path("s.json"), json.dumps(two).encode(), skip_unsupported=True)
    assert [c["name"] for d in got.documents for c in d["cases"]] == ["s-0"]
    assert len(got.skipped) == 1 and f"key '{key}': {key} " in got.skipped[0].reason, got.skipped
    src, line = error_line(tmp_path, json.dumps(two))
    assert f"key '{key}'" in line and "is accepted" in line


@pytest.mark.parametrize("key,value", [("version", 2.1), ("api", ["pytorch"]), ("downloaded", "no"),
                                       ("compute_times", "10"), ("uuid", 7)])
def test_atk_later_schema_labels_keep_their_type(tmp_path, key, value):
    """A label read past still has its type: a broken file is refused on one line naming the key."""
    src, line = error_line(tmp_path, atk({**LATER_SCHEMA, key: value}))
    assert f"{key} must be" in line and f"key '{key}'" in line


@pytest.mark.parametrize("key,value", [("strategy", "boundary"), ("default_seed", 1234)])
def test_atk_non_null_strategy_or_seed_skips_the_case_not_the_file(tmp_path, key, value):
    """A strategy or fixed seed of ATK's own generator cannot be reproduced: that case is skipped with the reason,
    the file's other cases still import."""
    two = json.loads(atk()) + json.loads(atk({"id": 1, key: value}))
    got = importers.import_file(Path("s.json"), json.dumps(two).encode(), skip_unsupported=True)
    assert [c["name"] for d in got.documents for c in d["cases"]] == ["s-0"]
    assert len(got.skipped) == 1 and f"{key} " in got.skipped[0].reason
    assert "cannot reproduce" in got.skipped[0].reason
    src, line = error_line(tmp_path, json.dumps(two))
    assert f"key '{key}'" in line and "cannot reproduce" in line
