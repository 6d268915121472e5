"""aclnnSmoothL1LossBackward: the golden against an exact oracle, the kernel, the variants, the contract, ops-nn's suites.

Oracle: gradOut * (d / beta where |d| < beta, else sign(d)) / N (N = numel(self) for mean), d = self - target: in
float64 with a relative bound, in Fractions where that bound leaves the rounding open (tests/loss_oracle.py); no
code shared with the op's reference or `exact`. Independent float32 kernel: PyTorch's smooth_l1_backward
(aten/src/ATen/native/cpu/PointwiseOpsKernel.cpp: x <= -beta ? -norm * grad : x >= beta ? norm * grad :
norm * x * grad / beta, norm = 1 / input.numel() for mean; beta = 0 is l1_loss), in numpy, from the manifest alone.

ops-nn's suites (tests/ops_nn_suites/, unmodified): loss/smooth_l1_loss_grad_v2/tests/st/aclnnSmoothL1LossBackward/
atk_aclnnSmoothL1LossBackward.json (201 cases) and loss/smooth_l1_loss_grad_v2/tests/st/arch35/
ttk_kernel_smooth_l1_loss_grad_v2_st.csv (99 cases of the graph op SmoothL1LossGradV2, sigma 0.7 to 1): every case
imports and passes the 950 kernel, each golden the oracle rounded once.
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
from aclnn_cli.ops.elementwise.smooth_l1_loss_backward import CONTRACT_NOTES, SPEC, mean_cof

from helpers import read_yaml, run_cli, tensor
from loss_oracle import case_arrays, logical, round_interval
from shared import linked_copy

F32 = np.float32
SUITES = Path(__file__).parent / "ops_nn_suites"
ATK, TTK = "atk_aclnnSmoothL1LossBackward.json", "ttk_kernel_smooth_l1_loss_grad_v2_st.csv"
INPUTS = ("gradOut", "self", "target")
REL = 6 * 2.0**-53  # d, d / beta, * dy, / n round once each; a d within an ulp of beta may switch branch (< 2 u)


def exact_value(dy: float, x: float, y: float, beta: float, n: int) -> Fraction:
    d = Fraction(x) - Fraction(y)
    b = Fraction(beta)
    g = d / b if abs(d) < b else Fraction((d > 0) - (d < 0))
    return Fraction(dy) * g / n


def oracle(dy, x, y, beta: float, n: int, dtype: D.DType) -> np.ndarray:
    """The formula rounded once to dtype, for finite inputs."""
    with np.errstate(all="ignore"):
        d = x - y
        g = np.sign(d) if beta == 0 else np.where(np.abs(d) < beta, d / beta, np.sign(d))
        value = dy * g / n
    return round_interval(value, REL, dtype,
                          lambda i: D.round_fraction(exact_value(float(dy[i]), float(x[i]), float(y[i]), beta, n), dtype))


def check_case(case: Path) -> tuple[int, int]:
    """(finite elements checked, goldens that are not the oracle rounded once)."""
    m, t, g, attrs = case_arrays(case, INPUTS, "gradInput")
    finite = np.isfinite(t["gradOut"]) & np.isfinite(t["self"]) & np.isfinite(t["target"])
    n = math.prod(tensor(m, "self")["shape"]) if attrs["reduction"] == 1 else 1
    want = oracle(*(t[k][finite] for k in INPUTS), float(attrs["beta"]), n, D.lookup(tensor(m, "gradInput")["dtype"]))
    return int(finite.sum()), int((want != g[finite]).sum())


def values(t: dict, reduction: int, beta: float, n: int, scalar_dy: bool = False) -> dict:
    return {**t, "reduction": reduction, "beta": beta,
            **SPEC.case_values({"gradOut": (1,) if scalar_dy else (n,), "self": (n,), "gradInput": (n,)})}


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16], ids=lambda d: d.name)
def test_every_16bit_self_golden_is_the_oracle_with_the_kernels_signed_zeros(dtype):
    """Every fp16 and bf16 self against targets 0 and 1.5, dy 1 and -0.0013, beta 1, 0.3 and 0 (the L1 limit),
    reductions none and mean over 3; each golden bit for bit the oracle rounded once, its zeros +0 * dy or an underflow
    of the value's sign (instead of a
    `textbook`: mpmath has no signed zero for self == target, where the kernel's (0 + 0) + 0 times dy is -0 for a
    negative dy, and the golden follows it)."""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype.np_dtype).astype(np.float64)
    x = x[np.isfinite(x)]
    checked = 0
    for target, dy_value, beta, (reduction, n) in itertools.product((0.0, 1.5), (1.0, -0.0013), (1.0, 0.3, 0.0),
                                                                    ((0, 1), (1, 3))):
        beta = float(F32(beta))
        dy = np.full(x.shape, dy_value).astype(dtype.np_dtype).astype(np.float64)
        y = np.full(x.shape, target)
        ins = {"gradOut": dy.astype(dtype.np_dtype), "self": x.astype(dtype.np_dtype), "target": y.astype(dtype.np_dtype)}
        got, _ = golden(SPEC, ins, dtype, values({}, reduction, beta, n))
        want = oracle(dy, x, y, beta, n, dtype)
        # zeros: +0 * dy where the factor is 0 (((0 + 0) + 0) * dy), else the sign of the value that underflowed
        sign = np.where(x == y, dy, dy * (x - y))
        want = np.where(want == 0, np.copysign(0.0, sign), want)
        bad = np.flatnonzero((got.astype(np.float64) != want) | (np.signbit(got) != np.signbit(want)))
        assert bad.size == 0, [(x[i], target, dy_value, beta, n, float(got[i]), want[i]) for i in bad[:5]]
        checked += x.size
    assert checked == 24 * x.size


def sample(n: int, seed: int) -> dict[str, np.ndarray]:
    """dy of wide exponents; x - y spread around +-beta, with exact hits of +-beta and of 0."""
    rng = np.random.default_rng(seed)
    dy = (rng.choice([-1.0, 1.0], n) * np.exp2(rng.uniform(-40, 40, n)) * rng.uniform(1, 2, n)).astype(F32)
    x = rng.uniform(-3, 3, n).astype(F32)
    y = np.where(rng.random(n) < 0.2, x - rng.choice([0.75, -0.75, 0.0], n), rng.uniform(-3, 3, n)).astype(F32)
    return {"gradOut": dy.astype(np.float64), "self": x.astype(np.float64), "target": y.astype(np.float64)}


@pytest.mark.parametrize("reduction,beta,n", [(0, 0.75, 1), (2, 0.0, 1), (1, 0.75, 5461), (1, 3.0, 2**24 + 3),
                                              (0, 1e-7, 1)])
def test_reference_bound_scale_and_exact_against_the_oracle(reduction, beta, n):
    t = sample(400, seed=reduction + n % 7)
    beta = float(F32(beta))
    v = values(t, reduction, beta, n)
    ref = SPEC.reference(v)
    for i in range(400):
        w = exact_value(t["gradOut"][i], t["self"][i], t["target"][i], beta, n if reduction == 1 else 1)
        val, b, s = (Fraction(float(a[i])) for a in (ref.value, ref.bound, ref.scale))
        assert abs(val - w) <= b and abs(w) <= s, (reduction, beta, i)
        assert SPEC.exact({**v, **{k: PackageFraction(float(t[k][i])) for k in INPUTS}}) == w


def test_kernel_known_answers():
    """The doc's example (beta 1, none), the two DAGs at |d| = beta, beta under 1e-6, NaN and infinities."""
    t = values({"gradOut": np.ones(8, F32), "self": np.arange(8, dtype=F32), "target": np.ones(8, F32)}, 0, 1.0, 8)
    assert SPEC.kernel(t).tolist() == [-1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    # |d| = beta = 0.7: the tensor DAG gives d * fl32(1 / 0.7), the Scalar DAG +-1
    b = float(F32(0.7))
    at = {"gradOut": np.ones(2, F32), "self": np.array([b, -b], F32), "target": np.zeros(2, F32)}
    tensor_dag = SPEC.kernel(values(at, 0, b, 2))
    assert tensor_dag.tolist() == [float(F32(b) * (F32(1) / F32(b))), float(-F32(b) * (F32(1) / F32(b)))]
    assert SPEC.kernel(values(at, 0, b, 2, scalar_dy=True)).tolist() == [1.0, -1.0]
    # beta 0: the tensor DAG's 0 * NaN at d = 0 (an edge; the golden is 0), the Scalar DAG's (1 + -1) + 0 = 0
    z = {"gradOut": np.array([2, 2, -2], F32), "self": np.array([1, 0, 3], F32), "target": np.array([1, 1, 1], F32)}
    got = SPEC.kernel(values(z, 0, 0.0, 3))
    assert np.isnan(got[0]) and got[1:].tolist() == [-2.0, -2.0]
    assert SPEC.kernel(values(z, 0, 0.0, 3, scalar_dy=True)).tolist() == [0.0, -2.0, -2.0]
    where, device = SPEC.edge(values({k: v.astype(np.float64) for k, v in z.items()}, 0, 0.0, 3))
    assert where.tolist() == [True, False, False] and np.isnan(device[0])
    assert SPEC.reference(values({k: v.astype(np.float64) for k, v in z.items()}, 0, 0.0, 3)).value.tolist() == \
        [0.0, -2.0, -2.0]
    nan, inf = math.nan, math.inf
    s = values({"gradOut": np.array([1, 1, inf, -inf, 1], F32), "self": np.array([nan, inf, 2, 1, inf], F32),
                "target": np.array([0, 0, 0, 1, inf], F32)}, 0, 1.0, 5)
    got = SPEC.kernel(s)
    assert np.isnan(got[0]) and got[1] == 1.0 and got[2] == inf and np.isnan(got[3]) and np.isnan(got[4])
    assert np.array_equal(SPEC.ieee({**s, **{k: s[k].astype(np.float64) for k in INPUTS}}), got, equal_nan=True)


def test_case_values_divide_by_selfs_numel():
    """numel(self) (the tiling reads predict's storage shape; the op_api does not broadcast it), a 0-d self is 1;
    cof = (float)(1.0 / (double)N); the Scalar DAG for any one-element gradOut."""
    v = SPEC.case_values({"gradOut": (8,), "self": (1, 8), "target": (6, 1), "gradInput": (6, 8)})
    assert v == {"numel": 8, "numel_out": 48, "cof": float(F32(1 / 8)), "scalar_dy": 0}
    assert SPEC.case_values({"gradOut": (1, 1), "self": (), "target": (), "gradInput": (1, 1)})["scalar_dy"] == 1
    assert SPEC.case_values({"gradOut": (), "self": (), "target": (), "gradInput": ()})["numel"] == 1
    assert mean_cof(49) == float(F32(1.0 / 49)) and mean_cof(3 * 5461) == float(F32(1.0 / (3 * 5461)))


def descs(**changes) -> dict[str, TensorDesc]:
    return {**{n: TensorDesc(D.FLOAT16, (3, 4)) for n in (*INPUTS, "gradInput")}, **changes}


@pytest.mark.parametrize("product,tensors,attrs,status", [
    ("950", descs(), {"reduction": 1, "beta": 1.0}, SUCCESS),
    ("950", descs(target=TensorDesc(D.FLOAT16, (3, 4), null=True)), {"reduction": 1, "beta": 1.0}, NULLPTR),
    ("A2", descs(target=TensorDesc(D.BFLOAT16, (3, 4)), gradInput=TensorDesc(D.FLOAT32, (3, 4))),
     {"reduction": 1, "beta": 1.0}, SUCCESS),
    ("910", descs(gradInput=TensorDesc(D.BFLOAT16, (3, 4))), {"reduction": 0, "beta": 1.0}, INVALID),
    ("310P", descs(self=TensorDesc(D.FLOAT32, (3, 4))), {"reduction": 0, "beta": 1.0}, SUCCESS),
    ("950", descs(), {"reduction": 3, "beta": 1.0}, INVALID),
    ("950", descs(), {"reduction": 1, "beta": -0.5}, INVALID),
    ("950", descs(), {"reduction": 1, "beta": math.nan}, INVALID),
    ("950", descs(), {"reduction": 1, "beta": 0.0}, SUCCESS),
    ("950", descs(self=TensorDesc(D.FLOAT16, (1, 4)), gradOut=TensorDesc(D.FLOAT16, ())), {"reduction": 1, "beta": 1.0},
     SUCCESS),
    ("950", descs(self=TensorDesc(D.FLOAT16, (3, 5))), {"reduction": 1, "beta": 1.0}, INVALID),
    ("950", descs(gradInput=TensorDesc(D.FLOAT16, (4,))), {"reduction": 1, "beta": 1.0}, INVALID),
    ("950", {n: TensorDesc(D.FLOAT16, (1,) * 8 + (2,)) for n in (*INPUTS, "gradInput")}, {"reduction": 1, "beta": 1.0},
     INVALID),
    ("950", {n: TensorDesc(D.FLOAT16, (0, 3)) for n in (*INPUTS, "gradInput")}, {"reduction": 1, "beta": 1.0}, SUCCESS),
])
def test_contract(product, tensors, attrs, status):
    assert check(SPEC, product, tensors, attrs).status == status


def test_declaration():
    assert "310B" not in SPEC.products
    assert "bfloat16" not in SPEC.products["910"] and "bfloat16" not in SPEC.products["310P"]
    assert "numel(self)" in CONTRACT_NOTES


def aten_device(op: str, ins: dict, tensors: dict, attrs: dict) -> np.ndarray:
    """PyTorch's smooth_l1_backward in float32 from the manifest alone, norm = fl32(1 / numel(self)) for mean (beta 0:
    l1_loss's sgn(d) * norm * grad); rounded to the promoted input dtype, then cast to gradInput's."""
    assert op == "aclnnSmoothL1LossBackward"
    x, y, dy = (np.asarray(ins[k], dtype=F32) for k in ("self", "target", "gradOut"))
    beta = F32(float(attrs["beta"]))
    norm = F32(1.0 / (math.prod(tensors["self"]["shape"]) or 1)) if attrs["reduction"] == 1 else F32(1)
    kinds = {tensors[k]["dtype"] for k in INPUTS}
    inner = D.lookup(kinds.pop() if len(kinds) == 1 else "float32").np_dtype
    with np.errstate(all="ignore"):
        d = x - y
        if beta == 0:
            result = np.sign(d) * norm * dy
        else:
            result = np.where(d <= -beta, -norm * dy, np.where(d >= beta, norm * dy, norm * d * dy / beta))
        return result.astype(inner).astype(F32).astype(D.lookup(tensors["gradInput"]["dtype"]).np_dtype)


@pytest.fixture(scope="module")
def suites(tmp_path_factory):
    """ops-nn's ATK and TTK files converted, generated, emulated: (the convert output, the cases)."""
    work = tmp_path_factory.mktemp("sl1suites")
    r = run_cli("convert", SUITES / ATK, SUITES / TTK, "-o", work / "yaml")
    assert r.exit_code == 0 and "converted 300 cases from 2 files" in r.output and "skipped" not in r.output, r.output
    out = work / "out"
    assert run_cli("gen", work / "yaml", "-o", out, "--jobs", "1").exit_code == 0
    assert run_cli("emulate", out, "--jobs", "1").exit_code == 0
    return out


def test_ops_nn_suites_import_every_case_and_pass_the_950_kernel(suites):
    docs = [read_yaml(p) for p in sorted((suites.parent / "yaml").glob("*.yaml"))]
    assert sorted(len(d["cases"]) for d in docs) == [99, 201]
    assert {c["attributes"]["beta"] for d in docs for c in d["cases"]} >= {0.7, 0.8, 0.9, 1.0}
    r = run_cli("verify", suites)
    assert r.exit_code == 0 and "300 cases (300 precision, 0 contract): 300 PASS" in r.output, r.output[-2000:]


def test_ops_nn_suites_goldens_are_the_oracle_rounded_once(suites):
    checked = bad = 0
    for case in sorted(p.parent for p in suites.glob("*/case.json")):
        c, b = check_case(case)
        checked, bad = checked + c, bad + b
    assert bad == 0 and checked > 200_000


def test_atk_case_165_ties_are_rounded_to_even(suites):
    """ATK case 165: a 0-d bfloat16 gradOut, mean over 8 * 19 * 16 = 2432 elements. Where gradOut holds the factor
    19, gradOut * d / 2432 is dyadic, for some elements exactly halfway between two bfloat16 values: the float64
    bound straddles the tie and the exact path rounds it to the even neighbour."""
    case = next(suites.glob("*-atk_aclnnSmoothL1LossBackward-165"))
    m, t, g, attrs = case_arrays(case, INPUTS, "gradInput")
    assert attrs == {"reduction": 1, "beta": 1.0} and g.size == 2432
    step = lambda v: Fraction(2) ** (math.frexp(v)[1] - 8)  # noqa: E731 (bfloat16's ulp at |v| in [2^(e-1), 2^e))
    ties = 0
    bits = logical(case, tensor(m, "gradInput"), "golden").reshape(-1).view(np.uint16)
    for i in range(g.size):
        w = exact_value(t["gradOut"][i], t["self"][i], t["target"][i], 1.0, 2432)
        if w and (abs(w) / step(float(w))).denominator == 2:
            ties += 1
            assert bits[i] % 2 == 0 and abs(Fraction(float(g[i])) - w) == step(float(w)) / 2, i
    assert ties == 10


def test_ops_nn_suites_catch_the_mean_divisor_defect(suites, tmp_path):
    work = linked_copy(suites, tmp_path / "copy")
    assert run_cli("emulate", work, "--defect", "mean-forgotten", "--jobs", "1").exit_code == 0
    r = run_cli("verify", work)
    assert r.exit_code == 1 and " FAIL" in r.output
