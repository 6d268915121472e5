"""aclnnLayerNormGrad (the graph op LayerNormGrad's generated API: variance in, rstd = 1 / sqrt(variance + eps) by
the kernel): goldens against an oracle of our own, the kernel's Newton rsqrt, an independent float32 formulation,
each defect visible to the gate, the contract, the bundled cases and ops-nn's own TTK suite.

The oracle is aclnnLayerNormBackward's (ATen's algebra in Fractions, tests/test_op_layer_norm_backward.py) with each
row's rstd from mpmath at 256 bits (1 / sqrt(variance + eps), eps = fl32(1e-12) for float32 x, fl32(1e-5) else):
no expression of the op's reference or exact (the doc's order, rstd to 60 decimal digits) is shared.

tests/ops_nn_suites/ttk_kernel_layer_norm_grad_st.csv is norm/layer_norm_grad/tests/st/arch35/ (ops-nn e5c3fa93):
99 cases, every one imports; those of up to QUICK elements run here, the rest in scripts/catalogue.py's run.
"""

from __future__ import annotations

import math
from exactq import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.rows.layer_norm_grad import SPEC, VARIANTS, newton_rstd
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS

import test_op_layer_norm_backward as LBT
from helpers import read_yaml, run_cli
from rowblocks import as_f64, as_fractions, bundled_emulated, not_passing

PDX, PDG, PDB = "pd_x", "pd_gamma", "pd_beta"
OUTS = (PDX, PDG, PDB)
LB_NAMES = {"dy": "gradOut", "x": "input", "mean": "mean", "gamma": "weightOptional"}
TO_LB = {PDX: LBT.GI, PDG: LBT.GW, PDB: LBT.GB}
DTYPES = ("float32", "float16", "bfloat16")
T32 = 2.0**-13
TTK = Path(__file__).parent / "ops_nn_suites" / "ttk_kernel_layer_norm_grad_st.csv"
QUICK = 12_000


def eps_of(dtype: str) -> float:
    return float(np.float32(1e-12 if dtype == "float32" else 1e-5))


def block(rng, k: int, r: int, dtype: str, kind: str = "random") -> dict:
    """k rows of length r as the pipeline hands them, with this op's names; kind "tiny": variances around eps and
    x within a few sqrt(variance + eps) of a zero mean (eps decides the result)."""
    lb = LBT.block(rng, k, r, dtype, "random" if kind == "tiny" else kind)
    t = {ours: lb[theirs] for ours, theirs in LB_NAMES.items()}
    var = rng.uniform(0.25, 4.0, (k, 1, 1))
    if kind == "tiny":
        e = eps_of(dtype)
        var = rng.uniform(0, 4 * e, (k, 1, 1)) * (rng.uniform(size=(k, 1, 1)) < 0.8)
        spread = np.sqrt(var + e)
        t["mean"] = np.zeros((k, 1, 1), np.float32)  # (x uncentred by a mean 1e5 spreads away is ATen's own trap)
        t["x"] = LBT.rounded(rng.normal(size=(k, r, 1)) * spread, dtype)
    t["variance"] = np.asarray(var, np.float64).astype(np.float32)
    t["mean"] = t["mean"].astype(np.float32)
    t["epsilon"] = eps_of(dtype)
    return t


def oracle_rstd(var, eps: float) -> list[Fraction]:
    """1 / sqrt(variance + eps) per row at 256 bits, as exact Fractions of those binary values."""
    out = []
    with mpmath.workprec(256):
        for v in np.asarray(var, np.float64).reshape(-1):
            m, e = mpmath.mpf(1) / mpmath.sqrt(mpmath.mpf(float(v)) + mpmath.mpf(eps)), None
            man, exp = m.man_exp
            out.append(Fraction(man) * (Fraction(2) ** exp))
    return out


def oracle(t: dict) -> dict:
    lb = {theirs: t[ours] for ours, theirs in LB_NAMES.items()}
    o = LBT.oracle(lb, rstd=oracle_rstd(t["variance"], t["epsilon"]))
    return {ours: o[theirs] for ours, theirs in TO_LB.items()}


def flat(o: dict, name: str) -> list:
    return [v for row in o[name] for v in row] if name == PDX else list(o[name])


def oracle_blocks(dtype: str) -> list[dict]:
    """About 1,100 rows, 4,000+ elements per dtype: every row length 1..12, long rows, cancelling rows, rows at the
    mean, variances around eps."""
    rng = np.random.default_rng(23 + DTYPES.index(dtype))
    blocks = [block(rng, 40, r, dtype) for r in range(1, 13)]
    blocks += [block(rng, 2, r, dtype) for r in (64, 300)]
    blocks += [block(rng, 60, 12, dtype, "cancel"), block(rng, 40, 9, dtype, "at_mean"),
               block(rng, 200, 6, dtype, "tiny"), block(rng, 30, 40, dtype, "tiny")]
    return blocks


@pytest.fixture(scope="module", params=DTYPES)
def checked(request):
    return request.param, [(t, oracle(t)) for t in oracle_blocks(request.param)]


def test_reference_and_exact_against_the_oracle(checked):
    """|reference - oracle| <= bound and |oracle| <= scale per element; the op's exact (rstd to 60 digits) within
    2^-150 of the oracle's scale."""
    _, blocks = checked
    elements = 0
    for t, o in blocks:
        ref, exact = SPEC.reference(as_f64(t)), SPEC.exact(as_fractions(t))
        for name in OUTS:
            want = flat(o, name)
            value, bound, scale = (np.asarray(getattr(ref[name], f)).reshape(-1) for f in ("value", "bound", "scale"))
            for v, bd, s, e, x in zip(value, bound, scale, want, exact[name].reshape(-1)):
                assert abs(Fraction(float(v)) - e) <= Fraction(float(bd)), (name, v, e)
                assert abs(e) <= Fraction(float(s)), (name, s, e)
                assert abs(x - e) <= Fraction(float(s)) * Fraction(1, 2**150) + Fraction(1, 2**1100), name
            elements += len(want)
    assert elements >= 4000


def test_newton_rstd_is_within_two_ulps_and_selects_the_ends():
    """ComputeRstdNewtonRaphsonReg's float32 result against 1 / sqrt at 256 bits over 40,000 values spanning
    float32's normal range; v = 0 gives +inf, v = +inf gives 0, v < 0 NaN. (Below 2^-128, 1 / v overflows and the
    steps give NaN: var + eps never gets there, eps >= 1e-12, unless variance is about -eps.)"""
    rng = np.random.default_rng(1)
    v = np.concatenate([2.0 ** rng.uniform(-126, 126, 40_000), [1.0, 4.0, 2.0**-126, 3.4e38]]).astype(np.float32)
    got = newton_rstd(v, 0.0).astype(np.float64)
    want = 1 / np.sqrt(v.astype(np.float64))
    ulp = np.spacing(want.astype(np.float32)).astype(np.float64)
    assert (np.abs(got - want) <= 2 * ulp).all()
    assert newton_rstd(np.float32(0), 0.0) == np.inf and newton_rstd(np.float32(np.inf), 0.0) == 0
    assert np.isnan(newton_rstd(np.float32(-1), 0.0))
    assert newton_rstd(np.float32(0), eps_of("float32")) == np.float32(1e6)  # 1 / sqrt(fl32(1e-12)), eps decides


def aten_float32(t: dict) -> dict:
    """An independent float32 formulation: rstd = 1 / np.sqrt(variance + eps) in float32 (two roundings, not the
    Newton step), then ATen's CPU algebra (tests/test_op_layer_norm_backward.py's aten_float32)."""
    f = np.float32
    rstd = f(1) / np.sqrt(np.asarray(t["variance"], f) + f(t["epsilon"]))
    lb = {theirs: t[ours] for ours, theirs in LB_NAMES.items()}
    out = LBT.aten_float32({**lb, "rstd": rstd})
    return {ours: out[theirs] for ours, theirs in TO_LB.items()}


def within_premise(result: dict, t: dict, o: dict) -> float:
    """(log2 N + 10) 2^-24 scale: LayerNormBackward's premise with 2 more units for the Newton rsqrt."""
    return LBT.within_premise(result, t, o, spec=SPEC, slack=10)


def test_kernel_and_independent_float32_within_the_premise(checked):
    _, blocks = checked
    for t, o in blocks:
        assert within_premise(SPEC.kernel(t), t, o) <= 1
        if t["dy"].shape[1] <= 64:
            assert within_premise(aten_float32(t), t, o) <= 1


DEFECT_KINDS = (("random", 8, 33), ("random", 8, 7), ("positive", 2, 4096), ("positive", 2048, 16), ("cancel", 8, 256),
                ("tiny", 16, 16))


def _gate_errors(name: str, seed: int, dtype: str = "float32"):
    rng = np.random.default_rng(seed)
    for kind, k, r in DEFECT_KINDS:
        t = block(rng, k, r, dtype, kind)
        ref, got = SPEC.reference(as_f64(t)), VARIANTS[name](t)
        for out in OUTS:
            v, bd, s = (np.asarray(getattr(ref[out], f)).reshape(-1) for f in ("value", "bound", "scale"))
            g = np.asarray(got[out], dtype=np.float64).reshape(-1)
            yield kind, out, v, bd, s, g


@pytest.mark.parametrize("name", sorted(n for n, v in VARIANTS.items() if v.variant_kind == "defect"))
def test_each_defect_is_visible_to_the_gate(name):
    """Off by more than 2^-13 max(|exact|, scale) somewhere, on a float32 or a float16 block (eps 1e-5 is a defect
    of float32 only)."""
    seen = [kind for dtype in ("float32", "float16") for kind, _, v, bd, s, g in _gate_errors(name, 7, dtype)
            if (~(np.abs(g - v) - bd <= T32 * np.maximum(np.abs(v), s))).any()]
    assert seen, name


@pytest.mark.parametrize("name", sorted(n for n, v in VARIANTS.items() if v.variant_kind == "legitimate"))
def test_legitimate_variants_stay_under_the_gate(name):
    for dtype in ("float32", "float16"):
        for kind, out, v, bd, s, g in _gate_errors(name, 8, dtype):
            assert (np.abs(g - v) + bd <= T32 * np.maximum(np.abs(v), s) / 16).all(), (kind, out)


def desc(dtype="float16", shape=(5, 7), null=False) -> TensorDesc:
    return TensorDesc(D.lookup(dtype), tuple(shape), null)


def call(**changes):
    base = {"dy": desc(), "x": desc(), "variance": desc("float32", (5, 1)), "mean": desc("float32", (5, 1)),
            "gamma": desc(shape=(7,)), PDX: desc(), PDG: desc(shape=(7,)), PDB: desc(shape=(7,))}
    for k, v in changes.items():
        base[k] = desc(**v)
    return check(SPEC, "950", base, {})


@pytest.mark.parametrize("kwargs,status,words", [
    ({}, SUCCESS, ""),
    ({"gamma": {"dtype": "float32", "shape": (7,)}, PDG: {"dtype": "float32", "shape": (7,)},
      PDB: {"dtype": "float32", "shape": (7,)}}, SUCCESS, ""),
    ({PDG: {"dtype": "float32", "shape": (7,)}, PDB: {"dtype": "float32", "shape": (7,)}}, SUCCESS, ""),
    ({"gamma": {"dtype": "float32", "shape": (7,)}}, INVALID, "pd_gamma dtype float16 is neither"),
    ({PDG: {"dtype": "float32", "shape": (7,)}}, INVALID, "differs from pd_beta"),
    ({"variance": {"dtype": "float16", "shape": (5, 1)}}, INVALID, "variance dtype"),
    ({"mean": {"dtype": "bfloat16", "shape": (5, 1)}}, INVALID, "mean dtype"),
    ({"dy": {"dtype": "float32"}}, INVALID, "dy dtype"),
    ({"gamma": {"dtype": "bfloat16", "shape": (7,)}}, INVALID, "neither float32 nor x's"),
    ({PDX: {"dtype": "float32"}}, INVALID, "pd_x dtype"),
    ({"x": {"shape": (5, 8)}}, INVALID, "dy shape"),
    ({"variance": {"dtype": "float32", "shape": (5,)}}, INVALID, "differs from mean's"),
    ({"gamma": {"shape": (5,)}, PDG: {"shape": (5,)}, PDB: {"shape": (5,)}}, INVALID, "not x's last 1 dims"),
    ({PDB: {"shape": (1, 7)}}, INVALID, "pd_beta shape"),
    ({"mean": {"dtype": "float32", "shape": (4, 1)}, "variance": {"dtype": "float32", "shape": (4, 1)}}, INVALID,
     "mean has 4 elements"),
    ({"variance": {"dtype": "float32", "shape": (5, 1), "null": True}}, NULLPTR, "variance"),
])
def test_contract_rules(kwargs, status, words):
    outcome = call(**kwargs)
    assert outcome.status == status, outcome.rule
    assert words in outcome.rule


# ---------------------------------------------------------------- the bundled cases


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced) -> Path:
    return bundled_emulated(tmp_path_factory, bundled_produced, "layer_norm_grad")


def test_bundled_cases_pass_and_goldens_are_the_oracle_rounded_once(suite, tmp_path):
    """verify passes every case; each small finite case's goldens are the oracle's value rounded once."""
    import json

    assert not not_passing(suite, tmp_path / "v.json")
    checked = 0
    for case in sorted(suite.iterdir()):
        m = json.loads((case / "case.json").read_text())
        ts = {t["name"]: t for t in m["tensors"]}
        if m["expect_status"] != 0 or math.prod(ts["x"]["shape"]) > 2500:
            continue
        n = math.prod(ts["gamma"]["shape"])
        rows = math.prod(ts["x"]["shape"]) // n
        t = {name: LBT._logical(case, ts[name], "file").reshape(rows, n, 1) for name in ("dy", "x")}
        t.update({name: LBT._logical(case, ts[name], "file").reshape(rows, 1, 1) for name in ("mean", "variance")})
        t["gamma"] = np.broadcast_to(LBT._logical(case, ts["gamma"], "file").reshape(1, n, 1), (rows, n, 1))
        if not all(np.isfinite(v).all() for v in t.values()):
            continue
        t["epsilon"] = eps_of(ts["x"]["dtype"])
        o = oracle(t)
        for name in OUTS:
            gold = LBT._logical(case, ts[name], "golden").reshape(-1)
            want = [LBT._round(q, ts[name]["dtype"]) for q in flat(o, name)]
            assert np.array_equal(gold, np.array(want)), (case.name, name)
        checked += 1
    assert checked >= 30


# ---------------------------------------------------------------- ops-nn's TTK suite


def test_ops_nn_ttk_suite_imports_whole_and_its_small_cases_pass(tmp_path):
    """All 99 cases of the graph op LayerNormGrad import (product 950: the suite names no SoC); those of up to QUICK
    elements pass the 950 kernel and the independent float32 formulation (the rest: scripts/catalogue.py)."""
    r = run_cli("convert", TTK, "-o", tmp_path / "yaml")
    assert r.exit_code == 0 and "converted 99 cases from 1 file" in r.output, r.output
    cases = read_yaml(tmp_path / "yaml" / f"{TTK.stem}.yaml")["cases"]
    small = [c["name"] for c in cases if math.prod(c["shape"]) <= QUICK]
    assert len(small) >= 5 and all(c["product"] == "950" for c in cases)
    out = tmp_path / "out"
    for args in (("gen", tmp_path / "yaml", "-o", out, *[a for n in small for a in ("--case", f"layer_norm_grad-{n}")]),
                 ("emulate", out)):
        r = run_cli(*args)
        assert r.exit_code == 0, r.output[-3000:]
    assert not not_passing(out, tmp_path / "v.json")
    from independent_rows import run_suite

    wrote, records = run_suite(out, tmp_path, aten_float32)
    assert wrote == len(small) and {c["status"] for c in records.values()} == {"PASS"}, records
