"""Review of decision 229 (branch `review`): tests that fail on 40df053."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aclnn_cli.files import statcache

from helpers import run_cli, write_yaml
from test_suite_record import CASES, _record, _verify, suite  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[1]


def test_a_verify_with_json_keeps_the_record(suite, tmp_path):  # noqa: F811
    """--json/--html/--csv-errors turn the small-batch pass off (error_data): the record is not consulted, and its
    every verified key is popped, so `verify OUT --json` (CI's usual form) erases it."""
    before = _record(suite)
    assert run_cli("verify", suite, "-j", "1", "--json", tmp_path / "r.json").exit_code == 0
    assert _record(suite) == before


def test_a_golden_changed_between_its_fstat_and_its_read_is_caught(suite, monkeypatch):  # noqa: F811
    """A golden the record proves is trusted from its fstat, taken before the read: bytes changed in between
    (a concurrent writer) are judged, never hashed. Simulated: the lowest mantissa bit of one element flipped
    right before the read (1 ulp: the case still PASSes, judged on a golden gen never wrote)."""
    victim = sorted(p for p in suite.iterdir() if p.is_dir())[2]
    golden = victim / "gradInput.golden.bin"
    ino = golden.stat().st_ino
    real = os.readv
    done = []

    def readv(fd, buffers):
        if not done and os.fstat(fd).st_ino == ino:
            done.append(1)
            b = os.pread(fd, 1, 6)
            os.pwrite(os.open(golden, os.O_WRONLY), bytes([b[0] ^ 1]), 6)
        return real(fd, buffers)

    monkeypatch.setattr(os, "readv", readv)
    code, statuses = _verify(suite)
    assert done
    assert statuses[victim.name] == "ERROR", statuses


def test_a_file_with_an_old_mtime_and_a_recent_ctime_is_racy(tmp_path):
    """settled() must look at the ctime too (mutating it to the mtime alone passed every test): files whose mtime
    was put back an hour right after gen are still racily clean (their ctime is now)."""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, CASES), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    old = time.time_ns() - 3600 * 10**9
    for p in out.rglob("*.bin"):
        os.utime(p, ns=(old, old))
    assert _verify(out)[0] == 0
    assert not (out / statcache.SUITE_FILE).exists()


def test_the_exit_with_stdout_closed_is_clean():
    """`aclnn-cli ... >&-`: Python makes sys.stdout None; _leave called None.flush() (traceback, status 1; 0 before)."""
    done = subprocess.run([sys.executable, "-m", "aclnn_cli", "--version"], cwd=ROOT, capture_output=False,
                          stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120,
                          preexec_fn=lambda: os.close(1))
    assert done.returncode == 0, done.stderr[-2000:]
    assert b"Traceback" not in done.stderr


def test_cprofile_still_writes_its_profile(tmp_path):
    """Python >= 3.12's cProfile runs on sys.monitoring: sys.getprofile() is None under it, so _leave os._exit-ed
    before cProfile wrote the profile (passes on 3.10/3.11, fails on 3.12+)."""
    prof = tmp_path / "p.prof"
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", prof, "-m", "aclnn_cli", "--version"], cwd=ROOT,
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert prof.exists() and prof.stat().st_size > 0
