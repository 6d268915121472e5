"""The `double` and `float` attribute kinds: a C double (BatchNormBackward's `double eps`) and a C float, which an
op used to have to declare as an aclScalar*. Register, case files (a double kept exactly, a float rounded to
float32), one-line refusals, the manifest, the ATK importer, and the runner passing each value bit for bit.

The op is tests/user_ops/_kinds_echo.py's aclnnKindsEcho (eps: double, momentum: float); for the runner, its
header and an implementation whose phase one prints the bits it receives (user_ops/include, user_ops/src).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import runpy
import shutil
import struct
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from aclnn_cli.casedir import manifest as M
from aclnn_cli.cases import attributes as A
from aclnn_cli.cases import importers
from aclnn_cli.cases.loader import cases_from_doc
from aclnn_cli.device.harness import ops_source, write_harness
from aclnn_cli.device.run import attribute_line, request
from aclnn_cli.errors import CaseError, UserError
from aclnn_cli.ops import OPS
from aclnn_cli.ops.base import AttrSpec, OpSpec
from aclnn_cli.ops.registry import DECLARED_IN, register

from shared import object_cache, shared_stub_root
from cann_build import SANITIZE, build_runner, tools_missing
from clifork import cli_process

USER_OPS = Path(__file__).parent / "user_ops"
OP_FILE = USER_OPS / "_kinds_echo.py"
F32_TENTH = float(np.float32(0.1))


def bits(x: float) -> str:
    return struct.pack(">d", x).hex()


@contextmanager
def echo_registered() -> Iterator[OpSpec]:
    """aclnnKindsEcho registered in this process for a block, the registry restored after it."""
    ops, declared = dict(OPS), dict(DECLARED_IN)
    try:
        runpy.run_path(str(OP_FILE))
        yield OPS["aclnnKindsEcho"]
    finally:
        OPS.clear(), OPS.update(ops), DECLARED_IN.clear(), DECLARED_IN.update(declared)


@pytest.fixture
def echo():
    with echo_registered() as op:
        yield op


def cli(*args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ACLNN_CLI_OPS"}
    return cli_process("--ops", str(OP_FILE), *map(str, args), env=env)


def load(attributes: dict | None = None, **case):
    doc = {"name": "v", "dtype": "float32", "shape": [4], **({"attributes": attributes} if attributes else {}), **case}
    return cases_from_doc("t.yaml", {"op": "aclnnKindsEcho", "cases": [doc]})


# ---- declarations -------------------------------------------------------------------------------------------

def test_a_declaration_of_each_kind_registers_and_the_harness_passes_the_c_types(echo):
    assert [(a.name, a.kind) for a in echo.attributes] == [("eps", "double"), ("momentum", "float")]
    src = ops_source([echo])
    assert ("aclnnKindsEchoGetWorkspaceSize(a.tensor(0), a.tensor(1), a.float64(2), a.float32(3), a.tensor(4), "
            "workspaceSize, executor)") in src
    assert '{"aclnnKindsEcho", 5, "ttdft",' in src


def test_the_cli_lists_both_kinds():
    r = cli("ops", "--json")
    assert r.returncode == 0, r.stderr
    info = next(o for o in json.loads(r.stdout) if o["op"] == "aclnnKindsEcho")
    assert info["attributes"] == [{"name": "eps", "kind": "double", "optional": False, "default": 1e-5},
                                  {"name": "momentum", "kind": "float", "optional": False, "default": 0.1}]


@pytest.mark.parametrize("kind, default, message", [
    ("double", "small", "expected a number, got 'small'"), ("double", True, "expected a number, got True"),
    ("float", [0.5], "expected a number, got [0.5]"), ("float", False, "expected a number, got False"),
])
def test_register_refuses_a_bad_default_in_one_line(echo, kind, default, message):
    bad = dataclasses.replace(echo, name="aclnnKindsEchoBad", key="kinds_echo_bad",
                              attributes=(AttrSpec("eps", kind, default=default), echo.attributes[1]))
    with pytest.raises(UserError) as exc:
        register(bad)
    assert f"attributes[0].default: {message}" in str(exc.value) and "\n" not in str(exc.value)


# ---- case files ---------------------------------------------------------------------------------------------

def test_a_double_is_kept_exactly_and_a_float_rounded_to_float32(echo):
    cases = load({"eps": [0.1, "1e-5", 5e-324, "-inf"], "momentum": [0.1, "1e-5", 1e39]})
    got = {c.case_id: c.attribute_values for c in cases}
    first = got["kinds_echo-v-eps0.1-momentum0.1"]
    assert first == {"eps": 0.1, "momentum": F32_TENTH} and F32_TENTH != 0.1
    assert got["kinds_echo-v-eps1e-05-momentum1e-05"] == {"eps": 1e-5, "momentum": float(np.float32(1e-5))}
    assert got["kinds_echo-v-eps5e-324-momentuminf"]["eps"] == 5e-324  # the smallest subnormal: not flushed
    assert got["kinds_echo-v-eps-inf-momentuminf"] == {"eps": -math.inf, "momentum": math.inf}  # float32 overflows
    assert all(type(v) is float for c in cases for v in c.attribute_values.values())


def test_distinct_doubles_get_distinct_case_ids(echo):
    """A double's id is its repr: 0.1 and float32(0.1) are two cases (a float32 spelling would name both 0.1)."""
    ids = [c.case_id for c in load({"eps": [0.1, F32_TENTH, 1e-5]})]
    assert ids == ["kinds_echo-v-eps0.1", "kinds_echo-v-eps0.10000000149011612", "kinds_echo-v-eps1e-05"]
    assert [c.case_id for c in load({"momentum": [0.1, 1.2]})] == ["kinds_echo-v-momentum0.1", "kinds_echo-v-momentum1.2"]


def test_defaults_are_what_the_device_receives(echo):
    """A float's default is rounded like a case's value: gen's functions and the manifest see one value."""
    case = load()[0]
    assert case.attribute_values == {"eps": 1e-5, "momentum": F32_TENTH}
    assert dict(case.attributes) == {"eps": 1e-5, "momentum": F32_TENTH}


@pytest.mark.parametrize("value, shown", [("small", "'small'"), (True, "True"), ([[0.5]], "[0.5]"), ({"a": 1}, "{'a': 1}")])
@pytest.mark.parametrize("name", ["eps", "momentum"])
def test_a_bad_value_is_a_case_error_naming_its_key(echo, name, value, shown):
    with pytest.raises(CaseError) as exc:
        load({name: value})
    assert f"attributes.{name}" in str(exc.value) and f"expected a number, got {shown}" in str(exc.value)


def test_a_bad_value_is_one_line_from_gen(tmp_path):
    cases = tmp_path / "c.yaml"
    cases.write_text("op: aclnnKindsEcho\ncases:\n  - {name: s, dtype: float32, shape: [4], attributes: {eps: small}}\n")
    r = cli("gen", cases, "-o", tmp_path / "out")
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "case 's'" in lines[0] and "attributes.eps" in lines[0] and "expected a number, got 'small'" in lines[0]


# ---- the manifest -------------------------------------------------------------------------------------------

def test_the_manifest_round_trips_every_value_exactly(echo):
    cases = load({"eps": [0.1, 1e-5, 5e-324, -0.0, "inf", "nan", 1.7976931348623157e308], "momentum": [0.1, "-inf"]})
    for case in cases:
        written = json.loads(json.dumps(A.to_manifest(case.op, case.attributes), allow_nan=False))
        back = dict(A.from_manifest(case.op, written))
        for name, value in case.attributes:
            assert bits(back[name]) == bits(value) or (math.isnan(value) and math.isnan(back[name])), (name, value)
    nan = next(c for c in cases if math.isnan(c.attribute_values["eps"]))
    assert A.to_manifest(nan.op, nan.attributes)[0] == {"name": "eps", "kind": "double", "value": "nan"}


def test_gen_writes_and_verify_reads_the_exact_values(tmp_path):
    cases = tmp_path / "c.yaml"
    cases.write_text("op: aclnnKindsEcho\ncases:\n  - {name: e, dtype: float32, shape: [8], "
                     "attributes: {eps: 0.1, momentum: 0.1}}\n")
    out = tmp_path / "out"
    for args in (("gen", cases, "-o", out), ("emulate", out), ("verify", out)):
        r = cli(*args)
        assert r.returncode == 0, r.stdout + r.stderr
    written = json.loads((out / "kinds_echo-e" / "case.json").read_text())["attributes"]
    assert written == [{"name": "eps", "kind": "double", "value": 0.1},
                       {"name": "momentum", "kind": "float", "value": F32_TENTH}]


# ---- ATK ----------------------------------------------------------------------------------------------------

def atk_case(i: int, *attrs: dict) -> dict:
    tensor = {"type": "tensor", "required": True, "dtype": "fp32", "shape": [4], "range_values": [-1, 1]}
    return {"id": i, "name": "n", "aclnn_name": "aclnnKindsEcho", "api_type": "t", "standard": {},
            "inputs": [{"name": "gradOutput", **tensor}, {"name": "self", **tensor}, *attrs]}


def atk_attr(name: str, value, type_: str = "attr", dtype: str | None = "double") -> dict:
    return {"name": name, "type": type_, "required": True, "dtype": dtype, "shape": None, "range_values": value}


def test_atk_double_and_float_attributes_import(echo, tmp_path):
    """ops-nn writes eps as an attr of dtype double (BatchNormBackward: [0.0, 1.0], drawn per case; DeepNorm:
    the string "1e-6"); a scalar of dtype fp32 or a type named after the dtype is the same value."""
    cases = [atk_case(0, atk_attr("eps", 0.1), atk_attr("momentum", 0.1, "attr", "float")),
             atk_case(1, atk_attr("eps", "1e-6"), atk_attr("momentum", [0.25], "scalar", "fp32")),
             atk_case(2, atk_attr("eps", [0.0, 1.0]), atk_attr("momentum", "inf", "float32", None)),
             atk_case(3, atk_attr("eps", "nan", "scalar", "fp64"), atk_attr("momentum", -2, "double", "float64"))]
    f = tmp_path / "atk_echo.json"
    f.write_text(json.dumps(cases))
    result = importers.import_file(f, f.read_bytes(), validate=cases_from_doc)
    got = {c.name: c.attribute_values for d in result.documents for c in cases_from_doc("t", d)}
    assert got["atk_echo-0"] == {"eps": 0.1, "momentum": F32_TENTH}
    assert got["atk_echo-1"] == {"eps": 1e-6, "momentum": 0.25}
    drawn = got["atk_echo-2"]["eps"]
    assert 0.0 <= drawn <= 1.0 and got["atk_echo-2"]["momentum"] == math.inf
    again = importers.import_file(f, f.read_bytes(), validate=cases_from_doc)
    assert [c for d in again.documents for c in d["cases"]][2] == [c for d in result.documents for c in d["cases"]][2]
    assert math.isnan(got["atk_echo-3"]["eps"]) and got["atk_echo-3"]["momentum"] == -2.0


@pytest.mark.parametrize("entry, reason", [
    (atk_attr("eps", 1, "attr", "int64"), "eps is a C double of aclnnKindsEcho, given as ATK dtype 'int64'"),
    (atk_attr("eps", 1, "attrs"), "eps is a C double of aclnnKindsEcho, given as ATK type 'attrs'"),
    (atk_attr("eps", [1, 2, 3]), "a double attribute's range_values is a value or [lo, hi]"),
    (atk_attr("eps", "small"), "expected a number"),
])
def test_atk_what_a_double_cannot_be_is_one_reason(echo, tmp_path, entry, reason):
    f = tmp_path / "atk_echo.json"
    f.write_text(json.dumps([atk_case(0, entry)]))
    with pytest.raises(CaseError) as exc:
        importers.import_file(f, f.read_bytes(), validate=cases_from_doc)
    assert reason in str(exc.value) and "\n" not in str(exc.value)


# ---- the runner ---------------------------------------------------------------------------------------------

def test_request_lines_are_hex_floats():
    def line(kind, value):
        return attribute_line(AttrSpec("a", kind), value, Path("case"))
    assert [line("double", 0.1), line("double", 5e-324), line("double", -math.inf), line("double", math.nan),
            line("float", F32_TENTH), line("double", -0.0), line("float", None)] == [
        "double 0x1.999999999999ap-4", "double 0x0.0000000000001p-1022", "double -inf", "double nan",
        "float 0x1.99999a0000000p-4", "double -0x0.0p+0", "null"]




@pytest.fixture(scope="module", params=["plain", "asan"])
def runner(request, tmp_path_factory) -> Path:
    """aclnn-runner for aclnnKindsEcho (its implementation compiled in), against the stub CANN; asan: both
    built with -fsanitize=address,undefined."""
    if tools_missing():
        pytest.skip(f"cannot build C++ here: {tools_missing()}")
    asan = request.param == "asan"
    project = tmp_path_factory.mktemp("echo") / "h"
    with echo_registered() as op:
        write_harness(project, [op])
    shutil.copytree(USER_OPS / "include" / "aclnnop", project / "src" / "aclnnop")
    shutil.copy(USER_OPS / "src" / "kinds_echo.cpp", project / "src")
    with open(project / "CMakeLists.txt", "a") as f:
        f.write("target_sources(aclnn-runner PRIVATE src/kinds_echo.cpp)\n")
    root = shared_stub_root(tmp_path_factory, sanitize=asan)
    return build_runner(project, tmp_path_factory.mktemp("build-echo"), root, SANITIZE if asan else "",
                        cache=object_cache(tmp_path_factory))


def drive(runner: Path, text: str) -> tuple[list[str], list[str]]:
    """The runner's replies (after 'ready') and the echo lines it printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACLNN_STUB_")}
    done = subprocess.run([str(runner)], input=text, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode in (0, 2), done.stderr[-3000:]
    assert "Sanitizer" not in done.stderr and "runtime error" not in done.stderr, done.stderr[-3000:]
    echoes = [line for line in done.stderr.splitlines() if line.startswith("kinds-echo ")]
    return done.stdout.splitlines()[1:], echoes


def test_the_runner_receives_exactly_the_bits(runner, tmp_path):
    """From a case file through gen's manifest and run's request to the API's arguments: the double's 64 bits
    and the float's 32, for the values a decimal round trip or a float32 detour would change."""
    eps = [0.1, 1e-5, 5e-324, 2.2250738585072014e-308, 1e40, -0.0, math.inf]  # (1e40: beyond float32)
    momentum = [0.1, 1e-45, 3.4028234663852886e38, "-inf"]
    cases = tmp_path / "c.yaml"
    cases.write_text("op: aclnnKindsEcho\ncases:\n" + "".join(  # (repr: 0.1, 5e-324, inf, as YAML or as strings)
        f"  - {{name: e{i}, dtype: float32, shape: [2], attributes: {{eps: '{e!r}', momentum: '{m}'}}}}\n"
        for i, (e, m) in enumerate(zip(eps, momentum * 2))))
    out = tmp_path / "out"
    r = cli("gen", cases, "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    loaded = {}
    with echo_registered():  # (M.load looks the op up)
        for d in sorted(p.parent for p in out.glob("*/case.json")):
            m = M.load(d)
            loaded[m.case_id] = (dict(m.attributes), request(m))
    replies, echoes = drive(runner, "".join(text for _, text in loaded.values()))
    assert replies == [f"done {case_id} 0" for case_id in loaded], replies
    want = [f"kinds-echo eps={bits(a['eps'])} momentum={np.float32(a['momentum']).view(np.uint32):08x}"
            for a, _ in loaded.values()]
    assert echoes == want and len(echoes) == len(eps)
    assert {a["eps"] for a, _ in loaded.values()} >= {0.1, 1e-5, 5e-324}


def test_a_wrong_kind_is_an_error_and_a_malformed_or_inexact_number_is_fatal(runner, tmp_path):
    """A float where the API takes a double: 'error', the runner goes on. A number strtod would round, or a
    float that float32 does not hold: 'fatal' (run writes neither)."""
    def case(name: str, eps: str, momentum: str) -> str:
        path = tmp_path / f"{name}.bin"
        np.zeros(2, np.float32).tofile(path)
        tensor = f"tensor {{}} 0 2 4 1 2 1 0 1 2 {path}"
        return "\n".join([f"case {name}", "op aclnnKindsEcho", tensor.format("in"), tensor.format("in"), eps, momentum,
                          tensor.format("out"), f"status {tmp_path / (name + '-status.txt')}", "end", ""])
    replies, echoes = drive(runner, case("k", "float 0x1p-1", "float 0x1p-1") + case("ok", "double 0x1p-1", "float nan"))
    assert replies[0].startswith("error k ") and "takes 'd'" in replies[0] and replies[1:] == ["done ok 0"], replies
    assert echoes == ["kinds-echo eps=3fe0000000000000 momentum=7fc00000"]
    for eps, momentum, want in (("double 0.1x", "float 0x1p-1", "fatal malformed number"),
                                ("double 1e-400", "float 0x1p-1", "fatal malformed number"),
                                ("double 0x1p-1 0x1p-1", "float 0x1p-1", "fatal malformed number"),
                                ("double 0x1p-1", "float 0x1.999999999999ap-4", "fatal not a float32 value"),
                                ("double 0x1p-1", "float 0x1p+200", "fatal not a float32 value")):
        replies, echoes = drive(runner, case("bad", eps, momentum))
        assert len(replies) == 1 and replies[0].startswith(want) and not echoes, (eps, momentum, replies)
