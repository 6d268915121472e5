"""aclnnConvolutionBackward under cubeMathType 2 (USE_FP16): the op_api casts gradOutput, input and weight to float16
before the cube (InputPreProcess), gradInput leaves the cube as float16, gradBias is summed from gradOutput as it is.

Both sides of the allowance (docs/allowances.md, "Convolutions"), on float32 and bfloat16 operands with 65,536 terms
per gradWeight sum: kernels of this file's own that cast the operands to float16 (to nearest, the Cast operator's
rounding where precision is lost) or not at all, and sum in several orders, pass; under
the allowance of cubeMathType 0 (what the gate had before) the float16 kernels fail, so the term is needed; the
defects that change the result beyond the float16 operands' own reach fail; float16 operands are computed as at 0.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import harness
from aclnn_cli.ops.convolution.convolution_backward import SPEC
from aclnn_cli.ops.families.convolution import WIDE_OPERANDS
from rowblocks import generated_yaml, not_passing, variant_statuses, write_dump
from test_op_convolution_backward import OUTPUTS, _block, _ordered, im2col, logical, parameters, taps_float32

F16_YAML = """\
op: aclnnConvolutionBackward
defaults: {product: "950", seed: 23, dtype: [float32, bfloat16, float16],
           attributes: {stride: [1, 1], padding: [1, 1], dilation: [1, 1], outputPadding: [0, 0], cubeMathType: 2}}
cases:
  - {name: k65536, shape: [4, 2, 128, 128], tensors: {weight: {shape: [3, 2, 3, 3]}}}
  - {name: k65536pos, shape: [4, 1, 128, 128], tensors: {weight: {shape: [2, 1, 3, 3]}},
     inputs: {input: {uniform: [0, 1]}, gradOutput: {uniform: [0, 1]}}}
  - {name: channels, shape: [2, 16, 12, 12], tensors: {weight: {shape: [64, 16, 3, 3]}}}
  - {name: strided, shape: [3, 4, 15, 14], tensors: {weight: {shape: [6, 4, 3, 3]}},
     attributes: {stride: [2, 2], padding: [2, 1], dilation: [2, 1], outputPadding: [0, 0], cubeMathType: 2}}
  - {name: small_values, shape: [2, 4, 10, 10], tensors: {weight: {shape: [4, 4, 3, 3]}},
     inputs: {input: {normal: [0, 0.0001]}, gradOutput: {normal: [0, 0.001]}}}
"""


def _fp16(a: np.ndarray) -> np.ndarray:
    """float32 values cast to float16 (to nearest, ties to even), as float32."""
    return np.asarray(a, np.float32).astype(np.float16).astype(np.float32)


def fp16_kernel(cast: bool, order: str):
    """A USE_FP16 kernel: the cube's operands cast to float16 (unless not `cast`: a float32 kernel), gradWeight and
    gradBias summed in `order` (groups 1), gradInput from the taps kernel and rounded to float16 where the operands
    were cast; gradBias from gradOutput as it is."""
    def kernel(x, w, gy, stride, padding, dilation, groups, transposed):
        cx, cw, cg = (_fp16(a) if cast else a for a in (x, w, gy))
        out = taps_float32(cx, cw, cg, stride, padding, dilation, groups, transposed)
        if cast:
            out["gradInput"] = out["gradInput"].astype(np.float16).astype(np.float32)
        patches = im2col(cx, w.shape, gy.shape[2:], stride, padding, dilation)
        g = cg.astype(np.float32).reshape(gy.shape[0], gy.shape[1], -1).transpose(0, 2, 1).reshape(-1, gy.shape[1])
        out["gradWeight"] = _ordered(lambda s, e: g[s:e, :, None] * patches[s:e, None, :], g.shape[0],
                                     order).reshape(w.shape)
        b = gy.astype(np.float32).reshape(gy.shape[0], gy.shape[1], -1).transpose(0, 2, 1).reshape(-1, gy.shape[1])
        out["gradBias"] = _ordered(lambda s, e: b[s:e], b.shape[0], order)
        return out
    return kernel


KERNELS = {"fp16-sequential": fp16_kernel(True, "sequential"),
           "fp16-split-shuffled": fp16_kernel(True, "split-shuffled"),
           "fp16-pairwise": fp16_kernel(True, "pairwise"),
           "float32-reversed": fp16_kernel(False, "reversed")}


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return generated_yaml(tmp_path_factory, F16_YAML, "conv_fp16")


def _cases(suite, dtypes=("float32", "bfloat16")) -> list:
    return [c for c in sorted(p.parent for p in suite.glob("*/case.json")) if c.name.split("-")[-1] in dtypes]


def _ratio(got: np.ndarray, value: np.ndarray, allowance: np.ndarray) -> float:
    err, allowance = np.abs(got.reshape(-1).astype(np.float64) - value.reshape(-1)), allowance.reshape(-1)
    with np.errstate(divide="ignore", invalid="ignore"):  # (an element of no terms: 0 allowed, 0 off)
        return float(np.max(np.where(allowance > 0, err / allowance, np.where(err == 0, 0.0, np.inf))))


def _reference(m, args, math_type: int) -> dict:
    wide = any(harness.tensors(m)[n]["dtype"] != "float16" for n in ("input", "weight", "gradOutput"))
    return SPEC.reference({**_block(m, *args), "cubeMathType": math_type, WIDE_OPERANDS: np.full((1, 1, 1), int(wide))})


def test_fp16_kernels_in_any_order_stay_within_the_allowance_and_pass(suite, tmp_path):
    """Every kernel on every float32 and bfloat16 case: the largest |result - value| / allowance of each gradient is
    below 1 (printed), and verify passes the dumps; under cubeMathType 0's allowance the float16 kernels' gradInput
    and gradWeight fail on float32 operands (the terms the allowance gained are needed)."""
    margins, without = {}, {}
    cases = {}  # (each case's operands and references once, for every kernel)
    for case in _cases(suite):
        m = harness.load(case)
        args = [logical(case, m, n) for n in ("input", "weight", "gradOutput")]
        cases[case] = m, args, _reference(m, args, 2), _reference(m, args, 0)
    for name, kernel in KERNELS.items():
        work = tmp_path / name
        work.mkdir()
        for case, (m, args, ref, ref0) in cases.items():
            shutil.copytree(case, work / case.name)
            got = kernel(*args, *parameters(m))
            for out in OUTPUTS:
                write_dump(work / case.name, harness.tensors(m)[out], got[out])
                margins[(name, case.name, out)] = _ratio(got[out], ref[out].value, ref[out].allowance)
                without[(name, case.name, out)] = _ratio(got[out], ref0[out].value, ref0[out].allowance)
        bad = not_passing(work, tmp_path / f"{name}.json")
        assert not bad, (name, bad)
    print("largest error / allowance:", {k: f"{v:.3f}" for k, v in margins.items() if "k65536" in k[1]})
    assert max(margins.values()) < 1, max(margins, key=margins.get)
    for name in ("fp16-sequential", "fp16-pairwise"):
        for out in ("gradInput", "gradWeight"):
            case = "convolution_backward-k65536-float32"
            assert without[(name, case, out)] > 1, (name, out, without[(name, case, out)])


def test_float16_operands_are_computed_as_at_cube_math_type_0(suite):
    """Nothing is cast: the emulated kernel's results and every allowance equal cubeMathType 0's."""
    for case in _cases(suite, ("float16",)):
        m = harness.load(case)
        args = [logical(case, m, n) for n in ("input", "weight", "gradOutput")]
        ref, ref0 = _reference(m, args, 2), _reference(m, args, 0)
        for out in OUTPUTS:
            np.testing.assert_array_equal(ref[out].allowance, ref0[out].allowance)
        block = _block(m, *args)
        k2 = SPEC.kernel({**block, "cubeMathType": 2, WIDE_OPERANDS: np.zeros((1, 1, 1))})
        k0 = SPEC.kernel({**block, "cubeMathType": 0, WIDE_OPERANDS: np.zeros((1, 1, 1))})
        for out in OUTPUTS:
            np.testing.assert_array_equal(k2[out], k0[out])


def test_the_emulated_kernel_casts_to_float16_and_rounds_grad_input_through_it(suite):
    """float32 operands: gradInput's values are float16 values, gradBias is not computed from cast operands (it equals
    cubeMathType 0's), and gradWeight differs from cubeMathType 0's (its operands were cast)."""
    case = next(c for c in _cases(suite, ("float32",)) if "channels" in c.name)
    m = harness.load(case)
    block = _block(m, *(logical(case, m, n) for n in ("input", "weight", "gradOutput")))
    k2 = SPEC.kernel({**block, "cubeMathType": 2, WIDE_OPERANDS: np.ones((1, 1, 1))})
    k0 = SPEC.kernel({**block, "cubeMathType": 0, WIDE_OPERANDS: np.ones((1, 1, 1))})
    gi = np.asarray(k2["gradInput"], np.float32)
    np.testing.assert_array_equal(gi, gi.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(k2["gradBias"], k0["gradBias"])
    assert not np.array_equal(k2["gradWeight"], k0["gradWeight"])


@pytest.mark.parametrize("variant", ["conv-flipped-kernel", "conv-padding-row-dropped", "conv-bias-one-sample"])
def test_defects_fail_every_case_under_use_fp16(suite, tmp_path, variant):
    status = variant_statuses(suite, tmp_path, variant)
    assert len(status) == 15
    assert {k: v for k, v in status.items() if v != "FAIL"} == {}
