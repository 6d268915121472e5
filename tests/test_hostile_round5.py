"""A fifth round of hostile use (a helper probing from outside), each finding with its test:

- report files (--json, --junit, --html) are renamed over their path: a device (/dev/null, as root), a FIFO, a case's
  own case.json, or one path given for two reports was replaced or lost;
- `matrix --jobs` took any integer (negative; 10^20 built share lists until memory ran out; 40 forked 40 workers
  for 4 cases);
- an output view that puts two elements on one storage position was generated, and a correct kernel writing in
  another order failed;
- Ctrl-C exited 1, which verify's readers take for a failed gate;
- `--ops ./m.py` under a removed current directory said only "No such file or directory"; a case name starting
  with '-' or '.' was refused by a rule the message did not state, and `name: 1` was not told to quote it.
(Standard streams closed at start: tests/test_exit.py.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from aclnn_cli.tensor.layout import Layout

from helpers import one_line_error, run_cli, write_yaml

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SILU = "op: aclnnSiluBackward\ncases: [{name: a, shape: [4], dtype: float32}]\n"


@pytest.fixture()
def emulated(tmp_path):
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, SILU), "-o", out, "-j", "1").exit_code == 0
    assert run_cli("emulate", out, "-j", "1").exit_code == 0
    return out


@pytest.mark.parametrize("make, shown", [
    (lambda p: os.mkfifo(p), "is not a regular file (a FIFO)"),
    (lambda p: os.symlink("/dev/null", p), "is not a regular file (a character device)"),
])
@pytest.mark.parametrize("option", ["--json", "--junit", "--html"])
def test_a_report_path_that_is_not_a_regular_file_is_refused_and_kept(emulated, tmp_path, make, shown, option):
    target = tmp_path / "target"
    make(target)
    before = os.stat(target)
    line = one_line_error(run_cli("verify", emulated, option, target), shown)
    assert str(target) in line
    after = os.stat(target)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)


def test_a_report_path_inside_a_case_directory_is_refused(emulated):
    case = emulated / "silu_backward-a"
    manifest = (case / "case.json").read_bytes()
    for option in ("--json", "--junit"):
        one_line_error(run_cli("verify", emulated, option, case / "case.json"), "is inside the case directory")
    one_line_error(run_cli("verify", emulated, "--csv-errors", case), "is inside the case directory")
    assert (case / "case.json").read_bytes() == manifest
    assert run_cli("verify", emulated, "--json", emulated / "verify.json").exit_code == 0  # (OUT itself is fine)


def test_one_path_for_two_reports_is_refused(emulated, tmp_path):
    one_line_error(run_cli("verify", emulated, "--json", tmp_path / "r", "--junit", tmp_path / "." / "r"),
                   "is given for two outputs")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("jobs", ["-5", "0", "257", "99999999999999999999"])
def test_matrix_jobs_out_of_range_is_refused(tmp_path, jobs):
    result = run_cli("matrix", write_yaml(tmp_path, SILU), "--jobs", jobs)
    assert result.exit_code == 2 and "is not in the range 1<=x<=256" in result.output


def test_matrix_forks_no_more_workers_than_cases(tmp_path, monkeypatch):
    import aclnn_cli.judge.matrix as matrix

    asked = []
    real = matrix.Runner
    monkeypatch.setattr(matrix, "Runner", lambda jobs, *a, **k: asked.append(jobs) or real(jobs, *a, **k))
    result = run_cli("matrix", write_yaml(tmp_path, SILU), "--jobs", "200")
    assert result.exit_code == 0, result.output
    assert asked and max(asked) == 1


@pytest.mark.parametrize("shape, strides, overlaps", [
    ([3], [0], True), ([2, 3], [3, 1], False), ([2, 3], [1, 2], False), ([2, 3], [3, 2], False),
    ([2, 3], [2, 1], True), ([4, 1], [1, 0], False), ([2, 2, 2], [4, 1, 2], False), ([2, 2, 2], [2, 1, 2], True),
    ([0, 5], [0, 0], False), ([3, 1, 2], [2, 7, 1], False), ([3, 3], [1, 1], True),
])
def test_layout_overlaps_matches_the_positions_themselves(shape, strides, overlaps):
    """Against the independent answer: every element's storage position computed and compared."""
    layout = Layout(tuple(shape), tuple(strides), 0, 64)
    positions = [sum(c * s for c, s in zip(idx, strides)) for idx in np.ndindex(*shape)]
    assert (len(set(positions)) < len(positions)) == overlaps
    assert layout.overlaps() == overlaps


def test_an_output_view_overlapping_itself_is_refused_an_input_one_is_not(tmp_path):
    text = ("op: aclnnSiluBackward\ncases:\n  - {name: a, shape: [2, 3], dtype: float32, tensors: "
            "{gradInput: {layout: {strides: [2, 1]}}}}\n")
    one_line_error(run_cli("gen", write_yaml(tmp_path, text), "-o", tmp_path / "o1"), "case 'a'",
                   "key 'tensors.gradInput.layout'", "puts two of gradInput's elements on one storage position")
    fine = text.replace("gradInput: {layout: {strides: [2, 1]}}", "self: {layout: {strides: [0, 1]}}") \
        + "  - {name: b, shape: [2, 3], dtype: float32, tensors: {gradInput: {layout: {strides: [3, 2]}}}}\n"
    out = tmp_path / "o2"
    assert run_cli("gen", write_yaml(tmp_path, fine, "fine.yaml"), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0 and run_cli("verify", out).exit_code == 0


SLEEPY = """
import os, time
import numpy as np
from aclnn_cli.ops import OpSpec, Reference, TensorSpec, register

def _sleep():
    open(os.environ["SLEEPING"], "w").close()  # (the test sends SIGINT once this exists: the command is at work)
    time.sleep(60)

def reference(t):
    if os.environ.get("SLEEP_IN") == "reference":
        _sleep()
    v = t["gradOutput"] * t["self"]
    return Reference(v, 0 * v, np.abs(v))

def kernel(t):
    if os.environ.get("SLEEP_IN") == "kernel":
        _sleep()
    return t["gradOutput"] * t["self"]

register(OpSpec(name="aclnnMySleepyBackward", key="my_sleepy_backward", summary="dy * x", formula="dy * x",
    tensors=(TensorSpec("gradOutput", "input", {"normal": [0, 1]}), TensorSpec("self", "input", {"uniform": [-5, 5]}),
             TensorSpec("out", "output", {"constant": 0})),
    products={"A2": ("float32",)}, dims=(0, 8), empty_ok=True, reference=reference, kernel=kernel))
"""


@pytest.mark.parametrize("command", ["gen", "verify"])
def test_ctrl_c_exits_130_not_a_failed_gate(tmp_path, command):
    """A run SIGINT stops exits 130, as a shell reports it (click's own Abort had exited 1). The op's function
    sleeps where the command is stopped: gen in the reference, verify (the benchmark standard runs the kernel)."""
    (tmp_path / "m.py").write_text(SLEEPY)
    (tmp_path / "c.yaml").write_text("op: aclnnMySleepyBackward\ncases: [{name: a, shape: [4], dtype: float32}]\n")
    argv = [sys.executable, "-m", "aclnn_cli", "--ops", "m.py"]
    for step in (["gen", "c.yaml", "-o", "out", "-j", "1"], ["emulate", "out", "-j", "1"]):
        subprocess.run([*argv, *step], cwd=tmp_path, env=ENV, check=True, capture_output=True, timeout=120)
    args, sleep_in = ((["gen", "c.yaml", "-o", "out2", "-j", "1"], "reference") if command == "gen" else
                      (["verify", "out", "--standard", "benchmark", "-j", "1"], "kernel"))
    sleeping = tmp_path / "sleeping"
    proc = subprocess.Popen([*argv, *args], cwd=tmp_path, env={**ENV, "SLEEP_IN": sleep_in, "SLEEPING": str(sleeping)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not sleeping.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sleeping.exists(), "the op's function was never reached"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert b"Traceback" not in err
    assert not (tmp_path / "out2" / "my_sleepy_backward-a").exists()  # (gen: the interrupted case not published)


def test_an_ops_path_under_a_removed_directory_names_it(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", "import os, subprocess, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
                             "sys.exit(subprocess.run([sys.executable, '-m', 'aclnn_cli', '--ops', './m.py', 'ops']).returncode)",
                             str(gone)], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and err == ("aclnn-cli: error: m.py: --ops: cannot find this path: No such file or "
                                            "directory (the current directory no longer exists)\n"), err


@pytest.mark.parametrize("name, extra", [("'-a'", ""), ("'.h'", ""), ("'_x'", ""), ("1", " (a number: quote it, name: '1')")])
def test_a_case_name_is_refused_by_the_rule_it_breaks(tmp_path, name, extra):
    text = f"op: aclnnSiluBackward\ncases: [{{name: {name}, shape: [4], dtype: float32}}]\n"
    line = one_line_error(run_cli("gen", write_yaml(tmp_path, text), "-o", tmp_path / "o"))
    assert line.endswith("needs a name that starts with a letter or digit, then letters, digits, '_', '-' or '.' "
                         "(at most 100, no '..')" + extra), line


def test_an_unknown_defect_names_the_nearest_and_where_the_list_is(tmp_path):
    """A misspelt --defect named the nearest names and the command that lists them; it had listed all 400-odd
    names on its one line."""
    from helpers import one_line_error, run_cli, write_yaml

    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, "op: aclnnSiluBackward\ncases: [{name: a, shape: [4]}]\n"), "-o",
                   out).exit_code == 0
    line = one_line_error(run_cli("emulate", out, "--defect", "softmax-aten-ordr"), "unknown defect 'softmax-aten-ordr'",
                          "did you mean 'softmax-aten-order'", "'aclnn-cli defects' lists all")
    assert len(line) < 300 and "swiglu" not in line, line
    one_line_error(run_cli("emulate", out, "--defect", "zzzz"), "unknown defect 'zzzz' ('aclnn-cli defects' lists all")
