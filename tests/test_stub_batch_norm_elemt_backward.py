"""The stub CANN's aclnnBatchNormElemtBackward (tests/stub_cann/src/ops_syncbn.cpp) through the public API (ctypes,
stub_ctypes.py): a hand-derived answer, counter summed whole, the float16 path, bit-for-bit equality with the op
module's emulated computation on random channels, and phase one's statuses equal to aclnn_cli's contract. The bundled
cases run through the C++ runner in tests/test_harness_e2e.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from aclnn_cli.ops import OPS
from aclnn_cli.ops.channels.batch_norm_elemt_kernel import CNT, DY, GI, INV, MEAN, PROMOTED, SDXM, SDY, W, X, kernel
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.tensor.dtypes import lookup

from cann_build import tools_missing
from stub_ctypes import stub  # noqa: F401  (stub: the fixture)
from test_stub_reductions import BF16, F16, F32, zeros

pytestmark = pytest.mark.skipif(tools_missing() is not None, reason=f"stub CANN toolkit: {tools_missing()}")

API = "aclnnBatchNormElemtBackward"
NULLPTR, INVALID = 161001, 161002
ORDER = (DY, X, MEAN, INV, W, SDY, SDXM, CNT, GI)
I32 = np.dtype("int32")


def call(stub, t: dict):
    tensors = {k: None if t[k] is None else stub.tensor(t[k]) for k in ORDER}
    status = stub.call(API, *(tensors[k] for k in ORDER))
    return status, (stub.view(tensors[GI]) if tensors[GI] is not None else None)


def tensors(dy, x, per: dict, counter, dtype=F32, out=None) -> dict:
    dy = np.asarray(dy, dtype)
    return {DY: dy, X: np.asarray(x, dtype), **{k: np.asarray(v, dtype) for k, v in per.items()},
            CNT: np.asarray(counter), GI: zeros(dy.shape, out or dtype)}


def test_known_answer_with_counter_summed_whole(stub):
    """(N, C) = (2, 2), counter [1, 3] (count 4), sumDy [4, -8], sumDyXmu [8, 0], invstd [0.5, 2], weight [2, 1],
    mean [1, 0]. Channel 0: meanDy 1, meanDyXmu 2, factor 0.25 * 2 = 0.5; dy 3, x 5: ((3 - 1) - 4 * 0.5) * 1 = 0; dy 1,
    x -1: ((1 - 1) + 2 * 0.5) * 1 = 1. Channel 1: meanDy -2, meanDyXmu 0; dy 1, 2: (dy + 2) * 2 = 6, 8."""
    per = {MEAN: [1, 0], INV: [0.5, 2], W: [2, 1], SDY: [4, -8], SDXM: [8, 0]}
    status, out = call(stub, tensors([[3, 1], [1, 2]], [[5, 7], [-1, 3]], per, np.array([1, 3], I32)))
    assert status == 0, stub.error()
    np.testing.assert_array_equal(out, [[0, 6], [1, 8]])


def test_float16_everywhere_rounds_the_means(stub):
    """sumDy 1, count 3: with every input float16, meanDy is fl16(fl32(1 / 3)) and gradInput -meanDy; a null weight
    (float32 ones) keeps the float32 quotient, which the float16 output then rounds once."""
    per = {MEAN: [0], INV: [1], W: [1], SDY: [1], SDXM: [0]}
    t = tensors([[0.0]], [[0.0]], per, np.array([1, 2], I32), F16)
    third = np.float32(1) / np.float32(3)
    status, out = call(stub, t)
    assert status == 0 and out.astype(np.float64).item() == -float(np.float16(third)), stub.error()
    status, out = call(stub, {**t, W: None, GI: zeros((1, 1), F32)})
    assert status == 0 and out.item() == -float(third)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("shape, counter", [((3, 4, 50), [7, 9, 11]), ((2, 3, 7, 11), [[2.5, 1.5], [4.0, 1.0]])])
def test_bit_for_bit_the_emulated_kernel(stub, dtype, shape, counter):
    """Random channels, an int32 counter of three and a float 2 x 2 one: the stub equals batch_norm_elemt_kernel.kernel
    on the (k, M, 1) rows (with the float16 path where every input is float16)."""
    rng = np.random.default_rng(len(shape) + np.dtype(dtype).itemsize)
    c = shape[1]
    per = {MEAN: rng.uniform(-1, 1, c), INV: rng.uniform(0.5, 2, c), W: rng.uniform(-2, 2, c),
           SDY: rng.uniform(-30, 30, c), SDXM: rng.uniform(-30, 30, c)}
    counter = np.asarray(counter, I32 if isinstance(counter[0], int) else dtype if dtype != BF16 else F32)
    t = tensors(rng.normal(0, 1, shape), rng.normal(0, 1, shape), per, counter, dtype)
    status, out = call(stub, t)
    assert status == 0, stub.error()
    rows = lambda a: np.moveaxis(a.astype(F32), 1, 0).reshape(c, -1, 1)  # noqa: E731  ((n, s) order)
    blocks = {DY: rows(t[DY]), X: rows(t[X]), **{k: t[k].astype(F32).reshape(c, 1, 1) for k in per},
              CNT: np.broadcast_to(counter.reshape(1, 1, -1), (c, 1, counter.size)),
              **{f"{n}Bits": np.full((c, 1, 1), lookup(np.dtype(t[n].dtype).name).precision) for n in PROMOTED}}
    want = np.moveaxis(kernel(blocks)[GI].reshape(c, shape[0], -1), 0, 1).reshape(shape)
    np.testing.assert_array_equal(out.astype(F32), want.astype(dtype).astype(F32))


# ---------------------------------------------------------------- phase one

def base(dtype=F32, x=(2, 3, 4), c=3, **change) -> dict:
    t = {DY: zeros(x, dtype), X: zeros(x, dtype), **{k: zeros((c,), dtype) for k in (MEAN, INV, W, SDY, SDXM)},
         CNT: np.ones(2, I32), GI: zeros(x, dtype)}
    return {**t, **change}


def contract(product: str, t: dict) -> int:
    descs = {k: TensorDesc(lookup("float32"), (), True) if v is None else TensorDesc(lookup(v.dtype.name), v.shape)
             for k, v in t.items()}
    return check(OPS[API], product, descs).status


F64 = np.dtype("float64")
CASES = [  # (name, tensors, status)
    ("ok", base(), 0), ("ok_float16", base(F16), 0), ("ok_bfloat16", base(BF16), 0),
    *((f"null_{k}", base(**{k: None}), NULLPTR) for k in ORDER if k != W),
    ("null_weight", base(weight=None), 0),
    ("float64", base(F64), INVALID), ("counter_bfloat16", base(counter=zeros((2,), BF16)), INVALID),
    ("counter_float16_2d", base(counter=zeros((2, 2), F16)), 0),
    ("mixed_dtypes", base(gradOut=zeros((2, 3, 4), BF16), mean=zeros((3,), F16)), 0),
    ("one_d", base(x=(6,), c=1), INVALID), ("nine_dims", base(x=(1,) * 8 + (3,)), INVALID),
    ("no_channels", base(x=(2, 0, 4), c=0), INVALID),
    ("grad_out_shape", base(gradOut=zeros((2, 3, 5))), INVALID),
    ("grad_input_shape", base(gradInput=zeros((2, 3, 5))), INVALID),
    *((f"{k}_shape", base(**{k: zeros((4,))}), INVALID) for k in (MEAN, INV, W, SDY, SDXM)),
    ("empty", base(x=(0, 3, 4)), 0),
]


@pytest.mark.parametrize("t, status", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_statuses_are_the_contracts(stub, t, status):
    assert call(stub, t)[0] == status, stub.error()
    assert contract("A2", t) == status  # (the expectation is aclnn-cli's contract too)


@pytest.mark.parametrize("soc, product, dtype, status", [
    ("Ascend950PR_9599", "950", BF16, 0), ("Ascend910_9391", "A3", BF16, 0), ("Ascend910A", "910", F16, 0),
    ("Ascend910A", "910", BF16, INVALID), ("Ascend310P3", None, F32, INVALID),
])
def test_products(stub, monkeypatch, soc, product, dtype, status):
    """bfloat16 on the 950, A3, A2; float32 and float16 on the 910; no other product."""
    monkeypatch.setenv("ACLNN_STUB_SOC", soc)
    t = base(dtype)
    assert call(stub, t)[0] == status, stub.error()
    if product is not None:
        assert contract(product, t) == status
