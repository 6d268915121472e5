"""The stub CANN's aclnnPreluBackward (tests/stub_cann/src/ops_prelu.cpp) through the public API (ctypes,
stub_ctypes.py): hand-derived answers (per channel, one weight, the mask at self = +-0, a 16-bit product rounded
before the float32 sum), bit-for-bit equality with the op module's emulated 950 kernel on random channels, and
phase one's statuses equal to aclnn_cli's contract on every product. The bundled cases run through the C++ runner
in tests/test_harness_e2e.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from aclnn_cli.ops import OPS
from aclnn_cli.ops.channels.prelu_backward_kernel import BITS, DY, GI, GW, W, X, kernel
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.tensor.dtypes import lookup

from cann_build import tools_missing
from stub_ctypes import stub  # noqa: F401  (stub: the fixture)
from test_stub_reductions import BF16, F16, F32, zeros

pytestmark = pytest.mark.skipif(tools_missing() is not None, reason=f"stub CANN toolkit: {tools_missing()}")

API = "aclnnPreluBackward"
NULLPTR, INVALID = 161001, 161002
ORDER = (DY, X, W, GI, GW)


def call(stub, t: dict):
    """Phase one (and two if it succeeds) with the arrays in `t` (None: a null pointer). Returns (status, the
    outputs' views)."""
    tensors = {k: None if t[k] is None else stub.tensor(t[k]) for k in ORDER}
    status = stub.call(API, *(tensors[k] for k in ORDER))
    return status, {k: stub.view(tensors[k]) for k in (GI, GW) if tensors[k] is not None}


def tensors(dy, x, w, dtype=F32, gw_shape=None) -> dict:
    x, w = np.asarray(x, dtype), np.asarray(w, dtype)
    return {DY: np.asarray(dy, dtype), X: x, W: w, GI: zeros(x.shape, dtype),
            GW: zeros(w.shape if gw_shape is None else gw_shape, dtype)}


# ---------------------------------------------------------------- known answers

X3 = [[[1, -2], [0, 3]], [[-1, 4], [-0.5, -3]]]  # (N, C, S) = (2, 2, 2)
DY3 = [[[2, 3], [5, 7]], [[11, 13], [17, 19]]]


def test_per_channel(stub):
    """weight [0.5, -2] read along axis 1. Channel 0: self 1, -2, -1, 4: gradInput 2, 0.5 * 3, 0.5 * 11, 13; gradWeight
    -2 * 3 - 1 * 11 = -17. Channel 1: self 0, 3, -0.5, -3 (0 takes the weight): gradInput -2 * 5, 7, -2 * 17, -2 * 19;
    gradWeight 0 * 5 - 0.5 * 17 - 3 * 19 = -65.5."""
    status, out = call(stub, tensors(DY3, X3, [0.5, -2]))
    assert status == 0, stub.error()
    np.testing.assert_array_equal(out[GI], [[[2, 1.5], [-10, 7]], [[5.5, 13], [-34, -38]]])
    np.testing.assert_array_equal(out[GW], [-17, -65.5])


@pytest.mark.parametrize("shape", [(1,), (1, 1, 1)])
def test_one_weight_serves_every_element_and_sums_all_of_self(stub, shape):
    """weight 0.5 of shape [1] or [1, 1, 1]: channel 1's weight-branch elements now take 0.5 (0.5 * 5, 0.5 * 17,
    0.5 * 19); gradWeight (weight's shape) = -17 - 65.5 = -82.5."""
    status, out = call(stub, tensors(DY3, X3, np.full(shape, 0.5)))
    assert status == 0, stub.error()
    np.testing.assert_array_equal(out[GI], [[[2, 1.5], [2.5, 7]], [[5.5, 13], [8.5, 9.5]]])
    np.testing.assert_array_equal(out[GW], np.full(shape, -82.5))


def test_weight_of_the_input_rank_is_read_flat(stub):
    """weight [1, 2, 1, 1] holds the two channels' values (the op_api flattens it); gradWeight [2]."""
    x, dy = np.reshape(X3, (2, 2, 2, 1)), np.reshape(DY3, (2, 2, 2, 1))
    status, out = call(stub, tensors(dy, x, [[[[0.5]], [[-2]]]], gw_shape=(2,)))
    assert status == 0, stub.error()
    np.testing.assert_array_equal(out[GW], [-17, -65.5])


def test_self_zero_takes_the_weight_branch(stub):
    """self +0, -0 are not > 0 (Compare GT): gradInput = weight * gradOutput there, and their terms 0 * gradOutput
    enter gradWeight: an infinite gradOutput at +0 makes it NaN. A NaN gradOutput at self > 0 is selected away from
    gradWeight (gradInput passes it). self -1 adds -1 * 4."""
    status, out = call(stub, tensors([3, 5, np.nan, 4], [0.0, -0.0, 2, -1], [0.5]))
    assert status == 0, stub.error()
    np.testing.assert_array_equal(out[GI], [1.5, 2.5, np.nan, 2])
    np.testing.assert_array_equal(out[GW], [-4])
    status, out = call(stub, tensors([np.inf, 5], [0.0, -1], [0.5]))
    assert status == 0, stub.error()
    np.testing.assert_array_equal(out[GI], [np.inf, 2.5])
    assert np.isnan(out[GW]).all()


@pytest.mark.parametrize("dtype, bits", [(F16, 11), (BF16, 8)])
def test_the_16_bit_products_round_before_the_float32_sum(stub, dtype, bits):
    """v = 1 + e, e = 2^(1 - bits), exact in the dtype; v v = 1 + 2e + e^2 rounds to 1 + 2e in it (e^2 under half
    its ulp 2e). gradInput (weight v, self -v): 1 + 2e. gradWeight, five terms -(1 + 2e): -(5 + 10e) exactly in
    float32, then a tie in the dtype (its ulp at 5 is 4e) to even: -(5 + 8e). Products kept in float32 would sum
    to -(5 + 10e + 5e^2), above the tie: -(5 + 12e)."""
    e = 2.0 ** (1 - bits)
    v = 1 + e
    status, out = call(stub, tensors(np.full(5, v), np.full(5, -v), [v], dtype))
    assert status == 0, stub.error()
    np.testing.assert_array_equal(out[GI].astype(np.float64), np.full(5, 1 + 2 * e))
    assert out[GW].astype(np.float64).tolist() == [-(5 + 8 * e)]


@pytest.mark.parametrize("dtype, bits", [(F32, 24), (F16, 11), (BF16, 8)])
@pytest.mark.parametrize("shape, one", [((3, 4, 50), False), ((2, 3, 7, 11), False), ((4, 3, 60), True)])
def test_bit_for_bit_the_emulated_kernel(stub, dtype, bits, shape, one):
    """Random channels (N = 3 of 50, 2 of 77 elements: several 64-lane blocks of the tree sum; one weight: 720
    elements), self with exact zeros: the stub equals prelu_backward_kernel.kernel on the (k, M, 1) rows."""
    rng = np.random.default_rng(bits * 7 + len(shape) + one)
    x = (rng.integers(-3, 4, shape) * rng.uniform(0.1, 2, shape)).astype(dtype)
    dy = rng.normal(0, 1, shape).astype(dtype)
    c = 1 if one else shape[1]
    w = rng.uniform(-1, 1, c).astype(dtype)
    status, out = call(stub, tensors(dy, x, w, dtype))
    assert status == 0, stub.error()
    if one:
        rows = lambda a: a.astype(F32).reshape(1, -1, 1)  # noqa: E731  (the whole self, flat)
    else:
        rows = lambda a: np.moveaxis(a.astype(F32), 1, 0).reshape(shape[1], -1, 1)  # noqa: E731  ((n, s) order)
    want = kernel({DY: rows(dy), X: rows(x), W: w.astype(F32).reshape(c, 1, 1), BITS: np.full((c, 1, 1), bits)})
    gi = want[GI].reshape(1, -1) if one else np.moveaxis(want[GI].reshape(shape[1], shape[0], -1), 0, 1)
    np.testing.assert_array_equal(out[GI].astype(F32).reshape(-1), gi.astype(dtype).astype(F32).reshape(-1))
    np.testing.assert_array_equal(out[GW].astype(F32), want[GW].reshape(c).astype(dtype).astype(F32))


def test_empty_self_launches_nothing(stub):
    """N = 0: success, and gradWeight keeps what it held (nothing written)."""
    t = tensors(zeros((0, 3, 4)), zeros((0, 3, 4)), [1, 2, 3])
    t[GW] = np.full(3, 7, F32)
    status, out = call(stub, t)
    assert status == 0, stub.error()
    np.testing.assert_array_equal(out[GW], [7, 7, 7])


# ---------------------------------------------------------------- phase one

def base(dtype=F32, x=(2, 3, 4), w=(3,), gw=None, dy=None, gi=None, **change) -> dict:
    t = {DY: zeros(x if dy is None else dy, dtype), X: zeros(x, dtype), W: zeros(w, dtype),
         GI: zeros(x if gi is None else gi, dtype), GW: zeros(w if gw is None else gw, dtype)}
    return {**t, **change}


def contract(product: str, t: dict) -> int:
    descs = {k: TensorDesc(lookup("float32"), (), True) if v is None else TensorDesc(lookup(v.dtype.name), v.shape)
             for k, v in t.items()}
    return check(OPS[API], product, descs).status


F64 = np.dtype("float64")
CASES = [  # (name, tensors, status)
    ("ok", base(), 0), ("ok_float16", base(F16), 0), ("ok_bfloat16", base(BF16), 0),
    *((f"null_{k}", base(**{k: None}), NULLPTR) for k in ORDER),
    ("null_after_a_bad_dtype", base(F64, gradWeight=None), NULLPTR),
    ("float64", base(F64), INVALID),
    *((f"dtype_mismatch_{k}", base(**{k: zeros(base()[k].shape, F16)}), INVALID) for k in ORDER),
    ("nine_dims", base(x=(1,) * 8 + (3,), w=(1,)), INVALID),
    ("grad_input_shape", base(gi=(2, 3, 5)), INVALID),
    ("weight_count", base(w=(2,)), INVALID), ("one_weight", base(w=(1,)), 0),
    ("one_weight_grad_weight_c", base(w=(1,), gw=(3,)), INVALID),
    ("one_weight_3d", base(w=(1, 1, 1)), 0), ("one_weight_3d_grad_weight_flat", base(w=(1, 1, 1), gw=(1,)), INVALID),
    ("grad_weight_not_flat", base(gw=(1, 3)), INVALID), ("weight_same_rank", base(w=(1, 3, 1), gw=(3,)), 0),
    ("one_d_one_weight", base(x=(5,), w=(1,)), 0), ("one_d_two_weights", base(x=(5,), w=(2,)), INVALID),
    ("zero_d", base(x=(), w=(1,)), 0), ("zero_d_two_weights", base(x=(), w=(2,)), INVALID),
    ("grad_output_broadcasts", base(dy=(3, 4)), 0), ("grad_output_not_broadcasting", base(dy=(2, 3, 5)), INVALID),
    ("grad_output_more_dims", base(dy=(1, 2, 3, 4)), INVALID),
    ("empty", base(x=(0, 3, 4)), 0), ("no_channels", base(x=(2, 0, 4), w=(0,)), 0),
]


@pytest.mark.parametrize("t, status", [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_statuses_are_the_contracts(stub, t, status):
    assert call(stub, t)[0] == status, stub.error()
    assert contract("A2", t) == status  # (the expectation is aclnn-cli's contract too)


@pytest.mark.parametrize("soc, product, dtype, status", [
    ("Ascend950PR_9599", "950", BF16, 0), ("Ascend910_9391", "A3", BF16, 0), ("Ascend910B1", "A2", BF16, 0),
    ("Ascend910A", "910", F16, 0), ("Ascend910A", "910", BF16, INVALID),
    ("Ascend310P3", None, F32, INVALID), ("Ascend999", None, F32, INVALID),
])
def test_products(stub, monkeypatch, soc, product, dtype, status):
    """bfloat16 on the 950, A3, A2; float32 and float16 on the 910; no other product."""
    monkeypatch.setenv("ACLNN_STUB_SOC", soc)
    t = base(dtype)
    assert call(stub, t)[0] == status, stub.error()
    if product is not None:
        assert contract(product, t) == status
