"""Phase one of the stub CANN's six reduction/norm/loss operators (tests/stub_cann/src/ops_{softmax,loss,norm}.cpp):
the statuses of their op_api sources (RmsNormGrad: its OpDef's dtypes and its tiling's shapes), in order,
through the public API (ctypes); and BatchNormBackward's (ops_batchnorm.cpp), those of aclnn-cli's contract for it
(aclnn_cli.ops.contract.check, which the bundled negative cases expect). Their kernels: test_stub_reductions.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from aclnn_cli.tensor.dtypes import lookup
from aclnn_cli.ops import OPS
from aclnn_cli.ops.contract import TensorDesc, check

from cann_build import tools_missing
from stub_ctypes import Handle, stub  # noqa: F401  (stub: the fixture)
from test_stub_reductions import BF16, F16, F32, zeros

pytestmark = pytest.mark.skipif(tools_missing() is not None, reason=f"stub CANN toolkit: {tools_missing()}")

NULLPTR, INVALID, TILING = 161001, 161002, 561002


@pytest.fixture
def soc(monkeypatch):
    """Switch the product the stub reports (it reads ACLNN_STUB_SOC on every call)."""
    return lambda name: monkeypatch.setenv("ACLNN_STUB_SOC", name)


def softmax_call(stub, api="aclnnSoftmaxBackward", shape=(2, 3), dtype=F32, dim=-1, **change):
    t = {"dy": zeros(shape, dtype), "y": zeros(shape, dtype), "out": zeros(shape, dtype), **change}
    args = [None if t[k] is None else stub.tensor(t[k]) for k in ("dy", "y", "out")]
    return stub.call(api, args[0], args[1], dim, args[2])


@pytest.mark.parametrize("api", ["aclnnSoftmaxBackward", "aclnnLogSoftmaxBackward"])
@pytest.mark.parametrize("case, status", [
    ({}, 0), ({"dy": None}, NULLPTR), ({"out": None}, NULLPTR), ({"dim": 2}, INVALID), ({"dim": -3}, INVALID),
    ({"dim": 1}, 0), ({"y": zeros((2, 3), F16)}, INVALID), ({"out": zeros((3, 2))}, INVALID),
    ({"dy": zeros((2, 3), np.float64), "y": zeros((2, 3), np.float64)}, INVALID),
    ({"shape": (1,) * 9, "dim": 0}, INVALID), ({"shape": (), "dim": -1}, 0), ({"shape": (), "dim": 1}, INVALID),
    ({"out": zeros((2, 3), F16)}, 0),  # out's dtype is not checked: the result is cast to it
])
def test_softmax_statuses(stub, soc, api, case, status):
    soc("Ascend910B1")
    assert softmax_call(stub, api, **case) == status, stub.error()


@pytest.mark.parametrize("name, product_status", [("Ascend910A", INVALID), ("Ascend910B1", 0), ("Ascend950PR_9599", 0)])
def test_softmax_bf16_per_product(stub, soc, name, product_status):
    soc(name)
    assert softmax_call(stub, dtype=BF16) == product_status


def test_softmax_empty_succeeds_before_checks_off_the_950_only(stub, soc):
    soc("Ascend910B1")
    assert softmax_call(stub, shape=(0, 3), dim=5) == 0  # IsRegbase false: empty returns before CheckDim
    soc("Ascend950PR_9599")
    assert softmax_call(stub, shape=(0, 3), dim=5) == INVALID


def mse_call(stub, reduction=1, **change):
    t = {"dy": zeros((2, 3)), "x": zeros((2, 3)), "y": zeros((2, 3)), "out": zeros((2, 3)), **change}
    a = [None if t[k] is None else stub.tensor(t[k]) for k in ("dy", "x", "y", "out")]
    return stub.call("aclnnMseLossBackward", a[0], a[1], a[2], reduction, a[3])


@pytest.mark.parametrize("case, status", [
    ({}, 0), ({"y": None}, NULLPTR), ({"reduction": 3}, INVALID), ({"reduction": -1}, INVALID),
    ({"y": zeros((2, 3), F16)}, INVALID), ({"out": zeros((3, 3))}, INVALID), ({"y": zeros((1, 3))}, 0),
    ({"y": zeros(4)}, INVALID), ({"dy": zeros((2, 1, 3)), "out": zeros((2, 2, 3))}, 0), ({"y": zeros((0, 3))}, INVALID),
])
def test_mse_statuses(stub, soc, case, status):
    soc("Ascend910B1")
    assert mse_call(stub, **case) == status, stub.error()


def test_mse_not_on_910(stub, soc):
    soc("Ascend910A")
    assert mse_call(stub) == INVALID


def nll_call(stub, reduction=1, **change):
    t = {"g": zeros(1), "x": zeros((3, 4)), "t": np.zeros(3, np.int64), "w": zeros(4), "tw": np.ones(1, F32),
         "out": zeros((3, 4)), **change}
    a = [None if t[k] is None else stub.tensor(t[k]) for k in ("g", "x", "t", "w", "tw", "out")]
    return stub.call("aclnnNLLLossBackward", a[0], a[1], a[2], a[3], reduction, -100, a[4], a[5])


@pytest.mark.parametrize("case, status", [
    ({}, 0), ({"tw": None}, NULLPTR), ({"t": zeros(3)}, INVALID), ({"t": np.zeros(3, np.int8)}, INVALID),
    ({"w": zeros(4, F16)}, INVALID), ({"reduction": 3}, INVALID), ({"w": zeros(3)}, INVALID),
    ({"reduction": 0}, INVALID), ({"reduction": 0, "g": zeros(3)}, 0), ({"tw": zeros((1, 1, 1))}, 0),
    ({"t": np.zeros(2, np.int32)}, INVALID), ({"x": zeros(4), "t": np.zeros((), np.uint8), "out": zeros(4)}, 0),
    ({"out": zeros((4, 3))}, INVALID),
])
def test_nll_statuses(stub, soc, case, status):
    soc("Ascend910B1")
    assert nll_call(stub, **case) == status, stub.error()


def rms_call(stub, **change):
    t = {"dy": zeros((2, 3, 8)), "x": zeros((2, 3, 8)), "r": zeros((2, 3)), "g": zeros(8), "dx": zeros((2, 3, 8)),
         "dg": zeros(8), **change}
    a = [None if t[k] is None else stub.tensor(t[k]) for k in ("dy", "x", "r", "g", "dx", "dg")]
    return stub.call("aclnnRmsNormGrad", *a)


@pytest.mark.parametrize("case, status", [
    ({}, 0), ({"dg": None}, NULLPTR), ({"r": zeros((2, 3), F16)}, INVALID), ({"g": zeros(8, F16)}, INVALID),
    ({"dy": zeros((2, 3, 8), F16), "x": zeros((2, 3, 8), F16), "dx": zeros((2, 3, 8), F16), "g": zeros(8, F16)}, 0),
    ({"g": zeros(4), "dg": zeros(4)}, TILING), ({"r": zeros(5)}, TILING), ({"r": zeros(6)}, 0),
    ({"dg": zeros((3, 8))}, TILING), ({"g": zeros((3, 8)), "dg": zeros((3, 8)), "r": zeros(2)}, 0),
])
def test_rms_statuses(stub, soc, case, status):
    soc("Ascend910B1")
    assert rms_call(stub, **case) == status, stub.error()


def ln_call(stub, mask=(True, True, True), norm=(4,), **change):
    t = {"dy": zeros((2, 4)), "x": zeros((2, 4)), "mean": zeros((2, 1)), "rstd": zeros((2, 1)), "w": zeros(4),
         "b": None, "dx": zeros((2, 4)), "dw": zeros(4), "db": zeros(4), **change}
    a = {k: None if v is None else stub.tensor(v) for k, v in t.items()}
    norm_h = None if norm is None else Handle(stub.int_array(list(norm)))
    mask_h = None if mask is None else Handle(stub.bool_array(list(mask)))
    return stub.call("aclnnLayerNormBackward", a["dy"], a["x"], norm_h, a["mean"], a["rstd"], a["w"], a["b"], mask_h,
                     a["dx"], a["dw"], a["db"])


@pytest.mark.parametrize("case, status", [
    ({}, 0), ({"norm": None}, NULLPTR), ({"mask": None}, NULLPTR), ({"mask": (True, True)}, INVALID),
    ({"dw": None}, NULLPTR), ({"mask": (True, False, True), "dw": None}, 0), ({"mean": zeros((2, 1), F16)}, 0),
    ({"w": zeros(4, F16)}, INVALID), ({"norm": (3,)}, INVALID), ({"norm": ()}, INVALID), ({"mean": zeros(3)}, INVALID),
    ({"db": zeros(5)}, INVALID), ({"b": zeros(4, np.float64)}, INVALID), ({"w": None}, 0),
    ({"dy": zeros((2, 4), F16)}, INVALID), ({"mask": (False, False, False), "dx": None, "dw": None, "db": None}, 0),
])
def test_layer_norm_statuses(stub, soc, case, status):
    soc("Ascend910B1")
    assert ln_call(stub, **case) == status, stub.error()


@pytest.mark.parametrize("name, status", [("Ascend910A", INVALID), ("Ascend310P3", INVALID), ("Ascend910B1", 0)])
def test_layer_norm_bf16_per_product(stub, soc, name, status):
    soc(name)
    b16 = {k: zeros(v, BF16) for k, v in (("dy", (2, 4)), ("x", (2, 4)), ("dx", (2, 4)))}
    assert ln_call(stub, **b16) == status, stub.error()


BN = ("gradOut", "input", "weight", "runningMean", "runningVar", "saveMean", "saveInvstd", "gradInput", "gradWeight",
      "gradBias")


def bn_tensors(dtype=F32, shape=(3, 4, 5), **change) -> dict:
    channel = (shape[1],) if len(shape) > 1 else shape
    t = {name: zeros(shape if name in ("gradOut", "input", "gradInput") else channel, dtype) for name in BN}
    return {**t, **change}


def bn_call(stub, t: dict, mask=(True, True, True), training=True):
    a = [None if t[k] is None else stub.tensor(t[k]) for k in BN]
    mask_h = None if mask is None else Handle(stub.bool_array(list(mask)))
    return stub.call("aclnnBatchNormBackward", *a[:7], training, 1e-5, mask_h, *a[7:])


def bn_contract(product: str, t: dict, mask) -> int:
    descs = {k: TensorDesc(lookup("float32"), (), True) if v is None else TensorDesc(lookup(v.dtype.name), v.shape)
             for k, v in t.items()}
    return check(OPS["aclnnBatchNormBackward"], product, descs,
                 {"training": True, "eps": 1e-5, "outputMask": None if mask is None else list(mask)}).status


BN_CASES = [
    ({}, (True,) * 3, 0), ({"gradOut": None}, (True,) * 3, NULLPTR), ({"input": None}, (True,) * 3, NULLPTR),
    ({}, None, NULLPTR), ({}, (True, True), INVALID), ({}, (True,) * 4, INVALID),
    ({"gradInput": None}, (True,) * 3, INVALID),  # (161001 in the source: the contract reports 161002)
    ({"gradInput": None}, (False, True, True), 0), ({"gradWeight": None, "gradBias": None}, (True, False, False), 0),
    ({k: None for k in BN[2:]}, (False,) * 3, 0), ({k: None for k in BN[2:7]}, (True,) * 3, 0),
    ({"gradOut": zeros((3, 4, 5), F16)}, (True,) * 3, INVALID), ({"weight": zeros(4, F16)}, (True,) * 3, INVALID),
    ({"weight": zeros(3)}, (True,) * 3, INVALID), ({"weight": zeros((1, 4))}, (True,) * 3, INVALID),
    ({"saveMean": zeros(4, F16)}, (True,) * 3, INVALID), ({"gradWeight": zeros(4, F16)}, (True,) * 3, INVALID),
    ({"gradBias": zeros(5)}, (True,) * 3, INVALID), ({"gradInput": zeros((3, 4, 6))}, (True,) * 3, INVALID),
    ({"gradOut": zeros((3, 4, 6))}, (True,) * 3, INVALID), ({"runningVar": zeros(4, np.float64)}, (True,) * 3, INVALID),
    (bn_tensors(np.float64), (True,) * 3, INVALID), (bn_tensors(shape=(7,)), (True,) * 3, INVALID),
    (bn_tensors(shape=(1,) * 8 + (2,)), (True,) * 3, INVALID),
    (bn_tensors(shape=(2, 3, 1, 1, 1, 1, 1, 2)), (True,) * 3, 0),
    (bn_tensors(shape=(4, 0, 3)), (True,) * 3, 0), (bn_tensors(shape=(0, 3, 2)), (True,) * 3, 0),
    ({"input": zeros((3, 4, 5), F16), "gradOut": zeros((3, 4, 5), F16), "gradInput": zeros((3, 4, 5), F16)},
     (True,) * 3, 0),  # float32 per-channel tensors beside a 16-bit input
    (bn_tensors(F16, weight=zeros(4), gradWeight=zeros(4, F16), gradBias=zeros(4, F16)), (True,) * 3, INVALID),
]


@pytest.mark.parametrize("change, mask, status", BN_CASES)
def test_batch_norm_statuses_are_the_contracts(stub, soc, change, mask, status):
    soc("Ascend950PR_9599")
    t = change if set(change) == set(BN) else bn_tensors(**change)
    assert bn_call(stub, t, mask) == status, stub.error()
    assert bn_contract("950", t, mask) == status  # (the test's expectation is aclnn-cli's contract)


@pytest.mark.parametrize("name, product, dtype, status", [
    ("Ascend910A", "910", BF16, INVALID), ("Ascend910A", "910", F16, 0), ("Ascend910B1", "A2", BF16, 0),
    ("Ascend910_9391", "A3", BF16, 0), ("Ascend950PR_9599", "950", BF16, 0), ("Ascend310P3", None, F32, INVALID),
])
def test_batch_norm_dtypes_per_product(stub, soc, name, product, dtype, status):
    soc(name)
    t = bn_tensors(dtype)
    assert bn_call(stub, t, training=False) == status, stub.error()
    if product is not None:
        assert bn_contract(product, t, (True,) * 3) == status
