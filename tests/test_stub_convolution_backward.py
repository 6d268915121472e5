"""The stub CANN's aclnnConvolutionBackward (tests/stub_cann/src/ops_conv.cpp, conv.cpp) through the public API (ctypes,
stub_ctypes.py): hand-derived answers (1-D, transposed 1-D), the cube's grouping of K (exact inside a step of 16,
rounded between steps, rounds of 4,104 past 8,192), HFLOAT32 under cubeMathType 1 and 3 only, every gradient against
the forward's definition in float64 on small integers (every sum exact in float32, so any order gives it bit for bit)
over strides, paddings of 2 and 4 values, dilations, groups, transposed, 1-D to 3-D and strided views, and phase one's
statuses against aclnn_cli.ops.contract.check (where the stub refuses more, said so). The bundled cases run through the
C++ runner in tests/test_harness_e2e.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from aclnn_cli.ops import OPS
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.tensor.dtypes import lookup

from cann_build import tools_missing
from stub_ctypes import Handle, stub  # noqa: F401  (stub: the fixture)
from test_stub_reductions import F16, F32, zeros

pytestmark = pytest.mark.skipif(tools_missing() is not None, reason=f"stub CANN toolkit: {tools_missing()}")

API = "aclnnConvolutionBackward"
NULLPTR, INVALID = 161001, 161002
INPUTS, OUTPUTS = ("gradOutput", "input", "weight"), ("gradInput", "gradWeight", "gradBias")
LISTS = ("biasSizes", "stride", "padding", "dilation", "outputPadding")
ATTRS = {"biasSizes": [], "stride": [1, 1], "padding": [1, 1], "dilation": [1, 1], "transposed": False,
         "outputPadding": [0, 0], "groups": 1, "outputMask": [True, True, True], "cubeMathType": 0}


def call(stub, t: dict, attrs: dict):
    """Phase one (and two if it succeeds) with the tensors in `t` (arrays, or (storage, shape, strides, offset); None: a
    null pointer) and ATTRS changed by `attrs` (a list None: a null pointer). Returns (status, the outputs' views)."""
    a = {**ATTRS, **attrs}
    tensors = {k: None if v is None else stub.tensor(v) if isinstance(v, np.ndarray) else stub.tensor(*v)
               for k, v in t.items()}
    lists = {k: None if a[k] is None else Handle(stub.int_array(a[k])) for k in LISTS}
    mask = None if a["outputMask"] is None else Handle(stub.bool_array(a["outputMask"]))
    status = stub.call(API, *(tensors[k] for k in INPUTS), lists["biasSizes"], lists["stride"], lists["padding"],
                       lists["dilation"], bool(a["transposed"]), lists["outputPadding"], int(a["groups"]), mask,
                       int(a["cubeMathType"]), *(tensors.get(k) for k in OUTPUTS))
    return status, {k: stub.view(tensors[k]) for k in OUTPUTS if tensors.get(k) is not None}


# ---------------------------------------------------------------- known answers

def test_known_answer_1d(stub):
    """x [1, 2, 3, 4], w [1, -1], dy [1, 2, 3]: gradInput[i] = sum over o + j = i of dy[o] w[j] = [1, 2 - 1, 3 - 2, -3],
    gradWeight[j] = sum_o x[o + j] dy[o] = [1 + 4 + 9, 2 + 6 + 12], gradBias = 6."""
    t = {"gradOutput": np.array([[[1, 2, 3]]], F32), "input": np.array([[[1, 2, 3, 4]]], F32),
         "weight": np.array([[[1, -1]]], F32), "gradInput": zeros((1, 1, 4)), "gradWeight": zeros((1, 1, 2)),
         "gradBias": zeros((1,))}
    status, out = call(stub, t, {"stride": [1], "padding": [0], "dilation": [1], "outputPadding": [0]})
    assert status == 0, stub.error()
    np.testing.assert_array_equal(out["gradInput"], [[[1, 1, 1, -3]]])
    np.testing.assert_array_equal(out["gradWeight"], [[[14, 20]]])
    np.testing.assert_array_equal(out["gradBias"], [6])


def test_known_answer_transposed_1d(stub):
    """conv_transpose of x [1, 2] with w [1, -1], stride 2: y = [1, -1, 2, -2] (size (2 - 1) 2 + 1 + 1 = 4).
    dy [1, 2, 3, 4]: gradInput[i] = sum_j dy[2 i + j] w[j] = [1 - 2, 3 - 4], gradWeight[j] = sum_i x[i] dy[2 i + j] =
    [1 + 6, 2 + 8], gradBias = 10."""
    t = {"gradOutput": np.array([[[1, 2, 3, 4]]], F32), "input": np.array([[[1, 2]]], F32),
         "weight": np.array([[[1, -1]]], F32), "gradInput": zeros((1, 1, 2)), "gradWeight": zeros((1, 1, 2)),
         "gradBias": zeros((1,))}
    status, out = call(stub, t, {"stride": [2], "padding": [0], "dilation": [1], "outputPadding": [0],
                                 "transposed": True})
    assert status == 0, stub.error()
    np.testing.assert_array_equal(out["gradInput"], [[[-1, -1]]])
    np.testing.assert_array_equal(out["gradWeight"], [[[7, 10]]])
    np.testing.assert_array_equal(out["gradBias"], [10])


def bias_of(stub, rows: np.ndarray) -> np.ndarray:
    """gradBias alone (outputMask [F, F, T]) of gradOutput (1, C, L) = rows: a 1 x 1 kernel, an input of length L."""
    c, length = rows.shape
    t = {"gradOutput": rows.reshape(1, c, length).astype(F32), "input": zeros((1, 1, length)),
         "weight": zeros((c, 1, 1)), "gradInput": None, "gradWeight": None, "gradBias": zeros((c,))}
    status, out = call(stub, t, {"stride": [1], "padding": [0], "dilation": [1], "outputPadding": [0],
                                 "outputMask": [False, False, True]})
    assert status == 0, stub.error()
    return out["gradBias"]


def test_the_cube_sums_each_step_of_16_exactly_and_rounds_between_steps(stub):
    """[2^24, 1, 0 x 14 | 1]: the first step is 2^24 + 1, rounded to 2^24 (a tie, to even), then + 1 rounds to 2^24
    again (the exact sum, or steps of more than 16, give 2^24 + 2). [2^24, 1, 0 x 13, 1 | 0]: the step is 2^24 + 2
    exactly (steps of fewer than 16, or the ones added one at a time in float32, give 2^24)."""
    rows = np.zeros((2, 17))
    rows[:, 0] = 2.0**24
    rows[0, [1, 16]] = 1
    rows[1, [1, 15]] = 1
    np.testing.assert_array_equal(bias_of(stub, rows), [2.0**24, 2.0**24 + 2])


def test_k_past_8192_runs_in_rounds_of_4104(stub):
    """K = 8193: two rounds of CeilAlign(4097, 8) = 4104. Ones at 4103 and 4104 fall in one step of 16 counted from 0
    (2^24 + 2 exactly), but in two rounds: 2^24 + 1 rounds to 2^24, and the second round's 1 is lost the same way."""
    rows = np.zeros((1, 8193))
    rows[0, 0], rows[0, 4103], rows[0, 4104] = 2.0**24, 1, 1
    np.testing.assert_array_equal(bias_of(stub, rows), [2.0**24])


@pytest.mark.parametrize("math, kept", [(0, True), (1, False), (2, False), (3, False)])
def test_hfloat32_under_cube_math_types_1_and_3_and_float16_under_2(stub, math, kept):
    """v = 1 + 2^-12 everywhere (one element each): v v = 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11 in float32; as HFLOAT32
    or float16 (11 significant bits) v is 1 and both cube gradients are 1. gradBias is no cube product and is summed
    before USE_FP16's casts: v whatever the type."""
    v = np.array([[[1 + 2.0**-12]]], F32)
    t = {"gradOutput": v, "input": v, "weight": v, "gradInput": zeros((1, 1, 1)), "gradWeight": zeros((1, 1, 1)),
         "gradBias": zeros((1,))}
    status, out = call(stub, t, {"stride": [1], "padding": [0], "dilation": [1], "outputPadding": [0],
                                 "cubeMathType": math})
    assert status == 0, stub.error()
    want = 1 + 2.0**-11 if kept else 1.0
    assert out["gradInput"].item() == out["gradWeight"].item() == want
    assert out["gradBias"].item() == 1 + 2.0**-12


@pytest.mark.parametrize("math", [0, 2])
def test_use_fp16_rounds_grad_input_through_float16_and_not_grad_weight(stub, math):
    """v = 1 + 2^-10 (a float16 value) everywhere: v v = 1 + 2^-9 + 2^-20 is float32's; under cubeMathType 2 gradInput
    leaves the cube as float16 (1 + 2^-9), gradWeight as float32 (Conv*BackpropFilterFp162Fp32)."""
    v = np.array([[[1 + 2.0**-10]]], F32)
    t = {"gradOutput": v, "input": v, "weight": v, "gradInput": zeros((1, 1, 1)), "gradWeight": zeros((1, 1, 1)),
         "gradBias": zeros((1,))}
    status, out = call(stub, t, {"stride": [1], "padding": [0], "dilation": [1], "outputPadding": [0],
                                 "cubeMathType": math})
    assert status == 0, stub.error()
    exact = 1 + 2.0**-9 + 2.0**-20
    assert out["gradInput"].item() == (1 + 2.0**-9 if math == 2 else exact)
    assert out["gradWeight"].item() == exact


# ---------------------------------------------------------------- the definition on exact sums

def sides(padding, sp):
    return [(p, p) for p in padding] if len(padding) == sp else [(padding[0], padding[1]), (padding[2], padding[3])]


def forward_sizes(x, w, a) -> tuple:
    """gradOutput's spatial sizes: the forward's, or the transposed convolution's."""
    sp = len(x) - 2
    if a["transposed"]:
        return tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1 for n, k, s, p, d, op in
                     zip(x[2:], w[2:], a["stride"], a["padding"], a["dilation"], a["outputPadding"]))
    return tuple((n + lo + hi - d * (k - 1) - 1) // s + 1 for n, k, s, (lo, hi), d in
                 zip(x[2:], w[2:], a["stride"], sides(a["padding"], sp), a["dilation"]))


def definition(x, w, dy, a):
    """The three gradients in float64 from the forward's (position, tap, position) pairs: not transposed, output
    position o's tap j reads input position o s - lo + j d; transposed (weight (Cin, Cout / groups, ...)), input
    position i's tap j feeds output position i s - p + j d. Each pair adds its products to gradInput and gradWeight,
    per group."""
    sp, groups = x.ndim - 2, a["groups"]
    lo = [s[0] for s in sides(a["padding"], sp)]
    gi, gw = np.zeros(x.shape), np.zeros(w.shape)
    near, far = (x, dy) if a["transposed"] else (dy, x)  # near: the side whose positions are walked
    for p in np.ndindex(*near.shape[2:]):
        for j in np.ndindex(*w.shape[2:]):
            q = tuple(p[k] * a["stride"][k] - lo[k] + j[k] * a["dilation"][k] for k in range(sp))
            if not all(0 <= q[k] < far.shape[2 + k] for k in range(sp)):
                continue
            i, o = (p, q) if a["transposed"] else (q, p)
            for g in range(groups):
                if a["transposed"]:
                    ci, co = slice(g * (w.shape[0] // groups), (g + 1) * (w.shape[0] // groups)), slice(
                        g * w.shape[1], (g + 1) * w.shape[1])
                    gi[(slice(None), ci, *i)] += dy[(slice(None), co, *o)] @ w[(ci, slice(None), *j)].T
                    gw[(ci, slice(None), *j)] += x[(slice(None), ci, *i)].T @ dy[(slice(None), co, *o)]
                else:
                    ci, co = slice(g * w.shape[1], (g + 1) * w.shape[1]), slice(
                        g * (w.shape[0] // groups), (g + 1) * (w.shape[0] // groups))
                    gi[(slice(None), ci, *i)] += dy[(slice(None), co, *o)] @ w[(co, slice(None), *j)]
                    gw[(co, slice(None), *j)] += dy[(slice(None), co, *o)].T @ x[(slice(None), ci, *i)]
    return {"gradInput": gi, "gradWeight": gw, "gradBias": dy.sum(axis=(0, *range(2, dy.ndim)))}


GEOMETRIES = {  # (input, weight, attributes)
    "1d_groups": ((2, 4, 11), (6, 2, 3), {"stride": [2], "padding": [1], "dilation": [2], "outputPadding": [0],
                                          "groups": 2}),
    "2d_padding4": ((2, 3, 7, 6), (4, 3, 3, 2), {"stride": [2, 1], "padding": [2, 0, 1, 1], "dilation": [1, 2]}),
    "2d_depthwise": ((1, 4, 5, 5), (8, 1, 3, 3), {"groups": 4}),
    "2d_stride_beyond_kernel": ((2, 2, 9, 7), (3, 2, 2, 2), {"stride": [4, 3], "padding": [3, 2]}),
    "3d": ((1, 2, 4, 5, 3), (3, 2, 2, 3, 2), {"stride": [1, 2, 1], "padding": [1, 0, 1], "dilation": [1, 1, 2],
                                              "outputPadding": [0, 0, 0]}),
    "transposed_groups": ((2, 4, 3, 4), (4, 3, 3, 2), {"stride": [2, 1], "padding": [1, 0], "dilation": [1, 2],
                                                       "outputPadding": [1, 0], "groups": 2, "transposed": True}),
    "transposed_1d": ((1, 2, 5), (2, 3, 4), {"stride": [3], "padding": [2], "dilation": [1], "outputPadding": [2],
                                             "transposed": True}),
}


@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("name", GEOMETRIES)
def test_every_gradient_is_the_definition_on_exact_sums(stub, name, dtype):
    """Integers in [-3, 3]: every product and sum is an integer below 2^11, exact in float16 and float32, so the stub's
    results must be the definition's bit for bit, whatever its order."""
    x_shape, w_shape, attrs = GEOMETRIES[name]
    a = {**ATTRS, **attrs}
    cout = w_shape[1] * a["groups"] if a["transposed"] else w_shape[0]
    g_shape = (x_shape[0], cout, *forward_sizes(x_shape, w_shape, a))
    rng = np.random.default_rng(sum(map(ord, name)))
    x, w, dy = (rng.integers(-3, 4, s).astype(dtype) for s in (x_shape, w_shape, g_shape))
    want = definition(*(v.astype(np.float64) for v in (x, w, dy)), a)
    t = {"gradOutput": dy, "input": x, "weight": w, "gradInput": zeros(x_shape, dtype),
         "gradWeight": zeros(w_shape, dtype), "gradBias": zeros(g_shape[1:2], dtype)}
    status, out = call(stub, t, attrs)
    assert status == 0, stub.error()
    assert max(np.abs(v).max() for v in want.values()) < 2**11
    for k in OUTPUTS:
        np.testing.assert_array_equal(out[k].astype(np.float64), want[k], err_msg=k)


def test_strided_views_in_and_out(stub):
    """input stored channels-last (a transposed view), weight one kernel for every output channel (stride 0 along
    Cout), gradInput into every other element of a storage after an offset of 3: the definition still, bit for bit."""
    a = {**ATTRS, "stride": [2, 1]}
    rng = np.random.default_rng(7)
    x = rng.integers(-3, 4, (2, 3, 5, 4)).astype(F32)
    kernel = rng.integers(-3, 4, (3, 3, 3)).astype(F32)
    w = np.broadcast_to(kernel, (4, 3, 3, 3))
    dy = rng.integers(-3, 4, (2, 4, 3, 4)).astype(F32)
    want = definition(x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64), a)
    channels_last = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    gi_storage = np.full(3 + 2 * x.size, 7, F32)
    t = {"gradOutput": dy, "input": (channels_last, x.shape, (60, 1, 12, 3), 0),
         "weight": (kernel, w.shape, (0, 9, 3, 1), 0), "gradInput": (gi_storage, x.shape, (120, 40, 8, 2), 3),
         "gradWeight": zeros(w.shape), "gradBias": zeros((4,))}
    status, out = call(stub, t, {"stride": [2, 1]})
    assert status == 0, stub.error()
    for k in OUTPUTS:
        np.testing.assert_array_equal(out[k], want[k], err_msg=k)


# ---------------------------------------------------------------- phase one

def base(dtype=F16, x=(2, 4, 6, 6), w=(4, 4, 3, 3), g=(2, 4, 6, 6), **change) -> dict:
    t = {"gradOutput": zeros(g, dtype), "input": zeros(x, dtype), "weight": zeros(w, dtype),
         "gradInput": zeros(x, dtype), "gradWeight": zeros(w, dtype), "gradBias": zeros(g[1:2], dtype)}
    return {**t, **change}


def contract(product: str, t: dict, attrs: dict) -> int:
    descs = {k: TensorDesc(lookup("float32"), (), True) if v is None else TensorDesc(lookup(v.dtype.name), v.shape)
             for k, v in t.items()}
    return check(OPS[API], product, descs, {**ATTRS, **attrs}).status


TRANSPOSED = {"transposed": True, "stride": [2, 1], "padding": [1, 1], "outputPadding": [1, 0]}
F64 = np.dtype("float64")
CASES = [  # (name, tensors, attributes, the stub's status, the contract's where it differs)
    ("ok", base(), {}, 0), ("ok_float32_math3", base(F32), {"cubeMathType": 3}, 0),
    *((f"null_{k}", base(**{k: None}), {}, NULLPTR) for k in INPUTS),
    *((f"null_{k}", base(), {k: None}, NULLPTR) for k in (*LISTS, "outputMask")),
    ("null_stride_before_dtype", base(gradOutput=zeros((2, 4, 6, 6), F64)), {"stride": None}, NULLPTR),
    ("float64", base(gradOutput=zeros((2, 4, 6, 6), F64)), {}, INVALID),
    ("mixed_promoted", base(gradOutput=zeros((2, 4, 6, 6)), gradBias=zeros((4,))), {}, 0),
    ("grad_bias_not_grad_output_dtype", base(gradOutput=zeros((2, 4, 6, 6))), {}, INVALID),
    ("grad_weight_dtype", base(gradWeight=zeros((4, 4, 3, 3))), {}, INVALID),
    ("nine_dims", base(x=(1,) * 8 + (2,)), {}, INVALID),
    ("mask_length", base(), {"outputMask": [True, True]}, INVALID),
    ("stride_zero", base(), {"stride": [0, 1]}, INVALID), ("dilation_zero", base(), {"dilation": [1, 0]}, INVALID),
    ("padding_negative", base(), {"padding": [-1, 1]}, INVALID),
    ("output_padding_not_transposed", base(), {"outputPadding": [1, 0]}, INVALID),
    ("groups_zero", base(), {"groups": 0}, INVALID), ("groups_65536", base(), {"groups": 65536}, INVALID),
    ("math_4", base(), {"cubeMathType": 4}, INVALID), ("math_minus_1", base(), {"cubeMathType": -1}, INVALID),
    ("mask_without_output", base(gradWeight=None), {}, INVALID),
    ("masked_output_null", base(gradWeight=None), {"outputMask": [True, False, True]}, 0),
    ("nothing_asked", base(gradInput=None, gradWeight=None, gradBias=None), {"outputMask": [False] * 3}, 0),
    ("input_2d", base(x=(2, 4)), {}, INVALID), ("stride_length", base(), {"stride": [1]}, INVALID),
    ("padding4", base(), {"padding": [2, 0, 1, 1]}, 0), ("padding3", base(), {"padding": [1, 1, 1]}, INVALID),
    ("rank_differs", base(w=(4, 4, 3)), {}, INVALID), ("empty_weight", base(w=(4, 4, 0, 3)), {}, INVALID),
    ("grad_input_shape", base(gradInput=zeros((2, 4, 6, 7), F16)), {}, INVALID),
    ("grad_bias_shape", base(gradBias=zeros((5,), F16)), {}, INVALID),
    ("grad_output_channels", base(g=(2, 3, 6, 6)), {}, INVALID), ("groups_mismatch", base(), {"groups": 2}, INVALID),
    ("groups_2", base(w=(4, 2, 3, 3)), {"groups": 2}, 0),
    ("kernel_exceeds_input", base(x=(2, 4, 4, 4), g=(2, 4, 1, 1)), {"padding": [0, 0], "dilation": [2, 2]}, INVALID),
    ("grad_output_size", base(g=(2, 4, 5, 6)), {}, INVALID), ("grad_output_batch", base(g=(1, 4, 6, 6)), {}, INVALID),
    # outputPadding of 4 values: the contract checks no size (the stub computes the convolution those sizes give)
    ("output_padding4_other_size", base(g=(2, 4, 5, 6)), {"outputPadding": [0] * 4}, 0),
    ("transposed", base(x=(2, 4, 6, 5), w=(4, 3, 3, 3), g=(2, 3, 12, 5)), TRANSPOSED, 0),
    ("transposed_output_padding", base(x=(2, 4, 6, 5), w=(4, 3, 3, 3), g=(2, 3, 12, 5)),
     {**TRANSPOSED, "outputPadding": [2, 0]}, INVALID),
    ("transposed_channels", base(x=(2, 4, 6, 5), w=(3, 3, 3, 3), g=(2, 3, 12, 5)), TRANSPOSED, INVALID),
    # beyond the contract: a weight's first dim groups does not divide (the source's CheckConvChannelAndGroup); another
    # batch where the contract checks no size (its kernel computes convolutions only)
    ("weight_not_divisible_by_groups", base(w=(3, 2, 3, 3), g=(2, 3, 6, 6)), {"groups": 2}, INVALID, 0),
    ("output_padding4_other_batch", base(g=(1, 4, 6, 6)), {"outputPadding": [0] * 4}, INVALID, 0),
]


@pytest.mark.parametrize("t, attrs, status, contract_status",
                         [(c[1], c[2], c[3], c[4] if len(c) > 4 else c[3]) for c in CASES], ids=[c[0] for c in CASES])
def test_statuses_are_the_contracts(stub, t, attrs, status, contract_status):
    assert call(stub, t, attrs)[0] == status, stub.error()
    assert contract("A2", t, attrs) == contract_status  # (the expectation is aclnn-cli's contract too)


@pytest.mark.parametrize("soc, product, dtype, status", [
    ("Ascend950PR_9599", "950", "bfloat16", 0), ("Ascend910_9391", "A3", "bfloat16", 0),
    ("Ascend910B1", "A2", "float32", 0), ("Ascend910A", None, "float16", INVALID),
    ("Ascend310P3", None, "float16", INVALID), ("Ascend999", None, "float32", INVALID),
])
def test_products(stub, monkeypatch, soc, product, dtype, status):
    """The 950, A3 and A2 take all three dtypes; the 910 and 310P are not declared (the doc's other columns)."""
    monkeypatch.setenv("ACLNN_STUB_SOC", soc)
    t = base(lookup(dtype).np_dtype)
    assert call(stub, t, {})[0] == status, stub.error()
    if product is not None:
        assert contract(product, t, {}) == status


def test_the_definition_itself_on_a_hand_case():
    """The oracle above, checked once by hand: a 2 x 2 input, a 2 x 2 kernel of ones, no padding: one output
    position reading all four inputs."""
    x = np.arange(4.0).reshape(1, 1, 2, 2)
    w = np.ones((1, 1, 2, 2))
    dy = np.full((1, 1, 1, 1), 2.0)
    got = definition(x, w, dy, {**ATTRS, "padding": [0, 0]})
    np.testing.assert_array_equal(got["gradInput"], np.full((1, 1, 2, 2), 2.0))
    np.testing.assert_array_equal(got["gradWeight"], 2 * x)
    np.testing.assert_array_equal(got["gradBias"], [2.0])
    assert forward_sizes((1, 1, 2, 2), (1, 1, 2, 2), {**ATTRS, "padding": [0, 0]}) == (1, 1)
