"""Findings of hostile use, round 4 (issue 31), each a test that failed before its fix: one clear line, exit 2,
never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import one_line_error, run_cli, write_yaml

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("command", ["gen", "convert"])
def test_an_atk_tensor_given_as_type_attr_is_one_line(tmp_path, command):
    """Finding 12: a StopIteration traceback."""
    case = json.loads((DATA / "atk_small.json").read_text())[0]
    case["inputs"][1]["type"] = "attr"
    f = tmp_path / "atk_aclnnSiluBackward.json"
    f.write_text(json.dumps([case]))
    one_line_error(run_cli(command, f, "-o", tmp_path / "out"), "key 'inputs[1].type'",
                   "self is a tensor of aclnnSiluBackward, given as ATK type 'attr'")


USER_OP = """\
import numpy as np
from aclnn_cli.ops import OpSpec, Reference, TensorSpec, register

def reference(t):
    v = t["gradOutput"] * 2.0
    return Reference(v, np.zeros_like(v), np.abs(v))

register(OpSpec(name="aclnnMyProbe", key="my_probe", summary="x", formula="x",
    tensors=(TensorSpec("gradOutput", "input", {fill}), TensorSpec("self", "input", {{"normal": [0, 1]}}),
             TensorSpec("out", "output", {{"constant": 0}})),
    products={products}, dims=(0, 8), empty_ok=True, reference=reference))
"""


@pytest.mark.parametrize("fill, products, shown", [
    ('{"normal": [0, 1]}', '{"Z9": ("float32",)}', "unknown product 'Z9'"),
    ('{"normal": [0, 1e308]}', '{"A2": ("float32", "float16")}', "default_fill"),
    ('{"uniform": [0, 1e6]}', '{"A2": ("float16",)}', "(the tensor may be float16)"),
])
def test_a_user_op_that_no_case_could_use_is_refused_when_it_loads(tmp_path, fill, products, shown):
    """Finding 14: accepted and listed, refused only when a case used it."""
    from test_user_modules import cli, one_line

    op = tmp_path / "my_probe.py"
    op.write_text(USER_OP.format(fill=fill, products=products))
    line = one_line(cli("--ops", op, "ops"))
    assert shown in line and "my_probe.py" in line, line


SCALED_OP = """\
import numpy as np
from aclnn_cli.ops import OpSpec, Reference, TensorSpec, register

def reference(t):
    v = t["gradOut"] * 2
    return Reference(v, np.zeros_like(v), np.full_like(v, {scale}))

register(OpSpec(name="aclnnMyScaled", key="my_scaled", summary="x", formula="x",
    tensors=(TensorSpec("gradOut", "input", {{"normal": [0, 1]}}), TensorSpec("gradInput", "output", {{"constant": 0}})),
    products={{"950": ("float32",)}}, dims=(1, 8), empty_ok=False, reference=reference))
"""


@pytest.mark.parametrize("scale, shown", [("np.inf", "a scale of inf"), ("np.nan", "a scale of nan"),
                                          ("-1.0", "a scale of -1.0"), ("1e300", "a scale of 1e+300")])
def test_a_reference_scale_that_would_open_the_gate_is_one_line(tmp_path, scale, shown):
    """Finding 1: a scale of inf (or 1e300) made every error relative 0: a kernel writing -1.5 x + 0.25 passed."""
    from test_user_modules import cli, one_line

    op = tmp_path / "my_scaled.py"
    op.write_text(SCALED_OP.format(scale=scale))
    cases = tmp_path / "c.yaml"
    cases.write_text('op: aclnnMyScaled\ndefaults: {dtype: float32, seed: 1, product: "950"}\ncases:\n'
                     '  - {name: a, shape: [4, 5]}\n')
    line = one_line(cli("--ops", op, "gen", cases, "-o", tmp_path / "out"))
    assert "op aclnnMyScaled: reference returned gradInput with " + shown in line, line


@pytest.fixture(scope="module")
def passing_suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("suite")
    text = ("op: aclnnSiluBackward\ndefaults: {seed: 2}\ncases:\n"
            "  - {name: a, dtype: [float32, float16, bfloat16], shape: [[3], [4], [5], [6], [7], [8], [9], [10]]}\n")
    out = root / "out"
    assert run_cli("gen", write_yaml(root, text), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    return out


def _verify_process(out, tmp_path, stdout):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "ACLNN_CLI_OPS"}
    return subprocess.Popen([sys.executable, "-m", "aclnn_cli", "verify", str(out), "-v", "-j", "2", "--json",
                             str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml")], stdout=stdout,
                            stderr=subprocess.PIPE, env=env)


def test_a_reader_that_goes_away_loses_no_result_file_and_no_verdict(passing_suite, tmp_path):
    """Finding 4: `verify ... | head -1` exited 1 with no message and wrote neither file, at times."""
    import subprocess

    proc = _verify_process(passing_suite, tmp_path, subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()  # (as head does after its line)
    proc.wait(timeout=120)
    assert proc.returncode == 0, proc.stderr.read()[-2000:]
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["PASS"] == 24
    assert (tmp_path / "r.xml").read_text().count("<testcase") == 24


def test_a_full_standard_output_is_one_line_after_the_files(passing_suite, tmp_path):
    proc = _verify_process(passing_suite, tmp_path, open("/dev/full", "w"))
    proc.wait(timeout=120)
    err = proc.stderr.read().decode()
    assert proc.returncode == 2 and "cannot write the summary to standard output" in err and "Traceback" not in err
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["PASS"] == 24


@pytest.mark.parametrize("command", ["emulate", "run"])
def test_a_case_directory_linked_outside_out_is_refused_by_commands_that_write(tmp_path, command):
    """Finding 13: run and emulate wrote dumps and status.txt outside OUT, exit 0."""
    import os
    import sys

    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, "op: aclnnSiluBackward\ncases:\n  - {name: a, shape: [4]}\n"), "-o",
                   out).exit_code == 0
    case = next(p for p in out.iterdir() if p.is_dir())
    elsewhere = tmp_path / "elsewhere"
    case.rename(elsewhere)
    case.symlink_to(elsewhere, target_is_directory=True)
    args = [command, out]
    if command == "run":
        runner = tmp_path / "runner.sh"
        runner.write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).with_name('fake_runner.py')} \"$@\"\n")
        runner.chmod(0o755)
        args += ["--runner", runner]
    one_line_error(run_cli(*args), "the case directory is a symbolic link, or lies outside OUT")
    assert not any(n.endswith(".dump.bin") or n == "status.txt" for n in os.listdir(elsewhere))


def test_a_null_attribute_is_named_by_its_own_key(tmp_path):
    """Finding 15: `dim: null` was blamed on tensors.*.nullptr."""
    text = 'op: aclnnSoftmaxBackward\ndefaults: {product: "950"}\ncases:\n  - {name: nodim, shape: [3, 4], attributes: {dim: null}}\n'
    one_line_error(run_cli("gen", write_yaml(tmp_path, text), "-o", tmp_path / "out"), "case 'nodim': key 'attributes.dim'",
                   "dim is a null pointer")


def test_refuse_links_resolves_each_parent_once_as_realpath_resolves_each_case(tmp_path, monkeypatch):
    """refuse_links resolves a case's parent once for all its cases (realpath per case was a system call per path
    component for every case): what it refuses is still what dirname(realpath(case)) != realpath(OUT) refused, through
    symbolic links above OUT, relative paths, "..", ".", trailing slashes, a case linked elsewhere and one missing."""
    import os

    from aclnn_cli.casedir.dirs import refuse_links
    from aclnn_cli.errors import UserError

    real = tmp_path / "real"
    for d in ("out/a", "out/b", "other/c"):
        (real / d).mkdir(parents=True)
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    (real / "out" / "away").symlink_to(real / "other" / "c", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    cases = ["link/out/a", "link/out/b/", "link/out/a/.", "link/out/a/..", "link/out/away", "link/out/missing",
             "link/other/c", "link/out/../other/c", "link/out/b/../a", "real/out/a", str(real / "out/b"), "."]
    seen = set()
    for root in ("link/out", str(tmp_path / "link/out"), "real/out", "link/other"):
        top = os.path.realpath(root)
        for case in cases:
            was = os.path.islink(case) or os.path.dirname(os.path.realpath(case)) != top  # (the per-case resolution)
            for given in (case, Path(case)):  # (as a str the name keeps its "/", "." or "/."; a Path drops them)
                try:
                    refuse_links(Path(root), [given])
                    refused = False
                except UserError:
                    refused = True
                assert refused == was, (root, given)
                seen.add(refused)
        both = [c for c in cases if not (os.path.islink(c) or os.path.dirname(os.path.realpath(c)) != top)]
        refuse_links(Path(root), both + both)  # (parents remembered across cases: each accepted again)
    assert seen == {True, False}
