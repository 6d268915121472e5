"""aclnnInstanceNormGrad (the graph op InstanceNormGrad's generated API: channel-last x, variance in, rstd =
(variance + 1e-6f)^(-1/2) by the kernel): goldens against an oracle of our own, the emulated kernel against a scalar
restatement of its source, an independent float32 formulation over every bundled case, each defect visible to the
gate, the contract, the bundled cases and ops-nn's own TTK suite.

The oracle reads the generated case directories through the manifest's numbers alone (tests/harness.py), views x as
(N, M, C) (N its first axis, C its last) and evaluates the README's formula per instance (n, c) in Fractions, with
rstd and (variance + eps)^(-3/2) from mpmath at 256 bits:
  pd_var = sum -0.5 a (x - mean) (variance + eps)^(-3/2),  pd_mean = sum -a rstd,  a = dy gamma;
  pd_x = a rstd + pd_var (2 / M) (x - mean) + pd_mean / M;  pd_gamma[c] = sum over n, m of dy (x - mean) rstd;
  pd_beta[c] = sum of dy.
No expression of the op's reference or exact (the centred form, rstd to 60 digits) is shared; a channel read along
the wrong axis, a statistic read for the wrong (n, c) or a channel sum over the wrong elements is a wrong golden.

tests/ops_nn_suites/ttk_kernel_instance_norm_grad_st.csv is norm/instance_norm_grad/tests/st/arch35/ (ops-nn
e5c3fa93): its 6 cases import and pass here.
"""

from __future__ import annotations

import functools
import json
import math
import shutil
from exactq import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

import harness
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.groups.instance_norm_grad import SPEC
from aclnn_cli.ops.groups.instance_norm_kernel import kahan, kernel, rstd_of
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from helpers import read_yaml, run_cli
from oracle import rounded_bits
from rowblocks import as_f64, as_fractions, bundled_emulated, generated_yaml, not_passing, variant_statuses
from test_op_group_norm_backward import _logical, _write_dumps

DY, X, VAR, MEAN, G, PDX, PDG, PDB = "dy", "x", "variance", "mean", "gamma", "pd_x", "pd_gamma", "pd_beta"
OUTS = (PDX, PDG, PDB)
EPS = float(np.float32(1e-6))  # INSTANCE_NORM_GRAD_EPS = 1e-6f (op_kernel/arch35/instance_norm_grad_common.h)
TTK = Path(__file__).parent / "ops_nn_suites" / "ttk_kernel_instance_norm_grad_st.csv"
DEFECTS = sorted(n for n, v in SPEC.variants.items() if v.variant_kind == "defect")
LEGITIMATE = sorted(n for n, v in SPEC.variants.items() if v.variant_kind == "legitimate")


def _inputs(case: Path, m: dict) -> dict:
    """dy, x (N, M, C); variance, mean (N, C); gamma (C,): the logical values, float64."""
    shape = harness.tensors(m)[X]["shape"]
    n, c = shape[0], shape[-1]
    t = {name: _logical(case, m, name) for name in (DY, X, VAR, MEAN, G)}
    return {DY: t[DY].reshape(n, -1, c), X: t[X].reshape(n, -1, c), VAR: t[VAR].reshape(n, c),
            MEAN: t[MEAN].reshape(n, c), G: t[G].reshape(c)}


def _powers(var: float) -> tuple[Fraction, Fraction]:
    """(variance + eps)^(-1/2) and ^(-3/2) at 256 bits, as the exact Fractions of those binary values."""
    with mpmath.workprec(256):
        s = mpmath.mpf(var) + mpmath.mpf(EPS)
        return tuple(Fraction(v.man_exp[0]) * Fraction(2) ** v.man_exp[1] for v in (s ** -0.5, s ** -1.5))


@functools.lru_cache(maxsize=None)
def _oracle(case: Path) -> dict[str, list[Fraction]]:
    return oracle(case, harness.load(case))


def oracle(case: Path, m: dict) -> dict[str, list[Fraction]]:
    """The README's formula per instance in Fractions (module docstring); outputs in logical order."""
    t = _inputs(case, m)
    n, mm, c = t[X].shape
    q = np.vectorize(Fraction, otypes=[object])
    dy, x, var, mean, gamma = (q(t[k]) for k in (DY, X, VAR, MEAN, G))
    dx = np.empty((n, mm, c), dtype=object)
    dgamma, dbeta = [Fraction(0)] * c, [Fraction(0)] * c
    for i in range(n):
        for j in range(c):
            rstd, r3 = _powers(float(t[VAR][i, j]))
            xc = [x[i, p, j] - mean[i, j] for p in range(mm)]
            a = [dy[i, p, j] * gamma[j] for p in range(mm)]
            pd_var = sum((-Fraction(1, 2) * a[p] * xc[p] * r3 for p in range(mm)), Fraction(0))
            pd_mean = sum((-a[p] * rstd for p in range(mm)), Fraction(0))
            for p in range(mm):
                dx[i, p, j] = a[p] * rstd + pd_var * Fraction(2, mm) * xc[p] + pd_mean / mm
                dgamma[j] += dy[i, p, j] * xc[p] * rstd
                dbeta[j] += dy[i, p, j]
    return {PDX: list(dx.reshape(-1)), PDG: dgamma, PDB: dbeta}


def goldens_checked(out: Path, limit: int) -> dict[str, int]:
    """Every positive case of up to `limit` elements with finite inputs: each output's golden is the oracle rounded
    once, bit for bit; elements compared by dtype. (special_values: test_special_values_reach_their_instances.)"""
    compared: dict[str, int] = {}
    for case in sorted(p.parent for p in out.glob("*/case.json")):
        m = harness.load(case)
        x = harness.tensors(m)[X]
        if m["expect_status"] != 0 or not 0 < math.prod(x["shape"]) <= limit:
            continue
        if not all(np.isfinite(v).all() for v in _inputs(case, m).values()):
            continue
        for name, values in _oracle(case).items():
            t = harness.tensors(m)[name]
            dtype = D.lookup(t["dtype"])
            got = harness.view(harness.storage(case, t, "golden"), t).reshape(-1).view(dtype.uint_dtype)
            assert np.array_equal(got, rounded_bits(values, dtype).astype(dtype.uint_dtype)), (case.name, name)
            compared[dtype.name] = compared.get(dtype.name, 0) + len(values)
    return compared


ORACLE_YAML = """\
op: aclnnInstanceNormGrad
defaults: {product: "950", seed: 91, dtype: [float32, float16]}
cases:
  - {name: ndhwc, shape: [3, 2, 3, 4, 9]}
  - {name: rank2, shape: [40, 17]}
  - {name: rank3, shape: [2, 64, 5]}
  - {name: cancel_dy, shape: [2, 3, 4, 4, 3], inputs: {dy: {constant: 0.75}, gamma: {constant: 1}}}
  - {name: cancel_mean, shape: [2, 6, 6, 4], inputs: {x: {uniform: [99, 101]}, mean: {constant: 100}}}
  - {name: near_eps, shape: [2, 2, 2, 2, 4], inputs: {variance: {values: [0.0, 1.0e-6, 3.0e-7, 2.0e-4]},
     x: {uniform: [-0.002, 0.002]}, mean: {uniform: [-0.001, 0.001]}}}
  - {name: ttk_ranges, shape: [3, 4, 2, 16], inputs: {dy: {uniform: [-1, 1]}, x: {uniform: [-1, 1]},
     variance: {uniform: [0, 1]}, mean: {uniform: [-1, 1]}, gamma: {uniform: [-1, 1]}}}
"""


@pytest.fixture(scope="module")
def oracle_suite(tmp_path_factory):
    return generated_yaml(tmp_path_factory, ORACLE_YAML, "in_oracle")


def test_goldens_equal_the_oracle_rounded_once(oracle_suite):
    """Over 3,000 elements per dtype (cancelling instances, variances about eps, the TTK's ranges) and pd_gamma,
    pd_beta of every channel: the goldens are the oracle's values rounded once."""
    compared = goldens_checked(oracle_suite, 5000)
    assert compared["float32"] >= 3000 and compared["float16"] >= 3000, compared


def test_reference_bound_scale_and_exact_against_the_oracle(oracle_suite):
    """Per element of every oracle case, in the family's blocks (a channel over every sample, (n, hw) order):
    |reference - oracle| <= bound and |oracle| <= scale; the op's exact (rstd to 60 digits) within 2^-150 of the
    scale. The bound is what certifies gen's rounding: too small a bound would be a wrong golden."""
    from independent_rows import case_blocks

    from aclnn_cli.casedir import manifest as M
    from aclnn_cli.pipeline.stages import geometry

    elements = 0
    for case in sorted(p.parent for p in oracle_suite.glob("*/case.json")):
        mm = M.load(case)
        geo = geometry(mm)
        t = as_f64(case_blocks(mm))
        ref, exact, o = SPEC.reference(t), SPEC.exact(as_fractions(t)), _oracle(case)
        want = {PDX: np.array(o[PDX] + [None], dtype=object)[:-1][geo.positions(0, geo.a1)], PDG: o[PDG], PDB: o[PDB]}
        for name in OUTS:
            value, bound, scale = (np.asarray(getattr(ref[name], f)).reshape(-1) for f in ("value", "bound", "scale"))
            for v, bd, sc, e, x in zip(value, bound, scale, want[name], exact[name].reshape(-1)):
                assert abs(Fraction(float(v)) - e) <= Fraction(float(bd)), (case.name, name, v, e)
                assert abs(e) <= Fraction(float(sc)), (case.name, name, sc, e)
                assert abs(x - e) <= Fraction(float(sc)) / 2**150 + Fraction(1, 2**1100), (case.name, name)
            elements += len(want[name])
    assert elements >= 6000


# ---------------------------------------------------------------- the kernel against its source


def _source_order(t: dict) -> dict:
    """instance_norm_grad_common.h restated per instance with float32 scalars: ComputeRstd, Pass1Accumulate (the
    four Kahan sums with the NaN guard, the statement order of the source), stage 2's Kahan over the samples,
    ComputePdx (Muls, Mul, MulAddDst unfused, Add)."""
    f = np.float32
    dy, x = t[DY].astype(f), t[X].astype(f)  # (1, N * M, 1): one channel
    n = t[MEAN].shape[1]
    m = x.shape[1] // n
    sums = [[f(0)] * 2 for _ in range(n)]
    out = np.empty(n * m, f)

    def add(acc, comp, v):
        y = f(v - comp)
        s = f(acc + y)
        c = f(f(s - acc) - y)
        return s, (f(0) if np.isnan(c) else c)

    with np.errstate(all="ignore"):
        for i in range(n):
            var, mean, gamma = f(t[VAR][0, i, 0]), f(t[MEAN][0, i, 0]), f(t[G][0, 0, 0])
            rstd = f(f(1) / f(np.sqrt(f(var + f(EPS)))))
            r3 = f(f(rstd * rstd) * rstd)
            acc = {k: [f(0), f(0)] for k in ("db", "dg", "pm", "pv")}
            for p in range(m):
                xv, dv = x[0, i * m + p, 0], dy[0, i * m + p, 0]
                xc = f(xv - mean)
                acc["db"] = list(add(*acc["db"], dv))
                a = f(dv * gamma)
                acc["dg"] = list(add(*acc["dg"], f(dv * f(xc * rstd))))
                acc["pm"] = list(add(*acc["pm"], f(f(a * rstd) * f(-1))))
                acc["pv"] = list(add(*acc["pv"], f(f(f(a * xc) * r3) * f(-0.5))))
            sums[i] = [acc["dg"][0], acc["db"][0]]
            one = f(1) / f(m)
            c_var, c_mean = f(acc["pv"][0] * f(f(2) * one)), f(acc["pm"][0] * one)
            for p in range(m):
                xc = f(x[0, i * m + p, 0] - mean)
                a = f(dy[0, i * m + p, 0] * gamma)
                out[i * m + p] = f(f(f(a * rstd) + f(c_var * xc)) + c_mean)
        total = [[f(0), f(0)], [f(0), f(0)]]
        for i in range(n):
            for k in range(2):
                total[k] = list(add(*total[k], sums[i][k]))
    return {PDX: out, PDG: total[0][0], PDB: total[1][0]}


def _channel(rng, n: int, m: int, kind: str = "random") -> dict:
    """One channel's block as the pipeline hands it (float32)."""
    f = np.float32
    t = {DY: rng.normal(size=(1, n * m, 1)), X: rng.normal(size=(1, n * m, 1)),
         VAR: rng.uniform(0, 2, (1, n, 1)), MEAN: rng.uniform(-1, 1, (1, n, 1)), G: rng.uniform(-2, 2, (1, 1, 1))}
    if kind == "inf":
        t[DY][0, 3, 0] = np.inf
    return {k: v.astype(f) for k, v in t.items()}


@pytest.mark.parametrize("n, m, kind", [(1, 7, "random"), (3, 50, "random"), (5, 9, "random"), (2, 30, "inf")])
def test_the_kernel_is_its_source_statement_by_statement(n, m, kind):
    """The emulated kernel (vectorised over channels and samples) equals the scalar restatement bit for bit, an
    infinite dy included (the Kahan NaN guard keeps pd_beta infinite)."""
    t = _channel(np.random.default_rng(n * 100 + m), n, m, kind)
    got, want = kernel(t), _source_order(t)
    for name in OUTS:
        assert np.array_equal(np.asarray(got[name]).reshape(-1), np.asarray(want[name]).reshape(-1),
                              equal_nan=True), name
    if kind == "inf":
        assert got[PDB].reshape(-1)[0] == np.inf


def test_kahan_and_rstd():
    """kahan keeps a long sum of float32 terms to a few units of the exact sum where a running sum drifts;
    rstd_of is fl(1 / fl(sqrt(fl(variance + 1e-6f)))): 1000 at variance 0."""
    rng = np.random.default_rng(3)
    terms = rng.uniform(0, 1, (1, 100_000, 1)).astype(np.float32)
    exact = math.fsum(terms.reshape(-1).astype(np.float64).tolist())
    assert abs(float(kahan(terms, 1).reshape(-1)[0]) - exact) <= 2 * np.spacing(np.float32(exact))
    assert abs(float(np.cumsum(terms, dtype=np.float32)[-1]) - exact) > 8 * np.spacing(np.float32(exact))
    assert rstd_of(np.float32([0.0]))[0] == np.float32(1) / np.sqrt(np.float32(1e-6))
    assert abs(float(rstd_of(np.float32([0.0]))[0]) - 1000) < 1e-3


# ---------------------------------------------------------------- the contract


def desc(dtype="float32", shape=(2, 3, 4, 5, 6), null=False) -> TensorDesc:
    return TensorDesc(D.lookup(dtype), tuple(shape), null)


def call(dtype="float32", **changes):
    stats = (2, 1, 1, 1, 6)
    base = {DY: desc(dtype), X: desc(dtype), VAR: desc(dtype, stats), MEAN: desc(dtype, stats),
            G: desc(dtype, (6,)), PDX: desc(dtype), PDG: desc(dtype, (6,)), PDB: desc(dtype, (6,))}
    for k, v in changes.items():
        base[k] = desc(**{"dtype": dtype, **v})
    return check(SPEC, "950", base, {})


@pytest.mark.parametrize("dtype, kwargs, status, words", [
    ("float32", {}, SUCCESS, ""),
    ("float16", {}, SUCCESS, ""),
    ("bfloat16", {}, INVALID, ""),
    ("float16", {VAR: {"dtype": "float32", "shape": (2, 1, 1, 1, 6)}}, INVALID, "dtypes differ"),
    ("float32", {PDG: {"dtype": "float16", "shape": (6,)}}, INVALID, "dtypes differ"),
    ("float32", {DY: {"shape": (5,)}, X: {"shape": (5,)}, PDX: {"shape": (5,)}}, INVALID, "2 or more"),
    ("float32", {X: {"shape": (2, 3, 4, 5, 7)}}, INVALID, "x shape"),
    ("float32", {PDX: {"shape": (2, 3, 4, 6, 5)}}, INVALID, "pd_x shape"),
    ("float32", {G: {"shape": (7,)}, PDG: {"shape": (7,)}, PDB: {"shape": (7,)}}, INVALID, "C = 6"),
    ("float32", {MEAN: {"shape": (1, 1, 1, 1, 6)}}, INVALID, "mean has 6 elements"),
    ("float32", {VAR: {"shape": (12,)}, MEAN: {"shape": (2, 6)}}, SUCCESS, ""),   # (numel only: the tiling's)
    ("float32", {PDB: {"shape": (1, 6)}}, INVALID, "pd_beta shape"),
    ("float32", {DY: {"shape": (0, 3, 6)}, X: {"shape": (0, 3, 6)}, PDX: {"shape": (0, 3, 6)}, VAR: {"shape": (3,)}},
     SUCCESS, ""),  # (an empty x: the empty tiling checks no shape)
    ("float32", {MEAN: {"null": True}}, NULLPTR, "mean"),
])
def test_contract_rules(dtype, kwargs, status, words):
    outcome = call(dtype, **kwargs)
    assert outcome.status == status, outcome.rule
    assert words in outcome.rule


# ---------------------------------------------------------------- the bundled cases


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced) -> Path:
    return bundled_emulated(tmp_path_factory, bundled_produced, SPEC.key)


def test_bundled_cases_pass_and_goldens_are_the_oracle_rounded_once(suite, tmp_path):
    """verify passes every bundled case (the empty ones' pd_gamma, pd_beta zeros); the goldens of every case of up to
    3,000 elements are the oracle's, rounded once."""
    assert not not_passing(suite, tmp_path / "v.json")
    compared = goldens_checked(suite, 3000)
    assert compared["float32"] >= 2000 and compared["float16"] >= 2000, compared
    for case in suite.glob("instance_norm_grad-empty_*"):
        m = harness.load(case)
        for name in (PDG, PDB):
            t = harness.tensors(m)[name]
            assert (harness.view(harness.storage(case, t, "golden"), t) == 0).all(), (case.name, name)


def test_special_values_reach_their_instances(suite):
    """A NaN x in instance (0, 0) and a NaN dy in (1, 1): those instances' pd_x, pd_gamma of both channels (x̂ of
    (0, 0), dy of (1, 1)), pd_beta of channel 1 are NaN; every other golden finite."""
    for case in suite.glob("instance_norm_grad-special_values-*"):
        m = harness.load(case)
        got = {n: harness.view(harness.storage(case, harness.tensors(m)[n], "golden"), harness.tensors(m)[n])
               for n in OUTS}
        assert np.array_equal(np.isnan(got[PDX].reshape(-1)), [1, 0, 1, 0, 0, 1, 0, 1]), case.name
        assert np.isnan(got[PDG]).all() and np.array_equal(np.isnan(got[PDB]), [False, True]), case.name


def test_the_kernel_chunk_changes_no_byte(suite, tmp_path, monkeypatch):
    """Family.kernel_chunk hands the emulated kernel many channels per call (decision 211): every bundled dump is the
    one a channel-per-call emulation writes, and channels of the pipeline's whole chunk went several to a call."""
    from aclnn_cli.device import emulate_rows
    from shared import linked_copy

    chunks, took = emulate_rows.block_chunks, []

    def recorded(geo, b0, b1, chunk):
        for piece in chunks(geo, b0, b1, chunk):
            took.append((geo.block, piece[1] - piece[0]))
            yield piece

    dumps = {}
    for name, cut in (("wide", recorded), ("one", lambda geo, b0, b1, chunk: chunks(geo, b0, b1, 1))):
        monkeypatch.setattr(emulate_rows, "block_chunks", cut)
        work = linked_copy(suite, tmp_path / name)
        assert run_cli("emulate", work, "-j", 1).exit_code == 0
        dumps[name] = {p.relative_to(work): p.read_bytes() for p in sorted(work.glob("*/*.dump.bin"))}
    assert len(dumps["wide"]) > 50 and dumps["wide"] == dumps["one"]
    assert any(block >= 1 << 16 and n >= 2 for block, n in took)  # (channels of the pipeline's chunk, several at once)


# Cases of the bundled suite where a defect stays within the gate: rank-2 and one-position instances (M = 1: dy - the
# mean of one dy and x̂ times itself cancel whatever the factor), one-sample or one-element sums, variance far above
# eps (no-epsilon), constant dy (a - mean(a) exactly 0). Each defect must FAIL somewhere in each dtype.
@pytest.mark.parametrize("variant", DEFECTS + LEGITIMATE)
def test_each_defect_fails_in_every_dtype_and_each_legitimate_variant_passes(suite, tmp_path, variant):
    status = variant_statuses(suite, tmp_path, variant)
    positive = {k: v for k, v in status.items() if "-float" in k and "contract" not in k}
    if variant in LEGITIMATE:
        assert set(status.values()) == {"PASS"}, {k: v for k, v in status.items() if v != "PASS"}
        return
    failed = {k.rsplit("-", 1)[1] for k, v in positive.items() if v == "FAIL"}
    assert failed == {"float32", "float16"}, (variant, failed)


def pytorch_float32(ins: dict) -> dict:
    """PyTorch's instance-norm backward (instance_norm reshapes x to (1, N C, M) and calls batch norm's backward;
    aten/src/ATen/native/cpu/batch_norm_kernel.cpp, batch_norm_cpu_backward_channels_last's algebra) in numpy
    float32: invstd = 1 / sqrt(var + eps); per instance sum_dy = sum(dy), dotp = sum((x - mean) dy) (numpy's pairwise
    sums); k = dotp invstd^2 / M; dx = (dy - (x - mean) k - sum_dy / M) invstd gamma; pd_gamma[c] = sum over n of
    dotp invstd; pd_beta[c] = sum over n of sum_dy. Inputs (N, M, C) logical, outputs flat in logical order."""
    f = np.float32
    dy, x = ins[DY].astype(f), ins[X].astype(f)
    var, mean, gamma = ins[VAR].astype(f)[:, None, :], ins[MEAN].astype(f)[:, None, :], ins[G].astype(f)
    m = x.shape[1]
    with np.errstate(all="ignore"):
        invstd = f(1) / np.sqrt(var + f(EPS))
        xmu = x - mean
        sum_dy = dy.sum(axis=1, keepdims=True, dtype=f)
        dotp = (xmu * dy).sum(axis=1, keepdims=True, dtype=f)
        k = dotp * invstd * invstd / f(m)
        dx = (dy - xmu * k - sum_dy / f(m)) * invstd * gamma
        pd_gamma = (dotp * invstd).sum(axis=(0, 1), dtype=f)
        pd_beta = sum_dy.sum(axis=(0, 1), dtype=f)
    return {PDX: dx.reshape(-1), PDG: pd_gamma, PDB: pd_beta}


def independent_run(out: Path, tmp_path: Path) -> tuple[int, list]:
    """pytorch_float32's outputs as the dumps of every non-empty positive case of a copy of `out`, then verify:
    (cases written, those not passing)."""
    work = tmp_path / "pytorch"
    shutil.copytree(out, work)
    wrote = 0
    for case in sorted(p.parent for p in work.glob("*/case.json")):
        m = harness.load(case)
        if m["expect_status"] != 0 or not math.prod(harness.tensors(m)[X]["shape"]):
            continue
        _write_dumps(case, m, pytorch_float32(_inputs(case, m)))
        wrote += 1
    return wrote, not_passing(work, tmp_path / "pytorch.json")


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    wrote, bad = independent_run(suite, tmp_path)
    assert wrote >= 24 and not bad, bad


# ---------------------------------------------------------------- ops-nn's TTK suite


def test_ops_nn_ttk_suite_imports_whole_and_passes(tmp_path):
    """All 6 cases of the graph op instance_norm_grad import as aclnnInstanceNormGrad (product 950: the suite names
    no SoC; fp32 and fp16, (N, D, H, W, C) ND) and pass the 950 kernel and the independent float32 formulation."""
    r = run_cli("convert", TTK, "-o", tmp_path / "yaml")
    assert r.exit_code == 0 and "converted 6 cases from 1 file" in r.output, r.output
    doc = read_yaml(tmp_path / "yaml" / f"{TTK.stem}.yaml")
    assert doc["op"] == SPEC.name and {c["product"] for c in doc["cases"]} == {"950"}
    assert {c["dtype"] for c in doc["cases"]} == {"float32", "float16"}
    out = tmp_path / "out"
    for args in (("gen", tmp_path / "yaml", "-o", out), ("emulate", out)):
        r = run_cli(*args)
        assert r.exit_code == 0, r.output[-3000:]
    assert not not_passing(out, tmp_path / "v.json")
    assert len(json.loads((tmp_path / "v.json").read_text())["cases"]) == 6
    wrote, bad = independent_run(out, tmp_path)
    assert wrote == 6 and not bad, bad


def _kahan_loop(values: list, guard: bool) -> np.float32:
    """One sum, term by term in float32 scalars (the kernel's statement order), for the vectorised kahan_sum."""
    f = np.float32
    acc = comp = f(0)
    with np.errstate(all="ignore"):
        for v in values:
            y = f(v) - comp
            s = acc + y
            comp = (s - acc) - y
            if guard and np.isnan(comp):
                comp = f(0)
            acc = s
    return acc


@pytest.mark.parametrize("guard", [True, False])
def test_kahan_sums_stacked_equal_each_sum_alone_with_and_without_the_nan_guard(guard):
    """The shared pass over stacked sums (treesum.kahan_sum) gives each sum's scalar loop bit for bit: finite sums,
    one that overflows, an infinite term followed by finite ones (guarded: stays inf; unguarded: NaN), NaN and -inf."""
    from aclnn_cli.ops.treesum import kahan_sum

    rng = np.random.default_rng(5)
    rows = rng.normal(0, 1, (6, 40)).astype(np.float32) * np.float32(1e3)
    rows[1, :5] = np.float32(3e38)       # overflows at its second term, then 35 finite terms
    rows[5, 3] = np.inf                  # an infinite term, then finite ones
    rows[2, 7] = np.nan
    rows[3, 9] = -np.inf
    rows[4] = np.float32(2.0**-24)
    rows[4, 0] = 1                      # the compensation carries the small terms a running sum drops
    got = kahan_sum(rows.T, 0, reset_nan=guard).reshape(-1)
    want = [_kahan_loop(r.tolist(), guard) for r in rows]
    assert np.array_equal(got.view(np.uint32), np.array(want, np.float32).view(np.uint32)), (got, want)
    assert (got[5] == np.inf) if guard else np.isnan(got[5])
    assert got[4] == np.float32(1 + 39 * 2.0**-24)


@pytest.mark.parametrize("variant", ["write-past-view", "ignore-output-strides", "partial-tile-unwritten"])
def test_the_generic_writers_take_an_instance_of_no_position(suite, tmp_path, variant):
    """The generic variants that write the output range by range meet an empty instance's blocks (no element):
    emulate writes the case (it was an IndexError traceback), and verify judges it."""
    from shared import linked_copy

    names = [c.name for c in suite.glob("instance_norm_grad-empty_positions-*")]
    work = linked_copy(suite, tmp_path / "w", cases=names)
    r = run_cli("emulate", work, "--defect", variant)
    assert r.exit_code == 0, r.output
    assert run_cli("verify", work).exit_code in (0, 1)
