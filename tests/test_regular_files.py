"""Only regular files, read in bounded size (issue 18, part 4).

A FIFO, device or directory in the place of any file the tool reads (inputs, golden, dump, status,
run verdict, case.json, a results file) is refused with one line naming it, never waited on; the CLI
runs in a process of its own with a timeout, so a hang fails the test instead of hanging the suite. Manifests
and results files are strict JSON under jsonsafe's limits, with their fields' types checked.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from aclnn_cli.casedir import manifest as M
from aclnn_cli.errors import UserError
from aclnn_cli.files.regular import NotRegular, TooLarge, read_head, read_regular
from aclnn_cli.files.regular import sha256_of_file
from aclnn_cli.tensor.wholefiles import LoadedFile

from clifork import cli_process
from helpers import run_cli, write_yaml

HANG = float(os.environ.get("ACLNN_HANG_SECONDS", "60"))  # far beyond what these runs take: reaching it is a hang
CASES = """op: SiluBackward
cases:
  - {name: small, dtype: float16, shape: [64]}
  - {name: strided, dtype: float16, shape: [8, 8], tensors: {gradInput: {layout: {step: 2, offset: 3, tail: 5}}}}
  - {name: chunked, dtype: float16, shape: [600000]}
"""
FILES = ("self.bin", "gradOutput.bin", "gradInput.golden.bin", "gradInput.dump.bin", "status.txt", "run-verdict.txt",
         "case.json")


def cli(*args, timeout: float = HANG, pre: str = "") -> subprocess.CompletedProcess:
    """The CLI in a process of its own (clifork.py's; pre: Python run first in it, in a new interpreter); a hang is
    a failed test, not a hung suite."""
    if not pre:
        try:
            return cli_process(*args, timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"aclnn-cli {' '.join(map(str, args))} hung (no answer in {timeout} s)")
    script = f"{pre}\nfrom aclnn_cli.cli.main import main; main()"
    argv = [sys.executable, "-c", script, *map(str, args)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:  # (its own group: a hung worker is ended with it)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail(f"aclnn-cli {' '.join(map(str, args))} hung (no answer in {timeout} s)")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


@contextlib.contextmanager
def no_hang(seconds: float = HANG):
    """In-process reads: a hang becomes a failed test (SIGALRM interrupts the blocked call)."""
    def fire(*_):
        raise TimeoutError(f"hung for {seconds} s")
    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(max(1, int(seconds)))
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def error_lines(done: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    return [line for line in (done.stdout + done.stderr).splitlines() if "error" in line.lower()]


@pytest.fixture(scope="module")
def emulated(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("regular")
    out = tmp / "out"
    assert run_cli("gen", write_yaml(tmp, CASES), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    return out


@pytest.fixture()
def copy(emulated, tmp_path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(emulated, out)
    return out


# 1. FIFOs in the place of what verify and emulate read


@pytest.mark.parametrize("case", ["small", "strided", "chunked"])
@pytest.mark.parametrize("name", FILES)
def test_verify_refuses_a_fifo_in_place_of_a_file(copy, case, name):
    path = copy / f"silu_backward-{case}" / name
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    done = cli("verify", copy, "--json", copy / "v.json")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    verdicts = {c["case_id"]: (c["status"], c["reason"]) for c in json.loads((copy / "v.json").read_text())["cases"]}
    status, reason = verdicts.pop(f"silu_backward-{case}")
    assert status == "ERROR" and str(path) in reason, reason
    assert "not a regular file (a FIFO)" in reason or "is a FIFO, not a regular file" in reason, reason
    assert {s for s, _ in verdicts.values()} == {"PASS"}  # the other cases are judged as before


@pytest.mark.parametrize("name", ["case.json", "self.bin", "gradInput.bin", "gradInput.golden.bin",
                                  "gradInput.dump.bin", "status.txt", "run-verdict.txt"])
def test_emulate_refuses_or_replaces_a_fifo(copy, name):
    """Emulate reads the manifest and inputs (a FIFO there is refused) and replaces dump and status (a FIFO
    there is replaced, never opened)."""
    case = copy / "silu_backward-small"
    (case / name).unlink(missing_ok=True)
    os.mkfifo(case / name)
    done = cli("emulate", copy)
    lines = error_lines(done)
    if name in ("case.json", "self.bin", "gradInput.bin"):
        assert done.returncode == 2 and any(str(case / name) in line and "FIFO" in line for line in lines), lines
    else:
        assert done.returncode == 0 and not lines, lines
        if name != "gradInput.golden.bin":  # (the golden is not emulate's to read or write)
            assert (case / name).is_file() or not (case / name).exists()


def test_emulate_does_not_open_a_fifo_put_where_it_writes_its_dump(copy):
    """The dump is written under a temporary name first; a FIFO waiting there is refused, not opened."""
    case = copy / "silu_backward-small"
    pre = f"import os; os.mkfifo({str(case)!r} + f'/.gradInput.dump.bin.tmp-{{os.getpid()}}')"
    done = cli("emulate", copy, "--jobs", "1", pre=pre)  # (one process: the FIFO is at its temporary name)
    lines = error_lines(done)
    assert done.returncode == 2 and any("not a regular file (a FIFO)" in line for line in lines), lines


def test_a_fifo_case_json_neither_hangs_nor_breaks_gen(copy, tmp_path):
    """gen reads the manifest it wrote before (to keep intact cases); a FIFO there is not one."""
    case = copy / "silu_backward-small"
    (case / "case.json").unlink()
    os.mkfifo(case / "case.json")
    done = cli("gen", write_yaml(tmp_path, CASES), "-o", copy)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert str(case) in done.stderr and "is not a case directory gen wrote" in done.stderr


# 2. The readers themselves


def test_read_regular_refuses_fifo_directory_and_device_without_reading(tmp_path):
    os.mkfifo(tmp_path / "f")
    for path, what in ((tmp_path / "f", "a FIFO"), (tmp_path, "a directory"), ("/dev/zero", "a character device")):
        with pytest.raises(NotRegular) as exc, no_hang():
            read_regular(path, 10)
        assert exc.value.kind == what and exc.value.strerror == f"not a regular file ({what})"
        with pytest.raises(NotRegular), no_hang():
            read_head(path, 10)
    with no_hang():
        assert sha256_of_file(str(tmp_path / "f")) is None


def test_read_regular_refuses_a_large_file_before_reading_it(tmp_path):
    p = tmp_path / "big"
    with open(p, "wb") as f:
        f.truncate(1 << 40)  # a terabyte, sparse: reading it would take forever
    with pytest.raises(TooLarge) as exc:
        read_regular(p, 1 << 20)
    assert (exc.value.size, exc.value.limit) == (1 << 40, 1 << 20)
    assert read_head(p, 4) == b"\0" * 4
    (tmp_path / "small").write_bytes(b"abc")
    assert read_regular(tmp_path / "small", 3) == b"abc"


def test_loaded_file_refuses_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "g.bin")
    with pytest.raises(UserError, match=r"g.bin: golden is a FIFO, not a regular file$"), no_hang():
        LoadedFile(str(tmp_path / "g.bin"), "float16", 4, what="golden")


# 3. Manifests: strict JSON, fields of the right types (a re-signed manifest: its digest recomputed)


def resign(case: Path, edit) -> Path:
    raw = json.loads((case / "case.json").read_text())
    raw = edit(raw)
    if isinstance(raw, dict):
        raw["digest"] = M.digest(raw)
    (case / "case.json").write_text(json.dumps(raw))
    return case / "case.json"


def output_entry(raw: dict) -> dict:
    return next(t for t in raw["tensors"] if t["role"] == "output")


def set_output(key, value):
    def edit(raw):
        output_entry(raw)[key] = value
        return raw
    return edit


def set_top(key, value):
    def edit(raw):
        raw[key] = value
        return raw
    return edit


@pytest.mark.parametrize("edit, message", [
    (set_output("golden", ""), "tensor gradInput: 'golden' must be a file name, got ''"),
    (set_output("golden", None), "tensor gradInput: 'golden' must be a file name, got None"),
    (set_output("dump", 7), "tensor gradInput: 'dump' must be a file name, got 7"),
    (set_top("seed", "5"), "'seed' must be an integer from 0 to 2**63-1, got '5'"),
    (set_top("seed", 2**63), "'seed' must be an integer from 0 to 2**63-1, got 9223372036854775808"),
    (set_top("expect_status", 123456), "'expect_status' must be one of aclnn's statuses"),
    (set_top("product", ["Ascend910B"]), "'product' must be a string, got ['Ascend910B']"),
    (set_output("role", "input"), "tensor gradInput: 'role' must be 'output', got 'input'"),
    (set_output("name", None), "tensor #3: 'name' must be a string, got None"),
    # (make fuzz's finding: a control character in a name the manifest's reader quotes came out raw, two lines)
    (set_output("dtype", "\n"), "tensor gradInput: unknown dtype '\\n' (valid: float32"),
])
def test_a_resigned_manifest_with_wrong_types_is_one_line(copy, edit, message):
    case = copy / "silu_backward-small"
    path = resign(case, edit)
    with pytest.raises(UserError) as exc, no_hang():
        M.load(case)
    text = str(exc.value)
    assert text.startswith(f"{path}: malformed manifest: ") and "\n" not in text, text
    assert message in text, text
    done = cli("verify", copy)
    assert done.returncode == 2 and "Traceback" not in done.stderr


@pytest.mark.parametrize("text, message", [
    ("[1, 2]", "a manifest is a JSON object"),
    ("[" * 100_000 + "]" * 100_000, "nested more than 64 levels deep"),
    ('{"schema": NaN}', "NaN is not JSON"),
    ('{"schema": "x", "schema": "y"}', "duplicate key 'schema'"),
])
def test_a_manifest_that_is_not_a_json_object_is_one_line_in_verify_and_gen(copy, tmp_path, text, message):
    case = copy / "silu_backward-small"
    (case / "case.json").write_text(text)
    with pytest.raises(UserError) as exc:
        M.load(case)
    assert str(exc.value).startswith(f"{case / 'case.json'}: ") and message in str(exc.value), str(exc.value)
    done = cli("gen", write_yaml(tmp_path, CASES), "-o", copy)  # gen regenerates over it
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert M.load(case).case_id == "silu_backward-small"


def test_a_manifest_over_its_limit_is_refused_before_reading(copy):
    case = copy / "silu_backward-small"
    with open(case / "case.json", "r+b") as f:
        f.truncate(1 << 40)
    with pytest.raises(UserError, match=r"manifest is 1099511627776 bytes; gen writes a few KB"):
        M.load(case)


# 4. Results files (report)


def results(tmp_path: Path, out: Path) -> Path:
    assert run_cli("verify", out, "--json", tmp_path / "v.json").exit_code == 0
    return tmp_path / "v.json"


def test_report_refuses_a_huge_file_of_nothing_at_its_first_byte(copy, tmp_path):
    """No size cap (a results file is as large as its run): a 300 MiB file that is not JSON is refused at its
    first byte, in one line, without being read (sparse: the test writes nothing)."""
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(300 << 20)
    done = cli("report", big)
    assert done.returncode == 2
    assert error_lines(done) == [f"aclnn-cli: error: {big}: not a readable results file: not valid JSON: "
                                 f"Expecting value at line 1 column 1"]


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_report_refuses_non_json_numbers(copy, tmp_path, token):
    path = results(tmp_path, copy)
    data = json.loads(path.read_text())
    data["cases"][0]["metrics"]["mare"] = 1.5
    path.write_text(json.dumps(data).replace("1.5", token, 1))
    done = cli("report", path)
    assert done.returncode == 2
    assert error_lines(done) == [f"aclnn-cli: error: {path}: not a readable results file: {token} is not JSON "
                                 f"(write a number, or a string the format defines)"]


def test_report_refuses_duplicate_keys_and_fifos(copy, tmp_path):
    shard = tmp_path / "shard"
    path = results(shard, copy)
    fifo = shard / "fifo.json"
    os.mkfifo(fifo)
    done = cli("report", fifo)
    assert done.returncode == 2
    assert error_lines(done) == [f"aclnn-cli: error: {fifo}: not a regular file or directory (a FIFO)"]
    done = cli("report", shard)  # a FIFO inside a directory of results: passed over, not waited on
    assert done.returncode == 0, done.stdout + done.stderr
    path.write_text(path.read_text().replace('{\n  "schema"', '{\n  "cases": [],\n  "schema"', 1))
    done = cli("report", path)
    assert done.returncode == 2
    assert error_lines(done) == [f"aclnn-cli: error: {path}: not a readable results file: duplicate key 'cases'"]
