"""aclnnAdaptiveAvgPool3dBackward (the Adaptive window family in three axes): goldens against the Fractions oracle of
tests/adaptive_pool.py (PyTorch's start_index / end_index, nothing of the op's), the independent float32 kernel (each
window's g / K scattered, last to first) over every bundled case, the kernel at hand-computed points, defects and
legitimate variants, the contract, and ops-nn's ATK and TTK suites.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adaptive_pool import independent, oracle
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.adaptive import pooling as A
from aclnn_cli.ops.adaptive.adaptive_avg_pool3d_backward import SPEC, path
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, SUCCESS
from rowblocks import (assert_variant_verdicts, atk_small_cases_pass, bundled_emulated, generated_yaml,
                       goldens_against, independent_dumps, not_passing, passing_bundled_records)

F = np.float32
SUITES = Path(__file__).parent / "ops_nn_suites"

ORACLE_YAML = """\
op: aclnnAdaptiveAvgPool3dBackward
defaults: {product: "950", seed: 59, dtype: [float32, float16, bfloat16]}
cases:
  - {name: down, shape: [2, 2, 5, 7, 13], tensors: {gradOutput: {shape: [2, 2, 3, 4, 5]}}}
  - {name: up, shape: [2, 1, 2, 3, 5], tensors: {gradOutput: {shape: [2, 1, 3, 7, 9]}}}
  - {name: cdhw, shape: [2, 9, 3, 4], tensors: {gradOutput: {shape: [2, 4, 5, 4]}}}
  - {name: global, shape: [2, 2, 3, 4, 5], tensors: {gradOutput: {shape: [2, 2, 1, 1, 1]}}}
  - {name: edges32, shape: [1, 2, 3, 5, 6], tensors: {gradOutput: {shape: [1, 2, 2, 7, 4]}}, dtype: float32,
     inputs: {gradOutput: {values: [3.0e+38, -3.0e+38, 1.0e-40, -1.0e-45, 0.3333333, -0.0, 7, 1]}}}
  - {name: edges, shape: [1, 2, 3, 5, 6], tensors: {gradOutput: {shape: [1, 2, 2, 7, 4]}},
     dtype: [float16, bfloat16],
     inputs: {gradOutput: {values: [65504, -65504, 6.0e-8, -1.0e-7, 0.3333333, -0.0, 7, 1]}}}
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generated_yaml(tmp_path_factory, ORACLE_YAML, "adaptive3d_oracle")


def test_goldens_equal_the_oracle_rounded_once(generated):
    """Every golden (windows sharing positions along D, H and W, more windows than positions, CDHW, the global
    pooling, values at float16's and float32's ends, subnormals, -0, sums past the largest value) is the exact sum
    rounded once, bit for bit: thousands of elements per dtype, some through the exact path."""
    compared, exact = goldens_against(generated, "out", oracle)
    print("compared", compared, "exact path", exact)
    assert min(compared.values()) > 2000 and sum(exact.values()) > 0


def _t(g, self_shape, p=24, planes=1, rank=5):
    g = np.asarray(g, np.float64)
    return {"gradOutput": g.reshape(g.shape[0], -1, g.shape[-1]), "self": np.zeros((1, self_shape[0] * self_shape[1],
            self_shape[2])), A.PRECISION: np.full((1, 1, 1), p), A.PLANES: planes, "rank": rank,
            "inputDepth": self_shape[0], "gradDepth": g.shape[1]}


def test_the_kernel_at_hand_computed_points():
    """2 x 1 x 3 pooled to 1 x 1 x 2: windows [0, 2) along W of 2 x 2 positions (K = 4) and [1, 3); the middle column
    gets g0 / 4 + g1 / 4. A 1 x 1 x 1 gradOutput over 3 x 4 x 5: the fill fl16(1 / 60) in float16, g 9
    giving 0.14990234375 where 9 / 60 rounds to 0.1500244140625."""
    got = SPEC.kernel(_t([[[[4.0, 8.0]]]], (2, 1, 3))).reshape(-1)
    assert list(got) == [1.0, 3.0, 2.0] * 2
    got = SPEC.kernel(_t([[[[9.0]]]], (3, 4, 5), p=11)).reshape(-1)  # (fl16(1 / 60) = 0.01666259765625)
    assert got.size == 60 and set(got) == {0.14990234375} and np.float16(9 / 60) == 0.1500244140625


def test_the_tilings_choice():
    """The small kernel (terms g fl(1 / K)) at N C >= 128 and W >= 16 over an NCDHW input; the SIMT kernel on CDHW;
    the big kernel (ops-nn's tiling UT: a 1 x 1 x 1 x 32768 gradient of a 16,777,216-wide input)."""
    assert path((4, 6, 20), (2, 3, 16), 128, 11, 5) == "recip"
    assert path((4, 6, 20), (2, 3, 16), 128, 11, 4) == "div"
    assert path((4, 6, 20), (2, 3, 16), 127, 24, 5) == "div"
    assert path((1, 1, 16777216), (1, 1, 32768), 1, 24, 5) == "div"


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    return bundled_emulated(tmp_path_factory, bundled_produced, "adaptive_avg_pool3d_backward")


def test_the_emulated_kernel_passes_every_bundled_case(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "adaptive_avg_pool3d_backward")
    assert len(cases) == 72


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    wrote = independent_dumps(suite, tmp_path / "loops", independent, "out")
    assert wrote == 49
    bad = not_passing(tmp_path / "loops", tmp_path / "loops.json")
    assert not bad, bad


# ------------------------------------------------------------------ defects and legitimate variants

GATE_YAML = """\
op: aclnnAdaptiveAvgPool3dBackward
defaults: {product: "950", seed: 29, dtype: [float32, float16, bfloat16]}
cases:
  - {name: down, shape: [1, 2, 5, 7, 13], tensors: {gradOutput: {shape: [1, 2, 3, 4, 5]}}}
  - {name: up, shape: [1, 2, 3, 5, 5], tensors: {gradOutput: {shape: [1, 2, 4, 7, 9]}}}
  - {name: positive, shape: [1, 2, 5, 7, 13], tensors: {gradOutput: {shape: [1, 2, 3, 4, 5]}},
     inputs: {gradOutput: {uniform: [0.5, 1.5]}}}
"""


@pytest.fixture(scope="module")
def gate_suite(tmp_path_factory):
    return generated_yaml(tmp_path_factory, GATE_YAML, "adaptive3d_gate")


CHANGES = {
    "adaptive3d-floor-end": ("down", "up", "positive"),
    "adaptive3d-uniform-windows": ("down", "up", "positive"),
    "adaptive3d-largest-divisor": ("down", "up", "positive"),
    "adaptive3d-last-write-wins": ("down", "up", "positive"),
    "adaptive3d-depth-divisor-dropped": ("down", "up", "positive"),
}
LEGITIMATE = ("adaptive3d-reversed", "adaptive3d-columns", "adaptive3d-divide", "adaptive3d-reciprocal")


def test_the_variants_are_declared_with_their_kinds():
    kinds = {name: fn.variant_kind for name, fn in SPEC.variants.items()}
    assert kinds == {**{n: "defect" for n in CHANGES}, **{n: "legitimate" for n in LEGITIMATE}}


@pytest.mark.parametrize("variant", sorted(CHANGES) + list(LEGITIMATE))
def test_each_defect_fails_where_it_changes_the_result_and_legitimate_variants_pass(gate_suite, tmp_path, variant):
    assert_variant_verdicts(gate_suite, tmp_path, variant, CHANGES, LEGITIMATE, cases=9)


# ------------------------------------------------------------------ the contract

def _status(g, s, o, dtype=D.FLOAT32, product="950", s_dtype=None, o_dtype=None):
    descs = {"gradOutput": TensorDesc(dtype, tuple(g)), "self": TensorDesc(s_dtype or dtype, tuple(s)),
             "out": TensorDesc(o_dtype or dtype, tuple(o))}
    return check(SPEC, product, descs, {}).status


def test_contract():
    ok = ([2, 3, 3, 4, 5], [2, 3, 5, 7, 13], [2, 3, 5, 7, 13])
    assert _status(*ok) == SUCCESS
    assert _status([3, 3, 4, 5], [3, 5, 7, 13], [3, 5, 7, 13]) == SUCCESS  # CDHW
    assert _status([0, 3, 3, 4, 5], [0, 3, 5, 7, 13], [0, 3, 5, 7, 13]) == SUCCESS  # N = 0 (the 950)
    assert _status(*ok, dtype=D.BFLOAT16, product="A3") == SUCCESS
    assert _status(*ok, s_dtype=D.FLOAT16) == INVALID
    assert _status(*ok, o_dtype=D.FLOAT16) == INVALID  # (out's dtype is checked: self's)
    assert _status([2, 3, 3, 0, 5], [2, 3, 5, 7, 13], [2, 3, 5, 7, 13]) == INVALID  # a gradOutput axis 0
    assert _status([2, 3, 3, 4, 5], [2, 0, 5, 7, 13], [2, 0, 5, 7, 13]) == INVALID  # C = 0
    assert _status([2, 4, 3, 4, 5], [2, 3, 5, 7, 13], [2, 3, 5, 7, 13]) == INVALID  # C not self's
    assert _status([2, 3, 3, 4, 5], [2, 3, 5, 7, 13], [2, 3, 5, 7, 12]) == INVALID  # out not self's
    assert _status([3, 3, 4, 5], [2, 3, 5, 7, 13], [2, 3, 5, 7, 13]) == INVALID  # 4-d gradOutput, 5-d self
    assert _status([3, 4, 5], [5, 7, 13], [5, 7, 13]) == INVALID  # 3-d


# ------------------------------------------------------------------ ops-nn's own suites

# pooling/adaptive_avg_pool3d_grad/tests/st/aclnnAdaptiveAvgPool3dBackward/ and tests/st/arch35/
ATK = "atk_aclnnAdaptiveAvgPool3dBackward.json"
TTK = "ttk_kernel_adaptive_avg_pool3d_grad_st.csv"


def test_ops_nn_atk_suite_imports_whole_and_its_small_cases_pass_the_kernel(tmp_path):
    """All 209 cases import (NCDHW; self spelt Input); the 15 of up to 20,000 elements are generated, emulated and
    verified: every one PASSes, and so does the independent kernel."""
    cases, small = atk_small_cases_pass(tmp_path, SUITES / ATK, "adaptive_avg_pool3d_backward", independent, "out",
                                        quick_elements=20_000)
    assert len(cases) == 209 and len(small) == 15


def test_ops_nn_ttk_suite_imports_whole_and_its_small_case_passes_the_kernel(tmp_path):
    """The graph op AdaptiveAvgPool3dGrad (y_grad, x; data_format NCDHW): all 5 cases import; the one of float16's
    largest values (65504 spread over 3 x 16 x 7 positions, 40,320 elements: one value, MISTRUSTED) passes. The
    other four hold 31 M to 310 M elements."""
    cases, small = atk_small_cases_pass(tmp_path, SUITES / TTK, "adaptive_avg_pool3d_backward", independent, "out",
                                        quick_elements=50_000, accept=("PASS", "MISTRUSTED"))
    assert len(cases) == 5 and len(small) == 1
