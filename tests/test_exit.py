"""How the command's process ends (__main__._leave): the atexit functions, flushed output and the status as
Python's own exit gives them, without its teardown; Python's own exit where a profiler, a debugger or a user's op
module may need it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}, "PYTHONPATH": str(ROOT)}


def _run(*args, code: str | None = None, **kw) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "aclnn_cli", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, env=ENV, timeout=120, **kw)


def test_the_exit_with_stdout_closed_is_clean():
    """`aclnn-cli ... >&-`: Python has no sys.stdout then; the exit is clean, status 0."""
    done = subprocess.run([sys.executable, "-m", "aclnn_cli", "--version"], cwd=ROOT, stderr=subprocess.PIPE, env=ENV,
                          timeout=120, preexec_fn=lambda: os.close(1))
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr[-2000:]


def test_every_command_with_a_standard_stream_closed_does_its_work(tmp_path):
    """`>&-` or `2>&-` (or `<&-`): /dev/null takes the descriptor (__main__._standard_descriptors). gen, emulate,
    verify and report had failed at their first print (a traceback and status 1 for verify and report; gen with
    stderr closed wrote nothing, silently, status 1), and a file the command opened could have taken the number."""
    (tmp_path / "c.yaml").write_text("op: aclnnSiluBackward\ncases: [{name: a, shape: [4], dtype: float32}]\n")
    steps = [["gen", "c.yaml", "-o", "out", "-j", "1"], ["emulate", "out", "-j", "1"],
             ["verify", "out", "-j", "1", "--json", "v.json"], ["report", "v.json"]]
    for closed in (0, 1, 2):
        for i, step in enumerate(steps):
            if i == 0:
                subprocess.run(["rm", "-rf", str(tmp_path / "out")], check=True)
            done = subprocess.run([sys.executable, "-m", "aclnn_cli", *step], cwd=tmp_path, env=ENV, timeout=120,
                                  capture_output=closed == 0, preexec_fn=lambda: os.close(closed))
            assert done.returncode == 0, (closed, step, done.stderr)
        assert (tmp_path / "out" / "silu_backward-a" / "gradInput.dump.bin").is_file()
        assert '"status": "PASS"' in (tmp_path / "v.json").read_text()


PROBE = """
import atexit, sys
sys.argv = ["aclnn-cli", "--version"]
atexit.register(lambda: print("atexit ran", file=sys.stderr))
from aclnn_cli.__main__ import _leave
print("buffered, not flushed", end="")
_leave({code})
print("not reached", file=sys.stderr)
"""


@pytest.mark.parametrize("code, status", [(None, 0), (0, 0), (1, 1), (2, 2), (True, 1), (-1, 255), (256, 0),
                                          (2**40, 0), ("'a message'", 1)])
def test_statuses_and_exit_functions_are_pythons(code, status):
    done = _run(code=PROBE.format(code=code))
    assert done.returncode == status, done.stderr[-2000:]
    assert done.stdout == b"buffered, not flushed" and b"atexit ran" in done.stderr
    assert b"not reached" not in done.stderr and b"Traceback" not in done.stderr
    if isinstance(code, str):
        assert b"a message" in done.stderr


@pytest.mark.parametrize("buffered", [True, False])
@pytest.mark.parametrize("args", [["--version"], ["ops"], ["--help"], ["gen", "CASES", "-o", "OUT"]])
def test_standard_output_that_takes_nothing_is_one_line(tmp_path, args, buffered):
    """stdout on /dev/full: one line naming it, status 2, whether the text failed as it was written (unbuffered) or
    at the exit's flush; gen's cases are written all the same."""
    cases = tmp_path / "c.yaml"
    cases.write_text("op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: float16, shape: [8]}\n")
    args = [{"OUT": str(tmp_path / "out"), "CASES": str(cases)}.get(a, a) for a in args]
    env = {**ENV, **({} if buffered else {"PYTHONUNBUFFERED": "1"})}
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "aclnn_cli", *args], cwd=ROOT, stdout=full,
                              stderr=subprocess.PIPE, env=env, timeout=300)
    lines = [line for line in done.stderr.decode().splitlines() if not line.startswith("gen: ")]
    assert done.returncode == 2 and lines == ["aclnn-cli: error: cannot write to standard output: No space left on "
                                              "device"], (done.returncode, done.stderr[-2000:])
    if args[0] == "gen":
        assert [p.parent.name for p in (tmp_path / "out").glob("*/case.json")] == ["silu_backward-a"]


@pytest.mark.parametrize("buffered", [True, False])
def test_a_reader_gone_is_a_quiet_status_1(buffered):
    """stdout a pipe whose reader has gone (`| head` done): no traceback, no line, status 1."""
    env = {**ENV, **({} if buffered else {"PYTHONUNBUFFERED": "1"})}
    r, w = os.pipe()
    os.close(r)
    try:
        done = subprocess.run([sys.executable, "-m", "aclnn_cli", "ops"], cwd=ROOT, stdout=w, stderr=subprocess.PIPE,
                              env=env, timeout=120)
    finally:
        os.close(w)
    assert done.returncode == 1 and done.stderr == b"", done.stderr[-2000:]


def test_cprofile_still_writes_its_profile(tmp_path):
    """Under `python -m cProfile` (sys.setprofile, or a sys.monitoring tool on 3.12+) the exit is Python's own: the
    profile is written after the command returns."""
    prof = tmp_path / "p.prof"
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", prof, "-m", "aclnn_cli", "--version"], cwd=ROOT,
                          capture_output=True, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert prof.exists() and prof.stat().st_size > 0


def test_a_user_op_modules_open_file_is_flushed_at_exit(tmp_path):
    """A user's op module that leaves a file open for writing: the exit is Python's own, which flushes it."""
    log = tmp_path / "log.txt"
    module = tmp_path / "my_ops.py"
    worked = (ROOT / "tests" / "user_ops" / "my_hardtanh_backward.py").read_text()
    module.write_text(worked + f"\nLOG = open({str(log)!r}, 'w')\nLOG.write('loaded')  # (buffered: never flushed)\n")
    done = _run("--ops", str(module), "ops")
    assert done.returncode == 0, done.stderr[-2000:]
    assert log.read_text() == "loaded"


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_the_exit_loads_nothing_the_command_did_not(args):
    """Deciding how to exit imports nothing: `--version` and `--help` load no op, so no NumPy (the exit once imported
    the op registry to ask whether a user's op module ran: 87 ms of a 40 ms command)."""
    code = ("import atexit, sys; sys.argv = ['aclnn-cli', *sys.argv[1:]]\n"
            "atexit.register(lambda: print(sorted(m for m in sys.modules if m == 'numpy' or m.startswith("
            "'aclnn_cli.ops')), file=sys.stderr))\n"
            "from aclnn_cli.__main__ import console\nconsole()")
    done = _run(*args, code=code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.decode().strip().splitlines()[-1] == "[]", done.stderr[-2000:]
