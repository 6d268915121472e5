"""A suite's small cases share one stat record (statcache.SuiteRecord, `.suite-stat-cache.json` at the root verify
was given): a later verify proves their goldens and inputs unchanged by their stat data, without reading an input
or hashing a file, and still catches every change after gen.

Each test of a change first shows the record in the state where it would skip the hashing (so the test proves the
stat data catches the change, not that hashing happened anyway).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from aclnn_cli.files import statcache

from helpers import run_cli, write_yaml

CASES = ("op: aclnnSiluBackward\ndefaults: {dtype: float16, shape: [256]}\ncases:\n"
         + "".join(f"  - {{name: c{i}, seed: {i}}}\n" for i in range(6)))
FILES = ("gradInput.golden.bin", "gradOutput.bin", "self.bin")  # (what verify checks of a case: golden, inputs)


def _verify(out: Path, *args: str) -> tuple[int, dict]:
    r = run_cli("verify", out, "-j", "1", "--junit", out.parent / "v.xml", *args)
    statuses = {}
    import xml.etree.ElementTree as ET

    for tc in ET.parse(out.parent / "v.xml").getroot().iter("testcase"):
        bad = tc.find("failure") if tc.find("failure") is not None else tc.find("error")
        statuses[tc.get("name")] = "PASS" if bad is None else bad.text.split()[0]
    return r.exit_code, statuses


def _record(out: Path) -> dict:
    doc = json.loads((out / statcache.SUITE_FILE).read_text())
    assert doc["format"] == statcache.SUITE_FORMAT
    return doc["cases"]


@pytest.fixture
def suite(tmp_path, monkeypatch) -> Path:
    """Six generated and emulated small cases, verified once: their record proves every file (RACY_NS = 0: no file
    is ever racily clean; the test of the rule restores it)."""
    monkeypatch.setattr(statcache, "RACY_NS", 0)
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, CASES), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    time.sleep(0.01)  # (the record is dated after the files' last change)
    code, statuses = _verify(out)
    assert code == 0 and set(statuses.values()) == {"PASS"} and len(statuses) == 6
    cases = _record(out)
    assert len(cases) == 6 and all(sorted(line.split(" ", 1)[0] for line in lines) == sorted(FILES)
                                   for lines in cases.values()), cases
    return out


def test_a_second_verify_reads_no_input_and_hashes_no_file(suite, monkeypatch):
    """The point of it: every golden and input proven by its stat data, no input opened, no golden hashed."""
    opened, hashed = [], []
    real_open, real_sha = os.open, hashlib.sha256
    monkeypatch.setattr(os, "open", lambda path, *a, **k: (opened.append(os.path.basename(str(path))),
                                                          real_open(path, *a, **k))[1])
    monkeypatch.setattr(hashlib, "sha256", lambda data=b"", *a, **k: (hashed.append(len(data)), real_sha(data, *a, **k))[1])
    before = (suite / statcache.SUITE_FILE).stat()
    assert _verify(suite)[0] == 0
    assert not {"self.bin", "gradOutput.bin"} & set(opened), opened
    assert 512 not in hashed, hashed  # (a golden or input: 256 float16; the manifests' seals are hashed, as ever)
    after = (suite / statcache.SUITE_FILE).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # (nothing new: not rewritten)


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[7] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("how", ["rewritten", "times-restored", "replaced"])
def test_each_change_after_a_recorded_verify_is_caught(suite, name, how):
    """A golden or input changed after the record: in place (its size kept), with its mtime put back (`touch -r`:
    the ctime moves), or replaced by another file (another inode) with its times. The case is ERROR, not judged on
    what changed, and the others pass from the record."""
    victim = sorted(p for p in suite.iterdir() if p.is_dir())[2]
    path = victim / name
    st = path.stat()
    if how == "replaced":
        other = path.with_name("x.tmp")
        other.write_bytes(path.read_bytes())
        _flip(other)
        os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(other, path)
    else:
        _flip(path)
        if how == "times-restored":
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    code, statuses = _verify(suite)
    assert code != 0 and statuses.pop(victim.name) == "ERROR", statuses
    assert set(statuses.values()) == {"PASS"}
    assert victim.name not in _record(suite) and len(_record(suite)) == 5  # (it is hashed again next time)


def test_a_record_forged_for_a_changed_file_passes_and_rehash_catches_it(suite):
    """What the record cannot see: a line written to match a changed input (verify --rehash is the audit)."""
    victim = sorted(p for p in suite.iterdir() if p.is_dir())[0]
    path = victim / "self.bin"
    _flip(path)
    cases = _record(suite)
    lines = cases[victim.name]
    old = next(line for line in lines if line.startswith("self.bin "))
    lines[lines.index(old)] = statcache.line("self.bin", old.split(" ")[1], path.stat())
    (suite / statcache.SUITE_FILE).write_text(json.dumps({"format": statcache.SUITE_FORMAT, "cases": cases}))
    assert _verify(suite)[1][victim.name] == "PASS"
    code, statuses = _verify(suite, "--rehash")
    assert code != 0 and statuses[victim.name] == "ERROR"
    assert victim.name not in _record(suite)  # (--rehash recorded what it proved: not the forged line)


@pytest.mark.parametrize("damage", [b"", b"{", b"[1,2]", b"[" * 65000, b"{\"a\":" * 40000, b"\xff\xfe",
                                    b'{"format": "aclnn-cli/suite-stat-cache/1", "cases": []}',
                                    b'{"format": "aclnn-cli/suite-stat-cache/1", "cases": {"x": 1, "y": [5]}}',
                                    "wrong-case-lines", "another-suites-format"])
def test_a_damaged_record_means_hash_everything(suite, damage):
    """Whatever the file holds, a changed input is still caught, the others pass, and no exception escapes."""
    record = suite / statcache.SUITE_FILE
    if damage == "wrong-case-lines":  # (each case's lines given to another case)
        cases = _record(suite)
        keys = sorted(cases)
        damage = json.dumps({"format": statcache.SUITE_FORMAT,
                             "cases": {k: cases[keys[(i + 1) % len(keys)]] for i, k in enumerate(keys)}}).encode()
    elif damage == "another-suites-format":
        damage = json.dumps({"format": statcache.FORMAT, "cases": _record(suite)}).encode()
    record.write_bytes(damage)
    victim = sorted(p for p in suite.iterdir() if p.is_dir())[1]
    _flip(victim / "gradOutput.bin")
    code, statuses = _verify(suite)
    assert code != 0 and statuses.pop(victim.name) == "ERROR" and set(statuses.values()) == {"PASS"}


def test_files_changed_within_the_racy_window_are_not_recorded(tmp_path):
    """Right after gen every file is younger than RACY_NS: verify hashes them and records no line for them (a line
    would prove nothing); the record is not even written."""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, CASES), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    assert _verify(out)[0] == 0
    assert not (out / statcache.SUITE_FILE).exists()


def test_cases_gone_are_dropped_and_other_shards_kept(suite):
    """A case removed from the suite leaves the record; a verify of one shard keeps the other shard's lines."""
    import shutil

    gone = sorted(p for p in suite.iterdir() if p.is_dir())[0]
    shutil.rmtree(gone)
    assert _verify(suite)[0] == 0
    assert gone.name not in _record(suite) and len(_record(suite)) == 5
    whole = _record(suite)
    for shard in ("1/2", "2/2"):
        assert run_cli("verify", suite, "-j", "1", "--shard", shard).exit_code == 0
        assert _record(suite) == whole


def test_a_suite_verified_from_inside_keeps_its_record(suite, monkeypatch):
    """`verify .` in OUT: the same record, the same keys (the case directories are relative paths then)."""
    whole = _record(suite)
    monkeypatch.chdir(suite)
    (suite / statcache.SUITE_FILE).unlink()
    assert run_cli("verify", ".", "-j", "1").exit_code == 0
    assert _record(suite) == whole


def test_one_case_verified_alone_keeps_no_suite_record(suite):
    """verify of a case directory writes nothing beside it: the record is the suite's, kept where verify was given
    the suite."""
    (suite / statcache.SUITE_FILE).unlink()
    case = sorted(p for p in suite.iterdir() if p.is_dir())[0]
    assert run_cli("verify", case).exit_code == 0
    assert not (suite / statcache.SUITE_FILE).exists() and not (case / statcache.SUITE_FILE).exists()


def test_the_verdicts_are_the_same_with_and_without_the_record(suite):
    """The record only skips work: every case's result is the same, proven by the record (the small-batch pass,
    which --json would turn off), hashed again (--rehash), or with no record at all."""
    from aclnn_cli.casedir.dirs import find_cases
    from aclnn_cli.judge.verify import Options, verify_dirs

    def results(**kw):
        run = verify_dirs(find_cases(suite), Options(**kw), jobs=2, root=suite)
        return [r.to_json() for r in run.cases]

    proven, rehashed = results(), results(rehash=True)
    (suite / statcache.SUITE_FILE).unlink()
    assert proven == rehashed == results() and len(proven) == 6


def test_a_verify_with_json_keeps_the_record(suite, tmp_path):
    """--json (--html, --csv-errors) judges every element on the per-case path, which reads no record: the cases it
    did not look at keep their lines (a line only ever matches the file state it was taken from)."""
    before = _record(suite)
    assert run_cli("verify", suite, "-j", "1", "--json", tmp_path / "r.json").exit_code == 0
    assert _record(suite) == before


def test_a_golden_changed_while_it_is_read_is_caught(suite, monkeypatch):
    """A golden the record proves is trusted for the bytes read under the stat data it names: bytes changed between
    its stat and its read (a writer at work during verify; here one element's lowest bit, which still passes) make
    the case ERROR, as a hash of the bytes read would."""
    victim = sorted(p for p in suite.iterdir() if p.is_dir())[2]
    golden = victim / "gradInput.golden.bin"
    ino = golden.stat().st_ino
    real, done = os.readv, []

    def readv(fd, buffers):
        if not done and os.fstat(fd).st_ino == ino:
            done.append(1)
            w = os.open(golden, os.O_WRONLY)
            os.pwrite(w, bytes([os.pread(fd, 1, 6)[0] ^ 1]), 6)
            os.close(w)
        return real(fd, buffers)

    monkeypatch.setattr(os, "readv", readv)
    code, statuses = _verify(suite)
    assert done and statuses[victim.name] == "ERROR", statuses


def test_a_file_with_an_old_mtime_and_a_recent_ctime_is_racy(tmp_path):
    """The racy rule looks at the ctime too: files whose mtime was put back an hour right after gen are still racily
    clean (their ctime, which only the kernel sets, is now): no line is written."""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, CASES), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    old = time.time_ns() - 3600 * 10**9
    for p in out.rglob("*.bin"):
        os.utime(p, ns=(old, old))
    assert _verify(out)[0] == 0
    assert not (out / statcache.SUITE_FILE).exists()


@pytest.mark.parametrize("field", ["name", "digest", "size", "mtime", "ctime", "inode", "device"])
def test_a_line_proves_only_the_file_state_it_names_in_every_field(suite, monkeypatch, field):
    """Each field of a line is compared: a line wrong in any one of them proves nothing, and the file is read and
    hashed (an input opened)."""
    at = ["name", "digest", "size", "mtime", "ctime", "inode", "device"].index(field)
    cases = _record(suite)
    for lines in cases.values():
        for i, text in enumerate(lines):
            parts = text.split(" ")
            parts[at] = "x" + parts[at] if field in ("name", "digest") else str(int(parts[at]) + 1)
            lines[i] = " ".join(parts)
    (suite / statcache.SUITE_FILE).write_text(json.dumps({"format": statcache.SUITE_FORMAT, "cases": cases}))
    opened, real_open = [], os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: (opened.append(os.path.basename(str(path))),
                                                          real_open(path, *a, **k))[1])
    assert _verify(suite)[0] == 0
    assert opened.count("self.bin") == 6 and opened.count("gradOutput.bin") == 6, opened
