"""The gate against the defect catalogue: the default catches every defect and passes every legitimate kernel."""

from __future__ import annotations

import json
import os
from collections import Counter
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from aclnn_cli.device.defects import CATALOGUE
from aclnn_cli.judge.matrix import defect_matrix
from aclnn_cli.standards.rules import DEFAULT_STANDARD, STANDARDS

from helpers import run_cli, write_yaml
from clifork import cli_process


@pytest.fixture(scope="module")
def matrix(bundled_gen):
    """The defect matrix over the session's bundled suite (conftest.py; the matrix copies cases): every variant
    of the catalogue (the device's and every op's own) under the default standard, a defect stopping at its first
    failing case (`aclnn-cli matrix` counts them all), and the correct kernel under every standard. On one
    worker: make test's workers already fill the cores, and two cost 12 % more CPU (each its own working copies
    and emulation memo); test_two_workers_give_the_one_worker_table holds the table to the same on two."""
    return defect_matrix(bundled_gen, **MATRIX_OPTIONS, jobs=1)


MATRIX_OPTIONS = dict(standards=[DEFAULT_STANDARD], first_failure=True, correct_standards=list(STANDARDS))


@pytest.mark.slow
def test_full_defect_matrix_default_gate_catches_every_defect_without_false_alarms(matrix):
    """Every variant on every bundled positive case the matrix takes, judged by the default standard: each defect
    fails a case, no legitimate variant does."""
    table = matrix
    assert set(table) == {"(correct kernel)", *CATALOGUE}
    missed = [n for n, v in CATALOGUE.items() if not v.legit and table[n][DEFAULT_STANDARD] == 0]
    false_alarms = {n: table[n][DEFAULT_STANDARD] for n in ["(correct kernel)", *(n for n, v in CATALOGUE.items() if v.legit)]
                    if table[n][DEFAULT_STANDARD]}
    assert not missed and not false_alarms
    assert len([v for v in CATALOGUE.values() if not v.legit]) >= 12


@pytest.mark.slow
def test_matrix_has_a_column_per_standard_and_the_published_rules_cry_wolf(matrix):
    """The correct kernel's row under every standard: the published rules as written raise false alarms on a
    correct kernel, the reason for the default."""
    assert set(matrix["(correct kernel)"]) == set(STANDARDS)
    assert matrix["(correct kernel)"]["absolute-threshold"] > 0
    assert matrix["(correct kernel)"][DEFAULT_STANDARD] == 0
    assert all(set(row) == {DEFAULT_STANDARD} for name, row in matrix.items() if name != "(correct kernel)")


def test_two_workers_give_the_one_worker_table(tmp_path):
    """The correct kernel's cases shared among worker processes and the variants run on them, under the full
    matrix's options: the table one worker gives."""
    text = "op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: [float16, bfloat16], shape: [[300], [7, 5]], seed: 1}\n"
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    variants = ["partial-tile-unwritten", "round-half-away", "flush-subnormals"]
    one = defect_matrix(out, variants=variants, **MATRIX_OPTIONS, jobs=1)
    assert defect_matrix(out, variants=variants, **MATRIX_OPTIONS, jobs=2) == one
    assert one["partial-tile-unwritten"][DEFAULT_STANDARD] == 1 and set(one["(correct kernel)"]) == set(STANDARDS)


@pytest.fixture()
def broken(tmp_path):
    text = """
op: aclnnSiluBackward
cases:
  - {name: ok, dtype: bfloat16, shape: [64, 64], seed: 1}
  - {name: bad, dtype: float16, shape: [300], seed: 2}
"""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    assert run_cli("emulate", out, "--defect", "partial-tile-unwritten").exit_code == 0
    return tmp_path, out


def test_failing_case_report_shows_worst_elements_and_a_working_repro(broken):
    tmp, out = broken
    result = run_cli("verify", out)
    assert result.exit_code == 1
    text = result.output
    assert "FAIL silu_backward-bad" in text and "MERE" in text
    worst = [line for line in text.splitlines() if line.startswith("    [")]
    assert len(worst) == 5 and all("expected" in w and "ulp" in w and "gradOutput=" in w for w in worst)
    assert all(256 <= int(w.split("]")[0].strip(" [")) < 300 for w in worst)  # the unwritten last tile
    repro = next(line for line in text.splitlines() if "repro:" in line).split("repro: ")[1]
    assert repro.startswith("aclnn-cli gen ") and "--case silu_backward-bad" in repro
    gen_cmd, verify_cmd = (part.split()[1:] for part in repro.split(" && "))
    assert run_cli(*gen_cmd).exit_code == 0  # regenerating keeps the device's dump
    again = run_cli(*verify_cmd)
    assert again.exit_code == 1 and "FAIL silu_backward-bad" in again.output and "silu_backward-ok" not in again.output


def test_junit_json_and_csv_outputs(broken):
    tmp, out = broken
    junit, js, csvdir = tmp / "r.xml", tmp / "r.json", tmp / "csv"
    result = run_cli("verify", out, "--junit", junit, "--json", js, "--csv-errors", csvdir)
    assert result.exit_code == 1
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuite" and root.get("tests") == "2" and root.get("failures") == "1"
    cases = {tc.get("name"): tc for tc in root.findall("testcase")}
    assert cases["silu_backward-ok"].find("failure") is None
    failure = cases["silu_backward-bad"].find("failure")
    assert failure.get("type") == "FAIL" and "MERE" in failure.get("message") and "repro:" in failure.text
    data = json.loads(js.read_text())
    assert data["schema"] == "aclnn-cli/verify/4" and data["summary"] == {
        "total": 2, "PASS": 1, "FAIL": 1, "LAYOUT": 0, "MISTRUSTED": 0, "MISSING": 0, "STATUS": 0, "CRASH": 0, "TIMEOUT": 0,
        "ERROR": 0}
    bad = next(c for c in data["cases"] if c["status"] == "FAIL")
    assert {"metrics", "worst", "repro", "params", "reason"} <= set(bad)
    assert {"rmse", "error_balance", "max_ulp_error", "mean_ulp_error", "violations"} <= set(bad["metrics"])
    rows = (csvdir / "silu_backward-bad.csv").read_text().splitlines()
    assert rows[0] == "Index,Coords,ExpectOut,RealOut,FpDiff,RateDiff,UlpDiff"
    assert {int(r.split(",")[0]) for r in rows[1:]} <= set(range(256, 300)) and len(rows) > 30
    assert not (csvdir / "silu_backward-ok.csv").exists()


def test_mistrusted_is_a_warning_that_says_why_and_strict_makes_it_fail(tmp_path):
    text = """
op: aclnnHardsigmoidBackward
cases:
  - {name: outside, dtype: float32, shape: [100], inputs: {self: {uniform: [5, 9]}}}
  - {name: flat, dtype: float32, shape: [100], inputs: {self: {constant: 1.0}, gradOutput: {constant: 2.0}}}
  - {name: nograd, dtype: float32, shape: [100], inputs: {gradOutput: {constant: 0}}}
  - {name: nan_in, dtype: float32, shape: [100], inputs: {self: {constant: .nan}, gradOutput: {constant: 2.0}}}
"""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    result = run_cli("verify", out, "--json", tmp_path / "v.json")
    assert result.exit_code == 0, result.output  # a warning, as in benchdnn
    reasons = {c["case_id"]: (c["status"], c["reason"]) for c in json.loads((tmp_path / "v.json").read_text())["cases"]}
    # Zeros outside the window are the op's answer, which the kernel must get right: trusted.
    assert reasons["hardsigmoid_backward-outside"][0] == "PASS"
    # Special-value propagation (NaN in, +0 out for Hardsigmoid) is a real test too.
    assert reasons["hardsigmoid_backward-nan_in"][0] == "PASS"
    assert reasons["hardsigmoid_backward-flat"][0] == "MISTRUSTED" and "constant" in reasons["hardsigmoid_backward-flat"][1]
    assert reasons["hardsigmoid_backward-nograd"][0] == "MISTRUSTED" and "all zero" in reasons["hardsigmoid_backward-nograd"][1]
    assert run_cli("verify", out, "--strict").exit_code == 1


def test_standard_and_tolerance_per_case_and_per_run(tmp_path):
    text = """
op: aclnnLogSigmoidBackward
cases:
  - {name: strict, dtype: float16, shape: [4096], standard: bitwise}
  - {name: loose, dtype: float16, shape: [4096], standard: allclose, tolerance: {rtol: 0.5}}
"""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    assert run_cli("emulate", out, "--defect", "round-half-away").exit_code == 0
    run_cli("verify", out, "--json", tmp_path / "v.json")
    got = {c["case_id"]: c for c in json.loads((tmp_path / "v.json").read_text())["cases"]}
    assert got["log_sigmoid_backward-strict"]["standard"] == "bitwise"
    assert got["log_sigmoid_backward-loose"]["params"] == {"rtol": 0.5, "atol": 1e-5}
    result = run_cli("verify", out, "--standard", "allclose", "--rtol", "0.25", "--json", tmp_path / "w.json")
    assert all(c["params"]["rtol"] == 0.25 for c in json.loads((tmp_path / "w.json").read_text())["cases"])
    assert result.exit_code == 0
    bad = run_cli("verify", out, "--standard", "ulp", "--rtol", "0.1")
    assert bad.exit_code == 2 and "no tolerance 'rtol'" in bad.output
    typo = write_yaml(tmp_path, "op: aclnnLogSigmoidBackward\ncases:\n  - {name: t, shape: [4], tolerance: {rtl: 1}}\n", "t.yaml")
    assert run_cli("gen", typo, "-o", tmp_path / "o2").exit_code == 2


def _user_op(tmp_path, kind: str):
    """A copy of the worked user op whose one variant is declared `kind` ("defect", "legitimate" or "" for
    undeclared), under a name of its own."""
    import re
    from pathlib import Path

    text = (Path(__file__).parent / "user_ops" / "my_hardtanh_backward.py").read_text()
    text = text.replace("aclnnMyHardtanhBackward", "aclnnMyHardtanhBackward2").replace(
        '"my_hardtanh_backward"', '"my_hardtanh_backward2"')
    text = text.replace("@defect\ndef _inclusive(t):", (f"@{kind}\n" if kind else "") + "def _inclusive(t):")
    path = tmp_path / "op.py"
    path.write_text(text)
    return path


def _cli(*args) -> subprocess.CompletedProcess:
    """aclnn-cli in a process of its own: user ops load once per process."""
    env = {k: v for k, v in os.environ.items() if k != "ACLNN_CLI_OPS"}
    return cli_process(*map(str, args), env=env, timeout=120)


def test_the_catalogue_takes_a_user_ops_variants_from_the_registry(tmp_path):
    """The ops do not push their variants into the device's catalogue (it sits above them): it reads them."""
    r = _cli("--ops", _user_op(tmp_path, "defect"), "defects")
    assert r.returncode == 0, r.stderr
    assert "inclusive-window" in r.stdout and "aclnnMyHardtanhBackward2" in r.stdout.replace("\n", "")


def test_a_user_variant_without_its_kind_is_one_line_when_the_op_loads(tmp_path):
    module = _user_op(tmp_path, "")
    r = _cli("--ops", module, "ops")
    assert r.returncode == 2 and r.stderr == (f"aclnn-cli: error: {module}: aclnnMyHardtanhBackward2: variant 'inclusive-window' "
                                              "needs its kind declared: decorate it with @defect or @legitimate (from "
                                              "aclnn_cli.ops)\n"), r.stderr


def test_variant_kinds_hold_under_python_oo(tmp_path):
    """Kinds are declared, not read from docstrings, which python -OO strips: the catalogue is the same."""
    plain = _cli("defects")
    stripped = subprocess.run([sys.executable, "-OO", "-m", "aclnn_cli", "defects"], capture_output=True, text=True,
                              timeout=120)
    assert plain.returncode == 0 and stripped.returncode == 0, stripped.stderr[-2000:]
    def kinds(out: str) -> list[tuple[str, str]]:  # (name, kind) of each table row
        cells = [[c.strip() for c in line.split("│")] for line in out.splitlines() if line.startswith("│")]
        return [(c[1], c[2]) for c in cells if c[1]]
    assert len(kinds(plain.stdout)) > 40 and kinds(plain.stdout) == kinds(stripped.stdout)
    assert {k for _, k in kinds(plain.stdout)} == {"defect", "legitimate"}


def test_a_case_judged_under_bitwise_and_benchmark_emulates_once(tmp_path, monkeypatch):
    """The emulated kernel's values a comparison judges against (bitwise) or beside (benchmark) are kept per process
    (judge/emulated.py): the second standard, and the same case judged again, do not emulate again; another case
    does; the verdicts are those of a fresh emulation."""
    from aclnn_cli.casedir import manifest as M
    from aclnn_cli.device import emulate
    from aclnn_cli.judge import emulated
    from aclnn_cli.judge.verify import Options, verify_case

    text = "op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: float16, shape: [300], seed: 1}\n" \
           "  - {name: b, dtype: float16, shape: [300], seed: 2}\n"
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    monkeypatch.setattr(emulated, "MEMO", emulated.Memo(64 << 20))
    calls = []
    real = emulate.kernel_output
    monkeypatch.setattr(emulate, "kernel_output", lambda *a, **k: calls.append(1) or real(*a, **k))
    a = M.load(out / "silu_backward-a")
    first = [verify_case(a, Options(standard=s)).to_json() for s in ("bitwise", "benchmark")]
    assert len(calls) == 1 and [r["status"] for r in first] == ["PASS", "PASS"]
    assert verify_case(M.load(a.dir), Options(standard="bitwise")).to_json() == first[0] and len(calls) == 1
    verify_case(M.load(out / "silu_backward-b"), Options(standard="bitwise"))
    assert len(calls) == 2
    monkeypatch.setattr(emulated, "MEMO", emulated.Memo(64 << 20))
    assert [verify_case(M.load(a.dir), Options(standard=s)).to_json() for s in ("bitwise", "benchmark")] == first


def test_the_matrix_works_inside_the_suite_when_the_temporary_directory_is_on_another_file_system(tmp_path, monkeypatch):
    """Its working copies are hard links where they can be: with the system's temporary directory on another file
    system (a hard link across devices fails, and every file was copied) they live in a hidden directory inside the
    suite, which is gone afterwards; the table is the same."""
    from aclnn_cli.judge import matrix

    text = "op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: [float16, float32], shape: [300], seed: 1}\n"
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    variants = ["partial-tile-unwritten", "round-half-away"]
    here = matrix.defect_matrix(out, variants=variants, standards=[DEFAULT_STANDARD], jobs=1)
    made = []
    real = matrix.tempfile.TemporaryDirectory
    monkeypatch.setattr(matrix.tempfile, "TemporaryDirectory", lambda **k: made.append(k) or real(**k))
    monkeypatch.setattr(matrix, "_same_device", lambda a, b: False)
    inside = matrix.defect_matrix(out, variants=variants, standards=[DEFAULT_STANDARD], jobs=1)
    assert inside == here and here["partial-tile-unwritten"][DEFAULT_STANDARD] > 0
    assert made[-1] == {"prefix": ".aclnn-matrix-", "dir": out}
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in out.iterdir() if not p.name.startswith("."))


def test_a_variant_writing_the_correct_kernels_bytes_takes_its_verdicts_unjudged(tmp_path, monkeypatch):
    """A variant whose status and dumps are the correct kernel's is not judged again: its cells are the correct
    kernel's under every standard (failures included: a published rule that fails the correct kernel fails it
    too); a variant that writes other bytes is judged. The table is the one judging every case gives."""
    from aclnn_cli.judge import matrix

    text = "op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: [float16, float32], shape: [300], seed: 1}\n"
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    calls = []
    real = matrix.verify_case
    monkeypatch.setattr(matrix, "verify_case", lambda m, o: calls.append((m.case_id, o.standard)) or real(m, o))
    stds = list(STANDARDS)
    table = matrix.defect_matrix(out, variants=["round-half-away", "partial-tile-unwritten"], standards=stds, jobs=1)
    assert table["round-half-away"] == table["(correct kernel)"]
    assert any(table["(correct kernel)"].values()) and table["partial-tile-unwritten"][DEFAULT_STANDARD] == 2
    judged = Counter(calls)  # (round-half-away meets no tie here: the correct kernel's bytes, never judged)
    assert len(judged) == 2 * len(stds) and set(judged.values()) == {2}  # (each case: the correct kernel, the defect)

    def judge_all(m):  # (every variant judged: each one's bytes counted as new)
        return os.urandom(8)
    monkeypatch.setattr(matrix, "_written", judge_all)
    assert matrix.defect_matrix(out, variants=["round-half-away", "partial-tile-unwritten"], standards=stds,
                                jobs=1) == table


def test_a_variant_that_cannot_run_on_a_case_fails_it_and_the_matrix_goes_on(tmp_path):
    """swapped-inputs hands RepeatInterleaveGrad's kernel yGrad's values as the repeats: the kernel refuses the
    negative run length (one line in `emulate`). In the matrix that case fails (no dump is written; the working
    copy's dump is another variant's) and the other variants and cases are still run."""
    from rowblocks import CASES

    out = tmp_path / "out"
    assert run_cli("gen", CASES / "repeat_interleave_grad.yaml", "-o", out).exit_code == 0
    table = defect_matrix(out, variants=["swapped-inputs", "round-half-away"], standards=[DEFAULT_STANDARD], jobs=1)
    assert table["swapped-inputs"][DEFAULT_STANDARD] > 0
    assert table["round-half-away"][DEFAULT_STANDARD] == table["(correct kernel)"][DEFAULT_STANDARD] == 0
