"""report merges results files by streaming (issue 31, finding 17): flat memory, the same outputs, strict input.

- the JSON stream reads what jsonsafe.loads reads, and refuses what it refuses, whatever the chunk size (a
  fuzz target on hostile documents cut into pieces as small as one byte);
- the merged JSON, JUnit and console output of a run with failing cases are what the in-memory merge gives;
- report's peak memory on a large results file stays under a bound in its case count (the whole file parsed
  at once held ten times the file: a 68 MB file took over 600 MB);
- the limits: a results file of any size is read, a case over MAX_CASE_CHARS is refused, a cut file is
  one line naming the line and column, a file whose schema comes after its cases is read alike.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import strategies as st
from rich.console import Console

from aclnn_cli.files import jsonsafe
from aclnn_cli.files.jsonsafe import JsonRefused
from aclnn_cli.files.jsonstream import JsonStream, TooLong
from aclnn_cli.report.formats import _case_text, _document, _verify_chunks, merged_run, print_cases, print_summary, \
    write_verify_json
from aclnn_cli.report.junit import write_junit
from aclnn_cli.report.merged import read_results
from aclnn_cli.report.reading import MAX_CASE_CHARS
from aclnn_cli.tensor.storage import atomic_write_text

from fuzzing import fuzz_target, scratch
from helpers import run_cli, write_yaml

ROOT = Path(__file__).resolve().parent.parent

CASES = """op: SiluBackward
cases:
  - {name: a, dtype: [float16, float32, bfloat16], shape: [[4, 3], [7], [2, 3, 5]]}
  - {name: strided, dtype: float16, shape: [5], tensors: {gradInput: {layout: {step: 2}}}}
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> tuple[Path, Path]:
    """verify --json of a small suite, passing, and of the same under the sign-slip defect (failing)."""
    root = tmp_path_factory.mktemp("stream")
    out = root / "out"
    assert run_cli("gen", write_yaml(root, CASES), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    assert run_cli("verify", out, "--json", root / "pass.json").exit_code == 0
    assert run_cli("emulate", out, "--defect", "sign-slip").exit_code == 0
    assert run_cli("verify", out, "--json", root / "fail.json").exit_code == 1
    return root / "pass.json", root / "fail.json"


# ---------------------------------------------------------------- the stream against jsonsafe.loads

def read_all(s: JsonStream, limit: int, depth: int = 1):
    """The whole document through the stream's walk: values over `limit` read member by member."""
    try:
        return s.value(limit)
    except TooLong:
        pass
    if s.peek() == "{":
        out = {}
        for key in s.members():
            if key in out:
                raise JsonRefused(f"duplicate key {key!r}")
            out[key] = read_all(s, limit, depth + 1)
        return out
    if s.peek() == "[":
        return [read_all(s, limit, depth + 1) for _ in s.items()]
    return s.value(1 << 30)  # (a scalar longer than limit)


def streamed(data: bytes, chunk: int, limit: int):
    with scratch() as d:
        path = d / "doc.json"
        path.write_bytes(data)
        fd = os.open(path, os.O_RDONLY)
        try:
            s = JsonStream(fd, chunk=chunk)
            value = read_all(s, limit)
            s.end()
            return value
        finally:
            os.close(fd)


LEAF = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False, allow_infinity=False),
                 st.text(max_size=12), st.sampled_from(["é", "\u2028", "\ud800", "a\"b\\c", "1e999"]))
DOCS = st.recursive(LEAF, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                                     max_size=4), max_leaves=30)
SPLICES = st.sampled_from([b"", b"1e999", b"-1e400", b"NaN", b"Infinity", b"-", b"1" * 45, b"0.5e+", b"\"", b"]", b"}",
                           b",", b":", b"{", b"[", b"\xff", b"\xc3", b"\xef\xbb\xbf", b"\"\\u12", b" ", b"\n",
                           b"{\"a\":1,\"a\":2}", b"tru", b"[" * 70 + b"]" * 70])


@fuzz_target(doc=DOCS, chunk=st.integers(1, 40), limit=st.integers(0, 64), cut=st.integers(0, 10**6),
             splice=SPLICES, mode=st.sampled_from(["whole", "cut", "splice", "replace"]))
def test_fuzz_json_stream_reads_what_jsonsafe_reads(doc, chunk, limit, cut, splice, mode):
    """Any piece size, any walk: the value json gives, or a one-line JsonRefused where jsonsafe refuses."""
    data = json.dumps(doc, indent=cut % 3 or None).encode()
    at = cut % (len(data) + 1)
    data = {"whole": data, "cut": data[:at], "splice": data[:at] + splice + data[at:],
            "replace": data[:at] + splice + data[at + 1:]}[mode]
    try:
        expected = jsonsafe.loads(jsonsafe.decode_utf8(data))
    except JsonRefused:
        expected = JsonRefused
    try:
        got = streamed(data, chunk, limit)
    except JsonRefused as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 300
        got = JsonRefused
    if expected is JsonRefused and got is not JsonRefused:  # (jsonsafe's nesting limit is the whole document's;
        assert b"[" * 65 in data or b"{" * 65 in data      # the stream's values nest as deep as json's recursion)
        return
    assert got == expected or json.dumps(got) == json.dumps(expected)  # (nan-free: equal, key order included)


def test_a_cut_file_names_the_line_and_column(tmp_path):
    """Where json.loads of the whole text would say it (line 4 column 26)."""
    path = tmp_path / "cut.json"
    path.write_bytes(b'{\n  "schema": "aclnn-cli/verify/4",\n  "cases": [\n    {"case_id": "a", "op"')
    done = run_cli("report", path)
    assert done.exit_code == 2
    assert f"{path}: not a readable results file: not valid JSON: Expecting ':' delimiter at line 4 column 26" \
        in done.output


# ---------------------------------------------------------------- the same outputs

def old_merge(paths: list[Path], strict: bool = False):
    """The merge as report made it before streaming: every file parsed whole, every case a CaseResult."""
    return merged_run([c for p in paths for c in json.loads(p.read_text())["cases"]], strict=strict)


def outputs(run, d: Path) -> tuple[bytes, bytes, str]:
    console = Console(file=io.StringIO(), width=200)
    print_cases(console, run, show_passing=True)
    print_summary(console, run)
    write_verify_json(d / "m.json", run, None)
    write_junit(d / "m.xml", run)
    return (d / "m.json").read_bytes(), (d / "m.xml").read_bytes(), console.file.getvalue()


def test_merged_outputs_are_the_in_memory_merges(results, tmp_path):
    """Byte for byte on files verify wrote; a file written otherwise (here indent=1) merges into equal JSON data
    (each case's text is kept as it came where it is what the merge would write) and the same JUnit and console."""
    renamed = json.loads(results[0].read_text())  # (two runs of the suite merged: other case ids)
    for c in renamed["cases"]:
        c["case_id"] += "-again"
    (tmp_path / "pass.json").write_text(json.dumps(renamed, indent=1))
    for i, paths in enumerate(([results[1]], [tmp_path / "pass.json", results[1]])):
        (tmp_path / f"old{i}").mkdir()
        (tmp_path / f"new{i}").mkdir()
        old, new = outputs(old_merge(paths), tmp_path / f"old{i}"), outputs(read_results(paths), tmp_path / f"new{i}")
        assert old[1:] == new[1:]  # JUnit, console
        assert old[0] == new[0] if i == 0 else json.loads(old[0]) == json.loads(new[0])
        assert b'"FAIL"' in new[0] and b"<failure" in new[1]


def test_a_case_read_without_its_error_data_has_every_other_field(results):
    """The console and JUnit read a failing case from its text without the error data (merged.Store): every other
    field as the whole text gives it, and the error data where it is asked for."""
    run = read_results([results[1]])
    whole = {c["case_id"]: c for c in json.loads(results[1].read_text())["cases"]}
    with_errors = [c for c in run.cases if whole[c.case_id]["errors"]]
    assert with_errors
    for c in with_errors:
        lean = c.to_json(errors=False)
        assert lean == {k: v for k, v in whole[c.case_id].items() if k != "errors"}
        assert (c.reason, c.worst, c.metrics) == (lean["reason"], lean["worst"], lean["metrics"])
        assert c.errors == whole[c.case_id]["errors"] and c.to_json() == whole[c.case_id]


def test_results_rewritten_with_sorted_keys_merge_alike(results, tmp_path):
    """Other tools may rewrite a results file (jq -S, json.dump(sort_keys=True)): its cases come before its schema."""
    sorted_ = tmp_path / "sorted.json"
    sorted_.write_text(json.dumps(json.loads(results[1].read_text()), sort_keys=True))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = outputs(read_results([sorted_]), tmp_path / "a"), outputs(read_results([results[1]]), tmp_path / "b")
    assert json.loads(a[0]) == json.loads(b[0]) and a[1:] == b[1:]


def test_other_json_with_cases_after_its_schema_is_not_merged(results, tmp_path):
    """A file whose cases came first and whose schema is not ours: its cases are taken back, as before."""
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"cases": json.loads(results[0].read_text())["cases"], "schema": "atk/1"}))
    run = read_results([other, results[1]])  # (other's cases first, as the directory lists them: both suites' ids)
    assert [c.case_id for c in run.cases] == [c["case_id"] for c in json.loads(results[1].read_text())["cases"]]


# ---------------------------------------------------------------- limits and memory

def test_a_case_over_the_limit_is_one_line(results, tmp_path):
    data = json.loads(results[0].read_text())
    data["cases"][1]["params"] = {f"k{i}": i for i in range(MAX_CASE_CHARS // 10)}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(data))
    done = run_cli("report", path)
    assert done.exit_code == 2
    assert done.output.strip().endswith(f"{path}: not a readable results file: case #2 is more than "
                                        f"{MAX_CASE_CHARS >> 20} MiB of JSON (verify writes at most about 100 KB a case)")


CASES_IN_LARGE = 20_000
BASE_MIB, PER_CASE_KIB = 110, 1  # report's start (numpy, rich) with room; what a brief row costs, with room


def test_report_memory_is_flat_in_the_size_of_the_results(results, tmp_path):
    """A 20,000-case results file (68 MB): report's peak RSS under BASE_MIB + PER_CASE_KIB per case. Reading the
    file whole (as before) held about ten times its size."""
    cases = json.loads(results[1].read_text())["cases"]

    def case(i: int, number: str | None = None) -> dict:
        c = dict(cases[i % len(cases)], case_id=f"{cases[i % len(cases)]['case_id']}-{number or i}")
        c["path"] = f"/out/{c['case_id']}"
        return c

    big = tmp_path / "big.json"
    head = {"schema": "aclnn-cli/verify/4", "tool_version": "x", "standard_override": None, "exit_code": 1,
            "summary": {"total": CASES_IN_LARGE}, "coverage": None}
    # (each distinct case's text made once, its number put in after: JSON with indent is Python's slow encoder, and
    # 20,000 cases of it cost more than report did; the bytes _verify_chunks writes case by case, as checked here)
    templates = [_case_text(case(i, "{#}")).replace("\n", "\n    ") for i in range(len(cases))]
    atomic_write_text(big, _document(head, (templates[i % len(cases)].replace('-{#}"', f'-{i}"')
                                            for i in range(CASES_IN_LARGE))))
    few = tmp_path / "few.json"
    atomic_write_text(few, _verify_chunks(head, (case(i) for i in range(3 * len(cases)))))
    assert big.read_bytes().startswith(few.read_bytes()[:-len(b"\n  ]\n}\n")])
    assert big.stat().st_size > 40 << 20
    probe = ("import atexit, runpy, sys\nsys.argv = ['aclnn-cli', 'report', sys.argv[1], '--json', sys.argv[2], "
             "'--junit', sys.argv[3]]\natexit.register(lambda: print('RSS', next(line for line in open('/proc/self/"
             "status') if line.startswith('VmHWM')).split()[1], file=sys.stderr))\n"
             "runpy.run_module('aclnn_cli', run_name='__main__')\n")  # (the command's exit runs the atexit functions)
    # (VmHWM, not ru_maxrss: Linux keeps a process's ru_maxrss across exec, so a child of a test worker that had
    # grown to a gigabyte reported the worker's peak; the high-water mark of its own memory starts at exec)
    done = subprocess.run([sys.executable, "-c", probe, big, tmp_path / "m.json", tmp_path / "m.xml"], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    rss_kib, code = int(done.stderr.strip().splitlines()[-1].split()[1]), done.returncode
    assert code == 1, done.stderr[-2000:]
    assert json.loads((tmp_path / "m.json").read_text())["summary"]["total"] == CASES_IN_LARGE
    assert rss_kib < (BASE_MIB << 10) + PER_CASE_KIB * CASES_IN_LARGE, f"peak RSS {rss_kib >> 10} MiB"
