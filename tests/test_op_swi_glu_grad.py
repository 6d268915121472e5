"""aclnnSwiGluGrad (the split family): goldens against an oracle that shares nothing with the op or the family,
ops-nn's own golden formula in float32 as an independent kernel over every bundled case, the 950 kernel's order
by hand, the defects the gate must see and the contract's rules.

The oracle reads the generated case directories through the manifest's numbers alone (tests/harness.py: shape,
strides, offset), splits x with numpy along `dim` and evaluates the doc's formula in mpmath at 200 bits:
  s = 1 / (1 + e^-A);  out_A = yGrad (s + s (1 - s) A) B;  out_B = yGrad s A.
A half read from the wrong elements (an interleaved split, the wrong axis, a yGrad read as if x-shaped) shows up
as a wrong golden.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import mpmath
import numpy as np
import pytest

import harness
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.split.swi_glu_grad import SPEC
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, SUCCESS
from helpers import run_cli, verify_records
from oracle import PREC, rounded_bits
from rowblocks import bundled_emulated, generated_yaml, not_passing, variant_statuses, write_dump

ORACLE_YAML = """\
op: aclnnSwiGluGrad
defaults: {product: "950", seed: 31, dtype: [float32, float16, bfloat16]}
cases:
  - {name: last, shape: [6, 20]}
  - {name: middle, shape: [3, 4, 5], attributes: {dim: 1}}
  - {name: first, shape: [8, 3, 2], attributes: {dim: 0}}
  - {name: negative, shape: [2, 6, 3, 2], attributes: {dim: -3}}
  - {name: rank1, shape: [40], attributes: {dim: 0}}
  - {name: small_a, shape: [4, 16], inputs: {x: {uniform: [-0.01, 0.01]}}}
  - {name: wide_a, shape: [4, 32], inputs: {x: {uniform: [-100, 100]}}}
  - {name: strided, shape: [6, 8], tensors: {x: {layout: transposed}, out: {layout: {step: 2, offset: 1}}}}
  - {name: strided_ygrad, shape: [5, 6, 4], attributes: {dim: 1}, tensors: {yGrad: {layout: transposed}}}
"""


def _logical(case, m, name) -> np.ndarray:
    t = harness.tensors(m)[name]
    return harness.view(harness.storage(case, t), t).astype(np.float64)


def oracle(case, m) -> list:
    """out's exact values (mpf) in logical order."""
    dim = next(a["value"] for a in m["attributes"] if a["name"] == "dim")
    x, dy = _logical(case, m, "x"), _logical(case, m, "yGrad")
    a, b = np.split(x, 2, axis=dim)
    with mpmath.workprec(PREC):
        out_a = np.empty(a.shape, dtype=object)
        out_b = np.empty(a.shape, dtype=object)
        for i in np.ndindex(*a.shape):
            av, bv, g = mpmath.mpf(a[i]), mpmath.mpf(b[i]), mpmath.mpf(dy[i])
            s = 1 / (1 + mpmath.exp(-av))
            out_a[i], out_b[i] = g * (s + s * (1 - s) * av) * bv, g * s * av
    return list(np.concatenate([out_a, out_b], axis=dim).reshape(-1))


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generated_yaml(tmp_path_factory, ORACLE_YAML, "swiglu_oracle")


def test_goldens_equal_the_oracle_rounded_once(generated):
    """Every golden (every axis, strided x, yGrad and out, A near 0 and beyond float32's exp range) is the oracle's
    value rounded once to its dtype, bit for bit."""
    cases = sorted(p.parent for p in generated.glob("*/case.json"))
    assert len(cases) == 27
    compared = 0
    for case in cases:
        m = harness.load(case)
        t = harness.tensors(m)["out"]
        dtype = D.lookup(t["dtype"])
        got = harness.view(harness.storage(case, t, "golden"), t).reshape(-1).view(dtype.uint_dtype)
        want = rounded_bits(oracle(case, m), dtype).astype(dtype.uint_dtype)
        assert np.array_equal(got, want), case.name
        compared += got.size
    assert compared > 2000


def ops_nn_float32(x: np.ndarray, dy: np.ndarray, dim: int) -> np.ndarray:
    """ops-nn's own golden (activation/swi_glu_grad/tests/assets/golden.py: torch.split, torch.sigmoid, the doc's
    products left to right) in numpy float32."""
    f = np.float32
    a, b = np.split(x.astype(f), 2, axis=dim)
    dy = dy.astype(f)
    with np.errstate(all="ignore"):
        s = f(1) / (f(1) + np.exp(-a))
        out_a = dy * s * (f(1) + a * (f(1) - s)) * b
        out_b = dy * s * a
    return np.concatenate([out_a, out_b], axis=dim)


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    return bundled_emulated(tmp_path_factory, bundled_produced, "swi_glu_grad")


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    work = tmp_path / "ops_nn"
    shutil.copytree(suite, work)
    wrote = 0
    for case in sorted(p.parent for p in work.glob("*/case.json")):
        m = harness.load(case)
        if m["expect_status"] != 0:
            continue
        dim = next(a["value"] for a in m["attributes"] if a["name"] == "dim")
        got = ops_nn_float32(_logical(case, m, "x"), _logical(case, m, "yGrad"), dim)
        write_dump(case, harness.tensors(m)["out"], got)
        wrote += 1
    assert wrote >= 60
    bad = not_passing(work, tmp_path / "ops_nn.json")
    assert not bad, bad


def test_kernel_follows_the_source_order():
    """swi_glu_grad_base.h by hand in float32: s = 1 / (exp(-A) + 1); out_A = ((1 - s) A + 1) (yGrad s) B;
    out_B = (s yGrad) A."""
    from aclnn_cli.ops.mathfns import exp

    f = np.float32
    a, b, dy = np.array([0.3, -2.5], f), np.array([1.7, -0.4], f), np.array([0.9, 1.3], f)
    s = f(1) / (exp(-a) + f(1))
    want_a = ((f(1) - s) * a + f(1)) * (dy * s) * b
    want_b = (s * dy) * a
    got = SPEC.kernel({"x": np.concatenate([a, b]).reshape(1, 4, 1), "yGrad": dy.reshape(1, 2, 1), "dim": 0})
    assert np.array_equal(got.reshape(-1), np.concatenate([want_a, want_b]))


DEFECTS = ["swiglu-halves-swapped", "swiglu-interleaved", "swiglu-no-derivative-term", "swiglu-sign-slip",
           "swiglu-out-b-without-a"]
LEGITIMATE = ["swiglu-stable", "swiglu-silu-first"]

GATE_YAML = """\
op: aclnnSwiGluGrad
defaults: {product: "950", seed: 9, dtype: [float32, float16, bfloat16]}
cases:
  - {name: last, shape: [64, 128]}
  - {name: middle, shape: [4, 16, 32], attributes: {dim: 1}}
  - {name: rows, shape: [65536, 4]}
"""


@pytest.fixture(scope="module")
def gate_suite(tmp_path_factory):
    return generated_yaml(tmp_path_factory, GATE_YAML, "swiglu_gate")


@pytest.mark.parametrize("variant", DEFECTS + LEGITIMATE)
def test_each_defect_fails_every_case_and_each_legitimate_variant_passes(gate_suite, tmp_path, variant):
    status = variant_statuses(gate_suite, tmp_path, variant)
    assert len(status) == 9
    want = "PASS" if variant in LEGITIMATE else "FAIL"
    assert {k: v for k, v in status.items() if v != want} == {}


def _status(x, dy, out, dim, dtype=D.FLOAT32, dy_dtype=None):
    descs = {"x": TensorDesc(dtype, tuple(x)), "yGrad": TensorDesc(dy_dtype or dtype, tuple(dy)),
             "out": TensorDesc(dtype, tuple(out))}
    return check(SPEC, "950", descs, {"dim": dim}).status


def test_contract():
    assert _status([4, 8], [4, 4], [4, 8], -1) == SUCCESS
    assert _status([4, 8], [2, 8], [4, 8], 0) == SUCCESS
    assert _status([4, 8], [4, 4], [4, 8], 2) == INVALID  # dim out of range
    assert _status([4, 8], [4, 4], [4, 8], -3) == INVALID
    assert _status([4, 7], [4, 3], [4, 7], -1) == INVALID  # odd along dim
    assert _status([4, 8], [4, 8], [4, 8], -1) == INVALID  # yGrad not halved
    assert _status([4, 8], [4, 4], [4, 4], -1) == INVALID  # out not x's shape
    assert _status([4, 8], [4, 4], [4, 8], -1, dy_dtype=D.FLOAT16) == INVALID  # dtypes differ


# hicann/ops-nn activation/swi_glu_grad/tests/st/arch35/ttk_kernel_swi_glu_grad_st.csv, unmodified (graph op
# SwiGluGrad: y_grad, x, attribute dim; 8-d and 6-d shapes, negative dims, a 1-d x of 8).
OPS_NN_TTK = Path(__file__).parent / "ops_nn_suites" / "ttk_kernel_swi_glu_grad_st.csv"


def test_ops_nn_ttk_suite_imports_and_passes_both_kernels(tmp_path):
    """Every row of ops-nn's TTK file imports (none skipped), and both the emulated 950 kernel and ops-nn's own
    golden formula in float32 pass it."""
    out = tmp_path / "out"
    r = run_cli("gen", OPS_NN_TTK, "-o", out)
    assert r.exit_code == 0, r.output
    assert "generated 5 cases" in r.output
    assert run_cli("emulate", out).exit_code == 0
    assert {c["status"] for c in verify_records(out)[1].values()} == {"PASS"}
    for case in sorted(p.parent for p in out.glob("*/case.json")):
        m = harness.load(case)
        dim = next(a["value"] for a in m["attributes"] if a["name"] == "dim")
        got = ops_nn_float32(_logical(case, m, "x"), _logical(case, m, "yGrad"), dim)
        write_dump(case, harness.tensors(m)["out"], got)
    bad = not_passing(out, tmp_path / "r.json")
    assert not bad, bad
