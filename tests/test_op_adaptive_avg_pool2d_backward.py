"""aclnnAdaptiveAvgPool2dBackward (the Adaptive window family): goldens against an oracle of Fractions that shares
nothing with the op or the family (tests/adaptive_pool.py, from PyTorch's start_index / end_index), an independent
float32 kernel (each window's g / K scattered, the windows last to first) over every bundled case, the kernel at
hand-computed points, the tiling's choice against ops-nn's own tiling UT, the defects failing where they change the
result and the legitimate variants passing, the contract, and ops-nn's ATK and TTK suites.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptive_pool import independent, oracle
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.adaptive import pooling as A
from aclnn_cli.ops.adaptive.adaptive_avg_pool2d_backward import SPEC, path
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from helpers import run_cli
from rowblocks import (assert_variant_verdicts, atk_small_cases_pass, bundled_emulated, generated_yaml,
                       goldens_against, independent_dumps, not_passing, passing_bundled_records)

F = np.float32
SUITES = Path(__file__).parent / "ops_nn_suites"

ORACLE_YAML = """\
op: aclnnAdaptiveAvgPool2dBackward
defaults: {product: "950", seed: 53, dtype: [float32, float16, bfloat16]}
cases:
  - {name: down, shape: [4, 4, 7, 13], tensors: {gradOutput: {shape: [4, 4, 4, 5]}}}
  - {name: up, shape: [2, 2, 5, 7], tensors: {gradOutput: {shape: [2, 2, 11, 13]}}}
  - {name: mixed, shape: [2, 3, 13, 9], tensors: {gradOutput: {shape: [2, 3, 5, 14]}}}
  - {name: ncl, shape: [3, 11, 6], tensors: {gradOutput: {shape: [3, 4, 4]}}}
  - {name: global, shape: [2, 3, 5, 7], tensors: {gradOutput: {shape: [2, 3, 1, 1]}}}
  - {name: edges32, shape: [1, 2, 5, 6], tensors: {gradOutput: {shape: [1, 2, 7, 4]}}, dtype: float32,
     inputs: {gradOutput: {values: [3.0e+38, -3.0e+38, 1.0e-40, -1.0e-45, 0.3333333, -0.0, 7, 1]}}}
  - {name: edges, shape: [1, 2, 5, 6], tensors: {gradOutput: {shape: [1, 2, 7, 4]}},
     dtype: [float16, bfloat16],
     inputs: {gradOutput: {values: [65504, -65504, 6.0e-8, -1.0e-7, 0.3333333, -0.0, 7, 1]}}}
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generated_yaml(tmp_path_factory, ORACLE_YAML, "adaptive2d_oracle")


def test_goldens_equal_the_oracle_rounded_once(generated):
    """Every golden (windows sharing a position, more windows than positions, NCL, the global pooling, values at
    float16's and float32's ends, subnormals, -0 and sums past the largest value) is the exact sum rounded once to
    its dtype, bit for bit: thousands of elements per dtype, some through the exact path."""
    compared, exact = goldens_against(generated, "out", oracle)
    print("compared", compared, "exact path", exact)
    assert min(compared.values()) > 2000 and sum(exact.values()) > 0


def _t(g, self_shape, p=24, planes=1):
    return {"gradOutput": np.asarray(g, np.float64), "self": np.zeros(self_shape), A.PRECISION: np.full((1, 1, 1), p),
            A.PLANES: planes}


def test_the_kernel_at_hand_computed_points():
    """3 rows pooled to 2 windows [0, 2) and [1, 3): row 1 is in both, g0 / 2 + g1 / 2; 1 x 3 planes pooled to 2 columns
    alike. The global path: a 3 x 3 plane's fill fl16(1 / 9) = 0.111083984375 in float16, so g = 7 gives fl16(7 w) =
    0.77734375, where 7 / 9 rounds to 0.77783203125; in float32 fl32(fl32(1 / 9) 7)."""
    got = SPEC.kernel(_t([[[1.0], [3.0]]], (1, 3, 1))).reshape(-1)
    assert list(got) == [0.5, 2.0, 1.5]
    got = SPEC.kernel(_t([[[2.0, 6.0]]], (1, 1, 3))).reshape(-1)  # (H = 1: HInOne, columns)
    assert list(got) == [1.0, 4.0, 3.0]
    got = SPEC.kernel(_t([[[7.0]]], (1, 3, 3), p=11)).reshape(-1)
    assert got.size == 9 and set(got) == {0.77734375} and np.float16(7 / 9) == 0.77783203125
    assert SPEC.kernel(_t([[[7.0]]], (1, 3, 3))).reshape(-1)[0] == F(F(1.0 / 9) * F(7))
    # h_div_w: fl(fl(g fl(1 / 3)) / 2) for a window 3 rows by 2 columns
    t = _t([[[1.0]]], (1, 3, 2))
    t["gradOutput"] = np.ones((1, 1, 2))  # (H 3 pooled to 1, W 2 pooled to 2: windows of 3 x 1)
    assert SPEC.kernel(t).reshape(-1)[0] == F(F(1) * (F(1) / F(3))) / F(1)


# ops-nn's tiling UT
# (pooling/adaptive_avg_pool2d_grad/tests/ut/op_host/arch35/test_adaptive_avg_pool2d_grad_tiling.cpp):
# (yGrad shape, x shape, float32?, the small kernel expected)
UT = [((1, 2560, 4, 8), (1, 2560, 5, 7), True, True), ((1, 2603, 4, 8), (1, 2603, 5, 7), True, True),
      ((1, 5131, 4, 16), (1, 5131, 2, 7), False, True), ((1, 128, 7, 19), (1, 128, 31, 23), True, True),
      ((1, 128, 5, 19), (1, 128, 11, 29), True, False), ((1, 257, 5, 16), (1, 257, 11, 31), False, False),
      ((257, 7, 19), (257, 13, 29), True, True), ((1, 256, 97, 113), (1, 256, 17, 19), True, True),
      ((1, 2560, 3, 8), (1, 2560, 43, 129), True, True), ((1, 640, 13, 29), (1, 640, 41, 67), False, True),
      ((1, 256, 4, 8), (1, 256, 61, 121), True, False), ((1, 127, 4, 8), (1, 127, 5, 7), True, False),
      ((1, 128, 1, 15), (1, 128, 3, 17), True, False), ((1, 128, 4, 7), (1, 128, 7, 11), True, False),
      ((1, 128, 4, 15), (1, 128, 7, 23), False, False), ((1, 128, 409, 2049), (1, 128, 7, 17), True, False),
      ((1, 320, 2, 31), (1, 320, 600, 37), True, False), ((1, 320, 11, 2), (1, 320, 17, 600), True, False),
      ((1, 777, 13, 19), (1, 777, 47, 61), False, True)]


@pytest.mark.parametrize("grad, x, fp32, small", UT)
def test_the_tilings_choice_is_ops_nns(grad, x, fp32, small):
    """Which kernel the tiling takes (the small kernel's terms, or another's) as ops-nn's own tiling UT expects."""
    got = path(x[-2], x[-1], grad[-2], grad[-1], int(np.prod(x[:-2])), 24 if fp32 else 11)
    assert (got == ("recip2", "rows")) == small, got


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    return bundled_emulated(tmp_path_factory, bundled_produced, "adaptive_avg_pool2d_backward")


def test_the_emulated_kernel_passes_every_bundled_case(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "adaptive_avg_pool2d_backward")
    assert len(cases) == 88


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    wrote = independent_dumps(suite, tmp_path / "loops", independent, "out")
    assert wrote == 71
    bad = not_passing(tmp_path / "loops", tmp_path / "loops.json")
    assert not bad, bad


# ------------------------------------------------------------------ defects and legitimate variants

GATE_YAML = """\
op: aclnnAdaptiveAvgPool2dBackward
defaults: {product: "950", seed: 23, dtype: [float32, float16, bfloat16]}
cases:
  - {name: down, shape: [1, 3, 7, 13], tensors: {gradOutput: {shape: [1, 3, 4, 5]}}}
  - {name: up, shape: [1, 3, 5, 5], tensors: {gradOutput: {shape: [1, 3, 7, 9]}}}
  - {name: mixed, shape: [1, 2, 13, 5], tensors: {gradOutput: {shape: [1, 2, 5, 9]}}}
  - {name: positive, shape: [1, 2, 7, 13], tensors: {gradOutput: {shape: [1, 2, 4, 5]}},
     inputs: {gradOutput: {uniform: [0.5, 1.5]}}}
"""


@pytest.fixture(scope="module")
def gate_suite(tmp_path_factory):
    return generated_yaml(tmp_path_factory, GATE_YAML, "adaptive2d_gate")


# Which gate cases each defect changes (beyond any rounding).
CHANGES = {
    "adaptive2d-floor-end": ("down", "up", "mixed", "positive"),
    "adaptive2d-uniform-windows": ("down", "up", "mixed", "positive"),
    "adaptive2d-largest-divisor": ("down", "up", "mixed", "positive"),
    "adaptive2d-last-write-wins": ("down", "up", "mixed", "positive"),
}
LEGITIMATE = ("adaptive2d-reversed", "adaptive2d-columns", "adaptive2d-divide", "adaptive2d-small-kernel",
              "adaptive2d-column-sums")


def test_the_variants_are_declared_with_their_kinds():
    kinds = {name: fn.variant_kind for name, fn in SPEC.variants.items()}
    assert kinds == {**{n: "defect" for n in CHANGES}, **{n: "legitimate" for n in LEGITIMATE}}


@pytest.mark.parametrize("variant", sorted(CHANGES) + list(LEGITIMATE))
def test_each_defect_fails_where_it_changes_the_result_and_legitimate_variants_pass(gate_suite, tmp_path, variant):
    assert_variant_verdicts(gate_suite, tmp_path, variant, CHANGES, LEGITIMATE, cases=12)


# ------------------------------------------------------------------ the contract

def _status(g, s, o, dtype=D.FLOAT32, product="950", s_dtype=None, o_dtype=None):
    descs = {"gradOutput": TensorDesc(dtype, tuple(g)), "self": TensorDesc(s_dtype or dtype, tuple(s)),
             "out": TensorDesc(o_dtype or dtype, tuple(o))}
    return check(SPEC, product, descs, {}).status


def test_contract():
    ok = ([2, 3, 4, 5], [2, 3, 7, 13], [2, 3, 7, 13])
    assert _status(*ok) == SUCCESS
    assert _status([3, 4, 5], [3, 7, 13], [3, 7, 13]) == SUCCESS  # NCL
    assert _status([2, 3, 9, 20], [2, 3, 7, 13], [2, 3, 7, 13]) == SUCCESS  # more windows than positions
    assert _status([0, 3, 4, 5], [0, 3, 7, 13], [0, 3, 7, 13]) == SUCCESS  # empty
    assert _status(*ok, dtype=D.BFLOAT16, product="A2") == SUCCESS
    assert _status(*ok, dtype=D.BFLOAT16, product="310P") == INVALID
    assert _status(*ok, dtype=D.FLOAT16, product="910") == SUCCESS
    assert _status(*ok, s_dtype=D.FLOAT16) == INVALID  # gradOutput's dtype not self's
    assert _status(*ok, o_dtype=D.FLOAT16) == SUCCESS  # (out's dtype is not checked in phase one)
    assert _status([3, 4, 5], [2, 3, 7, 13], [2, 3, 7, 13]) == INVALID  # 3-d gradOutput, 4-d self
    assert _status([2, 4, 4, 5], [2, 3, 7, 13], [2, 3, 7, 13]) == INVALID  # C not self's
    assert _status([2, 3, 4, 5], [2, 3, 7, 13], [1, 3, 7, 13]) == INVALID  # out's N not self's
    assert _status([2, 3, 4, 5], [2, 3, 7, 13], [3, 7, 13]) == INVALID  # out 3-d
    assert _status([1, 2, 3, 4, 5], [1, 2, 3, 7, 13], [1, 2, 3, 7, 13]) == INVALID  # 5-d
    descs = {"gradOutput": TensorDesc(D.FLOAT32, (2, 3, 4, 5), null=True), "self": TensorDesc(D.FLOAT32, (2, 3, 7, 13)),
             "out": TensorDesc(D.FLOAT32, (2, 3, 7, 13))}
    assert check(SPEC, "950", descs, {}).status == NULLPTR


def test_an_empty_gradient_beside_a_nonempty_self_is_refused_when_the_case_loads(tmp_path):
    """The op_api returns at once for an empty gradOutput: out would keep what it held, so no case can judge it."""
    text = ("op: aclnnAdaptiveAvgPool2dBackward\ncases:\n  - {name: bad, dtype: float32, shape: [1, 2, 4, 4], "
            "tensors: {gradOutput: {shape: [1, 2, 0, 2]}}}\n")
    (tmp_path / "c.yaml").write_text(text)
    r = run_cli("gen", tmp_path / "c.yaml", "-o", tmp_path / "out")
    assert r.exit_code == 2 and "returns without computing" in r.output, r.output


# ------------------------------------------------------------------ ops-nn's own suites

# pooling/adaptive_avg_pool2d_grad/tests/st/aclnnAdaptiveAvgPool2dBackward/ and tests/st/arch35/
ATK = "atk_aclnnAdaptiveAvgPool2dBackward.json"
TTK = "ttk_kernel_adaptive_avg_pool2d_grad_st.csv"


def test_ops_nn_atk_suite_imports_whole_and_its_small_cases_pass_the_kernel(tmp_path):
    """All 209 cases import (aclnn_name AdaptiveAvgPool2dBackward, self spelt Input); the 43 of up to 20,000 elements
    (0.32 M in all) are generated, emulated and verified: every one PASSes, and so does the independent kernel."""
    cases, small = atk_small_cases_pass(tmp_path, SUITES / ATK, "adaptive_avg_pool2d_backward", independent, "out",
                                        quick_elements=20_000)
    assert len(cases) == 209 and len(small) == 43


def test_ops_nn_ttk_suite_imports_whole_and_its_small_cases_pass_the_kernel(tmp_path):
    """The graph op AdaptiveAvgPool2dGrad: its one input is gradOutput, self is made of orig_input_shape's shape; all
    5 cases import; the 3 of up to 40,000 elements PASS (the kernel and the independent one), but for the one of a
    single value everywhere (-2^-14), MISTRUSTED (it passes, but cannot show a kernel's errors)."""
    cases, small = atk_small_cases_pass(tmp_path, SUITES / TTK, "adaptive_avg_pool2d_backward", independent, "out",
                                        quick_elements=40_000, accept=("PASS", "MISTRUSTED"))
    assert len(cases) == 5 and len(small) == 3
    assert {tuple(c["shape"]) for c in cases} >= {(4, 108, 3, 4), (4, 4, 4, 493)}
