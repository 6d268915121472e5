"""A runner is a suspect, like a kernel (issue 18, part 3): `run` bounds every wait, leaves nothing of
the runner alive, checks the runner's reply against its files, and turns a malformed reply into one line.

Each runner here is a small Python script written by the test (`hostile`): the harness contract with
one part replaced. Every process a runner starts writes its pid to a file; after `run` returns, each
must be gone (a zombie no one reaps counts as gone: it holds nothing). Hangs are bounded by
subprocess timeouts, never by timed assertions.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from aclnn_cli.casedir import manifest as M

from aclnn_cli.casedir import dirs as casedirs
from aclnn_cli.device.run import RUN_VERDICT_FILE, RunOptions, read_verdict, run_cases
from helpers import fresh_copy, generated, one_line_error, run_cli, write_yaml

SUITE = """
op: aclnnSiluBackward
defaults: {dtype: float32, seed: 5}
cases:
  - name: a
    shape: [[3], [4]]
  - name: neg
    shape: [3]
    dtype: float64
    expect_status: ACLNN_ERR_PARAM_INVALID
"""
HANG_LIMIT = 60  # seconds a bounded `run` gets in these tests before it counts as hung
CLI = [sys.executable, "-c", "import sys; from aclnn_cli.cli.main import main; sys.argv[0] = 'aclnn-cli'; main()"]

# The harness contract, with hooks: {before_ready} runs first, {ready} is the ready line, {on_end} runs
# at each "end" (case, status, outputs = [[initial storage, dump]], replies; `finish(n)` writes the
# status file, the dumps and answers "done <case> n"), {at_exit} after the last case.
TEMPLATE = '''\
import os, shutil, sys, time
args = sys.argv[1:]
replies = os.fdopen(int(args[args.index("--reply-fd") + 1]), "w", buffering=1)
PIDS = {pids!r}

def remember(pid):
    with open(PIDS, "a") as f:
        f.write(f"{{pid}}\\n")

def sleeper():
    """A child holding every descriptor the runner has (the reply pipe included), for an hour. Its pid is written
    here, not by the child: on a loaded machine run may kill it before it is first scheduled."""
    pid = os.fork()
    if pid == 0:
        time.sleep(3600)
        os._exit(0)
    remember(pid)
    return pid

def finish(n, text=None):
    with open(status, "w") as f:
        f.write(f"{{n}}\\n" if text is None else text)
    for initial, dump in outputs:
        if dump and n == 0:
            shutil.copyfile(initial, dump)
    replies.write(f"done {{case}} {{n}}\\n")

remember(os.getpid())
{before_ready}
replies.write({ready} + "\\n")
case, status, outputs = None, None, []
for line in sys.stdin:
    key, _, rest = line.rstrip("\\n").partition(" ")
    if key == "case":
        case, status, outputs = rest, None, []
    elif key == "tensor" and rest.startswith("out "):
        words = rest.split()
        ndim = int(words[4])
        storage_ndim = int(words[5 + 2 * ndim + 1])
        outputs.append([rest.split(" ", 5 + 2 * ndim + 2 + storage_ndim)[-1], None])
    elif key == "dump":
        outputs[-1][1] = rest
    elif key == "status":
        status = rest
    elif key == "end":
{on_end}
{at_exit}
'''
NORMAL_END = "finish(0 if case.endswith(('-a-3', '-a-4')) else 161002)"


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    return generated(tmp_path_factory.mktemp("suspect"), SUITE)


@pytest.fixture()
def out(suite, tmp_path) -> Path:
    return fresh_copy(suite, tmp_path)


@pytest.fixture()
def pids(tmp_path):
    """The file every runner process writes its pid to; whatever is left alive is killed afterwards."""
    path = tmp_path / "pids"
    yield path
    for pid in runner_pids(path):
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def runner_pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie no one has reaped yet holds nothing: it counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def hostile(tmp_path: Path, pids: Path, *, before_ready: str = "", ready: str = '"ready aclnn-runner/1 Ascend910B1"',
            on_end: str = NORMAL_END, at_exit: str = "") -> Path:
    """A runner script: the harness contract with the hooks replaced (see TEMPLATE)."""
    script = tmp_path / "hostile.py"
    script.write_text(TEMPLATE.format(pids=str(pids), before_ready=before_ready, ready=ready,
                                      on_end=textwrap.indent(on_end, " " * 8), at_exit=at_exit))
    wrapper = tmp_path / "runner"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


def manifests(out: Path):
    loaded, broken = M.load_all(casedirs.find_cases(out))
    assert not broken
    return sorted(loaded, key=lambda m: m.case_id)


def by_id(out: Path) -> dict:
    return {m.case_id: m for m in manifests(out)}


def run_opts(runner: Path, timeout: float = 5.0) -> RunOptions:
    return RunOptions(runner=runner, timeout=timeout, env=dict(os.environ))


def _as_a_shell_starts_it() -> None:
    """In the CLI's process before exec: SIGINT and SIGTERM at their defaults and nothing blocked, as from a
    shell. (A pytest-xdist worker can hand down another state: a CLI started with SIGINT blocked or ignored
    never sees Ctrl-C, which is what the user asked for there, not what these tests are about.)"""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _signal_state(pid: int) -> str:
    """The blocked and ignored signal masks of a process (why it did not react to one), from /proc."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError as exc:
        return f"no /proc status: {exc}"
    return ", ".join(line.replace("\t", " ") for line in lines if line.startswith(("SigBlk", "SigIgn", "SigPnd", "ShdPnd")))


def cli(*args, timeout: float = HANG_LIMIT, signal_when=None) -> subprocess.CompletedProcess:
    """The CLI in a process group of its own; killed (with everything it started) if it outlives `timeout`.

    signal_when=(predicate, signal): send the signal once predicate() holds (checked every 0.05 s).
    """
    proc = subprocess.Popen([*CLI, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_as_a_shell_starts_it)
    try:
        if signal_when is not None:
            predicate, sig = signal_when
            for _ in range(int(timeout / 0.05)):
                if predicate() or proc.poll() is not None:
                    break
                time.sleep(0.05)
            assert predicate(), "the runner never got that far"
            proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        state = _signal_state(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"aclnn-cli {' '.join(map(str, args))} did not return within {timeout} s ({state})")
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def assert_one_line_error(result, text: str) -> None:
    assert len(one_line_error(result, text)) < 400


# -- every wait is bounded by --timeout; nothing of the runner outlives run ----------------------------

def test_a_runner_that_hangs_before_ready_is_killed_at_the_timeout(out, tmp_path, pids):
    runner = hostile(tmp_path, pids, before_ready="time.sleep(3600)")
    result = cli("run", out, "--runner", runner, "--timeout", "1")
    assert_one_line_error(result, "the runner did not start: no answer within 1 s; the runner was killed")
    assert runner_pids(pids) and not any(map(alive, runner_pids(pids)))


def test_children_holding_the_reply_pipe_do_not_outlive_run(out, tmp_path, pids):
    """A child started before 'ready' holds the reply pipe and stdout; the runner itself ends normally."""
    runner = hostile(tmp_path, pids, before_ready="sleeper()")
    summary = run_cases(manifests(out), run_opts(runner))
    assert not summary.failed and summary.statuses == {0: 2, 161002: 1}
    assert len(runner_pids(pids)) == 2 and not any(map(alive, runner_pids(pids)))


def test_children_that_outlive_the_runner_are_killed_and_reported(out, tmp_path, pids):
    runner = hostile(tmp_path, pids, at_exit="sleeper()")
    summary = run_cases(manifests(out), run_opts(runner))
    assert not summary.failed and summary.statuses == {0: 2, 161002: 1}
    assert summary.ending_problems == ["the runner left processes behind when it exited (killed)"]
    assert len(runner_pids(pids)) == 2 and not any(map(alive, runner_pids(pids)))


def test_a_runner_that_dies_while_its_child_holds_the_pipe_is_a_crash_not_a_timeout(out, tmp_path, pids):
    """No EOF comes on the reply pipe (the child holds it): the runner's exit itself ends the wait."""
    cases = manifests(out)
    runner = hostile(tmp_path, pids, before_ready="sleeper()",
                     on_end=f"if case == {cases[0].case_id!r}:\n    os._exit(9)\n{NORMAL_END}")
    summary = run_cases(cases, run_opts(runner, timeout=30))
    assert [(c, v) for c, v, _ in summary.failed] == [(cases[0].case_id, "CRASH")]
    assert summary.failed[0][2].startswith("the runner exited with status 9")
    assert summary.statuses == {0: 1, 161002: 1} and summary.runners_started == 2
    assert len(runner_pids(pids)) == 4 and not any(map(alive, runner_pids(pids)))


def test_a_runner_that_closes_its_replies_but_lives_is_killed_at_the_timeout(out, tmp_path, pids):
    cases = manifests(out)
    runner = hostile(tmp_path, pids, on_end="replies.close()\ntime.sleep(3600)")
    summary = run_cases(cases[:1], run_opts(runner, timeout=1))
    assert [(c, v) for c, v, _ in summary.failed] == [(cases[0].case_id, "CRASH")]
    assert summary.failed[0][2].startswith("the runner closed its replies and was killed")
    assert not any(map(alive, runner_pids(pids)))


def test_a_runner_that_reads_no_requests_cannot_block_the_writes(out, tmp_path, pids):
    """After its first case the runner answers ahead (for the same case id) and reads no more: the
    requests fill the pipe, and the write is bounded by --timeout too."""
    case = manifests(out)[0]
    runner = hostile(tmp_path, pids, on_end="finish(0)\nreplies.write(f'done {case} 0\\n' * 1000)\ntime.sleep(3600)")
    summary = run_cases([case] * 300, run_opts(runner, timeout=1))  # each request is ~600 bytes: past 64 KiB
    timeouts = [detail for _, verdict, detail in summary.failed if verdict == "TIMEOUT"]
    assert timeouts and timeouts[0].startswith("the runner did not read its request within 1 s; the runner was killed")
    assert not any(map(alive, runner_pids(pids)))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_run_while_the_runner_starts_leaves_nothing(out, tmp_path, pids, sig):
    runner = hostile(tmp_path, pids, before_ready="sleeper()\ntime.sleep(3600)")
    result = cli("run", out, "--runner", runner, "--timeout", "600",
                 signal_when=(lambda: len(runner_pids(pids)) == 2, sig))
    assert result.returncode != 0 and "Traceback" not in result.stdout + result.stderr
    assert not any(map(alive, runner_pids(pids)))


def test_sigterm_to_run_during_a_case_leaves_nothing(out, tmp_path, pids):
    started = tmp_path / "started"
    runner = hostile(tmp_path, pids, on_end=f"open({str(started)!r}, 'w').close()\ntime.sleep(3600)")
    result = cli("run", out, "--runner", runner, "--timeout", "600",
                 signal_when=(started.exists, signal.SIGTERM))
    assert result.returncode != 0 and "Traceback" not in result.stdout + result.stderr
    assert runner_pids(pids) and not any(map(alive, runner_pids(pids)))


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "1e9", "x"])
def test_timeout_must_be_finite_positive_and_sane(out, tmp_path, value):
    result = run_cli("run", out, "--runner", tmp_path / "r", "--timeout", value)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "Invalid value for '--timeout'" in result.output


@pytest.mark.parametrize("value", [float("nan"), 0.0, float("inf"), 1e9])
def test_run_options_refuse_a_bad_timeout(tmp_path, value):
    from aclnn_cli.errors import UserError

    with pytest.raises(UserError, match="--timeout: must be a number of seconds above 0 and at most 604800"):
        RunOptions(runner=tmp_path / "r", timeout=value)


# -- the reply and the files must agree ----------------------------------------------------------------

def test_a_status_the_status_file_contradicts_fails_the_case(out, tmp_path, pids):
    """'done <id> 161002' beside a status.txt of 0 (and a dump): run exits 1 and verify does not PASS it."""
    cases = by_id(out)
    liar = next(c for c in cases if c.endswith("-a-3"))
    runner = hostile(tmp_path, pids, on_end=f"if case == {liar!r}:\n"
                                           f"    for initial, dump in outputs: shutil.copyfile(initial, dump)\n"
                                           f"    open(status, 'w').write('0\\n')\n"
                                           f"    replies.write(f'done {{case}} 161002\\n')\n    continue\n{NORMAL_END}")
    result = run_cli("run", out, "--runner", runner)
    assert result.exit_code == 1, result.output
    expected = ("ERROR", f"the runner answered status 161002 but {cases[liar].dir / 'status.txt'} holds 0")
    assert read_verdict(cases[liar].dir) == expected
    assert f"ERROR    {liar}: the runner answered status 161002 but" in result.output
    verified = run_cli("verify", out, "--json", tmp_path / "v.json")
    data = {c["case_id"]: c for c in json.loads((tmp_path / "v.json").read_text())["cases"]}
    assert data[liar]["status"] == "ERROR" and verified.exit_code != 0


def test_a_wrong_status_the_case_does_not_expect_fails_the_case(out, tmp_path, pids):
    cases = by_id(out)
    neg = next(c for c in cases if "neg" in c)
    runner = hostile(tmp_path, pids, on_end="finish(0)")  # phase one accepts everything (float64 included)
    summary = run_cases(cases.values(), run_opts(runner))
    assert summary.failed == [(neg, "STATUS", "phase one returned 0 (ACLNN_SUCCESS), "
                                              "expected 161002 (ACLNN_ERR_PARAM_INVALID)")]
    assert read_verdict(cases[neg].dir)[0] == "STATUS" and summary.statuses == {0: 2}


def test_a_done_without_a_dump_fails_the_case(out, tmp_path, pids):
    cases = by_id(out)
    victim = next(c for c in cases if c.endswith("-a-4"))
    runner = hostile(tmp_path, pids, on_end=f"if case == {victim!r}:\n    outputs = []\n{NORMAL_END}")
    result = run_cli("run", out, "--runner", runner)
    assert result.exit_code == 1, result.output
    dump = cases[victim].dir / "gradInput.dump.bin"
    assert read_verdict(cases[victim].dir) == ("MISSING", f"the runner answered 'done' but wrote no dump at {dump}")
    assert f"MISSING  {victim}: the runner answered 'done' but wrote no dump at" in result.output


def test_a_done_without_a_status_file_fails_the_case(out, tmp_path, pids):
    cases = by_id(out)
    victim = next(c for c in cases if c.endswith("-a-4"))
    runner = hostile(tmp_path, pids, on_end=f"if case == {victim!r}:\n    replies.write(f'done {{case}} 0\\n')\n"
                                           f"    continue\n{NORMAL_END}")
    summary = run_cases(cases.values(), run_opts(runner))
    status_file = cases[victim].dir / "status.txt"
    assert summary.failed == [(victim, "MISSING", f"the runner answered 'done' but wrote no status file at {status_file}")]


@pytest.mark.parametrize("content, problem", [
    ("zero\n", "status file must hold phase one's status as a decimal integer, got 'zero'"),
    ("0" * 300, "status file holds more than 64 bytes"),
    ("²\n", "status file must hold phase one's status as a decimal integer, got '²'"),
])
def test_a_bad_status_file_beside_done_is_an_error(out, tmp_path, pids, content, problem):
    cases = by_id(out)
    victim = next(c for c in cases if c.endswith("-a-4"))
    runner = hostile(tmp_path, pids, on_end=f"if case == {victim!r}:\n    finish(0, {content!r})\n    continue\n"
                                           f"{NORMAL_END}")
    summary = run_cases(cases.values(), run_opts(runner))
    assert summary.failed == [(victim, "ERROR", f"{cases[victim].dir / 'status.txt'}: {problem}")]


def test_a_status_file_that_is_a_fifo_does_not_hang_verify_or_run(out, tmp_path, pids):
    cases = by_id(out)
    victim = next(c for c in cases if c.endswith("-a-4"))
    fifo = f"os.unlink(status) if os.path.exists(status) else None\nos.mkfifo(status)\n"
    runner = hostile(tmp_path, pids, on_end=f"if case == {victim!r}:\n{textwrap.indent(fifo, '    ')}"
                                           f"    for initial, dump in outputs: shutil.copyfile(initial, dump)\n"
                                           f"    replies.write(f'done {{case}} 0\\n')\n    continue\n{NORMAL_END}")
    result = cli("run", out, "--runner", runner)
    assert result.returncode == 1
    assert read_verdict(cases[victim].dir) == ("ERROR", f"{cases[victim].dir / 'status.txt'}: status file is a FIFO, "
                                                        f"not a regular file")
    (cases[victim].dir / RUN_VERDICT_FILE).unlink()
    verified = cli("verify", out)
    assert verified.returncode == 2 and "status.txt: status file is a FIFO, not a regular file" in verified.stdout


# -- malformed replies are one line ---------------------------------------------------------------------

@pytest.mark.parametrize("token", ["--5", "²", "5" * 4000, "5" * 5000, "0x10", "+5", "", "1 2", "99999999999",
                                   "2147483648", "٣"])
def test_a_malformed_status_is_one_line(out, tmp_path, pids, token):
    cases = by_id(out)
    victim = next(c for c in cases if c.endswith("-a-3"))
    runner = hostile(tmp_path, pids, on_end=f"if case == {victim!r}:\n"
                                           f"    replies.write(f'done {{case}} ' + {token!r} + '\\n')\n    continue\n"
                                           f"{NORMAL_END}")
    result = run_cli("run", out, "--runner", runner)
    assert result.exit_code == 1, result.output
    verdict, detail = read_verdict(cases[victim].dir)
    expected = ("the runner answered a line longer than 4096 bytes" if len(token) > 4096 else
                "the runner answered a malformed status: 'done ")
    assert verdict == "ERROR" and detail.startswith(expected)
    assert "\n" not in detail and len(detail) < 200
    line = next(x for x in result.output.splitlines() if victim in x and x.startswith("ERROR"))
    assert len(line) < 300


def test_an_answer_for_another_case_is_one_line(out, tmp_path, pids):
    cases = manifests(out)
    runner = hostile(tmp_path, pids, on_end="replies.write('done somebody-else' + '\\x1b[2J' * 500 + ' 0\\n')")
    summary = run_cases(cases, run_opts(runner))
    assert summary.failed[0][:2] == (cases[0].case_id, "ERROR")
    detail = summary.failed[0][2]
    assert detail.startswith("the runner answered for another case: 'done somebody-else\\x1b[2J")
    assert len(detail) < 200 and "\x1b" not in detail


def test_an_overlong_reply_line_is_one_line(out, tmp_path, pids):
    cases = manifests(out)
    runner = hostile(tmp_path, pids, on_end="replies.write('done ' + case + ' 0' * 3_000_000)")  # no newline
    summary = run_cases(cases[:1], run_opts(runner))
    assert summary.failed == [(cases[0].case_id, "ERROR", "the runner answered a line longer than 4096 bytes")]
    assert not any(map(alive, runner_pids(pids)))


def test_a_huge_soc_name_is_refused_in_one_line(out, tmp_path, pids):
    runner = hostile(tmp_path, pids, ready='"ready aclnn-runner/1 Ascend910B" + "x" * 3_000_000')
    result = cli("run", out, "--runner", runner)
    assert_one_line_error(result, "the runner did not start: the runner answered a line longer than 4096 bytes")


def test_a_long_soc_name_is_clipped(out, tmp_path, pids):
    runner = hostile(tmp_path, pids, ready='"ready aclnn-runner/1 Ascend910B" + "\\x1b" * 3000')
    result = cli("run", out, "--runner", runner)
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("ran "))
    assert line.startswith("ran 3 cases on Ascend910B\\x1b\\x1b") and len(line) < 200 and "\x1b" not in line


def test_a_fatal_answer_is_clipped(out, tmp_path, pids):
    runner = hostile(tmp_path, pids, ready='"fatal aclInit failed: " + "y" * 4000')
    result = cli("run", out, "--runner", runner)
    assert_one_line_error(result, "the runner did not start: fatal aclInit failed: yyy")


def test_a_runner_named_without_a_directory_is_this_directory_s(out, tmp_path, pids, monkeypatch):
    """--runner aclnn-runner (a file here, as `is_file` checked) is run, not looked up in PATH."""
    hostile(tmp_path, pids)
    monkeypatch.chdir(tmp_path)
    result = run_cli("run", out, "--runner", "runner")
    assert result.exit_code == 0 and "ran 3 cases on Ascend910B1 (A2)" in result.output, result.output


@pytest.mark.parametrize("answer, verdict, detail", [
    ("fault {case} aclrtSynchronizeStream returned 507035", "CRASH",
     "the device call failed: aclrtSynchronizeStream returned 507035"),
    ("fatal cannot parse the request", "ERROR", "the runner answered fatal 'cannot parse the request'"),
])
def test_fault_and_fatal_end_the_runner_and_a_fresh_one_continues(out, tmp_path, pids, answer, verdict, detail):
    cases = manifests(out)
    runner = hostile(tmp_path, pids, on_end=f"if case == {cases[0].case_id!r}:\n"
                                           f"    replies.write(f{answer + chr(10)!r})\n    sys.exit(4)\n{NORMAL_END}")
    summary = run_cases(cases, run_opts(runner))
    assert summary.failed == [(cases[0].case_id, verdict, detail)]
    assert summary.statuses == {0: 1, 161002: 1} and summary.runners_started == 2
    assert not any(map(alive, runner_pids(pids)))
