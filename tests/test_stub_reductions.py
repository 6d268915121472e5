"""The stub CANN's six reduction/norm/loss kernels (tests/stub_cann/src/ops_{softmax,loss,norm}.cpp) and
BatchNormBackward's (ops_batchnorm.cpp) through the public API (ctypes, stub_ctypes.py), against independent
oracles: hand-derived exact answers on dyadic inputs, and float64 NumPy formulas on random rows within a
float32-accumulation bound |stub - exact| <= (log2 R + c) * 2^-24 * scale (+ one ulp of a 16-bit output); plus
phase one's statuses.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from cann_build import tools_missing
from stub_ctypes import Handle, stub  # noqa: F401  (stub: the fixture)

pytestmark = pytest.mark.skipif(tools_missing() is not None, reason=f"stub CANN toolkit: {tools_missing()}")

F32, F16, BF16 = np.dtype("float32"), np.dtype("float16"), np.dtype(ml_dtypes.bfloat16)
U = 2.0**-24


def zeros(shape, dtype=F32):
    return np.zeros(shape, dtype=dtype)


def ulp(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """One ulp of `dtype` at |x| (its subnormal spacing below the normal range)."""
    info = ml_dtypes.finfo(dtype) if dtype == BF16 else np.finfo(dtype)
    e = np.floor(np.log2(np.maximum(np.abs(x), float(info.tiny))))
    return 2.0 ** (e - (info.nmant))


def assert_close(got, exact, scale, terms: float, dtype: np.dtype) -> None:
    got, exact = np.asarray(got, dtype=np.float64), np.asarray(exact, dtype=np.float64)
    tol = (math.log2(max(terms, 2)) + 6) * U * np.asarray(scale, dtype=np.float64)
    if dtype != F32:
        tol = tol + ulp(exact, dtype)
    bad = np.abs(got - exact) > tol
    assert not bad.any(), f"{int(bad.sum())} of {bad.size} off: got {got[bad][:5]}, exact {exact[bad][:5]}"


# ---------------------------------------------------------------- known answers (exact in float32)

def test_softmax_backward_known_answer(stub):
    y, dy = stub.tensor(np.array([0.25, 0.5, 0.25], F32)), stub.tensor(np.array([1, 2, 3], F32))
    out = stub.tensor(zeros(3))
    assert stub.call("aclnnSoftmaxBackward", dy, y, 0, out) == 0
    np.testing.assert_array_equal(stub.view(out), [-0.25, 0, 0.25])  # p - y*S, S = 2


def test_log_softmax_backward_known_answer(stub):
    y, dy = stub.tensor(np.zeros((2, 2), F32)), stub.tensor(np.array([[1, 3], [2, -2]], F32))
    out = stub.tensor(zeros((2, 2)))
    assert stub.call("aclnnLogSoftmaxBackward", dy, y, -1, out) == 0
    np.testing.assert_array_equal(stub.view(out), [[-3, -1], [2, -2]])  # dy - e^0 * sum(dy)


@pytest.mark.parametrize("reduction, expected", [(0, [4, -4]), (1, [2, -2]), (2, [4, -4])])
def test_mse_loss_backward_known_answer(stub, reduction, expected):
    dy, x, y = (stub.tensor(np.array(v, F32)) for v in ([1, 2], [3, 1], [1, 2]))
    out = stub.tensor(zeros(2))
    assert stub.call("aclnnMseLossBackward", dy, x, y, reduction, out) == 0
    np.testing.assert_array_equal(stub.view(out), expected)  # 2*(x-y)*dy, mean: / numel(self) = 2


def test_mse_loss_backward_broadcasts_and_divides_by_numel_of_self(stub):
    dy = stub.tensor(np.array(0.5, F32))  # a 0-d gradOutput
    x, y = stub.tensor(np.array([[3.0], [1.0]], F32)), stub.tensor(np.array([1, 2, 3, 5], F32))
    out = stub.tensor(zeros((2, 4)))
    assert stub.call("aclnnMseLossBackward", dy, x, y, 1, out) == 0  # N = numel(self) = 2, not 8: cof = 1
    np.testing.assert_array_equal(stub.view(out), 0.5 * (np.array([[3.0], [1.0]]) - [1, 2, 3, 5]))


@pytest.mark.parametrize("reduction, expected", [(0, {(0, 1): -2, (2, 3): -12}), (2, {(0, 1): -4, (2, 3): -8}),
                                                 (1, {(0, 1): -1, (2, 3): -2})])
def test_nll_loss_backward_known_answer(stub, reduction, expected):
    grads = {0: [1, 2, 3], 1: [2], 2: [2]}[reduction]
    g = stub.tensor(np.array(grads, F32))
    self_ = stub.tensor(np.full((3, 4), 7, F32))
    target = stub.tensor(np.array([1, -100, 3], np.int64))
    w, tw = stub.tensor(np.array([1, 2, 3, 4], F32)), stub.tensor(np.array([4], F32))
    out = stub.tensor(np.full((3, 4), 9, F32))  # every element is written: zero-fill
    assert stub.call("aclnnNLLLossBackward", g, self_, target, w, reduction, -100, tw, out) == 0
    want = np.zeros((3, 4))
    for at, v in expected.items():
        want[at] = v
    np.testing.assert_array_equal(stub.view(out), want)


@pytest.mark.parametrize("tdtype", [np.int32, np.uint8])
def test_nll_loss_backward_target_dtypes_and_ignore_index(stub, tdtype):
    """A uint8 target never equals a negative ignoreIndex (255 is a class here); int32 compares as int64."""
    g = stub.tensor(np.array([1], F32))
    target = np.array([255, 0], tdtype) if tdtype == np.uint8 else np.array([-1, 0], tdtype)
    classes = 256
    w = stub.tensor(np.arange(1, classes + 1, dtype=F32))
    out = stub.tensor(zeros((2, classes)))
    status = stub.call("aclnnNLLLossBackward", g, stub.tensor(zeros((2, classes))), stub.tensor(target), w, 2, -1,
                       stub.tensor(np.array([1], F32)), out)
    assert status == 0
    got = stub.view(out)
    assert got[1, 0] == -1 and np.count_nonzero(got[1]) == 1
    if tdtype == np.uint8:
        assert got[0, 255] == -256 and np.count_nonzero(got[0]) == 1
    else:
        assert not got[0].any()  # -1 is ignoreIndex


def test_rms_norm_grad_known_answer(stub):
    dy, x = stub.tensor(np.array([[1, 2], [4, 0]], F32)), stub.tensor(np.array([[1, 1], [2, 2]], F32))
    rstd, gamma = stub.tensor(np.array([0.5, 0.25], F32)), stub.tensor(np.array([1, 1], F32))
    dx, dg = stub.tensor(zeros((2, 2))), stub.tensor(zeros(2))
    assert stub.call("aclnnRmsNormGrad", dy, x, rstd, gamma, dx, dg) == 0
    # row 0: a = [1, 2], b = x*r = [.5, .5], m = (.5 + 1)/2 = .75, dx = (a - b*m)*r
    # row 1: a = [4, 0], b = [.5, .5], m = 2/2 = 1, dx = ([4, 0] - .5)*.25
    np.testing.assert_array_equal(stub.view(dx), [[0.3125, 0.8125], [0.875, -0.125]])
    np.testing.assert_array_equal(stub.view(dg), [0.5 + 2, 1 + 0])  # sum over rows of dy*x*r


def layer_norm_args(stub, rows=2, weight=True):
    x = np.tile(np.array([0, 1, 2, 5], F32), (rows, 1))
    dy = np.tile(np.array([1, 2, 3, 4], F32), (rows, 1))
    return dict(dy=stub.tensor(dy), x=stub.tensor(x), norm=Handle(stub.int_array([4])),
                mean=stub.tensor(np.full((rows, 1), 2, F32)), rstd=stub.tensor(np.full((rows, 1), 0.5, F32)),
                weight=stub.tensor(np.ones(4, F32)) if weight else None)


def call_layer_norm(stub, a, mask, outs):
    return stub.call("aclnnLayerNormBackward", a["dy"], a["x"], a["norm"], a["mean"], a["rstd"], a["weight"], None,
                     Handle(stub.bool_array(mask)), *outs)


@pytest.mark.parametrize("weight", [True, False])
def test_layer_norm_backward_known_answer(stub, weight):
    """xh = [-1, -.5, 0, 1.5], a = dy = [1, 2, 3, 4]; s1 = 10, s2 = 4; dx = ((4a - 10) - 4 xh) / 4 * .5.
    A null weight is ones (the op_api fills it)."""
    a = layer_norm_args(stub, weight=weight)
    outs = [stub.tensor(zeros((2, 4))), stub.tensor(zeros(4)), stub.tensor(zeros(4))]
    assert call_layer_norm(stub, a, [True, True, True], outs) == 0
    np.testing.assert_array_equal(stub.view(outs[0]), [[-0.25, 0, 0.25, 0]] * 2)
    np.testing.assert_array_equal(stub.view(outs[1]), [-2, -2, 0, 12])
    np.testing.assert_array_equal(stub.view(outs[2]), [2, 4, 6, 8])


def test_layer_norm_backward_output_mask(stub):
    """An output switched off may be null and is never written; all off: success, nothing written."""
    a = layer_norm_args(stub)
    dw = stub.tensor(np.full(4, 7, F32))
    assert call_layer_norm(stub, a, [False, True, False], [None, dw, None]) == 0
    np.testing.assert_array_equal(stub.view(dw), [-2, -2, 0, 12])
    kept = [stub.tensor(np.full((2, 4), 7, F32)), stub.tensor(np.full(4, 7, F32)), stub.tensor(np.full(4, 7, F32))]
    assert call_layer_norm(stub, a, [False, False, False], kept) == 0
    assert all((stub.view(t) == 7).all() for t in kept)


# (2, 2, 2): channel 0 holds x = [0, 1, 2, 5], dy = [1, 2, 3, 4] in (n, s) order, channel 1 x = [1, 1, 3, 3],
# dy = [1, -1, 2, 0]; element (n, c, s) at (n * 2 + c) * 2 + s.
BN_X = np.array([0, 1, 1, 1, 2, 5, 3, 3], F32).reshape(2, 2, 2)
BN_DY = np.array([1, 2, 1, -1, 3, 4, 2, 0], F32).reshape(2, 2, 2)


def call_batch_norm(stub, stats, training, eps, mask=(True, True, True), weight=(1, 2), outs=None):
    """stats: runningMean, runningVar, saveMean, saveInvstd (None: a null pointer); returns (status, outputs)."""
    outs = outs if outs is not None else [stub.tensor(np.full(s, 7, F32)) for s in ((2, 2, 2), (2,), (2,))]
    tensors = [None if v is None else stub.tensor(np.array(v, F32)) for v in (weight, *stats)]
    status = stub.call("aclnnBatchNormBackward", stub.tensor(BN_DY), stub.tensor(BN_X), *tensors, training, eps,
                       Handle(stub.bool_array(list(mask))), *outs)
    return status, outs


@pytest.mark.parametrize("training, eps, stats, dx, dw", [
    # training: h = (x - 2) * [0.5, 1]; dgamma = sum dy h = [4, 2], dbeta = [10, 2];
    # dx = rstd * g * (dy - (h * dgamma + dbeta) / 4); the running statistics are not read
    (True, 1e-5, ([9, 9], [-1, -1], [2, 2], [0.5, 1]), [-0.25, 0, 2, -2, 0.25, 0, 2, -2], [4, 2]),
    # null saveMean (0) and saveInvstd (1): h = x
    (True, 1e-5, (None, None, None, None), [-1.5, -7.5, -2, -6, -13.5, -33.5, -6, -10], [28, 6]),
    # inference: invstd = 1 / sqrt(runningVar + eps) = [1, 0.5] with eps = 0.25; dx = dy g invstd,
    # gradWeight = sum dy (x - runningMean) invstd
    (False, 0.25, ([2, 2], [0.75, 3.75], [9, 9], [9, 9]), [1, 2, 1, -1, 3, 4, 2, 0], [8, 1]),
    # null runningMean (0) and runningVar (1): invstd = 1 / sqrt(1 + 3) = 0.5
    (False, 3.0, (None, None, None, None), [0.5, 1, 1, -1, 1.5, 2, 2, 0], [14, 3]),
], ids=["training", "training-null-stats", "inference", "inference-null-stats"])
def test_batch_norm_backward_known_answer(stub, training, eps, stats, dx, dw):
    status, outs = call_batch_norm(stub, stats, training, eps)
    assert status == 0, stub.error()
    np.testing.assert_array_equal(stub.view(outs[0]).reshape(-1), dx)
    np.testing.assert_array_equal(stub.view(outs[1]), dw)
    np.testing.assert_array_equal(stub.view(outs[2]), [10, 2])


@pytest.mark.parametrize("scale, row1", [(False, [6, 8]), (True, [3, 4])])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_embedding_dense_backward_known_answer(stub, scale, row1, index_dtype):
    """Rows 0 and 2 both index 1 (summed, halved with scaleGradByFreq); row 3 indexes paddingIdx 3: zero."""
    out = stub.tensor(np.full((4, 2), 7, F32))
    grad = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], F32)
    status = stub.call("aclnnEmbeddingDenseBackward", stub.tensor(grad), stub.tensor(np.array([1, 0, 1, 3], index_dtype)),
                       4, 3, scale, out)
    assert status == 0, stub.error()
    np.testing.assert_array_equal(stub.view(out), [[3, 4], row1, [0, 0], [0, 0]])


def test_embedding_dense_backward_empty_and_statuses(stub):
    """An empty grad zero-fills out; indices not one per row, or out not (numWeights, D), is 161002."""
    out = stub.tensor(np.full((3, 2), 7, F32))
    assert stub.call("aclnnEmbeddingDenseBackward", stub.tensor(np.zeros((0, 2), F32)),
                     stub.tensor(np.zeros(0, np.int64)), 3, -1, False, out) == 0
    assert stub.view(out).tolist() == [[0, 0]] * 3
    grad, index = stub.tensor(np.ones((4, 2), F32)), stub.tensor(np.zeros(3, np.int64))
    assert stub.call("aclnnEmbeddingDenseBackward", grad, index, 3, -1, False, out) == 161002
    assert stub.call("aclnnEmbeddingDenseBackward", grad, stub.tensor(np.zeros(4, np.int64)), 4, -1, False, out) == 161002


def test_batch_norm_backward_output_mask_and_null_weight(stub):
    """A null weight is ones; a masked-off output (null or not) is never written; all off: nothing written."""
    stats = (None, None, [2, 2], [0.5, 1])
    gw = stub.tensor(np.full(2, 7, F32))
    status, _ = call_batch_norm(stub, stats, True, 1e-5, (False, True, False), None, [None, gw, None])
    assert status == 0 and stub.view(gw).tolist() == [4, 2]
    kept = [stub.tensor(np.full(s, 7, F32)) for s in ((2, 2, 2), (2,), (2,))]
    assert call_batch_norm(stub, stats, True, 1e-5, (False, False, False), outs=kept)[0] == 0
    assert all((stub.view(t) == 7).all() for t in kept)


# ---------------------------------------------------------------- random rows against float64

def as_dtype(a: np.ndarray, dtype) -> np.ndarray:
    return a.astype(np.float64).astype(dtype)


def widened(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64)


@pytest.fixture
def rng():
    return np.random.default_rng(19)


DTYPES = [F32, F16, BF16]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_backward_against_float64(stub, rng, dtype, dim):
    shape = (3, 300, 5)
    logits = rng.normal(size=shape)
    y = as_dtype(np.exp(logits) / np.exp(logits).sum(axis=dim, keepdims=True), dtype)
    dy = as_dtype(rng.normal(size=shape), dtype)
    out = stub.tensor(zeros(shape, dtype))
    assert stub.call("aclnnSoftmaxBackward", stub.tensor(dy), stub.tensor(y), dim, out) == 0
    Y, G = widened(y), widened(dy)
    p = Y * G
    exact = p - Y * p.sum(axis=dim, keepdims=True)
    scale = np.abs(Y) * (np.abs(G) + np.abs(p).sum(axis=dim, keepdims=True))
    assert_close(stub.view(out), exact, scale, shape[dim], dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_log_softmax_backward_against_float64_on_a_strided_view(stub, rng, dtype):
    """Reduced along dim 0 of a transposed view (strides (1, 7)): the stub reads through the view."""
    base = rng.normal(size=(7, 400))
    y = as_dtype(base - np.log(np.exp(base).sum(axis=1, keepdims=True)), dtype)  # log-softmax rows of the storage
    dy = as_dtype(rng.normal(size=(7, 400)), dtype)
    out = stub.tensor(zeros((400, 7), dtype))
    ty = stub.tensor(y, shape=(400, 7), strides=(1, 400))
    tdy = stub.tensor(dy, shape=(400, 7), strides=(1, 400))
    assert stub.call("aclnnLogSoftmaxBackward", tdy, ty, 1, out) == 0
    Y, G = widened(y).T, widened(dy).T
    exact = G - np.exp(Y) * G.sum(axis=1, keepdims=True)
    scale = np.abs(G) + np.exp(Y) * np.abs(G).sum(axis=1, keepdims=True)
    assert_close(stub.view(out), exact, scale, 7, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_mse_loss_backward_against_float64(stub, rng, dtype, reduction):
    dy = as_dtype(rng.normal(size=(1, 37)), dtype)
    x, y = as_dtype(rng.uniform(-100, 100, (300, 37)), dtype), as_dtype(rng.uniform(-100, 100, (300, 1)), dtype)
    out = stub.tensor(zeros((300, 37), dtype))
    assert stub.call("aclnnMseLossBackward", stub.tensor(dy), stub.tensor(x), stub.tensor(y), reduction, out) == 0
    cof = 2.0 / x.size if reduction == 1 else 2.0
    exact = widened(dy) * (widened(x) - widened(y)) * cof
    scale = np.abs(widened(dy)) * (np.abs(widened(x)) + np.abs(widened(y))) * cof
    assert_close(stub.view(out), exact, scale, 2, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_nll_loss_backward_against_float64(stub, rng, dtype, reduction):
    n, c = 50, 33
    target = rng.integers(0, c, n).astype(np.int64)
    target[::7] = -100
    g = as_dtype(rng.normal(size=n if reduction == 0 else 1), dtype)
    w, tw = as_dtype(rng.uniform(-2, 2, c), dtype), as_dtype(np.array([37.5]), dtype)
    out = stub.tensor(zeros((n, c), dtype))
    args = (stub.tensor(g), stub.tensor(zeros((n, c), dtype)), stub.tensor(target), stub.tensor(w), reduction, -100,
            stub.tensor(tw), out)
    assert stub.call("aclnnNLLLossBackward", *args) == 0
    exact = np.zeros((n, c))
    for i, t in enumerate(target):
        if t != -100:
            gi = widened(g)[i] if reduction == 0 else widened(g)[0]
            exact[i, t] = -gi * widened(w)[t] / (widened(tw)[0] if reduction == 1 else 1)
    assert_close(stub.view(out), exact, np.abs(exact), 2, dtype)


@pytest.mark.parametrize("dtype, gamma_dtype", [(F32, F32), (F16, F32), (F16, F16), (BF16, F32), (BF16, BF16)], ids=str)
def test_rms_norm_grad_against_float64(stub, rng, dtype, gamma_dtype):
    rows, cols = 6, 500
    x = as_dtype(rng.normal(size=(2, 3, cols)), dtype)
    r = as_dtype(1 / np.sqrt((widened(x) ** 2).mean(axis=-1)), F32)  # (2, 3): leading dims of x
    dy, g = as_dtype(rng.normal(size=(2, 3, cols)), dtype), as_dtype(rng.normal(size=cols), gamma_dtype)
    dx, dg = stub.tensor(zeros((2, 3, cols), dtype)), stub.tensor(zeros(cols))
    assert stub.call("aclnnRmsNormGrad", stub.tensor(dy), stub.tensor(x), stub.tensor(r), stub.tensor(g), dx, dg) == 0
    X, D, G, R = widened(x).reshape(rows, cols), widened(dy).reshape(rows, cols), widened(g), widened(r).reshape(rows, 1)
    terms = D * G * X * R
    exact = (D * G - X * R * terms.mean(axis=1, keepdims=True)) * R
    scale = np.abs(R) * (np.abs(D * G) + np.abs(X * R) * np.abs(terms).mean(axis=1, keepdims=True))
    assert_close(stub.view(dx).reshape(rows, cols), exact, scale, cols, dtype)
    assert_close(stub.view(dg), (D * X * R).sum(axis=0), np.abs(D * X * R).sum(axis=0), rows, F32)


@pytest.mark.parametrize("dtype, weight_dtype", [(F32, F32), (F16, F32), (BF16, BF16), (F16, None)], ids=str)
def test_layer_norm_backward_against_float64(stub, rng, dtype, weight_dtype):
    m, shape = 12, (3, 4, 10, 30)  # normalizedShape (10, 30): N = 300
    x = as_dtype(rng.normal(2, 3, shape), dtype)
    X = widened(x).reshape(m, 300)
    mean = as_dtype(X.mean(axis=1).reshape(3, 4, 1, 1), F32)
    rstd = as_dtype((1 / X.std(axis=1)).reshape(3, 4, 1, 1), F32)
    dy = as_dtype(rng.normal(size=shape), dtype)
    w = None if weight_dtype is None else as_dtype(rng.normal(size=(10, 30)), weight_dtype)
    outs = [stub.tensor(zeros(shape, dtype)), stub.tensor(zeros((10, 30))), stub.tensor(zeros((10, 30)))]
    args = [stub.tensor(dy), stub.tensor(x), Handle(stub.int_array([10, 30])), stub.tensor(mean), stub.tensor(rstd),
            None if w is None else stub.tensor(w), None, Handle(stub.bool_array([True, True, True])), *outs]
    assert stub.call("aclnnLayerNormBackward", *args) == 0
    D, M, R = widened(dy).reshape(m, 300), widened(mean).reshape(m, 1), widened(rstd).reshape(m, 1)
    G = np.ones(300) if w is None else widened(w).reshape(300)
    xh, a = (X - M) * R, D * G
    s1, s2 = a.sum(axis=1, keepdims=True), (xh * a).sum(axis=1, keepdims=True)
    exact = (a * 300 - s1 - xh * s2) / 300 * R
    scale = np.abs(R) / 300 * (300 * np.abs(a) + np.abs(a).sum(axis=1, keepdims=True)
                                + np.abs(xh) * np.abs(xh * a).sum(axis=1, keepdims=True))
    assert_close(stub.view(outs[0]).reshape(m, 300), exact, scale, 300, dtype)
    assert_close(stub.view(outs[1]).reshape(300), (xh * D).sum(axis=0), np.abs(xh * D).sum(axis=0), m, F32)
    assert_close(stub.view(outs[2]).reshape(300), D.sum(axis=0), np.abs(D).sum(axis=0), m, F32)


@pytest.mark.parametrize("training", [True, False], ids=["training", "inference"])
@pytest.mark.parametrize("dtype, stats_dtype", [(F32, F32), (F16, F32), (F16, F16), (BF16, F32), (BF16, BF16)], ids=str)
def test_batch_norm_backward_against_float64(stub, rng, training, dtype, stats_dtype):
    """(N, C, H, W) = (6, 5, 7, 9), M = 378 per channel; input read through a transposed view (strides (1, ...)),
    gradOut through a stride-0 N axis (one sample repeated)."""
    n, c, h, w = 6, 5, 7, 9
    shape, m = (n, c, h, w), n * h * w
    x = as_dtype(rng.normal(1, 2, (w, h, c, n)), dtype)  # stored transposed: the view reads it as (n, c, h, w)
    dy1 = as_dtype(rng.normal(size=(c, h, w)), dtype)
    g, mean = as_dtype(rng.uniform(-2, 2, c), stats_dtype), as_dtype(rng.uniform(-0.5, 0.5, c), stats_dtype)
    var = as_dtype(rng.uniform(0.25, 4, c), stats_dtype)
    rstd = as_dtype(rng.uniform(0.5, 2, c), stats_dtype)
    eps = 1e-3
    outs = [stub.tensor(zeros(shape, dtype)), stub.tensor(zeros(c, stats_dtype)), stub.tensor(zeros(c, stats_dtype))]
    tx = stub.tensor(x, shape=shape, strides=(1, n, n * c, n * c * h))
    tdy = stub.tensor(dy1, shape=shape, strides=(0, h * w, w, 1))
    args = [tdy, tx, stub.tensor(g), stub.tensor(mean), stub.tensor(var), stub.tensor(mean), stub.tensor(rstd),
            training, eps, Handle(stub.bool_array([True, True, True])), *outs]
    assert stub.call("aclnnBatchNormBackward", *args) == 0, stub.error()
    X = widened(x).transpose(3, 2, 1, 0).transpose(1, 0, 2, 3).reshape(c, m)  # channel-major, (n, s) order
    D = np.broadcast_to(widened(dy1)[None], shape).transpose(1, 0, 2, 3).reshape(c, m)
    G, MU = widened(g).reshape(c, 1), widened(mean).reshape(c, 1)
    if training:
        R = widened(rstd).reshape(c, 1)
        H = (X - MU) * R
        sdy, sdh = D.sum(axis=1, keepdims=True), (D * H).sum(axis=1, keepdims=True)
        exact = G * R * (D - sdy / m - H * sdh / m)
        scale = np.abs(G * R) * (np.abs(D) + (np.abs(D).sum(axis=1, keepdims=True)
                                              + np.abs(H) * np.abs(D * H).sum(axis=1, keepdims=True)) / m)
        gw_terms = D * H
    else:
        inv = 1 / np.sqrt(widened(var).reshape(c, 1) + eps)
        exact = D * G * inv
        scale = np.abs(exact)
        gw_terms = D * (X - MU) * inv
    got = stub.view(outs[0]).transpose(1, 0, 2, 3).reshape(c, m)
    assert_close(got, exact, scale, m, dtype)
    assert_close(stub.view(outs[1]), gw_terms.sum(axis=1), np.abs(gw_terms).sum(axis=1), m, stats_dtype)
    assert_close(stub.view(outs[2]), D.sum(axis=1), np.abs(D).sum(axis=1), m, stats_dtype)
