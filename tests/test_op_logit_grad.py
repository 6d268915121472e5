"""aclnnLogitGrad: goldens against an oracle of Fractions, an independent float32 kernel over every bundled case, the
defects, the kernel's edges, the contract, and ops-nn's own ATK suite.

The oracle is the doc's formula (loss/logit_grad/docs/aclnnLogitGrad.md): dx = dy / (x (1 - x)) for
eps <= x <= 1 - eps; 0 outside when eps >= 0; NaN outside [0, 1] when eps < 0; eps as the float the OpDef's attribute
holds. It is written here in Fractions, with IEEE's rules where an input is inf or NaN or x (1 - x) is a signed zero,
and rounded by tests/oracle.py's integer rounding: nothing of the op module or the tool's golden path.
The independent kernel is the doc's formula in numpy float32 in another arrangement: dy / (1 - x) / x, the window's
end tested as x + eps <= 1 in float64. (dy * (1 / (x (1 - x))) is not a correct arrangement: at a bfloat16 or float32
subnormal x the reciprocal overflows where the quotient does not; the gate fails it, the defect logit-reciprocal.)

ops-nn's suite (tests/ops_nn_suites/, unmodified): loss/logit_grad/tests/st/aclnnLogitGrad/atk_aclnnLogitGrad.json
(201 cases, 568 M elements); every case imports; those of up to 100,000 elements run here. (All 201 pass the emulated
kernel: scripts/catalogue.py --only loss/logit_grad, about a minute.)
"""

from __future__ import annotations

import math
from exactq import Fraction, PackageFraction, RATIONAL
from pathlib import Path

import numpy as np
import pytest

import harness
from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.elementwise.logit_grad import CONTRACT_NOTES, SPEC
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from oracle import fraction_bits
from rowblocks import (assert_named_cases_fail, atk_small_cases_pass, bundled_emulated,
                       independent_dumps, not_passing, passing_bundled_records)

F32 = np.float32
ATK = Path(__file__).parent / "ops_nn_suites" / "atk_aclnnLogitGrad.json"
DTYPES = (D.FLOAT32, D.FLOAT16, D.BFLOAT16)


# ---------------------------------------------------------------- the oracle


def doc_value(dy: float, x: float, eps: float) -> Fraction | float:
    """The doc's dx at one point: a Fraction where finite and nonzero, else the float IEEE gives (signed zeros,
    infinities, NaN)."""
    e = float(F32(eps))
    if e >= 0:
        inside = math.isfinite(x) and math.isfinite(e) and Fraction(e) <= Fraction(x) <= 1 - Fraction(e)
        if not inside:
            return 0.0
    elif not (0 <= x <= 1):  # (NaN x, eps < 0 or NaN: outside)
        return math.nan
    if math.isnan(dy):
        return math.nan
    p = Fraction(x) * (1 - Fraction(x))
    p_sign = -1.0 if p == 0 and math.copysign(1.0, x) < 0 else 1.0  # (x = -0: x (1 - x) is -0 in IEEE)
    if math.isinf(dy) or p == 0:
        return math.nan if dy == 0 else math.copysign(math.inf, dy * p_sign)
    q = Fraction(dy) / p
    return q if q != 0 else math.copysign(0.0, dy)


def bits_of(v: Fraction | float, dtype: D.DType) -> int:
    if isinstance(v, RATIONAL):
        return fraction_bits(v, dtype.name)
    return int(np.array(v, np.float64).astype(dtype.np_dtype).view(dtype.uint_dtype))


def edge_points(dtype: D.DType, eps: float) -> np.ndarray:
    """x at eps and 1 - eps (as the dtype holds them) and their neighbours, the poles, outside, specials."""
    npd = dtype.np_dtype
    e = float(F32(eps)) if math.isfinite(F32(eps)) else 0.25
    out = []
    for v in (e, 1.0 - e, 0.0, 1.0, 0.5):
        c = np.array(v, np.float64).astype(npd)
        up, down = (np.nextafter(c.astype(F32), F32(t)).astype(npd) for t in (2, -2))  # (float32 steps, then dtype)
        out += [c, up, down, np.array(c.view(dtype.uint_dtype) + 1).view(npd), np.array(c.view(dtype.uint_dtype) - 1).view(npd)]
    tiny = np.array(1, dtype.uint_dtype).view(npd)
    out += [tiny, -tiny, np.array(-0.0, npd), np.array(2.0, npd), np.array(-1.0, npd), np.array(np.inf, npd),
            np.array(-np.inf, npd), np.array(np.nan, npd), np.array(1e-3, npd)]
    return np.array([np.asarray(v, npd).item() for v in out], npd)


def sample(dtype: D.DType, eps: float, rng) -> tuple[np.ndarray, np.ndarray]:
    """2,000 random (dy, x) and every edge x against several dy (0, -0, +-inf, NaN, large, tiny)."""
    npd = dtype.np_dtype
    x = rng.uniform(-0.2, 1.2, 2000).astype(npd)
    dy = (rng.standard_normal(2000) * 100).astype(npd)
    edges = edge_points(dtype, eps)
    dys = np.array([1.0, -3.5, 0.0, -0.0, np.inf, -np.inf, np.nan, 60000.0, 1e-7], np.float64).astype(npd)
    ex, edy = np.meshgrid(edges, dys)
    return np.concatenate([dy, edy.ravel()]).astype(npd), np.concatenate([x, ex.ravel()]).astype(npd)


EPSES = (-1.0, 0.0, 0.1, 0.45, 7e-8, 1e-20, 0.5, 1.0, 1.5, math.nan, math.inf, -0.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_goldens_equal_the_oracle_rounded_once(dtype):
    """Every golden of 2,000 random and ~400 edge points per eps (12 eps: the two branches, eps = 0.45 whose float is
    below the double, 7e-8 where fl32(1 - eps) is above 1 - eps, 1e-20 where it is 1, an empty window, NaN, inf, -0)
    is the oracle's exact value rounded once, bit for bit, signed zeros and infinities included; and `exact` gives
    the oracle's Fraction at every finite point off the poles."""
    rng = np.random.default_rng(31)
    compared = 0
    for eps in EPSES:
        dy, x = sample(dtype, eps, rng)
        got, _ = golden(SPEC, {"dy": dy, "x": x}, dtype, {"eps": eps})
        got = got.view(dtype.uint_dtype)
        for i in range(x.size):
            want = doc_value(float(dy[i]), float(x[i]), eps)
            if isinstance(want, float) and math.isnan(want):
                assert np.isnan(got[i:i + 1].view(dtype.np_dtype).astype(np.float64))[0], (eps, dy[i], x[i])
            else:
                assert int(got[i]) == bits_of(want, dtype), (eps, float(dy[i]), float(x[i]), want)
            if isinstance(want, RATIONAL) or want == 0.0 and math.isfinite(float(dy[i])) and math.isfinite(float(x[i])):
                e = PackageFraction(eps) if math.isfinite(eps) else eps
                assert SPEC.exact({"dy": PackageFraction(float(dy[i])), "x": PackageFraction(float(x[i])), "eps": e}) == want
        compared += x.size
    assert compared > 25_000


def test_the_oracle_catches_a_wrong_window():
    """The oracle parts from a golden made with the double eps (not the float) and from one with the window open."""
    x, dy = np.array([0.449999988079071], F32), np.array([1.0], F32)
    assert doc_value(1.0, float(x[0]), 0.45) != 0.0  # (the float eps 0.449999988 holds x; the double 0.45 would not)
    assert doc_value(1.0, 0.25, 0.25) == Fraction(16, 3) and doc_value(1.0, 0.25000003, 0.25) != 0.0
    got, _ = golden(SPEC, {"dy": dy, "x": x}, D.FLOAT32, {"eps": 0.45})
    assert got[0] == F32(1.0 / (0.449999988079071 * 0.550000011920929))


# ---------------------------------------------------------------- the kernel and its edges


def test_kernel_known_answers():
    x = np.array([0.5, 0.25, 0.0, -0.0, 1.0, 1.5, -0.5, np.nan, np.inf], F32)
    dy = np.array([1.0, 3.0, 2.0, 2.0, -1.0, 1.0, 1.0, 1.0, 1.0], F32)
    below = SPEC.kernel({"x": x, "dy": dy, "eps": -1.0})
    assert below[:5].tolist() == [4.0, 16.0, np.inf, -np.inf, -np.inf] and np.isnan(below[5:]).all()
    zero = SPEC.kernel({"x": x, "dy": dy, "eps": 0.0})
    assert zero.tolist() == [4.0, 16.0, np.inf, -np.inf, -np.inf, 0.0, 0.0, 0.0, 0.0]
    assert SPEC.kernel({"x": x, "dy": dy, "eps": 0.3}).tolist() == [4.0] + [0.0] * 8
    assert np.isnan(SPEC.kernel({"x": x, "dy": dy, "eps": math.nan})[5:]).all()  # (NaN eps: the eps < 0 branch)


def test_edges_are_the_window_end_and_the_overflow_threshold():
    """x = fl32(1 - 7e-8) = 0.99999994 lies above 1 - 7e-8: the golden is 0, the kernel's quotient is accepted; a
    float16 quotient around 65,520 whose float32 value and exact value round to either side is too; nothing else."""
    x = np.array([0.99999994, 0.9999999, 0.5, 0.25], np.float64)
    where, device = SPEC.edge({"x": x, "dy": np.ones(4), "eps": 7e-8})
    assert where.tolist() == [True, False, False, False] and device[0] == F32(1) / (F32(0.99999994) * F32(5.9604645e-8))
    ref = SPEC.reference({"x": x, "dy": np.ones(4), "eps": 7e-8})
    assert ref.value[0] == 0.0 and ref.value[1] > 0
    exact_window = SPEC.variants["logit-exact-window"]({"x": x.astype(F32), "dy": np.ones(4, F32), "eps": 7e-8})
    assert exact_window[0] == 0.0 != device[0]  # (the legitimate variant differs from the kernel there, and passes)
    # dy / (x (1 - x)) = 65,520 (1 - 2^-30): below float16's overflow, its float32 rounding is 65,520 (inf in float16)
    xs = np.array([0.25], np.float64)
    dy = np.array([65520 * (1 - 2.0**-30) * 0.1875])
    where, device = SPEC.edge({"x": xs, "dy": dy, "eps": -1.0})
    assert where.tolist() == [bool(F32(dy[0]) / F32(0.1875) >= 65520)]


# ---------------------------------------------------------------- the bundled cases


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    """The bundled file generated and emulated: the session's cases (rowblocks.bundled_emulated)."""
    return bundled_emulated(tmp_path_factory, bundled_produced, "logit_grad")


def independent(case: Path, m: dict) -> np.ndarray:
    """The doc's formula in float32 from the manifest alone: dy / (1 - x) / x inside the window."""
    t = harness.tensors(m)
    x, dy = (harness.view(harness.storage(case, t[n]), t[n]).astype(F32) for n in ("x", "dy"))
    eps = F32(float(next(a["value"] for a in m["attributes"] if a["name"] == "eps")))
    with np.errstate(all="ignore"):
        q = dy / (F32(1) - x) / x
        if eps >= 0:
            inside = (x >= eps) & (x.astype(np.float64) + np.float64(eps) <= 1.0)
            return np.where(inside, q, F32(0))
        return np.where((x >= 0) & (x <= 1), q, F32(np.nan))


def test_the_emulated_kernel_passes_every_bundled_case(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "logit_grad")


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    assert independent_dumps(suite, tmp_path / "own", independent) == 88
    assert not not_passing(tmp_path / "own", tmp_path / "own.json")


# each defect: the bundled cases it must fail (the id's second part); it fails no case outside them by chance alone
FAILS = {"logit-open-window": ("at_eps", "at_eps_16bit", "eps_narrowed_to_float", "window_end_rounds_up"),
         "logit-sign-slip": ("random", "wide", "one", "large", "every_x", "every_dy", "near_poles"),
         "logit-eps-ignored": ("at_eps", "eps_special", "tiny_eps", "window_end_rounds_up"),
         "logit-zero-outside": ("outside_and_poles", "special_values", "every_x", "eps_special"),
         "logit-reciprocal": ("every_x",)}


@pytest.mark.parametrize("variant", [*FAILS, "logit-divide-twice", "logit-exact-window"])
def test_each_defect_fails_and_the_legitimate_variants_pass(suite, tmp_path, variant):
    assert_named_cases_fail(suite, tmp_path, variant, FAILS, 115)


# ---------------------------------------------------------------- the contract


def descs(**changes) -> dict[str, TensorDesc]:
    return {**{n: TensorDesc(D.FLOAT16, (3, 4)) for n in ("x", "dy", "out")}, **changes}


@pytest.mark.parametrize("product,tensors,status", [
    ("950", descs(), SUCCESS),
    ("A2", descs(**{n: TensorDesc(D.BFLOAT16, (2, 0)) for n in ("x", "dy", "out")}), SUCCESS),
    ("A3", descs(dy=TensorDesc(D.FLOAT16, (3, 4), null=True)), NULLPTR),
    ("950", descs(dy=TensorDesc(D.FLOAT32, (3, 4))), INVALID),
    ("950", descs(out=TensorDesc(D.BFLOAT16, (3, 4))), INVALID),
    ("950", descs(dy=TensorDesc(D.FLOAT16, (1, 4))), INVALID),
    ("A2", {n: TensorDesc(D.FLOAT16, (1,) * 9) for n in ("x", "dy", "out")}, INVALID),
    ("950", {n: TensorDesc(D.lookup("float64"), (3,)) for n in ("x", "dy", "out")}, INVALID),
])
def test_contract(product, tensors, status):
    assert check(SPEC, product, tensors, {"eps": -1.0}).status == status
    assert set(SPEC.products) == {"950", "A3", "A2"} and "generated from the OpDef" in CONTRACT_NOTES


# ---------------------------------------------------------------- ops-nn's suite


def atk_oracle_failures(out: Path) -> tuple[int, list]:
    """(elements checked, cases whose golden is not the oracle rounded once) over a generated OUT: each element
    through doc_value where float64 cannot settle the rounding, else float64 within 4 ulps."""
    checked, wrong = 0, []
    for case in sorted(p.parent for p in out.glob("*/case.json")):
        m = harness.load(case)
        t = harness.tensors(m)
        dtype = D.lookup(t["out"]["dtype"])
        x, dy = (harness.view(harness.storage(case, t[n]), t[n]).astype(np.float64).reshape(-1) for n in ("x", "dy"))
        got = harness.view(harness.storage(case, t["out"], "golden"), t["out"]).reshape(-1).view(dtype.uint_dtype)
        eps = float(next(a["value"] for a in m["attributes"] if a["name"] == "eps"))
        with np.errstate(all="ignore"):
            value = dy / (x * (1.0 - x))
            lo, hi = (D.round_from_f64(value * (1 + s * 2.0**-51), dtype).view(dtype.uint_dtype) for s in (-1, 1))
        unsure = np.flatnonzero((lo != hi) | ~np.isfinite(value) | (x < max(float(F32(eps)), 0.0))
                                | (x > 1 - max(float(F32(eps)), 0.0)))
        want = lo.copy()
        for i in unsure:
            v = doc_value(dy[i], x[i], eps)
            want[i] = got[i] if isinstance(v, float) and math.isnan(v) and np.isnan(
                got[i:i + 1].view(dtype.np_dtype).astype(F32))[0] else bits_of(v, dtype)
        if not np.array_equal(got, want):
            wrong.append(case.name)
        checked += x.size
    return checked, wrong


def test_ops_nn_atk_suite_imports_whole_and_its_small_cases_pass(tmp_path):
    """All 201 cases import (x's range the interval string "(0, 1)", eps a double drawn per case from [0, 0.5] or
    -1); the 113 of up to 100,000 elements are generated, emulated and verified (every one PASS), the independent
    kernel passes each, and their goldens are the oracle rounded once."""
    cases, small = atk_small_cases_pass(tmp_path, ATK, "logit_grad", independent, "out")
    assert len(cases) == 201 and len(small) == 113
    assert {c["inputs"]["x"]["uniform"][0] for c in cases} == {0.0}
    checked, wrong = atk_oracle_failures(tmp_path / "out")
    assert not wrong and checked > 500_000
