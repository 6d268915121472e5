"""The stub CANN's aclnnConvTbcBackward (tests/stub_cann/src/ops_conv_tbc.cpp, on conv.cpp) through the public API
(ctypes, stub_ctypes.py): a hand-derived answer, every gradient against the doc's formulas on small integers (every sum
exact, so any order gives it bit for bit) over pads, K = 1 and B = 1 and a transposed view, and phase one's statuses
against aclnn_cli.ops.contract.check. The bundled cases run through the C++ runner in tests/test_harness_e2e.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.tbc.conv_tbc_backward import SPEC
from aclnn_cli.tensor.dtypes import lookup

from cann_build import tools_missing
from stub_ctypes import stub  # noqa: F401  (the fixture)
from test_op_conv_tbc_backward import oracle
from test_stub_reductions import F16, F32, zeros

pytestmark = pytest.mark.skipif(tools_missing() is not None, reason=f"stub CANN toolkit: {tools_missing()}")

API = "aclnnConvTbcBackward"
INPUTS, OUTPUTS = ("self", "input", "weight", "bias"), ("gradInput", "gradWeight", "gradBias")


def call(stub, t: dict, pad: int, math: int = 0):
    """Phase one (and two if it succeeds) with the tensors in `t` (arrays or (storage, shape, strides, offset); None:
    a null pointer). Returns (status, the outputs' views)."""
    tensors = {k: None if v is None else stub.tensor(v) if isinstance(v, np.ndarray) else stub.tensor(*v)
               for k, v in t.items()}
    status = stub.call(API, *(tensors[k] for k in INPUTS), int(pad), int(math), *(tensors[k] for k in OUTPUTS))
    return status, {k: stub.view(tensors[k]) for k in OUTPUTS if status == 0}


def test_known_answer(stub):
    """T = 4, B = 1, one channel, w [1, -1], pad 0, self [1, 2, 3]: gradInput[t] = sum over k of self[t - k] w[k] =
    [1, 2 - 1, 3 - 2, -3], gradWeight[k] = sum over t of x[t + k] self[t] = [1 + 4 + 9, 2 + 6 + 12], gradBias 6."""
    t = {"self": np.array([1, 2, 3], F32).reshape(3, 1, 1), "input": np.array([1, 2, 3, 4], F32).reshape(4, 1, 1),
         "weight": np.array([1, -1], F32).reshape(2, 1, 1), "bias": zeros((1,)), "gradInput": zeros((4, 1, 1)),
         "gradWeight": zeros((2, 1, 1)), "gradBias": zeros((1,))}
    status, out = call(stub, t, 0)
    assert status == 0, stub.error()
    np.testing.assert_array_equal(out["gradInput"].reshape(-1), [1, 1, 1, -3])
    np.testing.assert_array_equal(out["gradWeight"].reshape(-1), [14, 20])
    np.testing.assert_array_equal(out["gradBias"], [6])


GEOMETRIES = {"pad1": ((7, 3, 4), (3, 4, 5), 1), "pad_wide": ((3, 2, 2), (2, 2, 3), 3), "k1": ((6, 3, 5), (1, 5, 4), 0),
              "b1": ((9, 1, 3), (4, 3, 2), 2)}


@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("name", GEOMETRIES)
def test_every_gradient_is_the_formula_on_exact_sums(stub, name, dtype):
    """Integers in [-3, 3]: every product and sum is an integer below 2^11, exact in float16 and float32."""
    x_shape, w_shape, pad = GEOMETRIES[name]
    s_shape = (x_shape[0] + 2 * pad + 1 - w_shape[0], x_shape[1], w_shape[2])
    rng = np.random.default_rng(sum(map(ord, name)))
    s, x, w = (rng.integers(-3, 4, sh).astype(dtype) for sh in (s_shape, x_shape, w_shape))
    want = oracle(*(v.astype(np.float64) for v in (s, x, w)), pad)
    t = {"self": s, "input": x, "weight": w, "bias": zeros(w_shape[2:], dtype), "gradInput": zeros(x_shape, dtype),
         "gradWeight": zeros(w_shape, dtype), "gradBias": zeros(w_shape[2:], dtype)}
    status, out = call(stub, t, pad)
    assert status == 0, stub.error()
    for k in OUTPUTS:
        np.testing.assert_array_equal(out[k].astype(np.float64).reshape(-1), np.array(want[k], np.float64), err_msg=k)


def test_a_transposed_input_view(stub):
    """input a (B, T, C) storage seen as (T, B, C) (strides (C, T C, 1)), gradInput into every other element after
    an offset of 3: the formulas still, bit for bit."""
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, (5, 2, 3)).astype(F32)
    w = rng.integers(-3, 4, (2, 3, 4)).astype(F32)
    s = rng.integers(-3, 4, (6, 2, 4)).astype(F32)
    want = oracle(s.astype(np.float64), x.astype(np.float64), w.astype(np.float64), 1)
    gi = np.full(3 + 2 * x.size, 7, F32)
    t = {"self": s, "input": (np.ascontiguousarray(x.transpose(1, 0, 2)), x.shape, (3, 15, 1), 0), "weight": w,
         "bias": zeros((4,)), "gradInput": (gi, x.shape, (12, 6, 2), 3), "gradWeight": zeros(w.shape),
         "gradBias": zeros((4,))}
    status, out = call(stub, t, 1)
    assert status == 0, stub.error()
    for k in OUTPUTS:
        np.testing.assert_array_equal(out[k].reshape(-1), np.array(want[k], np.float64), err_msg=k)


CALLS = {  # name: (shapes of self, input, weight, bias, gradInput, gradWeight, gradBias; pad; cubeMathType; dtypes)
    "ok": (((6, 2, 4), (6, 2, 3), (3, 3, 4), (4,), (6, 2, 3), (3, 3, 4), (4,)), 1, 0, {}),
    "channels": (((6, 2, 4), (6, 2, 3), (3, 2, 4), (4,), (6, 2, 3), (3, 2, 4), (4,)), 1, 0, {}),
    "bias": (((6, 2, 4), (6, 2, 3), (3, 3, 4), (3,), (6, 2, 3), (3, 3, 4), (3,)), 1, 0, {}),
    "self_size": (((5, 2, 4), (6, 2, 3), (3, 3, 4), (4,), (6, 2, 3), (3, 3, 4), (4,)), 1, 0, {}),
    "pad": (((2, 2, 4), (6, 2, 3), (3, 3, 4), (4,), (6, 2, 3), (3, 3, 4), (4,)), -1, 0, {}),
    "math": (((6, 2, 4), (6, 2, 3), (3, 3, 4), (4,), (6, 2, 3), (3, 3, 4), (4,)), 1, 4, {}),
    "grad_input": (((6, 2, 4), (6, 2, 3), (3, 3, 4), (4,), (6, 2, 2), (3, 3, 4), (4,)), 1, 0, {}),
    "bias_dims": (((6, 2, 4), (6, 2, 3), (3, 3, 4), (1, 4), (6, 2, 3), (3, 3, 4), (4,)), 1, 0, {}),
    "dtypes": (((6, 2, 4), (6, 2, 3), (3, 3, 4), (4,), (6, 2, 3), (3, 3, 4), (4,)), 1, 0, {"self": F32}),
    "null_bias": (((6, 2, 4), (6, 2, 3), (3, 3, 4), None, (6, 2, 3), (3, 3, 4), (4,)), 1, 0, {}),
    "empty_self": (((6, 0, 4), (6, 0, 3), (3, 3, 4), (4,), (6, 0, 3), (3, 3, 4), (4,)), 1, 0, {}),
}


@pytest.mark.parametrize("name", CALLS)
def test_phase_one_is_the_contract(stub, name):
    shapes, pad, math, dtypes = CALLS[name]
    names = INPUTS + OUTPUTS
    arrays = {n: None if sh is None else zeros(sh, dtypes.get(n, F16)) for n, sh in zip(names, shapes)}
    status, _ = call(stub, arrays, pad, math)
    descs = {n: TensorDesc(lookup(np.dtype(a.dtype).name if a is not None else "float16"),
                           a.shape if a is not None else (), null=a is None) for n, a in arrays.items()}
    want = check(SPEC, "950", descs, {"pad": pad, "cubeMathType": math}).status
    assert status == want, (name, status, want, stub.error())
    assert (status == 0) == (name == "ok")
