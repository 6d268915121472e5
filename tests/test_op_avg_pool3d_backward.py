"""aclnnAvgPool3dBackward (the window family in three axes): goldens against an oracle of Fractions that shares
nothing with the op or the family, an independent loop-based NumPy float32 kernel (AvgPool3DGrad's order: each
output window's g * fl(1 / divisor) added into the input positions it covers, od outer, ow inner) over every bundled
case, the kernel at hand-computed points, the allowance proven on both sides (correct float32 orders pass, each defect
fails where it changes the result), the contract.

The oracle and the independent kernel read the case directories through the manifest's numbers alone
(tests/harness.py) and place the windows with the kernel's formulas written here (op_kernel/avg_pool3_d_grad_base.h
CalcIndex): dStart = od * sD - pD, dEnd = min(dStart + kD, D + pD), poolSize = the product of (end - start) before the
clip to the input, kernelSize the product after it.
"""

from __future__ import annotations

import itertools
from exactq import Fraction
from pathlib import Path

import numpy as np
import pytest

import harness
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.window.avg_pool3d_backward import SPEC
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from helpers import run_cli
from rowblocks import (assert_variant_verdicts, atk_small_cases_pass, bundled_emulated, generated_yaml,
                       goldens_against, independent_dumps, not_passing, passing_bundled_records)

F = np.float32
SUITES = Path(__file__).parent / "ops_nn_suites"


def _attrs(m) -> dict:
    return {a["name"]: a["value"] for a in m.get("attributes", [])}


def _three(v, fill):
    v = list(v or [])
    return tuple(fill) if not v else (v[0],) * 3 if len(v) == 1 else tuple(v[:3])


def windows(a: dict, sizes, pooled):
    """Every window: ((od, oh, ow), (slice D, slice H, slice W), divisor), as AvgPool3DGrad places and divides it."""
    k = _three(a["kernelSize"], None)
    s = _three(a.get("stride"), k)
    p = _three(a.get("padding"), (0, 0, 0))
    out = []
    for o in itertools.product(*(range(n) for n in pooled)):
        start = [o[i] * s[i] - p[i] for i in range(3)]
        end = [min(start[i] + k[i], sizes[i] + p[i]) for i in range(3)]
        pool = int(np.prod([end[i] - start[i] for i in range(3)]))
        start = [max(x, 0) for x in start]
        end = [min(end[i], sizes[i]) for i in range(3)]
        inside = int(np.prod([end[i] - start[i] for i in range(3)]))
        if a.get("divisorOverride"):
            d = a["divisorOverride"]
        else:
            d = pool if a.get("countIncludePad", True) else inside
        out.append((o, tuple(slice(start[i], end[i]) for i in range(3)), d))
    return out


def _volumes(case, m, name) -> np.ndarray:
    t = harness.tensors(m)[name]
    v = harness.view(harness.storage(case, t), t).astype(np.float64)
    return v.reshape(-1, *v.shape[-3:])


def oracle(case, m) -> list:
    """The exact gradient, element by element in logical order: Fractions summed window by window."""
    g = _volumes(case, m, "gradOutput")
    sizes = harness.tensors(m)["self"]["shape"][-3:]
    out = np.full((g.shape[0], *sizes), Fraction(0), dtype=object)
    fg = np.vectorize(Fraction, otypes=[object])(g)
    for o, box, d in windows(_attrs(m), sizes, g.shape[-3:]):
        for b in range(g.shape[0]):
            out[(b, *box)] += fg[(b, *o)] / d
    return list(out.reshape(-1))


def _loops(case, m, order=lambda w: w) -> np.ndarray:
    g = _volumes(case, m, "gradOutput").astype(F)
    t = harness.tensors(m)["self"]
    sizes = t["shape"][-3:]
    out = np.zeros((g.shape[0], *sizes), F)
    with np.errstate(invalid="ignore"):  # (inf - inf: NaN, as IEEE and the device say)
        for o, box, d in order(windows(_attrs(m), sizes, g.shape[-3:])):
            out[(slice(None), *box)] += (g[(slice(None), *o)] * (F(1) / F(d)))[:, None, None, None]
    return out.reshape(t["shape"])


def independent(case, m) -> np.ndarray:
    """AvgPool3DGrad's loop: each window's float32 g * fl(1 / divisor) added into its positions, windows in
    (od, oh, ow) order."""
    return _loops(case, m)


def _reversed(case, m):
    return _loops(case, m, lambda w: list(reversed(w)))


ORACLE_YAML = """\
op: aclnnAvgPool3dBackward
defaults: {product: "950", seed: 47, dtype: [float32, float16, bfloat16]}
cases:
  - {name: overlap, shape: [2, 2, 6, 7, 8], attributes: {kernelSize: [3], stride: [1], padding: [1], countIncludePad: false}}
  - {name: aniso, shape: [1, 3, 7, 9, 10], attributes: {kernelSize: [2, 3, 4], stride: [1, 2, 3], padding: [1, 1, 2]}}
  - {name: ceil, shape: [1, 4, 6, 8, 9], attributes: {kernelSize: [3], stride: [2], padding: [1], ceilMode: true,
     countIncludePad: false}}
  - {name: ceil_incl, shape: [2, 2, 5, 8, 7], attributes: {kernelSize: [2], stride: [2], padding: [1], ceilMode: true}}
  - {name: override, shape: [1, 3, 6, 6, 6], attributes: {kernelSize: [3], stride: [1], padding: [1], divisorOverride: 7}}
  - {name: cancelling, shape: [1, 2, 6, 7, 7], attributes: {kernelSize: [4], stride: [1], padding: [2]},
     inputs: {gradOutput: {values: [1, -1, 0.5, -0.5, 3]}}}
  - {name: cdhw, shape: [3, 5, 7, 6], attributes: {kernelSize: [3], stride: [2], padding: [1]}}
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generated_yaml(tmp_path_factory, ORACLE_YAML, "avgpool3d_oracle")


def test_goldens_equal_the_oracle_rounded_once(generated):
    """Every golden (overlapping windows, a kernel, stride and padding per axis, ceil mode's cut windows, padding
    counted or not, divisorOverride, sums that cancel exactly, CDHW) is the exact sum rounded once to its dtype, bit
    for bit; thousands of elements per dtype, some through the exact path."""
    compared, exact = goldens_against(generated, "output", oracle)
    print("compared", compared, "exact path", exact)
    assert min(compared.values()) > 2000 and sum(exact.values()) > 0


def test_the_kernel_at_hand_computed_points():
    """kernel 2, stride 1, no padding over a 1 x 1 x 3 x 3 x 3 input of g = 1 everywhere (2 x 2 x 2 windows of 8):
    a corner is in one window (fl(1/8) = 1/8 exactly), an edge's middle in 2, a face's centre in 4, the centre in 8.
    With divisorOverride 3: fl32(1/3) added 8 times into the centre, float32 by float32."""
    g = np.ones((1, 2, 2, 2))
    t = {"gradOutput": g, "self": np.zeros((1, 3, 3, 3)), "kernelSize": (2,), "stride": (1,), "padding": (0,),
         "ceilMode": False, "countIncludePad": True, "divisorOverride": 0}
    got = SPEC.kernel(t).reshape(3, 3, 3)
    assert got[0, 0, 0] == 0.125 and got[0, 0, 1] == 0.25 and got[0, 1, 1] == 0.5 and got[1, 1, 1] == 1.0
    got = SPEC.kernel({**t, "divisorOverride": 3}).reshape(3, 3, 3)
    acc = F(0)
    for _ in range(8):
        acc = F(acc + F(1) / F(3))
    assert got[1, 1, 1] == acc and got[0, 0, 0] == F(1) / F(3)
    # padding 1, counting it: every window 2 x 2 x 2 = 8; not counting it, the corner's one window holds 1 position
    t = {**t, "gradOutput": np.ones((1, 2, 2, 2)), "self": np.zeros((1, 2, 2, 2)), "stride": (2,), "padding": (1,)}
    assert SPEC.kernel(t).reshape(-1)[0] == 0.125
    assert SPEC.kernel({**t, "countIncludePad": False}).reshape(-1)[0] == 1.0


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    return bundled_emulated(tmp_path_factory, bundled_produced, "avg_pool3d_backward")


def test_the_emulated_kernel_passes_every_bundled_case(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "avg_pool3d_backward")
    assert len(cases) == 92


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    wrote = independent_dumps(suite, tmp_path / "loops", independent, "output")
    assert wrote == 64
    bad = not_passing(tmp_path / "loops", tmp_path / "loops.json")
    assert not bad, bad


# ------------------------------------------------------------------ the allowance, both sides

GATE_YAML = """\
op: aclnnAvgPool3dBackward
defaults: {product: "950", seed: 19, dtype: [float32, float16, bfloat16]}
cases:
  - {name: exclude, shape: [1, 3, 6, 7, 8], attributes: {kernelSize: [3], stride: [1], padding: [1], countIncludePad: false}}
  - {name: include, shape: [1, 3, 7, 7, 9], attributes: {kernelSize: [3], stride: [2], padding: [1]}}
  - {name: ceil, shape: [1, 3, 6, 8, 9], attributes: {kernelSize: [3], stride: [2], padding: [1], ceilMode: true}}
  - {name: override, shape: [1, 2, 7, 7, 7], attributes: {kernelSize: [3], stride: [2], padding: [1], divisorOverride: 5}}
  - {name: positive, shape: [1, 2, 10, 10, 10], attributes: {kernelSize: [3], stride: [1], padding: [1],
     countIncludePad: false}, inputs: {gradOutput: {uniform: [0, 1]}}}
"""


@pytest.fixture(scope="module")
def gate_suite(tmp_path_factory):
    return generated_yaml(tmp_path_factory, GATE_YAML, "avgpool3d_gate")


def test_correct_float32_orders_pass(gate_suite, tmp_path):
    """The kernel's order and the reversed one, computed by the loops here, pass verify."""
    for name, kernel in {"in-order": independent, "reversed": _reversed}.items():
        assert independent_dumps(gate_suite, tmp_path / name, kernel, "output") == 15
        bad = not_passing(tmp_path / name, tmp_path / f"{name}.json")
        assert not bad, (name, bad)


# Which gate cases each defect changes (beyond any rounding).
CHANGES = {
    "avgpool3d-kernel-size-divisor": ("exclude", "ceil", "positive"),
    "avgpool3d-include-pad-ignored": ("include", "ceil"),
    "avgpool3d-include-pad-always": ("exclude", "positive"),
    "avgpool3d-override-ignored": ("override",),
    "avgpool3d-last-write-wins": ("exclude", "include", "ceil", "override", "positive"),
    "avgpool3d-stride-off-by-one": ("exclude", "include", "ceil", "override", "positive"),
    "avgpool3d-padding-off-by-one": ("exclude", "include", "ceil", "override", "positive"),
    "avgpool3d-depth-stride-off-by-one": ("exclude", "include", "ceil", "override", "positive"),
}
LEGITIMATE = ("avgpool3d-reversed", "avgpool3d-columns", "avgpool3d-divide")


def test_the_variants_are_declared_with_their_kinds():
    kinds = {name: fn.variant_kind for name, fn in SPEC.variants.items()}
    assert kinds == {**{n: "defect" for n in CHANGES}, **{n: "legitimate" for n in LEGITIMATE}}


@pytest.mark.parametrize("variant", sorted(CHANGES) + list(LEGITIMATE))
def test_each_defect_fails_where_it_changes_the_result_and_legitimate_orders_pass(gate_suite, tmp_path, variant):
    assert_variant_verdicts(gate_suite, tmp_path, variant, CHANGES, LEGITIMATE, cases=15)


# ------------------------------------------------------------------ the contract

def _status(g, s, o, attrs, dtype=D.FLOAT32, product="950", s_dtype=None):
    descs = {"gradOutput": TensorDesc(dtype, tuple(g)), "self": TensorDesc(s_dtype or dtype, tuple(s)),
             "output": TensorDesc(dtype, tuple(o))}
    full = {"kernelSize": (3,), "stride": (2,), "padding": (1,), "ceilMode": False, "countIncludePad": True,
            "divisorOverride": 0, **attrs}
    return check(SPEC, product, descs, full).status


def test_contract():
    ok = ([2, 3, 2, 4, 4], [2, 3, 4, 8, 8], [2, 3, 4, 8, 8])
    assert _status(*ok, {}) == SUCCESS
    assert _status([3, 2, 4, 4], [3, 4, 8, 8], [3, 4, 8, 8], {}) == SUCCESS  # CDHW
    assert _status(*ok, {"kernelSize": (2,), "stride": (), "padding": (0,)}) == SUCCESS  # empty: the kernel's
    assert _status(*ok, {"kernelSize": (3, 3, 3), "stride": (2, 2, 2), "padding": (1, 1, 1)}) == SUCCESS
    assert _status(*ok, {"kernelSize": (0,)}) == INVALID
    assert _status(*ok, {"kernelSize": (3, 3)}) == INVALID  # 2 values
    assert _status(*ok, {"stride": (0,)}) == INVALID
    assert _status(*ok, {"stride": (2, 2)}) == INVALID
    assert _status(*ok, {"padding": (2,)}) == INVALID  # more than half of 3
    assert _status(*ok, {"padding": (-1,)}) == INVALID
    assert _status(*ok, {"padding": ()}) == INVALID
    assert _status(*ok, {"padding": (1, 1)}) == INVALID
    assert _status(*ok, {"stride": None}) == NULLPTR  # unlike the 2-D op
    assert _status(*ok, {"padding": None}) == NULLPTR
    assert _status(*ok, {}, dtype=D.BFLOAT16, product="A2") == SUCCESS
    assert _status(*ok, {}, dtype=D.FLOAT16, product="A3") == SUCCESS
    assert _status(*ok, {}, s_dtype=D.FLOAT16) == INVALID
    assert _status([2, 3, 2, 4, 4], [2, 3, 4, 8, 8], [2, 3, 4, 8, 9], {}) == INVALID  # output not self's
    assert _status([3, 2, 4, 4], [2, 3, 4, 8, 8], [2, 3, 4, 8, 8], {}) == INVALID  # 4-d gradOutput, 5-d self
    assert _status([2, 4, 4], [2, 8, 8], [2, 8, 8], {}) == INVALID  # 3-d
    assert _status([2, 3, 2, 4, 4], [2, 3, 4, 8, 8], [2, 3, 4, 8, 8], {"ceilMode": True}) == SUCCESS


def test_a_gradient_of_another_size_is_refused_when_the_case_loads(tmp_path):
    """gradOutput's volumes must be the forward's pooled size: the window family refuses another, naming both."""
    text = ("op: aclnnAvgPool3dBackward\ncases:\n  - {name: bad, dtype: float32, shape: [1, 2, 4, 8, 8], "
            "attributes: {kernelSize: [3], stride: [2], padding: [1]}, tensors: {gradOutput: {shape: [1, 2, 2, 5, 4]}}}\n")
    (tmp_path / "c.yaml").write_text(text)
    r = run_cli("gen", tmp_path / "c.yaml", "-o", tmp_path / "out")
    assert r.exit_code == 2 and "pool [4, 8, 8] into [2, 4, 4]" in r.output, r.output


# ------------------------------------------------------------------ ops-nn's own suite

ATK = "atk_aclnnAvgPool3dBackward.json"  # pooling/avg_pool3_d_grad/tests/st/aclnnAvgPool3dBackward/


def test_ops_nn_atk_suite_imports_whole_and_its_small_cases_pass_the_kernel(tmp_path):
    """All 201 cases import (their lists' entries typed attr_tuple; NCDHW and CDHW, kernel, stride and padding of 3
    values each, ceilMode, countIncludePad, divisorOverride); the 32 of up to 100,000 elements (1.1 M in all) are
    generated, emulated and verified: every one PASSes, and so does the independent loop kernel on each. (The file
    holds 4.7 G elements in all.)"""
    cases, small = atk_small_cases_pass(tmp_path, SUITES / ATK, "avg_pool3d_backward", independent, "output")
    assert len(cases) == 201 and len(small) == 32
