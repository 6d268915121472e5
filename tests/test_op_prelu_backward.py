"""aclnnPreluBackward: goldens against an oracle that shares nothing with the op or the channels family, an independent
float32 kernel summing in several orders, the defects caught where they show, ops-nn's ATK suite whole.

The oracle and the independent kernel read the generated case directories through the manifest's numbers alone
(tests/harness.py), and take the doc's formulas (activation/p_relu_grad_update/docs/aclnnPreluBackward.md): gradInput =
gradOutput where self > 0, else weight * gradOutput; gradWeight[c] = sum over self <= 0 of gradOutput * self, c
self's axis 1 (weight flat [C], read along axis 1 whatever its shape), or over all of self for one weight (and for a
self of fewer than 2 dims). The oracle sums exactly (dyadic integers, as Fractions); a NaN or an infinity in a sum
follows IEEE.

ops-nn's ATK file (tests/ops_nn_suites/atk_aclnnPreluBackward.json, unmodified, from hicann/ops-nn e5c3fa93
activation/p_relu_grad_update/tests/st/aclnnPreluBackward/atk_aclnnPreluBackward.json): 11 cases, inputs named x and a
(the op's aliases), five of them NaN or infinite throughout one input.
"""

from __future__ import annotations

import math
from exactq import Fraction, RATIONAL
from pathlib import Path

import numpy as np
import pytest

import harness
from aclnn_cli.ops.channels.prelu_backward import SPEC
from aclnn_cli.tensor import dtypes as D
from helpers import run_cli, verify_records
from oracle import rounded_bits
from rowblocks import bundled_emulated, not_passing, write_dump
from shared import cases_of, linked_copy

GI, GW = "gradInput", "gradWeight"
ATK = Path(__file__).parent / "ops_nn_suites" / "atk_aclnnPreluBackward.json"


def logical(case: Path, m: dict, name: str) -> np.ndarray:
    t = harness.tensors(m)[name]
    return harness.view(harness.storage(case, t), t).astype(np.float64)


def channels(case: Path, m: dict):
    """(dy, x, weight) as (C, M) rows of each channel's elements and (C, 1) weights, read by the doc: axis 1 of self,
    or one row of everything for one weight (or self under 2 dims); and a function putting (C, M) rows back in
    self's shape."""
    x, dy, w = (logical(case, m, n) for n in ("self", "gradOutput", "weight"))
    shape = x.shape
    if w.size == 1 or x.ndim < 2:
        rows = lambda a: a.reshape(1, -1)  # noqa: E731
        back = lambda a: a.reshape(shape)  # noqa: E731
    else:
        m = math.prod(shape) // shape[1] if shape[1] else 0  # (C = 0, the empty case: no row, reshape cannot infer)
        rows = lambda a: np.moveaxis(a, 1, 0).reshape(shape[1], m)  # noqa: E731
        back = lambda a: np.moveaxis(a.reshape((shape[1], shape[0], *shape[2:])), 0, 1)  # noqa: E731
    return rows(dy), rows(x), w.reshape(-1, 1), back


def exact_sum(terms) -> Fraction | float:
    """The exact sum of float64 terms (each exact): dyadic integers over a common power of two; IEEE where a term
    is NaN or infinite."""
    values = np.asarray(terms, dtype=np.float64).reshape(-1)
    if not np.isfinite(values).all():
        terms = values.tolist()
        return math.fsum(terms) if not any(math.isnan(v) for v in terms) and len({v for v in terms if math.isinf(v)}) < 2 \
            else float("nan")
    if not values.size:
        return Fraction(0)
    # each term m 2^e with m a 53-bit integer (frexp), split into 26-bit halves so that no int64 sum of one exponent's
    # terms can overflow; those sums, shifted to the smallest exponent, added as Python integers
    m, e = np.frexp(values)
    m, e = (m * 2.0**53).astype(np.int64), e.astype(np.int64) - 53
    order = np.argsort(e, kind="stable")
    m, e = m[order], e[order]
    starts = np.flatnonzero(np.r_[True, e[1:] != e[:-1]])
    high, low = np.add.reduceat(m >> 26, starts), np.add.reduceat(m & ((1 << 26) - 1), starts)
    least = int(e[0])
    total = sum(((int(h) << 26) + int(lo)) << (int(e[s]) - least) for h, lo, s in zip(high, low, starts))
    return Fraction(total, 1 << -least) if least < 0 else Fraction(total << least)


def oracle(case: Path, m: dict) -> dict[str, list | np.ndarray]:
    """Both outputs' exact values in logical order: gradInput's products as float64 (each exact: two values of at
    most 24 bits), gradWeight's sums as Fractions (IEEE floats where an input is not finite)."""
    dy, x, w, back = channels(case, m)
    with np.errstate(invalid="ignore"):
        weight_branch = ~(x > 0)
        gi = back(np.where(weight_branch, w * dy, dy))  # (a product of two 24-bit values: exact in float64)
        terms = np.where(weight_branch, dy * x, 0.0)
    return {GI: gi.reshape(-1), GW: [exact_sum(row) for row in terms]}


def out_dtype(dtype):
    return np.uint32 if dtype.name == "float32" else np.uint16


def bits_of(values, dtype) -> np.ndarray:
    """Each value rounded once to dtype: float64 values by NumPy's cast (to nearest even, correctly rounded from a
    value bfloat16's float32 step holds exactly: a product of two 16-bit values), Fractions through the oracle's
    rounding, NaN and infinities as they are."""
    if isinstance(values, np.ndarray):
        with np.errstate(over="ignore"):
            return values.astype(dtype.np_dtype).view(out_dtype(dtype))
    out = np.empty(len(values), out_dtype(dtype))
    finite = [i for i, v in enumerate(values) if isinstance(v, RATIONAL)]
    out[finite] = rounded_bits([values[i] for i in finite], dtype) if finite else out[finite]
    for i, v in enumerate(values):
        if not isinstance(v, RATIONAL):
            out[i] = np.asarray(D.round_from_f32(np.asarray([v], np.float32), dtype, "rint")).view(out.dtype)[0]
    return out


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced) -> Path:
    """The bundled file generated and emulated: the session's cases (rowblocks.bundled_emulated)."""
    return bundled_emulated(tmp_path_factory, bundled_produced, "prelu_backward")


def positive_cases(out: Path):
    for case in sorted(p.parent for p in out.glob("*/case.json")):
        m = harness.load(case)
        if m["expect_status"] == 0:
            yield case, m


def test_goldens_equal_the_oracle_rounded_once(suite):
    """Every golden of every positive bundled case is the oracle's value rounded once, bit for bit (NaN as NaN), a
    channel of 262,144 terms and a one-weight sum of 65,536 among them."""
    largest, compared = 0, 0
    for case, m in positive_cases(suite):
        want = oracle(case, m)
        for name, values in want.items():
            t = harness.tensors(m)[name]
            dtype = D.lookup(t["dtype"])
            got = harness.view(harness.storage(case, t, "golden"), t).reshape(-1).view(dtype.uint_dtype)
            expect = bits_of(values, dtype).astype(dtype.uint_dtype)
            nan = np.isnan(harness.view(harness.storage(case, t, "golden"), t).reshape(-1).astype(np.float64))
            want_nan = np.isnan(values) if isinstance(values, np.ndarray) else \
                np.array([isinstance(v, float) and math.isnan(v) for v in values])
            assert np.array_equal(nan, want_nan), case.name
            assert np.array_equal(got[~nan], expect[~nan]), (case.name, name)
            compared += got.size
        x = harness.tensors(m)["self"]["shape"]
        largest = max(largest, math.prod(x) // max(len(want[GW]), 1))
    assert compared > 2_000_000 and largest >= 262_144, (compared, largest)


# ---------------------------------------------------------------- an independent float32 kernel

def _sequential(rows):
    return np.cumsum(rows, axis=1, dtype=np.float32)[:, -1] if rows.shape[1] else np.zeros(len(rows), np.float32)


ORDERS = {
    "sequential": _sequential,
    "reversed": lambda rows: _sequential(rows[:, ::-1]),
    "pairwise": lambda rows: rows.sum(axis=1, dtype=np.float32),  # (numpy's blocked pairwise sum)
    "shuffled-partials": lambda rows: np.array(
        [np.float32(sum(np.random.default_rng(7).permutation([np.float32(p.sum(dtype=np.float32))
                                                              for p in np.array_split(r, 48)]), np.float32(0)))
         for r in rows], np.float32),
}


def independent(case: Path, m: dict, order) -> dict[str, np.ndarray]:
    """The doc's formulas in float32 (products in float32, the channel sums in `order`), in logical order."""
    f = np.float32
    dy, x, w, back = channels(case, m)
    dy, x, w = dy.astype(f), x.astype(f), w.astype(f)
    with np.errstate(all="ignore"):
        weight_branch = ~(x > 0)
        gi = back(np.where(weight_branch, w * dy, dy))
        terms = np.where(weight_branch, dy * x, f(0))
        return {GI: gi, GW: order(terms)}


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path, order):
    """The doc's formulas in numpy float32, summing each channel in `order`, written as the dumps of every positive
    bundled case: verify passes them all (no false alarm on a correct kernel in another order)."""
    work = linked_copy(suite, tmp_path / "independent")
    wrote = 0
    for case, m in positive_cases(work):
        for name, values in independent(case, m, ORDERS[order]).items():
            (case / harness.tensors(m)[name]["dump"]).unlink()
            write_dump(case, harness.tensors(m)[name], values)
        wrote += 1
    assert wrote >= 60
    bad = not_passing(work, tmp_path / "v.json")
    assert not bad, bad


# ---------------------------------------------------------------- the kernel, its defects and legitimate variants

def test_kernel_rounds_each_weight_grad_term_to_the_dtype():
    """The 950 multiplies self * dy in T (prelu_grad_update_dag.h:104): in float16 each term is rounded to 11 bits
    before the float32 sum; -0 and NaN take the weight branch (Compare GT)."""
    x = np.array([-1.0009765625, -1.0009765625, -0.0, np.nan, 2.0], np.float32).reshape(1, 5, 1)
    dy = np.array([1.0009765625, 1.0009765625, 3.0, 1.0, 5.0], np.float32).reshape(1, 5, 1)
    block = {"gradOutput": dy, "self": x, "weight": np.full((1, 1, 1), 0.5, np.float32), "sampleCount": 1}
    term = np.float32(np.float16(-1.0009765625 * 1.0009765625))
    out16 = SPEC.kernel({**block, "self": x[:, :3], "gradOutput": dy[:, :3], "inputBits": np.full((1, 1, 1), 11)})
    assert out16[GW].reshape(-1)[0] == term + term and term != np.float32(-1.0009765625 * 1.0009765625)
    out32 = SPEC.kernel(block)
    gi = out32[GI].reshape(-1)
    assert np.isnan(out32[GW].reshape(-1)[0]) and gi[2] == 1.5 and gi[3] == 0.5 and gi[4] == 5.0


def case_ids(out: Path, names) -> list[str]:
    """The case directories of bundled cases `names`: a name, or name-dtype for one dtype of it."""
    return [d.name for d in sorted(out.iterdir()) if d.is_dir() and
            (d.name.split("-")[1] in names or "-".join(d.name.split("-")[1:3]) in names)]


# defect -> the bundled cases where it must fail (a name: in every dtype). A float16 accumulator on 65,536 zero-mean
# terms stands about 0.5% from the sum: inside a bfloat16 result's own resolution (2^-8) and its terms' rounding to
# bfloat16 (the 950's Mul in T), so it fails there only on terms of one sign (many_per_channel: 124x the limit).
DEFECTS = {
    "prelu-zero-as-positive": ("zeros_in_self", "negative_zero"),
    "prelu-swapped-branches": ("nchw", "eight_dims", "one_weight"),
    "prelu-weight-of-first-channel": ("nchw", "w_equals_c", "weight_same_rank"),
    "prelu-weight-grad-unmasked": ("nchw", "all_positive", "one_weight_large"),
    "prelu-weight-grad-positive-side": ("nchw", "all_negative", "signed_sums"),
    "prelu-weight-grad-first-sample": ("nchw", "nc_2d", "signed_sums"),
    "prelu-mask-multiplied": ("special_values",),
    "prelu-fp16-accumulation": ("many_per_channel", "signed_sums-float16", "signed_sums-float32",
                                "one_weight_large-float16", "one_weight_large-float32"),
    "prelu-bf16-accumulation": ("signed_sums", "many_per_channel", "one_weight_large"),
}
LEGITIMATE = ("prelu-sequential", "prelu-sample-major", "prelu-float32-products")


def _statuses(suite: Path, tmp_path: Path, variant: str, names=None) -> dict[str, str]:
    work = linked_copy(suite, tmp_path / "work", cases=None if names is None else case_ids(suite, names))
    assert run_cli("emulate", work, "--defect", variant, "-j", 1).exit_code == 0
    return {cid: c["status"] for cid, c in verify_records(work, jobs=1)[1].items()}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_each_defect_fails_where_it_shows(suite, tmp_path, defect):
    """A defect fails verify on every case (each dtype) where it changes the result: the mask at self = 0, weight
    not per channel, gradWeight over the wrong elements or axes, a 16-bit accumulator over 65,536 terms or more."""
    status = _statuses(suite, tmp_path, defect, DEFECTS[defect])
    want = sum(1 if "-" in n else 3 for n in DEFECTS[defect])
    assert len(status) == want and set(status.values()) == {"FAIL"}, status


@pytest.mark.parametrize("variant", LEGITIMATE)
def test_legitimate_variants_pass_every_case(suite, tmp_path, variant):
    """Another summation order, and products kept in float32, pass every bundled case."""
    status = _statuses(suite, tmp_path, variant)
    assert len(status) == len(list(suite.glob("*/case.json"))) and set(status.values()) == {"PASS"}, \
        {k: v for k, v in status.items() if v != "PASS"}


# ---------------------------------------------------------------- ops-nn's own suite

def test_ops_nn_atk_suite_imports_whole_and_passes(tmp_path):
    """All 11 cases of ops-nn's ATK file convert (nothing skipped), their goldens are the oracle's, the emulated kernel
    and the independent one (pairwise) pass every case, the NaN and infinite ones included."""
    r = run_cli("convert", ATK, "-o", tmp_path / "yaml")
    assert r.exit_code == 0 and "skipped" not in r.output, r.output
    out = tmp_path / "out"
    for args in (("gen", tmp_path / "yaml", "-o", out), ("emulate", out)):
        assert run_cli(*args).exit_code == 0
    assert len(cases_of(out, [p.name for p in (tmp_path / "yaml").glob("*.yaml")])) == 11
    assert not not_passing(out, tmp_path / "v.json")
    special = 0
    for case, m in positive_cases(out):
        for name, values in oracle(case, m).items():
            t = harness.tensors(m)[name]
            dtype = D.lookup(t["dtype"])
            got = harness.view(harness.storage(case, t, "golden"), t).reshape(-1)
            nan = np.isnan(got.astype(np.float64))
            special += int(nan.any() or np.isinf(got.astype(np.float64)).any())
            assert np.array_equal(got.view(dtype.uint_dtype)[~nan], bits_of(values, dtype)[~nan].astype(dtype.uint_dtype))
        for name, values in independent(case, m, ORDERS["pairwise"]).items():
            (case / harness.tensors(m)[name]["dump"]).unlink()
            write_dump(case, harness.tensors(m)[name], values)
    assert special >= 5
    assert not not_passing(out, tmp_path / "independent.json")
