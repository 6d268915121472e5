"""aclnnBatchMatMul (the contraction family): goldens against an oracle of Fractions that shares nothing with the op or
the family, numpy's float32 matmul (BLAS sgemm) as an independent kernel over every bundled case, the allowance from K
proven on both sides (correct float32 orders pass at K up to 65,536, defects fail), and the contract's rules.

The oracle reads the generated case directories through the manifest's numbers alone (tests/harness.py: shape,
strides, offset) and computes each element as sum(Fraction(a) * Fraction(b)) over K: a transposed view read from
the wrong elements, a batch or K misplaced, shows up as a wrong golden.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import harness
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.contraction.batch_mat_mul import SPEC
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, SUCCESS
from contraction_kernels import ORDERS, goldens_against_the_oracle, logical as _logical, numpy_float32
from rowblocks import (bundled_emulated, generated_yaml, independent_dumps, not_passing,
                       variant_statuses, write_dump, passing_bundled_records)

ORACLE_YAML = """\
op: aclnnBatchMatMul
defaults: {product: "950", seed: 41, dtype: [float32, float16, bfloat16]}
cases:
  - {name: square, shape: [2, 24, 40]}
  - {name: rect, shape: [3, 9, 33], tensors: {mat2: {shape: [3, 33, 14]}}}
  - {name: k1, shape: [2, 16, 1], tensors: {mat2: {shape: [2, 1, 16]}}}
  - {name: cancelling, shape: [2, 16, 64], inputs: {self: {uniform: [-1, 1]}, mat2: {uniform: [-1, 1]}}}
  - {name: cancel_exact, shape: [1, 8, 32], inputs: {self: {values: [1, -1, 0.5, -0.5]}, mat2: {constant: 3}}}
  - {name: wide, shape: [2, 8, 48], inputs: {self: {values: [1.0e-3, -7.5, 250.0, 3.0e-2]}, mat2: {normal: [0, 10]}}}
  - {name: t_self, shape: [3, 12, 40], tensors: {self: {layout: transposed}, mat2: {shape: [3, 40, 10]}}}
  - {name: t_mat2, shape: [3, 12, 40], tensors: {mat2: {shape: [3, 40, 10], layout: transposed}, out: {layout: {gap: 2}}}}
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generated_yaml(tmp_path_factory, ORACLE_YAML, "bmm_oracle")


def test_goldens_equal_the_oracle_rounded_once(generated):
    """Every golden (transposed views, K = 1, cancelling sums, exact zeros, values over many binades) is the exact
    sum of products rounded once to its dtype, bit for bit; a few thousand elements per dtype, some through the
    exact path."""
    goldens_against_the_oracle(generated)


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    return bundled_emulated(tmp_path_factory, bundled_produced, "batch_mat_mul")


def test_the_emulated_kernel_passes_every_bundled_case(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "batch_mat_mul")
    assert len(cases) >= 90


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    wrote = independent_dumps(suite, tmp_path / "sgemm", lambda case, m: numpy_float32(_logical(case, m, "self"),
                                                                                      _logical(case, m, "mat2")))
    assert wrote >= 65
    bad = not_passing(tmp_path / "sgemm", tmp_path / "sgemm.json")
    assert not bad, bad


# ------------------------------------------------------------------ the allowance from K, both sides

GATE_YAML = """\
op: aclnnBatchMatMul
defaults: {product: "950", seed: 13, dtype: [float32, float16, bfloat16]}
cases:
  - {name: k65536, shape: [1, 4, 65536], tensors: {mat2: {shape: [1, 65536, 3]}}}
  - {name: k65536_cancel, shape: [1, 3, 65536], tensors: {mat2: {shape: [1, 65536, 4]}},
     inputs: {self: {uniform: [-1, 1]}, mat2: {uniform: [-1, 1]}}}
  - {name: k65536_positive, shape: [1, 2, 65536], tensors: {mat2: {shape: [1, 65536, 2]}},
     inputs: {self: {uniform: [0, 1]}, mat2: {uniform: [0, 1]}}}
  - {name: k4096, shape: [2, 16, 4096]}
  - {name: k100, shape: [2, 24, 100], tensors: {self: {layout: transposed}}}
  - {name: k17, shape: [3, 8, 17], tensors: {mat2: {layout: transposed}}}
"""


@pytest.fixture(scope="module")
def gate_suite(tmp_path_factory):
    return generated_yaml(tmp_path_factory, GATE_YAML, "bmm_gate")


def _inputs(case):
    m = harness.load(case)
    return m, _logical(case, m, "self"), _logical(case, m, "mat2")


def test_correct_float32_orders_stay_within_the_allowance_and_pass(gate_suite, tmp_path):
    """Each order's largest |result - exact| / allowance over every element, and verify's verdict on its dumps."""
    margins = {}
    for name, kernel in ORDERS.items():
        work = tmp_path / name
        shutil.copytree(gate_suite, work)
        for case in sorted(p.parent for p in work.glob("*/case.json")):
            m, a, b = _inputs(case)
            got = kernel(a, b).astype(np.float64)
            ref = SPEC.reference({"self": a, "mat2": b, "cubeMathType": 0})
            ratio = float(np.max(np.abs(got - ref.value) / ref.allowance))
            margins[(name, case.name)] = ratio
            write_dump(case, harness.tensors(m)["out"], got)
        bad = not_passing(work, tmp_path / f"{name}.json")
        assert not bad, (name, bad)
    worst = max(margins.values())
    print("largest error / allowance:", {k: f"{v:.4f}" for k, v in margins.items() if "k65536" in k[1]})
    assert worst < 0.25, max(margins, key=margins.get)


DEFECTS = ["bmm-not-transposed", "bmm-k-tail-dropped", "bmm-fp16-accumulation", "bmm-bf16-accumulation",
           "bmm-halved", "bmm-zeros"]


def _changes(variant: str, case_id: str) -> bool:
    """Whether the defect changes the result of the case beyond what the standard forgives anywhere: a K tail
    exists only where K % 16 != 0; an accumulator of 16 bits shows from K = 4,096 (docs/allowances.md); mat2's
    elements read in another order, on positive data, move a sum of 65,536 terms by about 0.3%: inside bfloat16's
    threshold (2^-7), so no defect there."""
    if variant == "bmm-not-transposed":
        return "k65536_positive-bfloat16" not in case_id
    if variant == "bmm-k-tail-dropped":
        return "-k100-" in case_id or "-k17-" in case_id
    if variant in ("bmm-fp16-accumulation", "bmm-bf16-accumulation"):
        return "-k65536" in case_id or "-k4096-" in case_id
    return True


@pytest.mark.parametrize("variant", DEFECTS + ["bmm-split-k"])
def test_each_defect_fails_where_it_changes_the_result_and_split_k_passes(gate_suite, tmp_path, variant):
    status = variant_statuses(gate_suite, tmp_path, variant)
    assert len(status) == 18
    if variant == "bmm-split-k":
        assert set(status.values()) == {"PASS"}
        return
    assert {k: v for k, v in status.items() if _changes(variant, k) and v != "FAIL"} == {}


def _status(s, m, o, dtype=D.FLOAT32, m_dtype=None):
    descs = {"self": TensorDesc(dtype, tuple(s)), "mat2": TensorDesc(m_dtype or dtype, tuple(m)),
             "out": TensorDesc(dtype, tuple(o))}
    return check(SPEC, "950", descs, {"cubeMathType": 0}).status


def test_contract():
    assert _status([2, 3, 4], [2, 4, 5], [2, 3, 5]) == SUCCESS
    assert _status([1, 3, 4], [2, 4, 5], [2, 3, 5]) == SUCCESS  # a batch of 1 broadcasts (the API's)
    assert _status([2, 3, 4], [2, 5, 5], [2, 3, 5]) == INVALID  # K differs
    assert _status([2, 3, 4], [3, 4, 5], [3, 3, 5]) == INVALID  # batches differ, neither 1
    assert _status([2, 3, 4], [2, 4, 5], [2, 3, 4]) == INVALID  # out not (B, M, N)
    assert _status([3, 4], [4, 5], [3, 5]) == INVALID  # 2-d
    assert _status([2, 3, 4], [2, 4, 5], [2, 3, 5], m_dtype=D.FLOAT16) == INVALID


def test_kernel_rounds_of_split_k_follow_the_source():
    """BatchMatMulAswBlock::Init: rounds = ceil(K / 8192), each CeilAlign(ceil(K / rounds), 8), the tail the rest."""
    from aclnn_cli.ops.contraction.cube import rounds

    assert rounds(8192) == [(0, 8192)]
    assert rounds(65536) == [(s, s + 8192) for s in range(0, 65536, 8192)]
    assert rounds(20001) == [(0, 6672), (6672, 13344), (13344, 20001)]
