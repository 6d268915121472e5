"""Small cases compared in one vectorised pass (judge/smallbatch.py): the same verdicts, metrics and messages as
the per-case path, for every standard and option, for cases the pass takes and for those it leaves to verify.

These compare the tool with itself (plumbing): the per-case path is the reference, whose verdicts are checked
against independent kernels and known defects elsewhere (test_defects.py, test_identical_chunks.py). Sums
agree to their rounding and everything else bit for bit (decision 56), as in test_identical_chunks.py.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.casedir import manifest as M
from aclnn_cli.casedir import dirs as casedirs
from aclnn_cli.judge import smallbatch
from aclnn_cli.judge import verify as V
from aclnn_cli.judge.comparison import Options, compare_range
from aclnn_cli.standards.rules import STANDARDS

from helpers import run_cli, write_yaml
from test_identical_chunks import assert_same, metrics_fields, same_result

SUITE = """
op: aclnnSiluBackward
cases:
  - {name: h1, dtype: [float16, bfloat16, float32], shape: [[4096], [1], [3, 5], [65536]], seed: 1}
  - {name: h2, dtype: [float16, bfloat16, float32], shape: [[4096], [3, 5]], seed: 2}
  - {name: h3, dtype: [float16, bfloat16, float32], shape: [[4096], [77]], seed: 3}
  - {name: big, dtype: float16, shape: [65537], seed: 4}
  - {name: relief, dtype: [float16, float32], shape: [512], seed: 5, inputs: {self: {uniform: [-1.29, -1.27]}}}
  - {name: zeros, dtype: [float16, bfloat16], shape: [300], seed: 6, inputs: {gradOutput: {values: [0.0, 1.5, -2.0]}}}
  - {name: allzero, dtype: float16, shape: [64], seed: 7, inputs: {gradOutput: {constant: 0}}}
  - {name: subn, dtype: [float16, float32], shape: [2048], seed: 8, inputs: {self: {uniform: [-11, 6]}}}
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """The suite generated and emulated once (each test copies what it changes)."""
    tmp = tmp_path_factory.mktemp("smallbatch")
    out = tmp / "out"
    assert run_cli("gen", write_yaml(tmp, SUITE), "-o", out, "-j", 1).exit_code == 0
    assert run_cli("emulate", out, "-j", 1).exit_code == 0
    return out


def _mutate(case_dir, kind: str, rng) -> None:
    """Change a case's dump the way a kernel might: a few ulps off, many elements off, NaN, Inf, -0, zeros."""
    m = M.load(case_dir)
    out = m.output
    a = np.fromfile(out.dump_path, out.dtype.np_dtype)
    bits = a.view(out.dtype.uint_dtype)
    n = a.size
    at = rng.integers(0, n, max(1, n // 200))
    if kind == "ulps":
        bits[at] += out.dtype.uint_dtype.type(1)
    elif kind == "many":
        bits[: n // 4 + 1] ^= out.dtype.uint_dtype.type(3)
    elif kind == "far":
        a[at] = (a[at].astype(np.float64) * 1.5 + 0.01).astype(out.dtype.np_dtype)
    elif kind in ("nan", "inf"):
        a[at[:1]] = np.array(np.nan if kind == "nan" else np.inf).astype(out.dtype.np_dtype)
    elif kind == "negzero":
        a[a == 0] = np.array(-0.0).astype(out.dtype.np_dtype)
    elif kind == "flush":
        a[np.abs(a.astype(np.float64)) < 1e-3] = 0
    a.tofile(out.dump_path)


KINDS = (None, "ulps", "many", "far", "nan", "inf", "negzero", "flush")


@pytest.fixture(scope="module")
def mutated(suite, tmp_path_factory):
    """The suite with each case's dump changed one way or another (KINDS in turn), and its manifests."""
    out = tmp_path_factory.mktemp("mutated") / "out"
    os.system(f"cp -a {suite} {out}")
    rng = np.random.default_rng(0)
    dirs = casedirs.find_cases(out)
    for i, d in enumerate(dirs):
        kind = KINDS[i % len(KINDS)]
        if kind:
            _mutate(d, kind, rng)
    return M.load_all(dirs)[0]


OPTIONS = [Options(standard=s) for s in sorted(STANDARDS)] + [
    Options(), Options(signed_zeros=True), Options(chunk=100), Options(tolerance={"T": 2.0**-8}),
    Options(error_rows=True), Options(standard="ulp", signed_zeros=True)]


@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: repr(o)[8:60])
def test_a_batch_gives_the_per_case_results(mutated, opts):
    """Every case of the batch, taken by the pass or left to verify: the per-case path's result JSON."""
    batched = V._verify_batch(mutated, opts)
    for m, got in zip(mutated, batched):
        same_result(got.to_json(), V._verify_safely(m, opts).to_json())


def test_the_pass_takes_most_cases_and_its_metrics_are_compare_ranges(mutated):
    """Not vacuous: the pass judges the cases it can in every dtype (a correct dump, a few ulps, -0, flushed,
    far off, most elements differing), and leaves those it must (65,537 elements, a NaN or Inf dump); each
    metrics it makes is compare_range's."""
    opts = Options()
    done = smallbatch.precompare(mutated, opts)
    taken = {(mutated[i].output.dtype.name, KINDS[i % len(KINDS)]) for i in done}
    assert {"float16", "bfloat16", "float32"} <= {d for d, _ in taken}, taken
    assert {None, "many", "negzero"} <= {k for _, k in taken}, taken
    for i, m in enumerate(mutated):
        if KINDS[i % len(KINDS)] in ("nan", "inf") or m.output.layout.numel > smallbatch.SMALL_CASE:
            assert i not in done, m.case_id
    relieved = [mutated[i].case_id for i in done if done[i][0].relieved]
    assert relieved and any("float32" in c for c in relieved), relieved  # (relief, sparse and dense, in the pass)
    for i, (metrics, bench, rows) in done.items():
        m = mutated[i]
        ref, ref_bench, ref_rows = compare_range(m, opts, 0, m.output.layout.numel, True)
        assert bench is None and ref_bench is None and rows == ref_rows == []
        assert_same(metrics_fields(metrics), metrics_fields(ref), key=m.case_id)


def test_options_that_want_every_element_take_no_batch(mutated):
    assert smallbatch.precompare(mutated, Options(error_data=True)) == {}
    assert smallbatch.precompare(mutated, Options(relieve_all=True)) == {}
    assert smallbatch.precompare(mutated, Options(error_rows=True)) == {}


@pytest.fixture
def copy(suite, tmp_path):
    out = tmp_path / "out"
    os.system(f"cp -a {suite} {out}")
    return out


def _damage(d, how: str) -> str:
    """Damage one case's files; returns what its ERROR reason must say."""
    m = M.load(d)
    out, inp = m.output, m.inputs[0]
    if how == "no dump":
        os.unlink(out.dump_path)
        return "no dump at"
    if how == "short dump":
        with open(out.dump_path, "r+b") as f:
            f.truncate(os.path.getsize(out.dump_path) - 2)
        return "dump"
    if how == "fifo dump":
        os.unlink(out.dump_path)
        os.mkfifo(out.dump_path)
        return "FIFO"
    if how in ("golden changed", "input changed"):
        path = out.golden_path if how == "golden changed" else inp.file_path
        data = bytearray(open(path, "rb").read())
        data[0] ^= 1
        open(path, "wb").write(bytes(data))
        return "changed since gen"
    if how == "golden is a directory":
        os.unlink(out.golden_path)
        os.mkdir(out.golden_path)
        return "directory"
    if how == "bad status":
        open(os.path.join(d, M.STATUS_FILE), "w").write("561103\n")
        return "phase one returned 561103"
    raise AssertionError(how)


DAMAGE = ("no dump", "short dump", "fifo dump", "golden changed", "input changed", "golden is a directory",
          "bad status")


@pytest.mark.parametrize("how", DAMAGE)
def test_damaged_files_give_the_per_case_verdict_and_message(copy, how):
    """A case whose files are not as gen wrote them is left to the per-case path: its status and reason are
    that path's, word for word, and the cases beside it in the batch are judged as before. A FIFO in the
    dump's place is not waited on."""
    dirs = casedirs.find_cases(copy)
    want = _damage(dirs[3], how)
    manifests = M.load_all(dirs)[0]
    batched = V._verify_batch(manifests, Options())
    for m, got in zip(manifests, batched):
        same_result(got.to_json(), V._verify_safely(m, Options()).to_json())
    hit = batched[3]
    assert hit.status in ("ERROR", "MISSING", "STATUS") and want in hit.reason, (hit.status, hit.reason)
    assert all(r.status == "PASS" for i, r in enumerate(batched) if i != 3 and "allzero" not in r.case_id), \
        [(r.case_id, r.status, r.reason) for r in batched if r.status != "PASS"][:3]


def test_verify_judges_small_cases_through_the_pass(copy, monkeypatch):
    """The CLI's verify takes the pass: the per-case comparison runs only for what the pass left."""
    calls = []
    real = V.compare_range
    monkeypatch.setattr(V, "compare_range", lambda m, *a, **k: (calls.append(m.case_id), real(m, *a, **k))[1])
    r = run_cli("verify", copy, "-j", 1)
    assert r.exit_code == 0, r.output
    n = len(casedirs.find_cases(copy))
    assert 0 < len(calls) < n // 2, (len(calls), n)
    assert any("big" in c for c in calls)


def test_the_batch_is_bounded(mutated, monkeypatch):
    """Batches hold at most about BATCH_ELEMENTS elements (memory), and splitting them changes nothing."""
    sizes = []
    real = smallbatch._compare_batch
    monkeypatch.setattr(smallbatch, "_compare_batch", lambda b, *a: (sizes.append(len(b)), real(b, *a))[1])
    whole = smallbatch.precompare(mutated, Options())
    monkeypatch.setattr(smallbatch, "BATCH_ELEMENTS", 5000)
    sizes.clear()
    split = smallbatch.precompare(mutated, Options())
    assert len(sizes) > 3 and whole.keys() == split.keys()
    for i in whole:
        assert_same(metrics_fields(split[i][0]), metrics_fields(whole[i][0]))


def test_every_dtype_it_takes_is_one_identical_py_knows():
    """The pass reads bits through identical.py's table: a dtype it takes has its magnitude masks."""
    from aclnn_cli.judge.identical import _MAGNITUDE
    for name in ("float16", "bfloat16", "float32"):
        d = D.lookup(name)
        mask, top = _MAGNITUDE[name]
        assert int(np.array(np.inf, d.np_dtype).view(d.uint_dtype)) & mask == top


@pytest.mark.parametrize("gradient, change", [(1.0e-30, 1), (1.0e30, 1 << 20)])
def test_squares_are_summed_as_the_per_case_path_sums_them(tmp_path, gradient, change):
    """The sum of squared errors squares in the work type, as sums.sum_squares does: errors near 1e-30 square to
    zero in float32 (the per-case RMSE is 0, not 1e-30), and errors near 1e20 overflow there and are summed in
    float64. (A fuzz found the first: the pass had squared in float64.)"""
    text = ("op: aclnnSiluBackward\ncases:\n  - {name: t, dtype: float32, shape: [4], seed: 1, inputs: "
            f"{{gradOutput: {{constant: {gradient:.1e}}}, self: {{constant: 1.0}}}}}}\n")
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out, "-j", 1).exit_code == 0
    assert run_cli("emulate", out, "-j", 1).exit_code == 0
    (m,) = M.load_all(casedirs.find_cases(out))[0]
    a = np.fromfile(m.output.dump_path, np.float32)
    a.view(np.uint32)[0] += change
    a.tofile(m.output.dump_path)
    done = smallbatch.precompare([m], Options(standard="ulp"))
    assert 0 in done, "the pass must judge this case for the test to mean anything"
    ref = compare_range(m, Options(standard="ulp"), 0, 4, True)[0]
    assert_same(metrics_fields(done[0][0]), metrics_fields(ref))
    same_result(V._verify_batch([m], Options())[0].to_json(), V._verify_safely(m, Options()).to_json())


@pytest.mark.parametrize("which", ["golden", "input"])
def test_a_fifo_holding_gens_bytes_is_still_an_error(copy, which):
    """A golden or input replaced by a FIFO whose writer put gen's very bytes in it: ERROR, as the per-case path
    says (a fuzz found the pass accepting it when it skipped the regular-file check for files it hashes)."""
    d = casedirs.find_cases(copy)[0]
    m = M.load(d)
    path = m.judged[0].golden_path if which == "golden" else m.inputs[0].file_path
    data = open(path, "rb").read()
    os.unlink(path)
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR)  # (a writer holding the bytes in the pipe: nothing blocks)
    try:
        os.write(fd, data)
        got = V._verify_batch([m], Options())[0]
        assert got.status == "ERROR" and "FIFO" in got.reason, (got.status, got.reason)
    finally:
        os.close(fd)


def test_subnormal_squares_are_summed_by_the_per_case_function(tmp_path):
    """Errors near 1e-22 square to float32 subnormals, which its dot rounds its own way: such a case's sum of squares
    is sums.sum_squares of its slice, the per-case path's own number (a fuzz found RMSE 3.334e-23 against
    3.381e-23)."""
    text = ("op: aclnnSiluBackward\ncases:\n  - {name: t, dtype: bfloat16, shape: [4096], seed: 9, inputs: "
            "{gradOutput: {uniform: [1.0e-22, 1.0e-20]}, self: {uniform: [-2, 2]}}}\n")
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out, "-j", 1).exit_code == 0
    assert run_cli("emulate", out, "-j", 1).exit_code == 0
    (m,) = M.load_all(casedirs.find_cases(out))[0]
    a = np.fromfile(m.output.dump_path, np.uint16)
    a[:2049] ^= 3
    a.tofile(m.output.dump_path)
    opts = Options(standard="ulp")
    done = smallbatch.precompare([m], opts)
    assert 0 in done
    ref = compare_range(m, opts, 0, 4096, True)[0]
    assert done[0][0].sum_sq_abs == ref.sum_sq_abs
    same_result(V._verify_batch([m], opts)[0].to_json(), V._verify_safely(m, opts).to_json())
