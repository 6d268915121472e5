"""aclnnBatchNormReduceBackward: goldens against an exact oracle that shares nothing with the op or the channels family,
an independent float32 kernel of the doc's centred formula in several orders, the device's own cancellation, the
defects caught where they show, ops-nn's ATK and TTK suites.

The oracle and the independent kernel read the case directories through the manifest alone (tests/harness.py) and
take the doc's formulas (norm/sync_batch_norm_backward_reduce/docs/aclnnBatchNormReduceBackward.md): per channel c
(axis 1 of input) sumDy = gradBias = sum(gradOut), sumDyXmu = sum(gradOut * (input - mean)), gradWeight = invstd *
sumDyXmu. The oracle sums exactly (dyadic integers: each gradOut * input is exact in float64), sum(dy (x - mean)) =
sum(dy x) - mean sum(dy) in Fractions; a channel with an inf or NaN input follows IEEE in the device's order.

ops-nn's suites (tests/ops_nn_suites/, unmodified, hicann/ops-nn e5c3fa93 norm/sync_batch_norm_backward_reduce/tests/st/):
aclnnBatchNormReduceBackward/atk_aclnnBatchNormReduceBackward.json (210 cases) and
arch35/ttk_kernel_sync_batch_norm_backward_reduce_st.csv (99 rows of the graph op SyncBatchNormBackwardReduce, each
element one channel of the API with one sample: graphops.one_sample). Both import whole; a sample of each runs here
(the whole folder: scripts/catalogue.py).
"""

from __future__ import annotations

import math
from exactq import Fraction, RATIONAL
from pathlib import Path

import numpy as np
import pytest

import harness
from aclnn_cli.cases import importers
from aclnn_cli.cases.loader import cases_from_doc
from aclnn_cli.ops.channels.batch_norm_reduce_backward import SPEC
from aclnn_cli.ops.channels.batch_norm_reduce_kernel import GB, GW, SDXM, SDY
from aclnn_cli.tensor import dtypes as D
from helpers import run_cli
from rowblocks import bundled_emulated, not_passing, write_dump
from shared import linked_copy
from test_op_prelu_backward import ORDERS, _statuses, bits_of, exact_sum

KEY = "batch_norm_reduce_backward"
OUTS = (SDY, SDXM, GW, GB)
SUITES = Path(__file__).parent / "ops_nn_suites"
ATK = SUITES / "atk_aclnnBatchNormReduceBackward.json"
TTK = SUITES / "ttk_kernel_sync_batch_norm_backward_reduce_st.csv"

# the oracle's own cases beside the bundled ones: many channels, and sums exactly on a tie of each dtype (channel c's
# two samples: 1 and 2^-8, 2^-11, 2^-24, 3 * 2^-9; 1 + 2^-7 and 2^-8: ties, one above half, one tie to an odd value)
ORACLE_CASES = """
op: aclnnBatchNormReduceBackward
defaults: {dtype: [float32, float16, bfloat16], product: "950", seed: 41}
cases:
  - name: many_channels
    shape: [3, 1024, 2]
  - name: ties
    shape: [2, 5, 1]
    inputs:
      gradOut: {values: [1.0, 1.0, 1.0, 1.0, 1.0078125, 0.00390625, 0.00048828125, 5.9604644775390625e-08,
                         0.005859375, 0.00390625]}
      input: {constant: 1.0}
      mean: {values: [0.0, 0.0, 0.0, 0.0, 1.0]}
      invstd: {constant: 1.0}
"""


def logical(case: Path, m: dict, name: str) -> np.ndarray | None:
    t = harness.tensors(m)[name]
    if t.get("null"):
        return None
    return harness.view(harness.storage(case, t), t).astype(np.float64)


def channels(case: Path, m: dict):
    """(dy, x) as (C, M) rows of each channel's elements (axis 1), mean and invstd as (C,)."""
    dy, x = logical(case, m, "gradOut"), logical(case, m, "input")
    c = x.shape[1]
    rows = lambda a: np.moveaxis(a, 1, 0).reshape(c, -1)  # noqa: E731
    return rows(dy), rows(x), logical(case, m, "mean").reshape(-1), logical(case, m, "invstd").reshape(-1)


def oracle(case: Path, m: dict) -> dict[str, list]:
    """Every output's exact value per channel (Fractions), or the IEEE float of the device's order (sum(dy x) - mean
    sum(dy), times invstd) where a channel's input is not finite."""
    dy, x, mean, inv = channels(case, m)
    out = {n: [] for n in OUTS}
    for d, xs, mu, r in zip(dy, x, mean, inv):
        s, sx = exact_sum(d), exact_sum(d * xs)  # (d * xs: two 24-bit significands, exact in float64)
        if all(isinstance(v, RATIONAL) for v in (s, sx)) and math.isfinite(mu) and math.isfinite(r):
            xmu = sx - Fraction(mu) * s
            gw = xmu * Fraction(r)
        else:
            with np.errstate(all="ignore"):
                xmu = float(np.float64(float(sx)) - np.float64(mu) * np.float64(float(s)))
                gw = float(np.float64(xmu) * np.float64(r))
        for name, v in ((SDY, s), (SDXM, xmu), (GW, gw), (GB, s)):
            out[name].append(v)
    return out


def imported(path: Path) -> tuple[int, int]:
    """(cases imported, skipped) of one ops-nn suite file, validated as gen validates them (scripts/catalogue.py)."""
    got = importers.import_file(path, path.read_bytes(), skip_unsupported=True, validate=cases_from_doc)
    return sum(len(d["cases"]) for d in got.documents), len(got.skipped)


def positive_cases(out: Path):
    for case in sorted(p.parent for p in out.glob("*/case.json")):
        m = harness.load(case)
        if m["expect_status"] == 0:
            yield case, m


def _overflowed(values: list, dtype) -> list:
    """Exact values at or past the dtype's overflow threshold (its largest value plus half an ulp) as the infinity
    they round to (the oracle's rounding cross-checks finite results only)."""
    limit = Fraction(dtype.max_finite) + Fraction(2) ** (math.frexp(dtype.max_finite)[1] - dtype.precision - 1)
    return [math.copysign(math.inf, v) if isinstance(v, RATIONAL) and abs(v) >= limit else v for v in values]


def assert_rounded_once(gold: np.ndarray, want: list, dtype, label) -> None:
    """Goldens `gold` are the exact values `want` (Fractions, or IEEE floats) rounded once to dtype, bit for bit, NaN
    as NaN; an exact zero has no sign (verify judges none: a -0 the float64 path keeps is +0 here)."""
    nan = np.isnan(gold.astype(np.float64))
    assert np.array_equal(nan, np.array([isinstance(v, float) and math.isnan(v) for v in want], bool)), label
    expect = bits_of(_overflowed(want, dtype), dtype).astype(dtype.uint_dtype)
    got = gold.view(dtype.uint_dtype).copy()
    magnitude = np.array(np.iinfo(dtype.uint_dtype).max >> 1, dtype.uint_dtype)
    zero = (got & magnitude) == 0
    got[zero] = 0
    expect[zero & ((expect & magnitude) == 0)] = 0
    assert np.array_equal(got[~nan], expect[~nan]), label


def assert_goldens_are_the_oracle(out: Path) -> tuple[int, int]:
    """(elements compared, of them through gen's exact path)."""
    compared = exact = 0
    for case, m in positive_cases(out):
        want = oracle(case, m)
        for name in OUTS:
            t = harness.tensors(m)[name]
            if t.get("null"):
                continue
            gold = harness.view(harness.storage(case, t, "golden"), t).reshape(-1)
            assert_rounded_once(gold, want[name], D.lookup(t["dtype"]), (case.name, name))
            compared += gold.size
        exact += m["golden"].get("exact_fallback_elements", 0)
    return compared, exact


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced) -> Path:
    # (the session's bundled suite: its cases, generated and emulated)
    return bundled_emulated(tmp_path_factory, bundled_produced, KEY)


def test_goldens_equal_the_oracle_rounded_once(suite, tmp_path):
    """Every golden of every positive bundled case, and of the oracle's own cases (1,024 channels; sums exactly on
    a tie of each dtype, which gen settles through its exact path), is the oracle's value rounded once, bit for
    bit, NaN as NaN and infinities as they are."""
    bundled, _ = assert_goldens_are_the_oracle(suite)
    out = tmp_path / "oracle"
    assert run_cli("gen", _yaml(tmp_path, ORACLE_CASES), "-o", out).exit_code == 0
    own, exact = assert_goldens_are_the_oracle(out)
    ties = {c.name.rsplit("-", 1)[1]: harness.view(harness.storage(c, harness.tensors(m)[SDY], "golden"),
                                                   harness.tensors(m)[SDY]).astype(np.float64)
            for c, m in positive_cases(out) if "-ties-" in c.name}
    # 1 + 2^-8, 2^-11, 2^-24 on their dtype's tie round to even (1); 1 + 2^-7 + 2^-8 in bfloat16 up to 1 + 2^-6
    assert ties["bfloat16"][[0, 3, 4]].tolist() == [1.0, 1.0078125, 1.015625]
    assert ties["float16"][1] == 1.0 and ties["float32"][2] == 1.0
    assert bundled + own > 13_000 and exact >= 9, (bundled, own, exact)


def _yaml(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "cases.yaml"
    p.write_text(text)
    return p


# ---------------------------------------------------------------- an independent float32 kernel

def independent(case: Path, m: dict, order, centred: bool = True) -> dict[str, np.ndarray]:
    """The doc's centred formula in numpy float32: sumDy = order(dy), sumDyXmu = order(fl(dy fl(x - mean))),
    gradWeight = fl(sumDyXmu invstd); per channel (C,). centred=False: sumDyXmu = fl(order(fl(dy x)) - fl(mean
    sumDy)), whose IEEE values at inf and NaN are the golden's (an infinite dy beside mean = 0 gives NaN there)."""
    f = np.float32
    dy, x, mean, inv = (a.astype(f) for a in channels(case, m))
    with np.errstate(all="ignore"):
        s = order(dy)
        xmu = order(dy * (x - mean[:, None])) if centred else order(dy * x) - mean * s
        return {SDY: s, SDXM: xmu, GW: xmu * inv, GB: s}


def write_independent(work: Path, order, centred: bool = True) -> int:
    wrote = 0
    for case, m in positive_cases(work):
        for name, values in independent(case, m, order, centred).items():
            t = harness.tensors(m)[name]
            if not t.get("null"):
                (case / t["dump"]).unlink()
                write_dump(case, t, values)
        wrote += 1
    return wrote


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path, order):
    """The doc's formulas in numpy float32 (centred terms: no cancellation between two sums), each channel summed in
    `order`, written as the dumps of every positive bundled case: verify passes them all."""
    work = linked_copy(suite, tmp_path / "independent")
    assert write_independent(work, ORDERS[order]) >= 55
    bad = not_passing(work, tmp_path / "v.json")
    assert not bad, bad


# ---------------------------------------------------------------- the kernel, its defects and legitimate variants

def test_kernel_subtracts_two_float32_sums():
    """The device sums dy and fl(dy x) and subtracts fl(mean sumDy) (the DAG's Sub after two ReduceSumOps): with x =
    2^24 + 2 and 2^24, dy = 1, mean = 2^24, sum(dy x) = 2^25 + 2 rounds to 2^25 (a tie, to even) and sumDyXmu is 0,
    where the exact value is 2; the allowance holds that error."""
    x = np.array([16777218.0, 16777216.0], np.float32).reshape(1, 2, 1)
    t = {"gradOut": np.ones((1, 2, 1), np.float32), "input": x, "mean": np.full((1, 1, 1), 16777216.0, np.float32),
         "invstd": np.full((1, 1, 1), 0.5, np.float32), "sampleCount": 2, "inputG": True, "weightG": True,
         "biasG": True}
    out = SPEC.kernel(t)
    assert out[SDXM].reshape(-1)[0] == 0.0 and out[GW].reshape(-1)[0] == 0.0 and out[SDY].reshape(-1)[0] == 2.0
    ref = SPEC.reference({k: v.astype(np.float64) if isinstance(v, np.ndarray) else v for k, v in t.items()})
    assert ref[SDXM].value.reshape(-1)[0] == 2.0 and 2.0 <= ref[SDXM].allowance.reshape(-1)[0] < 64.0
    assert 1.0 <= ref[GW].allowance.reshape(-1)[0] < 32.0


# defect -> the bundled cases where it must fail (every dtype). A 16-bit accumulator stalls on one_sign's 16,384
# terms of one sign; the first-sample defect shows where N > 1.
DEFECTS = {
    "syncbn-reduce-mean-ignored": ("nchw", "mean_far_from_zero"),
    "syncbn-reduce-mean-term-sign": ("nchw", "mean_far_from_zero"),
    "syncbn-reduce-without-invstd": ("nchw", "weight_grad_only"),
    "syncbn-reduce-with-weight": ("nchw", "w_equals_c"),
    "syncbn-reduce-stats-swapped": ("nchw", "eight_dims"),
    "syncbn-reduce-first-sample": ("nchw", "nc_2d", "bias_grad_only"),
    "syncbn-reduce-lost-core-partial": ("nc_2d", "one_sign"),
    "syncbn-reduce-fp16-accumulation": ("one_sign",),
    "syncbn-reduce-bf16-accumulation": ("one_sign",),
}
LEGITIMATE = ("syncbn-reduce-centred", "syncbn-reduce-sample-major", "syncbn-reduce-sequential")


def check_variant(suite: Path, tmp_path: Path, variant: str, defects: dict) -> None:
    """A defect fails verify on every case (each dtype) of the bundled names `defects` lists for it (where it changes
    the result); a legitimate variant passes every bundled case."""
    if variant in defects:
        status = _statuses(suite, tmp_path, variant, defects[variant])
        assert len(status) == 3 * len(defects[variant]) and set(status.values()) == {"FAIL"}, status
        return
    status = _statuses(suite, tmp_path, variant)
    assert len(status) == len(list(suite.glob("*/case.json"))) and set(status.values()) == {"PASS"}, \
        {k: v for k, v in status.items() if v != "PASS"}


@pytest.mark.parametrize("variant", [*sorted(DEFECTS), *LEGITIMATE])
def test_defects_fail_where_they_show_and_legitimate_variants_pass(suite, tmp_path, variant):
    """The defects where they change the result; centred terms (the doc's formula) and other summation orders
    everywhere."""
    check_variant(suite, tmp_path, variant, DEFECTS)


# ---------------------------------------------------------------- ops-nn's own suites

ATK_SAMPLE = "*-atk_aclnnBatchNormReduceBackward-*7"  # (21 of its 210 cases: every id ending in 7)
TTK_SAMPLE = tuple(f"*_reduce_fuzz_{n}" for n in (3, 31, 38, 42, 54, 72, 97, 109, 123, 147, 152, 163, 177, 185))


def test_ops_nn_suites_import_whole_and_a_sample_passes(tmp_path):
    """Every case of both files imports (nothing skipped: 210 ATK, 99 TTK); a sample of each (ATK's [-10, 10] fp16
    and fp32 cases; TTK's special values, float16's +-65,500 and the dtypes' largest values, NaN and inf
    throughout) has the oracle's goldens, passes on the emulated kernel and on the independent one (in the device's
    uncentred order, whose IEEE values the golden takes: the special values meet an infinite dy beside mean 0)."""
    assert imported(ATK) == (210, 0) and imported(TTK) == (99, 0)
    out = tmp_path / "out"
    picks = [a for n in (ATK_SAMPLE, *TTK_SAMPLE) for a in ("--case", n)]
    assert run_cli("gen", ATK, TTK, "-o", out, *picks).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    assert len(list(out.glob("*/case.json"))) == 21 + len(TTK_SAMPLE)
    assert not not_passing(out, tmp_path / "v.json")
    compared, _ = assert_goldens_are_the_oracle(out)
    assert compared > 2_000
    assert write_independent(out, ORDERS["pairwise"], centred=False) == 21 + len(TTK_SAMPLE)
    assert not not_passing(out, tmp_path / "independent.json")
