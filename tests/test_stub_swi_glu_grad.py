"""The stub CANN's aclnnSwiGluGrad (tests/stub_cann/src/ops_glu.cpp) through the public API (ctypes,
stub_ctypes.py): hand-derived exact answers (A = 0: s = 1/2; A = 96 or 100: exp(-A) + 1 = 1 in float32, s = 1;
A = -200: exp(200) = inf, s = 0), a tie rounded to even in float16, the doc's formula in float64 on random inputs
through transposed, stride-0 and gapped views within a float32 bound, and phase one's statuses against
aclnn_cli.ops.contract.check (the bundled suite's negative cases among them).
"""

from __future__ import annotations

import numpy as np
import pytest

from aclnn_cli.tensor.dtypes import lookup
from aclnn_cli.ops import OPS
from aclnn_cli.ops.contract import TensorDesc, check

from cann_build import tools_missing
from stub_ctypes import stub  # noqa: F401  (stub: the fixture)
from test_stub_reductions import BF16, F16, F32, U, ulp, zeros

pytestmark = pytest.mark.skipif(tools_missing() is not None, reason=f"stub CANN toolkit: {tools_missing()}")

API = "aclnnSwiGluGrad"
NULLPTR, INVALID = 161001, 161002


def call(stub, t: dict, dim: int) -> int:
    """Phase one (and two if it succeeds) with yGrad, x, out from arrays (None: a null pointer)."""
    dy, x, out = (None if t[k] is None else stub.tensor(t[k]) for k in ("yGrad", "x", "out"))
    return stub.call(API, dy, x, dim, out)


# ---------------------------------------------------------------- known answers

def test_known_answer_along_the_first_axis(stub):
    """x (4, 3), dim 0: A = x[:2], B = x[2:]. A = 0: out_A = yGrad B / 2, out_B = 0; A = 100: out_A = yGrad B,
    out_B = 100 yGrad; A = -200: out_A = -199 * (yGrad * 0) * B = 0, out_B = 0."""
    a = np.array([[0, 100, -200], [0, 100, 0]], F32)
    b = np.array([[3, -2, 5], [0.5, 4, -1]], F32)
    dy = np.array([[2, 0.5, 1], [-4, 3, 8]], F32)
    out = stub.tensor(np.full((4, 3), 7, F32))
    assert stub.call(API, stub.tensor(dy), stub.tensor(np.concatenate([a, b])), 0, out) == 0, stub.error()
    np.testing.assert_array_equal(stub.view(out), [[3, -1, 0], [-1, 12, -4], [0, 50, 0], [0, 300, 0]])


def test_known_answer_along_the_last_axis_with_a_negative_dim(stub):
    """x (2, 2, 4), dim -1: A = x[..., :2], B = x[..., 2:]; every A is 0 or 100."""
    x = np.array([[[0, 100, 6, -3], [100, 100, 2, 0.25]], [[0, 0, 1, 1], [100, 0, -8, 3]]], F32)
    dy = np.array([[[1, 2], [0.5, -1]], [[4, -2], [3, 1]]], F32)
    out = stub.tensor(zeros((2, 2, 4)))
    assert stub.call(API, stub.tensor(dy), stub.tensor(x), -1, out) == 0, stub.error()
    want_a = [[[3, -6], [1, -0.25]], [[2, -1], [-24, 1.5]]]
    want_b = [[[0, 200], [50, -100]], [[0, 0], [300, 0]]]
    np.testing.assert_array_equal(stub.view(out), np.concatenate([want_a, want_b], axis=-1))


def test_float16_rounds_once_to_nearest_even(stub):
    """A = 96, yGrad = 1 + 3 * 2^-10: out_B = 96.28125 in float32, a tie between 96.25 (even) and 96.3125 in
    float16: RINT gives 96.25 (ties away from zero would give 96.3125). out_A = yGrad * B = 2.005859375 exactly."""
    x = np.array([96, 2], F16)
    out = stub.tensor(zeros(2, F16))
    assert stub.call(API, stub.tensor(np.array([1 + 3 * 2**-10], F16)), stub.tensor(x), 0, out) == 0, stub.error()
    assert stub.view(out).tolist() == [2.005859375, 96.25]


# ---------------------------------------------------------------- random inputs against float64

def textbook(a, b, dy):
    """The doc's formula in float64, with what bounds the 950's float32 order: out_A's error is within
    u (4|A| + 7|f|) |yGrad s B| (f = 1 + A(1 - s)), out_B's within 5u |yGrad s A|."""
    s = 1 / (1 + np.exp(-a))
    f = 1 + a * (1 - s)
    out_a, out_b = dy * (s + s * (1 - s) * a) * b, dy * s * a
    return out_a, out_b, np.abs(dy * s * b) * (4 * np.abs(a) + 7 * np.abs(f)), 5 * np.abs(dy * s * a)


def assert_within(got, exact, bound, dtype):
    got, exact = np.asarray(got, dtype=np.float64), np.asarray(exact, dtype=np.float64)
    tol = 1.01 * U * bound + (ulp(exact, dtype) if dtype != F32 else 0)
    bad = np.abs(got - exact) > tol
    assert not bad.any(), f"{int(bad.sum())} of {bad.size} off: got {got[bad][:5]}, exact {exact[bad][:5]}"


def widened(a):
    return np.asarray(a, dtype=np.float64)


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=str)
def test_against_float64_through_strided_views(stub, rng, dtype):
    """x (5, 6, 7) split along dim -2 (A1 = 5, R = 6, A0 = 7), read through a transposed view; yGrad (5, 3, 7)
    through a stride-0 first axis (one block repeated); out every second element of a longer storage, whose
    gaps must keep their value."""
    k, r, a0 = 5, 6, 7
    x = rng.uniform(-12, 12, (a0, r, k)).astype(dtype)  # stored transposed: the view reads it as (k, r, a0)
    dy1 = rng.normal(size=(r // 2, a0)).astype(dtype)
    storage = np.full(2 * k * r * a0, 5, dtype)
    out = stub.tensor(storage, shape=(k, r, a0), strides=(2 * r * a0, 2 * a0, 2))
    tx = stub.tensor(x, shape=(k, r, a0), strides=(1, k, k * r))
    tdy = stub.tensor(dy1, shape=(k, r // 2, a0), strides=(0, a0, 1))
    assert stub.call(API, tdy, tx, -2, out) == 0, stub.error()
    X, D = widened(x).transpose(2, 1, 0), np.broadcast_to(widened(dy1), (k, r // 2, a0))
    out_a, out_b, bound_a, bound_b = textbook(X[:, :r // 2], X[:, r // 2:], D)
    got = stub.view(out)
    assert_within(got[:, :r // 2], out_a, bound_a, dtype)
    assert_within(got[:, r // 2:], out_b, bound_b, dtype)
    assert (stub.storage(out)[1::2] == 5).all()  # nothing written outside the view


def test_the_bound_is_tight_enough_to_catch_a_kernel_slip(rng):
    """The float64 check fails the bundled defects a stub could have (out_B without A, the halves swapped)."""
    a, b, dy = rng.uniform(-8, 8, 64), rng.uniform(-8, 8, 64), rng.normal(size=64)
    out_a, out_b, bound_a, bound_b = textbook(a, b, dy)
    with pytest.raises(AssertionError):
        assert_within((dy / (1 + np.exp(-a))).astype(F32), out_b, bound_b, F32)
    with pytest.raises(AssertionError):
        assert_within(textbook(b, a, dy)[0].astype(F32), out_a, bound_a, F32)


@pytest.fixture
def rng():
    return np.random.default_rng(2701)


# ---------------------------------------------------------------- phase one

@pytest.fixture
def soc(monkeypatch):
    return lambda name: monkeypatch.setenv("ACLNN_STUB_SOC", name)


def tensors(shape=(4, 8), dim=-1, dtype=F32, **change) -> dict:
    """yGrad, x, out for x of `shape` split along `dim` (an out-of-range dim: yGrad x's shape)."""
    n = len(shape)
    half = list(shape)
    if -n <= dim < n:
        half[dim] //= 2
    t = {"yGrad": zeros(half, dtype), "x": zeros(shape, dtype), "out": zeros(shape, dtype)}
    return {**t, **change}


def contract(product: str, t: dict, dim: int) -> int:
    descs = {k: TensorDesc(lookup("float32"), (), True) if v is None else TensorDesc(lookup(v.dtype.name), v.shape)
             for k, v in t.items()}
    return check(OPS[API], product, descs, {"dim": dim}).status


CASES = [
    # the bundled suite's negative cases (cases/swi_glu_grad.yaml)
    ("dim_out_of_range", tensors((4, 6), 2), 2, INVALID), ("dim_out_of_range-3", tensors((4, 6), -3), -3, INVALID),
    ("odd_split", tensors((4, 7)), -1, INVALID), ("ygrad_not_half", tensors(yGrad=zeros((4, 8))), -1, INVALID),
    ("dtype_mismatch", tensors(yGrad=zeros((4, 4), F16)), -1, INVALID),
    # nulls, in the API's order, before anything else
    ("null_yGrad", tensors(yGrad=None, x=zeros((4, 7), np.float64)), -1, NULLPTR),
    ("null_x", tensors(x=None), -1, NULLPTR), ("null_out", tensors(out=None), -1, NULLPTR),
    ("ok", tensors(), -1, 0), ("ok_dim0", tensors((4, 8), 0), 0, 0), ("ok_1d", tensors((2,), 0), 0, 0),
    ("ok_8d", tensors((1, 2, 1, 1, 1, 1, 1, 2), 1), 1, 0), ("empty", tensors((0, 8)), -1, 0),
    ("float64", tensors(dtype=np.float64), -1, INVALID), ("out_float16", tensors(out=zeros((4, 8), F16)), -1, INVALID),
    ("out_shape", tensors(out=zeros((8, 4))), -1, INVALID), ("out_halved", tensors(out=zeros((4, 4))), -1, INVALID),
    ("ygrad_wrong_axis_halved", tensors(yGrad=zeros((2, 8))), -1, INVALID),
    ("nine_dims", tensors((1,) * 8 + (2,)), -1, INVALID), ("zero_dims", tensors((), 0, yGrad=zeros(())), 0, INVALID),
]


@pytest.mark.parametrize("t, dim, status", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_statuses_are_the_contracts(stub, soc, t, dim, status):
    soc("Ascend950PR_9599")
    assert call(stub, t, dim) == status, stub.error()
    assert contract("950", t, dim) == status  # (the expectation is aclnn-cli's contract too)


@pytest.mark.parametrize("name, product, dtype, status", [
    ("Ascend950PR_9599", "950", BF16, 0), ("Ascend910_9391", "A3", BF16, 0), ("Ascend910B1", "A2", BF16, 0),
    ("Ascend310P3", "310P", F16, 0), ("Ascend310P3", "310P", BF16, INVALID),  # the bundled unsupported_dtype
    ("Ascend910A", None, F32, INVALID),  # the doc: not on the 910
])
def test_dtypes_per_product(stub, soc, name, product, dtype, status):
    soc(name)
    t = tensors(dtype=dtype)
    assert call(stub, t, -1) == status, stub.error()
    if product is not None:
        assert contract(product, t, -1) == status
