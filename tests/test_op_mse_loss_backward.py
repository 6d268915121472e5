"""aclnnMseLossBackward: the golden against an exact oracle, the kernel replica, the variants, the contract, the loop.

Oracle: the doc's grad * (x - y) * 2 / x.numel() (mean) or grad * (x - y) * 2, written here as
2 (dy x - dy y) / N in Fractions (no code shared with the op's `exact`). Independent float32 kernel:
PyTorch's CPU mse_backward_cpu_kernel (aten/src/ATen/native/cpu/PointwiseOpsKernel.cpp:
`scalar_val * (self_val - t1_val) * t2_val`, scalar_val = (2. / input.numel()).to<float>(), norm from
aten/src/ATen/native/Loss.cpp mse_loss_backward_out), in numpy.
"""

from __future__ import annotations

import math
from exactq import Fraction, PackageFraction

import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from aclnn_cli.golden.rounding import golden
from aclnn_cli.device.defects import variant_kind
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.elementwise.mse_loss_backward import CONTRACT_NOTES, SPEC

from helpers import logical, manifest, run_cli, tensor, write_yaml

F32 = np.float32
U = 2.0**-24
DTYPES = {"float32": np.float32, "float16": D.FLOAT16.np_dtype, "bfloat16": D.BFLOAT16.np_dtype}
# (reduction, N): none and sum ignore N; mean over a short, an odd, a long and a huge self
SETTINGS = [(0, 231), (2, 231), (1, 1), (1, 3), (1, 231), (1, 16383), (1, 300000), (1, 2**24 + 3)]


def oracle(dy, x, y, reduction: int, n: int) -> list[Fraction]:
    """2 (dy x - dy y) / N (mean) or 2 (dy x - dy y), exactly."""
    div = n if reduction == 1 else 1
    out = []
    for g, a, b in zip(dy.tolist(), x.tolist(), y.tolist()):
        g, a, b = Fraction(g), Fraction(a), Fraction(b)
        out.append(Fraction(2) * (g * a - g * b) / div)
    return out


def round_to(w: Fraction, p: int) -> float:
    """w rounded to p significant bits, ties to even (integer arithmetic; the normal range only)."""
    if w == 0:
        return 0.0
    a = abs(w)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1  # 2^e <= a < 2^(e + 1)
    q = a / Fraction(2) ** (e - p + 1)  # in [2^(p - 1), 2^p)
    n, rem = divmod(q.numerator, q.denominator)
    half = Fraction(rem, q.denominator) - Fraction(1, 2)
    n += 1 if half > 0 or (half == 0 and n % 2) else 0
    return math.copysign(math.ldexp(n, e - p + 1), w)


def sample(dtype: str, n: int = 3000, seed: int = 0) -> dict[str, np.ndarray]:
    """dy, x, y in `dtype` (as float64): wide exponents, a third of the pairs cancelling (y within a few
    ulps of x), some x == y (exact zeros)."""
    rng = np.random.default_rng(seed)
    npd = DTYPES[dtype]
    span = 12 if dtype == "float16" else 30

    def wide(k):
        return rng.choice([-1.0, 1.0], k) * np.exp2(rng.uniform(-span, span, k)) * rng.uniform(1, 2, k)

    x = wide(n).astype(npd).astype(np.float64)
    y = wide(n).astype(npd).astype(np.float64)
    near = rng.random(n) < 1 / 3
    y[near] = (x[near] * (1 + rng.integers(-4, 5, int(near.sum())) * 2.0**-10)).astype(npd).astype(np.float64)
    same = rng.random(n) < 0.03
    y[same] = x[same]
    dy = wide(n).astype(npd).astype(np.float64)
    return {"gradOutput": dy, "self": x, "target": y}


def values(t: dict, reduction: int, n: int) -> dict:
    return {**t, "reduction": reduction, "numel": n, "numel_out": 2 * n}


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_reference_bound_and_scale_against_the_oracle(dtype):
    for k, (reduction, n) in enumerate(SETTINGS[:6]):
        t = sample(dtype, 600, seed=k)
        ref = SPEC.reference(values(t, reduction, n))
        want = oracle(t["gradOutput"], t["self"], t["target"], reduction, n)
        for i, w in enumerate(want):
            v, b, s = (Fraction(float(a[i])) for a in (ref.value, ref.bound, ref.scale))
            assert abs(v - w) <= b and abs(w) <= s, (dtype, reduction, n, i)
        exact = [SPEC.exact({"gradOutput": PackageFraction(float(t["gradOutput"][i])), "self": PackageFraction(float(t["self"][i])),
                             "target": PackageFraction(float(t["target"][i])), "reduction": reduction, "numel": n})
                 for i in range(len(want))]
        assert exact == want


def independent_aten(t: dict, reduction: int, n: int) -> np.ndarray:
    """ATen's CPU formula in float32: norm = (2. / numel) as float, then norm * (x - y) * dy, left to right."""
    norm = F32((2.0 / n if n else math.inf) if reduction == 1 else 2.0)  # (C++: 2. / 0 is inf)
    x, y, dy = (np.asarray(t[k], dtype=F32) for k in ("self", "target", "gradOutput"))
    with np.errstate(all="ignore"):
        return norm * (x - y) * dy


def sequential(t: dict, reduction: int, n: int) -> np.ndarray:
    """Another float32 order: dy * (x - y), doubled, then divided by N."""
    x, y, dy = (np.asarray(t[k], dtype=F32) for k in ("self", "target", "gradOutput"))
    with np.errstate(all="ignore"):
        p = (dy * (x - y)) * F32(2)
        return p / F32(n) if reduction == 1 else p


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_kernel_and_independent_float32_kernels_are_within_the_gates_premise(dtype):
    """R = 1 (no row): each within 8 * 2^-24 * scale of the exact value (the gate's premise)."""
    for k, (reduction, n) in enumerate(SETTINGS):
        t = sample(dtype, 500, seed=100 + k)
        want = np.array([float(w) for w in oracle(t["gradOutput"], t["self"], t["target"], reduction, n)])
        scale = SPEC.reference(values(t, reduction, n)).scale
        wide = {key: v.astype(F32) for key, v in t.items()}
        runs = {"kernel": SPEC.kernel(values(wide, reduction, n)), "aten": independent_aten(t, reduction, n),
                "sequential": sequential(t, reduction, n)}
        runs.update({name: fn(values(wide, reduction, n)) for name, fn in SPEC.variants.items()
                     if variant_kind(name, fn)})
        for name, got in runs.items():
            assert got.dtype == F32, name
            err = np.abs(got.astype(np.float64) - want)
            assert (err <= 8 * U * scale).all(), (name, dtype, reduction, n, float((err / np.maximum(scale, 1e-300)).max()))


def test_kernel_known_answers():
    """The doc's example (mean over 4: [-0, 0, 1, 3]) and float32 steps worked by hand."""
    t = {"gradOutput": np.array([0, 1, 2, 3], F32), "self": np.array([0, 1, 2, 3], F32),
         "target": np.array([1, 1, 1, 1], F32), "reduction": 1, "numel": 4, "numel_out": 4}
    out = SPEC.kernel(t)
    assert out.tolist() == [0.0, 0.0, 1.0, 3.0] and np.signbit(out[0]) and not np.signbit(out[1])
    got, hard = golden(SPEC, {k: v for k, v in t.items() if k in ("gradOutput", "self", "target")}, D.FLOAT32,
                       {"reduction": 1, "numel": 4, "numel_out": 4})
    assert got.tolist() == [0.0, 0.0, 1.0, 3.0] and np.signbit(got[0])
    # N = 3, dy = 3, x = 1, y = 0.1f (0x3DCCCCCD), each step rounded by hand (Fractions, round_to 24 bits):
    # d = fl(1 - y) = 0x3F666666, cof = fl(2/3) = 0x3F2AAAAB, d * cof -> 0x3F19999A, * 3 -> 0x3FE66667: one ulp
    # above the correctly rounded 2 * 3 * (1 - y) / 3 = 0x3FE66666, the golden
    t3 = {"gradOutput": np.array([3], F32), "self": np.array([1], F32), "target": np.array([0.1], F32),
          "reduction": 1, "numel": 3, "numel_out": 3}
    assert int(SPEC.kernel(t3).view(np.uint32)[0]) == 0x3FE66667
    got, _ = golden(SPEC, {k: t3[k] for k in ("gradOutput", "self", "target")}, D.FLOAT32,
                    {"reduction": 1, "numel": 3, "numel_out": 3})
    assert int(got.view(np.uint32)[0]) == 0x3FE66666


def test_golden_is_the_exact_value_rounded_once():
    """fp32 and 16-bit goldens are the oracle rounded once (by round_to, in the dtype's normal range)."""
    for dtype, prec in (("float32", 24), ("bfloat16", 8), ("float16", 11)):
        t = sample(dtype, 800, seed=7)
        if dtype == "float16":  # keep results in float16's normal range
            t = {k: np.clip(v, -60, 60) for k, v in t.items()}
            t = {k: np.where(np.abs(v) < 0.5, 0.5, v) for k, v in t.items()}
            t["target"][::3] = t["self"][::3] * 0.75
            t = {k: v.astype(DTYPES[dtype]).astype(np.float64) for k, v in t.items()}
        got, _ = golden(SPEC, {k: v.astype(DTYPES[dtype]) for k, v in t.items()}, D.lookup(dtype),
                        {"reduction": 1, "numel": 231, "numel_out": 231})
        lo = {"float32": 2.0**-126, "bfloat16": 2.0**-126, "float16": 2.0**-14}[dtype]
        for w, g in zip(oracle(t["gradOutput"], t["self"], t["target"], 1, 231), got.astype(np.float64)):
            if w == 0 or abs(w) < lo or abs(w) > 6e4 and dtype == "float16":
                continue
            assert round_to(w, prec) == g, (dtype, w, g)


SCENARIOS = {  # the bundled cases' kinds: (reduction, numel, numel_out, inputs)
    **{f"random-r{r}": (r, 231, 231, None) for r in (0, 1, 2)},
    "broadcast_self": (1, 8, 48, None),
    "large_mean": (1, 1126400, 1126400, None),
    "intermediates": (1, 6, 6, {"self": [3.0e38, -3.0e38, 2.0e38, 1.0e-38, 1.0e-30, 1.0],
                                "target": [-3.0e38, 3.0e38, -1.0e38, 0.0, -1.0e-30, 0.5],
                                "gradOutput": [1.0e-10, 1.0e-10, 1.0e-5, 1.0e30, 1.0e25, 1.0]}),
}


def scenario_inputs(inputs, seed: int) -> dict[str, np.ndarray]:
    if inputs is not None:
        return {k: np.array(v, F32) for k, v in inputs.items()}
    rng = np.random.default_rng(seed)
    return {"gradOutput": rng.standard_normal(300).astype(F32), "self": rng.uniform(-4, 4, 300).astype(F32),
            "target": rng.uniform(-4, 4, 300).astype(F32)}


DEFECTS = sorted(name for name, fn in SPEC.variants.items() if not variant_kind(name, fn))


def test_variants_are_classified_with_three_legitimate():
    assert {n for n, fn in SPEC.variants.items() if variant_kind(n, fn)} == {"v2-cof", "aten-formula", "dy-first"}
    assert {"sign-slip", "mean-forgotten", "mean-by-output-numel", "factor-two-dropped"} <= set(DEFECTS)


@pytest.mark.parametrize("name", DEFECTS)
def test_each_defect_is_visible_to_the_fp32_gate(name):
    """Off by more than 2^-13 max(|exact|, scale) on some element of some bundled kind of case."""
    seen = []
    for k, (label, (reduction, n, n_out, inputs)) in enumerate(SCENARIOS.items()):
        t = scenario_inputs(inputs, seed=k)
        v = {**t, "reduction": reduction, "numel": n, "numel_out": n_out}
        want = np.array([float(w) for w in oracle(*(t[c].astype(np.float64) for c in ("gradOutput", "self", "target")),
                                                   reduction, n)])
        scale = SPEC.reference({**{c: a.astype(np.float64) for c, a in t.items()}, "reduction": reduction,
                                "numel": n, "numel_out": n_out}).scale
        with np.errstate(all="ignore"):
            bad = SPEC.variants[name](v).astype(np.float64)
            good = SPEC.kernel(v).astype(np.float64)
            off = ~(np.abs(bad - want) <= 2.0**-13 * np.maximum(np.abs(want), scale))
            assert (np.abs(good - want) <= 2.0**-13 * np.maximum(np.abs(want), scale)).sum() >= len(want) - 2
        if off.any():
            seen.append(label)
    assert seen, f"{name} is never off by more than fp32's T"


def descs(**changes) -> dict[str, TensorDesc]:
    base = {n: TensorDesc(D.FLOAT32, (3, 4)) for n in ("gradOutput", "self", "target", "out")}
    return {**base, **changes}


@pytest.mark.parametrize("product,tensors,attrs,status", [
    ("950", descs(), {"reduction": 1}, SUCCESS),
    ("950", descs(gradOutput=TensorDesc(D.FLOAT32, (3, 4), null=True)), {"reduction": 1}, NULLPTR),
    ("950", descs(target=TensorDesc(D.FLOAT32, (3, 4), null=True)), {"reduction": 1}, NULLPTR),
    ("950", descs(out=TensorDesc(D.FLOAT32, (3, 4), null=True)), {"reduction": 1}, NULLPTR),
    ("A2", descs(gradOutput=TensorDesc(D.FLOAT16, (3, 4))), {"reduction": 1}, INVALID),  # tied to self
    ("A2", descs(target=TensorDesc(D.BFLOAT16, (3, 4))), {"reduction": 1}, INVALID),
    ("A2", descs(out=TensorDesc(D.FLOAT16, (3, 4))), {"reduction": 1}, SUCCESS),  # out free: a final Cast
    ("310P", {n: TensorDesc(D.BFLOAT16, (3, 4)) for n in ("gradOutput", "self", "target", "out")}, {"reduction": 0}, INVALID),
    ("310P", descs(out=TensorDesc(D.BFLOAT16, (3, 4))), {"reduction": 0}, INVALID),
    ("950", {n: TensorDesc(D.lookup("float64"), (3, 4)) for n in ("gradOutput", "self", "target", "out")}, {"reduction": 0}, INVALID),
    ("950", descs(), {"reduction": 3}, INVALID),
    ("950", descs(), {"reduction": -1}, INVALID),
    ("950", descs(), {"reduction": 0}, SUCCESS),
    ("950", descs(), {"reduction": 2}, SUCCESS),
    ("950", descs(gradOutput=TensorDesc(D.FLOAT32, ())), {"reduction": 1}, SUCCESS),  # 0-d gradOutput broadcasts
    ("950", descs(self=TensorDesc(D.FLOAT32, (1, 4))), {"reduction": 1}, SUCCESS),
    ("950", descs(self=TensorDesc(D.FLOAT32, (3, 5))), {"reduction": 1}, INVALID),  # no broadcast
    ("950", descs(out=TensorDesc(D.FLOAT32, (4,))), {"reduction": 1}, INVALID),  # out not the broadcast shape
    ("950", {n: TensorDesc(D.FLOAT32, (1,) * 8 + (2,)) for n in ("gradOutput", "self", "target", "out")}, {"reduction": 1}, INVALID),
    ("950", {n: TensorDesc(D.FLOAT32, (0, 3)) for n in ("gradOutput", "self", "target", "out")}, {"reduction": 1}, SUCCESS),
])
def test_contract(product, tensors, attrs, status):
    assert check(SPEC, product, tensors, attrs).status == status


def test_declaration_and_case_values():
    assert "910" not in SPEC.products
    assert SPEC.case_values({"gradOutput": (), "self": (1, 8), "target": (6, 8), "out": (6, 8)}) == \
        {"numel": 8, "numel_out": 48}
    assert "bfloat16" not in SPEC.products["310P"] and "161002" in CONTRACT_NOTES


BROADCAST = """
op: aclnnMseLossBackward
cases:
  - {name: b, dtype: float32, shape: [6, 8], seed: 3, attributes: {reduction: 1}, tensors: {self: {shape: [1, 8]}}}
"""


def test_mean_divides_by_numel_of_self_end_to_end(tmp_path):
    """gen's golden for a broadcast self is dy (x - y) 2 / 8, not / 48 (the issue's trap), rounded once."""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, BROADCAST), "-o", out).exit_code == 0
    case = next(p for p in out.iterdir() if p.is_dir())
    m = manifest(case)
    t = {n: np.broadcast_to(logical(case, tensor(m, n)).astype(np.float64), (6, 8)).reshape(-1)
         for n in ("gradOutput", "self", "target")}
    g = logical(case, tensor(m, "out"), "golden").astype(np.float64).reshape(-1)
    for w, have in zip(oracle(t["gradOutput"], t["self"], t["target"], 1, 8), g):
        assert round_to(w, 24) == have


# (Each variant through emulate and verify on the bundled cases: tests/test_defects.py's matrix.)


def aten_device(op: str, ins: dict, tensors: dict, attrs: dict) -> np.ndarray:
    """tests/harness.py's kernel: ATen's float32 formula from the manifest alone (N = numel of self's shape),
    rounded to self's dtype, then cast to out's (the op_api's l0op::Cast)."""
    assert op == "aclnnMseLossBackward"
    n = math.prod(tensors["self"]["shape"])
    result = independent_aten(ins, attrs["reduction"], n)
    inner = D.lookup(tensors["self"]["dtype"]).np_dtype
    out = D.lookup(tensors["out"]["dtype"]).np_dtype
    with np.errstate(all="ignore"):
        return result.astype(inner).astype(np.float32).astype(out)
