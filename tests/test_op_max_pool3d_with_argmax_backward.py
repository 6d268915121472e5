"""aclnnMaxPool3dWithArgmaxBackward (the window family in three axes, a derived input): the indices gen derives
against PyTorch CPU's forward loop (tests/maxpool.py, shared with the 2-D op's test), goldens against an oracle of
Fractions (each window's gradOutput added at its index), an independent float32 kernel (a scatter-add with
np.add.at over the forward's argmax, written differently from the op's rank-by-rank scatter) over every bundled case,
the emulated kernel against the SIMT kernel's loop transcribed, the kernel at hand-computed points, each defect
failing in each dtype and each legitimate order passing, explicit and refused indices, the contract, and ops-nn's own
ATK suite (whose executor derives the indices by torch's forward).
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import numpy as np
import pytest

import harness
import maxpool
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.window.max_pool3d_with_argmax_backward import SPEC
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from helpers import run_cli
from rowblocks import (as_f64, atk_small_cases_pass, bundled_emulated, generated_yaml, goldens_against,
                       independent_dumps, not_passing, passing_bundled_records)

F = np.float32
SUITES = Path(__file__).parent / "ops_nn_suites"
oracle = maxpool.oracle(3)


def independent(case, m) -> np.ndarray:
    """A float32 scatter-add: np.add.at (unbuffered, in the order given: windows in (od, oh, ow) order, the SIMT
    kernel's per position) of gradOutput at the forward's argmax of self (tests/maxpool.forward), or at the case's
    own indices where it gives them."""
    g = maxpool.blocks(case, m, "gradOutput", 3, F)
    shape = harness.tensors(m)["self"]["shape"]
    given = harness.tensors(m)["indices"]
    if "values" in given.get("fill", {}):
        idx = maxpool.blocks(case, m, "indices", 3, np.int64)
    else:
        idx = maxpool.forward(maxpool.blocks(case, m, "self", 3), *maxpool.params(m, 3), g.shape[1:])
    out = np.zeros((g.shape[0], int(np.prod(shape[-3:]))), F)
    planes = np.broadcast_to(np.arange(g.shape[0])[:, None], (g.shape[0], int(np.prod(g.shape[1:]))))
    with np.errstate(invalid="ignore"):
        np.add.at(out, (planes.reshape(-1), idx.reshape(-1)), g.reshape(-1))
    return out.reshape(shape)


ORACLE_YAML = """\
op: aclnnMaxPool3dWithArgmaxBackward
defaults: {product: "950", seed: 47, dtype: [float32, float16, bfloat16]}
cases:
  - {name: overlap, shape: [2, 3, 6, 7, 7], attributes: {kernelSize: [3], stride: [1], padding: [1]},
     inputs: {self: {values: [0, 1, 2, 3, 4, 5, 6, 7, 8]}}}
  - {name: s2, shape: [2, 2, 7, 8, 9], attributes: {kernelSize: [2, 3, 4], stride: [1, 2, 3], padding: [1, 1, 2]}}
  - {name: ceil, shape: [2, 3, 6, 7, 8], attributes: {kernelSize: [3], stride: [2], padding: [1], ceilMode: true}}
  - {name: dilation, shape: [1, 3, 7, 8, 7], attributes: {kernelSize: [2, 3, 2], stride: [1, 1, 2],
     padding: [1, 1, 1], dilation: [2, 2, 3]}}
  - {name: ties, shape: [2, 2, 6, 6, 6], attributes: {kernelSize: [4], stride: [1], padding: [2]},
     inputs: {self: {values: [1, 1, 0, 1]}}}
  - {name: cancelling, shape: [2, 2, 7, 7, 7], attributes: {kernelSize: [4], stride: [1], padding: [2]},
     inputs: {gradOutput: {values: [1, -1, 0.5, -0.5, 3, 1.0e-3]}, self: {values: [9, 0, 1, 2, 3, 4, 5]}}}
  - {name: wide, shape: [1, 2, 6, 6, 6], attributes: {kernelSize: [3], stride: [1], padding: [1]},
     inputs: {gradOutput: {values: [1.0e-3, -7.5, 250.0, 3.0e-2, -1.0e-5, 6.1e-5]}, self: {constant: 2}}}
  - {name: cdhw, shape: [4, 6, 7, 5], attributes: {kernelSize: [3], stride: [2], padding: [1]}}
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generated_yaml(tmp_path_factory, ORACLE_YAML, "maxpool3d_oracle")


def test_derived_indices_are_the_forwards_argmax(generated):
    """gen's indices (the separable forward, ops/window/argmax.py) equal PyTorch's loop over every window's taps in
    (d, h, w) order, in every dtype: dilated taps, ceil mode's cut windows, ties (most windows of `ties`, `wide`)."""
    cases = sorted(p.parent for p in generated.glob("*/case.json"))
    assert len(cases) == 24
    for case in cases:
        assert maxpool.derived_are_forwards(case, harness.load(case), 3), case.name


def test_goldens_equal_the_oracle_rounded_once(generated):
    """Every golden (overlapping windows naming one maximum, ties, ceil mode, dilation, sums that cancel, values over
    many binades, CDHW) is the exact sum rounded once to its dtype, bit for bit, some through the exact path."""
    compared, exact = goldens_against(generated, "gradInput", oracle)
    print("compared", compared, "exact path", exact)
    assert min(compared.values()) > 10_000 and sum(exact.values()) > 0


def simt(case, m) -> np.ndarray:
    """MaxPool3DGradWithArgmaxNcdhw (op_kernel/arch35/max_pool3d_grad_with_argmax_simt.h) transcribed: each input
    position (d, h, w) from 0, `gradient` a float32 0, the windows from PStart to PEnd per axis (pd outer, pw
    inner), adding the window's float32 gradOutput where its argmax equals d H W + h W + w; every plane at once."""
    g = maxpool.blocks(case, m, "gradOutput", 3, F)
    idx = maxpool.blocks(case, m, "indices", 3, np.int64)
    k, s, p, dil = maxpool.params(m, 3)
    shape = harness.tensors(m)["self"]["shape"]
    n, outs = shape[-3:], g.shape[1:]

    def p_start(i, a):
        span = (k[a] - 1) * dil[a] + 1
        return 0 if i + p[a] < span else (i + p[a] - span) // s[a] + 1

    def p_end(i, a):
        return min((i + p[a]) // s[a] + 1, outs[a])

    out = np.zeros((g.shape[0], *n), F)
    with np.errstate(invalid="ignore", over="ignore"):
        for d, h, w in itertools.product(*(range(x) for x in n)):
            gradient = np.zeros(g.shape[0], F)
            for pd in range(p_start(d, 0), p_end(d, 0)):
                for ph in range(p_start(h, 1), p_end(h, 1)):
                    for pw in range(p_start(w, 2), p_end(w, 2)):
                        hit = idx[:, pd, ph, pw] == (d * n[1] + h) * n[2] + w
                        gradient = np.where(hit, gradient + g[:, pd, ph, pw], gradient)
            out[:, d, h, w] = gradient
    return out.reshape(shape)


def test_the_emulated_kernel_is_the_simt_kernels_loop(generated, tmp_path):
    """The emulated kernel's float32 sums (its dumps, before rounding to the dtype) equal the SIMT kernel's loop
    transcribed, bit for bit after the one rounding, on every case of the oracle set (dilation, ceil mode, ties)."""
    out = tmp_path / "emulated"
    shutil.copytree(generated, out)
    assert run_cli("emulate", out).exit_code == 0
    for case in sorted(p.parent for p in out.glob("*/case.json")):
        m = harness.load(case)
        t = harness.tensors(m)["gradInput"]
        dump = harness.view(np.fromfile(case / t["dump"], D.lookup(t["dtype"]).np_dtype), t)
        want = D.round_from_f32(simt(case, m), D.lookup(t["dtype"]), "rint")
        assert dump.tobytes() == np.ascontiguousarray(want).tobytes(), case.name


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    """The bundled file generated and emulated: the session's cases (rowblocks.bundled_emulated)."""
    return bundled_emulated(tmp_path_factory, bundled_produced, "max_pool3d_with_argmax_backward")


def test_the_emulated_kernel_passes_every_bundled_case(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "max_pool3d_with_argmax_backward")
    assert len(cases) == 103


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    wrote = independent_dumps(suite, tmp_path / "scatter", independent, "gradInput")
    assert wrote == 65
    bad = not_passing(tmp_path / "scatter", tmp_path / "scatter.json")
    assert not bad, bad


def test_bundled_derived_indices_and_explicit_ones(suite):
    """Every bundled case's indices are the forward's, except the case that gives them (kept as given)."""
    for case in sorted(p.parent for p in suite.glob("*/case.json")):
        m = harness.load(case)
        if m["expect_status"] != 0 or "empty" in case.name:
            continue
        if "explicit_indices" in case.name:
            assert maxpool.blocks(case, m, "indices", 3, np.int64).reshape(-1).tolist() == [21, 23, 29, 31]
            continue
        assert maxpool.derived_are_forwards(case, m, 3), case.name


# ------------------------------------------------------------------ the kernel at hand-computed points

def _block(x, g, idx=None, **attrs):
    """One volume: self x (D, H, W), gradOutput g (Do, Ho, Wo) as the family's blocks (k, D H, W), (k, Do Ho, Wo)."""
    x, g = np.asarray(x, F), np.asarray(g, F)
    full = {"kernelSize": (2,), "stride": (2,), "padding": (0,), "dilation": (1,), "ceilMode": False,
            "inputDepth": x.shape[0], "gradDepth": g.shape[0], **attrs}
    t = {"self": x.reshape(1, -1, x.shape[-1]), "gradOutput": g.reshape(1, -1, g.shape[-1]), **full}
    t["indices"] = (SPEC.derived["indices"](as_f64(t)) if idx is None
                    else np.asarray(idx, np.int64).reshape(t["gradOutput"].shape))
    return t


def test_the_doc_example():
    """The API doc's example: self 2 x 2 x 2, one 2 x 2 x 2 window: index 6 (1.7510), the gradient placed there."""
    x = np.array([0.0850, -0.5147, -0.0212, -0.5654, -0.3222, 0.5847, 1.7510, 0.9954]).reshape(2, 2, 2)
    t = _block(x, [[[0.4757]]])
    assert t["indices"].reshape(-1).tolist() == [6]
    want = np.zeros(8, F)
    want[6] = F(0.4757)
    assert np.array_equal(SPEC.kernel(t).reshape(-1), want)


def test_overlapping_windows_add_in_float32_and_each_defect_differs():
    """self [0, 1, 5, 1, 0] along D, 3 x 1 x 1 windows at stride 1: all three windows' maximum is d = 2. gradOutput
    [1, 2^-11, 2^-11]: float32 adds them to 1 + 2^-10; float16 accumulation loses each 2^-11 (a tie, to even: 1);
    last-write keeps 2^-11; first-in-window gives each window's first position."""
    t = _block(np.array([0, 1, 5, 1, 0]).reshape(5, 1, 1), np.array([1, 2.0**-11, 2.0**-11]).reshape(3, 1, 1),
               kernelSize=(3, 1, 1), stride=(1,))
    assert t["indices"].reshape(-1).tolist() == [2, 2, 2]
    right = [0, 0, 1 + 2.0**-10, 0, 0]
    assert SPEC.kernel(t).reshape(-1).tolist() == right
    v = SPEC.variants
    assert v["maxpool3d-accumulate-fp16"](t).reshape(-1).tolist() == [0, 0, 1, 0, 0]
    assert v["maxpool3d-last-write-wins"](t).reshape(-1).tolist() == [0, 0, 2.0**-11, 0, 0]
    assert v["maxpool3d-first-in-window"](t).reshape(-1).tolist() == [1, 2.0**-11, 2.0**-11, 0, 0]
    for legit in ("maxpool3d-reversed", "maxpool3d-columns"):
        assert v[legit](t).reshape(-1).tolist() == right
    ref = SPEC.reference(as_f64(t))
    assert ref.value.reshape(-1).tolist() == right
    assert ref.allowance.reshape(-1)[2] > 0 and ref.allowance.reshape(-1)[[0, 1, 3, 4]].tolist() == [0] * 4


def test_index_order_padding_and_ties_defects_at_hand_computed_points():
    """A 2 x 3 x 4 volume: index d 12 + h 4 + w; read with its axes reversed it is w 6 + h 2 + d. Padding 1 with
    stride 1: the window starting at -1 is missed where the SIMT range is computed without the padding. A constant
    volume: the first maximum of each window (the forward's) against the last (a kernel recomputing it)."""
    x = np.arange(24.0).reshape(2, 3, 4)
    t = _block(x, np.ones((1, 1, 1)), kernelSize=(2, 3, 4), stride=(2, 3, 4))
    assert t["indices"].reshape(-1).tolist() == [23]  # (1, 2, 3)
    assert np.flatnonzero(SPEC.variants["maxpool3d-index-axes-reversed"](t).reshape(-1)).tolist() == [3 * 6 + 2 * 2 + 1]
    t = _block(np.array([0, 1, 5, 1]).reshape(4, 1, 1), np.ones((4, 1, 1)), kernelSize=(3, 1, 1), stride=(1,),
               padding=(1, 0, 0))
    assert t["indices"].reshape(-1).tolist() == [1, 2, 2, 2]
    assert SPEC.kernel(t).reshape(-1).tolist() == [0, 1, 3, 0]
    # position 2's window 3 (taps 2 to 4) lies past the range the padding-free pEnd = i / s + 1 = 3 gives
    assert SPEC.variants["maxpool3d-padding-ignored"](t).reshape(-1).tolist() == [0, 1, 2, 0]
    t = _block(np.ones((3, 1, 1)), np.ones((2, 1, 1)), kernelSize=(2, 1, 1), stride=(1,))
    assert t["indices"].reshape(-1).tolist() == [0, 1]
    assert SPEC.variants["maxpool3d-last-maximum"](t).reshape(-1).tolist() == [0, 1, 1]


def test_exact_at_equals_exact_everywhere():
    rng = np.random.default_rng(5)
    x, g = rng.integers(0, 3, (4, 5, 5)), rng.normal(size=(4, 5, 5))
    t = _block(x, g, kernelSize=(2, 3, 2), stride=(1,), padding=(1, 1, 1), ceilMode=True)
    maxpool.assert_exact_at_is_exact(SPEC, t)


# ------------------------------------------------------------------ defects and legitimate variants

GATE_YAML = """\
op: aclnnMaxPool3dWithArgmaxBackward
defaults: {product: "950", seed: 19, dtype: [float32, float16, bfloat16]}
cases:
  - {name: overlap, shape: [2, 3, 5, 6, 6], attributes: {kernelSize: [3], stride: [1], padding: [1]},
     inputs: {self: {uniform: [0, 1]}, gradOutput: {uniform: [0, 1]}}}
  - {name: ceil, shape: [2, 3, 6, 7, 8], attributes: {kernelSize: [3], stride: [2], padding: [1], ceilMode: true},
     inputs: {self: {uniform: [0, 1]}}}
  - {name: ties, shape: [2, 2, 5, 6, 6], attributes: {kernelSize: [3], stride: [1], padding: [1]},
     inputs: {self: {constant: 1}, gradOutput: {uniform: [0, 1]}}}
  - {name: peak, shape: [1, 2, 7, 7, 7], attributes: {kernelSize: [7], stride: [1], padding: [3]},
     inputs: {indices: {values: [171]}, gradOutput: {values: [0.4, 0.401]}}}
  - {name: peak_wide, dtype: [float32, bfloat16], shape: [1, 2, 7, 7, 7],
     attributes: {kernelSize: [7], stride: [1], padding: [3]},
     inputs: {indices: {values: [171]}, gradOutput: {values: [1000.0, 0.4]}}}
"""

_every_dtype = maxpool.every_dtype


@pytest.fixture(scope="module")
def gate_suite(tmp_path_factory):
    return generated_yaml(tmp_path_factory, GATE_YAML, "maxpool3d_gate")


# The (case, dtype) each defect changes past the standard. peak, peak_wide: 343 windows all naming the volume's centre
# (explicit indices); float16 accumulation drifts 3 % on peak's 343 terms near 0.4 (MERE-MARE's float16 limit: 1 %) and
# overflows on peak_wide's sum of 171,000 (finite in its float32 and bfloat16; in float16 the golden is inf). The
# centre (3, 3, 3) reads the same with the axes reversed, and explicit indices take no tie rule. `ties`: self
# constant, every window's first position its index; the last maximum of 16-bit uniform values ties in some windows
# of `overlap` and `ceil` too (not asserted either way).
CHANGES = {
    "maxpool3d-first-in-window": _every_dtype("overlap", "ceil", "peak"),
    "maxpool3d-last-write-wins": _every_dtype("overlap", "ceil", "ties", "peak"),
    "maxpool3d-accumulate-fp16": {("peak", "float32"), ("peak", "float16"), ("peak_wide", "float32"),
                                  ("peak_wide", "bfloat16")},
    "maxpool3d-index-axes-reversed": _every_dtype("overlap", "ceil", "ties"),
    "maxpool3d-padding-ignored": _every_dtype("overlap", "ceil", "ties", "peak"),
    "maxpool3d-last-maximum": _every_dtype("ties"),
}
LEGITIMATE = ("maxpool3d-reversed", "maxpool3d-columns")


def test_the_variants_are_declared():
    assert set(SPEC.variants) == set(CHANGES) | set(LEGITIMATE)


@pytest.mark.parametrize("variant", sorted(CHANGES) + list(LEGITIMATE))
def test_each_defect_fails_in_each_dtype_and_legitimate_orders_pass(gate_suite, tmp_path, variant):
    maxpool.assert_variant(gate_suite, tmp_path, variant, CHANGES, LEGITIMATE, 14)


# ------------------------------------------------------------------ explicit indices, the contract

def test_explicit_indices_outside_their_window_are_refused(tmp_path):
    """The doc: indices are the forward's argmax in the (D, H, W) volume; an index naming no position of its window has
    no defined result (the SIMT kernel drops it, a scatter adds it): gen refuses the case, naming the index."""
    for values, what in (([21, 23, 29, 32], "is 32"), ([21, 23, 29, -1], "is -1"), ([21, 23, 29, 0], "is 0")):
        text = ("op: aclnnMaxPool3dWithArgmaxBackward\ncases:\n  - {name: bad, product: '950', dtype: float32, "
                "shape: [1, 1, 2, 4, 4], attributes: {kernelSize: [2], stride: [2], padding: [0]}, "
                f"inputs: {{indices: {{values: {values}}}}}}}\n")
        output = maxpool.refusal(tmp_path, text)
        assert "indices[0, 0, 1, 1]" in output and what in output and "2 x 4 x 4 volume" in output, output


def test_the_derived_indices_do_not_depend_on_the_chunk(tmp_path):
    """gen writes the same indices whether it reads self one volume at a time or all at once."""
    text = ("op: aclnnMaxPool3dWithArgmaxBackward\ncases:\n  - {name: c, product: '950', dtype: float16, "
            "shape: [3, 4, 5, 6, 7], attributes: {kernelSize: [3], stride: [1], padding: [1]}}\n")
    got = maxpool.indices_by_chunk(tmp_path, text, (210, 1 << 20))
    assert got[0] == got[1] and len(got[0]) == 3 * 4 * 5 * 6 * 7 * 4


BASE = {"kernelSize": (3,), "stride": (2,), "padding": (1,), "dilation": (1,), "ceilMode": False}


def _status(g, s, i, o, attrs, dtype=D.FLOAT32, product="950", i_dtype=D.INT32, s_dtype=None):
    return maxpool.status(SPEC, (g, s, i, o), attrs, BASE, dtype, product, i_dtype, s_dtype)


def test_contract():
    ok = ([2, 3, 2, 4, 4], [2, 3, 4, 8, 8], [2, 3, 2, 4, 4], [2, 3, 4, 8, 8])
    assert _status(*ok, {}) == SUCCESS
    assert _status([3, 2, 4, 4], [3, 4, 8, 8], [3, 2, 4, 4], [3, 4, 8, 8], {}) == SUCCESS  # CDHW
    assert _status(*ok, {}, i_dtype=D.INT64) == SUCCESS
    assert _status(*ok, {}, i_dtype=D.FLOAT32) == INVALID
    for product in ("950", "A3", "A2"):
        for dtype in (D.FLOAT32, D.FLOAT16, D.BFLOAT16):
            assert _status(*ok, {}, dtype=dtype, product=product) == SUCCESS
    assert set(SPEC.products) == {"950", "A3", "A2"}  # (910, 310P, 310B: not supported)
    assert _status(*ok, {}, s_dtype=D.FLOAT16) == INVALID
    assert _status(*ok, {"kernelSize": (0,)}) == INVALID
    assert _status(*ok, {"kernelSize": (2, 2)}) == INVALID
    assert _status(*ok, {"stride": (0,)}) == INVALID
    assert _status(*ok, {"stride": (1, 1)}) == INVALID
    assert _status(*ok, {"padding": (2,)}) == INVALID  # more than half of 3
    assert _status(*ok, {"padding": (1, -1, 1)}) == INVALID
    assert _status(*ok, {"padding": ()}) == INVALID
    assert _status(*ok, {"dilation": (0,)}) == INVALID
    assert _status(*ok, {"dilation": (1, 1)}) == INVALID
    assert _status(*ok, {"kernelSize": (4, 4, 2), "padding": (2, 2, 1), "stride": (2,)}) == SUCCESS  # exactly half
    assert _status([2, 3, 2, 4, 4], [2, 3, 4, 8, 8], [2, 3, 2, 4, 5], [2, 3, 4, 8, 8], {}) == INVALID  # indices
    assert _status([2, 3, 2, 4, 4], [2, 3, 4, 8, 8], [2, 3, 2, 4, 4], [2, 3, 4, 8, 9], {}) == INVALID  # gradInput
    assert _status([3, 4, 4], [3, 8, 8], [3, 4, 4], [3, 8, 8], {}) == INVALID  # 3-d
    descs = {"gradOutput": TensorDesc(D.FLOAT32, ok[0]), "self": TensorDesc(D.FLOAT32, ok[1]),
             "indices": TensorDesc(D.INT32, ok[2]), "gradInput": TensorDesc(D.FLOAT32, ok[3])}
    for name in ("kernelSize", "stride", "padding", "dilation"):
        assert check(SPEC, "950", descs, {**BASE, name: None}).status == NULLPTR, name
    null = {**descs, "indices": TensorDesc(D.INT32, ok[2], True)}
    assert check(SPEC, "950", null, BASE).status == NULLPTR


# ------------------------------------------------------------------ ops-nn's own suite

ATK = "atk_aclnnMaxPool3dWithArgmaxBackward.json"  # pooling/max_pool3d_grad_with_argmax/tests/st/aclnnMaxPool3dWithArgmaxBackward/
QUICK_ELEMENTS = 50_000


def test_ops_nn_atk_suite_imports_whole_and_its_small_cases_pass_the_kernel(tmp_path):
    """All 200 cases import: the indices' ranges dropped (the executor derives them by torch's MaxPool3d on self, as
    gen does). The small ones are generated, emulated and verified: every one PASSes, and so does the independent
    scatter-add on each."""
    cases, small = atk_small_cases_pass(tmp_path, SUITES / ATK, "max_pool3d_with_argmax_backward", independent,
                                        "gradInput", QUICK_ELEMENTS)
    assert len(cases) == 200 and {c["inputs"]["indices"]["derived"] for c in cases} == {True}
    assert len(small) == 29
