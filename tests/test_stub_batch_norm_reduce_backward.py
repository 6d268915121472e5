"""The stub CANN's aclnnBatchNormReduceBackward (tests/stub_cann/src/ops_syncbn.cpp) through the public API (ctypes,
stub_ctypes.py): hand-derived answers (the device's cancellation, the masks), bit-for-bit equality with the op module's
emulated pipeline on random channels, the empty input (zeros on the 950, nothing written elsewhere), and phase one's
statuses equal to aclnn_cli's contract. The bundled cases run through the C++ runner in tests/test_harness_e2e.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from aclnn_cli.ops import OPS
from aclnn_cli.ops.channels.batch_norm_reduce_kernel import DY, GB, GW, INV, MEAN, SDXM, SDY, W, X, kernel
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.tensor.dtypes import lookup

from cann_build import tools_missing
from stub_ctypes import stub  # noqa: F401  (stub: the fixture)
from test_stub_reductions import BF16, F16, F32, zeros

pytestmark = pytest.mark.skipif(tools_missing() is not None, reason=f"stub CANN toolkit: {tools_missing()}")

API = "aclnnBatchNormReduceBackward"
NULLPTR, INVALID = 161001, 161002
INPUTS, OUTPUTS = (DY, X, MEAN, INV, W), (SDY, SDXM, GW, GB)
MASKS = ("inputG", "weightG", "biasG")


def call(stub, t: dict, masks=(True, True, True)):
    """Phase one (and two if it succeeds) with the arrays in `t` (None: a null pointer). Returns (status, the
    outputs' views)."""
    tensors = {k: None if t[k] is None else stub.tensor(t[k]) for k in (*INPUTS, *OUTPUTS)}
    status = stub.call(API, *(tensors[k] for k in INPUTS), *map(bool, masks), *(tensors[k] for k in OUTPUTS))
    return status, {k: stub.view(tensors[k]) for k in OUTPUTS if tensors[k] is not None}


def tensors(dy, x, mean, inv, dtype=F32, out=None) -> dict:
    c = np.asarray(x).shape[1]
    return {DY: np.asarray(dy, dtype), X: np.asarray(x, dtype), MEAN: np.asarray(mean, dtype),
            INV: np.asarray(inv, dtype), W: np.ones(c, dtype), **{k: zeros((c,), out or dtype) for k in OUTPUTS}}


def test_known_answers_and_the_devices_cancellation(stub):
    """(N, C) = (2, 2). Channel 0: dy 1, 1; x 2^24 + 2, 2^24; mean 2^24: sum(dy x) = 2^25 + 2 rounds to 2^25 (a tie, to
    even), so sumDyXmu = 2^25 - 2^24 * 2 = 0 (exactly 2 in the doc's formula) and gradWeight 0. Channel 1: dy 3, -1;
    x 2, 5; mean 1: sumDy 2, sumDyXmu (6 - 5) - 1 * 2 = -1, gradWeight -1 * 0.5."""
    status, out = call(stub, tensors([[1, 3], [1, -1]], [[16777218, 2], [16777216, 5]], [16777216, 1], [0.25, 0.5]))
    assert status == 0, stub.error()
    assert out[SDY].tolist() == [2, 2] and out[GB].tolist() == [2, 2]
    assert out[SDXM].tolist() == [0, -1] and out[GW].tolist() == [0, -0.5]


def test_masks_leave_their_outputs_unwritten(stub):
    """weightG alone: gradWeight written, the other outputs (given, not null) keep what they held."""
    t = tensors([[1.0, 2.0]], [[3.0, 4.0]], [1.0, 1.0], [2.0, 2.0])
    for k in (SDY, SDXM, GB):
        t[k] = np.full(2, 7, F32)
    status, out = call(stub, t, (False, True, False))
    assert status == 0, stub.error()
    assert out[GW].tolist() == [4, 12] and all(out[k].tolist() == [7, 7] for k in (SDY, SDXM, GB))


@pytest.mark.parametrize("soc, written", [("Ascend950PR_9599", True), ("Ascend910B1", False)])
def test_empty_input_fills_zeros_on_the_950_only(stub, monkeypatch, soc, written):
    """N = 0: success; the 950 (a regbase SoC) fills every output with zeros, the A2 writes nothing."""
    monkeypatch.setenv("ACLNN_STUB_SOC", soc)
    t = tensors(zeros((0, 3, 2)), zeros((0, 3, 2)), [1, 2, 3], [1, 1, 1])
    for k in OUTPUTS:
        t[k] = np.full(3, 7, F32)
    status, out = call(stub, t)
    assert status == 0, stub.error()
    assert all(out[k].tolist() == ([0, 0, 0] if written else [7, 7, 7]) for k in OUTPUTS)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("shape", [(3, 4, 50), (2, 3, 7, 11)])
def test_bit_for_bit_the_emulated_kernel(stub, dtype, shape):
    """Random channels (N = 3 of 50, 2 of 77 elements: several 64-lane blocks of the tree sum), outputs of another
    dtype than the inputs: the stub equals batch_norm_reduce_kernel.kernel on the (k, M, 1) rows."""
    rng = np.random.default_rng(len(shape) * 5 + np.dtype(dtype).itemsize)
    dy, x = rng.normal(0, 1, shape).astype(dtype), rng.normal(2, 1, shape).astype(dtype)
    c = shape[1]
    mean, inv = rng.uniform(1.5, 2.5, c).astype(dtype), rng.uniform(0.5, 2, c).astype(dtype)
    out_dtype = F32 if dtype != F32 else F16
    status, out = call(stub, tensors(dy, x, mean, inv, dtype, out_dtype))
    assert status == 0, stub.error()
    rows = lambda a: np.moveaxis(a.astype(F32), 1, 0).reshape(c, -1, 1)  # noqa: E731  ((n, s) order)
    per = lambda a: a.astype(F32).reshape(c, 1, 1)  # noqa: E731
    want = kernel({DY: rows(dy), X: rows(x), MEAN: per(mean), INV: per(inv)})
    for k in OUTPUTS:
        np.testing.assert_array_equal(out[k].astype(F32), want[k].reshape(c).astype(out_dtype).astype(F32), k)


# ---------------------------------------------------------------- phase one

def base(dtype=F32, x=(2, 3, 4), c=3, **change) -> dict:
    t = {DY: zeros(x, dtype), X: zeros(x, dtype), MEAN: zeros((c,), dtype), INV: zeros((c,), dtype),
         W: zeros((c,), dtype), **{k: zeros((c,), dtype) for k in OUTPUTS}}
    return {**t, **change}


def contract(product: str, t: dict, masks) -> int:
    descs = {k: TensorDesc(lookup("float32"), (), True) if v is None else TensorDesc(lookup(v.dtype.name), v.shape)
             for k, v in t.items()}
    return check(OPS[API], product, descs, dict(zip(MASKS, masks))).status


F64 = np.dtype("float64")
ON, ONLY_WEIGHT = (True, True, True), (False, True, False)
CASES = [  # (name, tensors, masks, status)
    ("ok", base(), ON, 0), ("ok_float16", base(F16), ON, 0), ("ok_bfloat16", base(BF16), ON, 0),
    *((f"null_{k}", base(**{k: None}), ON, NULLPTR) for k in (DY, X, MEAN, INV)),
    ("null_weight", base(weight=None), ON, 0),
    *((f"null_{k}_switched_on", base(**{k: None}), ON, NULLPTR) for k in OUTPUTS),
    ("null_outputs_switched_off", base(sumDy=None, sumDyXmu=None, gradBias=None), ONLY_WEIGHT, 0),
    ("float64", base(F64), ON, INVALID),
    ("grad_out_float16", base(gradOut=zeros((2, 3, 4), F16)), ON, INVALID),
    ("mean_float16_outputs_bfloat16", base(mean=zeros((3,), F16), **{k: zeros((3,), BF16) for k in OUTPUTS}), ON, 0),
    ("one_d", base(x=(6,), c=1), ON, INVALID), ("nine_dims", base(x=(1,) * 8 + (3,)), ON, INVALID),
    ("no_channels", base(x=(2, 0, 4), c=0), ON, INVALID),
    ("output_shape", base(gradBias=zeros((4,))), ON, INVALID), ("output_not_flat", base(sumDy=zeros((1, 3))), ON, INVALID),
    ("output_shape_switched_off", base(gradBias=zeros((4,))), ONLY_WEIGHT, 0),
    ("empty", base(x=(0, 3, 4)), ON, 0),
]


@pytest.mark.parametrize("t, masks, status", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_statuses_are_the_contracts(stub, t, masks, status):
    assert call(stub, t, masks)[0] == status, stub.error()
    assert contract("A2", t, masks) == status  # (the expectation is aclnn-cli's contract too)


@pytest.mark.parametrize("soc, product, dtype, status", [
    ("Ascend950PR_9599", "950", BF16, 0), ("Ascend910B1", "A2", BF16, 0), ("Ascend910A", "910", F16, 0),
    ("Ascend910A", "910", BF16, INVALID), ("Ascend310P3", None, F32, INVALID),
])
def test_products(stub, monkeypatch, soc, product, dtype, status):
    """bfloat16 on the 950, A3, A2; float32 and float16 on the 910; no other product."""
    monkeypatch.setenv("ACLNN_STUB_SOC", soc)
    t = base(dtype)
    assert call(stub, t)[0] == status, stub.error()
    if product is not None:
        assert contract(product, t, ON) == status
