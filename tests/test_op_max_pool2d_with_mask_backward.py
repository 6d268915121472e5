"""aclnnMaxPool2dWithMaskBackward (the window family with the forward's int8 mask, a derived input): the mask gen
derives against ops-nn's ATK executor's packing transcribed (PyTorch CPU's forward loop, tests/maxpool.py, as int32
flattened, zero-padded to [N, C, kH kW, (ceil(Ho Wo / 16) + 1) 32], viewed as int8), goldens against an oracle of
Fractions (each window's gradOutput added at the index the mask's bytes hold), an independent float32 kernel (a
scatter-add with np.add.at over the indices read from the mask's bytes) over every bundled case, each defect failing
in each dtype and each legitimate order passing, the contract, and ops-nn's own ATK suite (`"strategy": null` in
every case).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import harness
import maxpool
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.window.max_pool2d_with_mask_backward import SPEC, decode, encode
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from rowblocks import (atk_small_cases_pass, bundled_emulated, generated_yaml, goldens_against,
                       independent_dumps, not_passing, passing_bundled_records)

F = np.float32
SUITES = Path(__file__).parent / "ops_nn_suites"


def mask_indices(case, m, n: int = 2) -> np.ndarray:
    """The indices the kernel reads from the mask: its buffer's first N C Ho Wo int32 (little-endian), as
    (planes, Ho, Wo) (IndicesInputProcess3D: the indices' storage viewed as int32 of gradOutput's shape)."""
    t = harness.tensors(m)
    g = t["gradOutput"]["shape"]
    planes = math.prod(g[:-2])
    raw = harness.storage(case, t["indices"]).view(np.uint8)[:planes * g[-2] * g[-1] * 4]
    return raw.view("<i4").astype(np.int64).reshape(planes, g[-2], g[-1])


oracle = maxpool.oracle(2, mask_indices)


def executor_mask(idx: np.ndarray, lead, kernel) -> np.ndarray:
    """ops-nn's executor_aclnnMaxPool2dWithMaskBackward.py, init_by_input_data, in numpy: torch's indices as int32,
    flattened, zeros appended to n c kh kw (ceil(ho wo / 16) + 1) 8 int32, viewed as int8, reshaped."""
    kh, kw = kernel
    ho, wo = idx.shape[-2:]
    shape = [*lead, kh * kw, (math.ceil(ho * wo / 16) + 1) * 32]
    pad = math.prod(lead) * kh * kw * (math.ceil(ho * wo / 16) + 1) * 8 - idx.size
    flat = np.concatenate([idx.astype("<i4").reshape(-1), np.zeros(pad, "<i4")])
    return flat.view(np.int8).reshape(shape)


def independent(case, m) -> np.ndarray:
    """A float32 scatter-add: np.add.at (in the order given: windows in (oh, ow) order) of gradOutput at the
    indices read from the mask's bytes."""
    g = maxpool.blocks(case, m, "gradOutput", 2, F)
    shape = harness.tensors(m)["self"]["shape"]
    idx = mask_indices(case, m)
    out = np.zeros((g.shape[0], shape[-2] * shape[-1]), F)
    planes = np.broadcast_to(np.arange(g.shape[0])[:, None], (g.shape[0], g.shape[1] * g.shape[2]))
    with np.errstate(invalid="ignore"):
        np.add.at(out, (planes.reshape(-1), idx.reshape(-1)), g.reshape(-1))
    return out.reshape(shape)


ORACLE_YAML = """\
op: aclnnMaxPool2dWithMaskBackward
defaults: {product: A2, seed: 53, dtype: [float32, float16, bfloat16]}
cases:
  - {name: overlap, shape: [2, 3, 9, 9], attributes: {kernelSize: [3], stride: [1], padding: [1]},
     inputs: {self: {values: [0, 1, 2, 3, 4, 5, 6, 7, 8]}}}
  - {name: rect, shape: [2, 2, 11, 13], attributes: {kernelSize: [3, 4], stride: [2, 3], padding: [1, 2]}}
  - {name: ceil, shape: [2, 3, 10, 11], attributes: {kernelSize: [3], stride: [2], padding: [1], ceilMode: true}}
  - {name: ties, shape: [2, 2, 8, 8], attributes: {kernelSize: [4], stride: [1], padding: [2]},
     inputs: {self: {values: [1, 1, 0, 1]}}}
  - {name: cancelling, shape: [2, 2, 12, 12], attributes: {kernelSize: [4], stride: [1], padding: [2]},
     inputs: {gradOutput: {values: [1, -1, 0.5, -0.5, 3, 1.0e-3]}, self: {values: [9, 0, 1, 2, 3, 4, 5]}}}
  - {name: wide, shape: [1, 2, 10, 10], attributes: {kernelSize: [3], stride: [1], padding: [1]},
     inputs: {gradOutput: {values: [1.0e-3, -7.5, 250.0, 3.0e-2, -1.0e-5, 6.1e-5]}, self: {constant: 2}}}
  - {name: ncl, shape: [4, 9, 7], attributes: {kernelSize: [3], stride: [2], padding: [1]}}
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generated_yaml(tmp_path_factory, ORACLE_YAML, "maxpool_mask_oracle")


def test_derived_mask_is_the_executors_packing_of_the_forward(generated):
    """gen's mask equals, byte for byte and in shape, ops-nn's executor's packing of PyTorch's forward argmax (the
    loop over every window's taps in (h, w) order, tests/maxpool.forward), in every dtype: ties, ceil mode's cut
    windows, padding, rectangular kernels, 3-d NCL."""
    cases = sorted(p.parent for p in generated.glob("*/case.json"))
    assert len(cases) == 21
    for case in cases:
        m = harness.load(case)
        t = harness.tensors(m)
        g, s = t["gradOutput"]["shape"], t["self"]["shape"]
        x = maxpool.blocks(case, m, "self", 2)
        idx = maxpool.forward(x, *maxpool.params(m, 2), tuple(g[-2:]))
        want = executor_mask(idx, s[:-2], maxpool.params(m, 2)[0])
        assert t["indices"]["shape"] == list(want.shape), case.name
        assert harness.storage(case, t["indices"]).tobytes() == want.tobytes(), case.name
        assert maxpool.derived_are_forwards(case, m, 2, mask_indices), case.name


def test_goldens_equal_the_oracle_rounded_once(generated):
    """Every golden is the exact sum (at the mask's indices) rounded once to its dtype, bit for bit."""
    compared, exact = goldens_against(generated, "gradInput", oracle)
    print("compared", compared, "exact path", exact)
    assert min(compared.values()) > 3_000 and sum(exact.values()) > 0


def test_mask_blocks_round_trip_and_exact_at_is_exact():
    """decode(encode(i)) is i; a block's exact_at everywhere equals its exact values (the mask read as the kernel
    reads it)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 7, 6))
    g = rng.standard_normal((2, 4, 3))
    attrs = {"kernelSize": (3,), "stride": (2,), "padding": (1,), "dilation": (1,), "ceilMode": False}
    idx = SPEC.derived["indices"]({"self": x, "gradOutput": g, **attrs})
    assert idx.dtype == np.int8 and idx.shape == (2, 1, 4 * 12)
    t = {"self": x, "gradOutput": g, "indices": idx.astype(np.int64), **attrs}
    assert np.array_equal(encode(decode(t)["indices"]), idx)
    assert decode(t)["indices"].max() < 42 and decode(t)["indices"].min() >= 0
    maxpool.assert_exact_at_is_exact(SPEC, t)


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    """The bundled file generated and emulated: the session's cases (rowblocks.bundled_emulated)."""
    return bundled_emulated(tmp_path_factory, bundled_produced, "max_pool2d_with_mask_backward")


def test_the_emulated_kernel_passes_every_bundled_case(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "max_pool2d_with_mask_backward")
    assert len(cases) == 80


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    wrote = independent_dumps(suite, tmp_path / "scatter", independent, "gradInput")
    assert wrote == 48
    bad = not_passing(tmp_path / "scatter", tmp_path / "scatter.json")
    assert not bad, bad


# ------------------------------------------------------------------ defects and legitimate variants

PEAK = [0] * 180 + [1] + [0] * 180  # (19 x 19: the one maximum at the centre, in every window of 19 at padding 9)
GATE_YAML = f"""\
op: aclnnMaxPool2dWithMaskBackward
defaults: {{product: A2, seed: 23, dtype: [float32, float16, bfloat16]}}
cases:
  - {{name: overlap, shape: [2, 3, 9, 9], attributes: {{kernelSize: [3], stride: [1], padding: [1]}},
     inputs: {{self: {{uniform: [0, 1]}}, gradOutput: {{uniform: [0, 1]}}}}}}
  - {{name: ceil, shape: [2, 3, 10, 11], attributes: {{kernelSize: [3], stride: [2], padding: [1], ceilMode: true}},
     inputs: {{self: {{uniform: [0, 1]}}}}}}
  - {{name: ties, shape: [2, 2, 9, 9], attributes: {{kernelSize: [3], stride: [1], padding: [1]}},
     inputs: {{self: {{constant: 1}}, gradOutput: {{uniform: [0, 1]}}}}}}
  - {{name: peak, shape: [1, 2, 19, 19], attributes: {{kernelSize: [19], stride: [1], padding: [9]}},
     inputs: {{self: {{values: {PEAK}}}, gradOutput: {{values: [0.4, 0.401]}}}}}}
  - {{name: peak_wide, dtype: [float32, bfloat16], shape: [1, 2, 19, 19],
     attributes: {{kernelSize: [19], stride: [1], padding: [9]}},
     inputs: {{self: {{values: {PEAK}}}, gradOutput: {{values: [1000.0, 0.4]}}}}}}
"""
_every_dtype = maxpool.every_dtype


@pytest.fixture(scope="module")
def gate_suite(tmp_path_factory):
    return generated_yaml(tmp_path_factory, GATE_YAML, "maxpool_mask_gate")


# The (case, dtype) each defect changes past the standard. peak, peak_wide: 361 windows all naming the plane's centre;
# float16 accumulation drifts some % on peak's 361 terms near 0.4 and overflows on peak_wide's sum of 180,700 (finite
# in float32 and bfloat16). The centre (9, 9) reads the same with the axes reversed. ties: self constant, every
# window's first position its index.
CHANGES = {
    "maxpool-mask-first-in-window": _every_dtype("overlap", "ceil", "peak"),
    "maxpool-mask-last-write-wins": _every_dtype("overlap", "ceil", "ties", "peak"),
    "maxpool-mask-accumulate-fp16": {("peak", "float32"), ("peak", "float16"), ("peak_wide", "float32"),
                                     ("peak_wide", "bfloat16")},
    "maxpool-mask-index-axes-reversed": _every_dtype("overlap", "ceil", "ties"),
    "maxpool-mask-padding-ignored": _every_dtype("overlap", "ceil", "ties", "peak"),
    "maxpool-mask-last-maximum": _every_dtype("ties"),
}
LEGITIMATE = ("maxpool-mask-reversed", "maxpool-mask-columns")


def test_the_variants_are_declared():
    assert set(SPEC.variants) == set(CHANGES) | set(LEGITIMATE)


@pytest.mark.parametrize("variant", sorted(CHANGES) + list(LEGITIMATE))
def test_each_defect_fails_in_each_dtype_and_legitimate_orders_pass(gate_suite, tmp_path, variant):
    maxpool.assert_variant(gate_suite, tmp_path, variant, CHANGES, LEGITIMATE, 14)


# ------------------------------------------------------------------ the contract, what is not modelled

BASE = {"kernelSize": (3,), "stride": (2,), "padding": (1,), "dilation": (1,), "ceilMode": False}
MASK = [2, 3, 9, 64]  # (Ho Wo = 16: (1 + 1) 32)


def _status(g, s, i, o, attrs, dtype=D.FLOAT32, product="A2", i_dtype=D.INT8, s_dtype=None):
    return maxpool.status(SPEC, (g, s, i, o), attrs, BASE, dtype, product, i_dtype, s_dtype)


def test_contract():
    ok = ([2, 3, 4, 4], [2, 3, 8, 8], MASK, [2, 3, 8, 8])
    assert _status(*ok, {}) == SUCCESS
    assert _status([3, 4, 4], [3, 8, 8], [3, 9, 64], [3, 8, 8], {}) == SUCCESS  # NCL
    for product in ("A3", "A2"):
        for dtype in (D.FLOAT32, D.FLOAT16, D.BFLOAT16):
            assert _status(*ok, {}, dtype=dtype, product=product) == SUCCESS
    assert set(SPEC.products) == {"A3", "A2"}  # (950: "Please use aclnnMaxPool2dWithIndicesBackward"; 910 not modelled)
    assert _status(*ok, {}, i_dtype=D.INT32) == INVALID
    assert _status(*ok, {}, s_dtype=D.FLOAT16) == INVALID
    assert _status(*ok, {"kernelSize": (0,)}) == INVALID
    assert _status(*ok, {"kernelSize": (2, 2, 2)}) == NULLPTR  # (the entry's own length check: 161001)
    assert _status(*ok, {"stride": (0,)}) == INVALID
    assert _status(*ok, {"padding": (2,)}) == INVALID  # more than half of 3
    assert _status(*ok, {"dilation": (2,)}) == INVALID  # A2 and A3: 1 only
    assert _status(*ok, {"dilation": (1, 1, 1)}) == INVALID
    assert _status([2, 3, 4, 4], [2, 3, 8, 8], MASK, [2, 3, 8, 9], {}) == INVALID  # gradInput
    assert _status([2, 3, 4, 4], [2, 3, 8, 8], [2, 3, 9, 64, 1], [2, 3, 8, 8], {}) == INVALID  # 5-d mask
    descs = {"gradOutput": TensorDesc(D.FLOAT32, ok[0]), "self": TensorDesc(D.FLOAT32, ok[1]),
             "indices": TensorDesc(D.INT8, ok[2]), "gradInput": TensorDesc(D.FLOAT32, ok[3])}
    for name in ("kernelSize", "stride", "padding", "dilation"):
        assert check(SPEC, "A2", descs, {**BASE, name: None}).status == NULLPTR, name
    null = {**descs, "indices": TensorDesc(D.INT8, ok[2], True)}
    assert check(SPEC, "A2", null, BASE).status == NULLPTR


def test_a_one_by_one_kernel_and_another_mask_shape_are_refused(tmp_path):
    """A 1 x 1 kernel runs MaxPoolGradWithArgmaxV1 on a 5HD bit mask (not modelled); a mask of another shape than the
    forward's holds no defined indices: gen refuses both, saying why."""
    head = "op: aclnnMaxPool2dWithMaskBackward\ncases:\n  - {name: c, product: A2, dtype: float32, shape: [1, 2, 8, 8], "
    out = maxpool.refusal(tmp_path / "a", head + "attributes: {kernelSize: [1], stride: [1], padding: [0]}}\n")
    assert "1 x 1" in out and "not model" in out, out
    out = maxpool.refusal(tmp_path / "b", head + "attributes: {kernelSize: [2], stride: [2], padding: [0]}, "
                          "tensors: {indices: {shape: [1, 2, 4, 32]}}}\n")
    assert "[1, 2, 4, 32]" in out and "[1, 2, 4, 64]" in out and "the forward's for gradOutput" in out, out


# ------------------------------------------------------------------ ops-nn's own suite

ATK = "atk_aclnnMaxPool2dWithMaskBackward.json"  # pooling/max_pool3d_grad_with_argmax/tests/st/aclnnMaxPool2dWithMaskBackward/
QUICK_ELEMENTS = 20_000


def test_ops_nn_atk_suite_imports_whole_and_its_small_cases_pass_the_kernel(tmp_path):
    """All 214 cases import unmodified (`"strategy": null` read past; the mask's shape and range dropped: the
    executor derives it by torch's MaxPool2d on self, as gen does). The small ones are generated, emulated and
    verified: every one PASSes, and so does the independent scatter-add on each."""
    cases, small = atk_small_cases_pass(tmp_path, SUITES / ATK, "max_pool2d_with_mask_backward", independent,
                                        "gradInput", QUICK_ELEMENTS)
    assert len(cases) == 214 and {c["inputs"]["indices"]["derived"] for c in cases} == {True}
    assert len(small) > 20
