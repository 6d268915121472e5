"""verify hashes only what can have changed (statcache.py), and still catches every change after gen.

Each way a golden or an input can change after gen is its own test, and each first shows that the
stat cache is in the state where it would skip hashing (so the test proves the stat data catches the
change, not that hashing happened anyway).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from aclnn_cli.casedir import manifest as M
from aclnn_cli.files import statcache
from aclnn_cli.judge.comparison import checksummed_files
from aclnn_cli.judge.verify import Options, verify_dirs

from helpers import run_cli, write_yaml

CASES = "op: aclnnSiluBackward\ndefaults: {seed: 3, dtype: float16}\ncases:\n  - {name: a, shape: [64, 33]}\n"


def _digests(case_dir: Path) -> dict[str, str]:
    m = M.load(case_dir)
    return {os.path.basename(str(p)): sha for p, sha, _ in checksummed_files(m)}


def _verdict(case_dir: Path, rehash: bool = False):
    (r,) = verify_dirs([case_dir], Options(rehash=rehash)).cases
    return r.status, r.reason


@pytest.fixture(autouse=True)
def every_case_is_worth_a_record(monkeypatch):
    """The cases here are small; records are kept for small cases too (see the WORTH_BYTES test)."""
    monkeypatch.setattr(statcache, "WORTH_BYTES", 0)


def test_small_cases_are_hashed_not_recorded(tmp_path, monkeypatch):
    """Below WORTH_BYTES, hashing a case's files costs less than writing a record: none is written."""
    monkeypatch.setattr(statcache, "RACY_NS", 0)
    p = write_yaml(tmp_path, CASES)  # 3 files of 64 x 33 float16: 12,672 bytes
    out = tmp_path / "out"
    assert run_cli("gen", p, "-o", out).exit_code == 0 and run_cli("emulate", out).exit_code == 0
    (d,) = [x for x in out.iterdir() if x.is_dir()]
    time.sleep(0.01)
    monkeypatch.setattr(statcache, "WORTH_BYTES", 12_673)
    assert _verdict(d)[0] == "PASS" and not (d / statcache.CACHE_FILE).exists()
    monkeypatch.setattr(statcache, "WORTH_BYTES", 12_672)
    assert _verdict(d)[0] == "PASS" and statcache.unchanged(str(d), _digests(d))


@pytest.fixture
def case(tmp_path, monkeypatch) -> Path:
    """A generated and emulated case whose stat cache proves every file unchanged (RACY_NS = 0: no file
    is ever racily clean; the tests that need the rule restore it)."""
    monkeypatch.setattr(statcache, "RACY_NS", 0)
    p = write_yaml(tmp_path, CASES)
    out = tmp_path / "out"
    assert run_cli("gen", p, "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    (d,) = [x for x in out.iterdir() if x.is_dir()]
    time.sleep(0.01)  # (the record must be taken after the files' last change: taken_ns > mtime)
    assert _verdict(d) == ("PASS", _verdict(d)[1])
    assert statcache.unchanged(str(d), _digests(d)), "an unchanged case must be proven without hashing"
    return d


def _changed(case_dir: Path, name: str) -> None:
    status, reason = _verdict(case_dir)
    assert status == "ERROR" and "changed since gen" in reason or "bytes" in reason, (status, reason)
    assert name.split(".")[0] in reason or "golden" in reason


@pytest.mark.parametrize("name", ["gradInput.golden.bin", "self.bin", "gradOutput.bin"])
def test_rewritten_with_a_new_size_is_caught(case, name):
    path = case / name
    path.write_bytes(path.read_bytes() + b"\0\0")
    status, reason = _verdict(case)
    assert status == "ERROR" and str(path) in reason, reason


@pytest.mark.parametrize("name", ["gradInput.golden.bin", "self.bin", "gradOutput.bin"])
def test_rewritten_with_the_same_size_is_caught(case, name):
    path = case / name
    data = bytearray(path.read_bytes())
    data[10] ^= 0x01
    path.write_bytes(bytes(data))
    status, reason = _verdict(case)
    assert status == "ERROR" and "changed since gen" in reason and str(path) in reason, reason


@pytest.mark.parametrize("name", ["gradInput.golden.bin", "self.bin"])
def test_changed_in_place_with_its_mtime_restored_is_caught(case, name):
    """`touch -r`: the mtime is put back, the inode and size are the same; the ctime moved."""
    path = case / name
    before = os.stat(path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x40
    with open(path, "r+b") as f:  # in place: same inode
        f.write(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    status, reason = _verdict(case)
    assert status == "ERROR" and "changed since gen" in reason and str(path) in reason, reason


@pytest.mark.parametrize("name", ["gradInput.golden.bin", "gradOutput.bin"])
def test_replaced_by_another_file_with_the_same_times_is_caught(case, name):
    path = case / name
    before = os.stat(path)
    other = case / "other.tmp"
    data = bytearray(path.read_bytes())
    data[0] ^= 0x01
    other.write_bytes(bytes(data))
    os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(other, path)
    status, reason = _verdict(case)
    assert status == "ERROR" and "changed since gen" in reason and str(path) in reason, reason


def test_changed_within_the_same_second_that_gen_wrote_it_is_caught(tmp_path, monkeypatch):
    """On a file system with 1-second timestamps, a change in the same second as gen's write keeps the
    very stat data recorded then (emulated here by flooring the times to whole seconds; the record is
    forced, since record() refuses to write a racy one). The record is racily clean: verify hashes the file again, and catches the change. The control at the end
    shows the racy rule is what catches it: without it the cache would vouch for the changed file."""
    def coarse(path):
        sd = real(path)
        return None if sd is None else (sd[0], sd[1] // 10**9 * 10**9, sd[2] // 10**9 * 10**9, sd[3], sd[4])

    real = statcache.stat_data
    monkeypatch.setattr(statcache, "stat_data", coarse)
    p = write_yaml(tmp_path, CASES)
    for attempt in range(20):
        out = tmp_path / f"out{attempt}"
        assert run_cli("gen", p, "-o", out).exit_code == 0
        (d,) = [x for x in out.iterdir() if x.is_dir()]
        digests = _digests(d)
        monkeypatch.setattr(statcache, "RACY_NS", -10**12)  # a record taken right after gen's write, written
        statcache.record(str(d), statcache.snapshot(str(d), list(digests)), digests)  # (record() would not)
        monkeypatch.setattr(statcache, "RACY_NS", 2 * 10**9)
        path = d / "gradInput.golden.bin"
        recorded = coarse(str(path))
        data = bytearray(path.read_bytes())
        data[5] ^= 0x01
        with open(path, "r+b") as f:
            f.write(bytes(data))
        os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns))
        if coarse(str(path)) == recorded:  # the change landed in the same second: same stat data
            break
    else:
        pytest.fail("could not change a file within the second gen wrote it in 20 tries")
    assert run_cli("emulate", out).exit_code == 0
    status, reason = _verdict(d)
    assert status == "ERROR" and "changed since gen" in reason, reason
    monkeypatch.setattr(statcache, "RACY_NS", -10**12)  # control: treat no record as racy
    assert statcache.unchanged(str(d), _digests(d)), "the stat data alone cannot see this change"


def test_rehash_hashes_everything(case):
    """A change the stat data cannot see (here: a record forged to match the changed file) passes
    without --rehash, and --rehash catches it."""
    path = case / "self.bin"
    data = bytearray(path.read_bytes())
    data[3] ^= 0x01
    path.write_bytes(bytes(data))
    digests = _digests(case)
    time.sleep(0.01)
    statcache.record(str(case), statcache.snapshot(str(case), list(digests)), digests)  # forged
    assert _verdict(case)[0] == "PASS"
    status, reason = _verdict(case, rehash=True)
    assert status == "ERROR" and "changed since gen" in reason and str(path) in reason, reason
    r = run_cli("verify", case, "--rehash")
    assert r.exit_code != 0 and "changed since gen" in r.output


def test_an_unchanged_case_is_not_hashed_again(case, monkeypatch):
    """The whole point: with the record proving the files unchanged, verify reads no input at all."""
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: (opened.append(os.path.basename(str(path))),
                                                          real_open(path, *a, **k))[1])
    assert _verdict(case)[0] == "PASS"
    assert "self.bin" not in opened and "gradOutput.bin" not in opened, opened


@pytest.mark.parametrize("damage", [b"", b"{", b"[1,2]", b"[" * 65000, b"{\"a\":" * 40000,
                                    b'{"format": "aclnn-cli/stat-cache/1", "taken_ns": "x"}',
                                    b'{"format": "aclnn-cli/stat-cache/1", "taken_ns": 1, "files": {"self.bin": 5}}'])
def test_a_damaged_record_means_hash_everything(case, damage):
    (case / statcache.CACHE_FILE).write_bytes(damage)
    assert not statcache.unchanged(str(case), _digests(case))
    path = case / "self.bin"
    data = bytearray(path.read_bytes())
    data[3] ^= 0x01
    path.write_bytes(bytes(data))
    assert _verdict(case)[0] == "ERROR"


def test_gen_output_stays_reproducible(tmp_path):
    """The stat data lives beside the manifest, not in it: two gens give the same case.json bytes."""
    p = write_yaml(tmp_path, CASES)
    for out in ("o1", "o2"):
        assert run_cli("gen", p, "-o", tmp_path / out).exit_code == 0
    (a,) = (tmp_path / "o1").iterdir()
    (b,) = (tmp_path / "o2").iterdir()
    assert (a / "case.json").read_bytes() == (b / "case.json").read_bytes()
    assert not (a / statcache.CACHE_FILE).exists()  # (it would be racily clean: see statcache.py)


def test_a_racily_clean_record_is_not_written(tmp_path):
    """Right after gen every file is younger than RACY_NS: verify hashes them and writes no record (it
    would prove nothing); once they are older, it does."""
    p = write_yaml(tmp_path, CASES)
    out = tmp_path / "out"
    assert run_cli("gen", p, "-o", out).exit_code == 0 and run_cli("emulate", out).exit_code == 0
    (d,) = [x for x in out.iterdir() if x.is_dir()]
    assert _verdict(d)[0] == "PASS" and not (d / statcache.CACHE_FILE).exists()
    statcache_racy, statcache.RACY_NS = statcache.RACY_NS, 0
    try:
        time.sleep(0.01)
        assert _verdict(d)[0] == "PASS" and statcache.unchanged(str(d), _digests(d))
    finally:
        statcache.RACY_NS = statcache_racy
