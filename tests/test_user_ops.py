"""A user op declared outside the package (tests/user_ops) runs the whole loop.

Every run is a fresh CLI process, as a user's would be (loading the op there keeps this test
process's registry to the bundled ops). The goldens are checked against values computed here
from the inputs (dy inside the open window, else 0), not against the tool's own reference.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D

from cann_build import tools_missing
from clifork import cli_process
from helpers import logical

DATA = Path(__file__).parent / "user_ops"
OP_FILE = DATA / "my_hardtanh_backward.py"
CASES = DATA / "my_hardtanh_backward.yaml"


def cli(*args, env_extra: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ACLNN_CLI_OPS"}
    env.update(env_extra or {})
    return cli_process(*map(str, args), env=env, cwd=cwd)


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("user") / "out"
    done = cli("--ops", OP_FILE, "gen", CASES, "-o", out)
    assert done.returncode == 0, done.stderr
    return out


def test_gen_emulate_verify_with_a_user_op(generated, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(generated, out)
    for case in out.glob("my_hardtanh_backward-*"):
        m = json.loads((case / "case.json").read_text())
        if m["expect_status"] != 0:
            continue
        assert m["golden"]["method"] == ("float64, certified rounding to the output dtype, exact through the "
                                         "reference on Fractions")  # (its bound is 0: every element certified)
        assert [a["name"] for a in m["attributes"]] == ["min", "max"]
        attrs = {a["name"]: a["value"] for a in m["attributes"]}
        t = {x["name"]: x for x in m["tensors"]}
        dy, x = logical(case, t["gradOutput"]).astype(np.float64), logical(case, t["self"]).astype(np.float64)
        want = np.where((x > attrs["min"]) & (x < attrs["max"]), dy, 0.0)
        dtype = D.lookup(t["out"]["dtype"])
        got = logical(case, t["out"], "golden").astype(np.float64)
        np.testing.assert_array_equal(got, want.astype(dtype.np_dtype).astype(np.float64))
    assert cli("--ops", OP_FILE, "emulate", out, "--jobs", "2").returncode == 0  # workers load the op too
    done = cli("--ops", OP_FILE, "verify", out, "--json", out / "v.json")
    assert done.returncode == 0, done.stdout
    statuses = {c["status"] for c in json.loads((out / "v.json").read_text())["cases"]}
    assert statuses == {"PASS"}


def test_the_environment_variable_and_the_ops_own_defect(generated, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(generated, out)
    env = {"ACLNN_CLI_OPS": str(DATA)}  # a folder: every module in it
    assert cli("emulate", out, "--defect", "inclusive-window", env_extra=env).returncode == 0
    done = cli("verify", out, "--json", out / "v.json", env_extra=env)
    failed = {c["case_id"] for c in json.loads((out / "v.json").read_text())["cases"] if c["status"] == "FAIL"}
    assert done.returncode == 1 and failed and all("window_ends" in c for c in failed)
    assert "inclusive-window" in cli("defects", env_extra=env).stdout


def test_without_the_op_its_cases_are_one_clear_error(tmp_path):
    done = cli("gen", CASES, "-o", tmp_path / "out")
    assert done.returncode == 2 and "unknown op 'aclnnMyHardtanhBackward'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_broken_op_file_is_one_line(tmp_path):
    bad = tmp_path / "bad_op.py"
    bad.write_text("from aclnn_cli.ops import register\nregister(None.name)\n")
    done = cli("--ops", bad, "ops")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "loading the op module failed: AttributeError" in done.stderr


@pytest.mark.skipif(tools_missing() is not None, reason=f"cannot compile C++ here: {tools_missing()}")
def test_the_harness_glue_of_a_user_op_compiles(tmp_path):
    h = tmp_path / "h"
    assert cli("--ops", OP_FILE, "harness", "-o", h, "--op", "aclnnMyHardtanhBackward").returncode == 0  # its glue only
    ops_cpp = (h / "src" / "ops.cpp").read_text()
    assert ('aclnnMyHardtanhBackwardGetWorkspaceSize(a.tensor(0), a.tensor(1), a.scalar(2), a.scalar(3), a.tensor(4), '
            'workspaceSize, executor)') in ops_cpp
    assert '{"aclnnMyHardtanhBackward", 5, "ttsst", aclnnMyHardtanhBackward_phase_one, aclnnMyHardtanhBackward}' in ops_cpp
    stub = Path(__file__).parent / "stub_cann" / "include"
    for source in ("ops.cpp", "runner.cpp", "request.cpp"):
        done = subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                               f"-I{h / 'src'}", f"-I{DATA / 'include'}", f"-I{stub}", f"-I{stub / 'aclnn'}",
                               f"-I{stub / 'aclnnop'}",  # (aclnn_util.h, beside the toolkit's own op headers)
                               str(h / "src" / source)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_an_edited_op_declaration_regenerates_its_cases(tmp_path):
    """The fingerprint covers the file that declares the op: gen skips unchanged cases, but an edit to
    the declaration (here a changed special-values note; a contract rule would be the same) makes gen
    write them again, with a new fingerprint in each manifest."""
    op_file = tmp_path / "my_hardtanh_backward.py"
    shutil.copy(OP_FILE, op_file)
    shutil.copytree(DATA / "include", tmp_path / "include")
    out = tmp_path / "out"
    assert cli("--ops", op_file, "gen", CASES, "-o", out).returncode == 0
    before = json.loads(next(out.iterdir()).joinpath("case.json").read_text())["fingerprint"]
    again = cli("--ops", op_file, "gen", CASES, "-o", out)
    assert "generated 0 cases" in again.stdout + again.stderr
    op_file.write_text(op_file.read_text() + "\n# edited: a declaration change\n")
    edited = cli("--ops", op_file, "gen", CASES, "-o", out)
    assert edited.returncode == 0 and "generated 24 cases" in edited.stdout + edited.stderr
    after = json.loads(next(out.iterdir()).joinpath("case.json").read_text())["fingerprint"]
    assert after != before


def test_a_variant_named_like_a_defect_but_declared_legitimate_is_refused(tmp_path):
    """A variant's kind is declared; one that contradicts the catalogue's entry of the same name (here a
    legitimate sign-slip) is one error line, not silently ignored."""
    text = OP_FILE.read_text()
    text = text.replace("@defect\ndef _inclusive", "@legitimate\ndef _inclusive").replace(
        "import AttrSpec, OpSpec, Reference, TensorSpec, defect,", "import AttrSpec, OpSpec, Reference, TensorSpec, legitimate,")
    text = text.replace('"inclusive-window": _inclusive', '"sign-slip": _inclusive')
    op_file = tmp_path / "conflict.py"
    op_file.write_text(text)
    done = cli("--ops", op_file, "defects")
    assert done.returncode == 2
    assert "variant 'sign-slip' is Legitimate here but a Defect in the catalogue" in done.stderr
    assert "Traceback" not in done.stderr


def test_emulate_of_an_op_without_a_kernel_says_it_replays_the_reference(generated, tmp_path):
    """Such a loop cannot catch a wrong golden: emulate says so on stderr and in its JSON (issue 19, item 8);
    an op with a kernel of its own (the bundled ones) gets no such line."""
    out = tmp_path / "out"
    shutil.copytree(generated, out)
    done = cli("--ops", OP_FILE, "emulate", out, "--json", tmp_path / "e.json")
    assert done.returncode == 0, done.stderr
    assert "warning: aclnnMyHardtanhBackward declares no kernel: emulate replayed its reference" in done.stderr
    report = json.loads((tmp_path / "e.json").read_text())
    assert report["replayed_reference"] == ["aclnnMyHardtanhBackward"] and report["emulated"] > 0
    bundled = tmp_path / "b"
    assert cli("gen", Path(__file__).parents[1] / "aclnn_cli/cases/bundled/silu_backward.yaml", "-o", bundled,
               "--case", "silu_backward-*float32*").returncode == 0
    done = cli("emulate", bundled, "--json", tmp_path / "b.json")
    assert "warning" not in done.stderr and json.loads((tmp_path / "b.json").read_text())["replayed_reference"] == []
