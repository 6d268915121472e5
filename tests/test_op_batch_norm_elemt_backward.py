"""aclnnBatchNormElemtBackward: goldens against an exact oracle that shares nothing with the op or the channels family,
an independent float32 kernel, the op_api's float16 path, the defects caught where they show, ops-nn's ATK and TTK
suites.

The oracle and the independent kernel read the case directories through the manifest alone (tests/harness.py) and
take the doc's formula (norm/sync_batch_norm_backward_elemt/docs/aclnnBatchNormElemtBackward.md): gradInput =
((gradOut - sumDy / count) - (input - mean) * (invstd^2 * (sumDyXmu / count))) * invstd * weight, the per-channel
tensors read along axis 1, count the sum of counter's elements (as the ATK executor sums them), a null weight ones. The
oracle evaluates it in Fractions on every element of the small cases and a sample of the others; an element with an
inf or NaN input, or a count of 0, follows IEEE in float64.

ops-nn's suites (tests/ops_nn_suites/, unmodified, hicann/ops-nn e5c3fa93 norm/sync_batch_norm_backward_elemt/tests/st/):
aclnnBatchNormElemtBackward/atk_aclnnBatchNormElemtBackward.json (218 cases, 6.5 G elements: its counter marked
required false, given in every case) and arch35/ttk_kernel_sync_batch_norm_backward_elemt.csv (80 rows of the graph op
SyncBatchNormBackwardElemt, each element one channel of the API with one sample and a count of 1). Both import whole;
their small cases run here (the whole folder: scripts/catalogue.py).
"""

from __future__ import annotations

import math
from exactq import Fraction
from pathlib import Path

import numpy as np
import pytest

import harness
from aclnn_cli.casedir import manifest as M
from aclnn_cli.golden.rows import widened
from aclnn_cli.judge import comparison as C
from aclnn_cli.judge import rowrelief
from aclnn_cli.judge.verify import verify_case
from aclnn_cli.ops.channels import batch_norm_elemt_backward as OP
from aclnn_cli.ops.channels.batch_norm_elemt_backward import SPEC
from aclnn_cli.tensor import dtypes as D
from helpers import run_cli, same_verdict, verify_records
from independent_rows import case_blocks
from rowblocks import bundled_emulated, not_passing, write_dump
from shared import linked_copy

from test_op_batch_norm_reduce_backward import (_yaml, assert_rounded_once, check_variant, imported, logical,
                                                positive_cases)

KEY = "batch_norm_elemt_backward"
GI = "gradInput"
SUITES = Path(__file__).parent / "ops_nn_suites"
ATK = SUITES / "atk_aclnnBatchNormElemtBackward.json"
TTK = SUITES / "ttk_kernel_sync_batch_norm_backward_elemt.csv"
SAMPLE = 400  # elements the oracle takes of a case larger than that (every element of the others)

# the oracle's own cases: results exactly on a tie of each dtype (dy 1 less meanDy -2^-8, -2^-11, -2^-24, -3 * 2^-9;
# 1 + 2^-7 less -2^-8: ties, one above half, one tie to an odd value), and a count of three devices' 7s
ORACLE_CASES = """
op: aclnnBatchNormElemtBackward
defaults: {dtype: [float32, float16, bfloat16], product: "950", seed: 43}
cases:
  - name: ties
    shape: [1, 5, 1]
    inputs:
      gradOut: {values: [1.0, 1.0, 1.0, 1.0, 1.0078125]}
      sumDy: {values: [-0.00390625, -0.00048828125, -5.9604644775390625e-08, -0.005859375, -0.00390625]}
      input: {constant: 0.5}
      mean: {constant: 0.5}
      invstd: {constant: 1.0}
      weight: {constant: 1.0}
  - name: three_devices
    shape: [3, 7, 5]
    inputs: {counter: {values: [7, 7, 7]}, sumDy: {uniform: [-10, 10]}, sumDyXmu: {uniform: [-10, 10]}}
    tensors: {counter: {shape: [3]}}
"""


def case_inputs(case: Path, m: dict):
    """(dy, x) in input's shape; mean, invstd, weight (ones for a null one), sumDy, sumDyXmu as (C,); counter flat."""
    dy, x = logical(case, m, "gradOut"), logical(case, m, "input")
    c = x.shape[1]
    per = {n: (logical(case, m, n) if logical(case, m, n) is not None else np.ones(c)).reshape(-1)
           for n in ("mean", "invstd", "weight", "sumDy", "sumDyXmu")}
    return dy, x, per, logical(case, m, "counter").reshape(-1)


def sample(size: int) -> np.ndarray:
    if size <= SAMPLE:
        return np.arange(size)
    rng = np.random.default_rng(size)
    return np.unique(np.concatenate([[0, size - 1], rng.choice(size, SAMPLE, replace=False)]))


def oracle(case: Path, m: dict, at: np.ndarray) -> list:
    """The exact gradInput (a Fraction) at logical elements `at`, or the IEEE float64 value of the formula where an
    input is not finite or the count is 0."""
    dy, x, per, counter = case_inputs(case, m)
    shape = x.shape
    channel = np.unravel_index(at, shape)[1] if at.size else at
    finite_count = bool(np.isfinite(counter).all())
    count = sum((Fraction(float(v)) for v in counter), Fraction(0)) if finite_count else float(counter.sum())
    out = []
    for flat, c in zip(at.tolist(), np.asarray(channel).tolist()):
        v = [dy.reshape(-1)[flat], x.reshape(-1)[flat], *(per[n][c] for n in ("mean", "invstd", "weight", "sumDy",
                                                                                "sumDyXmu"))]
        if finite_count and count != 0 and all(math.isfinite(a) for a in v):
            d, xs, mu, r, w, s, sx = map(Fraction, v)
            out.append(((d - s / count) - (xs - mu) * (r * r * (sx / count))) * r * w)
        else:
            d, xs, mu, r, w, s, sx = map(np.float64, v)
            with np.errstate(all="ignore"):
                out.append(float(((d - s / np.float64(count)) - (xs - mu) * (r * r * sx / np.float64(count))) * (r * w)))
    return out


def assert_goldens_are_the_oracle(out: Path) -> tuple[int, int]:
    """(elements compared, cases)."""
    compared = cases = 0
    for case, m in positive_cases(out):
        t = harness.tensors(m)[GI]
        gold = harness.view(harness.storage(case, t, "golden"), t).reshape(-1)
        at = sample(gold.size)
        assert_rounded_once(gold[at], oracle(case, m, at), D.lookup(t["dtype"]), case.name)
        compared, cases = compared + at.size, cases + 1
    return compared, cases


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced) -> Path:
    # (the session's bundled suite: its cases, generated and emulated)
    return bundled_emulated(tmp_path_factory, bundled_produced, KEY)


def test_goldens_equal_the_oracle_rounded_once(suite, tmp_path):
    """The goldens of every positive bundled case (every element of a case up to 400, 400 sampled of the others) and
    of the oracle's own cases (results on a tie of each dtype, which gen settles through its exact path; a count of
    21 from three devices) are the oracle's values rounded once, bit for bit, NaN as NaN."""
    bundled, cases = assert_goldens_are_the_oracle(suite)
    out = tmp_path / "oracle"
    assert run_cli("gen", _yaml(tmp_path, ORACLE_CASES), "-o", out).exit_code == 0
    own, _ = assert_goldens_are_the_oracle(out)
    ties = {c.name.rsplit("-", 1)[1]: harness.view(harness.storage(c, harness.tensors(m)[GI], "golden"),
                                                   harness.tensors(m)[GI]).reshape(-1).astype(np.float64)
            for c, m in positive_cases(out) if "-ties-" in c.name}
    assert ties["bfloat16"][[0, 3, 4]].tolist() == [1.0, 1.0078125, 1.015625]
    assert ties["float16"][1] == 1.0 and ties["float32"][2] == 1.0
    exact = sum(harness.load(c)["golden"].get("exact_fallback_elements", 0) for c, _ in positive_cases(out))
    assert bundled + own > 6_000 and cases >= 50 and exact >= 4, (bundled, own, cases, exact)


# ---------------------------------------------------------------- an independent float32 kernel

def independent(case: Path, m: dict) -> np.ndarray:
    """The doc's formula in numpy float32, associated otherwise than the device: the count summed in float64 and
    rounded once, the means float32 quotients (never float16), the centred term's factor invstd (invstd meanDyXmu),
    gradInput = ((dy - meanDy) - (x - mean) factor) (weight invstd)."""
    f = np.float32
    dy, x, per, counter = case_inputs(case, m)
    shape = [1] * x.ndim
    shape[1] = x.shape[1]
    mean, inv, w, sdy, sdxm = (per[n].astype(f).reshape(shape) for n in ("mean", "invstd", "weight", "sumDy",
                                                                         "sumDyXmu"))
    with np.errstate(all="ignore"):
        count = f(counter.sum())
        mdy, mdxm = sdy / count, sdxm / count
        return ((dy.astype(f) - mdy) - (x.astype(f) - mean) * (inv * (inv * mdxm))) * (w * inv)


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    """The independent kernel's results, written as the dumps of every positive bundled case: verify passes them all
    (the float16 path's means included: float32 means are nearer the exact ones)."""
    work = linked_copy(suite, tmp_path / "independent")
    wrote = 0
    for case, m in positive_cases(work):
        t = harness.tensors(m)[GI]
        (case / t["dump"]).unlink()
        write_dump(case, t, independent(case, m))
        wrote += 1
    assert wrote >= 50
    bad = not_passing(work, tmp_path / "v.json")
    assert not bad, bad


# ---------------------------------------------------------------- the kernel, its defects and legitimate variants

def test_kernel_rounds_the_means_to_float16_where_every_input_is():
    """sumDy = 1, count 3 (counter 1, 2): meanDy = fl32(1 / 3), rounded to float16 (1/3 - 2^-13 / 3) where every input
    but counter is float16, kept where weight is float32; gradInput = (0 - meanDy) * 1 * 1, then float16."""
    one = lambda v: np.full((1, 1, 1), v, np.float32)  # noqa: E731
    t = {"gradOut": one(0.0), "input": one(0.0), "mean": one(0.0), "invstd": one(1.0), "weight": one(1.0),
         "sumDy": one(1.0), "sumDyXmu": one(0.0), "counter": np.array([[[1, 2]]], np.int64)}
    bits = {f"{n}Bits": np.full((1, 1, 1), 11) for n in ("gradOut", "input", "mean", "invstd", "weight", "sumDy",
                                                         "sumDyXmu")}
    third = np.float32(1) / np.float32(3)
    assert SPEC.kernel({**t, **bits})[GI].item() == -float(np.float16(third))
    assert SPEC.kernel({**t, **bits, "weightBits": np.full((1, 1, 1), 24)})[GI].item() == -float(third)
    assert float(np.float16(third)) != float(third)


# defect -> the bundled cases where it must fail (every dtype)
DEFECTS = {
    "syncbn-elemt-mean-dy-ignored": ("nchw", "w_equals_c"),
    "syncbn-elemt-invstd-once": ("nchw", "eight_dims"),
    "syncbn-elemt-xmu-term-sign": ("nchw", "nc_2d"),
    "syncbn-elemt-no-final-invstd": ("nchw", "w_equals_c"),
    "syncbn-elemt-weight-ignored": ("nchw", "stride0"),
    "syncbn-elemt-sums-swapped": ("nchw", "strided"),
    "syncbn-elemt-counter-first": ("world_counts", "counter_2d"),
    "syncbn-elemt-counter-numel": ("world_counts", "counter_2d"),
    "syncbn-elemt-stats-of-first-channel": ("nchw", "w_equals_c"),
}
LEGITIMATE = ("syncbn-elemt-float32-means", "syncbn-elemt-reciprocal-count")


@pytest.mark.parametrize("variant", [*sorted(DEFECTS), *LEGITIMATE])
def test_defects_fail_where_they_show_and_legitimate_variants_pass(suite, tmp_path, variant):
    """The defects where they change the result; the means kept in float32, or taken through fl(1 / count),
    everywhere."""
    check_variant(suite, tmp_path, variant, DEFECTS)


# ---------------------------------------------------------------- ops-nn's own suites

ATK_SMALL = (0, 1, 2, 3, 4, 5, 6, 7, 9, 11, 79, 191)  # (of its cases up to 8,512 elements; counters [1] to [128])
TTK_SAMPLE = tuple(f"*_elemt_fuzz_{n}" for n in (4, 11, 20, 66, 79, 91, 101, 113, 116, 127, 141, 148))


def test_ops_nn_suites_import_whole_and_a_sample_passes(tmp_path):
    """Every case of both files imports (nothing skipped: 218 ATK, 80 TTK); the small ATK cases (int32 and float32
    counters drawn in [-5, 5]) and a sample of TTK rows (special values, float16's +-65,500, the dtypes' largest
    values, float16 beside float32 statistics) pass on the emulated kernel and on the independent one, their goldens
    the oracle's."""
    assert imported(ATK) == (218, 0) and imported(TTK) == (80, 0)
    out = tmp_path / "out"
    picks = [a for n in (*(f"*-atk_aclnnBatchNormElemtBackward-{i}" for i in ATK_SMALL), *TTK_SAMPLE)
             for a in ("--case", n)]
    assert run_cli("gen", ATK, TTK, "-o", out, *picks).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    assert len(list(out.glob("*/case.json"))) == len(ATK_SMALL) + len(TTK_SAMPLE)
    statuses = {c["status"] for c in _verify(out, tmp_path / "v.json")}
    assert statuses <= {"PASS", "MISTRUSTED"}, statuses
    compared, _ = assert_goldens_are_the_oracle(out)
    assert compared > 4_000
    for case, m in positive_cases(out):
        t = harness.tensors(m)[GI]
        (case / t["dump"]).unlink()
        write_dump(case, t, independent(case, m))
    assert {c["status"] for c in _verify(out, tmp_path / "i.json")} <= {"PASS", "MISTRUSTED"}


def _verify(out: Path, report: Path) -> list[dict]:
    return list(verify_records(out)[1].values())


# ---------------------------------------------------------------- relief of a few elements (reference_at, edge_at)

# a count of 7 (not a power of two), of 5 with a null weight, of 0 (2 - 2: the means infinite or NaN), every input
# float16 (the op_api's P: the means rounded to float16, `shared` larger) and float16 beside a float32 weight (P float32)
AT_CASES = """
op: aclnnBatchNormElemtBackward
defaults: {dtype: [float32, float16, bfloat16], product: "950", seed: 61}
cases:
  - {name: seven, shape: [3, 5, 7, 11], inputs: {counter: {values: [3, 4]}}, tensors: {counter: {shape: [2]}}}
  - {name: null_weight, shape: [4, 3, 50], inputs: {counter: {values: [5]}}, tensors: {weight: {nullptr: true}}}
  - name: zero_count
    shape: [2, 4, 30]
    inputs: {counter: {values: [2, -2]}}
    tensors: {counter: {shape: [2], dtype: int32}}
  - {name: weight32, dtype: float16, shape: [6, 3, 20], tensors: {weight: {dtype: float32}}}
"""


def test_reference_at_and_edge_at_are_the_blocks_reference_and_edge_there_bit_for_bit(tmp_path, monkeypatch):
    """Every field of `reference_at` and `edge_at` at random elements of every channel equals, bit for bit (NaN as
    NaN), the whole blocks' `reference` and `edge` there: each dtype, counts 7, 5 and 0, a null weight, the float16 P
    path and float16 beside a float32 weight; the blocks taken whole and in pieces of 50 elements (a huge channel's)."""
    out = tmp_path / "out"
    assert run_cli("gen", _yaml(tmp_path, AT_CASES), "-o", out, "-j", 1).exit_code == 0
    rng = np.random.default_rng(5)
    seen = {"edge": 0, "half": 0, "cases": 0}
    for piece in (OP.PIECE, 50):
        monkeypatch.setattr(OP, "PIECE", piece)
        for d in sorted(p.parent for p in out.glob("*/case.json")):
            m = M.load(d)
            t = {**widened(case_blocks(m)), **m.attribute_values}
            whole, (where, device) = SPEC.reference(t)[GI], SPEC.edge(t)[GI]
            at = rng.choice(whole.value.size, min(whole.value.size, 40), replace=False)
            ref, (w_at, d_at) = SPEC.reference_at(t, {GI: at})[GI], SPEC.edge_at(t, {GI: at})[GI]
            for field in ("value", "bound", "scale", "shared"):
                full = np.broadcast_to(getattr(whole, field), whole.value.shape).reshape(-1)[at]
                np.testing.assert_array_equal(getattr(ref, field), full, err_msg=f"{d.name} {field}")
                assert getattr(ref, field).dtype == np.float64 and getattr(ref, field).shape == at.shape
            assert ref.allowance is None and whole.allowance is None
            np.testing.assert_array_equal(w_at, np.asarray(where).reshape(-1)[at], err_msg=d.name)
            np.testing.assert_array_equal(d_at, np.asarray(device).reshape(-1)[at], err_msg=d.name)
            assert len(set(np.asarray(at) // t["gradOut"].shape[1])) > 1  # (elements of several channels)
            seen["edge"] += int(w_at.sum())
            seen["half"] += "-weight32-" not in d.name and "-float16" in d.name
            seen["cases"] += 1
    assert seen["cases"] == 2 * 10 and seen["edge"] > 0 and seen["half"] > 0, seen


def _flip_sign(m: M.CaseManifest) -> None:
    raw = np.fromfile(m.output.dump_path, np.uint8)
    bits = raw.view(np.uint32 if m.output.dtype.itemsize == 4 else np.uint16)
    (bits ^ bits.dtype.type(1 << (8 * bits.itemsize - 1))).tofile(m.output.dump_path)


# channel 0's invstd squared overflows float32 while the result (about 2e27) does not: the device's inf is an edge
EDGE_CASES = """
op: aclnnBatchNormElemtBackward
defaults: {dtype: float32, product: "950", seed: 9}
cases:
  - {name: long_channels, shape: [300, 3, 400]}
  - name: overflow
    shape: [2, 3, 50]
    inputs: {invstd: {values: [2.0e+19, 1.0, 1.0]}, sumDyXmu: {values: [1.0e-30, 0.5, -0.5]}}
"""


@pytest.mark.parametrize("name", ["long_channels", "overflow"])
def test_verify_relieves_from_the_flagged_elements_alone_with_the_same_verdicts(tmp_path, monkeypatch, name):
    """The emulated kernel's dump (elements flagged by its rounding, or by invstd squared overflowing float32: the
    edge), then its sign flipped (every element flagged): verify relieves both through reference_at and edge_at alone,
    never the blocks' reference, and the verdicts (PASS, FAIL) and their metrics are those of the blocks' path."""
    out = tmp_path / "out"
    assert run_cli("gen", _yaml(tmp_path, EDGE_CASES), "-o", out, "--case", f"*-{name}", "-j", 1).exit_code == 0
    assert run_cli("emulate", out, "-j", 1).exit_code == 0
    m = M.load(next(d for d in out.iterdir() if d.is_dir()))
    whole, edges = [], []
    real_blocks, real_at = rowrelief.reference_blocks, rowrelief._relief_at
    monkeypatch.setattr(rowrelief, "reference_blocks", lambda *a: whole.append(1) or real_blocks(*a))
    monkeypatch.setattr(rowrelief, "_relief_at", lambda *a: (lambda got: edges.append(got[1].sum()) or got)(real_at(*a)))
    correct = verify_case(m, C.Options()).to_json()
    assert correct["status"] == "PASS" and correct["metrics"]["relieved"] > 0 and edges and not whole, correct
    assert (sum(edges) > 0) == (name == "overflow")
    _flip_sign(m)
    broken = verify_case(M.load(m.dir), C.Options()).to_json()
    assert broken["status"] == "FAIL" and not whole
    monkeypatch.setattr(rowrelief, "_relief_at", lambda *a: None)  # (the blocks' path, as before)
    same_verdict(broken, verify_case(M.load(m.dir), C.Options()).to_json())
    _flip_sign(m)
    same_verdict(correct, verify_case(M.load(m.dir), C.Options()).to_json())
    assert whole
