"""Structured fuzz targets of the readers round 4 added (issue 31): a case's stat cache (`.stat-cache.json`, read
by verify to skip re-hashing), a suite's (`.suite-stat-cache.json`, its small cases' lines), and what a user op's `reference` returns (value, bound, scale, and the new
allowance and shared error), through gen, emulate and verify.

The only outcomes allowed: a result, or the one-line error (exit 2). A stat cache, whatever it holds, never
changes a verdict: a tampered golden still fails.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import strategies as st

from aclnn_cli.casedir import dirs as casedirs
from aclnn_cli.casedir import manifest as M
from aclnn_cli.files import statcache
from aclnn_cli.files.statcache import CACHE_FILE, FORMAT, SUITE_FILE, SUITE_FORMAT

from fuzzing import fuzz_target, scratch
from helpers import restored_registry, run_cli, write_yaml

CASES = """op: SiluBackward
cases:
  - {name: a, dtype: float16, shape: [4, 3]}
  - {name: b, dtype: float32, shape: [300]}
"""


@functools.lru_cache(maxsize=1)
def verified() -> tuple[Path, dict[str, str]]:
    """One generated, emulated and verified output (its stat caches written), and each case's cache text."""
    root = Path(tempfile.mkdtemp(prefix="aclnn-fuzz-cache-"))
    atexit.register(shutil.rmtree, root, True)  # (made once per process: gone when it ends, not left in /tmp)
    out = root / "out"
    assert run_cli("gen", write_yaml(root, CASES), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    assert run_cli("verify", out).exit_code == 0
    caches = {d.name: (d / CACHE_FILE).read_text() if (d / CACHE_FILE).exists() else "" for d in sorted(out.iterdir())}
    return out, caches


LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=2**62, max_value=2**200),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                 st.sampled_from([FORMAT, "", "x" * 3000, "gradInput.bin", "../x", "0" * 64]),
                 st.just([]), st.just({}))
NESTED = st.recursive(LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                    st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=16)


def _mutated(text: str, path: list, value) -> str:
    """The cache document with one leaf (found by walking `path`) replaced by `value`; raw text if unparsable."""
    try:
        doc = json.loads(text)
    except ValueError:
        return json.dumps(value)
    node, parent, key = doc, None, None
    for step in path:
        if isinstance(node, dict) and node:
            key = sorted(node)[step % len(node)]
        elif isinstance(node, list) and node:
            key = step % len(node)
        else:
            break
        parent, node = node, node[key]
    if parent is None:
        return json.dumps(value)
    parent[key] = value
    return json.dumps(doc)


@fuzz_target(path=st.lists(st.integers(0, 50), max_size=5), value=NESTED, raw=st.one_of(st.none(), st.binary(max_size=64)),
             tamper=st.booleans())
def test_fuzz_stat_cache(path, value, raw, tamper):
    """A hostile `.stat-cache.json` in every case: verify gives its verdict (PASS, or FAIL for a tampered golden)."""
    out, caches = verified()
    with scratch() as tmp:
        work = tmp / "out"
        shutil.copytree(out, work)
        for d in sorted(casedirs.find_cases(work)):
            (d / CACHE_FILE).write_bytes(raw if raw is not None else _mutated(caches[d.name], path, value).encode())
        victim = sorted(casedirs.find_cases(work))[0]
        if tamper:  # (a golden changed behind the cache's back: its size and times kept where they can be)
            g = M.load(victim).output.golden
            data = bytearray(g.read_bytes())
            data[0] ^= 0x40
            g.write_bytes(bytes(data))
        r = run_cli("verify", work, "-j", "1")
        lines = r.output.strip().splitlines()
        assert "Traceback" not in r.output, r.output[-2000:]
        if tamper:
            assert r.exit_code in (1, 2), r.output[-1000:]  # (a changed golden: its checksum fails the case)
        else:
            assert r.exit_code == 0, r.output[-1000:]
        assert len([line for line in lines if line.startswith("aclnn-cli: error")]) <= 1, lines  # (exit 2: an ERROR
        #                                                       case in the report, or the one error line)


SUITE = "op: SiluBackward\ncases:\n" + "".join(f"  - {{name: s{i}, dtype: float16, shape: [64], seed: {i}}}\n"
                                                 for i in range(4))


def _recorded_copy(tmp: Path) -> Path:
    """A copy of suite_verified()'s output with its own suite record (every line matching the copy's files)."""
    work = tmp / "out"
    shutil.copytree(suite_verified(), work)
    racy, statcache.RACY_NS = statcache.RACY_NS, 0
    try:
        assert run_cli("verify", work, "-j", "1").exit_code == 0
    finally:
        statcache.RACY_NS = racy
    return work


@functools.lru_cache(maxsize=1)
def suite_verified() -> Path:
    """Small cases generated and emulated once (a copy of it gets its own record: see _recorded_copy)."""
    root = Path(tempfile.mkdtemp(prefix="aclnn-fuzz-suite-"))
    atexit.register(shutil.rmtree, root, True)
    out = root / "out"
    assert run_cli("gen", write_yaml(root, SUITE), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    return out


@fuzz_target(path=st.lists(st.integers(0, 50), max_size=5), value=NESTED, raw=st.one_of(st.none(), st.binary(max_size=64)),
             tamper=st.sampled_from(["none", "golden", "input"]))
def test_fuzz_suite_stat_cache(path, value, raw, tamper):
    """A hostile `.suite-stat-cache.json` at the root (one of its values replaced, or raw bytes): verify gives its
    verdict, PASS, or not for a golden or input changed after the record (the record's lines no longer match it)."""
    with scratch() as tmp:
        work = _recorded_copy(tmp)
        record = work / SUITE_FILE
        text = record.read_text()
        assert json.loads(text)["format"] == SUITE_FORMAT and len(json.loads(text)["cases"]) == 4
        record.write_bytes(raw if raw is not None else _mutated(text, path, value).encode())
        if tamper != "none":
            m = M.load(sorted(casedirs.find_cases(work))[0])
            f = m.output.golden if tamper == "golden" else m.inputs[0].file
            data = bytearray(f.read_bytes())
            data[0] ^= 0x40
            f.write_bytes(bytes(data))
        r = run_cli("verify", work, "-j", "1")
        assert "Traceback" not in r.output, r.output[-2000:]
        assert r.exit_code == (0 if tamper == "none" else 2), r.output[-1000:]


KINDS = ["ok", "small", "nan", "inf", "negative", "huge", "zeros", "wrong-shape", "list", "none", "text"]
FIELDS = ("value", "bound", "scale", "allowance", "shared", "lean")
OP = """\
import numpy as np
from aclnn_cli.ops import OpSpec, Reference, TensorSpec, register
from aclnn_cli.ops.families import Channels

KINDS = {kinds!r}

def _field(kind, like):
    if kind == "ok":
        return np.abs(like) + 1.0
    if kind == "small":  # (a lean a float32 literal could give)
        return (np.abs(like) + 1.0) * 2.0**-30
    if kind == "nan":
        return np.full_like(like, np.nan)
    if kind == "inf":
        return np.full_like(like, np.inf)
    if kind == "negative":
        return -np.abs(like) - 1.0
    if kind == "huge":
        return np.full_like(like, 1e300)
    if kind == "zeros":
        return np.zeros_like(like)
    if kind == "wrong-shape":
        return np.zeros(like.size + 1)
    if kind == "list":
        return like.tolist()
    if kind == "text":
        return "x"
    return None

def reference(t):
    dy, x = t["gradOutput"], t["self"]
    out = {{}}
    for name, value in (("gradInput", dy * 2.0), ("gradBias", dy.sum(axis=1, keepdims=True))):
        v = value if KINDS["value"] == "ok" else _field(KINDS["value"], value)
        fields = [_field(KINDS[f], value) for f in ("bound", "scale", "allowance", "shared", "lean")]
        fields[0] = np.zeros_like(value) if KINDS["bound"] == "ok" else fields[0]
        out[name] = Reference(v, fields[0], fields[1], allowance=fields[2], shared=fields[3], lean=fields[4])
    return out

def kernel(t):
    dy = t["gradOutput"]
    return {{"gradInput": dy * 2.0, "gradBias": dy.sum(axis=1, keepdims=True)}}

register(OpSpec(name="aclnnMyFuzzRef", key="my_fuzz_ref", summary="x", formula="x",
    tensors=(TensorSpec("gradOutput", "input", {{"normal": [0, 1]}}), TensorSpec("self", "input", {{"normal": [0, 1]}}),
             TensorSpec("gradInput", "output", {{"constant": 0}}), TensorSpec("gradBias", "output", {{"constant": 0}})),
    products={{"A2": ("float32", "float16")}}, dims=(1, 8), empty_ok=False,
    family=Channels(driver="self", per_row=("gradBias",)), reference=reference, kernel=kernel))
"""


@fuzz_target(kinds=st.fixed_dictionaries({f: st.sampled_from(KINDS) for f in FIELDS}),
             dtype=st.sampled_from(["float32", "float16"]))
def test_fuzz_user_reference_values(kinds, dtype):
    """Whatever a user reference returns, gen, emulate and verify give a result or one error line."""
    _reference_loop(kinds, dtype)


@pytest.mark.parametrize("odd", [{"value": "nan", "scale": "list"}, {"scale": "text"}, {"allowance": "list"},
                                 {"lean": "ok"}, {"lean": "list"}])
def test_reference_fields_found_by_the_fuzzer(odd):
    """A list where an array belongs (read with .reshape in verify's relief: a traceback) and text: examples the
    target above found; kept as cases of their own."""
    _reference_loop({**{f: "ok" for f in FIELDS}, "lean": "small", **odd}, "float32")


def _reference_loop(kinds, dtype):
    """gen, emulate and verify in-process (helpers.run_cli: an exception would fail the test, as a traceback
    would), the op module loaded as --ops loads it (user.load_paths) and the registry restored after."""
    from aclnn_cli.ops import user

    with scratch() as tmp, restored_registry():
        op = tmp / "my_fuzz_ref.py"
        op.write_text(OP.format(kinds=kinds))
        user.load_paths([op])
        cases = write_yaml(tmp, f"op: aclnnMyFuzzRef\ncases:\n  - {{name: a, dtype: {dtype}, product: A2, shape: [3, 2, 5]}}\n")
        for args in (("gen", cases, "-o", tmp / "out"), ("emulate", tmp / "out"), ("verify", tmp / "out")):
            r = run_cli(*args)
            errors = [line for line in r.output.splitlines() if line.startswith("aclnn-cli: error")]
            assert len(errors) <= 1, (kinds, args, r.output[-1000:])
            if errors:  # (the one line: gen refused the op's answer, or what followed has nothing to act on)
                assert r.exit_code == 2, (kinds, args)
                return
            assert r.exit_code in (0, 1), (kinds, args, r.exit_code, r.output[-1000:])
            if errors:  # (the one line: gen refused the op's answer, or what followed has nothing to act on)
                assert r.exit_code == 2, (kinds, args)
                return
            assert r.exit_code in (0, 1), (kinds, args, r.exit_code, r.output[-1000:])
