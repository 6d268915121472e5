"""aclnnSoftMarginLossBackward: the golden against an oracle, the kernel, the variants, the contract, ops-nn's suite.

Oracle: the doc's -y exp(-xy) / (1 + exp(-xy)) dy (/ numel of the output for mean) written as -y dy / (1 + exp(xy))
/ N, in float64 (np.exp) with its error bound, and in mpmath at 200 bits where that bound leaves the rounding
open (tests/loss_oracle.py). Independent float32 kernel: PyTorch's soft_margin_loss_backward_out
(aten/src/ATen/native/Loss.cpp: z = exp(-target * input); grad_input = target * z * -norm / (1 + z) * grad_output)
in numpy, from the manifest alone.

ops-nn's suite (tests/ops_nn_suites/, unmodified): loss/soft_margin_loss_grad/tests/st/
aclnnSoftMarginLossBackward/atk_aclnnSoftMarginLossBackward.json (201 cases); every case imports.
"""

from __future__ import annotations

import itertools
import math
from exactq import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.elementwise.soft_margin_loss_backward import CONTRACT_NOTES, SPEC

from helpers import run_cli
from loss_oracle import case_arrays, round_interval
from shared import linked_copy

F32 = np.float32
ATK = Path(__file__).parent / "ops_nn_suites" / "atk_aclnnSoftMarginLossBackward.json"
INPUTS = ("gradOutput", "self", "target")
REL = 8 * 2.0**-53  # the float64 oracle: x y exact, exp within 1 ulp, four roundings after it


def mp_value(dy: float, x: float, y: float, n: int) -> Fraction:
    """-y dy / (1 + exp(x y)) / n at 200 bits, as a Fraction (exact where the value is rational: x y = 0)."""
    with mpmath.workprec(200):
        v = -mpmath.mpf(y) * mpmath.mpf(dy) / (1 + mpmath.exp(mpmath.mpf(x) * mpmath.mpf(y))) / n
        if not v:
            return Fraction(0)
        sign, man, exp, _ = v._mpf_
        return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(exp)


def oracle(dy, x, y, n: int, dtype: D.DType) -> np.ndarray:
    """The doc's value rounded once to dtype, for finite inputs."""
    with np.errstate(all="ignore"):
        value = -y * dy / (1.0 + np.exp(x * y)) / n
        value = np.where(np.isinf(np.exp(x * y)), -0.0 * y * dy, value)  # (exp overflows: the value is far below
    #                                                                        any dtype's smallest subnormal)
    return round_interval(value, REL, dtype,
                          lambda i: D.round_fraction(mp_value(float(dy[i]), float(x[i]), float(y[i]), n), dtype))


def check_case(case: Path) -> tuple[int, int]:
    """(finite elements checked, goldens that are not the oracle rounded once)."""
    m, t, g, attrs = case_arrays(case, INPUTS, "out")
    finite = np.isfinite(t["gradOutput"]) & np.isfinite(t["self"]) & np.isfinite(t["target"])
    out = next(x for x in m["tensors"] if x["name"] == "out")
    n = math.prod(out["shape"]) if attrs["reduction"] == 1 else 1
    want = oracle(*(t[k][finite] for k in INPUTS), n, D.lookup(out["dtype"]))
    return int(finite.sum()), int((want != g[finite]).sum())


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16], ids=lambda d: d.name)
def test_every_16bit_self_golden_is_the_oracle_rounded_once(dtype):
    """Every fp16 and bf16 self against targets 1, -1 and 0.75, dy 1 and -0.0013, reductions none and mean over 3.
    (Instead of a `textbook`: the generic test gives the op a target of 0, where every gradient is a signed zero.)"""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype.np_dtype).astype(np.float64)
    x = x[np.isfinite(x)]
    checked = 0
    for target, dy_value, (reduction, n) in itertools.product((1.0, -1.0, 0.75), (1.0, -0.0013), ((0, 1), (1, 3))):
        dy = np.full(x.shape, dy_value).astype(dtype.np_dtype).astype(np.float64)
        y = np.full(x.shape, target)
        ins = {"gradOutput": dy.astype(dtype.np_dtype), "self": x.astype(dtype.np_dtype), "target": y.astype(dtype.np_dtype)}
        got, _ = golden(SPEC, ins, dtype, {"reduction": reduction, **SPEC.case_values({"out": (n,), "self": (n,)})})
        want = oracle(dy, x, y, n, dtype)
        bad = np.flatnonzero(got.astype(np.float64) != want)
        assert bad.size == 0, [(x[i], target, dy_value, n, float(got[i]), want[i]) for i in bad[:5]]
        checked += x.size
    assert checked == 12 * x.size


def test_reference_bound_holds_against_mpmath():
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-30, 30, 300), [0.0, 88.0, -88.0, 700.0, -700.0]]).astype(F32).astype(np.float64)
    y = rng.choice([1.0, -1.0, 0.5, 3.0], x.size)
    dy = rng.standard_normal(x.size).astype(F32).astype(np.float64)
    for reduction, n in ((0, 1), (1, 77)):
        ref = SPEC.reference({"gradOutput": dy, "self": x, "target": y, "reduction": reduction, "numel": n})
        for i in range(x.size):
            w = mp_value(dy[i], x[i], y[i], n)
            assert abs(Fraction(float(ref.value[i])) - w) <= Fraction(float(ref.bound[i])), (x[i], y[i])


def test_kernel_known_answers_and_the_overflow_edge():
    t = {"gradOutput": np.array([1, 1, 2, 1], F32), "self": np.array([0, 1, -100, 110], F32),
         "target": np.array([1, -1, 1, 1], F32), "reduction": 0, **SPEC.case_values({"out": (4,), "self": (4,)})}
    out = SPEC.kernel(t)
    assert out[0] == -0.5 and abs(out[1] - math.e / (1 + math.e)) < 1e-7  # -y sigmoid(-xy): -x y = 1
    assert np.isnan(out[2]) and out[3] == 0.0 and np.signbit(out[3])  # exp(100) overflows; exp(-110) -> 0: -0
    where, device = SPEC.edge({k: (v.astype(np.float64) if k in INPUTS else v) for k, v in t.items()})
    assert where.tolist() == [False, False, True, True] and np.isnan(device[2])
    ref = SPEC.reference({**t, **{k: t[k].astype(np.float64) for k in INPUTS}})
    assert ref.value[2] == -2.0  # the exact value where the kernel's Exp overflows
    c = SPEC.case_values({"gradOutput": (), "self": (1, 7), "target": (7, 1), "out": (7, 7)})
    assert c == {"numel": 49, "numel_self": 7, "cof": float(F32(1) / F32(49))}


def descs(**changes) -> dict[str, TensorDesc]:
    return {**{n: TensorDesc(D.FLOAT16, (3, 4)) for n in (*INPUTS, "out")}, **changes}


@pytest.mark.parametrize("product,tensors,status", [
    ("950", descs(), SUCCESS),
    ("950", descs(target=TensorDesc(D.FLOAT16, (3, 4), null=True)), NULLPTR),
    ("A2", descs(target=TensorDesc(D.BFLOAT16, (3, 4)), out=TensorDesc(D.FLOAT32, (3, 4))), SUCCESS),
    ("910", descs(out=TensorDesc(D.BFLOAT16, (3, 4))), INVALID),
    ("950", descs(self=TensorDesc(D.FLOAT16, (1, 4)), gradOutput=TensorDesc(D.FLOAT16, ())), SUCCESS),
    ("950", descs(self=TensorDesc(D.FLOAT16, (3, 5))), INVALID),
    ("950", descs(out=TensorDesc(D.FLOAT16, (4,))), INVALID),
    ("950", {n: TensorDesc(D.FLOAT16, (0, 3)) for n in (*INPUTS, "out")}, SUCCESS),
])
def test_contract(product, tensors, status):
    assert check(SPEC, product, tensors, {"reduction": 1}).status == status
    assert "310P" not in SPEC.products and "REDUCTION_STR" in CONTRACT_NOTES


def aten_device(op: str, ins: dict, tensors: dict, attrs: dict) -> np.ndarray:
    """PyTorch's formula in float32, norm = fl32(1 / numel of the output) for mean; rounded to the promoted input
    dtype, then cast to out's."""
    assert op == "aclnnSoftMarginLossBackward"
    x, y, dy = (np.asarray(ins[k], dtype=F32) for k in ("self", "target", "gradOutput"))
    norm = F32(1.0 / (math.prod(tensors["out"]["shape"]) or 1)) if attrs["reduction"] == 1 else F32(1)  # (empty: no launch)
    kinds = {tensors[k]["dtype"] for k in INPUTS}
    inner = D.lookup(kinds.pop() if len(kinds) == 1 else "float32").np_dtype
    with np.errstate(all="ignore"):
        z = np.exp(-y * x)
        result = y * z * -norm / (F32(1) + z) * dy
        return result.astype(inner).astype(F32).astype(D.lookup(tensors["out"]["dtype"]).np_dtype)


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    work = tmp_path_factory.mktemp("smlsuite")
    r = run_cli("convert", ATK, "-o", work / "yaml")
    assert r.exit_code == 0 and "converted 201 cases from 1 file" in r.output and "skipped" not in r.output, r.output
    out = work / "out"
    assert run_cli("gen", work / "yaml", "-o", out, "--jobs", "1").exit_code == 0
    assert run_cli("emulate", out, "--jobs", "1").exit_code == 0
    return out


def test_ops_nn_suite_passes_the_950_kernel_and_its_goldens_are_the_oracle(suite, tmp_path):
    r = run_cli("verify", suite)
    assert r.exit_code == 0 and "201 cases (201 precision, 0 contract): 201 PASS" in r.output, r.output[-2000:]
    checked = bad = 0
    for case in sorted(p.parent for p in suite.glob("*/case.json")):
        c, b = check_case(case)
        checked, bad = checked + c, bad + b
    assert bad == 0 and checked > 100_000
    work = linked_copy(suite, tmp_path / "copy")
    assert run_cli("emulate", work, "--defect", "exp-sign-flipped", "--jobs", "1").exit_code == 0
    assert run_cli("verify", work).exit_code == 1
