"""Phase one of the stub CANN's six reduction/norm/loss operators (tests/stub_cann/src/ops_{softmax,loss,norm}.cpp):
the statuses of their op_api sources (RmsNormGrad: its OpDef's dtypes and its tiling's shapes), in order,
through the public API (ctypes). Their kernels: test_stub_reductions.py.
"""

from __future__ import annotations

import numpy as np
import pytest

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
