"""No process a command started is alive when it returns, and no worker's end hangs or tracebacks it (issue 31,
findings 3, 5, 7, 8, 9): a user reference that forks a sleeper, starts a non-daemon thread or calls os._exit; a
runner whose child leaves its session; a command under a tiny open-files limit. Whole CLI processes
(`python -m aclnn_cli`, the console command): tests that call the group in-process keep their children."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CASES = """\
op: aclnnMyProbe
defaults: {product: A2, dtype: float32}
cases:
  - {name: small, shape: [[4], [5], [6], [7]]}
  - {name: big, shape: [3000000]}
"""

OP = """\
import os, threading, time
import numpy as np
from aclnn_cli.ops import OpSpec, Reference, TensorSpec, register

def reference(t):
    if "{what}" == "thread":
        threading.Thread(target=time.sleep, args=(3600,)).start()
    elif "{what}" == "fork":
        child = os.fork()
        if child == 0:
            time.sleep(3600)
            os._exit(0)
        with open({pids!r}, "a") as f:  # (here: the child may be killed before it first runs)
            f.write(f"{{child}}\\n")
    elif "{what}" == "exit" and t["gradOutput"].size > 1000:
        os._exit(0)
    elif "{what}" == "exit-small" and t["gradOutput"].size < 10:
        os._exit(0)
    v = t["gradOutput"] * 2.0
    return Reference(v, np.zeros_like(v), np.abs(v))

register(OpSpec(name="aclnnMyProbe", key="my_probe", summary="x", formula="x",
    tensors=(TensorSpec("gradOutput", "input", {{"normal": [0, 1]}}), TensorSpec("self", "input", {{"normal": [0, 1]}}),
             TensorSpec("out", "output", {{"constant": 0}})),
    products={{"A2": ("float32",)}}, dims=(0, 8), empty_ok=True, reference=reference))
"""


def cli(*args, timeout: float = 120, env=None, limit: int | None = None) -> subprocess.CompletedProcess:
    pre = (lambda: __import__("resource").setrlimit(__import__("resource").RLIMIT_NOFILE, (limit, limit))) if limit else None
    return subprocess.run([sys.executable, "-m", "aclnn_cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, preexec_fn=pre)


def alive(pids: list[int]) -> list[int]:
    left = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    left.append(pid)
        except OSError:
            pass
    return left


def probe(tmp_path: Path, what: str) -> tuple[Path, Path, Path]:
    pids = tmp_path / "pids.txt"
    op = tmp_path / "probe.py"
    op.write_text(OP.format(what=what, pids=str(pids)))
    cases = tmp_path / "cases.yaml"
    cases.write_text(CASES)
    return op, cases, pids


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux's")
def test_children_a_user_reference_forks_do_not_outlive_gen(tmp_path):
    op, cases, pids = probe(tmp_path, "fork")
    r = cli("--ops", op, "gen", cases, "-o", tmp_path / "out", "-j", "2")
    assert r.returncode == 0, r.stderr
    started = [int(v) for v in pids.read_text().split()]
    assert len(started) >= 5
    assert alive(started) == [], "left alive"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_user_thread_that_never_ends_does_not_hang_gen(tmp_path, jobs):
    """In a worker (the large case's ranges), or in the command's own process (-j 1, and the first small cases of
    any run: pipeline/parallel.inline_first), whose exit must not wait for it."""
    op, cases, _ = probe(tmp_path, "thread")
    r = cli("--ops", op, "gen", cases, "-o", tmp_path / "out", "-j", jobs, timeout=90)  # (a hang: TimeoutExpired)
    assert r.returncode == 0 and "generated 5 cases" in r.stdout + r.stderr, r.stderr


def test_a_worker_that_exits_under_gen_is_one_line_naming_a_case(tmp_path):
    op, cases, _ = probe(tmp_path, "exit")
    r = cli("--ops", op, "gen", cases, "-o", tmp_path / "out", "-j", "2")
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "worker process running case my_probe-" in lines[-1] and "died" in lines[-1], lines


def test_a_user_ops_small_cases_run_in_workers_whose_exit_is_one_line(tmp_path):
    """A small case of a user op is never run in the command's own process when there are workers (bundled ops'
    are: pipeline/parallel.inline_first): its os._exit ends a worker, named, not the command with status 0."""
    op, cases, _ = probe(tmp_path, "exit-small")
    r = cli("--ops", op, "gen", cases, "-o", tmp_path / "out", "-j", "2")
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.returncode, r.stderr)
    assert "worker process running case my_probe-" in lines[-1] and "died" in lines[-1], lines


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux's")
def test_a_runner_child_that_leaves_its_session_does_not_outlive_run(tmp_path):
    from test_run_driver import runner_script

    out = tmp_path / "out"
    (tmp_path / "c.yaml").write_text("op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: float32, product: '950', shape: [4]}\n")
    assert cli("gen", tmp_path / "c.yaml", "-o", out).returncode == 0
    pids = tmp_path / "orphans.txt"
    r = cli("run", out, "--runner", runner_script(tmp_path), env={**os.environ, "FAKE_ORPHAN": str(pids)})
    assert r.returncode == 0, r.stdout + r.stderr
    started = [int(v) for v in pids.read_text().split()]
    assert started and alive(started) == [], "left alive"


@pytest.mark.parametrize("limit", [12, 16, 20])
def test_a_tiny_open_files_limit_ends_in_a_result_or_one_line(tmp_path, limit):
    """Under `ulimit -n` (soft and hard) each command finishes: its verdict, or one error line; no traceback, no hang."""
    (tmp_path / "s.yaml").write_text("op: aclnnSiluBackward\ndefaults: {product: '950', dtype: float32}\ncases:\n"
                                     "  - {name: s, shape: [[4], [5], [6], [7], [8], [9], [10], [11]]}\n"
                                     "  - {name: big, shape: [3000000]}\n")
    out = tmp_path / "o"
    assert cli("gen", tmp_path / "s.yaml", "-o", out).returncode == 0
    for args in (("gen", tmp_path / "s.yaml", "-o", tmp_path / "o2", "-j", "4"), ("emulate", out, "-j", "4"),
                 ("verify", out, "-j", "8")):
        r = cli(*args, timeout=60, limit=limit)
        assert "Traceback" not in r.stderr, (args, r.stderr[-2000:])
        if r.returncode == 2:  # (one error line, or verify's report with the cases that ran out as ERROR)
            lines = (r.stdout + r.stderr).strip().splitlines()
            assert "too many open files" in (r.stdout + r.stderr).lower(), lines
            assert len([line for line in lines if line.startswith("aclnn-cli: error")]) <= 1, lines
        else:
            assert r.returncode in (0, 1), (args, r.returncode, r.stderr[-500:])


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="no /proc here")
def test_the_threads_children_lists_name_what_a_scan_of_every_process_finds(tmp_path):
    """reaper.children reads each thread's /proc children list (one small read per thread, not a stat per process
    on the machine): the same pids as the scan of every process's parent, for a child of the main thread, one of
    another thread (alive: a thread's children are on its own list) and an orphan the process adopted as its
    subreaper."""
    code = (
        "import os, subprocess, threading, time\n"
        "from aclnn_cli.pipeline import reaper\n"
        "assert reaper.adopt_orphans()\n"
        "kids = [subprocess.Popen(['sleep', '30'])]\n"
        "go, done = threading.Event(), threading.Event()\n"
        "def spawn():\n"
        "    kids.append(subprocess.Popen(['sleep', '30'])); go.set(); done.wait()\n"
        "t = threading.Thread(target=spawn); t.start(); go.wait()  # (alive: its child is on its own list)\n"
        "subprocess.run(['sh', '-c', 'sleep 30 & echo $! > orphan'], check=True)\n"
        "orphan = int(open('orphan').read())\n"
        "for _ in range(200):\n"
        "    scanned = sorted(reaper._scanned_children(os.getpid()))\n"
        "    if orphan in scanned: break\n"
        "    time.sleep(0.01)\n"
        "listed = reaper._listed_children(os.getpid())\n"
        "print(listed is not None, sorted(listed or []) == scanned, len(scanned), orphan in scanned)\n"
        "done.set(); t.join()\n"
        "reaper.end_descendants()\n"
        "print(reaper.children())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    first, last = done.stdout.splitlines()
    assert first == "True True 3 True" and last == "[]"
