"""aclnnBinaryCrossEntropyBackward: the golden against an exact oracle, the kernel, the variants, the contract,
ops-nn's suites.

Oracle: the doc's grad_output * weight * (x - target) / (x (1 - x)) (/ numel for mean) with PyTorch's and the
kernel's clamp of the denominator at fl32(1e-12), in float64 and in Fractions where that leaves the rounding open
(tests/loss_oracle.py). Independent float32 kernel: PyTorch's binary_cross_entropy_backward_out_cpu
(aten/src/ATen/native/Loss.cpp: grad * (x - y) / max((1 - x) x, EPSILON), * weight, / numel), in numpy.

ops-nn's suites (tests/ops_nn_suites/, unmodified): loss/binary_cross_entropy_grad/tests/st/
aclnnBinaryCrossEntropyBackward/atk_aclnnBinaryCrossEntropyBackward.json (201 cases) and
loss/binary_cross_entropy_grad/tests/st/arch35/ttk_kernel_binary_cross_entropy_grad_st.csv (99 cases of the graph
op BinaryCrossEntropyGrad, 34 without a weight). 288 import; 12 are skipped with their reason (a float32 extreme
such as -3.4e38 that overflows the case's 16-bit dtype). Cases of up to 20,000 elements run here (164), those up to
a million in the slow test (69 more); the 55 larger (up to 897M elements, 37 GB of data) are not run.
"""

from __future__ import annotations

import itertools
import math
from exactq import Fraction, PackageFraction
from pathlib import Path

import numpy as np
import pytest
import yaml

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.elementwise.binary_cross_entropy_backward import CONTRACT_NOTES, EPS, SPEC

from helpers import manifest, read_yaml, run_cli
from loss_oracle import case_arrays, round_interval
from shared import linked_copy

F32 = np.float32
SUITES = Path(__file__).parent / "ops_nn_suites"
FILES = (SUITES / "atk_aclnnBinaryCrossEntropyBackward.json", SUITES / "ttk_kernel_binary_cross_entropy_grad_st.csv")
W = "weightOptional"
SMALL, LARGE = 20_000, 1_000_000


def oracle(t: dict, n: int, dtype: D.DType) -> np.ndarray:
    """dy w (x - y) / max((1 - x) x, eps) / n rounded once to dtype (finite inputs): float64 within 10 ulps, else
    Fractions."""
    x, y, dy, w = t["self"], t["target"], t["gradOutput"], t.get(W, np.ones_like(t["self"]))
    with np.errstate(all="ignore"):
        value = dy * (x - y) / np.maximum((1.0 - x) * x, EPS) * w / n

    def exact(i: int) -> float:
        xi, yi, gi, wi = (Fraction(float(a[i])) for a in (x, y, dy, w))
        return D.round_fraction(gi * (xi - yi) / max((1 - xi) * xi, Fraction(EPS)) * wi / n, dtype)

    return round_interval(value, 10 * 2.0**-53, dtype, exact)


def check_case(case: Path) -> tuple[int, int]:
    m = manifest(case)
    names = tuple(t["name"] for t in m["tensors"] if t["role"] == "input" and not t.get("null"))
    _, t, g, attrs = case_arrays(case, names, "out")
    out = next(x for x in m["tensors"] if x["name"] == "out")
    finite = np.all([np.isfinite(v) for v in t.values()], axis=0) if g.size else np.zeros(0, bool)
    n = math.prod(out["shape"]) if attrs["reduction"] == 1 else 1
    want = oracle({k: v[finite] for k, v in t.items()}, n, D.lookup(out["dtype"]))
    return int(finite.sum()), int((want != g[finite]).sum())


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16], ids=lambda d: d.name)
def test_every_16bit_self_golden_is_the_oracle_rounded_once(dtype):
    """Every fp16 and bf16 self (0 and 1, inside and outside [0, 1], near the clamp) against targets 0, 1 and 0.3,
    dy 1 and -0.0013, no weight and a weight of 1.75, reductions none and mean over 3: each golden the oracle
    rounded once. (No `textbook`: the generic test's target of 0 and no weight would leave the weight untested.)"""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype.np_dtype).astype(np.float64)
    x = x[np.isfinite(x)]
    checked = 0
    for target, dy_value, weight, (reduction, n) in itertools.product((0.0, 1.0, 0.3), (1.0, -0.0013), (None, 1.75),
                                                                       ((0, 1), (1, 3))):
        t = {"gradOutput": np.full(x.shape, dy_value), "self": x, "target": np.full(x.shape, target)}
        if weight is not None:
            t[W] = np.full(x.shape, weight)
        t = {k: v.astype(dtype.np_dtype).astype(np.float64) for k, v in t.items()}
        got, _ = golden(SPEC, {k: v.astype(dtype.np_dtype) for k, v in t.items()}, dtype,
                        {"reduction": reduction, **SPEC.case_values({"out": (n,)})})
        want = oracle(t, n, dtype)
        bad = np.flatnonzero(got.astype(np.float64) != want)
        assert bad.size == 0, [(x[i], target, dy_value, weight, n, float(got[i]), want[i]) for i in bad[:5]]
        checked += x.size
    assert checked == 24 * x.size


def test_kernel_known_answers_and_edges():
    t = {"gradOutput": np.array([1, 1, -1, 1, 2], F32), "self": np.array([0.5, 0, 1, -0.5, 0.25], F32),
         "target": np.array([0, 1, 0, 0, 0.25], F32), "reduction": 0, **SPEC.case_values({"out": (5,)})}
    out = SPEC.kernel(t)
    assert out[0] == 2.0 and out[1] == -1 / F32(EPS) and out[2] == -1 / F32(EPS) and out[4] == 0.0
    assert out[3] == F32(-0.5) / F32(EPS)  # (1 - x) x < 0: the clamp
    assert np.array_equal(SPEC.kernel({**t, W: np.full(5, 2, F32)}), out * 2)
    # dy (x - y) underflows float32 (the ops-nn TTK case 000146): the edge takes the kernel's 0
    e = {"gradOutput": np.array([-2.0**-126]), "self": np.array([2.0**-126]), "target": np.array([3.19e-8]),
         W: np.array([3.3]), "reduction": 1, **SPEC.case_values({"out": (12244,)})}
    where, device = SPEC.edge(e)
    assert where.tolist() == [True] and device[0] == 0.0 and SPEC.reference(e).value[0] > 1e-38


def test_reference_and_exact_against_the_oracle():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(0, 1, 400), [0.0, 1.0, -2.0, 1e-12, 1e-13, 0.9999999]]).astype(F32).astype(np.float64)
    t = {"self": x, "target": rng.uniform(0, 1, x.size).astype(F32).astype(np.float64),
         "gradOutput": rng.standard_normal(x.size).astype(F32).astype(np.float64),
         W: rng.uniform(0.5, 2, x.size).astype(F32).astype(np.float64)}
    for reduction, n in ((0, 1), (1, 406)):
        v = {**t, "reduction": reduction, "numel": n}
        ref = SPEC.reference(v)
        for i in range(x.size):
            w = Fraction(float(t["gradOutput"][i])) * (Fraction(float(x[i])) - Fraction(float(t["target"][i]))) / max(
                (1 - Fraction(float(x[i]))) * Fraction(float(x[i])), Fraction(EPS)) * Fraction(float(t[W][i])) / n
            assert abs(Fraction(float(ref.value[i])) - w) <= Fraction(float(ref.bound[i]))
            assert SPEC.exact({**v, **{k: PackageFraction(float(t[k][i])) for k in (*t,)}}) == w


def descs(**changes) -> dict[str, TensorDesc]:
    return {**{n: TensorDesc(D.FLOAT16, (3, 4)) for n in ("gradOutput", "self", "target", W, "out")}, **changes}


@pytest.mark.parametrize("product,tensors,attrs,status", [
    ("950", descs(), {"reduction": 1}, SUCCESS),
    ("950", descs(weightOptional=TensorDesc(D.FLOAT16, (3, 4), null=True)), {"reduction": 1}, SUCCESS),
    ("950", descs(target=TensorDesc(D.FLOAT16, (3, 4), null=True)), {"reduction": 1}, NULLPTR),
    ("A2", descs(target=TensorDesc(D.BFLOAT16, (3, 1)), out=TensorDesc(D.FLOAT32, (3, 4))), {"reduction": 1}, SUCCESS),
    ("310P", descs(self=TensorDesc(D.BFLOAT16, (3, 4))), {"reduction": 1}, INVALID),
    ("950", descs(self=TensorDesc(D.FLOAT16, (1, 4))), {"reduction": 1}, INVALID),  # out must be self's shape
    ("950", descs(self=TensorDesc(D.FLOAT16, ()), out=TensorDesc(D.FLOAT16, ())), {"reduction": 1}, INVALID),
    ("950", descs(), {"reduction": 3}, INVALID),
])
def test_contract(product, tensors, attrs, status):
    assert check(SPEC, product, tensors, attrs).status == status
    assert "OnesLike" in CONTRACT_NOTES


def aten_device(op: str, ins: dict, tensors: dict, attrs: dict) -> np.ndarray:
    """PyTorch's CPU formula in float32 from the manifest alone; rounded to the promoted dtype, then out's."""
    assert op == "aclnnBinaryCrossEntropyBackward"
    x, y, dy = (np.asarray(ins[k], dtype=F32) for k in ("self", "target", "gradOutput"))
    kinds = {tensors[k]["dtype"] for k in ins}
    inner = D.lookup(kinds.pop() if len(kinds) == 1 else "float32").np_dtype
    with np.errstate(all="ignore"):
        r = dy * (x - y) / np.maximum((F32(1) - x) * x, F32(1e-12))
        if W in ins:
            r = r * np.asarray(ins[W], dtype=F32)
        if attrs["reduction"] == 1:
            r = r / F32(math.prod(tensors["out"]["shape"]) or 1)
        return r.astype(inner).astype(F32).astype(D.lookup(tensors["out"]["dtype"]).np_dtype)


def _size(c: dict) -> int:
    shapes = [c.get("shape", [])] + [t["shape"] for t in (c.get("tensors") or {}).values()
                                     if isinstance(t, dict) and t.get("shape") is not None]
    return max(math.prod(s) for s in shapes)


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> tuple[str, list[dict]]:
    work = tmp_path_factory.mktemp("bcesuite")
    r = run_cli("convert", "--skip-unsupported", *FILES, "-o", work / "yaml")
    assert r.exit_code == 0, r.output
    docs = [read_yaml(p) for p in sorted((work / "yaml").glob("*.yaml"))]
    return r.output, [c for d in docs for c in d["cases"]]


def run_suite(cases: list[dict], work: Path) -> Path:
    (work / "cases.yaml").write_text(yaml.safe_dump({"op": SPEC.name, "cases": cases}))
    out = work / "out"
    assert run_cli("gen", work / "cases.yaml", "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    r = run_cli("verify", out)
    assert r.exit_code == 0 and " FAIL" not in r.output and "ERROR" not in r.output, r.output[-2000:]
    return out


def test_ops_nn_suites_import_and_their_small_cases_pass_with_exact_goldens(converted, tmp_path):
    text, cases = converted
    assert "converted 288 cases from 2 files" in text and "skipped 12 unsupported" in text
    assert "overflows" in text  # (the reason of each skip: a float32 extreme in a 16-bit case)
    assert sum(W in (c.get("tensors") or {}) and c["tensors"][W].get("nullptr") for c in cases) >= 30  # (no weight)
    small = [c for c in cases if _size(c) <= SMALL]
    assert len(small) == 164
    out = run_suite(small, tmp_path)
    checked = bad = 0
    for case in sorted(p.parent for p in out.glob("*/case.json")):
        c, b = check_case(case)
        checked, bad = checked + c, bad + b
    assert bad == 0 and checked > 500_000
    copy = linked_copy(out, tmp_path / "copy")
    assert run_cli("emulate", copy, "--defect", "sign-slip").exit_code == 0
    assert run_cli("verify", copy).exit_code == 1


def test_ops_nn_suites_cases_up_to_a_million_elements_pass(converted, tmp_path):
    _, cases = converted
    mid = [c for c in cases if SMALL < _size(c) <= LARGE]
    assert len(mid) == 69
    run_suite(mid, tmp_path)
