"""Hostile and malformed case files: every one is a single `aclnn-cli: error:` line naming file, case and key,
exit 2; never a traceback, a hang, a memory blow-up or a silent no-op."""

from __future__ import annotations

import copy
import math
import os
import random
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aclnn_cli.files import text as casetext
from aclnn_cli.values import yamlsafe
from aclnn_cli.cases.loader import MAX_CASES, MAX_ID_BYTES, cases_from_doc, load_cases, load_file
from aclnn_cli.errors import CaseError, UserError
from aclnn_cli.tensor.layout import MAX_ELEMENTS, from_spec

from helpers import one_line_error, run_cli, write_yaml

SILU = "op: SiluBackward\ncases:\n  - {%s}\n"
SHOW_MAX = 60


def gen_error(tmp_path: Path, p: Path) -> str:
    """gen of p refused in one line (helpers.one_line_error), nothing written; the line."""
    line = one_line_error(run_cli("gen", p, "-o", tmp_path / "out"))
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    return line


def case_text(body: str, op: str = "SiluBackward") -> str:
    """One case; name, shape and dtype are added unless the body sets them."""
    try:
        keys = set(yaml.safe_load("{" + body + "}"))
    except Exception:  # not a mapping on its own (a deliberately broken probe)
        keys = {k for k in ("name", "shape", "dtype") if f"{k}:" in body}
    extra = "".join(f", {k}: {v}" for k, v in (("name", "a"), ("shape", "[4]"), ("dtype", "float16")) if k not in keys)
    return f"op: {op}\ncases:\n  - {{{body}{extra}}}\n"


# 1. Files that are not text, not files, or not readable


def test_not_utf8(tmp_path):
    p = tmp_path / "latin1.yaml"
    p.write_bytes("op: SiluBackward\ncases: [{name: caf\u00e9, shape: [1]}]\n".encode("latin-1"))
    line = gen_error(tmp_path, p)
    assert str(p) in line and "not UTF-8 text (byte 35, line 2)" in line


def test_utf16_is_named(tmp_path):
    p = tmp_path / "u16.yaml"
    p.write_bytes("op: SiluBackward\n".encode("utf-16"))
    assert "UTF-16 text; save the case file as UTF-8" in gen_error(tmp_path, p)


def test_utf8_bom_is_fine(tmp_path):
    p = tmp_path / "bom.yaml"
    p.write_bytes(b"\xef\xbb\xbf" + SILU.encode() % b"name: a, shape: [1], dtype: float16")
    assert [c.case_id for c in load_file(p)] == ["silu_backward-a"]


@pytest.mark.parametrize("seed", range(5))
def test_binary_garbage(tmp_path, seed):
    p = tmp_path / "garbage.yaml"
    p.write_bytes(random.Random(seed).randbytes(4096))
    line = gen_error(tmp_path, p)
    assert str(p) in line and len(line) < 300


def test_control_characters_in_utf8(tmp_path):
    p = tmp_path / "ctl.yaml"
    p.write_bytes(b"op: SiluBackward\x00\x01\ncases: []\n")
    assert "not valid YAML: unacceptable character #x0000" in gen_error(tmp_path, p)


def test_case_file_that_is_a_directory(tmp_path):
    d = tmp_path / "dir.yaml"
    d.mkdir()
    with pytest.raises(UserError, match="cannot read case file: it is a directory"):
        load_file(d)
    # given on the command line, a directory is a folder of case files; here it holds none
    assert "no case files" in gen_error(tmp_path, d)


def test_fifo_neither_hangs_nor_is_read(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(UserError, match="not a regular file"):
        load_file(fifo)
    assert "not a regular file or directory" in gen_error(tmp_path, fifo)
    assert time.monotonic() - t0 < 10


def test_device_is_refused():
    with pytest.raises(UserError, match="not a regular file"):
        load_file("/dev/zero")


def test_unreadable_file(tmp_path, monkeypatch):
    p = write_yaml(tmp_path, SILU % "name: a, shape: [1]")

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(p))

    monkeypatch.setattr(casetext, "open", denied, raising=False)
    with pytest.raises(UserError, match=r"cannot read case file: Permission denied$"):
        load_file(p)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 file anyway")
def test_unreadable_file_for_real(tmp_path):
    p = write_yaml(tmp_path, SILU % "name: a, shape: [1]")
    p.chmod(0)
    assert "Permission denied" in gen_error(tmp_path, p)


def test_oversized_file_is_refused_before_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(casetext, "MAX_FILE_BYTES", 1 << 20)
    p = write_yaml(tmp_path, "# " + "x" * (1 << 20) + "\n" + SILU % "name: a, shape: [1]")
    with pytest.raises(UserError, match="case file is 1048[0-9]{3} bytes; at most 1 MiB"):
        load_file(p)


def test_control_characters_in_a_path_stay_on_one_line(tmp_path):
    p = write_yaml(tmp_path, "op: NoSuchOp\ncases: [{name: a, shape: [1]}]\n", name="evil\nname.yaml")
    line = gen_error(tmp_path, p)
    assert "evil\\nname.yaml" in line


# 2. Duplicate keys, at any level

DUPLICATES = [
    ("op: SiluBackward\nop: FastGeluBackward\ncases: [{name: a, shape: [1]}]\n", "line 2: duplicate key 'op' (first at line 1)"),
    ("op: SiluBackward\ncases:\n  - name: a\n    shape: [1]\n    shape: [2]\n", "line 5: duplicate key 'shape' (first at line 4)"),
    (SILU % "name: a, shape: [1], inputs: {self: {constant: 1}, self: {constant: 2}}", "duplicate key 'self'"),
    (SILU % "name: a, shape: [4], tensors: {self: {layout: {offset: 1, offset: 2}}}", "duplicate key 'offset'"),
    ("op: SiluBackward\ndefaults: {seed: 1, seed: 2}\ncases: [{name: a, shape: [1]}]\n", "duplicate key 'seed'"),
    (SILU % "name: a, shape: [1], 1: x, 1.0: y", "duplicate key 1.0"),  # equal as Python keys: one would vanish
    (SILU % "name: a, shape: [1], \"seed\": 1, seed: 2", "duplicate key 'seed'"),
]


@pytest.mark.parametrize("text,message", DUPLICATES, ids=[m for _, m in DUPLICATES])
def test_duplicate_keys_are_errors(tmp_path, text, message):
    p = write_yaml(tmp_path, text)
    assert message in gen_error(tmp_path, p)


def test_merge_keys_may_override(tmp_path):
    p = write_yaml(tmp_path, """
op: SiluBackward
cases:
  - &base {name: a, shape: [3], dtype: float16, seed: 1}
  - {<<: *base, name: b, seed: 2}
  - {<<: *base, name: c}
""")
    cases = {c.name: c for c in load_file(p)}
    assert (cases["a"].seed, cases["b"].seed, cases["c"].seed) == (1, 2, 1)


def test_shared_tensor_defaults_are_not_mutated(tmp_path):
    p = write_yaml(tmp_path, """
op: SiluBackward
defaults: {dtype: float32, product: "950", tensors: {self: {shape: [3]}}}
cases: [{name: a, shape: [2, 3]}, {name: b, shape: [4, 3]}]
""")
    assert [c.output.layout.shape for c in load_file(p)] == [(2, 3), (4, 3)]


# 3. Alias bombs, recursion, nesting and size: refused quickly, in bounded memory

def bomb(levels: int = 9, fan: int = 9) -> str:
    """A billion-laughs list nested in a shape: expanded, its repr alone is gigabytes."""
    items = [f"&a0 [{', '.join(['lol'] * fan)}]"]
    items += [f"&a{i} [{', '.join([f'*a{i - 1}'] * fan)}]" for i in range(1, levels)]
    return f"op: SiluBackward\ncases:\n  - name: bomb\n    shape: [[{', '.join(items)}]]\n"


def run_limited(args: list[str], cwd: Path, limit: int = 3 << 29, timeout: float = 60) -> subprocess.CompletedProcess:
    """The CLI in a subprocess with at most `limit` bytes of address space (1.5 GiB)."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", "from aclnn_cli.cli.main import main; main()", *args], cwd=cwd,
                          capture_output=True, text=True, preexec_fn=cap, timeout=timeout, env=env)


def assert_refused(r: subprocess.CompletedProcess, fragment: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, r.stderr[-2000:]
    assert len(lines) == 1 and fragment in lines[0] and len(lines[0]) < 300, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "lol, lol, lol, lol, lol, lol, lol" not in r.stderr


def test_alias_bomb_is_refused_quickly_in_bounded_memory(tmp_path):
    p = write_yaml(tmp_path, bomb())
    assert p.stat().st_size < 1024
    t0 = time.monotonic()
    r = run_limited(["gen", str(p), "-o", str(tmp_path / "out")], tmp_path)
    assert_refused(r, "aliases expand the document to more than")
    assert time.monotonic() - t0 < 30


def test_alias_bomb_in_process(tmp_path):
    p = write_yaml(tmp_path, bomb())
    with pytest.raises(CaseError, match=r"line 4: aliases expand the document to more than 250000 nodes"):
        load_file(p)


def test_moderate_alias_use_is_fine(tmp_path):
    p = write_yaml(tmp_path, """
op: SiluBackward
defaults: {dtype: float16, inputs: &in {self: {values: [1.0, 2.0, 3.0]}, gradOutput: {constant: 1}}}
cases:
  - {name: a, shape: [3], inputs: *in}
  - {name: b, shape: [6], inputs: *in}
""")
    assert [c.inputs[1].fill.params for c in load_file(p)] == [(1.0, 2.0, 3.0)] * 2


def test_recursive_alias_is_refused(tmp_path):
    p = write_yaml(tmp_path, "op: SiluBackward\ncases: &c [{name: a, shape: [1], inputs: {self: {values: *c}}}]\n")
    assert "alias *c refers to a node that contains it" in gen_error(tmp_path, p)


@pytest.mark.parametrize("text", ["a: " + "[" * 100_000 + "]" * 100_000, "- " * 100_000 + "x",
                                  "a: " + "{b: " * 100_000 + "1" + "}" * 100_000])
def test_deep_nesting_neither_recurses_nor_segfaults(tmp_path, text):
    p = write_yaml(tmp_path, text)
    r = run_limited(["gen", str(p), "-o", str(tmp_path / "out")], tmp_path)
    assert_refused(r, "nested more than 64 levels deep")


class _ParserThatRefusesFirst:
    """Stands in for a YAML parser that refuses a document in words of its own, at a mark, before our
    composer has counted any depth (libyaml 0.2.6's scanner does this for deep flow nesting)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def get_single_data(self):
        index = len(self.text) // 2
        mark = yaml.Mark("<text>", index, 0, index, None, None)
        raise yaml.scanner.ScannerError("while doing something", mark, "wording that will change", mark)

    def dispose(self) -> None:
        pass


@pytest.mark.parametrize("depth,deep", [(3, False), (64, False), (65, True), (10_000, True)])
def test_a_parser_refusing_deep_nesting_gets_our_words_whatever_its_own(monkeypatch, depth, deep):
    """The message does not depend on the parser's wording or on who notices first (PyYAML 6.0.3 vs 6.0.4).

    The error mark is halfway into the text, so `depth` opening brackets lie before it; at most 64 is
    not "too deep", and the parser's own problem is reported."""
    text = "a: " + "[" * depth + "1" + "]" * depth
    text += " " * max(0, len(text) - 2 * (depth + 3))  # keep every opening bracket before the midpoint
    monkeypatch.setattr(yamlsafe, "_LOADERS", [_ParserThatRefusesFirst])
    with pytest.raises(CaseError) as caught:
        yamlsafe.parse("c.yaml", text.encode())
    said = str(caught.value)
    assert ("nested more than 64 levels deep" in said) == deep, said
    assert ("wording that will change" in said) == (not deep), said


@pytest.mark.parametrize("text,depth", [
    ("a: [1, [2, {b: 3}]]", 3), ("a: '[[[' # [[[[\nb: [x]", 1), ("a: \"\\\"[[\" [[", 2),
    ("a: 'it''s [[' [", 1), ("x: a[b", 1), ("# [[[\n[", 1), ("a: ]]][", 1)])
def test_flow_depth_counts_brackets_outside_quotes_and_comments(text, depth):
    assert yamlsafe.flow_depth(text) == depth


def test_huge_file_of_one_list_is_bounded(tmp_path):
    p = tmp_path / "big.yaml"
    with open(p, "wb") as f:
        f.write(b"op: SiluBackward\ncases: [{name: a, shape: [1], inputs: {self: {values: [")
        chunk = b"1, " * (1 << 20)
        for _ in range(17):  # 51 MiB
            f.write(chunk)
        f.write(b"1]}}}]\n")
    t0 = time.monotonic()
    r = run_limited(["gen", str(p), "-o", str(tmp_path / "out")], tmp_path)
    assert_refused(r, "more than 250000 YAML nodes")
    assert time.monotonic() - t0 < 40


def test_show_is_bounded_on_shared_structures():
    a: list = ["lol"] * 9
    for _ in range(12):  # 9^13 leaves if walked
        a = [a] * 9
    t0 = time.monotonic()
    text = yamlsafe.show(a)
    assert len(text) <= SHOW_MAX and time.monotonic() - t0 < 1
    assert len(yamlsafe.show("x" * 10**7)) <= SHOW_MAX
    assert yamlsafe.show(10**5000) == "an integer of 16610 bits"
    assert yamlsafe.show("a\nb") == "'a\\nb'"
    r: list = []
    r.append(r)
    assert len(yamlsafe.show(r)) <= SHOW_MAX


def test_values_beyond_a_field_never_reach_the_message_in_full(tmp_path):
    long = "z" * 100_000
    for body in (f"name: a, dtype: {long}", f"name: a, shape: [{long}]", f"name: a, {long}: 1",
                 f"name: a, inputs: {{self: {{uniform: [{long}, 1]}}}}", f"name: a, product: {long}",
                 f"name: a, standard: {long}", f"name: a, tensors: {{self: {{layout: {long}}}}}", f"name: {long}",
                 f"name: a, tolerance: {{{long}: 1}}", f"name: a, inputs: {{{long}: {{constant: 1}}}}"):
        p = write_yaml(tmp_path, case_text(body))
        line = gen_error(tmp_path, p)
        assert len(line) < 400, line


# 4. Wrong types anywhere (and 6: empty lists, 9: other probes)

PROBES = [
    # body of one case, expected message fragment, expected key
    ("standard: [ulp]", "'standard' is a name like mere-mare, got ['ulp']", "standard"),
    ("standard: ''", "unknown standard ''", "standard"),
    ("seed: '5'", "seed must be an integer in [0, 2^63), got '5'", "seed"),
    ("seed: 5.0", "got 5.0", "seed"),
    ("seed: true", "got True", "seed"),
    ("seed: -1", "got -1", "seed"),
    ("seed: 1180591620717411303424", "got 1180591620717411303424", "seed"),  # 2^70
    ("seed: 0x" + "f" * 70, "integer 0xfffff", ""),  # beyond 256 bits: refused by the loader, with its line
    ("seed: " + "9" * 5000, "as a YAML int (at most 256 bits)", ""),  # beyond Python's int-from-text limit
    ("shape: {a: 1}", "a shape is a list of integers, got {'a': 1}", "shape"),
    ("shape: [1e3]", "got ['1e3']", "shape"),
    ("shape: [1000.0]", "got [1000.0]", "shape"),
    ("shape: [true, 2]", "got [True, 2]", "shape"),
    ("shape: '4'", "got '4'", "shape"),
    ("shape: null", "got None", "shape"),
    ("shape: [[1], [x]]", "got ['x']", "shape"),
    ("shape: [4611686018427387905]", "the view holds 4.61e+18 elements (8.0 EiB); at most 2^62", "shape"),
    ("shape: [9223372036854775808]", "the view holds 9.22e+18 elements (16.0 EiB); at most 2^62", "shape"),
    ("shape: [18446744073709551617]", "dimension over 2^64 in shape [18446744073709551617]", "shape"),
    ("dtype: {}", "a dtype is a name like float16, got {}", "dtype"),
    ("dtype: [float16, [float32]]", "got ['float32']", "dtype"),
    ("dtype: 16", "got 16", "dtype"),
    ("dtype: []", "'dtype' is an empty list, which expands to no cases", "dtype"),
    ("product: 3.5", "a product is a name like A2 or \"950\", got 3.5", "product"),
    ("product: {A2: 1}", "got {'A2': 1}", "product"),
    ("product: []", "'product' is an empty list", "product"),
    ("product: true", "got True", "product"),
    ("inputs: {self: {uniform: ['a', 1]}}", "expected a number, got 'a'", "inputs.self"),
    ("inputs: {self: {uniform: [1]}}", "'uniform' takes two numbers, got [1]", "inputs.self"),
    ("inputs: {self: {values: []}}", "'values' takes a non-empty list, got []", "inputs.self"),
    ("inputs: {self: {values: [1, [2]]}}", "expected a number, got [2]", "inputs.self"),
    ("inputs: {self: {constant: " + "9" * 400 + "}}", "is too large", ""),
    ("inputs: {self: {all_values: 1}}", "'all_values' takes true, got 1", "inputs.self"),
    ("inputs: {self: null}", "a generator is one of", "inputs.self"),
    ("inputs: {self: {uniform: [0, 1], normal: [0, 1]}}", "a generator is one of", "inputs.self"),
    ("inputs: []", "'inputs' must map input names to generators, got []", "inputs"),
    ("inputs: 0", "got 0", "inputs"),
    ("inputs: {3: {constant: 1}}", "unknown key '3'", "inputs.3"),
    ("tolerance: {T: [1]}", "expected a number, got [1]", "tolerance.T"),
    ("tolerance: []", "'tolerance' must map parameter names to numbers", "tolerance"),
    ("tolerance: {1: 0.1}", "a tolerance name is text like rtol, got 1", "tolerance"),
    ("tolerance: {T: -1}", "tolerance 'T' must be a relative error in (0, ", "tolerance.T"),
    ("tolerance: {T: .nan}", "tolerance 'T' must be finite, got nan", "tolerance.T"),
    ("tolerance: {T: .inf}", "must be finite", "tolerance.T"),
    ("tolerance: {rtol: 2}", "must be a relative error in (0, ", "tolerance.rtol"),
    ("tolerance: {rtol: 0.01, T: 0.001}", "'T' and 'rtol' set the same tolerance of standard 'mere-mare'", "tolerance.T"),
    ("tolerance: {ulps: 2}", "standard 'mere-mare' has no tolerance 'ulps'", "tolerance.ulps"),
    ("standard: ulp, tolerance: {mean_ulps: 10}",
     "standard 'ulp' has no tolerance 'mean_ulps' (valid: share, ulps) for float16 results", "tolerance.mean_ulps"),
    ("standard: ulp, tolerance: {ulps: 2000}", "tolerance 'ulps' must be a count of ulps in (0, ",
     "tolerance.ulps"),
    ("name: 5", "needs a name", "name"),
    ("name: [a]", "needs a name", "name"),
    ('name: "a\\n"', "case 'a\\n'", "name"),
    ("name: na\u00efve", "needs a name", "name"),
    ("name: '-a'", "needs a name", "name"),
    ("name: " + "a" * 101, "needs a name", "name"),
    ("expect_status: 999", "unknown status 999", "expect_status"),
    ("expect_status: [0]", "unknown status [0]", "expect_status"),
    ("expect_status: true", "unknown status True", "expect_status"),
    ("contract: 1", "'contract' is true or false, got 1", "contract"),
    ("contract: null", "'contract' is true or false, got None", "contract"),
    ("tensors: {self: {layout: x}}", "a layout is 'contiguous', 'transposed' or a mapping", "tensors.self.layout"),
    ("tensors: {self: {layout: [1]}}", "got [1]", "tensors.self.layout"),
    ("tensors: {self: {layout: {strides: [-1]}}}", "negative strides", "tensors.self.layout"),
    ("tensors: {self: {layout: {strides: [1, 1]}}}", "layout strides must be 1 integers for shape [4], got [1, 1]",
     "tensors.self.layout"),
    ("tensors: {self: {layout: {strides: [1.5]}}}", "got [1.5]", "tensors.self.layout"),
    ("tensors: {self: {layout: {strides: [true]}}}", "got [True]", "tensors.self.layout"),
    ("tensors: {self: {layout: {strides: 1}}}", "got 1", "tensors.self.layout"),
    ("tensors: {self: {layout: {strides: [4611686018427387905]}}}", "the storage is 24.0 EiB (1.38e+19 elements)",
     "tensors.self.layout"),
    ("shape: [1], tensors: {self: {layout: {strides: [4611686018427387905]}}}", "a stride is 4.61e+18 elements; at most 2^62",
     "tensors.self.layout"),
    ("tensors: {self: {layout: {offset: -1}}}", "layout 'offset' must be an integer >= 0, got -1",
     "tensors.self.layout"),
    ("tensors: {self: {layout: {offset: 99999999999999999999}}}",
     "the storage is 173.5 EiB (1e+20 elements); at most 2^62 bytes", "tensors.self.layout"),
    ("tensors: {self: {layout: {step: 0}}}", "layout 'step' must be an integer >= 1, got 0", "tensors.self.layout"),
    ("tensors: {self: {layout: {gap: '2'}}}", "got '2'", "tensors.self.layout"),
    ("tensors: {self: {layout: {tail: 4611686018427387903}}}", "the storage is 8.0 EiB (4.61e+18 elements)",
     "tensors.self.layout"),
    ("tensors: {self: {layout: {storage_shape: [2]}}}", "view reaches storage index 3 but storage holds 2",
     "tensors.self.layout"),
    ("tensors: {self: {layout: {storage_shape: [true]}}}", "storage_shape is a one-element list [n], got [True]",
     "tensors.self.layout"),
    ("tensors: {self: {layout: {storage_shape: 9}}}", "got 9", "tensors.self.layout"),
    ("tensors: {self: {layout: {storage_shape: [4611686018427387905]}}}", "the storage is 8.0 EiB (4.61e+18 elements)",
     "tensors.self.layout"),
    ("tensors: {self: {layout: {transposed: 'yes'}}}", "layout 'transposed' is true or false, got 'yes'",
     "tensors.self.layout"),
    ("tensors: {self: {layout: {strides: [1], step: 2}}}", "explicit 'strides' cannot be combined with transposed",
     "tensors.self.layout"),
    ("tensors: {self: {layout: {storage_shape: [9], tail: 2}}}", "explicit 'storage_shape' cannot be combined with tail",
     "tensors.self.layout"),
    ("tensors: {self: {layout: {strid: [1]}}}", "unknown layout key 'strid'", "tensors.self.layout"),
    ("tensors: {self: {layout: transposed}}", "'transposed' needs at least 2 dims", "tensors.self.layout"),
    ("tensors: {self: {layout: {offset: 4611686018427387000}}, gradOutput: {layout: {offset: 1}}}",
     "the storage is 8.0 EiB (4.61e+18 elements); at most 2^62 bytes", "tensors.self.layout"),
    ("tensors: {self: {dtype: []}}", "'dtype' is an empty list", "tensors.self.dtype"),
    ("tensors: {self: {dtype: float128}}", "unknown dtype 'float128'", "tensors.self.dtype"),
    ("tensors: {self: {dtype: {}}}", "a dtype is a name like float16, got {}", "tensors.self.dtype"),
    ("tensors: {self: {shape: x}}", "a shape is a list of integers, got 'x'", "tensors.self.shape"),
    ("tensors: {self: null}", "must be a mapping of shape, dtype, layout, nullptr, got None", "tensors.self"),
    ("tensors: {self: {nullptr: 1}}", "'nullptr' is true or false, got 1", "tensors.self.nullptr"),
    ("tensors: {self: {null: true}}", "write 'nullptr: true'", "tensors.self"),
    ("tensors: []", "'tensors' must map tensor names to {shape, dtype, layout, nullptr}, got []", "tensors"),
    ("tensors: {? [1] : {}}", "unhashable", ""),  # a YAML error: the loader refuses an unhashable key
    ("tensors: {gradInput: {shape: []}}", "gradInput has 0 dims", "shape"),  # an explicit () is not dropped
    ("shape: [10000000, 10000000, 10000000]", "the view holds 1e+21 elements (1734.7 EiB); at most 2^62", "shape"),
    ("shape: [0, 4611686018427387904, 4611686018427387904, 2]", "a stride is 4.25e+37 elements", "shape"),  # empty
    ("inputs: {self: {all_values: true}}, shape: [3]", "all_values gives 65536 elements; shape [3] holds 3",
     "inputs.self"),
    ("unknown: 1", "unknown key 'unknown'", "unknown"),
    ("dtpye: float16", "did you mean 'dtype'", "dtpye"),
]


@pytest.mark.parametrize("body,message,key", PROBES, ids=[f"{i}:{b[:40]}" for i, (b, _, _) in enumerate(PROBES)])
def test_probe_is_one_clear_line(tmp_path, body, message, key):
    p = write_yaml(tmp_path, case_text(body))
    line = gen_error(tmp_path, p)
    assert str(p) in line and message in line, line
    if key:
        assert f"key '{key}'" in line, line


DOC_PROBES = [
    ("op: [x]\ncases: [{name: a, shape: [1]}]", "'op' is an op name like aclnnSiluBackward, got ['x']", "op"),
    ("op: 5\ncases: [{name: a, shape: [1]}]", "got 5", "op"),
    ("op: null\ncases: [{name: a, shape: [1]}]", "got None", "op"),
    ("cases: [{name: a, shape: [1]}]", "missing 'op'", "op"),
    ("op: SiluBackward\ncases: {a: 1}", "'cases' must be a non-empty list, got {'a': 1}", "cases"),
    ("op: SiluBackward\ncases: []", "'cases' must be a non-empty list, got []", "cases"),
    ("op: SiluBackward", "'cases' must be a non-empty list, got None", "cases"),
    ("op: SiluBackward\ncases: [1]", "case #1 must be a mapping, got 1", ""),
    ("op: SiluBackward\ncases: [[name, a]]", "case #1 must be a mapping", ""),
    ("op: SiluBackward\ndefaults: [1]\ncases: [{name: a, shape: [1]}]", "'defaults' must be a mapping of case keys, got [1]",
     "defaults"),
    ("op: SiluBackward\ndefaults: 0\ncases: [{name: a, shape: [1]}]", "got 0", "defaults"),
    ("op: SiluBackward\ndefaults: {name: x}\ncases: [{name: a, shape: [1]}]", "unknown key 'name'", "defaults.name"),
    ("op: SiluBackward\ndefaults: {dtype: []}\ncases: [{name: a, shape: [1]}]", "'dtype' is an empty list", "dtype"),
    ("", "empty case file", ""),
    ("# only a comment\n", "empty case file", ""),
    ("hello", "a case file is a mapping with keys op, defaults, cases", ""),
    ("42", "a case file is a mapping", ""),
    ("- a\n- b", "a case file is a mapping", ""),
    ("op: SiluBackward\n---\nop: SiluBackward\n", "expected a single document in the stream, but found another", ""),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], seed: !!binary aGk=}]", "YAML type binary is not used", ""),
    ("op: SiluBackward\ncases: [{name: a, shape: !!set {1, 2}}]", "YAML type set is not used", ""),
    ("op: SiluBackward\ncases: !!omap [{a: 1}]", "YAML type omap is not used", ""),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], seed: !!float abc}]", "line 2: cannot read abc as a YAML float", ""),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], contract: !!bool maybe}]", "cannot read maybe as a YAML bool", ""),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], !!bool maybe: 1}]", "cannot read maybe as a YAML bool", ""),
    ("op: SiluBackward\ncases: [{name: a, shape: [!!int 1x]}]", "cannot read 1x as a YAML int", ""),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], seed: !!python/object/apply:os.getpid []}]",
     "could not determine a constructor", ""),
    ("op: SiluBackward\ncases: [{name: a, shape: [1]}, {name: A, shape: [1]}]",
     "two cases expand to ids that differ only in case, 'silu_backward-a-float32' and 'silu_backward-A-float32'", "name"),
    ("op: SiluBackward\ncases: [{name: a, shape: [[1], [1]]}]", "two cases expand to the same id", "name"),
    ("op: SiluBackward\ncases: [{name: a, shape: [1], dtype: [float16, half]}]", "the same id 'silu_backward-a-float16'",
     "name"),
    ("op: SiluBackward\ncases:\n"
     "  - {name: b, shape: [" + ", ".join(f"[{i}]" for i in range(1, 800)) + "], product: [A2, A3, '950']}\n"
     "  - {name: c, shape: [" + ", ".join(f"[{i}]" for i in range(1, 9000)) + "]}\n",
     f"more than the {MAX_CASES} a case file may hold", "shape"),
]


@pytest.mark.parametrize("text,message,key", DOC_PROBES, ids=[f"{i}:{t[:40]}" for i, (t, _, _) in enumerate(DOC_PROBES)])
def test_document_probe_is_one_clear_line(tmp_path, text, message, key):
    p = write_yaml(tmp_path, text)
    line = gen_error(tmp_path, p)
    assert str(p) in line and message in line, line
    if key:
        assert f"key '{key}'" in line, line


def test_yaml_curiosities_that_are_fine(tmp_path):
    p = write_yaml(tmp_path, """
op: HardsigmoidBackward
cases:
  - {name: 2024-01-01, shape: [], dtype: float16}
  - {name: zero_d, shape: [[]], dtype: float16}
  - {name: unicode_comment, shape: [2], dtype: float16}   # ünïcödé ✓
""")
    cases = load_file(p)
    assert [c.case_id for c in cases] == ["hardsigmoid_backward-2024-01-01", "hardsigmoid_backward-zero_d",
                                          "hardsigmoid_backward-unicode_comment"]
    assert [c.output.layout.shape for c in cases] == [(), (), (2,)]


# 5. Tolerances are checked against the dtype each case is judged in

def test_tolerance_checked_per_case_dtype(tmp_path):
    ok = SILU % "name: a, shape: [4], dtype: float32, standard: ulp, tolerance: {mean_ulps: 10, ulps: 2000}"
    (case,) = load_file(write_yaml(tmp_path, ok))
    assert dict(case.tolerance) == {"mean_ulps": 10.0, "ulps": 2000.0}
    bad = SILU % "name: a, shape: [4], dtype: [float32, bfloat16], standard: ulp, tolerance: {ulps: 200}"
    with pytest.raises(CaseError, match=r"key 'tolerance.ulps': tolerance 'ulps' must be a count of ulps in "
                                        r"\(0, \S+ for bfloat16, got 200"):
        load_file(write_yaml(tmp_path, bad))


def test_tolerance_of_promoted_case_uses_the_coarser_compute_dtype(tmp_path):
    text = """
op: HardsigmoidBackward
cases:
  - name: p
    shape: [4]
    standard: ulp
    tolerance: {mean_ulps: 10}
    tensors: {gradOutput: {dtype: %s}, self: {dtype: %s}, out: {dtype: float32}}
"""
    load_file(write_yaml(tmp_path, text % ("float32", "float16")))  # promoted to fp32: judged as fp32
    with pytest.raises(CaseError, match="has no tolerance 'mean_ulps' .* for float16 results"):
        load_file(write_yaml(tmp_path, text % ("float16", "float16")))  # rounded through fp16


def test_tolerance_of_negative_cases_is_not_judged(tmp_path):
    text = SILU % "name: a, shape: [4], dtype: float16, contract: true, standard: ulp, tolerance: {mean_ulps: 10}"
    assert all(c.expect_status for c in load_file(write_yaml(tmp_path, text)))  # every one a rejection
    text = SILU % ("name: a, shape: [4], dtype: float16, expect_status: ERR_PARAM_NULLPTR, standard: ulp, "
                   "tolerance: {mean_ulps: 10}, tensors: {self: {nullptr: true}}")
    assert len(load_file(write_yaml(tmp_path, text))) == 1


# 7. Case ids are directory names

def test_case_id_over_200_bytes(tmp_path):
    name = "n" * 100
    shapes = "[[1, 1, 1, 1, 1, 1, 1, 1], [" + ", ".join(["222222222222"] * 8) + "]]"
    p = write_yaml(tmp_path, SILU % f"name: {name}, shape: {shapes}, dtype: float16, product: [A2, A3]")
    line = gen_error(tmp_path, p)
    assert f"case '{name}'" in line and "key 'name'" in line
    assert f"bytes, but it names a directory (at most {MAX_ID_BYTES}): use a shorter name" in line
    fits = SILU % f"name: {name}, shape: [[1, 2], [3, 4]], dtype: float16, product: [A2, A3]"
    ids = [c.case_id for c in load_file(write_yaml(tmp_path, fits))]
    assert max(len(i.encode()) for i in ids) <= MAX_ID_BYTES


# 8. Sizes beyond reason never crash loading; storage_bytes is exact

def test_huge_shape_loads_and_gen_refuses_it(tmp_path):
    p = write_yaml(tmp_path, SILU % "name: a, shape: [1000000, 1000000, 1000000], dtype: float32")
    (case,) = load_file(p)
    assert case.numel == 10**18
    assert case.storage_bytes == 4 * 4 * 10**18  # three tensors and the golden
    gen_error(tmp_path, p)  # gen's size limit


def test_storage_bytes(tmp_path):
    p = write_yaml(tmp_path, """
op: LogSigmoidBackward
cases:
  - name: strided
    shape: [3, 5]
    dtype: bfloat16
    tensors:
      self: {layout: {gap: 2, offset: 4}}          # rows of 7: 4 + 2*7 + 5 = 23 elements
      gradInput: {layout: {step: 2, tail: 3}}      # 29 + 3 = 32 elements
  - name: nulled
    shape: [3, 5]
    dtype: float32
    expect_status: ERR_PARAM_NULLPTR
    tensors: {buffer: {nullptr: true}}
""")
    strided, nulled = load_file(p)
    assert [t.layout.storage_size for t in strided.tensors] == [15, 23, 15, 32]
    assert strided.storage_bytes == 2 * (15 + 23 + 15 + 32) + 2 * 32  # + golden of the output's storage
    assert nulled.storage_bytes == 4 * (15 + 15 + 15)  # buffer is null; a negative case has no golden
    assert isinstance(strided.storage_bytes, int)


def test_layout_never_overflows_int64():
    big = MAX_ELEMENTS
    with pytest.raises(ValueError, match="at most 2"):
        from_spec((2, 2), {"strides": [big, 1]})
    with pytest.raises(ValueError, match="at most 2"):
        from_spec((big, 0, big, 2), None)  # empty, but its packed strides reach 2^63
    layout = from_spec((3,), {"offset": big - 3})
    assert layout.storage_size == big and int(layout.storage_index([2])[0]) == big - 1


# 9. Cross-file and the rest

def test_ids_differing_only_in_case_across_files(tmp_path):
    a = write_yaml(tmp_path / "d", SILU % "name: x, shape: [1], dtype: float16", name="a.yaml")
    write_yaml(tmp_path / "d", SILU % "name: X, shape: [1], dtype: float16", name="b.yaml")
    with pytest.raises(CaseError, match=r"case id 'silu_backward-X' also comes from .*a.yaml \(as 'silu_backward-x', "
                                        r"differing only in case\)"):
        load_cases([a.parent])


# Fuzz: random YAML-ish values anywhere in a valid document give a case list or a UserError, nothing else

VALID = {
    "op": "SiluBackward",
    "defaults": {"seed": 3, "dtype": "float16"},
    "cases": [{"name": "a", "shape": [[2, 3], [4]], "product": ["A2", "950"], "seed": 1, "expect_status": 0,
               "standard": "ulp", "tolerance": {"share": 0.01}, "contract": False,
               "inputs": {"self": {"uniform": [-1, 1]}, "gradOutput": {"values": [1, "nan", "-inf"]}},
               "tensors": {"self": {"layout": {"gap": 1, "offset": 2}, "dtype": "float16"},
                           "gradInput": {"layout": {"step": 2, "tail": 1}, "nullptr": False}}}],
}


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


PATHS = list(_paths(VALID))[1:]
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
           | st.sampled_from([0, 1, -1, 2**62, 2**62 + 1, 2**63, 10**18, 65536, 2**256])
           | st.floats(allow_nan=True, allow_infinity=True)
           | st.sampled_from(["", "nan", "-0.0", "float16", "bf16", "A2", "950", "transposed", "ulp", "T", "x" * 300,
                              "self", "gradOutput", "contiguous", "a\nb", "\u00e9"])
           | st.text(max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=5)
                      | st.dictionaries(st.sampled_from(["uniform", "normal", "values", "constant", "all_values",
                                                         "strides", "offset", "gap", "step", "tail", "storage_shape",
                                                         "shape", "dtype", "layout", "nullptr", "self", "T", "x"]) | SCALARS.filter(
                                            lambda v: not isinstance(v, float) or not math.isnan(v)),
                                        inner, max_size=4), max_leaves=12)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=VALUES)
def test_fuzz_values_anywhere(path, value):
    doc = copy.deepcopy(VALID)
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    try:
        cases = cases_from_doc("fuzz.yaml", doc)
    except UserError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 1000, str(exc)
    else:
        assert len(cases) <= MAX_CASES
        for c in cases:
            assert c.storage_bytes >= 0 and len(c.case_id.encode()) <= MAX_ID_BYTES


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("[]{}:,-&*!|>'\"#%@`?\n \t") + ["op", "cases", "name", "a", "1", "<<", "!!set",
                                                                         "&x", "*x", "\x00", "é", "shape", "SiluBackward"]),
                max_size=40).map("".join))
def test_fuzz_yaml_text(text):
    try:
        doc = yamlsafe.parse("fuzz.yaml", text.encode())
    except CaseError as exc:
        assert "\n" not in str(exc)
        return
    try:
        cases_from_doc("fuzz.yaml", doc)
    except UserError as exc:
        assert "\n" not in str(exc)


def test_documents_from_importers_get_the_same_checks():
    """Importers build dicts directly (JSON can hold what our YAML loader refuses): still one clean error."""
    def doc(**case):
        return {"op": "SiluBackward", "cases": [{"name": "a", "shape": [4], "dtype": "float16", **case}]}

    for case, message in [({"inputs": {"self": {"constant": 10**400}}}, "number an integer of 1329 bits is beyond "
                                                                         "float64's range"),
                          ({"seed": 10**5000}, "got an integer of 16610 bits"),
                          ({"shape": [10**5000]}, "dimension over 2^64 in shape"),
                          ({"product": 10**5000}, "got an integer of 16610 bits"),
                          ({"shape": (4,)}, "a shape is a list of integers, got (4,)"),
                          ({"dtype": ("float16",)}, "a dtype is a name like float16, got ('float16',)"),
                          ({"inputs": {"self": {"values": list(range(10**6)) + ["x"]}}}, "expected a number, got 'x'")]:
        with pytest.raises(CaseError, match=re.escape(message)):
            cases_from_doc("imported.json", doc(**case))


@pytest.mark.parametrize("loader", yamlsafe._LOADERS, ids=lambda c: c.__name__)
def test_both_loaders_apply_the_same_guards(monkeypatch, loader):
    """libyaml's parser when PyYAML has it, else the pure-Python SafeLoader subclass: same refusals."""
    monkeypatch.setattr(yamlsafe, "_LOADERS", [loader])
    for text, message in [(bomb(), "aliases expand the document to more than"),
                          ("- " * 5000 + "x", "nested more than 64 levels deep"),
                          ("op: a\nop: b\n", "line 2: duplicate key 'op' (first at line 1)"),
                          ("a: &a [*a]\n", "refers to a node that contains it"),
                          ("a: !!float abc\n", "cannot read abc as a YAML float"),
                          ("a: !!python/name:os.system\n", "could not determine a constructor")]:
        with pytest.raises(CaseError, match=re.escape(message)):
            yamlsafe.parse("x.yaml", text.encode())
    assert yamlsafe.parse("x.yaml", b"a: &d {x: 1, y: 2}\nb: {<<: *d, y: 3}\nt: 2024-01-01\n") == \
        {"a": {"x": 1, "y": 2}, "b": {"x": 1, "y": 3}, "t": "2024-01-01"}
