"""aclnnConvTbcBackward (the convolution family's TBC layout): goldens against an oracle of Fractions written from the
doc's three formulas over (T, B, C) tensors (nothing shared with the op, ConvolutionBackward's lowering or the family),
the op's lowerings against the op_api's (the 950's By3D and the A2/A3 NCL permutations), a float32 kernel of this
file's own (a loop over time steps, numpy's einsum) over every bundled case and ops-nn's ATK suite, each defect
failing in each dtype, and the contract's rules.
"""

from __future__ import annotations

import math
from exactq import Fraction
from pathlib import Path

import numpy as np
import pytest

from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.convolution import convolution_backward as CB
from aclnn_cli.ops.tbc.conv_tbc_backward import BY_3D, NCL, SPEC, _backs, frame
from aclnn_cli.ops.families.convolution import shape_of, shape_values
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, SUCCESS
from helpers import read_yaml, run_cli
from rowblocks import bundled_emulated, generated_yaml, not_passing, passing_bundled_records, variant_statuses
from test_op_convolution_backward import OUTPUTS, goldens_against_oracle, logical
from test_op_convolution_backward import write_dumps as conv_write_dumps

F = np.float32

ORACLE_YAML = """\
op: aclnnConvTbcBackward
defaults: {product: "950", seed: 47, dtype: [float32, float16, bfloat16]}
cases:
  - {name: tbc, shape: [9, 3, 4], tensors: {weight: {shape: [3, 4, 5]}}, attributes: {pad: 1}}
  - {name: padded, shape: [5, 2, 3], tensors: {weight: {shape: [4, 3, 6]}}, attributes: {pad: 3}}
  - {name: k1, shape: [7, 4, 6], tensors: {weight: {shape: [1, 6, 5]}}, attributes: {pad: 0}}
  - {name: b1, shape: [12, 1, 5], tensors: {weight: {shape: [5, 5, 4]}}, attributes: {pad: 2}}
  - {name: channels, shape: [24, 4, 16], tensors: {weight: {shape: [3, 16, 16]}}, attributes: {pad: 2}}
  - {name: long, shape: [40, 4, 3], tensors: {weight: {shape: [2, 3, 3]}}, attributes: {pad: 1}}
  - {name: cancel, shape: [6, 2, 4], attributes: {pad: 1},
     inputs: {input: {values: [1, -1]}, self: {constant: 1.5}, weight: {values: [1, -1, 0.5]}}}
  - {name: wide, shape: [8, 3, 4], attributes: {pad: 1},
     inputs: {input: {values: [1.0e-3, -7.5, 250.0, 3.0e-2]}, self: {normal: [0, 10]}}}
"""


def tensors_of(case, m) -> tuple:
    """(self, input, weight) in logical (T, B, C) order as float64, and pad."""
    pad = next(a["value"] for a in m["attributes"] if a["name"] == "pad")
    return (*(logical(case, m, n) for n in ("self", "input", "weight")), int(pad))


def oracle(g, x, w, pad) -> dict:
    """The doc's formulas in Fractions: gradInput[t, b, ci] = sum over k, co of self[t - k + pad, b, co] w[k, ci, co];
    gradWeight[k, ci, co] = sum over b, t of x[t + k - pad, b, ci] self[t, b, co]; gradBias the sum of self over t, b."""
    fg, fx, fw = (np.vectorize(Fraction, otypes=[object])(a) for a in (g, x, w))
    gi = np.full(x.shape, Fraction(0), dtype=object)
    gw = np.full(w.shape, Fraction(0), dtype=object)
    for to in range(g.shape[0]):
        for k in range(w.shape[0]):
            t = to + k - pad
            if 0 <= t < x.shape[0]:
                gi[t] += fg[to] @ fw[k].T  # (B, Cout) @ (Cout, Cin)
                gw[k] += fx[t].T @ fg[to]  # (Cin, B) @ (B, Cout)
    gb = [sum(fg[:, :, co].reshape(-1).tolist(), Fraction(0)) for co in range(g.shape[2])]
    return {"gradInput": list(gi.reshape(-1)), "gradWeight": list(gw.reshape(-1)), "gradBias": gb}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generated_yaml(tmp_path_factory, ORACLE_YAML, "tbc_oracle")


def test_goldens_equal_the_oracle_rounded_once(generated):
    """Every golden of the three outputs (pad 0 to past the kernel, K = 1, B = 1, sums that cancel to 0, values over
    many binades) is the exact sum rounded once to its dtype, bit for bit."""
    compared, exact = goldens_against_oracle(generated, lambda case, m: oracle(*tensors_of(case, m)))
    assert min(compared.values()) > 3000 and sum(exact.values()) > 0


# ------------------------------------------------------------------ the lowerings against the op_api's

def test_frames_are_the_op_apis_layouts():
    """The 950's By3D: input reshaped [1, 1, T, B, Cin] NDHWC, i.e. NCDHW (1, Cin, 1, T, B), weight [1, K, 1, Cin,
    Cout] DHWCN, i.e. (Cout, Cin, 1, K, 1), padding (0, pad, 0); the A2's and A3's: Permute {1, 2, 0} of self and
    input, {2, 1, 0} of weight, padding {pad} (aclnnConvTbcBackwardGetWorkspaceSize)."""
    rng = np.random.default_rng(1)
    x, w, g = (rng.normal(size=s).astype(np.float16).astype(np.float64) for s in ((5, 2, 3), (2, 3, 4), (6, 2, 4)))
    t = {"input": x.reshape(1, -1, 3), "weight": w.reshape(1, -1, 4), "self": g.reshape(1, -1, 4), "pad": 1,
         "cubeMathType": 0, **shape_values("input", "weight", "self")({"input": x.shape, "weight": w.shape,
                                                                     "self": g.shape})}
    f = frame(t, BY_3D)
    assert shape_of(f, "input") == (1, 3, 1, 5, 2) and f["padding"] == (0, 1, 0)
    ndhwc = x.reshape(1, 1, 5, 2, 3)  # (N, D, H, W, C)
    assert np.array_equal(f["input"].reshape(1, 3, 1, 5, 2), ndhwc.transpose(0, 4, 1, 2, 3))
    dhwcn = w.reshape(1, 2, 1, 3, 4)  # (D, H, W, Cin, Cout)
    assert np.array_equal(f["weight"].reshape(4, 3, 1, 2, 1), dhwcn.transpose(4, 3, 0, 1, 2))
    f = frame(t, NCL)
    assert shape_of(f, "gradOutput") == (2, 4, 6) and f["padding"] == (1,)
    assert np.array_equal(f["input"].reshape(2, 3, 5), np.transpose(x, (1, 2, 0)))
    assert np.array_equal(f["weight"].reshape(4, 3, 2), np.transpose(w, (2, 1, 0)))
    for data in (BY_3D, NCL):  # (either lowering: the same exact sums, in TBC order)
        got = _backs(t, CB._exact(frame(t, data)), data)
        want = oracle(g, x, w, 1)
        for name in OUTPUTS:
            assert list(got[name].reshape(-1)) == want[name], (data, name)
        assert set(CB.conv_of(frame(t, data)).stride) == {1}


# ------------------------------------------------------------------ an independent float32 kernel

def steps_float32(g, x, w, pad) -> dict:
    """A float32 kernel of this file's own: a loop over self's time steps, each adding its taps' products by
    numpy's float32 einsum into gradInput and gradWeight; gradBias numpy's float32 sum."""
    g, x, w = (a.astype(F) for a in (g, x, w))
    gi, gw = np.zeros(x.shape, F), np.zeros(w.shape, F)
    for to in range(g.shape[0]):
        for k in range(w.shape[0]):
            t = to + k - pad
            if 0 <= t < x.shape[0]:
                gi[t] += np.einsum("bo,io->bi", g[to], w[k])
                gw[k] += np.einsum("bi,bo->io", x[t], g[to])
    return {"gradInput": gi, "gradWeight": gw, "gradBias": g.sum(axis=(0, 1), dtype=F)}


def write_dumps(out, work) -> int:
    """test_op_convolution_backward's, with steps_float32 on the case's TBC tensors."""
    return conv_write_dumps(out, work, steps_float32, tensors_of)


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    """The bundled file generated and emulated: the session's cases (rowblocks.bundled_emulated)."""
    return bundled_emulated(tmp_path_factory, bundled_produced, "conv_tbc_backward")


def test_the_emulated_kernel_passes_every_bundled_case(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "conv_tbc_backward")
    assert len(cases) == 120 and sum(c["case_id"].split("-")[1] == "contract" for c in cases) == 13


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    assert write_dumps(suite, tmp_path / "steps") == 64
    bad = not_passing(tmp_path / "steps", tmp_path / "steps.json")
    assert not bad, bad


DEFECTS = ["conv-flipped-kernel", "conv-padding-row-dropped", "conv-bias-one-sample", "conv-fp16-accumulation",
           "conv-bf16-accumulation"]
# the bundled cases each defect changes beyond the gate's forgiveness, in each of its dtypes: a padding row only where
# pad > 0, a 16-bit accumulator where a sum has thousands of terms (k_long: 16,384)
CHANGES = {"conv-flipped-kernel": ("tbc", "padded", "b1", "wide_range", "k_long", "shared_kernel"),
           "conv-padding-row-dropped": ("padded", "b1", "views", "wide_range", "k_long", "shared_kernel"),
           "conv-bias-one-sample": ("tbc", "padded", "k1", "views", "wide_range", "k_long", "shared_kernel"),
           "conv-fp16-accumulation": ("k_long",), "conv-bf16-accumulation": ("k_long",)}


@pytest.mark.parametrize("variant", DEFECTS + ["tbc-ncl-lowering", "conv-split-k", "conv-reversed-rounds"])
def test_each_defect_fails_in_each_dtype_and_legitimate_variants_pass(suite, tmp_path, variant):
    status = {k: v for k, v in variant_statuses(suite, tmp_path, variant).items()
              if "contract" not in k and "-" in k and k.split("-")[1] not in
              ("channels_mismatch", "bias_length", "self_size", "self_batch", "kernel_too_long", "pad_negative",
               "grad_input_shape", "grad_weight_shape", "bias_dims", "input_dims", "cube_math_type", "mixed_dtypes",
               "null_bias", "null_grad_bias", "empty_self")}
    assert len(status) == 64
    if variant not in DEFECTS:
        assert set(status.values()) == {"PASS"}, status
        return
    changed = {k: v for k, v in status.items() if k.split("-")[1] in CHANGES[variant]
               and k.split("-")[2] in ("float32", "float16", "bfloat16")}
    names = {k.split("-")[1] for k in changed}
    assert names == set(CHANGES[variant]) and {k.split("-")[2] for k in changed} >= {"float32", "bfloat16"}
    assert set(changed.values()) == {"FAIL"}, {k: v for k, v in changed.items() if v != "FAIL"}


# ------------------------------------------------------------------ ops-nn's own suite

ATK = Path(__file__).parent / "ops_nn_suites" / "atk_aclnnConvTbcBackward.json"  # (conv/convolution_backward/
#   tests/st/aclnnConvTbcBackward/atk_aclnnConvTbcBackward.json)
QUICK = 1 << 18


def test_ops_nn_atk_suite_imports_and_its_small_cases_pass(tmp_path):
    """ops-nn's ATK file for the op: 205 cases, float32, float16, bfloat16, cubeMathType 0, pads 0 and 29. Skipped,
    each with its reason: the 8 over the family's one-block limit of 2^25 elements per tensor (34M to 146M). The
    other 197 import; those up to 2^18 elements per tensor (70) generate, pass the emulated kernel and pass this
    file's own kernel here (the rest are left to the catalogue for make test's time)."""
    import yaml

    r = run_cli("convert", "--skip-unsupported", ATK, "-o", tmp_path / "yaml")
    assert r.exit_code == 0, r.output
    assert "skipped 8 unsupported" in r.output and r.output.count("one block, of at most 33,554,432") >= 5, r.output
    assert "converted 197 cases" in r.output, r.output
    (path,) = (tmp_path / "yaml").glob("*.yaml")
    doc = read_yaml(path)

    def largest(c):
        return max(math.prod(s) for s in [c["shape"], *(v["shape"] for v in c.get("tensors", {}).values())])
    doc["cases"] = [c for c in doc["cases"] if largest(c) <= QUICK]
    assert len(doc["cases"]) == 70
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    for args in (("gen", tmp_path / "yaml", "-o", out), ("emulate", out)):
        r = run_cli(*args)
        assert r.exit_code == 0, r.output[-3000:]
    assert not not_passing(out, tmp_path / "v.json")
    assert write_dumps(out, tmp_path / "steps") == 70
    assert not not_passing(tmp_path / "steps", tmp_path / "steps.json")


# ------------------------------------------------------------------ the contract

def _status(x, w, s, dtype=D.FLOAT16, pad=1, bias=None, gi=None, self_dtype=None, **attrs):
    descs = {"self": TensorDesc(self_dtype or dtype, tuple(s)), "input": TensorDesc(dtype, tuple(x)),
             "weight": TensorDesc(dtype, tuple(w)), "bias": TensorDesc(dtype, tuple(bias or w[-1:])),
             "gradInput": TensorDesc(dtype, tuple(gi or x)), "gradWeight": TensorDesc(dtype, tuple(w)),
             "gradBias": TensorDesc(dtype, tuple(bias or w[-1:]))}
    return check(SPEC, "950", descs, {"pad": pad, "cubeMathType": 0, **attrs}).status


def test_contract():
    assert _status([6, 2, 4], [3, 4, 5], [6, 2, 5]) == SUCCESS
    assert _status([6, 2, 4], [3, 4, 5], [4, 2, 5], pad=0) == SUCCESS
    assert _status([2, 2, 4], [5, 4, 5], [2, 2, 5], pad=2) == SUCCESS  # (To = T + 2 pad + 1 - K)
    assert _status([6, 2, 4], [3, 4, 5], [6, 2, 5], dtype=D.BFLOAT16, cubeMathType=2) == SUCCESS  # (cube_util)
    assert _status([6, 2, 4], [3, 3, 5], [6, 2, 5]) == INVALID  # input[2] != weight[1]
    assert _status([6, 2, 4], [3, 4, 5], [6, 2, 5], bias=[4]) == INVALID  # bias != weight[2]
    assert _status([6, 2, 4], [3, 4, 5], [5, 2, 5]) == INVALID  # self's To
    assert _status([6, 2, 4], [3, 4, 5], [6, 3, 5]) == INVALID  # self's B
    assert _status([6, 2, 4], [3, 4, 5], [6, 2, 4]) == INVALID  # self's C
    assert _status([6, 2, 4], [3, 4, 5], [2, 2, 5], pad=-1) == INVALID
    assert _status([6, 2, 4], [3, 4, 5], [6, 2, 5], cubeMathType=4) == INVALID
    assert _status([6, 2, 4], [3, 4, 5], [6, 2, 5], gi=[6, 2, 3]) == INVALID
    assert _status([6, 2, 4], [3, 4, 5], [6, 2, 5], bias=[1, 5]) == INVALID
    assert _status([6, 2, 4], [3, 4, 5], [6, 2, 5], self_dtype=D.FLOAT32) == INVALID  # one dtype (the doc)
    assert _status([6, 0, 4], [3, 4, 5], [6, 0, 5]) == INVALID  # self empty

