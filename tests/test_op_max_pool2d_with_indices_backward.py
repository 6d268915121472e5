"""aclnnMaxPool2dWithIndicesBackward (the window family, a derived input): the indices gen derives against an
independent forward (PyTorch CPU's max_pool2d loop, tests/maxpool.py), goldens against an oracle of Fractions (each
window's gradOutput added at its index), an independent loop-based float32 kernel (the 950's SIMT order) over every
bundled case, the kernel at hand-computed points, each defect failing and each legitimate order passing, explicit
and refused indices, the contract, and ops-nn's own ATK suite (whose executor derives the indices by the forward).

The oracle, the forward and the independent kernel read the case directories through the manifest's numbers alone
(tests/harness.py) and place the windows with PyTorch's formulas: hstart = oh * sH - pH, taps hstart + j * dH.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import harness
import maxpool
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.window.max_pool2d_with_indices_backward import SPEC
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from helpers import run_cli, write_yaml
from rowblocks import (as_f64, atk_small_cases_pass, bundled_emulated, generated_yaml, goldens_against,
                       independent_dumps, not_passing, variant_statuses, passing_bundled_records)

F = np.float32
SUITES = Path(__file__).parent / "ops_nn_suites"


def _params(m):
    return maxpool.params(m, 2)


def _planes(case, m, name, dtype=np.float64) -> np.ndarray:
    return maxpool.blocks(case, m, name, 2, dtype)


forward = maxpool.forward  # (PyTorch CPU's forward loop, tests/maxpool.py)
oracle = maxpool.oracle(2)


def independent(case, m) -> np.ndarray:
    """The SIMT loop written from max_pool_grad_with_argmax_v3_simt.h: each position (h, w) sums in float32, over
    the windows (ph outer, pw inner) whose span may reach it, gradOutput where the window's index is h * W + w."""
    g = _planes(case, m, "gradOutput", F)
    idx = _planes(case, m, "indices", np.int64)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _params(m)
    t = harness.tensors(m)["self"]
    h, w = t["shape"][-2:]
    ho, wo = g.shape[-2:]
    out = np.zeros((g.shape[0], h, w), F)

    def first(i, pad, k, dil, st):
        span = (k - 1) * dil + 1
        return 0 if i + pad < span else (i + pad - span) // st + 1

    with np.errstate(invalid="ignore"):
        for i in range(h):
            for j in range(w):
                for oh in range(first(i, ph, kh, dh, sh), min((i + ph) // sh + 1, ho)):
                    for ow in range(first(j, pw, kw, dw, sw), min((j + pw) // sw + 1, wo)):
                        hit = idx[:, oh, ow] == i * w + j
                        out[hit, i, j] += g[hit, oh, ow]
    return out.reshape(t["shape"])


ORACLE_YAML = """\
op: aclnnMaxPool2dWithIndicesBackward
defaults: {product: "950", seed: 43, dtype: [float32, float16, bfloat16]}
cases:
  - {name: overlap, shape: [3, 4, 11, 13], attributes: {kernelSize: [3], stride: [1], padding: [1]},
     inputs: {self: {values: [0, 1, 2, 3, 4, 5, 6, 7, 8]}}}
  - {name: s2, shape: [2, 5, 12, 15], attributes: {kernelSize: [3, 4], stride: [2, 3], padding: [1, 2]}}
  - {name: ceil, shape: [2, 4, 10, 11], attributes: {kernelSize: [3], stride: [2], padding: [1], ceilMode: true}}
  - {name: dilation, shape: [2, 3, 13, 12], attributes: {kernelSize: [3, 2], stride: [1, 2], padding: [1, 1],
     dilation: [2, 3]}}
  - {name: ties, shape: [2, 3, 9, 9], attributes: {kernelSize: [4], stride: [1], padding: [2]},
     inputs: {self: {values: [1, 1, 0, 1]}}}
  - {name: cancelling, shape: [2, 4, 12, 12], attributes: {kernelSize: [5], stride: [1], padding: [2]},
     inputs: {gradOutput: {values: [1, -1, 0.5, -0.5, 3, 1.0e-3]}, self: {values: [9, 0, 1, 2, 3, 4, 5]}}}
  - {name: wide, shape: [1, 3, 10, 10], attributes: {kernelSize: [3], stride: [1], padding: [1]},
     inputs: {gradOutput: {values: [1.0e-3, -7.5, 250.0, 3.0e-2, -1.0e-5, 6.1e-5]}, self: {constant: 2}}}
  - {name: ncl, shape: [4, 9, 7], attributes: {kernelSize: [3], stride: [2], padding: [1]}}
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generated_yaml(tmp_path_factory, ORACLE_YAML, "maxpool_oracle")


def test_derived_indices_are_the_forwards_argmax(generated):
    """gen's indices equal PyTorch's forward loop on self (first maximum in scan order, dilated taps, ceil mode's
    cut windows), plane by plane, in every dtype; ties are most windows of the `ties` cases."""
    planes = 0
    for case in sorted(p.parent for p in generated.glob("*/case.json")):
        m = harness.load(case)
        x = _planes(case, m, "self")
        idx = _planes(case, m, "indices", np.int64)
        assert np.array_equal(idx, forward(x, *_params(m), idx.shape[-2:])), case.name
        planes += x.shape[0]
    assert planes > 100


def test_goldens_equal_the_oracle_rounded_once(generated):
    """Every golden (overlapping windows naming one maximum, ties, ceil mode, dilation, sums that cancel, values over
    many binades, NCL) is the exact sum rounded once to its dtype, bit for bit, some through the exact path."""
    compared, exact = goldens_against(generated, "gradInput", oracle)
    print("compared", compared, "exact path", exact)
    assert min(compared.values()) > 4000 and sum(exact.values()) > 0


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    """The bundled file generated and emulated: the session's cases (rowblocks.bundled_emulated)."""
    return bundled_emulated(tmp_path_factory, bundled_produced, "max_pool2d_with_indices_backward")


def test_the_emulated_kernel_passes_every_bundled_case(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "max_pool2d_with_indices_backward")
    assert len(cases) == 93


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    wrote = independent_dumps(suite, tmp_path / "loops", independent, "gradInput")
    assert wrote == 60
    bad = not_passing(tmp_path / "loops", tmp_path / "loops.json")
    assert not bad, bad


def test_bundled_derived_indices_and_explicit_ones(suite):
    """Every bundled case's indices are the forward's, except the case that gives them (kept as given)."""
    for case in sorted(p.parent for p in suite.glob("*/case.json")):
        m = harness.load(case)
        if m["expect_status"] != 0:
            continue
        idx = _planes(case, m, "indices", np.int64)
        if "explicit_indices" in case.name:
            assert idx.reshape(-1).tolist() == [5, 7, 13, 15]
            continue
        assert np.array_equal(idx, forward(_planes(case, m, "self"), *_params(m), idx.shape[-2:])), case.name


# ------------------------------------------------------------------ the kernel at hand-computed points

def _block(x, g, idx=None, **attrs):
    full = {"kernelSize": (2,), "stride": (2,), "padding": (0,), "dilation": (1,), "ceilMode": False, **attrs}
    t = {"self": np.asarray(x, F)[None], "gradOutput": np.asarray(g, F)[None], **full}
    t["indices"] = SPEC.derived["indices"](as_f64(t)) if idx is None else np.asarray(idx, np.int64)[None]
    return t


def test_the_doc_example():
    """The API doc's example: self 4 x 3, 2 x 2 windows at stride 2: indices [0, 6], the two gradients placed there."""
    x = [[0.0850, -0.5147, -0.0212], [-0.5654, -0.3222, 0.5847], [1.7510, 0.9954, 0.1842], [0.8392, 0.4835, 0.9213]]
    t = _block(x, [[0.4757], [0.1726]])
    assert t["indices"].reshape(-1).tolist() == [0, 6]
    want = np.zeros((1, 4, 3), F)
    want[0, 0, 0], want[0, 2, 0] = F(0.4757), F(0.1726)
    assert np.array_equal(SPEC.kernel(t), want)


def test_overlapping_windows_add_in_float32_and_each_defect_differs():
    """self [0, 1, 5, 1, 0], 1 x 3 windows at stride 1: all three windows' maximum is position 2. gradOutput
    [1, 2^-11, 2^-11]: float32 adds them to 1 + 2^-10 (a float16 value); float16 accumulation loses each 2^-11
    (1 + 2^-11 is a tie, to even: 1); last-write keeps 2^-11; first-in-window gives each window's first position."""
    t = _block([[0, 1, 5, 1, 0]], [[1, 2.0**-11, 2.0**-11]], kernelSize=(1, 3), stride=(1,))
    assert t["indices"].reshape(-1).tolist() == [2, 2, 2]
    assert SPEC.kernel(t).reshape(-1).tolist() == [0, 0, 1 + 2.0**-10, 0, 0]
    v = SPEC.variants
    assert v["maxpool-accumulate-fp16"](t).reshape(-1).tolist() == [0, 0, 1, 0, 0]
    assert v["maxpool-last-write-wins"](t).reshape(-1).tolist() == [0, 0, 2.0**-11, 0, 0]
    assert v["maxpool-first-in-window"](t).reshape(-1).tolist() == [1, 2.0**-11, 2.0**-11, 0, 0]
    for legit in ("maxpool-reversed", "maxpool-columns"):
        assert v[legit](t).reshape(-1).tolist() == [0, 0, 1 + 2.0**-10, 0, 0]
    ref = SPEC.reference(as_f64(t))
    assert ref.value.reshape(-1).tolist() == [0, 0, 1 + 2.0**-10, 0, 0]
    assert ref.allowance.reshape(-1)[2] > 0 and ref.allowance.reshape(-1)[[0, 1, 3, 4]].tolist() == [0] * 4


def test_ties_take_the_first_maximum_and_padding_none():
    """A constant plane: each window's index is its first position inside the input (padding is no position)."""
    t = _block(np.ones((4, 4)), np.ones((3, 3)), kernelSize=(3,), stride=(2,), padding=(1,), ceilMode=True)
    assert t["indices"].reshape(3, 3).tolist() == [[0, 1, 3], [4, 5, 7], [12, 13, 15]]


def test_dilated_windows_reach_their_taps_only():
    """kernel 2, dilation 3 on a row of 7: windows cover {0, 3}, {1, 4}, {2, 5}, {3, 6}; the maximum 9 at 3 is in
    two, {1, 4} is a tie (the first), 8 at 6 is no window's maximum."""
    t = _block([[0, 1, 2, 9, 1, 1, 8]], [[1, 2, 4, 8]], kernelSize=(1, 2), stride=(1,), dilation=(1, 3))
    assert t["indices"].reshape(-1).tolist() == [3, 1, 2, 3]
    assert SPEC.kernel(t).reshape(-1).tolist() == [0, 2, 4, 9, 0, 0, 0]


def test_exact_at_equals_exact_everywhere():
    rng = np.random.default_rng(5)
    attrs = {"kernelSize": (3, 2), "stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "ceilMode": True}
    t = {"gradOutput": rng.normal(size=(2, 7, 6)).astype(F), "self": rng.integers(0, 3, (2, 7, 5)).astype(F), **attrs}
    t["indices"] = SPEC.derived["indices"](as_f64(t))
    maxpool.assert_exact_at_is_exact(SPEC, t)


# ------------------------------------------------------------------ defects and legitimate variants

GATE_YAML = """\
op: aclnnMaxPool2dWithIndicesBackward
defaults: {product: "950", seed: 17, dtype: [float32, float16, bfloat16]}
cases:
  - {name: overlap, shape: [2, 3, 11, 13], attributes: {kernelSize: [3], stride: [1], padding: [1]},
     inputs: {self: {values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}, gradOutput: {uniform: [0, 1]}}}
  - {name: ceil, shape: [2, 3, 10, 11], attributes: {kernelSize: [3], stride: [2], padding: [1], ceilMode: true}}
  - {name: many, shape: [1, 2, 20, 20], attributes: {kernelSize: [7], stride: [1], padding: [3]},
     inputs: {self: {values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]},
              gradOutput: {uniform: [0, 1]}}}
"""


@pytest.fixture(scope="module")
def gate_suite(tmp_path_factory):
    return generated_yaml(tmp_path_factory, GATE_YAML, "maxpool_gate")


# Which gate cases each defect changes: fp16 accumulation where many terms reach a position in float32 and bfloat16
# (float16's own sums of float16 terms in 16 bits stay near); the rest everywhere.
CHANGES = {
    "maxpool-first-in-window": ("overlap", "ceil", "many"),
    "maxpool-last-write-wins": ("overlap", "ceil", "many"),
    "maxpool-index-transposed": ("overlap", "ceil", "many"),
    "maxpool-accumulate-fp16": ("many",),
}
LEGITIMATE = ("maxpool-reversed", "maxpool-columns")


@pytest.mark.parametrize("variant", sorted(CHANGES) + list(LEGITIMATE))
def test_each_defect_fails_where_it_changes_the_result_and_legitimate_orders_pass(gate_suite, tmp_path, variant):
    status = variant_statuses(gate_suite, tmp_path, variant)
    assert len(status) == 9
    if variant in LEGITIMATE:
        assert set(status.values()) == {"PASS"}, status
        return
    changed = {k: v for k, v in status.items() if k.split("-")[1] in CHANGES[variant]
               and (variant != "maxpool-accumulate-fp16" or not k.endswith("float16"))}
    assert changed and set(changed.values()) == {"FAIL"}, status


# ------------------------------------------------------------------ explicit indices, the contract

def test_explicit_indices_outside_their_window_are_refused(tmp_path):
    """The doc: indices in [0, H W), the forward's argmax; an index naming no position of its window has no defined
    result (the SIMT kernel drops it, PyTorch's scatter adds it): gen refuses the case, naming the index."""
    for values, what in (([5, 7, 13, 16], "is 16"), ([5, 7, 13, -1], "is -1"), ([5, 7, 13, 0], "is 0")):
        text = ("op: aclnnMaxPool2dWithIndicesBackward\ncases:\n  - {name: bad, product: '950', dtype: float32, shape: [1, 1, 4, 4], "
                f"attributes: {{kernelSize: [2], stride: [2], padding: [0]}}, inputs: {{indices: {{values: {values}}}}}}}\n")
        output = maxpool.refusal(tmp_path, text)
        assert "indices[0, 1, 1]" in output and what in output, output


def test_a_derived_fill_on_an_op_without_a_derivation_is_refused(tmp_path):
    text = ("op: aclnnAvgPool2dBackward\ncases:\n  - {name: bad, dtype: float32, shape: [1, 1, 4, 4], "
            "attributes: {kernelSize: [2]}, inputs: {gradOutput: {derived: true}}}\n")
    r = run_cli("gen", write_yaml(tmp_path, text, "c.yaml"), "-o", tmp_path / "out")
    assert r.exit_code == 2 and "does not derive gradOutput" in r.output, r.output


def test_the_derived_indices_do_not_depend_on_the_chunk(tmp_path):
    """gen writes the same indices whether it reads self one plane at a time or all at once."""
    text = ("op: aclnnMaxPool2dWithIndicesBackward\ncases:\n  - {name: c, product: '950', dtype: float16, shape: [3, 4, 9, 10], "
            "attributes: {kernelSize: [3], stride: [1], padding: [1]}}\n")
    got = maxpool.indices_by_chunk(tmp_path, text, (90, 1 << 20))
    assert got[0] == got[1] and len(got[0]) == 3 * 4 * 9 * 10 * 4


BASE = {"kernelSize": (3,), "stride": (2,), "padding": (1,), "dilation": (1,), "ceilMode": False}


def _status(g, s, i, o, attrs, dtype=D.FLOAT32, product="950", i_dtype=D.INT32, s_dtype=None):
    return maxpool.status(SPEC, (g, s, i, o), attrs, BASE, dtype, product, i_dtype, s_dtype)


def test_contract():
    ok = ([2, 3, 4, 4], [2, 3, 8, 8], [2, 3, 4, 4], [2, 3, 8, 8])
    assert _status(*ok, {}) == SUCCESS
    assert _status([3, 4, 4], [3, 8, 8], [3, 4, 4], [3, 8, 8], {}) == SUCCESS  # NCL
    assert _status(*ok, {}, i_dtype=D.INT64) == SUCCESS
    assert _status(*ok, {}, i_dtype=D.FLOAT32) == INVALID
    assert _status(*ok, {}, dtype=D.BFLOAT16) == SUCCESS
    assert _status(*ok, {}, dtype=D.FLOAT16, product="A2") == INVALID  # A2, A3: float32 only
    assert _status(*ok, {}, dtype=D.FLOAT32, product="A3") == SUCCESS
    assert set(SPEC.products) == {"950", "A3", "A2"}  # (910, 310P, 310B: not supported)
    assert _status(*ok, {}, s_dtype=D.FLOAT16) == INVALID
    assert _status(*ok, {"kernelSize": (0,)}) == INVALID
    assert _status(*ok, {"kernelSize": (2, 2, 2)}) == INVALID
    assert _status(*ok, {"stride": (0,)}) == INVALID
    assert _status(*ok, {"stride": (1, 1, 1)}) == INVALID
    assert _status(*ok, {"padding": (2,)}) == INVALID  # more than half of 3
    assert _status(*ok, {"padding": ()}) == INVALID
    assert _status(*ok, {"dilation": (0,)}) == INVALID
    assert _status(*ok, {"dilation": ()}) == INVALID
    assert _status(*ok, {"kernelSize": (4, 2), "padding": (2, 1), "stride": (4, 2)}) == SUCCESS  # exactly half
    assert _status([2, 3, 4, 4], [2, 3, 8, 8], [2, 3, 4, 5], [2, 3, 8, 8], {}) == INVALID  # indices not gradOutput's
    assert _status([2, 3, 4, 4], [2, 3, 8, 8], [2, 3, 4, 4], [2, 3, 8, 9], {}) == INVALID  # gradInput not self's
    descs = {"gradOutput": TensorDesc(D.FLOAT32, (2, 3, 4, 4)), "self": TensorDesc(D.FLOAT32, (2, 3, 8, 8)),
             "indices": TensorDesc(D.INT32, (2, 3, 4, 4)), "gradInput": TensorDesc(D.FLOAT32, (2, 3, 8, 8))}
    for name in ("stride", "padding", "dilation"):
        assert check(SPEC, "950", descs, {**BASE, name: None}).status == NULLPTR, name
    null = {**descs, "indices": TensorDesc(D.INT32, (2, 3, 4, 4), True)}
    assert check(SPEC, "950", null, BASE).status == NULLPTR


# ------------------------------------------------------------------ ops-nn's own suite

ATK = "atk_aclnnMaxPool2dWithIndicesBackward.json"  # pooling/max_pool3d_grad_with_argmax/tests/st/aclnnMaxPool2dWithIndicesBackward/
QUICK_ELEMENTS = 20_000


def test_ops_nn_atk_suite_imports_whole_and_its_small_cases_pass_the_kernel(tmp_path):
    """All 201 cases import: the indices' stand-in shapes and ranges dropped (the executor derives them by the forward,
    as gen does). The small ones are generated, emulated and verified: every one PASSes, and so does the independent
    loop kernel on each. (All 201, 38 M elements, pass the emulated kernel too: about 7 CPU-s of gen.)"""
    cases, small = atk_small_cases_pass(tmp_path, SUITES / ATK, "max_pool2d_with_indices_backward", independent,
                                        "gradInput", QUICK_ELEMENTS)
    assert len(cases) == 201 and {c["inputs"]["indices"]["derived"] for c in cases} == {True}
    assert len(small) == 75
