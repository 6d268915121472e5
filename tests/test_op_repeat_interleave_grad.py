"""aclnnRepeatInterleaveGrad: goldens against an oracle that shares nothing with the op or the Segments family, an
independent float32 kernel (numpy's reduceat) over every bundled case, the 950 kernel's bisection by hand, every
contract rule, the defects and legitimate variants through emulate and verify, and ops-nn's TTK suite unmodified.

The oracle reads the generated case directories through the manifest's numbers alone (tests/harness.py: shape,
strides, offset) and sums each run of yGrad along the axis in Fractions (the doc's formula: run j is repeats[j]
consecutive positions, one repeats value every run that long), rounded once by softmax_oracle.round_to (integers).
"""

from __future__ import annotations

import json
import math
import shutil
from exactq import Fraction
from pathlib import Path

import numpy as np
import pytest

import harness
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.segments.repeat_interleave_grad import SPEC
from aclnn_cli.ops.segments.repeat_interleave_kernel import bisection_sum, chunk_length, nearest_power2
from aclnn_cli.ops.treesum import tree_sum
from aclnn_cli.tensor import dtypes as D
from cann_build import tools_missing
from helpers import run_cli, write_yaml
from rowblocks import assert_variant_verdicts, bundled_emulated, generated_yaml, not_passing, write_dump
from shared import linked_copy
from stub_ctypes import stub  # noqa: F401  (the fixture)
from softmax_oracle import check_pipeline_goldens, loop, round_to, variant_kinds
from test_op_embedding_dense_backward import positive_cases

KEY = "repeat_interleave_grad"
TTK = Path(__file__).parent / "ops_nn_suites" / "ttk_kernel_repeat_interleave_grad_st.csv"


def logical(case: Path, m: dict, name: str, key: str = "file") -> np.ndarray:
    t = harness.tensors(m)[name]
    return harness.view(harness.storage(case, t, key), t)


def case_runs(case: Path, m: dict) -> tuple[np.ndarray, int, np.ndarray]:
    """(yGrad as float64 moved to (A1, R, A0) around the axis, the axis, each run's first position and the end):
    the doc's reading of repeats, written here from the doc alone."""
    y = logical(case, m, "yGrad").astype(np.float64)
    axis = next(a["value"] for a in m["attributes"] if a["name"] == "axis") % y.ndim
    reps = logical(case, m, "repeats").astype(np.int64).reshape(-1).tolist()
    length = y.shape[axis]
    if len(reps) == 1:
        reps = reps * (length // reps[0]) if reps[0] else [0] * (math.prod(harness.tensors(m)["out"]["shape"]) //
                                                                   max(y.size // max(length, 1), 1))
    ends = np.cumsum([0] + reps)
    assert ends[-1] == length
    cut = (math.prod(y.shape[:axis]), length, math.prod(y.shape[axis + 1:]))
    return y.reshape(cut), axis, ends


def oracle(case: Path, m: dict) -> list[Fraction]:
    """out's exact values in (A1, run, A0) order: each run's yGrad values summed as Fractions."""
    y, _, ends = case_runs(case, m)
    a1, _, a0 = y.shape
    return [sum((Fraction(v) for v in y[i, ends[j]:ends[j + 1], c].tolist()), Fraction(0))
            for i in range(a1) for j in range(len(ends) - 1) for c in range(a0)]


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    """The bundled file generated and emulated: the session's cases (rowblocks.bundled_emulated)."""
    return bundled_emulated(tmp_path_factory, bundled_produced, KEY)


def test_goldens_equal_the_oracle_rounded_once(suite):
    """Every golden of every bundled positive case (each dtype and axis, scalar repeats, zero runs, a run of 8,192,
    cancelling runs of 512 terms around 1e3, strided views, empty) is the exact run sum rounded once, over 30,000
    elements per dtype; the special-values case is IEEE's: NaN where a run holds a NaN or both infinities."""
    per_dtype: dict[str, int] = {}
    for case, m in positive_cases(suite):
        dtype = D.lookup(harness.tensors(m)["out"]["dtype"])
        got = logical(case, m, "out", "golden").astype(np.float64).reshape(-1)
        if "special" in case.name:
            y, _, ends = case_runs(case, m)
            with np.errstate(invalid="ignore"):
                want = np.array([y[i, ends[j]:ends[j + 1], 0].sum() for i in range(y.shape[0]) for j in range(3)])
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=case.name)
            assert (got[np.isinf(want)] == want[np.isinf(want)]).all()
            continue
        want = np.array([round_to(q, dtype) for q in oracle(case, m)])
        np.testing.assert_array_equal(got, want, err_msg=case.name)
        per_dtype[dtype.name] = per_dtype.get(dtype.name, 0) + got.size
    assert min(per_dtype.values()) > 30_000 and len(per_dtype) == 3, per_dtype


def _block(y: np.ndarray, repeats, s: int, itemsize: int = 4) -> dict:
    y = np.asarray(y)
    return {"yGrad": y, "repeats": np.broadcast_to(np.asarray(repeats, np.int64).reshape(1, 1, -1),
                                                   (y.shape[0], 1, np.size(repeats))),
            "segments": np.full((y.shape[0], 1, 1), s, np.int64), "blocks": np.full((y.shape[0], 1, 1), y.shape[0]),
            "axis": 1, "itemsize": itemsize}


def test_exact_path_settles_ties_and_cancellation():
    """gen's certify-then-exact path on 3,000 runs per dtype: runs of two at exact ties of the dtype (1 + half an ulp:
    to even), runs cancelling to a few ulps of their terms, and random runs; every element the Fractions' rounding."""
    rng = np.random.default_rng(5)
    for dtype in (D.FLOAT32, D.FLOAT16, D.BFLOAT16):
        half = 2.0 ** -dtype.precision  # (half an ulp of 1)
        ties = np.stack([np.ones(1000), np.full(1000, half) * rng.choice([-1, 1, 3], 1000)], axis=1)
        big = rng.uniform(-1000, 1000, (1000, 1))
        cancel = np.concatenate([big, -big + rng.integers(-4, 5, (1000, 1)) * half * 2], axis=1)
        runs = np.concatenate([ties, cancel, rng.uniform(-2, 2, (1000, 2))], axis=0)
        y = runs.astype(dtype.np_dtype).astype(np.float64).reshape(1, -1, 1)
        exact = np.array([sum(map(Fraction, r.tolist()), Fraction(0)) for r in y.reshape(-1, 2)], dtype=object)
        attrs = _block(y, [2], 3000)  # (all but yGrad passed as they are: the repeats stay integers)
        elements, fallbacks = check_pipeline_goldens(
            SPEC, [({"yGrad": attrs.pop("yGrad")}, exact.reshape(1, -1, 1))], attrs, "out", dtype)
        assert elements == 3000 and fallbacks >= 500, (dtype.name, fallbacks)


def test_kernel_follows_the_source_bisection():
    """A run of 1,000 with A0 = 2 (the RA tiling: rFactor = 223 in float32) by hand: 5 chunks, P = 4, chunk 4 added
    into chunk 0 elementwise, each chunk reduced in the 950's row sum, the partials ((p0 + p1) + (p2 + p3)); a
    run of 0 is +0, a run of 1 the element itself (-0 kept); one repeats value: each run the 950's row sum."""
    f = np.float32
    assert chunk_length(1, 2, 4) == 223 and [nearest_power2(v) for v in (1, 2, 3, 4, 5, 8, 9)] == [1, 1, 2, 2, 4, 4, 8]
    rng = np.random.default_rng(3)
    run = rng.normal(0, 1, (1, 1000, 2)).astype(f)
    run[0, 0] = 3e7  # (the order shows: a large first term)
    chunks = np.zeros((5, 223, 2), f)
    chunks.reshape(-1, 2)[:1000] = run[0]
    chunks[0] = chunks[0] + chunks[4]
    p = [tree_sum(chunks[i], axis=0, keepdims=False) for i in range(4)]
    want = (p[0] + p[1]) + (p[2] + p[3])
    assert np.array_equal(bisection_sum(run, 223)[0], want)
    y = np.concatenate([run, np.array([[[-0.0, 5.0]]], f)], axis=1)
    got = SPEC.kernel(_block(y, [0, 1000, 1], 3))
    assert got.shape == (1, 3, 2) and np.array_equal(got[0, 1], want)
    assert np.all(got[0, 0] == 0) and not np.signbit(got[0, 0]).any() and np.signbit(got[0, 2, 0]) and got[0, 2, 1] == 5
    assert not np.array_equal(want, np.cumsum(run[0], axis=0, dtype=f)[-1])  # (the sequential order differs)
    one = SPEC.kernel(_block(run, [1000], 1))  # (one repeats value: the reduce template, the row sum of the run)
    assert np.array_equal(one[0, 0], tree_sum(run[0], axis=0, keepdims=False))


def _descs(y=(4, 6), rep=(3,), out=(4, 3), dtype=D.FLOAT32, rep_dtype="int64", out_dtype=None, nulls=()):
    descs = {"yGrad": TensorDesc(dtype, y), "repeats": TensorDesc(D.lookup(rep_dtype), rep),
             "out": TensorDesc(out_dtype or dtype, out)}
    return {n: TensorDesc(d.dtype, d.shape, n in nulls) for n, d in descs.items()}


@pytest.mark.parametrize("descs, axis, status, rule", [
    (_descs(), -1, 0, ""),
    (_descs(rep=(), out=(4, 2)), 1, 0, ""),  # (one value, 0-d: out's size decides the runs)
    (_descs(y=(64,), rep=(1,), out=(2, 4, 4)), 0, 0, ""),  # (out any shape of the reduced size)
    (_descs(y=(6, 4), out=(3, 4)), 0, 0, ""),
    (_descs(y=(6, 4), out=(3, 4)), -2, 0, ""),
    (_descs(rep_dtype="int32"), -1, 0, ""),
    (_descs(nulls=("yGrad",)), -1, 161001, "yGrad is a null pointer"),
    (_descs(nulls=("repeats",)), -1, 161001, "repeats is a null pointer"),
    (_descs(nulls=("out",)), -1, 161001, "out is a null pointer"),
    (_descs(dtype=D.lookup("float64")), -1, 161002, "yGrad dtype float64"),
    (_descs(rep_dtype="float32"), -1, 161002, "repeats dtype float32"),
    (_descs(out_dtype=D.FLOAT16), -1, 161002, "dtype"),
    (_descs(), 2, 161002, "axis 2 is outside [-2, 2)"),
    (_descs(), -3, 161002, "axis -3 is outside"),
    (_descs(y=(), rep=(1,), out=()), 0, 161002, "axis 0 is outside [-0, 0)"),
    (_descs(rep=(1, 3)), -1, 161002, "repeats has 2 dims"),
    (_descs(rep=(0,)), -1, 161002, "repeats is empty"),
    (_descs(out=(4, 4)), -1, 161002, "out has 16 elements"),
    (_descs(rep=(1,), out=(5,)), -1, 161002, "not a multiple of yGrad's 4"),
    (_descs(y=(2,) * 9, rep=(2,), out=(2,) * 9), -1, 161002, "9 dims"),
])
def test_contract(descs, axis, status, rule):
    """Phase one as declared from the doc (CONTRACT_NOTES): nulls, dtypes, out's dtype, the axis range, repeats 0-d
    or 1-d and not empty, out's size; the 950 only."""
    outcome = check(SPEC, "950", descs, {"axis": axis})
    assert outcome.status == status and rule in outcome.rule, outcome
    assert set(SPEC.products) == {"950"}


def test_repeats_that_do_not_add_up_are_refused_by_gen(tmp_path):
    """The doc's constraint on repeats' values (natural numbers adding up to the axis) is not a status: gen refuses
    the case, naming why, rather than make a golden of an undefined result."""
    for values, why in (([1, 2, 2], "add up to 5, not the axis' 6"), ([7, -1, 0], "negative run length")):
        text = (f"op: aclnnRepeatInterleaveGrad\ndefaults: {{product: '950', dtype: float32}}\ncases:\n"
                f"  - {{name: bad, shape: [2, 6], tensors: {{repeats: {{shape: [3]}}}}, "
                f"inputs: {{repeats: {{values: {values}}}}}}}\n")
        done = run_cli("gen", write_yaml(tmp_path, text), "-o", tmp_path / f"out{values[0]}")
        assert done.exit_code != 0 and why in done.output, done.output[-600:]


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    """numpy's reduceat in float32 (each run summed in its own order, empty runs 0) written as the dumps of every
    bundled positive case: verify passes them all."""
    work = tmp_path / "reduceat"
    shutil.copytree(suite, work)
    wrote = 0
    for case, m in positive_cases(work):
        y, axis, ends = case_runs(case, m)
        t = harness.tensors(m)["out"]
        y32 = y.astype(np.float32)
        out = np.zeros((y.shape[0], len(ends) - 1, y.shape[2]), np.float32)
        full = np.flatnonzero(np.diff(ends) > 0)
        if full.size and y.size:
            with np.errstate(all="ignore"):
                out[:, full] = np.add.reduceat(y32, ends[:-1][full], axis=1)
        write_dump(case, t, out.reshape(t["shape"]))
        wrote += 1
    assert wrote >= 60
    bad = not_passing(work, tmp_path / "reduceat.json")
    assert not bad, bad


DEFECT_YAML = """\
op: aclnnRepeatInterleaveGrad
defaults: {product: "950", seed: 37, dtype: [float32, float16, bfloat16]}
cases:
  - {name: last, shape: [16, 4096], tensors: {repeats: {shape: [8]}}}
  - {name: inner, shape: [8048, 8], attributes: {axis: 0}, tensors: {repeats: {shape: [4]}},
     inputs: {repeats: {values: [300, 700, 7000, 48]}, yGrad: {uniform: [0, 2]}}}
"""
DEFECTS, LEGITIMATE = variant_kinds(SPEC)
# the cases each defect shows in: a term moved between runs of hundreds of positive terms ("inner") hides below
# bfloat16's ulp of their sum; reading the runs along the flattened (axis, inner) positions changes nothing where
# nothing follows the axis ("last")
SHOWS = {**dict.fromkeys(DEFECTS, ("last", "inner")), "rig-off-by-one": ("last",), "rig-wrong-axis": ("inner",)}


@pytest.fixture(scope="module")
def defect_suite(tmp_path_factory):
    return generated_yaml(tmp_path_factory, DEFECT_YAML, "rig_defects")


@pytest.mark.parametrize("variant", (*LEGITIMATE, *DEFECTS))
def test_variants_pass_or_fail_in_every_dtype(defect_suite, tmp_path, variant):
    """Each legitimate order passes every case; each defect fails every case it shows in (SHOWS), in fp32, fp16 and
    bf16: runs of 500 on average of mean-zero terms along the last axis ("last"), runs of up to 7,000 terms of one
    sign along the first with A0 = 8 ("inner": a float16 accumulator's error on bfloat16 terms hides below
    bfloat16's ulp until its sums outgrow 2,048)."""
    assert_variant_verdicts(defect_suite, tmp_path, variant, SHOWS, LEGITIMATE, cases=6)


def test_the_kernel_passes(defect_suite, tmp_path):
    code, verdicts = loop(run_cli, linked_copy(defect_suite, tmp_path / "k"), tmp_path, None)
    assert code == 0 and len(verdicts) == 6 and set(r["status"] for r in verdicts.values()) == {"PASS"}, verdicts


def test_ops_nn_ttk_suite_imports_whole_and_passes(tmp_path):
    """ops-nn's TTK suite (tests/ops_nn_suites/, unmodified): 5 of 5 cases import (graph op RepeatInterleaveGrad, its
    repeats tensor filled from the attribute listing its values), each repeats equal to the CSV's list, and all PASS."""
    out = tmp_path / "ttk"
    assert run_cli("gen", TTK, "-o", out, "--jobs", "1").exit_code == 0
    cases = sorted(p.parent for p in out.glob("*/case.json"))
    assert len(cases) == 5
    lists = {}
    for line in TTK.read_text().splitlines()[1:]:
        name = line.split(",", 1)[0]
        lists[name] = json.loads(line.split("'repeats': ", 1)[1].split("]", 1)[0] + "]")
    for case in cases:
        m = harness.load(case)
        name = case.name.rsplit("-", 1)[1]
        assert logical(case, m, "repeats").reshape(-1).tolist() == lists[name]
    code, verdicts = loop(run_cli, out, tmp_path, None)
    assert code == 0 and set(r["status"] for r in verdicts.values()) == {"PASS"}, verdicts


def test_a_repeats_attribute_of_another_length_is_unsupported(tmp_path):
    """The attribute listing repeats' values must hold one per element of the repeats tensor: else the case is
    unsupported (skipped with --skip-unsupported), never filled otherwise."""
    head, row = TTK.read_text().splitlines()[:3:2]
    bad = tmp_path / "bad.csv"
    bad.write_text(head + "\n" + row.replace("'repeats': [77, ", "'repeats': [") + "\n")
    done = run_cli("gen", bad, "-o", tmp_path / "out")
    assert done.exit_code != 0 and "lists 8 values; repeats of shape [9] has 9" in done.output, done.output[-600:]


def test_bundled_cases_pass(suite, tmp_path):
    """gen, emulate and verify of the bundled file: every case PASS (the negative ones refused as declared)."""
    code, verdicts = loop(run_cli, suite, tmp_path, None)
    assert code == 0 and len(verdicts) >= 100 and set(r["status"] for r in verdicts.values()) == {"PASS"}


@pytest.mark.skipif(tools_missing() is not None, reason=f"cannot build C++ here: {tools_missing()}")
def test_the_stub_kernel_by_hand(stub, monkeypatch):
    """The stub CANN's op (tests/stub_cann/src/ops_repeat_interleave.cpp) on the 950: runs of 0, 2 and 4 of two rows
    0..11, one 0-d repeats value 3 along axis 1; phase one as the contract says (A2 unsupported, the axis, an empty
    repeats, a null)."""
    monkeypatch.setenv("ACLNN_STUB_SOC", "Ascend950PR_9599")
    f = np.float32
    y = stub.tensor(np.arange(12, dtype=f).reshape(2, 6))
    out = stub.tensor(np.full((2, 3), 7, f))
    assert stub.call("aclnnRepeatInterleaveGrad", y, stub.tensor(np.array([0, 2, 4], np.int64)), -1, out) == 0
    assert stub.view(out).tolist() == [[0, 1, 14], [0, 13, 38]]
    one = stub.tensor(np.full((2, 2), 7, f))
    assert stub.call("aclnnRepeatInterleaveGrad", y, stub.tensor(np.array(3, np.int32)), 1, one) == 0
    assert stub.view(one).tolist() == [[3, 12], [21, 30]]
    assert stub.call("aclnnRepeatInterleaveGrad", y, stub.tensor(np.array([3], np.int64)), 2, one) == 161002
    assert stub.call("aclnnRepeatInterleaveGrad", y, stub.tensor(np.zeros(0, np.int64)), 1, one) == 161002
    assert stub.call("aclnnRepeatInterleaveGrad", y, None, 1, one) == 161001
    monkeypatch.setenv("ACLNN_STUB_SOC", "Ascend910B1")
    assert stub.call("aclnnRepeatInterleaveGrad", y, stub.tensor(np.array([3], np.int64)), 1, one) == 161002
