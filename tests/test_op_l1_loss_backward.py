"""aclnnL1LossBackward: the golden against an exact oracle, the kernel, the variants, the contract, ops-nn's suites.

Oracle: the doc's gradOutput * sign(self - target) (/ numel of the output for mean), in Fractions, the sign from
the difference's sign (no code shared with the op's `exact`). Independent float32 kernel: ATen's composite
l1_loss autograd (mean backward grad / numel, then abs backward * sgn(self - target), the sign as
(0 < d) - (d < 0)), in numpy, from the manifest alone.

ops-nn's suites (tests/ops_nn_suites/, unmodified): loss/l1_loss_grad/tests/st/aclnnL1LossBackward/
atk_aclnnL1LossBackward.json (211 cases) and loss/l1_loss_grad/tests/st/arch35/ttk_kernel_l1_loss_grad_st.csv
(99 cases of the graph op L1LossGrad); every case imports, and each golden is the oracle rounded once.
"""

from __future__ import annotations

import itertools
import math
from exactq import Fraction, PackageFraction
from pathlib import Path

import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.elementwise.l1_loss_backward import CONTRACT_NOTES, SPEC, tiling_cof

from helpers import manifest, read_yaml, run_cli, tensor
from loss_oracle import logical
from shared import linked_copy

F32 = np.float32
SUITES = Path(__file__).parent / "ops_nn_suites"
ATK, TTK = "atk_aclnnL1LossBackward.json", "ttk_kernel_l1_loss_grad_st.csv"
INPUTS = ("gradOutput", "self", "target")


def oracle(dy, x, y, reduction: int, n: int) -> list[Fraction]:
    """dy * sign(x - y) / N (mean) or dy * sign(x - y), exactly (finite inputs)."""
    out = []
    for g, a, b in zip(dy.tolist(), x.tolist(), y.tolist()):
        d = Fraction(a) - Fraction(b)
        s = (d > 0) - (d < 0)
        out.append(Fraction(g) * s / (n if reduction == 1 else 1))
    return out


def sample(n: int, seed: int) -> dict[str, np.ndarray]:
    """dy of wide exponents; x, y from a few values, so a quarter are ties (x == y)."""
    rng = np.random.default_rng(seed)
    dy = (rng.choice([-1.0, 1.0], n) * np.exp2(rng.uniform(-40, 40, n)) * rng.uniform(1, 2, n)).astype(F32)
    x = rng.choice([-1.5, 0.0, 2.0, 3.25], n).astype(F32)
    y = rng.choice([-1.5, 0.0, 2.0, 3.25], n).astype(F32)
    return {"gradOutput": dy.astype(np.float64), "self": x.astype(np.float64), "target": y.astype(np.float64)}


def values(t: dict, reduction: int, shape: tuple[int, ...]) -> dict:
    return {**t, "reduction": reduction, **SPEC.case_values({"gradInput": shape, "self": shape})}


@pytest.mark.parametrize("reduction,shape", [(0, (500,)), (2, (500,)), (1, (500,)), (1, (3, 5461)), (1, (2**24 + 3,))])
def test_reference_bound_scale_and_exact_against_the_oracle(reduction, shape):
    t = sample(500, seed=reduction + len(shape))
    v = values(t, reduction, shape)
    ref = SPEC.reference(v)
    n = math.prod(shape)
    want = oracle(t["gradOutput"], t["self"], t["target"], reduction, n)
    for i, w in enumerate(want):
        val, b, s = (Fraction(float(a[i])) for a in (ref.value, ref.bound, ref.scale))
        assert abs(val - w) <= b and abs(w) <= s, (reduction, shape, i)
        exact = SPEC.exact({**v, **{k: PackageFraction(float(t[k][i])) for k in INPUTS}})
        assert exact == w


def test_kernel_known_answers():
    """The doc's example (mean over 4), ties, NaN and infinities as the two compares give them, and the cof."""
    t = {"gradOutput": np.array([0, 1, 2, 3], F32), "self": np.array([0, 1, 2, 3], F32),
         "target": np.array([1, 1, 1, 1], F32), "reduction": 1, **SPEC.case_values({"gradInput": (2, 2), "self": (2, 2)})}
    out = SPEC.kernel(t)
    assert out.tolist() == [0.0, 0.0, 0.5, 0.75] and np.signbit(out[0]) and not np.signbit(out[1])
    nan, inf = math.nan, math.inf
    s = {"gradOutput": np.array([1, -1, 1, inf, -2, 1], F32), "self": np.array([nan, nan, inf, 1, -inf, 3e38], F32),
         "target": np.array([1, 1, inf, 1, 5, -3e38], F32), "reduction": 0}
    got = SPEC.kernel(s)
    assert got[:3].tolist() == [0.0, 0.0, 0.0] and np.signbit(got[1]) and not np.signbit(got[0])
    assert np.isnan(got[3]) and got[4] == 2.0 and got[5] == 1.0
    assert np.array_equal(SPEC.ieee({**s, **{k: v.astype(np.float64) for k, v in s.items() if k in INPUTS}}), got,
                          equal_nan=True)
    # cof: 1.0f / 7 / 7 in float32 is not fl32(1 / 49); a 0-d output is [1]
    c = tiling_cof((7, 7))
    assert c == float(F32(F32(1 / F32(7)) / F32(7))) and c != float(F32(1 / 49))
    assert tiling_cof(()) == 1.0 and SPEC.case_values({"gradInput": (), "self": ()})["cof"] == 1.0


def test_case_values_divide_by_the_outputs_numel():
    v = SPEC.case_values({"gradOutput": (8,), "self": (1, 8), "target": (6, 1), "gradInput": (6, 8)})
    assert v == {"numel": 48, "numel_self": 8, "cof": tiling_cof((6, 8))}


def round_exact(dy: np.ndarray, sign: np.ndarray, n: int, dtype: D.DType) -> np.ndarray:
    """sign * dy / n rounded once to dtype, exactly: q = dy / n in float64 is within half an ulp of the exact
    quotient, and rounding is monotonic, so where q's two float64 neighbours round alike that is the exact
    value's rounding; elsewhere (a midpoint within reach) Fractions decide (D.round_fraction)."""
    q = sign * dy / n
    lo, hi = np.nextafter(q, -np.inf), np.nextafter(q, np.inf)
    r_lo, r, r_hi = (D.round_from_f64(v, dtype).astype(np.float64) for v in (lo, q, hi))
    for i in np.flatnonzero(r_lo != r_hi):
        r[i] = D.round_fraction(Fraction(float(sign[i])) * Fraction(float(dy[i])) / n, dtype)
    return r


def round_oracle(case: Path) -> tuple[int, int]:
    """The case's golden against the oracle rounded once to gradInput's dtype: (elements checked, mismatches)."""
    m = manifest(case)
    out = tensor(m, "gradInput")
    shape = tuple(out["shape"])
    t = {n: np.broadcast_to(logical(case, tensor(m, n)).astype(np.float64), shape).reshape(-1) for n in INPUTS}
    reduction = {a["name"]: a["value"] for a in m.get("attributes", [])}["reduction"]
    g = logical(case, out, "golden").astype(np.float64).reshape(-1)
    finite = np.isfinite(t["gradOutput"]) & np.isfinite(t["self"]) & np.isfinite(t["target"])
    sign = np.sign(t["self"][finite] - t["target"][finite])  # (float64: distinct floats never differ by 0)
    want = round_exact(t["gradOutput"][finite], sign, math.prod(shape) if reduction == 1 else 1, D.lookup(out["dtype"]))
    return int(finite.sum()), int((want != g[finite]).sum())


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16, D.FLOAT32], ids=lambda d: d.name)
def test_every_16bit_self_golden_is_the_oracle_with_the_kernels_signed_zeros(dtype):
    """The exhaustive oracle (instead of a `textbook`: mpmath cannot carry the sign of the exact zeros at
    self == target, where the kernel's +0 * (dy * cof) is -0 for a negative dy, and the golden follows it): every
    fp16 and bf16 self (float32: those widened) against targets 0 and 1.5, dy 1 and -0.0013, reductions none and
    mean over 3; each golden bit for bit the oracle rounded once, zeros signed as +0 * dy."""
    x = np.concatenate([np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(d.np_dtype).astype(np.float64)
                        for d in (D.FLOAT16, D.BFLOAT16)])
    x = x[np.isfinite(x)]
    checked = 0
    for target, dy_value, (reduction, n) in itertools.product((0.0, 1.5), (1.0, -0.0013), ((0, 1), (1, 3))):
        dy = np.full(x.shape, dy_value).astype(dtype.np_dtype).astype(np.float64)
        y = np.full(x.shape, target)
        with np.errstate(over="ignore"):  # (bf16 values beyond float16's range become +-inf: sign(inf - y) too)
            ins = {"gradOutput": dy.astype(dtype.np_dtype), "self": x.astype(dtype.np_dtype),
                   "target": y.astype(dtype.np_dtype)}
        xs = ins["self"].astype(np.float64)
        got, _ = golden(SPEC, ins, dtype, {"reduction": reduction, **SPEC.case_values({"gradInput": (n,), "self": (n,)})})
        want = round_exact(dy, np.sign(xs - y), n, dtype)
        want = np.where(want == 0, np.copysign(0.0, dy), want)  # (+0 * dy)
        assert np.array_equal(got.astype(np.float64), want) and np.array_equal(np.signbit(got), np.signbit(want))
        checked += x.size
    assert checked == 8 * x.size


def test_round_exact_settles_midpoints_with_fractions():
    """A bf16 midpoint (1 + 2^-8) / 1 and a quotient just off one: the neighbours' test sends them to Fractions."""
    dy = np.array([1 + 2.0**-8, 3 * (1 + 2.0**-8) + 3 * 2.0**-40])
    got = round_exact(dy, np.ones(2), 1, D.BFLOAT16)
    assert got[0] == 1.0
    got = round_exact(np.array([3 * (1 + 2.0**-8) + 2.0**-30]), np.ones(1), 3, D.BFLOAT16)
    assert got[0] == 1.0078125


@pytest.fixture(scope="module")
def suites(tmp_path_factory):
    """ops-nn's ATK and TTK files converted, generated, emulated: (the convert output, the cases)."""
    work = tmp_path_factory.mktemp("l1suites")
    r = run_cli("convert", SUITES / ATK, SUITES / TTK, "-o", work / "yaml")
    assert r.exit_code == 0 and "skipped" not in r.output, r.output
    out = work / "out"
    assert run_cli("gen", work / "yaml", "-o", out, "--jobs", "1").exit_code == 0
    assert run_cli("emulate", out, "--jobs", "1").exit_code == 0
    return r.output, out


def test_ops_nn_suites_import_every_case_and_pass_the_950_kernel(suites):
    text, out = suites
    assert "converted 310 cases from 2 files" in text
    docs = [read_yaml(p) for p in sorted((out.parent / "yaml").glob("*.yaml"))]
    assert sorted(len(d["cases"]) for d in docs) == [99, 211]
    reductions = {c["attributes"]["reduction"] for d in docs for c in d["cases"]}
    assert reductions == {0, 1, 2}
    r = run_cli("verify", out)
    assert r.exit_code == 0 and "310 cases (310 precision, 0 contract): 310 PASS" in r.output, r.output[-2000:]


def test_ops_nn_suites_goldens_are_the_oracle_rounded_once(suites):
    _, out = suites
    checked = bad = 0
    for case in sorted(p.parent for p in out.glob("*/case.json")):
        c, b = round_oracle(case)
        checked, bad = checked + c, bad + b
    assert bad == 0 and checked > 200_000


def test_ops_nn_suites_catch_the_mean_divisor_defect(suites, tmp_path):
    _, out = suites
    work = linked_copy(out, tmp_path / "copy")
    assert run_cli("emulate", work, "--defect", "mean-forgotten").exit_code == 0
    r = run_cli("verify", work)
    assert r.exit_code == 1 and " FAIL" in r.output


def descs(**changes) -> dict[str, TensorDesc]:
    base = {n: TensorDesc(D.FLOAT16, (3, 4)) for n in (*INPUTS, "gradInput")}
    return {**base, **changes}


@pytest.mark.parametrize("product,tensors,attrs,status", [
    ("950", descs(), {"reduction": 1}, SUCCESS),
    ("950", descs(self=TensorDesc(D.FLOAT16, (3, 4), null=True)), {"reduction": 1}, NULLPTR),
    ("950", descs(gradInput=TensorDesc(D.FLOAT16, (3, 4), null=True)), {"reduction": 1}, NULLPTR),
    ("A2", descs(target=TensorDesc(D.BFLOAT16, (3, 4))), {"reduction": 1}, SUCCESS),  # promoted to float32
    ("A2", descs(gradInput=TensorDesc(D.BFLOAT16, (3, 4))), {"reduction": 1}, SUCCESS),  # a final Cast
    ("910", descs(gradOutput=TensorDesc(D.FLOAT32, (3, 4))), {"reduction": 0}, SUCCESS),
    ("910", descs(self=TensorDesc(D.BFLOAT16, (3, 4))), {"reduction": 0}, INVALID),
    ("310P", descs(gradInput=TensorDesc(D.BFLOAT16, (3, 4))), {"reduction": 0}, INVALID),
    ("950", descs(), {"reduction": 3}, INVALID),
    ("950", descs(), {"reduction": -1}, INVALID),
    ("950", descs(gradOutput=TensorDesc(D.FLOAT16, ())), {"reduction": 1}, SUCCESS),
    ("950", descs(self=TensorDesc(D.FLOAT16, (1, 4))), {"reduction": 1}, SUCCESS),
    ("950", descs(self=TensorDesc(D.FLOAT16, (3, 5))), {"reduction": 1}, INVALID),
    ("950", descs(gradInput=TensorDesc(D.FLOAT16, (4,))), {"reduction": 1}, INVALID),
    ("950", {n: TensorDesc(D.FLOAT16, (1,) * 8 + (2,)) for n in (*INPUTS, "gradInput")}, {"reduction": 1}, INVALID),
    ("950", {n: TensorDesc(D.FLOAT16, (0, 3)) for n in (*INPUTS, "gradInput")}, {"reduction": 1}, SUCCESS),
])
def test_contract(product, tensors, attrs, status):
    assert check(SPEC, product, tensors, attrs).status == status


def test_declaration():
    assert "310B" not in SPEC.products
    assert "bfloat16" not in SPEC.products["910"] and "161002" in CONTRACT_NOTES


def aten_device(op: str, ins: dict, tensors: dict, attrs: dict) -> np.ndarray:
    """ATen's composite gradient in float32 from the manifest alone: (dy / N) * sgn(x - y), N = numel of the output
    for mean; rounded to the promoted input dtype (float32 unless the three agree), then cast to gradInput's."""
    assert op == "aclnnL1LossBackward"
    x, y, dy = (np.asarray(ins[k], dtype=F32) for k in ("self", "target", "gradOutput"))
    n = math.prod(tensors["gradInput"]["shape"]) if attrs["reduction"] == 1 else 1
    kinds = {tensors[k]["dtype"] for k in INPUTS}
    inner = D.lookup(kinds.pop() if len(kinds) == 1 else "float32").np_dtype
    with np.errstate(all="ignore"):
        d = x - y
        sgn = (F32(0) < d).astype(F32) - (d < F32(0)).astype(F32)
        result = (dy / F32(n)) * sgn
        return result.astype(inner).astype(F32).astype(D.lookup(tensors["gradInput"]["dtype"]).np_dtype)
