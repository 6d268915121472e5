"""aclnnRmsNormGrad against an oracle of its own: the doc's formula in Fractions, written here.

  dx_i = (dy_i g_i - (x_i r) Mean) r,  Mean = (1/n) sum_j dy_j g_j x_j r;   dgamma_j = sum over rows of (x_j r) dy_j

(a) the float64 reference is within its bound of the oracle and its scale covers it; the op's `exact` equals it;
(b) the 950 kernel and an independent float32 implementation (PyTorch's decomposition, sequential sums) are within
    the gate's premise, (log2 n + 8) 2^-24 scale; (c) every defect is off by more than fp32's T = 2^-13 of the
    scale somewhere on blocks of the bundled cases' kinds; (d) the contract's rules; (e) the bundled cases through
    gen, emulate and verify, the goldens equal to the oracle rounded once, and each variant through the gate.
"""

from __future__ import annotations

import json
import math
from exactq import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.rows.rms_norm_grad import SPEC, VARIANTS

from helpers import run_cli
from shared import linked_copy
from rowblocks import as_f64, as_fractions, bundled_emulated, passing_bundled_records  # noqa: E402

U32 = 2.0**-24
T_FP32 = 2.0**-13
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
OUTS = ("dxOut", "dgammaOut")


def block(rng, k: int, n: int, dtype: str, kind: str, last: int | None = None) -> dict:
    """k rows of n as the pipeline hands them: dy, x, gamma (k, n, 1) in `dtype` widened to float32 (gamma one row,
    repeated), rstd (k, 1, 1) float32. kinds: normal, positive (terms of one sign), cancel (dy = x, gamma = 1, rstd
    = 1/rms(x): dx ~ 0), wide (rows scaled by 2^-30..2^30, 2^+-10 in float16), negative_rstd."""
    cast = lambda v: np.asarray(v, dtype=np.float32).astype(NP[dtype]).astype(np.float32)
    x = cast(rng.standard_normal((k, n, 1)))
    dy = cast(rng.standard_normal((k, n, 1)))
    gamma = cast(rng.uniform(0.5, 1.5, (1, n, 1)))
    rstd = rng.uniform(0.5, 2.0, (k, 1, 1)).astype(np.float32)
    if kind == "positive":
        x, dy = cast(rng.uniform(0.5, 2, (k, n, 1))), cast(rng.uniform(0.25, 1.5, (k, n, 1)))
    elif kind == "cancel":
        dy, gamma = x.copy(), np.ones((1, n, 1), np.float32)
        rstd = (1 / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 2.0**-40)).astype(np.float32)
    elif kind == "wide":
        span = 10 if dtype == "float16" else 30  # float16 holds 2^-24 .. 65504
        scale = np.exp2(rng.integers(-span, span + 1, (k, 1, 1))).astype(np.float32)
        x, rstd = cast(x * scale), (rstd / scale).astype(np.float32)
    elif kind == "negative_rstd":
        rstd = -rstd
    t = {"dy": dy, "x": x, "gamma": np.broadcast_to(gamma, (k, n, 1)), "rstd": rstd}
    return {**t, "gammaLastDim": last or n}


def oracle(t: dict) -> dict:
    """The doc's formula, row by row in Fractions: {output: list of Fractions in (k, n) / (n,) order}."""
    k, n = t["x"].shape[0], t["x"].shape[1]
    col = lambda name, i: [Fraction(float(v)) for v in t[name][i, :, 0]]
    dx, dg = [], [Fraction(0)] * n
    for i in range(k):
        dy, x, g, r = col("dy", i), col("x", i), col("gamma", i), Fraction(float(t["rstd"][i, 0, 0]))
        mean = sum(dy[j] * g[j] * x[j] * r for j in range(n)) / n
        dx += [(dy[j] * g[j] - (x[j] * r) * mean) * r for j in range(n)]
        dg = [dg[j] + (x[j] * r) * dy[j] for j in range(n)]
    return {"dxOut": dx, "dgammaOut": dg}


def oracle_blocks(dtype: str) -> list[dict]:
    """About 2,000 rows per dtype: short and longer rows of every kind (a third of them cancelling)."""
    rng = np.random.default_rng({"float32": 11, "float16": 12, "bfloat16": 13}[dtype])
    plan = [(1, 60), (2, 60), (7, 150), (16, 150), (64, 40), (300, 8)]
    kinds = ("normal", "positive", "cancel", "wide", "negative_rstd")
    return [block(rng, k, n, dtype, kind) for n, k in plan for kind in kinds]


@pytest.fixture(scope="module", params=["float32", "float16", "bfloat16"])
def checked(request) -> list[tuple[dict, dict]]:
    return [(t, oracle(t)) for t in oracle_blocks(request.param)]


def test_reference_and_exact_against_the_oracle(checked):
    for t, o in checked:
        ref = SPEC.reference(as_f64(t))
        ex = SPEC.exact(as_fractions(t))
        for name in OUTS:
            want = np.array([float(q) for q in o[name]])
            r = ref[name]
            err = np.array([abs(Fraction(v) - q) for v, q in zip(r.value.reshape(-1), o[name])], dtype=object)
            assert all(e <= Fraction(b) for e, b in zip(err, r.bound.reshape(-1))), (name, t["x"].shape)
            assert (np.abs(want) <= r.scale.reshape(-1)).all(), (name, t["x"].shape)
            assert list(ex[name].reshape(-1)) == o[name], (name, t["x"].shape)


def test_exact_takes_any_columns_for_the_across_rows_pass():
    """gen's exact pass for dgamma hands a few columns of every row, (k, columns, 1): dgamma's columns are the oracle's."""
    t = block(np.random.default_rng(5), 6, 9, "float32", "normal")
    cols = [1, 4, 8]
    sub = {k: v[:, cols] if isinstance(v, np.ndarray) and v.shape[1] == 9 else v for k, v in t.items()}
    got = SPEC.exact(as_fractions(sub))["dgammaOut"].reshape(-1)
    assert list(got) == [oracle(t)["dgammaOut"][c] for c in cols]


def premise_excess(result: dict, t: dict, o: dict) -> float:
    """The largest |result - exact| in units of (log2 n + 8) 2^-24 scale (<= 1 is within the gate's premise)."""
    ref = SPEC.reference(as_f64(t))
    worst = 0.0
    for name, count in (("dxOut", t["x"].shape[1]), ("dgammaOut", t["x"].shape[0])):
        got = np.asarray(result[name], dtype=np.float64).reshape(-1)
        err = np.array([float(abs(Fraction(g) - q)) for g, q in zip(got, o[name])])
        allowed = (math.log2(max(count, 1)) + 8) * U32 * ref[name].scale.reshape(-1)
        worst = max(worst, float((err / allowed).max()))
    return worst


def aten_sequential(t: dict) -> dict:
    """PyTorch's float32 decomposition (torch/_decomp/decompositions.py, _fused_rms_norm_backward): x_hat = x * rstd,
    g = dy * weight, total = sum(x_hat * g), dx = (g - (x_hat / N) * total) * rstd, dgamma = sum over rows of
    dy * x_hat; here every sum a float32 running sum in index order."""
    x_hat, g = t["x"] * t["rstd"], t["dy"] * t["gamma"]
    n = np.float32(t["x"].shape[1])
    total = np.cumsum(x_hat * g, axis=1, dtype=np.float32)[:, -1:, :]
    return {"dxOut": (g - (x_hat / n) * total) * t["rstd"],
            "dgammaOut": np.cumsum(t["dy"] * x_hat, axis=0, dtype=np.float32)[-1:]}


def test_kernel_and_an_independent_float32_implementation_within_the_premise(checked):
    worst_kernel = max(premise_excess(SPEC.kernel(t), t, o) for t, o in checked)
    worst_aten = max(premise_excess(aten_sequential(t), t, o) for t, o in checked)
    assert worst_kernel <= 1 and worst_aten <= 1, (worst_kernel, worst_aten)
    assert worst_kernel > 0.01  # the check can fail: the kernel's rounding is visible in these units


def test_kernel_follows_the_source_order():
    """One row by hand: a = dy g, b = x r, s = fl(a b) summed, negMean = fl(s * -fl(1/3)), dx = fl(fl(a + fl(b negMean)) r)."""
    f = np.float32
    t = {"dy": np.array([[[1.5], [-2.0], [0.25]]], f), "x": np.array([[[0.1], [3.0], [-1.0]]], f),
         "gamma": np.array([[[2.0], [0.5], [1.0]]], f), "rstd": np.array([[[0.7]]], f), "gammaLastDim": 3}
    a, b = t["dy"][0, :, 0] * t["gamma"][0, :, 0], t["x"][0, :, 0] * f(0.7)
    p = a * b
    s = (p[0] + p[1]) + p[2]  # 64-lane padding with +0: pairwise over lanes 0..2 is (p0 + p1) + p2
    neg_mean = s * -(f(1) / f(3))
    want = (a + b * neg_mean) * f(0.7)
    got = SPEC.kernel(t)
    assert np.array_equal(got["dxOut"][0, :, 0], want)
    assert np.array_equal(got["dgammaOut"][0, :, 0], t["dy"][0, :, 0] * b)


# (c) the defects against the gate, on blocks of the bundled cases' kinds.
def visible_kinds() -> list[dict]:
    rng = np.random.default_rng(7)
    two_axes = block(rng, 2, 120, "float32", "normal", last=40)
    return [block(rng, 9, 7, "float32", "normal"), block(rng, 7, 33, "float32", "normal"),
            block(rng, 8, 4096, "float32", "positive"), block(rng, 4096, 64, "float32", "positive"), two_axes]


@pytest.fixture(scope="module")
def kinds() -> list[tuple[dict, dict]]:
    return [(t, SPEC.reference(as_f64(t))) for t in visible_kinds()]


def gate_excess(result: dict, ref: dict) -> float:
    """The largest |result - exact| / (2^-13 scale) over both outputs, exact bounded by the reference."""
    worst = 0.0
    for name in OUTS:
        r = ref[name]
        got = np.asarray(result[name], dtype=np.float64)
        lower = np.abs(got - r.value) - r.bound
        lower = np.where(np.isnan(got), np.inf, lower)
        worst = max(worst, float((lower / (T_FP32 * r.scale)).max()))
    return worst


DEFECTS = sorted(n for n, f in VARIANTS.items() if f.variant_kind == "defect")
LEGIT = sorted(n for n, f in VARIANTS.items() if f.variant_kind == "legitimate")


@pytest.mark.parametrize("name", DEFECTS)
def test_each_defect_is_visible_to_the_gate(kinds, name):
    assert max(gate_excess(VARIANTS[name](t), ref) for t, ref in kinds) > 1


@pytest.mark.parametrize("name", LEGIT + ["kernel"])
def test_legitimate_variants_stay_far_under_the_gate(kinds, name):
    fn = SPEC.kernel if name == "kernel" else VARIANTS[name]
    assert max(gate_excess(fn(t), ref) for t, ref in kinds) < 0.05


def test_the_catalogue_covers_the_issue():
    """A flipped and a missing term, the wrong axis, 16-bit accumulation, a wrong divisor, a dropped element."""
    for word in ("sign-flip", "no-mean-term", "sum-down-columns", "fp16-accumulation", "bf16-accumulation",
                 "padded-divisor", "drop-last-element"):
        assert any(word in n for n in DEFECTS), word
    assert len(LEGIT) >= 2


def test_rstd_zero_and_nan_rows():
    t = block(np.random.default_rng(3), 3, 5, "float32", "normal")
    t["rstd"] = np.array([[[0.0]], [[1.0]], [[1.0]]], np.float32)
    t["x"] = t["x"].copy()
    t["x"][2, 1, 0] = np.nan
    out = SPEC.kernel(t)
    assert np.array_equal(out["dxOut"][0], np.zeros((5, 1))) and np.isnan(out["dxOut"][2]).all()
    assert np.isfinite(out["dxOut"][1]).all()
    dg = out["dgammaOut"][0, :, 0]
    assert np.isnan(dg[1]) and np.isfinite(np.delete(dg, 1)).all()


def test_edge_where_a_float32_intermediate_overflows():
    """dy g = 2^100 * 2^100 overflows float32 while the exact dx of the row is finite (r = 2^-120)."""
    f = np.float32
    t = {"dy": np.array([[[2.0**100], [1.0]]], f), "x": np.array([[[1.0], [1.0]]], f),
         "gamma": np.array([[[2.0**100], [1.0]]], f), "rstd": np.array([[[2.0**-120]]], f), "gammaLastDim": 2}
    where, device = SPEC.edge(as_f64(t))["dxOut"]
    ref = SPEC.reference(as_f64(t))["dxOut"]
    assert where.all() and np.isfinite(ref.value).all() and not np.isfinite(device).all()


# (d) the contract.
def desc(dtype="float16", shape=(5, 7), null=False) -> TensorDesc:
    return TensorDesc(D.lookup(dtype), tuple(shape), null)


def call(dtype="float16", xs=(5, 7), gs=(7,), rs=(5,), product="950", **changes):
    d = {"dy": desc(dtype, xs), "x": desc(dtype, xs), "rstd": desc("float32", rs), "gamma": desc(dtype, gs),
         "dxOut": desc(dtype, xs), "dgammaOut": desc("float32", gs)}
    d.update(changes)
    return check(SPEC, product, d, {})


@pytest.mark.parametrize("kwargs, status, words", [
    ({}, SUCCESS, ""),
    ({"gamma": desc("float32", (7,))}, SUCCESS, ""),
    ({"dtype": "bfloat16", "gamma": desc("float32", (7,))}, SUCCESS, ""),
    ({"xs": (64,), "gs": (64,), "rs": ()}, SUCCESS, ""),
    ({"xs": (2, 3, 4), "gs": (3, 4), "rs": (2, 1, 1)}, SUCCESS, ""),
    ({"xs": (2, 1, 4), "gs": (4,), "rs": (2,)}, SUCCESS, ""),
    ({"xs": (0, 8), "gs": (8,), "rs": (0,)}, SUCCESS, ""),
    ({"dy": desc(null=True)}, NULLPTR, "dy is a null pointer"),
    ({"dgammaOut": desc("float32", (7,), null=True)}, NULLPTR, "dgammaOut"),
    ({"dtype": "bfloat16", "product": "310P"}, INVALID, "not supported on 310P"),
    ({"dy": desc("float32")}, INVALID, "dy dtype float32 differs"),
    ({"dxOut": desc("float32")}, INVALID, "dxOut dtype"),
    ({"gamma": desc("bfloat16", (7,))}, INVALID, "neither float32 nor x's"),
    ({"rstd": desc("float16", (5,))}, INVALID, "rstd dtype float16 is not"),
    ({"dgammaOut": desc("float16", (7,))}, INVALID, "dgammaOut dtype"),
    ({"xs": (5, 7), "gs": (5, 5, 7), "rs": ()}, INVALID, "gamma has 3 dims"),
    ({"dy": desc(shape=(5, 8))}, INVALID, "shapes must be identical"),
    ({"dxOut": desc(shape=(1, 5, 7))}, INVALID, "dxOut has 3 dims; it must have x's 2"),
    ({"xs": (5, 0), "gs": (0,)}, INVALID, "last axis of dy is empty"),
    ({"rs": (4,)}, INVALID, "rstd shape [4] does not start with"),
    ({"rs": (5, 2)}, INVALID, "rstd has 10 elements; x has 5 rows"),
    ({"xs": (2, 3, 4), "gs": (4,), "rs": (2,)}, INVALID, "past rstd's 1 must be 1"),
    ({"gamma": desc(shape=(8,))}, INVALID, "gamma shape [8] is not x's last 1 dims"),
    ({"dgammaOut": desc("float32", (1, 7))}, INVALID, "dgammaOut has 2 dims; it must have gamma's 1"),
])
def test_contract_rules(kwargs, status, words):
    outcome = call(**kwargs)
    assert outcome.status == status and words in outcome.rule, outcome


# (e) the bundled cases through the whole loop.


def cli(*args):
    jobs = ("-j", "1") if args[0] in ("emulate", "verify") else ()
    return run_cli(*args, *jobs)


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced) -> Path:
    return bundled_emulated(tmp_path_factory, bundled_produced, "rms_norm_grad")


def test_bundled_cases_pass_with_the_950_kernel(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "rms_norm_grad")
    contract = sum(c["kind"] == "contract" for c in cases)
    assert len(cases) - contract >= 70 and contract >= 9


def rounded_once(q: Fraction, dtype: str) -> float:
    """q rounded to nearest (ties to even) in dtype, by comparing the exact q with the neighbours of a guess."""
    np_dtype = D.lookup(dtype).np_dtype
    uint = {4: np.uint32, 2: np.uint16}[np.dtype(np_dtype).itemsize]
    sign, a = (-1 if q < 0 else 1), abs(q)
    bits = int(np.array(float(a), np.float64).astype(np.float32).astype(np_dtype).view(uint))
    cands = [b for b in (bits - 1, bits, bits + 1) if b >= 0]
    value = lambda b: Fraction(float(np.array(b, uint).view(np_dtype).astype(np.float64)))
    best = min(cands, key=lambda b: (abs(value(b) - a), b & 1))
    return sign * float(value(best))


def test_rounded_once_is_correct_rounding():
    """The goldens check's rounding against numpy's one rounding (float64 -> float32; float32 -> float16, bfloat16)."""
    rng = np.random.default_rng(9)
    doubles = rng.standard_normal(2000) * np.exp2(rng.integers(-140, 120, 2000))
    assert [rounded_once(Fraction(float(v)), "float32") for v in doubles] == list(doubles.astype(np.float32).astype(float))
    floats = (rng.standard_normal(2000) * np.exp2(rng.integers(-20, 15, 2000))).astype(np.float32)
    for dtype in ("float16", "bfloat16"):
        want = floats.astype(NP[dtype]).astype(np.float64)
        assert [rounded_once(Fraction(float(v)), dtype) for v in floats] == list(want), dtype


def logical(case: Path, t: dict, key: str) -> np.ndarray:
    storage = np.fromfile(case / t[key], dtype=D.lookup(t["dtype"]).np_dtype)
    return np.lib.stride_tricks.as_strided(storage[t["offset"]:], t["shape"],
                                           [s * storage.itemsize for s in t["strides"]]).astype(np.float64)


def test_bundled_goldens_are_the_oracle_rounded_once(suite):
    """Every small finite case: both goldens are the oracle's exact values rounded once to their dtype."""
    checked = 0
    for case in sorted(suite.iterdir()):
        m = json.loads((case / "case.json").read_text())
        ts = {t["name"]: t for t in m["tensors"]}
        xs, gs = ts["x"]["shape"], ts["gamma"]["shape"]
        if m["expect_status"] != 0 or math.prod(xs) > 5000 or 0 in xs:
            continue
        n = math.prod(gs)
        rows = math.prod(xs) // n
        t = {name: logical(case, ts[name], "file").reshape(rows, n, 1) for name in ("dy", "x")}
        t["gamma"] = np.broadcast_to(logical(case, ts["gamma"], "file").reshape(1, n, 1), (rows, n, 1))
        t["rstd"] = logical(case, ts["rstd"], "file").reshape(rows, 1, 1)
        if not all(np.isfinite(v).all() for v in t.values()):
            continue
        o = oracle(t)
        for name in OUTS:
            gold = logical(case, ts[name], "golden").reshape(-1)
            assert np.array_equal(gold, [rounded_once(q, ts[name]["dtype"]) for q in o[name]]), (case.name, name)
        checked += 1
    assert checked >= 40


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants_through_verify(suite, tmp_path, name):
    """Each defect fails verify (exit 1) in every dtype; each legitimate variant passes (exit 0)."""
    copy = linked_copy(suite, tmp_path / "out")  # (emulate and verify replace what they write)
    assert cli("emulate", copy, "--defect", name).exit_code == 0
    r = cli("verify", copy)
    if VARIANTS[name].variant_kind == "legitimate":
        assert r.exit_code == 0, r.output[-3000:]
        return
    assert r.exit_code == 1, r.output[-3000:]
    ids = [line.split()[1] for line in r.output.splitlines() if line.startswith("FAIL ")]
    failed = {part for case_id in ids for part in case_id.split("-") if part in NP}
    if name != "rms-last-axis-only":  # only the multi-axis gamma cases can show it
        assert {"float32", "float16", "bfloat16"} <= failed, failed
