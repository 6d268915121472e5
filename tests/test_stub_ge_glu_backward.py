"""The stub CANN's aclnnGeGluBackward and aclnnGeGluV3Backward (tests/stub_cann/src/ops_glu.cpp) through the public
API (ctypes, stub_ctypes.py): hand-derived exact answers (gelu'(0) = 1/2 in both forms; the tanh form's g1 = 1 or 0
at B = +-100; the linear side gelu * gradOutput), activateLeft swapping the halves, the float16 kernel's product
rounded to half before gelu', the doc's formulas in float64 through transposed, stride-0 and gapped views within a
float32 bound, and phase one's statuses against aclnn_cli.ops.contract.check (the bundled negative cases among
them).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from aclnn_cli.ops import OPS
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.tensor.dtypes import lookup

from cann_build import tools_missing
from stub_ctypes import stub  # noqa: F401  (stub: the fixture)
from test_stub_reductions import BF16, F16, F32, U, ulp, zeros
from test_stub_swi_glu_grad import soc, widened  # noqa: F401  (soc: a fixture)

pytestmark = pytest.mark.skipif(tools_missing() is not None, reason=f"stub CANN toolkit: {tools_missing()}")

V1, V3 = "aclnnGeGluBackward", "aclnnGeGluV3Backward"
NULLPTR, INVALID = 161001, 161002
NAMES = ("gradOutput", "self", "gelu", "gradInput")


def call(stub, api: str, t: dict, dim: int, approximate: int, left: bool = False) -> int:
    """Phase one (and two if it succeeds) with the four tensors of `t` (arrays or stub tensors; None: a null
    pointer); V1 takes no activateLeft (it must then be False)."""
    dy, x, gelu, out = (None if t[k] is None else t[k] if not isinstance(t[k], np.ndarray) else stub.tensor(t[k])
                        for k in NAMES)
    if api == V1:
        assert not left
        return stub.call(api, dy, x, gelu, dim, approximate, out)
    return stub.call(api, dy, x, gelu, dim, approximate, left, out)


# ---------------------------------------------------------------- known answers

@pytest.mark.parametrize("api, left", [(V1, False), (V3, False), (V3, True)], ids=["v1", "v3", "v3-left"])
def test_known_answers(stub, api, left):
    """self (2, 4) split along dim -1, the gelu'd half [0, 0] and [100, -100]: gelu'(0) = 1/2 (erf: erf(0) = 0,
    x pdf = 0; tanh: g1 = 1/2); tanh at 100: exp(-71510) = 0, g1 = 1, gelu' = 1; at -100: exp(71510) = inf, g1 = 0,
    gelu' = 0. The linear half L: grad = gradOutput * gelu; the gelu'd half: gradOutput * L * gelu'."""
    lin, act = np.array([[3, -2], [0.5, 4]], F32), np.array([[0, 0], [100, -100]], F32)
    x = np.concatenate([act, lin] if left else [lin, act], axis=1)
    dy, gelu = np.array([[2, 0.5], [-4, 3]], F32), np.array([[1.5, -0.25], [8, 0]], F32)
    want_lin = dy * gelu
    for approximate, want_act in ((1, [[3, -0.5], [-2, 0]]), (0, [[3, -0.5], None])):
        out = stub.tensor(np.full((2, 4), 7, F32))
        assert call(stub, api, {"gradOutput": dy, "self": x, "gelu": gelu, "gradInput": out}, -1, approximate,
                    left) == 0, stub.error()
        got = stub.view(out)
        got_lin, got_act = (got[:, 2:], got[:, :2]) if left else (got[:, :2], got[:, 2:])
        np.testing.assert_array_equal(got_lin, want_lin)
        np.testing.assert_array_equal(got_act[0], want_act[0])  # (erf at +-100: cdf 1 - 1e-8 or 1e-8: not exact)


def test_dim_zero_splits_the_first_axis(stub):
    """self (4, 1) along dim 0: A = [6, 100], B = [0, -100] (the gelu'd half), tanh: gelu'(B) = [1/2, 0]."""
    out = stub.tensor(zeros((4, 1)))
    t = {"gradOutput": np.array([[2], [1]], F32), "self": np.array([[6], [100], [0], [-100]], F32),
         "gelu": np.array([[0.5], [3]], F32), "gradInput": out}
    assert call(stub, V1, t, 0, 1) == 0, stub.error()
    assert stub.view(out).reshape(-1).tolist() == [1, 3, 6, 0]


def test_float16_rounds_the_product_to_half_before_gelu_grad(stub, rng):
    """The float16 kernel forms p = L * gradOutput in half: gradInput's gelu'd side is fl16(fl32(fl16(L dy) F)),
    F = fl32(gelu'(B)) (read from the stub itself at L = dy = 1, where p = 1 exactly), not fl16(fl32(L dy) F)."""
    b = rng.uniform(-3, 3, 256).astype(F16)
    ones = np.ones((1, 256), F16)
    unit32 = stub.tensor(zeros((2, 256)))
    assert call(stub, V1, {"gradOutput": ones.astype(F32), "self": np.stack([ones[0], b]).astype(F32),
                           "gelu": ones.astype(F32), "gradInput": unit32}, 0, 0) == 0, stub.error()
    f = stub.view(unit32)[1]
    lin, dy = rng.uniform(-4, 4, (1, 256)).astype(F16), rng.uniform(-4, 4, (1, 256)).astype(F16)
    out = stub.tensor(zeros((2, 256), F16))
    assert call(stub, V1, {"gradOutput": dy, "self": np.stack([lin[0], b]), "gelu": ones, "gradInput": out},
                0, 0) == 0, stub.error()
    exact32 = lin[0].astype(F32) * dy[0].astype(F32)  # exact: two 11-bit significands
    halved = (exact32.astype(F16).astype(F32) * f).astype(F16)
    unhalved = (exact32 * f).astype(F16)
    np.testing.assert_array_equal(stub.view(out)[1], halved)
    assert (halved != unhalved).any()  # the inputs tell the two apart


# ---------------------------------------------------------------- random inputs against float64

K = math.sqrt(2 / math.pi)
erf = np.vectorize(math.erf)


def textbook(lin, act, dy, gelu, approximate: int):
    """The doc's gradients in float64: the linear side dy gelu (one rounding), the gelu'd side dy L gelu'(B): erf
    form Phi(B) + B phi(B), tanh form g + B g (1 - g) 2k (1 + 3c B^2) with g = sigmoid(2k (B + c B^3)). Bounds (in u):
    the linear side 1; the other 40 (|erf| / 2 + 1/2 + |B phi|) or (24 + 3|z|) (g + |B g (1 - g) 2k (1 + 3c B^2)|)
    times |dy L| (z = 2k (B + c B^3), the exponent, whose 3 roundings exp magnifies by |z|): the roundings of the
    kernel's ~20 float32 steps (the erf form's cdf = erf / 2 + 1/2 keeps erf's absolute
    error where it cancels to ~0), and the erf form's rational approximation and clamp at 3.92 (under 1.7e-8 = 0.3 u
    absolute in erf)."""
    p = dy * lin
    if approximate == 0:
        e = erf(act / math.sqrt(2))
        cdf, pdf_x = 0.5 * (1 + e), act * np.exp(-act * act / 2) / math.sqrt(2 * math.pi)
        return dy * gelu, p * (cdf + pdf_x), np.abs(dy * gelu), 40 * np.abs(p) * (np.abs(e) / 2 + 0.5 + np.abs(pdf_x))
    z = 2 * K * (act + 0.044715 * act**3)
    g = 1 / (1 + np.exp(-z))
    rest = act * g * (1 - g) * 2 * K * (1 + 3 * 0.044715 * act**2)
    return dy * gelu, p * (g + rest), np.abs(dy * gelu), (24 + 3 * np.abs(z)) * np.abs(p) * (g + np.abs(rest))


def assert_within(got, exact, bound, dtype):
    got, exact = np.asarray(got, dtype=np.float64), np.asarray(exact, dtype=np.float64)
    tol = 1.01 * U * bound + (0 if dtype == F32 else (2 if dtype == F16 else 1) * ulp(exact, dtype))
    bad = np.abs(got - exact) > tol
    assert not bad.any(), f"{int(bad.sum())} of {bad.size} off: got {got[bad][:5]}, exact {exact[bad][:5]}"


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=str)
@pytest.mark.parametrize("approximate", [0, 1])
@pytest.mark.parametrize("api, left", [(V1, False), (V3, True)], ids=["v1", "v3-left"])
def test_against_float64_through_strided_views(stub, rng, api, left, approximate, dtype):
    """self (5, 6, 7) split along dim -2, read through a transposed view; gradOutput (5, 3, 7) through a stride-0
    first axis; gelu packed; gradInput every second element of a longer storage (its gaps keep their value)."""
    k, r, a0 = 5, 6, 7
    xs = rng.uniform(-6, 6, (a0, r, k)).astype(dtype)  # stored transposed
    dy1 = rng.normal(size=(r // 2, a0)).astype(dtype)
    gelu = rng.uniform(-0.2, 6, (k, r // 2, a0)).astype(dtype)
    out = stub.tensor(np.full(2 * k * r * a0, 5, dtype), shape=(k, r, a0), strides=(2 * r * a0, 2 * a0, 2))
    t = {"gradOutput": stub.tensor(dy1, shape=(k, r // 2, a0), strides=(0, a0, 1)),
         "self": stub.tensor(xs, shape=(k, r, a0), strides=(1, k, k * r)), "gelu": gelu, "gradInput": out}
    assert call(stub, api, t, -2, approximate, left) == 0, stub.error()
    x, dy = widened(xs).transpose(2, 1, 0), np.broadcast_to(widened(dy1), (k, r // 2, a0))
    first, second = x[:, :r // 2], x[:, r // 2:]
    lin, act = (second, first) if left else (first, second)
    e_lin, e_act, b_lin, b_act = textbook(lin, act, dy, widened(gelu), approximate)
    got = stub.view(out)
    got_first, got_second = got[:, :r // 2], got[:, r // 2:]
    got_lin, got_act = (got_second, got_first) if left else (got_first, got_second)
    assert_within(got_lin, e_lin, b_lin, dtype)
    assert_within(got_act, e_act, b_act, dtype)
    assert (stub.storage(out)[1::2] == 5).all()  # nothing written outside the view


def test_the_bound_is_tight_enough_to_catch_a_kernel_slip(rng):
    """The float64 check fails what the op's defects compute: the pdf term dropped, L not multiplied in, the tanh
    form judged as the erf one."""
    lin, act, dy = rng.uniform(-6, 6, 256), rng.uniform(-6, 6, 256), rng.normal(size=256)
    _, e_act, _, b_act = textbook(lin, act, dy, dy, 0)
    cdf = 0.5 * (1 + erf(act / math.sqrt(2)))
    with pytest.raises(AssertionError):
        assert_within((dy * lin * cdf).astype(F32), e_act, b_act, F32)
    with pytest.raises(AssertionError):
        assert_within((e_act / lin).astype(F32), e_act, b_act, F32)
    with pytest.raises(AssertionError):
        assert_within(textbook(lin, act, dy, dy, 1)[1].astype(F32), e_act, b_act, F32)
    assert_within(e_act.astype(F32), e_act, b_act, F32)


@pytest.fixture
def rng():
    return np.random.default_rng(6203)


# ---------------------------------------------------------------- phase one

def tensors(shape=(4, 8), dim=-1, dtype=F32, **change) -> dict:
    """gradOutput, self, gelu, gradInput for self of `shape` split along `dim` (an out-of-range dim: gradOutput
    self's shape)."""
    n = len(shape)
    half = list(shape)
    if -n <= dim < n:
        half[dim] //= 2
    t = {"gradOutput": zeros(half, dtype), "self": zeros(shape, dtype), "gelu": zeros(half, dtype),
         "gradInput": zeros(shape, dtype)}
    return {**t, **change}


def contract(api: str, product: str, t: dict, dim: int, approximate: int, left: bool) -> int:
    descs = {k: TensorDesc(lookup("float32"), (), True) if v is None else TensorDesc(lookup(v.dtype.name), v.shape)
             for k, v in t.items()}
    attrs = {"dim": dim, "approximate": approximate, **({"activateLeft": left} if api == V3 else {})}
    return check(OPS[api], product, descs, attrs).status


CASES = [
    # the bundled suites' negative cases (cases/ge_glu_backward.yaml, ge_glu_v3_backward.yaml)
    ("dim_out_of_range", tensors((4, 6), 2), 2, 1, INVALID),
    ("dim_out_of_range-3", tensors((4, 6), -3), -3, 1, INVALID),
    ("odd_split", tensors((4, 7)), -1, 1, INVALID),
    ("grad_not_half", tensors(gradOutput=zeros((4, 8)), gelu=zeros((4, 8))), -1, 1, INVALID),
    ("gelu_not_grads", tensors(gelu=zeros((4, 8))), -1, 1, INVALID),
    ("approximate_2", tensors(), -1, 2, INVALID), ("approximate_-1", tensors(), -1, -1, INVALID),
    ("dtype_mismatch", tensors(gelu=zeros((4, 4), F16)), -1, 1, INVALID),
    # nulls, in the API's order, before anything else
    ("null_gradOutput", tensors(gradOutput=None, self=zeros((4, 7), np.float64)), -1, 1, NULLPTR),
    ("null_self", tensors(self=None), -1, 1, NULLPTR), ("null_gelu", tensors(gelu=None), -1, 5, NULLPTR),
    ("null_gradInput", tensors(gradInput=None), -1, 1, NULLPTR),
    ("ok", tensors(), -1, 1, 0), ("ok_erf", tensors(), -1, 0, 0), ("ok_dim0", tensors((4, 8), 0), 0, 1, 0),
    ("ok_1d", tensors((2,), 0), 0, 0, 0), ("ok_8d", tensors((1, 2, 1, 1, 1, 1, 1, 2), 1), 1, 1, 0),
    ("empty", tensors((0, 8)), -1, 1, 0),
    ("float64", tensors(dtype=np.float64), -1, 1, INVALID),
    ("out_float16", tensors(gradInput=zeros((4, 8), F16)), -1, 1, INVALID),
    ("out_shape", tensors(gradInput=zeros((8, 4))), -1, 1, INVALID),
    ("grad_wrong_axis_halved", tensors(gradOutput=zeros((2, 8)), gelu=zeros((2, 8))), -1, 1, INVALID),
    ("nine_dims", tensors((1,) * 8 + (2,)), -1, 1, INVALID),
    ("zero_dims", tensors((), 0, gradOutput=zeros(()), gelu=zeros(())), 0, 1, INVALID),
]


@pytest.mark.parametrize("api, left", [(V1, False), (V3, True)], ids=["v1", "v3-left"])
@pytest.mark.parametrize("t, dim, approximate, status", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_statuses_are_the_contracts(stub, soc, api, left, t, dim, approximate, status):
    soc("Ascend950PR_9599")
    assert call(stub, api, t, dim, approximate, left) == status, stub.error()
    assert contract(api, "950", t, dim, approximate, left) == status  # (the expectation is the contract's too)


@pytest.mark.parametrize("name, product, dtype, status", [
    ("Ascend950PR_9599", "950", BF16, 0), ("Ascend910_9391", "A3", BF16, 0), ("Ascend910B1", "A2", BF16, 0),
    ("Ascend310P3", "310P", F16, 0), ("Ascend310P3", "310P", BF16, INVALID),  # the bundled unsupported_dtype
    ("Ascend910A", None, F32, INVALID),  # the doc: not on the 910
])
@pytest.mark.parametrize("api", [V1, V3])
def test_dtypes_per_product(stub, soc, api, name, product, dtype, status):
    soc(name)
    t = tensors(dtype=dtype)
    assert call(stub, api, t, -1, 1) == status, stub.error()
    if product is not None:
        assert contract(api, product, t, -1, 1, False) == status
