"""aclnnMishGrad (the graph op MishGrad's generated API): goldens against an mpmath oracle, the kernel against a scalar
restatement of mish_grad_dag.h and its error against the derived count, an independent float32 kernel, the defects,
the contract, and ops-nn's TTK suite with its tanhx cases.

The oracle with tanhx is ops-nn's golden's form (tests/assets/golden.py), grad (t + x (1 - t)(1 + t) e^x / (1 + e^x)),
in mpmath at 300 and 600 bits (the two must round alike), the mpf taken exactly as a Fraction and rounded by
tests/oracle.py's integer rounding; nothing of the op module (its ratios are t - (t^2 - 1) x s, s from e^-|x|, in
float64 and Decimal). Without tanhx the op is aclnnMishBackward's function, bit for bit (that op's own oracle is the
exhaustive textbook sweep).
"""

from __future__ import annotations

import math
from exactq import Fraction, PackageFraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

import harness
from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops import find_op
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.elementwise.mish_grad import CONTRACT_NOTES, SPEC
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from helpers import read_yaml, run_cli
from oracle import fraction_bits
from rowblocks import assert_named_cases_fail, bundled_emulated, independent_dumps, not_passing, passing_bundled_records

F32 = np.float32
T = "tanhxOptional"
TTK = Path(__file__).parent / "ops_nn_suites" / "ttk_kernel_mish_grad_st.csv"
DTYPES = (D.FLOAT32, D.FLOAT16, D.BFLOAT16)


# ---------------------------------------------------------------- the oracle


def _as_fraction(v) -> Fraction:
    """An mpf exactly: (-1)^sign man 2^exp."""
    sign, man, exp, _ = v._mpf_
    return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(exp) if man else Fraction(0)


def oracle_bits(dy: float, x: float, t: float, dtype: D.DType) -> int:
    """grad (t + x (1 - t)(1 + t) sigmoid(x)) rounded once to dtype; the same bits at 300 and 600 bits."""
    got = []
    for prec in (300, 600):
        with mpmath.workprec(prec):
            X_, T_ = mpmath.mpf(x), mpmath.mpf(t)
            e = mpmath.exp(X_)
            v = mpmath.mpf(dy) * (T_ + X_ * (1 - T_) * (1 + T_) * e / (1 + e))
            got.append(fraction_bits(_as_fraction(v), dtype.name))
    assert got[0] == got[1], (dy, x, t)
    return got[0]


def sample(dtype: D.DType, rng) -> dict:
    """1,600 points: x over [-12, 12] and [-120, 120] (e^-x past float32's range), t over [-1, 1], near +-1 and
    beyond (TTK's wide ranges), and 400 where the two terms cancel: t the root of x s t^2 - t - x s = 0, rounded."""
    n = 300
    x = np.concatenate([rng.uniform(-12, 12, 2 * n), rng.uniform(-120, 120, n), rng.uniform(-6, 6, n),
                        rng.uniform(-6, 6, 400)])
    t = np.concatenate([rng.uniform(-1, 1, 2 * n), rng.uniform(-300, 300, n),
                        np.sign(rng.uniform(-1, 1, n)) * (1 - 10.0 ** rng.uniform(-8, -1, n)), np.zeros(400)])
    xs = x[-400:] * (1 / (1 + np.exp(-x[-400:])))
    t[-400:] = np.where(xs == 0, 0.0, (1 - np.sqrt(1 + 4 * xs * xs)) / (2 * np.where(xs == 0, 1, xs)))
    dy = rng.normal(0, 1, x.size)
    if dtype == D.FLOAT16:
        t = np.clip(t, -65000, 65000)
    cast = lambda a: a.astype(dtype.np_dtype)  # noqa: E731
    return {"grad": cast(dy), "x": cast(x), T: cast(t)}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_goldens_equal_the_oracle_rounded_once(dtype):
    """Every golden of 1,600 points per dtype (random, e^-x past float32's range, |t| near 1 and far beyond it, and
    400 where t and (t^2 - 1) x sigmoid(x) cancel) is the oracle's value rounded once, bit for bit; `exact` agrees
    with the oracle to 1e-40 of the terms on a tenth of them."""
    ins = sample(dtype, np.random.default_rng(1031 + DTYPES.index(dtype)))
    got, _ = golden(SPEC, ins, dtype)
    got = got.view(dtype.uint_dtype)
    w = {k: v.astype(np.float64) for k, v in ins.items()}
    cancelled = 0
    for i in range(got.size):
        dy, x, t = (float(w[k][i]) for k in ("grad", "x", T))
        assert int(got[i]) == oracle_bits(dy, x, t, dtype), (dtype.name, dy, x, t)
        if i % 10 == 0:
            e = SPEC.exact({"grad": PackageFraction(dy), "x": PackageFraction(x), T: PackageFraction(t)})
            with mpmath.workprec(400):
                s = 1 / (1 + mpmath.exp(-mpmath.mpf(x)))
                want = mpmath.mpf(dy) * (t - (mpmath.mpf(t) ** 2 - 1) * x * s)
                terms = abs(dy) * (abs(t) + abs(x) * s * (t * t + 1))
                assert abs(mpmath.mpf(str(e)) - want) <= terms * mpmath.mpf(10) ** -40
        ref = SPEC.reference({"grad": w["grad"][i:i + 1], "x": w["x"][i:i + 1], T: w[T][i:i + 1]})
        cancelled += bool(abs(ref.value[0]) < 1e-3 * ref.scale[0])
    assert got.size == 1600 and cancelled > 50


def test_the_oracle_tells_the_given_tanhx_from_tanh_softplus():
    """The oracle parts from a golden that recomputes t (the graph op's result is another function with tanhx)."""
    ins = {"grad": np.array([1.0], F32), "x": np.array([0.5], F32), T: np.array([-0.25], F32)}
    got, _ = golden(SPEC, ins, D.FLOAT32)
    assert int(got.view(np.uint32)[0]) == oracle_bits(1.0, 0.5, -0.25, D.FLOAT32)
    ignored, _ = golden(SPEC, {"grad": ins["grad"], "x": ins["x"]}, D.FLOAT32)
    assert int(ignored.view(np.uint32)[0]) != oracle_bits(1.0, 0.5, -0.25, D.FLOAT32)


def test_without_tanhx_it_is_mish_backward_bit_for_bit():
    """A null tanhxOptional: aclnnMishBackward's golden, kernel, edge and special values (its functions called)."""
    back = find_op("aclnnMishBackward")
    x = np.concatenate([np.linspace(-100, 30, 3001), [np.inf, -np.inf, np.nan, -0.0]]).astype(F32)
    dy = np.random.default_rng(5).normal(0, 1, x.size).astype(F32)
    for dtype in DTYPES:
        xd, dyd = x.astype(dtype.np_dtype), dy.astype(dtype.np_dtype)
        mine, _ = golden(SPEC, {"grad": dyd, "x": xd}, dtype)
        theirs, _ = golden(back, {"gradOutput": dyd, "self": xd}, dtype)
        assert np.array_equal(mine.view(dtype.uint_dtype), theirs.view(dtype.uint_dtype))
    assert np.array_equal(SPEC.kernel({"grad": dy, "x": x}), back.kernel({"gradOutput": dy, "self": x}),
                          equal_nan=True)


# ---------------------------------------------------------------- the kernel, its error and its edges


def scalar_kernel(dy: float, x: float, t: float) -> F32:
    """MishGradFullDAG (mish_grad_dag.h lines 63-72, 145-164) one float32 operation at a time."""
    x, t, dy = F32(x), F32(t), F32(dy)
    w = F32(F32(t * t) + F32(-1.0))
    w = F32(w * x)
    e = F32(F32(np.exp(np.float64(F32(x * F32(-1.0))))) + F32(1.0))  # (Exp correctly rounded, as mathfns.exp)
    return F32(F32(t - F32(w / e)) * dy)


def test_kernel_is_the_dag_step_by_step():
    rng = np.random.default_rng(7)
    x, t = rng.uniform(-20, 20, 500).astype(F32), rng.uniform(-2, 2, 500).astype(F32)
    dy = rng.normal(0, 1, 500).astype(F32)
    got = SPEC.kernel({"grad": dy, "x": x, T: t})
    with np.errstate(all="ignore"):
        want = np.array([scalar_kernel(*v) for v in zip(dy, x, t)], F32)
    assert got.dtype == F32 and np.array_equal(got, want)


def test_kernel_error_is_within_the_derived_count_of_the_term_scale():
    """|kernel - exact| <= (E + 7) u scale (the module's derivation; E = 1/2 for the emulation's correctly rounded
    Exp): measured on 20,000 float32 points, the largest ratio stays below 7.5 and the count is not loose by orders."""
    rng = np.random.default_rng(11)
    n = 20_000
    t = {"grad": rng.normal(0, 1, n).astype(F32), "x": rng.uniform(-30, 30, n).astype(F32),
         T: np.concatenate([rng.uniform(-1, 1, n // 2), rng.uniform(-50, 50, n // 2)]).astype(F32)}
    k = SPEC.kernel(t).astype(np.float64)
    ref = SPEC.reference({name: v.astype(np.float64) for name, v in t.items()})
    ratio = np.abs(k - ref.value) / (2.0**-24 * ref.scale)
    assert np.all(ref.bound < 1e-9 * ref.scale)
    assert 0.5 < ratio.max() < 7.5, ratio.max()


def test_specials_and_the_edges():
    """x = -inf: inf / inf = NaN; x = +inf: -(t^2 - 1) inf; an infinite t: inf - inf = NaN. Below x = -88.72 e^-x
    overflows float32 (q = 0): at t = 0 the kernel's 0 stands off the exact x sigmoid(x) ~ -1.9e-37, an edge; t t
    overflowing float32 is one too; an ordinary point is not."""
    x = np.array([-np.inf, np.inf, 1.0, -89.0, 2.0, 1e-30], F32)
    t = np.array([0.5, 0.5, np.inf, 0.0, 0.5, 1e20], F32)
    dy = np.ones(6, F32)
    k = SPEC.kernel({"grad": dy, "x": x, T: t})
    assert np.isnan(k[0]) and k[1] == np.inf and np.isnan(k[2]) and k[3] == 0
    w = {"grad": dy.astype(float), "x": x.astype(float), T: t.astype(float)}
    ieee = SPEC.ieee(w)
    assert np.isnan(ieee[0]) and ieee[1] == np.inf and np.isnan(ieee[2])
    where, device = SPEC.edge(w)
    assert where.tolist() == [False, False, False, True, False, True] and device[3] == 0
    assert SPEC.reference({k_: v[3:4] for k_, v in w.items()}).value[0] == pytest.approx(-89 * math.exp(-89))


# ---------------------------------------------------------------- the bundled cases


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    """The bundled file generated and emulated: the session's cases (rowblocks.bundled_emulated)."""
    return bundled_emulated(tmp_path_factory, bundled_produced, "mish_grad")


def independent(case: Path, m: dict) -> np.ndarray:
    """tests/independent_kernels.py's mish_grad (ops-nn's golden's order) from the manifest alone."""
    from independent_kernels import mish_grad

    t = harness.tensors(m)
    ins = {n: harness.view(harness.storage(case, t[n]), t[n]).astype(F32) for n in ("grad", "x", T)
           if not t[n].get("null")}
    with np.errstate(all="ignore"):
        return mish_grad(ins["grad"], ins["x"], ins.get(T))


def test_the_emulated_kernel_passes_every_bundled_case(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "mish_grad")


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    assert independent_dumps(suite, tmp_path / "own", independent, "xGrad") == 40
    assert not not_passing(tmp_path / "own", tmp_path / "own.json")


# each defect: bundled cases it must fail (the id's second part)
FAILS = {"mishgrad-tanhx-ignored": ("random", "tanhx_near_one", "cancelling", "wide_ranges", "large"),
         "mishgrad-sign-slip": ("random", "no_tanhx", "cancelling", "large"),
         "mishgrad-exp-of-x": ("random", "no_tanhx", "cancelling", "wide_ranges", "large")}


@pytest.mark.parametrize("variant", [*FAILS, "mishgrad-sigmoid-form"])
def test_each_defect_fails_and_the_legitimate_variant_passes(suite, tmp_path, variant):
    assert_named_cases_fail(suite, tmp_path, variant, FAILS, 51)


# ---------------------------------------------------------------- the contract


def descs(**changes) -> dict[str, TensorDesc]:
    return {**{n: TensorDesc(D.FLOAT16, (3, 4)) for n in ("grad", "x", T, "xGrad")}, **changes}


@pytest.mark.parametrize("product,tensors,status", [
    ("950", descs(), SUCCESS),
    ("950", descs(**{T: TensorDesc(D.FLOAT16, (3, 4), null=True)}), SUCCESS),
    ("950", {n: TensorDesc(D.BFLOAT16, (2, 0)) for n in ("grad", "x", T, "xGrad")}, SUCCESS),
    ("950", descs(x=TensorDesc(D.FLOAT16, (3, 4), null=True)), NULLPTR),
    ("950", descs(xGrad=TensorDesc(D.FLOAT16, (3, 4), null=True)), NULLPTR),
    ("950", descs(**{T: TensorDesc(D.FLOAT32, (3, 4))}), INVALID),
    ("950", descs(grad=TensorDesc(D.BFLOAT16, (3, 4))), INVALID),
    ("950", descs(xGrad=TensorDesc(D.FLOAT32, (3, 4))), INVALID),
    ("950", descs(**{T: TensorDesc(D.FLOAT16, (1, 4))}), INVALID),
    ("950", descs(x=TensorDesc(D.FLOAT16, (4, 3))), INVALID),
    ("950", {n: TensorDesc(D.FLOAT32, (1,) * 9) for n in ("grad", "x", T, "xGrad")}, INVALID),
    ("950", {n: TensorDesc(D.lookup("float64"), (3,)) for n in ("grad", "x", T, "xGrad")}, INVALID),
])
def test_contract(product, tensors, status):
    assert check(SPEC, product, tensors).status == status
    assert set(SPEC.products) == {"950"} and "generated from the OpDef" in CONTRACT_NOTES


# ---------------------------------------------------------------- ops-nn's suite


def test_ttk_suite_imports_whole_with_tanhx_and_passes(tmp_path):
    """activation/mish_grad's TTK file: 5 of 5 import as aclnnMishGrad, 3 with tanhxOptional given (filled from the
    case's range like the other inputs), 2 with it null; every case passes the emulated kernel (the constant 65500
    case MISTRUSTED, as every constant case: its golden is -inf in float16)."""
    import json

    r = run_cli("convert", TTK, "-o", tmp_path / "yaml")
    assert r.exit_code == 0, r.output
    cases = [c for p in sorted((tmp_path / "yaml").glob("*.yaml")) for c in read_yaml(p)["cases"]]
    given = {c["name"] for c in cases if not (c.get("tensors") or {}).get(T, {}).get("nullptr")}
    assert len(cases) == 5 and given == {"mish_grad_fuzz_100", "mish_grad_fuzz_154", "mish_grad_fuzz_28"}
    out = tmp_path / "out"
    assert run_cli("gen", tmp_path / "yaml", "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    assert run_cli("verify", out, "--json", tmp_path / "v.json").exit_code == 0
    statuses = sorted(c["status"] for c in json.loads((tmp_path / "v.json").read_text())["cases"])
    assert statuses == ["MISTRUSTED"] + ["PASS"] * 4  # (fuzz_57: grad and x one constant, tanhx null)
