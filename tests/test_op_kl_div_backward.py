"""aclnnKlDivBackward: goldens against an oracle of Fractions and mpmath, the kernel and its edges, the variants, the
contract, and ops-nn's own ATK and TTK suites.

The oracle is the doc's gradient of PyTorch's kl_div (loss/kl_div_loss_grad/docs/aclnnKlDivBackward.md; ops-nn's
tests/assets/golden.py): -gradOutput * target, or -gradOutput * exp(target) for logTarget, divided by numel(self)
for mean and by self's first dim for batchmean. It is written here per element, in Fractions (target) or mpmath at
200 bits (exp(target)), and rounded by tests/oracle.py's integer rounding; a zero takes the sign IEEE gives
-(factor * gradOutput). Nothing of the op module or the tool's golden path. The independent float32 kernel is
PyTorch autograd's order from the manifest alone: mean's backward first (gradOutput / N), then -factor * it, in
float16 where the three inputs are float16 (the op_api's one float16 path), else float32.

ops-nn's suites (tests/ops_nn_suites/, unmodified): loss/kl_div_loss_grad/tests/st/aclnnKlDivBackward/
atk_aclnnKlDivBackward.json (208 cases, every one imports) and tests/st/arch35/ttk_kernel_kl_div_loss_grad_st.csv
(99 cases of the graph op KlDivLossGrad: 78 import; 17 broadcast the three to a shape wider than the graph's input,
whose y the API refuses (its out is self's shape, 161002), and 4 give a 16-bit target a range past the dtype's max).
"""

from __future__ import annotations

import itertools
import json
import math
from exactq import Fraction, PackageFraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from aclnn_cli.golden.rounding import golden
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.elementwise.kl_div_backward import CONTRACT_NOTES, SPEC
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS

from helpers import read_yaml, run_cli
from loss_oracle import case_arrays
from oracle import fraction_bits
from rowblocks import independent_dumps, not_passing

F32 = np.float32
SUITES = Path(__file__).parent / "ops_nn_suites"
ATK, TTK = SUITES / "atk_aclnnKlDivBackward.json", SUITES / "ttk_kernel_kl_div_loss_grad_st.csv"
INPUTS = ("gradOutput", "self", "target")
DTYPES = (D.FLOAT32, D.FLOAT16, D.BFLOAT16)


# ---------------------------------------------------------------- the oracle


def doc_divisor(self_shape, reduction: int) -> int:
    """numel(self) for mean (1), self.size(0) for batchmean (3), else 1; a 0-d self counts as one element."""
    shape = list(self_shape) or [1]
    return math.prod(shape) if reduction == 1 else shape[0] if reduction == 3 else 1


def oracle_bits(dy: float, y: float, log: bool, n: int, dtype: D.DType) -> int:
    """The doc's value at one finite point rounded once to dtype, as its bit pattern."""
    name = dtype.name
    if dy == 0 or (y == 0 and not log):  # (an exact zero: IEEE's sign of -(factor * dy) / n)
        return _bits(-(dy * (1.0 if log else y)) / n, name)
    if not log:
        return fraction_bits(-Fraction(dy) * Fraction(y) / n, name)
    with mpmath.workprec(200):
        v = -mpmath.mpf(dy) * mpmath.exp(mpmath.mpf(y)) / n
        if abs(v) > mpmath.mpf(2) ** 200 or abs(v) < mpmath.mpf(2) ** -200:
            return _bits(math.copysign(math.inf if abs(v) > 1 else 0.0, -dy), name)
        sign, man, exp, _ = v._mpf_
        return fraction_bits((-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(exp), name)


def _bits(v: float, name: str) -> int:
    a = np.array(v, np.float64).astype(D.lookup(name).np_dtype)
    return int(a.view(D.lookup(name).uint_dtype))


def edge_points(dtype: D.DType, rng) -> tuple[np.ndarray, np.ndarray]:
    """(dy, target): 1,000 random pairs, and every edge target (Exp's float32 overflow and underflow, float64's, zeros,
    tiny, huge) against every edge dy (signed zeros, tiny, huge, ordinary)."""
    npd = dtype.np_dtype
    dy = (rng.standard_normal(1000) * 10).astype(npd)
    y = rng.uniform(-12, 6, 1000).astype(npd)
    big = float(dtype.max_finite)
    ys = [0.0, -0.0, 1.0, -1.0, 0.5, 88.72, 88.73, 89.0, -87.33, -87.34, -103.9, -104.0, 709.7, 709.8, -745.2, 1e4,
          -1e4, big, -big, float(dtype.smallest_subnormal), 6e-5, 3.0, -20.0]
    dys = [0.0, -0.0, 1.0, -3.5, float(dtype.smallest_subnormal), float(dtype.smallest_normal), big, -big, 1e-20, 7.0]
    ey, edy = (np.array(v, np.float64).astype(npd) for v in zip(*itertools.product(ys, dys)))
    return np.concatenate([dy, edy]), np.concatenate([y, ey])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_goldens_equal_the_oracle_rounded_once(dtype):
    """Every golden of 1,230 points per (logTarget, reduction) (1,000 random, 230 edge pairs; reductions none, mean
    over 77, sum, batchmean over 5, and the unchecked 7, none) is the oracle's value rounded once, bit for bit, signed
    zeros and infinities included; `exact` agrees with the oracle wherever it is finite and nonzero."""
    rng = np.random.default_rng(43)
    dy, y = edge_points(dtype, rng)
    shape = (5, 7, 11)  # (numel 385, first dim 5)
    compared = 0
    for log, reduction in itertools.product((False, True), (0, 1, 2, 3, 7)):
        n = doc_divisor(shape, reduction)
        values = SPEC.case_values({"gradOutput": (dy.size,), "self": shape, "target": (dy.size,), "out": shape})
        attrs = {"reduction": reduction, "logTarget": log, **values}
        got, _ = golden(SPEC, {"gradOutput": dy, "self": np.zeros_like(dy), "target": y}, dtype, attrs)
        got = got.view(dtype.uint_dtype)
        for i in range(dy.size):
            want = oracle_bits(float(dy[i]), float(y[i]), log, n, dtype)
            assert int(got[i]) == want, (log, reduction, float(dy[i]), float(y[i]))
        compared += dy.size
        for i in range(0, dy.size, 7):  # (exact: the one element gen's exact path asks for)
            point = {"gradOutput": PackageFraction(float(dy[i])), "target": PackageFraction(float(y[i])), **attrs}
            exact = Fraction(SPEC.exact(point)) if abs(float(y[i])) < 700 else 0
            if exact != 0:
                assert fraction_bits(exact, dtype.name) == oracle_bits(float(dy[i]), float(y[i]), log, n, dtype)
    assert compared == 10 * 1230


def test_the_reference_bound_holds_against_mpmath():
    """|value - exact| <= bound at 600 points of both target spaces, incl. float64 exp's subnormal range."""
    rng = np.random.default_rng(5)
    y = np.concatenate([rng.uniform(-30, 30, 290), [0.0, 88.0, -88.0, 700.0, -700.0, -720.0, -740.0, 709.0, 5.5,
                                                    -1e-30]]).astype(F32).astype(np.float64)
    dy = rng.standard_normal(y.size).astype(F32).astype(np.float64) * 1e30
    for log, n in itertools.product((False, True), (1, 77)):
        attrs = {"reduction": 1 if n > 1 else 0, "logTarget": log, "numel": n, "batch": 1}
        ref = SPEC.reference({"gradOutput": dy, "target": y, "self": y, **attrs})
        with mpmath.workprec(300):
            for i in range(y.size):
                w = -mpmath.mpf(dy[i]) * (mpmath.exp(y[i]) if log else mpmath.mpf(y[i])) / n
                if np.isinf(ref.value[i]):  # (float64's exp overflowed: an infinity in every dtype, bound 0)
                    assert abs(w) > 2**200 and np.sign(ref.value[i]) == mpmath.sign(w) and ref.bound[i] == 0
                    continue
                assert abs(mpmath.mpf(float(ref.value[i])) - w) <= ref.bound[i], (log, n, dy[i], y[i])


# ---------------------------------------------------------------- the kernel and its edges


def test_kernel_known_answers_and_edges():
    t = {"gradOutput": np.array([2, 1, 1, 0, 1e30, 4], F32), "self": np.array([np.nan] * 6, F32),
         "target": np.array([0.25, -3, 89, 100, -100, 0], F32), "reduction": 3, "logTarget": False,
         **SPEC.case_values({"self": (4, 2), "target": (6,), "out": (4, 2), "gradOutput": (6,)})}
    assert SPEC.kernel(t).tolist() == [-0.125, 0.75, -22.25, -0.0, F32(1e30) * F32(25), -0.0]  # (/ 4; NaN self unread)
    log = SPEC.kernel({**t, "logTarget": True, "reduction": 0})
    assert log[0] == F32(-2 * math.exp(0.25)) and log[2] == -np.inf and np.isnan(log[3]) and log[5] == -4
    wide = {k: (v.astype(np.float64) if k in INPUTS else v) for k, v in {**t, "logTarget": True}.items()}
    where, device = SPEC.edge(wide)
    assert where.tolist() == [False, False, True, True, True, False] and np.isnan(device[3])
    ref = SPEC.reference(wide)
    assert ref.value[2] == -math.exp(89) / 4 and ref.value[3] == -0.0 and np.signbit(ref.value[3])
    assert SPEC.case_values({"gradOutput": (), "self": (), "target": (), "out": ()})["batch"] == 1


def test_the_legitimate_variants_differ_from_the_kernel_somewhere():
    """kl-float-cof parts from the kernel where fl32(N) != N; kl-aten-order by its own roundings (so their PASS on
    the bundled cases is a test of the gate, not of an identical kernel)."""
    n = 2**24 + 3
    t = {"gradOutput": np.ones(1, F32), "target": np.full(1, 3.0, F32), "reduction": 1, "logTarget": False,
         "numel": n, "batch": 1}
    assert SPEC.variants["kl-float-cof"](t)[0] != SPEC.kernel(t)[0]
    rng = np.random.default_rng(2)
    t = {"gradOutput": rng.standard_normal(2000).astype(F32), "target": rng.uniform(-3, 3, 2000).astype(F32),
         "reduction": 1, "logTarget": True, "numel": 77, "batch": 1}
    assert (SPEC.variants["kl-aten-order"](t) != SPEC.kernel(t)).sum() > 100


# ---------------------------------------------------------------- the contract


def descs(**changes) -> dict[str, TensorDesc]:
    return {**{n: TensorDesc(D.FLOAT16, (3, 4)) for n in (*INPUTS, "out")}, **changes}


@pytest.mark.parametrize("product,tensors,status", [
    ("950", descs(), SUCCESS),
    ("A2", descs(target=TensorDesc(D.BFLOAT16, (4,)), gradOutput=TensorDesc(D.FLOAT32, ()),
                 out=TensorDesc(D.FLOAT32, (3, 4))), SUCCESS),  # (mixed dtypes promoted; out's dtype free)
    ("A3", descs(out=TensorDesc(D.FLOAT16, (3, 4), null=True)), NULLPTR),
    ("950", descs(target=TensorDesc(D.FLOAT16, (3, 5))), INVALID),
    ("950", descs(gradOutput=TensorDesc(D.FLOAT16, (2, 3, 4))), INVALID),  # (gradOutput widens the shape)
    ("950", descs(self=TensorDesc(D.FLOAT16, (1, 4))), INVALID),  # (out is not self's shape)
    ("950", {n: TensorDesc(D.FLOAT16, (1,) * 9) for n in (*INPUTS, "out")}, INVALID),
    ("950", descs(self=TensorDesc(D.lookup("float64"), (3, 4))), INVALID),
    ("950", {n: TensorDesc(D.FLOAT16, (0, 3)) for n in (*INPUTS, "out")}, SUCCESS),
])
def test_contract(product, tensors, status):
    assert check(SPEC, product, tensors, {"reduction": 9, "logTarget": True}).status == status  # (reduction unchecked)
    assert set(SPEC.products) == {"950", "A3", "A2"} and "GetReductionStr" in CONTRACT_NOTES


def test_a_target_wider_than_self_is_refused_as_not_modelled(tmp_path):
    """The API sums such a gradient back to self's shape (a ReduceSum): one line, not a status it does not return."""
    (tmp_path / "c.yaml").write_text("op: aclnnKlDivBackward\ncases:\n  - name: wide\n    shape: [1, 4]\n"
                                     "    dtype: float32\n    tensors: {target: {shape: [3, 4]}}\n")
    r = run_cli("gen", tmp_path / "c.yaml", "-o", tmp_path / "out")
    assert r.exit_code == 2 and "a reduction aclnn-cli does not model" in r.output, r.output


# ---------------------------------------------------------------- the independent kernel and the bundled oracle


def aten_device(op: str, ins: dict, tensors: dict, attrs: dict) -> np.ndarray:
    """PyTorch autograd's order in float32 (float16 if the three inputs are): g = gradOutput / N, -factor * g; then
    out's dtype."""
    assert op == "aclnnKlDivBackward"
    kinds = {tensors[k]["dtype"] for k in INPUTS}
    inner = np.float16 if kinds == {"float16"} else F32
    dy, y = (np.asarray(ins[k], dtype=F32) for k in ("gradOutput", "target"))
    n = F32(doc_divisor(tensors["self"]["shape"], int(attrs["reduction"])))
    with np.errstate(all="ignore"):
        result = -((np.exp(y) if attrs["logTarget"] else y) * (dy / n))
        return result.astype(inner).astype(F32).astype(D.lookup(tensors["out"]["dtype"]).np_dtype)


def check_case(case: Path) -> tuple[int, int]:
    """(finite elements checked, goldens that are not the oracle rounded once), each element through oracle_bits."""
    m, t, g, attrs = case_arrays(case, INPUTS, "out")
    out = next(x for x in m["tensors"] if x["name"] == "out")
    self_shape = next(x for x in m["tensors"] if x["name"] == "self")["shape"]
    dtype = D.lookup(out["dtype"])
    n = doc_divisor(self_shape, int(attrs["reduction"]))
    finite = np.flatnonzero(np.isfinite(t["gradOutput"]) & np.isfinite(t["target"]))
    got = np.asarray(g, np.float64).astype(dtype.np_dtype).view(dtype.uint_dtype)
    dy, y = t["gradOutput"], t["target"]
    with np.errstate(all="ignore"):  # (float64 settles an element whose 6-ulp interval rounds one way; else exactly)
        e = np.exp(y) if attrs["logTarget"] else y
        value = -(e * dy) / n
        lo, hi = (D.round_from_f64(value * (1 + s * 6 * 2.0**-53), dtype).view(dtype.uint_dtype) for s in (-1, 1))
    sure = np.isfinite(value) & (lo == hi) & (value != 0) & (np.abs(value) > 2.0**-1000)
    wrong = int((got[finite][sure[finite]] != lo[finite][sure[finite]]).sum())
    for i in finite[~sure[finite]]:
        wrong += int(got[i]) != oracle_bits(float(dy[i]), float(y[i]), bool(attrs["logTarget"]), n, dtype)
    return finite.size, wrong


# ---------------------------------------------------------------- ops-nn's suites


QUICK = 100_000  # (TTK cases of more elements import, and are left to scripts/catalogue.py's run)


@pytest.fixture(scope="module")
def suites(tmp_path_factory):
    work = tmp_path_factory.mktemp("kldiv")
    r = run_cli("convert", "--skip-unsupported", ATK, TTK, "-o", work / "yaml")
    assert r.exit_code == 0 and "converted 286 cases from 2 files" in r.output and "skipped 21 " in r.output, r.output
    assert "does not broadcast to" in r.output.split("skipped 21 ")[1] and "does not model" not in r.output
    cases = {p.stem: read_yaml(p)["cases"] for p in (work / "yaml").glob("*.yaml")}
    small = [c["name"] for c in cases[TTK.stem] if math.prod(c["shape"]) <= QUICK]
    picks = [a for n in [c["name"] for c in cases[ATK.stem]] + small for a in ("--case", f"kl_div_backward-{n}")]
    out = work / "out"
    for args in (("gen", work / "yaml", "-o", out, *picks), ("emulate", out)):
        r = run_cli(*args)
        assert r.exit_code == 0, r.output[-3000:]
    return out, cases, small


def test_ops_nn_suites_import_and_pass_the_950_kernel(suites, tmp_path):
    """All 208 ATK cases and the TTK's 63 of up to 100,000 elements (of its 78 imported) pass (6 of TTK's with an
    all-zero gradOutput MISTRUSTED); the independent kernel passes them too; their goldens are the oracle's."""
    out, cases, small = suites
    assert len(cases[ATK.stem]) == 208 and len(cases[TTK.stem]) == 78 and len(small) == 63
    r = run_cli("verify", out, "--json", tmp_path / "v.json")
    ran = json.loads((tmp_path / "v.json").read_text())["cases"]
    # (MISTRUSTED: a pass that proves nothing, TTK's cases whose gradOutput is all zero or every read input constant)
    mistrusted = {c["case_id"] for c in ran if c["status"] == "MISTRUSTED"}
    assert r.exit_code == 0 and len(mistrusted) == 6 and {c["status"] for c in ran} == {"PASS", "MISTRUSTED"}
    import harness

    def independent(case, m):
        ts = harness.tensors(m)
        ins = {n: np.broadcast_to(harness.view(harness.storage(case, ts[n]), ts[n]), ts["out"]["shape"]) for n in INPUTS}
        return aten_device(m["op"], ins, ts, {a["name"]: a["value"] for a in m["attributes"]})

    assert independent_dumps(out, tmp_path / "own", independent) == 271
    assert {case for case, _ in not_passing(tmp_path / "own", tmp_path / "own.json")} == mistrusted
    checked = bad = 0
    for case in sorted(p.parent for p in out.glob("*/case.json")):
        c, b = check_case(case)
        checked, bad = checked + c, bad + b
    assert bad == 0 and checked > 500_000
