"""`aclnn-cli run`'s driver: crash and timeout isolation, stale results, products, bad runners.

Plumbing tests: the runner here is tests/fake_runner.py, which speaks the harness contract but
computes nothing (a done case's dump is its initial output storage). The real C++ runner on
the stub CANN runtime is tested in test_harness_e2e.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from aclnn_cli.casedir import manifest as M

from aclnn_cli.casedir import dirs as casedirs
from aclnn_cli.device.run import RUN_VERDICT_FILE, RunOptions, read_verdict, request, run_cases, soc_product
from aclnn_cli.errors import UserError
from helpers import fresh_copy, generated, run_cli, write_yaml

FAKE = Path(__file__).with_name("fake_runner.py")

SUITE = """
op: aclnnSiluBackward
defaults: {dtype: float32, seed: 5}
cases:
  - name: a
    shape: [[3], [4], [5], [6]]
  - name: strided
    shape: [3, 4]
    tensors: {gradInput: {layout: {step: 2}}}
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    return generated(tmp_path_factory.mktemp("run"), SUITE)


@pytest.fixture()
def out(suite, tmp_path) -> Path:
    return fresh_copy(suite, tmp_path)


def runner_script(tmp_path: Path) -> Path:
    """An executable wrapper, as a built runner would be one file."""
    path = tmp_path / "runner"
    path.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    path.chmod(0o755)
    return path


def manifests(out: Path):
    loaded, broken = M.load_all(casedirs.find_cases(out))
    assert not broken
    return sorted(loaded, key=lambda m: m.case_id)


def opts(tmp_path, **env) -> RunOptions:
    return RunOptions(runner=runner_script(tmp_path), timeout=5.0, env={**os.environ, **env})


def test_request_names_every_tensor_in_api_order(out):
    m = next(m for m in manifests(out) if "strided" in m.case_id)
    lines = request(m).splitlines()
    assert lines[0] == f"case {m.case_id}" and lines[1] == "op aclnnSiluBackward" and lines[-1] == "end"
    tensors = [line for line in lines if line.startswith("tensor ")]
    assert [t.split()[1] for t in tensors] == ["in", "in", "out"]
    out_fields = tensors[2].split()
    layout = m.output.layout
    # acl dtype 0 (ACL_FLOAT), format 2 (ND), 4 bytes, ndim 2, dims, strides, offset, 1-D storage
    assert out_fields[2:5] == ["0", "2", "4"]
    assert out_fields[5:13] == ["2", *map(str, layout.shape), *map(str, layout.strides), str(layout.offset),
                                "1", str(layout.storage_size)]
    assert layout.strides != (4, 1) and layout.storage_size > 12  # a real view, not packed
    # a packed tensor's storage dims are its view shape, as the docs' examples pass them
    packed = tensors[0].split()
    assert packed[5:14] == ["2", "3", "4", "4", "1", "0", "2", "3", "4"] and packed[14].endswith("/gradOutput.bin")
    assert lines[lines.index(tensors[2]) + 1].startswith("dump /")


def test_a_crash_costs_only_its_case(out, tmp_path):
    cases = manifests(out)
    victim = cases[1]
    (victim.dir / "gradInput.dump.bin").write_bytes(b"stale")  # an earlier run's dump must not survive
    summary = run_cases(cases, opts(tmp_path, FAKE_CRASH=victim.case_id))
    assert summary.failed[0][:2] == (victim.case_id, "CRASH")
    assert "SIGSEGV" in summary.failed[0][2] and f"running {victim.case_id}" in summary.failed[0][2]
    assert summary.statuses == {0: len(cases) - 1} and summary.runners_started == 2
    assert not (victim.dir / "gradInput.dump.bin").exists()
    assert read_verdict(victim.dir)[0] == "CRASH"
    assert all(read_verdict(m.dir) is None and (m.dir / "gradInput.dump.bin").exists() for m in cases if m is not victim)


def test_a_hang_costs_only_its_case(out, tmp_path):
    cases = manifests(out)
    victim = cases[0]
    summary = run_cases(cases, RunOptions(runner=runner_script(tmp_path), timeout=1.0,
                                          env={**os.environ, "FAKE_HANG": victim.case_id}))
    assert [(c, v) for c, v, _ in summary.failed] == [(victim.case_id, "TIMEOUT")]
    assert summary.statuses == {0: len(cases) - 1}
    assert read_verdict(victim.dir)[0] == "TIMEOUT"


def test_an_error_answer_keeps_the_runner(out, tmp_path):
    cases = manifests(out)
    summary = run_cases(cases, opts(tmp_path, FAKE_ERROR=cases[2].case_id))
    assert summary.failed == [(cases[2].case_id, "ERROR", "aclrtMalloc returned 207001")]
    assert read_verdict(cases[2].dir) == ("ERROR", "aclrtMalloc returned 207001")
    assert summary.runners_started == 1


def test_a_rerun_clears_the_verdict(out, tmp_path):
    cases = manifests(out)
    run_cases(cases, opts(tmp_path, FAKE_CRASH=cases[0].case_id))
    assert (cases[0].dir / RUN_VERDICT_FILE).exists()
    summary = run_cases(cases, opts(tmp_path))
    assert not summary.failed and not (cases[0].dir / RUN_VERDICT_FILE).exists()


def test_cases_of_another_product_are_left(out, tmp_path):
    summary = run_cases(manifests(out), opts(tmp_path, FAKE_SOC="Ascend910_9391"))
    assert summary.product == "A3" and summary.ran == 0 and summary.other_products == {"A2": 5}


@pytest.mark.parametrize("soc, product", [("Ascend910B1", "A2"), ("Ascend910B4-1", "A2"), ("Ascend910_9391", "A3"),
                                          ("Ascend950PR_9599", "950"), ("Ascend910A", "910"), ("Ascend910ProB", "910"),
                                          ("Ascend310P3", "310P"), ("Ascend310B1", None), ("unknown", None)])
def test_soc_names(soc, product):
    assert soc_product(soc) == product


def test_unknown_soc_needs_product(out, tmp_path):
    with pytest.raises(UserError, match="--product"):
        run_cases(manifests(out), opts(tmp_path, FAKE_SOC="Mystery1"))
    summary = run_cases(manifests(out), RunOptions(runner=runner_script(tmp_path), product="A2",
                                                   env={**os.environ, "FAKE_SOC": "Mystery1"}))
    assert summary.ran == 5


def test_a_runner_that_cannot_start_is_one_error(out, tmp_path):
    with pytest.raises(UserError, match="did not start: the runner exited with status 3; it printed: cannot open"):
        run_cases(manifests(out), opts(tmp_path, FAKE_FAIL_START="1"))


def test_cli_exit_codes_and_summary(out, tmp_path, monkeypatch):
    runner = runner_script(tmp_path)
    result = run_cli("run", out, "--runner", runner)
    assert result.exit_code == 0, result.output
    assert "ran 5 cases on Ascend910B1 (A2) with 1 runner process: 5 returned 0" in result.output
    victim = manifests(out)[3].case_id
    monkeypatch.setenv("FAKE_CRASH", victim)
    result = run_cli("run", out, "--runner", runner, "--case", "silu*")
    assert result.exit_code == 1 and f"CRASH    {victim}: the runner killed by SIGSEGV" in result.output
    result = run_cli("run", out, "--runner", tmp_path / "nothing")
    assert result.exit_code == 2 and "no runner here" in result.output


def test_a_runner_that_ends_badly_is_reported(out, tmp_path):
    summary = run_cases(manifests(out), opts(tmp_path, FAKE_EXIT="23"))
    assert summary.statuses == {0: 5} and not summary.failed
    assert summary.ending_problems == ["the runner exited with status 23 at the end; its last output:\n"
                                       "LeakSanitizer: detected memory leaks"]


def test_a_runner_of_another_protocol_is_refused(out, tmp_path):
    with pytest.raises(UserError, match="run 'aclnn-cli harness' again and rebuild"):
        run_cases(manifests(out), opts(tmp_path, FAKE_PROTOCOL="aclnn-runner/0"))


def test_no_fresh_runner_leaves_the_rest_not_run(out, tmp_path, monkeypatch):
    """A crash, then every restart fails: the remaining cases are ERROR (not run), the run still ends cleanly."""
    import aclnn_cli.device.run as DR

    cases = manifests(out)
    monkeypatch.setattr(DR.time, "sleep", lambda s: None)
    flag = tmp_path / "started"
    # the first runner starts; every later one fails to start
    wrapper = tmp_path / "once"
    wrapper.write_text(f"#!/bin/sh\nif [ -e {flag} ]; then echo busy >&2; exit 5; fi\ntouch {flag}\n"
                       f"exec {sys.executable} {FAKE} \"$@\"\n")
    wrapper.chmod(0o755)
    summary = run_cases(cases, RunOptions(runner=wrapper, env={**os.environ, "FAKE_CRASH": cases[1].case_id}))
    assert [v for _, v, _ in summary.failed] == ["CRASH", "ERROR", "ERROR", "ERROR"]
    assert "the runner did not start: the runner exited with status 5; it printed: busy" in summary.failed[1][2]
    assert summary.failed[1][2].startswith("not run: ")
    assert summary.statuses == {0: 1} and summary.runners_started == 1


def test_verify_reports_the_run_verdict_and_emulate_replaces_it(out, tmp_path):
    cases = manifests(out)
    run_cases(cases, opts(tmp_path, FAKE_CRASH=cases[0].case_id))
    result = run_cli("verify", out, "--json", tmp_path / "v.json")
    import json

    data = {c["case_id"]: c for c in json.loads((tmp_path / "v.json").read_text())["cases"]}
    assert result.exit_code == 1 and data[cases[0].case_id]["status"] == "CRASH"
    assert "SIGSEGV" in data[cases[0].case_id]["reason"]
    assert run_cli("emulate", out).exit_code == 0
    assert not (cases[0].dir / RUN_VERDICT_FILE).exists()
    assert run_cli("verify", out).exit_code == 0


def test_attributes_reach_the_runner_exactly_in_api_order(tmp_path):
    """Scalars as hex floats of the float32 value the device receives (0.01 -> 0x1.47ae14p-7), inf included."""
    text = ("op: aclnnLeakyReluBackward\ncases:\n  - {name: a, shape: [4], dtype: float32,\n"
            "     attributes: {negativeSlope: 0.01, selfIsResult: true}}\n"
            "  - {name: b, shape: [4], dtype: float32, attributes: {negativeSlope: inf}}\n")
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    a, b = (request(m).splitlines() for m in manifests(out))
    kinds = [line.split()[0] for line in a[2:-2]]
    assert kinds == ["tensor", "tensor", "scalar", "bool", "tensor", "dump"]
    assert a[4] == "scalar 0 0x1.47ae140000000p-7" and a[5] == "bool 1"
    assert b[4] == "scalar 0 inf" and b[5] == "bool 0"


def test_harness_op_selection(tmp_path):
    """--op picks ops by API name or key (one adapter each, once); an unknown name is one line, exit 2."""
    h = tmp_path / "h"
    assert run_cli("harness", "-o", h, "--op", "silu_backward", "--op", "aclnnSiluBackward",
                   "--op", "aclnnSwishBackward").exit_code == 0
    ops_cpp = (h / "src" / "ops.cpp").read_text()
    assert ops_cpp.count("_phase_one(CallArgs") == 2 and "aclnnFastGeluBackward" not in ops_cpp
    bad = run_cli("harness", "-o", tmp_path / "b", "--op", "nope")
    assert bad.exit_code == 2 and "--op: unknown operator 'nope'" in bad.output and "Traceback" not in bad.output
