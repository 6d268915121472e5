"""aclnnGeGluBackward and aclnnGeGluV3Backward (the split family): goldens against an oracle that shares nothing with
the op or the family, ops-nn's own golden formula in float32 as an independent kernel over every bundled case, the
950 kernels' order by hand (and its float16 path, which multiplies in half), the defects the gate must see and
the contract's rules.

The oracle reads the generated case directories through the manifest's numbers alone (tests/harness.py: shape,
strides, offset), splits self with numpy along `dim` (activateLeft: the first half gelu'd) and evaluates the doc's
formula in mpmath at 200 bits: grad_linear = gradOutput gelu; grad_gelu'd = gradOutput linear gelu'(x), gelu' =
Phi(x) + x phi(x) (approximate 0) or the derivative of x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) / 2 (1).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import mpmath
import numpy as np
import pytest

import harness
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.split.ge_glu_backward import SPEC
from aclnn_cli.ops.split.ge_glu_v3_backward import SPEC as V3
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, SUCCESS
from helpers import run_cli, verify_records
from oracle import PREC
from rowblocks import bundled_emulated, generated_yaml, variant_statuses
from test_op_swi_glu_grad import _logical, rounded_bits

ORACLE_YAML = """\
op: aclnnGeGluV3Backward
defaults: {product: "950", seed: 31, dtype: [float32, float16, bfloat16],
           attributes: {approximate: [0, 1], activateLeft: [false, true]}}
cases:
  - {name: last, shape: [3, 12]}
  - {name: first, shape: [4, 3, 2], attributes: {dim: 0, approximate: [0, 1], activateLeft: [false, true]}}
  - {name: negative, shape: [2, 4, 3], attributes: {dim: -2, approximate: [0, 1], activateLeft: true}}
  - {name: wide, shape: [2, 16], inputs: {self: {uniform: [-30, 30]}}}
  - {name: near_zero, shape: [2, 16], inputs: {self: {uniform: [-0.76, -0.74]}}}
  - {name: strided, shape: [4, 6], attributes: {approximate: 0, activateLeft: false},
     tensors: {self: {layout: transposed}, gradInput: {layout: {step: 2, offset: 1}}, gelu: {layout: transposed}}}
"""


def _attr(m, name, default=None):
    return next((a["value"] for a in m["attributes"] if a["name"] == name), default)


def textbook_halves(lin, act, dy, gelu, approximate, mp):
    """(grad of the linear half, grad of the gelu'd one) in mpmath, written without cancellation far out: erfc
    for Phi; s = 1 / (1 + e^-2u) and 1 - s = e^-2u s for the tanh form's (1 + tanh u) / 2 and
    1 - tanh^2 u = 4 s (1 - s)."""
    if approximate == 0:
        d = mp.erfc(-act / mp.sqrt(2)) / 2 + act * mp.exp(-act * act / 2) / mp.sqrt(2 * mp.pi)
    else:
        k = mp.sqrt(2 / mp.pi)
        u, du = k * (act + mp.mpf("0.044715") * act ** 3), k * (1 + 3 * mp.mpf("0.044715") * act ** 2)
        e = mp.exp(-2 * u)
        s = 1 / (1 + e)
        d = s * (1 + 2 * act * (e * s) * du)
    return dy * gelu, dy * lin * d


def oracle(case, m) -> list:
    """gradInput's exact values (mpf) in logical order."""
    dim, approx, left = _attr(m, "dim"), _attr(m, "approximate"), _attr(m, "activateLeft", False)
    x, dy, gelu = (_logical(case, m, n) for n in ("self", "gradOutput", "gelu"))
    a, b = np.split(x, 2, axis=dim)
    lin, act = (b, a) if left else (a, b)
    with mpmath.workprec(PREC):
        d_lin, d_act = np.empty(a.shape, dtype=object), np.empty(a.shape, dtype=object)
        for i in np.ndindex(*a.shape):
            d_lin[i], d_act[i] = textbook_halves(*(mpmath.mpf(v[i]) for v in (lin, act, dy, gelu)), approx, mpmath)
    return list(np.concatenate([d_act, d_lin] if left else [d_lin, d_act], axis=dim).reshape(-1))


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generated_yaml(tmp_path_factory, ORACLE_YAML, "geglu_oracle")


GELU_ORACLE_YAML = """\
op: aclnnGeGluBackward
defaults: {product: "950", seed: 32, dtype: [float32, float16, bfloat16], attributes: {approximate: [0, 1]}}
cases:
  - {name: last, shape: [3, 12]}
  - {name: first, shape: [4, 3, 2], attributes: {dim: 0, approximate: [0, 1]}}
  - {name: wide, shape: [2, 16], inputs: {self: {uniform: [-30, 30]}}}
"""


def test_geglu_backward_goldens_equal_the_oracle_rounded_once(tmp_path_factory):
    """aclnnGeGluBackward (activateLeft false) through the same oracle: 18 cases."""
    assert_goldens_equal_the_oracle(generated_yaml(tmp_path_factory, GELU_ORACLE_YAML, "geglu_v1_oracle"), 18)


def test_goldens_equal_the_oracle_rounded_once(generated):
    """Every golden (both halves' roles, every axis, both forms, strided self, gelu and gradInput, the gelu'd half
    far out and near gelu's minimum) is the oracle's value rounded once to its dtype, bit for bit."""
    assert_goldens_equal_the_oracle(generated, 57)


def assert_goldens_equal_the_oracle(generated, count: int) -> None:
    cases = sorted(p.parent for p in generated.glob("*/case.json"))
    compared = 0
    for case in cases:
        m = harness.load(case)
        t = harness.tensors(m)["gradInput"]
        dtype = D.lookup(t["dtype"])
        got = harness.view(harness.storage(case, t, "golden"), t).reshape(-1).view(dtype.uint_dtype)
        want = rounded_bits(oracle(case, m), dtype).astype(dtype.uint_dtype)
        assert np.array_equal(got, want), case.name
        compared += got.size
    assert len(cases) == count and compared > 20 * count


_ERF = np.vectorize(math.erf, otypes=[np.float64])


def ops_nn_float32(x, dy, gelu, dim, approximate, left, half=False) -> np.ndarray:
    """ops-nn's own golden (activation/ge_glu_grad_v2/tests/assets/golden.py) in numpy float32: torch.erf there (a
    correctly rounded float32 erf here), the tanh form's g1 and g2, float16 inputs multiplied x1 * dy in half
    (half=True), as its golden and the device's float16 kernel do."""
    f = np.float32
    a, b = np.split(x, 2, axis=dim)
    x1, x2 = (b, a) if left else (a, b)
    with np.errstate(all="ignore"):
        p = (x1.astype(np.float16) * dy.astype(np.float16)).astype(f) if half else x1.astype(f) * dy.astype(f)
        x2 = x2.astype(f)
        if approximate == 1:
            g1 = f(1) / (np.exp(x2 * (x2 * x2 * f(-0.0713548162726002527220) + f(-1.5957691216057308))) + f(1))
            g2 = x2 * x2 * f(-0.21406444881780074632901625683959062) + f(-1.5957691216057308)
            d2 = (x2 * (g1 - f(1)) * g2 + f(1)) * g1 * p
        else:
            cdf = _ERF((x2 * f(0.70710678118)).astype(np.float64)).astype(f) * f(0.5) + f(0.5)
            pdf = np.exp(f(-0.5) * x2 * x2) * f(0.3989422804)
            d2 = (cdf + x2 * pdf) * p
        d1 = dy.astype(f) * gelu.astype(f)
    return np.concatenate([d2, d1] if left else [d1, d2], axis=dim)


def _write_dumps(directory: Path, half_for_float16: bool = False) -> int:
    """Every success case's gradInput dump replaced by ops_nn_float32 rounded to its dtype (RINT); how many."""
    wrote = 0
    for case in sorted(p.parent for p in directory.glob("*/case.json")):
        m = harness.load(case)
        if m["expect_status"] != 0:
            continue
        t = harness.tensors(m)["gradInput"]
        dtype = D.lookup(t["dtype"])
        got = ops_nn_float32(*(_logical(case, m, n) for n in ("self", "gradOutput", "gelu")), _attr(m, "dim"),
                             _attr(m, "approximate"), _attr(m, "activateLeft", False),
                             half=half_for_float16 and dtype is D.FLOAT16)
        buf = harness.storage(case, t).copy()
        harness.view(buf, t)[...] = D.round_from_f32(got.astype(np.float32), dtype, "rint")
        buf.tofile(case / t["dump"])
        wrote += 1
    return wrote


def _statuses(directory: Path, report: Path) -> dict:
    return {cid: (c["status"], c["reason"][:200]) for cid, c in verify_records(directory)[1].items()}


@pytest.mark.parametrize("key", ["ge_glu_backward", "ge_glu_v3_backward"])
def test_an_independent_float32_implementation_passes_every_bundled_case(tmp_path_factory, bundled_produced, tmp_path,
                                                                          key):
    """ops-nn's golden formula in float32 passes every bundled case; so does the device's float16 path (x1 * dy
    rounded to half before the float32 gelu', which the emulated kernel does not do)."""
    suite = bundled_emulated(tmp_path_factory, bundled_produced, key)
    for half in (False, True):
        work = tmp_path / f"half{half}"
        shutil.copytree(suite, work)
        assert _write_dumps(work, half) >= 100
        bad = {k: v for k, v in _statuses(work, tmp_path / "r.json").items() if v[0] != "PASS"}
        assert not bad, bad


def test_kernel_follows_the_source_order():
    """ge_glu_grad_v2_erf_base.h and _tanh_base.h by hand in float32 (Muls, Adds, Mins, Maxs each rounded)."""
    from aclnn_cli.ops.mathfns import exp

    f = np.float32
    lin, act = np.array([0.3, -2.5, 1.25], f), np.array([1.7, -0.4, 9.0], f)
    dy, gelu = np.array([0.9, 1.3, -0.7], f), np.array([0.2, 1.1, 3.0], f)
    p = lin * dy
    y = np.maximum(np.minimum(act * f(0.70710678118), f(3.92)), f(-3.92))
    t1 = y * y
    t2 = t1 * f(0.53443748819e-1)
    for c in (0.75517016694e1, 0.10162808918e3, 0.13938061484e4, 0.50637915060e4):
        t2 = (t2 + f(c)) * t1
    t2 = (t2 + f(0.29639384698e5)) * y
    q = (((((t1 + f(0.31212858877e2)) * t1 + f(0.39856963806e3)) * t1 + f(0.30231248150e4)) * t1
          + f(0.13243365831e5)) * t1 + f(0.26267224157e5))
    cdf = (t2 / q) * f(0.5) + f(0.5)
    pdf = exp((act * act) * f(-0.5)) * f(0.3989422804)
    want_erf = p * (cdf + pdf * act)
    g1 = f(1) / (exp((act * act * f(-0.0713548162726002527220) + f(-1.5957691216057308)) * act) + f(1))
    g2 = act * act * f(-0.21406444881780074632901625683959062) + f(-1.5957691216057307117597842397375274738)
    want_tanh = ((((g1 - f(1)) * act) * g2 + f(1)) * g1) * p
    for approx, want in ((0, want_erf), (1, want_tanh)):
        for left in (False, True):
            x = np.concatenate([act, lin] if left else [lin, act]).reshape(1, 6, 1)
            t = {"self": x, "gradOutput": dy.reshape(1, 3, 1), "gelu": gelu.reshape(1, 3, 1), "dim": 0,
                 "approximate": approx, "activateLeft": left}
            got = V3.kernel(t).reshape(-1)
            assert np.array_equal(got, np.concatenate([want, gelu * dy] if left else [gelu * dy, want]))


DEFECTS = ["geglu-wrong-half", "geglu-approximate-ignored", "geglu-gelu-recomputed", "geglu-no-pdf-term",
           "geglu-linear-half-dropped"]
LEGITIMATE = ["geglu-accurate-gelu-grad", "geglu-linear-last"]

GATE_YAML = """\
op: aclnnGeGluV3Backward
defaults: {product: "950", seed: 9, dtype: [float32, float16, bfloat16]}
cases:
  - {name: last, shape: [64, 128], attributes: {approximate: [0, 1], activateLeft: [false, true]}}
  - {name: rows, shape: [16384, 4], attributes: {approximate: [0, 1], activateLeft: true}}
"""


@pytest.fixture(scope="module")
def gate_suite(tmp_path_factory):
    return generated_yaml(tmp_path_factory, GATE_YAML, "geglu_gate")


@pytest.mark.parametrize("variant", DEFECTS + LEGITIMATE)
def test_each_defect_fails_every_case_and_each_legitimate_variant_passes(gate_suite, tmp_path, variant):
    """approximate-ignored computes the erf form: the approximate-0 cases are the kernel itself, and pass."""
    status = variant_statuses(gate_suite, tmp_path, variant)
    assert len(status) == 18
    for case, got in status.items():
        same = variant == "geglu-approximate-ignored" and "approximate0" in case
        assert got == ("PASS" if variant in LEGITIMATE or same else "FAIL"), case


def _status(x, dy, out, dim, approximate=1, gelu=None, dtype=D.FLOAT32, gelu_dtype=None, product="950"):
    descs = {"self": TensorDesc(dtype, tuple(x)), "gradOutput": TensorDesc(dtype, tuple(dy)),
             "gelu": TensorDesc(gelu_dtype or dtype, tuple(dy if gelu is None else gelu)),
             "gradInput": TensorDesc(dtype, tuple(out))}
    return check(SPEC, product, descs, {"dim": dim, "approximate": approximate}).status


def test_contract():
    assert _status([4, 8], [4, 4], [4, 8], -1) == SUCCESS
    assert _status([4, 8], [2, 8], [4, 8], 0, approximate=0) == SUCCESS
    assert _status([0, 8], [0, 4], [0, 8], -1) == SUCCESS  # empty
    assert _status([4, 8], [4, 4], [4, 8], 2) == INVALID  # dim out of range
    assert _status([4, 8], [4, 4], [4, 8], -3) == INVALID
    assert _status([4, 7], [4, 3], [4, 7], -1) == INVALID  # odd along dim
    assert _status([4, 8], [4, 8], [4, 8], -1) == INVALID  # gradOutput not halved
    assert _status([4, 8], [4, 4], [4, 8], -1, gelu=[4, 8]) == INVALID  # gelu not gradOutput's shape
    assert _status([4, 8], [4, 4], [4, 4], -1) == INVALID  # gradInput not self's shape
    assert _status([4, 8], [4, 4], [4, 8], -1, approximate=2) == INVALID
    assert _status([4, 8], [4, 4], [4, 8], -1, approximate=-1) == INVALID
    assert _status([4, 8], [4, 4], [4, 8], -1, gelu_dtype=D.FLOAT16) == INVALID  # dtypes differ
    assert _status([4, 8], [4, 4], [4, 8], -1, dtype=D.BFLOAT16, product="310P") == INVALID
    assert _status([4, 8], [4, 4], [4, 8], -1, approximate=0, product="310P") == SUCCESS  # (refused at tiling)


# hicann/ops-nn activation/ge_glu_grad_v2/tests/st/arch35/ttk_kernel_ge_glu_grad_v2_st.csv, unmodified (graph op
# GeGluGradV2: dy, x, gelu, attributes dim, approximate, activate_left: aclnnGeGluV3Backward).
OPS_NN_TTK = Path(__file__).parent / "ops_nn_suites" / "ttk_kernel_ge_glu_grad_v2_st.csv"


def test_ops_nn_ttk_suite_imports_and_passes_both_kernels(tmp_path):
    """Every row of ops-nn's TTK file imports (none skipped), and both the emulated 950 kernel and ops-nn's own
    golden formula (its float16 path too) pass it."""
    out = tmp_path / "out"
    r = run_cli("gen", OPS_NN_TTK, "-o", out)
    assert r.exit_code == 0, r.output
    assert "generated 5 cases" in r.output
    assert run_cli("emulate", out).exit_code == 0
    assert {v[0] for v in _statuses(out, tmp_path / "r.json").values()} == {"PASS"}
    assert _write_dumps(out, half_for_float16=True) == 5
    assert {v[0] for v in _statuses(out, tmp_path / "r.json").values()} == {"PASS"}
