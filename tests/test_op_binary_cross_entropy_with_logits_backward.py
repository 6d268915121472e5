"""aclnnBinaryCrossEntropyWithLogitsBackward: the golden against an oracle, the kernel, the variants, the contract,
ops-nn's suite.

Oracle: PyTorch's form of the gradient, ((pw - 1) y + 1) / (1 + exp(-x)) - pw y, times dy w / N, in float64 (np.exp)
with a bound relative to its terms (they cancel near the loss's minimum), and where that bound leaves the rounding open
(tests/loss_oracle.py) on an arb ball at 600 bits whose ends must round alike (tests/arbmp.py), else in mpmath at 200
bits (and in mpmath on a random sample of the arb ones, which must agree); no code shared with the op's reference (sigmoid_pair's stable pair)
or its Decimal `exact`. Independent float32 kernel: PyTorch's binary_cross_entropy_with_logits_backward
(aten/src/ATen/native/Loss.cpp: t = pos_weight * target; (t + 1 - target) * sigmoid(input) - t, * grad, * weight,
/ numel for mean) in numpy, from the manifest alone.

ops-nn's suite (tests/ops_nn_suites/, unmodified): loss/sigmoid_cross_entropy_with_logits_grad_v2/tests/st/
aclnnBinaryCrossEntropyWithLogitsBackward/atk_aclnnBinaryCrossEntropyWithLogitsBackward.json (210 cases, mixed
dtypes, both weights given, out in target's dtype as its executor allocates it); every case imports and passes.
"""

from __future__ import annotations

import itertools
import math
from exactq import Fraction, PackageFraction
from pathlib import Path

import flint
import mpmath
import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.elementwise.binary_cross_entropy_with_logits_backward import CONTRACT_NOTES, SPEC

import arbmp
from oracle import D_NP, fraction_bits
from helpers import manifest, run_cli, tensor
from loss_oracle import case_arrays, round_interval
from shared import linked_copy

F32 = np.float32
ATK = Path(__file__).parent / "ops_nn_suites" / "atk_aclnnBinaryCrossEntropyWithLogitsBackward.json"
W, PW = "weightOptional", "posWeightOptional"
INPUTS = ("gradOutput", "self", "target")
REL = 12 * 2.0**-53  # of the terms: exp within an ulp, 1 + e, the quotient, (pw - 1) y + 1 three, the product, the
#                      difference, * dy, * w, / n


def to_fraction(v) -> Fraction:
    if not v:
        return Fraction(0)
    sign, man, exp, _ = v._mpf_
    return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(exp)


def mp_value(dy: float, x: float, y: float, w: float, pw: float, n: int) -> Fraction:
    """dy w (((pw - 1) y + 1) sigmoid(x) - pw y) / n as a Fraction: the rational part exact, the sigmoid's term at 200
    bits of its own size (sigmoid(x) = 1 - sigmoid(-x) for x >= 0), added in Fractions. (At 200 bits a sum would drop a
    term under 2^-200 of the rational part: at x = 138.75, 1 - y of a float16 target lies on a float16 tie, and
    only the term e^-138.75 says which side.)"""
    a = 1 + (Fraction(pw) - 1) * Fraction(y)
    with mpmath.workprec(200):
        s = 1 / (1 + mpmath.exp(abs(mpmath.mpf(x))))  # sigmoid(-|x|)
        # (under 2^-1500, as Fraction an integer of up to 2^128 bits: any such term rounds alike, the rational part
        # lying on a rounding boundary or at least 2^-600 of its scale away)
        s = to_fraction(s) if s > mpmath.mpf(2) ** -1500 else Fraction(1, 2**1500)
    g = (1 - Fraction(y)) - a * s if x >= 0 else a * s - Fraction(pw) * Fraction(y)
    return Fraction(dy) * Fraction(w) * g / n


def arb_rounded(dy: float, x: float, y: float, w: float, pw: float, n: int, name: str) -> float | None:
    """mp_value's gradient rounded to the dtype `name`, or None where arb leaves it open: R + c s with the rational
    part R = dy w (1 - y) / n (x >= 0; else -dy w pw y / n) and c = -+dy w ((pw - 1) y + 1) / n exact (Fractions),
    s = sigmoid(-|x|) (0 < s < e^-1100 < 2^-1586 for |x| > 1100). Where |x| <= 1100, first the whole gradient as one
    arb ball at 600 bits, where its ends round alike; else R + c s with s in the bounds of that ball. The interval's two ends must round alike (rounding is monotonic); an end nearer R than 2^-200 / R's
    denominator (s may be as small as 0+) is pushed that far off R toward c's sign: every rounding boundary of
    float32, float16 and bfloat16 is a multiple of 2^-151, so one other than R lies at least 1 / (R's denominator
    2^151) from R, and R on a tie rounds the way c pushes it, as the exact value does."""
    if abs(x) <= 1100:
        with arbmp.precision(600):
            bx, by, bpw = flint.arb(x), flint.arb(y), flint.arb(pw)
            s = 1 / (1 + abs(bx).exp())
            a = 1 + (bpw - 1) * by
            g = (1 - by) - a * s if x >= 0 else a * s - bpw * by
            got = arbmp.ball_float(flint.arb(dy) * flint.arb(w) * g / n, name)
        if got is not None:
            return got
    fdy, fy, fw, fpw = Fraction(dy), Fraction(y), Fraction(w), Fraction(pw)
    r = fdy * fw * ((1 - fy) if x >= 0 else -fpw * fy) / n
    c = fdy * fw * (1 + (fpw - 1) * fy) / n
    c = -c if x >= 0 else c
    if c == 0:
        return _value_of(fraction_bits(r, name), name)
    push = Fraction(1, r.denominator << 200)  # (under R's distance to any boundary but R itself)
    if abs(x) > 1100:  # (0 < |c s| < |c| 2^-1586 < push: the whole interval rounds as R pushed toward c does)
        assert abs(c) < Fraction(2**1386, r.denominator)
        return _value_of(fraction_bits(r + (push if c > 0 else -push), name), name)
    mid, rad = arbmp.fraction(s.mid()), arbmp.fraction(s.rad())
    ends = (c * v for v in (mid - rad, mid + rad))
    lo, hi = (fraction_bits(r + (t if abs(t) > push else (push if c > 0 else -push)), name) for t in ends)
    return _value_of(lo, name) if lo == hi else None


def _value_of(bits: int, name: str) -> float:
    if name == "float32":
        return float(np.array(bits, np.uint32).view(np.float32))
    return float(np.array(bits, np.uint16).view(D_NP[name]).astype(np.float64))


def oracle(t: dict, n: int, dtype: D.DType, sample: int = 40) -> np.ndarray:
    """The gradient rounded once to dtype, for finite inputs (t: float64 arrays; a missing weight is ones)."""
    dy, x, y = t["gradOutput"], t["self"], t["target"]
    w, pw = t.get(W, np.ones_like(x)), t.get(PW, np.ones_like(x))
    with np.errstate(all="ignore"):
        a = 1.0 + (pw - 1.0) * y
        s = 1.0 / (1.0 + np.exp(-x))
        value = dy * w * (a * s - pw * y) / n
        terms = np.abs(dy * w) * ((1.0 + np.abs((pw - 1.0) * y)) * s + np.abs(pw * y)) / n
    name, in_arb = np.dtype(dtype.np_dtype).name, []

    def in_mpmath(i):
        return D.round_fraction(mp_value(float(dy[i]), float(x[i]), float(y[i]), float(w[i]), float(pw[i]), n), dtype)

    def exact(i):
        got = arb_rounded(float(dy[i]), float(x[i]), float(y[i]), float(w[i]), float(pw[i]), n, name)
        if got is None:
            return in_mpmath(i)
        in_arb.append(i)
        return got

    out = round_interval(value, REL, dtype, exact, terms)
    rng = np.random.default_rng(len(in_arb))  # (arb and mpmath agree on a sample of the open elements)
    for i in rng.choice(in_arb, min(sample, len(in_arb)), replace=False) if in_arb else []:
        assert in_mpmath(i) == out[i], (float(x[i]), float(y[i]), float(dy[i]), out[i])
    return out


def check_case(case: Path) -> tuple[int, int]:
    """(finite elements checked, goldens that are not the oracle rounded once)."""
    m = manifest(case)
    names = INPUTS + tuple(k for k in (W, PW) if not tensor(m, k).get("null"))
    m, t, g, attrs = case_arrays(case, names, "out")
    finite = np.logical_and.reduce([np.isfinite(t[k]) for k in names])
    n = math.prod(tensor(m, "self")["shape"]) if attrs["reduction"] == 1 else 1
    want = oracle({k: v[finite] for k, v in t.items()}, n, D.lookup(tensor(m, "out")["dtype"]))
    return int(finite.sum()), int((want != g[finite]).sum())


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16], ids=lambda d: d.name)
def test_every_16bit_self_golden_is_the_oracle_rounded_once(dtype):
    """Every fp16 and bf16 self against targets 0, 1 and 0.3, dy 1 and -0.0013, no weights and (weight 0.75,
    posWeight 2.5), reductions none and mean over 3: each golden the oracle rounded once (zeros compared as values).
    (No `textbook`: the generic test gives every input but dy and self zeros, a weight of 0.)"""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype.np_dtype).astype(np.float64)
    x = x[np.isfinite(x)]
    checked = 0
    for target, dy_value, weights, (reduction, n) in itertools.product((0.0, 1.0, 0.3), (1.0, -0.0013),
                                                                        (None, (0.75, 2.5)), ((0, 1), (1, 3))):
        t = {"gradOutput": np.full(x.shape, dy_value), "self": x, "target": np.full(x.shape, target)}
        if weights is not None:
            t[W], t[PW] = np.full(x.shape, weights[0]), np.full(x.shape, weights[1])
        t = {k: v.astype(dtype.np_dtype).astype(np.float64) for k, v in t.items()}
        got, _ = golden(SPEC, {k: v.astype(dtype.np_dtype) for k, v in t.items()}, dtype,
                        {"reduction": reduction, **SPEC.case_values({"self": (n,), "out": (n,)})})
        want = oracle(t, n, dtype)
        bad = np.flatnonzero(got.astype(np.float64) != want)
        assert bad.size == 0, [(x[i], target, dy_value, weights, n, float(got[i]), want[i]) for i in bad[:5]]
        checked += x.size
    assert checked == 24 * x.size


def test_reference_bound_and_exact_against_mpmath():
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.uniform(-30, 30, 300), [0.0, 17.0, -17.0, 88.0, -88.0, 100.0, -100.0, 700.0, -700.0,
                                                    math.log(3.0)]]).astype(F32).astype(np.float64)
    y = rng.choice([0.0, 1.0, 0.25, 0.75], x.size)
    y[-1] = 0.5  # (x = ln 3, pw = 1/3: sigmoid(x) = 3/4, (1 - y) s - pw y s(-x) nearly cancels)
    t = {"self": x, "target": y, "gradOutput": rng.standard_normal(x.size).astype(F32).astype(np.float64),
         W: rng.uniform(-1, 2, x.size).astype(F32).astype(np.float64),
         PW: rng.choice([1.0, 2.5, 0.0, -0.5, 1 / 3], x.size).astype(F32).astype(np.float64)}
    for reduction, n in ((0, 1), (1, 77)):
        v = {**t, "reduction": reduction, **SPEC.case_values({"self": (n,), "out": (n,)})}
        ref = SPEC.reference(v)
        for i in range(x.size):
            want = mp_value(*(float(t[k][i]) for k in ("gradOutput", "self", "target", W, PW)), n if reduction else 1)
            assert abs(Fraction(float(ref.value[i])) - want) <= Fraction(float(ref.bound[i])), (x[i], y[i])
            assert abs(want) <= Fraction(float(ref.scale[i]))
            got = Fraction(SPEC.exact({**v, **{k: PackageFraction(float(a[i])) for k, a in t.items()}}))
            assert abs(got - want) <= abs(want) * Fraction(1, 10**40) + Fraction(1, 10**300), (x[i], y[i])


def test_kernel_known_answers_and_edges():
    """x = 0 (sigmoid 1/2), the two tails (Exp's overflow gives sigmoid 0; sigmoid rounds to 1), the two weights."""
    t = {"gradOutput": np.array([1, 1, 2, 1, 1], F32), "self": np.array([0, 0, -100, 100, 20], F32),
         "target": np.array([0, 1, 0, 1, 1], F32), "reduction": 0, **SPEC.case_values({"self": (5,), "out": (5,)})}
    out = SPEC.kernel(t)
    assert out.tolist() == [0.5, -0.5, 0.0, 0.0, 0.0]  # (x = 20, y = 1: s rounds to 1, the exact -2e-9 is lost)
    both = SPEC.kernel({**t, W: np.full(5, 2, F32), PW: np.full(5, 3, F32)})
    assert both[0] == 1.0 and both[1] == -3.0  # ((3 + 1) - 1) / 2 - 3 = -1.5, * 2
    t64 = {k: (v.astype(np.float64) if isinstance(v, np.ndarray) else v) for k, v in t.items()}
    ref = SPEC.reference(t64)
    assert ref.value[2] > 0 and ref.value[2] == pytest.approx(2 * math.exp(-100), rel=1e-15)
    assert ref.value[4] == pytest.approx(-1 / (1 + math.exp(20)), rel=1e-15) and ref.scale[4] >= 1.0
    where, device = SPEC.edge(t64)
    # (x = -100: sigmoid 0 where pw y = 0; x = 100 and 20 at y = 1: s - 1 cancels to a float32 0, under its normal range)
    assert where.tolist() == [False, False, True, True, True] and device[2:].tolist() == [0.0, 0.0, 0.0]
    c = SPEC.case_values({"gradOutput": (), "self": (7, 7), "target": (7, 7), "out": (7, 7)})
    assert c == {"numel": 49, "cof": float(F32(1) / F32(49))}


def descs(**changes) -> dict[str, TensorDesc]:
    return {**{n: TensorDesc(D.FLOAT16, (3, 4)) for n in (*INPUTS, W, PW, "out")}, **changes}


@pytest.mark.parametrize("product,tensors,status", [
    ("950", descs(), SUCCESS),
    ("950", descs(**{W: TensorDesc(D.FLOAT16, (3, 4), null=True), PW: TensorDesc(D.FLOAT16, (3, 4), null=True)}),
     SUCCESS),
    ("950", descs(target=TensorDesc(D.FLOAT16, (3, 4), null=True)), NULLPTR),
    ("A2", descs(self=TensorDesc(D.BFLOAT16, (3, 4))), SUCCESS),  # promoted to float32, out stays target's
    ("A2", descs(out=TensorDesc(D.FLOAT32, (3, 4))), INVALID),  # out's dtype is not target's
    ("910", descs(**{PW: TensorDesc(D.BFLOAT16, (3, 4))}), INVALID),
    ("310P", descs(gradOutput=TensorDesc(D.FLOAT32, ())), SUCCESS),
    ("950", descs(gradOutput=TensorDesc(D.FLOAT16, (4,)), **{W: TensorDesc(D.FLOAT16, (3, 1))}), SUCCESS),
    ("950", descs(target=TensorDesc(D.FLOAT16, (1, 4))), INVALID),  # target must be self's shape
    ("950", descs(**{PW: TensorDesc(D.FLOAT16, (2, 4))}), INVALID),
    ("950", descs(out=TensorDesc(D.FLOAT16, (4,))), INVALID),
    ("950", {n: TensorDesc(D.FLOAT16, (0, 3)) for n in (*INPUTS, W, PW, "out")}, SUCCESS),
])
def test_contract(product, tensors, status):
    assert check(SPEC, product, tensors, {"reduction": 1}).status == status
    assert check(SPEC, "950", descs(), {"reduction": 3}).status == INVALID and "OnesLike" in CONTRACT_NOTES


def test_declaration():
    assert "bfloat16" not in SPEC.products["910"] and "310B" not in SPEC.products


def aten_device(op: str, ins: dict, tensors: dict, attrs: dict) -> np.ndarray:
    """PyTorch's formula in float32 from the manifest alone, / numel(self) for mean; rounded to the promoted input
    dtype, then cast to out's."""
    assert op == "aclnnBinaryCrossEntropyWithLogitsBackward"
    x, y, dy = (np.asarray(ins[k], dtype=F32) for k in ("self", "target", "gradOutput"))
    w = np.asarray(ins[W], dtype=F32) if W in ins else F32(1)
    pw = np.asarray(ins[PW], dtype=F32) if PW in ins else F32(1)
    kinds = {tensors[k]["dtype"] for k in (*INPUTS, W, PW) if k in ins}
    inner = D.lookup(kinds.pop() if len(kinds) == 1 else "float32").np_dtype
    with np.errstate(all="ignore"):
        t = pw * y
        g = ((t + F32(1)) - y) * (F32(1) / (F32(1) + np.exp(-x))) - t
        g = g * dy * w
        if attrs["reduction"] == 1:
            g = g / F32(math.prod(tensors["self"]["shape"]) or 1)
        return g.astype(inner).astype(F32).astype(D.lookup(tensors["out"]["dtype"]).np_dtype)


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    work = tmp_path_factory.mktemp("bcelsuite")
    r = run_cli("convert", ATK, "-o", work / "yaml")
    assert r.exit_code == 0 and "converted 210 cases from 1 file" in r.output and "skipped" not in r.output, r.output
    out = work / "out"
    assert run_cli("gen", work / "yaml", "-o", out, "--jobs", "1").exit_code == 0
    assert run_cli("emulate", out, "--jobs", "1").exit_code == 0
    return out


def test_ops_nn_suite_passes_the_950_kernel_and_its_goldens_are_the_oracle(suite, tmp_path):
    r = run_cli("verify", suite)
    assert r.exit_code == 0 and "210 cases (210 precision, 0 contract): 210 PASS" in r.output, r.output[-2000:]
    outs = {tensor(manifest(c), "out")["dtype"] == tensor(manifest(c), "target")["dtype"]
            for c in (p.parent for p in suite.glob("*/case.json"))}
    assert outs == {True}
    checked = bad = 0
    for case in sorted(p.parent for p in suite.glob("*/case.json")):
        c, b = check_case(case)
        checked, bad = checked + c, bad + b
    assert bad == 0 and checked > 100_000
    work = linked_copy(suite, tmp_path / "copy")
    assert run_cli("emulate", work, "--defect", "pos-weight-ignored", "--jobs", "1").exit_code == 0
    assert run_cli("verify", work).exit_code == 1
