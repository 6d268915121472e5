"""The stub CANN's aclnnGroupNormBackward (tests/stub_cann/src/ops_groupnorm.cpp) through the public API (ctypes,
stub_ctypes.py): hand-derived exact answers (two groups, each step exact in float32), outputMask and a null gamma,
bit-for-bit equality with aclnn_cli's numpy rendering of the 950's order (group_norm_kernel.py: written apart from
the C++, in another language), the doc's formulas in float64 through transposed, stride-0 and gapped views within
a float32 bound, and phase one's statuses against aclnn_cli.ops.contract.check (the bundled negative cases among
them).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from aclnn_cli.ops import OPS
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.groups.group_norm_kernel import VARIANTS, kernel
from aclnn_cli.tensor.dtypes import lookup

from cann_build import tools_missing
from stub_ctypes import Handle, stub  # noqa: F401  (stub: the fixture)
from test_stub_reductions import BF16, F16, F32, zeros
from test_stub_swi_glu_grad import assert_within, soc, widened  # noqa: F401  (soc: a fixture)

pytestmark = pytest.mark.skipif(tools_missing() is not None, reason=f"stub CANN toolkit: {tools_missing()}")

API = "aclnnGroupNormBackward"
NULLPTR, INVALID = 161001, 161002
INPUTS = ("gradOut", "input", "mean", "rstd", "gamma")
OUTPUTS = ("gradInput", "gradGammaOut", "gradBetaOut")


def call(stub, t: dict, n: int, c: int, hxw: int, group: int, mask=(True, True, True)) -> int:
    """Phase one (and two if it succeeds) with the tensors of `t` (arrays or stub tensors; None or missing: a null
    pointer); mask None: a null outputMask."""
    def arg(k):
        v = t.get(k)
        return None if v is None else v if not isinstance(v, np.ndarray) else stub.tensor(v)
    m = None if mask is None else Handle(stub.bool_array(list(mask)))
    return stub.call(API, *(arg(k) for k in INPUTS), n, c, hxw, group, m, *(arg(k) for k in OUTPUTS))


# ---------------------------------------------------------------- known answers

def test_known_answer_two_groups(stub):
    """N = 1, C = 4, HxW = 2, group = 2 (M = 4). Group 0: mean 1.5, rstd 2, gamma [1, 2]: ds = [4, 0], db = [2, 2],
    sum1 = 4, sum2 = 6, C2 = (6 * 1.5 - 4) * 8 / 4 = 10, C3 = -15 - 12 / 4 = -18, dx = 10 x + 2 gamma dy - 18;
    the doc's rstd (a - sum(a) / M - h sum(h a) / M) gives the same: a = [1, 1, 4, 0], h = [-1, 3, -3, 1].
    Group 1: x = 0, dy = 1, mean 0, rstd 1: C2 = 0, C3 = -1, dx = 0. dgamma = sum dy h, dbeta = sum dy."""
    x = np.array([1, 3, 0, 2, 0, 0, 0, 0], F32)
    dy = np.array([1, 1, 2, 0, 1, 1, 1, 1], F32)
    outs = {"gradInput": stub.tensor(np.full(8, 7, F32)), "gradGammaOut": stub.tensor(np.full(4, 7, F32)),
            "gradBetaOut": stub.tensor(np.full(4, 7, F32))}
    t = {"gradOut": dy, "input": x, "mean": np.array([1.5, 0], F32), "rstd": np.array([2, 1], F32),
         "gamma": np.array([1, 2, 1, 1], F32), **outs}
    assert call(stub, t, 1, 4, 2, 2) == 0, stub.error()
    assert stub.view(outs["gradInput"]).tolist() == [-6, 14, -10, 2, 0, 0, 0, 0]
    assert stub.view(outs["gradGammaOut"]).tolist() == [2, -6, 0, 0]
    assert stub.view(outs["gradBetaOut"]).tolist() == [2, 2, 2, 2]


def test_samples_add_up_and_a_null_gamma_is_ones(stub):
    """N = 2, C = 2, HxW = 1, group = 1, gamma null, rstd 0.5: sample 0 x = [1, 3], dy = [1, -1], mean 2:
    h = [-0.5, 0.5], sum(a) = 0, sum(h a) = -1, dx = 0.5 (a + h / 2) = [0.375, -0.375]; sample 1 x = [0, 0],
    dy = [2, 4], mean 0: h = 0, dx = 0.5 (a - 3) = [-0.5, 0.5]. dgamma = [-0.5 + 0, -0.5 + 0], dbeta = [1 + 2,
    -1 + 4]."""
    outs = {k: stub.tensor(np.full(s, 9, F32)) for k, s in (("gradInput", (2, 2)), ("gradGammaOut", 2),
                                                            ("gradBetaOut", 2))}
    t = {"gradOut": np.array([[1, -1], [2, 4]], F32), "input": np.array([[1, 3], [0, 0]], F32),
         "mean": np.array([2, 0], F32), "rstd": np.array([0.5, 0.5], F32), **outs}
    assert call(stub, t, 2, 2, 1, 1) == 0, stub.error()
    assert stub.view(outs["gradInput"]).tolist() == [[0.375, -0.375], [-0.5, 0.5]]
    assert stub.view(outs["gradGammaOut"]).tolist() == [-0.5, -0.5]
    assert stub.view(outs["gradBetaOut"]).tolist() == [3, 3]


@pytest.mark.parametrize("mask", [(True, False, False), (False, True, True), (False, False, True)])
def test_only_the_masked_in_outputs_are_written(stub, mask):
    """The masked-out outputs may be null (they are here) or present: either way untouched."""
    t, outs = inputs(np.random.default_rng(5), 2, 4, 3, F32)
    present = {k: stub.tensor(np.full(v.shape, 7, F32)) for k, v in outs.items()}
    args = {**t, **{k: present[k] if on else None for k, on in zip(OUTPUTS, mask)}}
    assert call(stub, args, 2, 4, 3, 2, mask) == 0, stub.error()
    kept = {**t, **present}  # the same call again with every output present, masked the same way
    assert call(stub, kept, 2, 4, 3, 2, mask) == 0, stub.error()
    want = emulated(t, 2, 4, 3, 2)
    for k, on in zip(OUTPUTS, mask):
        got = stub.view(present[k]).reshape(-1)
        np.testing.assert_array_equal(got, want[k] if on else np.full(got.size, 7, F32))


def test_an_all_false_mask_launches_nothing(stub):
    t, outs = inputs(np.random.default_rng(6), 2, 4, 3, F32)
    present = {k: stub.tensor(np.full(v.shape, 7, F32)) for k, v in outs.items()}
    assert call(stub, {**t, **present}, 2, 4, 3, 2, (False, False, False)) == 0, stub.error()
    assert all((stub.view(v) == 7).all() for v in present.values())


# ---------------------------------------------------------------- the 950's order, bit for bit

def inputs(rng, n: int, c: int, hxw: int, dtype, stats=None, gamma=True, mean_shift=0.0):
    """Random gradOut, input (N, C, HxW), mean and rstd (N, group: filled by the caller's group through their
    size), gamma (C) and zeroed outputs; stats: the dtype of mean, rstd, gamma and the channel outputs."""
    stats = stats or dtype
    group = 2 if c % 2 == 0 else 1
    t = {"gradOut": rng.normal(size=(n, c, hxw)).astype(dtype),
         "input": (rng.normal(size=(n, c, hxw)) + mean_shift).astype(dtype),
         "mean": (rng.uniform(-0.25, 0.25, n * group) + mean_shift).astype(stats),
         "rstd": rng.uniform(0.5, 2.0, n * group).astype(stats),
         "gamma": rng.uniform(-2, 2, c).astype(stats) if gamma else None}
    outs = {"gradInput": zeros((n, c, hxw), dtype), "gradGammaOut": zeros(c, stats), "gradBetaOut": zeros(c, stats)}
    return t, outs


def emulated(t: dict, n: int, c: int, hxw: int, group: int) -> dict:
    """aclnn_cli's group_norm_kernel.kernel on float32 widenings, one block per group, each result rounded once to
    its output's dtype (gradInput input's, the channel outputs mean's): flat in (n, c, hw) and channel order."""
    d = c // group
    w = {k: None if t.get(k) is None else np.asarray(t[k], np.float32).reshape(-1) for k in INPUTS}
    blocks = {k: w[k].reshape(n, group, d * hxw).transpose(1, 0, 2).reshape(group, -1, 1) for k in ("gradOut", "input")}
    for k in ("mean", "rstd"):
        blocks[k] = w[k].reshape(n, group).T.reshape(group, n, 1)
    blocks["gamma"] = None if w["gamma"] is None else w["gamma"].reshape(group, d, 1)
    out = kernel({**blocks, "N": n, "C": c, "HxW": hxw, "group": group})
    gi = out["gradInput"].reshape(group, n, d * hxw).transpose(1, 0, 2).reshape(-1)
    stats = np.asarray(t["mean"]).dtype
    return {"gradInput": gi.astype(np.asarray(t["input"]).dtype), "gradGammaOut": out["gradGammaOut"].reshape(-1)
            .astype(stats), "gradBetaOut": out["gradBetaOut"].reshape(-1).astype(stats)}


@pytest.mark.parametrize("dtype, stats", [(F32, F32), (F16, F16), (BF16, BF16), (F16, F32), (BF16, F32)], ids=str)
@pytest.mark.parametrize("n, c, hxw", [(3, 6, 5), (2, 4, 300), (5, 2, 64), (2, 6, 1)])
def test_bit_for_bit_the_950_order(stub, dtype, stats, n, c, hxw):
    """HxW 300: five 64-lane blocks (the fifth folded into the first, then halved); 64: one full block; 1: a sum of
    one term. The channel sums over the samples run in order (float32 atomic adds)."""
    rng = np.random.default_rng(n * 1000 + hxw)
    t, outs = inputs(rng, n, c, hxw, dtype, stats, gamma=hxw != 5)
    group = 2 if c % 2 == 0 else 1
    present = {k: stub.tensor(v) for k, v in outs.items()}
    assert call(stub, {**t, **present}, n, c, hxw, group) == 0, stub.error()
    want = emulated(t, n, c, hxw, group)
    for k in OUTPUTS:
        np.testing.assert_array_equal(stub.view(present[k]).reshape(-1), want[k], err_msg=k)


# ---------------------------------------------------------------- the doc's formulas in float64

def textbook(dy, x, mean, rstd, gamma, group):
    """The doc's gradients in float64 on (N, C, HxW) arrays, with bounds derived from the 950's float32 order:
    dx = x C2 + dy gamma rstd + C3 with C2 = rstd^3 (sum2 mean - sum1) / M, C3 = -C2 mean - sum2 rstd / M
    (sum1 = sum a x, sum2 = sum a, a = dy gamma); each sum of m terms within (log2 m + 2) u of its terms' magnitude,
    C2 within (log2 M + 10) u of |rstd|^3 (|mean| sum|a| + sum|a x|) / M, each product and sum after it 1 u."""
    n, c, hxw = x.shape
    d = c // group
    m = d * hxw
    g = gamma.reshape(1, c, 1)
    rows = lambda v: v.reshape(n, group, d * hxw)  # noqa: E731
    mu, r = mean.reshape(n, group, 1), rstd.reshape(n, group, 1)
    a, h = rows(dy * g), (rows(x) - mu) * r
    dx = r * (a - a.sum(-1, keepdims=True) / m - h * (h * a).sum(-1, keepdims=True) / m)
    logm = math.log2(max(m, 2))
    c2 = np.abs(r) ** 3 * (np.abs(mu) * np.abs(a).sum(-1, keepdims=True) +
                           np.abs(a * rows(x)).sum(-1, keepdims=True)) / m
    c3 = np.abs(mu) * c2 + np.abs(r) * np.abs(a).sum(-1, keepdims=True) / m
    dx_bound = (logm + 10) * c2 * (np.abs(rows(x)) + np.abs(mu)) + (logm + 4) * c3 + 3 * np.abs(a * r) + 2 * np.abs(
        rows(x)) * c2
    per_channel = lambda v: np.repeat(v.reshape(n, group), d, axis=1)[..., None]  # noqa: E731  (n, c, 1)
    mu_c, r_c = per_channel(mean), per_channel(rstd)
    k = math.log2(max(hxw, 2)) + n + 4
    return ({"gradInput": dx.reshape(-1), "gradGammaOut": (dy * (x - mu_c) * r_c).sum((0, 2)),
             "gradBetaOut": dy.sum((0, 2))},
            {"gradInput": dx_bound.reshape(-1),
             "gradGammaOut": k * (np.abs(dy) * (np.abs(x) + np.abs(mu_c)) * np.abs(r_c)).sum((0, 2)),
             "gradBetaOut": k * np.abs(dy).sum((0, 2))})


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=str)
def test_against_float64_through_strided_views(stub, rng, dtype):
    """N = 3, C = 6 in 3 groups, HxW = 70 (two 64-lane blocks), input (3, 6, 70) read through a transposed view,
    gradOut through a stride-0 first axis (one sample repeated), gradInput every second element of a longer
    storage (its gaps keep their value), mean far from zero (|mean| 4 times the spread)."""
    n, c, hxw, group = 3, 6, 70, 3
    xs = (rng.normal(size=(hxw, c, n)) + 4).astype(dtype)  # stored transposed
    dy1 = rng.normal(size=(c, hxw)).astype(dtype)
    mean = (rng.uniform(3.75, 4.25, n * group)).astype(dtype)
    rstd, gamma = rng.uniform(0.5, 2, n * group).astype(dtype), rng.uniform(-2, 2, c).astype(dtype)
    storage = np.full(2 * n * c * hxw, 5, dtype)
    gi = stub.tensor(storage, shape=(n, c, hxw), strides=(2 * c * hxw, 2 * hxw, 2))
    gg, gb = stub.tensor(zeros(c, dtype)), stub.tensor(zeros(c, dtype))
    t = {"gradOut": stub.tensor(dy1, shape=(n, c, hxw), strides=(0, hxw, 1)),
         "input": stub.tensor(xs, shape=(n, c, hxw), strides=(1, n, n * c)), "mean": mean, "rstd": rstd,
         "gamma": gamma, "gradInput": gi, "gradGammaOut": gg, "gradBetaOut": gb}
    assert call(stub, t, n, c, hxw, group) == 0, stub.error()
    dy = np.broadcast_to(widened(dy1), (n, c, hxw))
    exact, bound = textbook(dy, widened(xs).transpose(2, 1, 0), widened(mean), widened(rstd), widened(gamma), group)
    for k, out in (("gradInput", gi), ("gradGammaOut", gg), ("gradBetaOut", gb)):
        assert_within(stub.view(out).reshape(-1), exact[k], bound[k], dtype)
    assert (stub.storage(gi)[1::2] == 5).all()  # nothing written outside the view


def test_the_bound_is_tight_enough_to_catch_a_kernel_slip(rng):
    """The float64 check fails the op's declared defects run on the same inputs (rstd^2 in C2, the first sample's
    channel sums only, every channel given its group's first gamma)."""
    n, c, hxw, group = 3, 4, 9, 2
    t, _ = inputs(rng, n, c, hxw, F32)
    exact, bound = textbook(*(widened(t[k]).reshape(s) for k, s in zip(INPUTS, ((n, c, hxw),) * 2 + ((-1,),) * 3)),
                            group)
    d = c // group
    blocks = {k: t[k].reshape(n, group, d * hxw).transpose(1, 0, 2).reshape(group, -1, 1) for k in ("gradOut", "input")}
    blocks.update({k: t[k].reshape(n, group).T.reshape(group, n, 1) for k in ("mean", "rstd")},
                  gamma=t["gamma"].reshape(group, d, 1))
    for name, field in (("gn-rstd-squared", "gradInput"), ("gn-first-sample-only", "gradGammaOut"),
                        ("gn-gamma-of-first-channel", "gradInput")):
        out = VARIANTS[name]({**blocks, "N": n, "C": c, "HxW": hxw, "group": group})[field]
        got = out.reshape(group, n, -1).transpose(1, 0, 2).reshape(-1) if field == "gradInput" else out.reshape(-1)
        with pytest.raises(AssertionError):
            assert_within(got, exact[field], bound[field], F32)
    assert_within(emulated(t, n, c, hxw, group)["gradInput"], exact["gradInput"], bound["gradInput"], F32)


@pytest.fixture
def rng():
    return np.random.default_rng(4409)


# ---------------------------------------------------------------- phase one

def tensors(n=2, c=6, hxw=4, group=3, dtype=F32, stats=None, **change) -> dict:
    stats = stats or dtype
    t = {"gradOut": zeros((n, c, hxw), dtype), "input": zeros((n, c, hxw), dtype), "mean": zeros(n * group, stats),
         "rstd": zeros(n * group, stats), "gamma": zeros(c, stats), "gradInput": zeros((n, c, hxw), dtype),
         "gradGammaOut": zeros(c, stats), "gradBetaOut": zeros(c, stats)}
    return {**t, **change}


def contract(product: str, t: dict, attrs: dict) -> int:
    descs = {k: TensorDesc(lookup("float32"), (), True) if t.get(k) is None else
             TensorDesc(lookup(t[k].dtype.name), t[k].shape) for k in INPUTS + OUTPUTS}
    mask = attrs["outputMask"]
    return check(OPS[API], product, descs, {**attrs, "outputMask": None if mask is None else tuple(mask)}).status


def attrs(n=2, c=6, hxw=4, group=3, mask=(True, True, True)) -> dict:
    return {"N": n, "C": c, "HxW": hxw, "group": group, "outputMask": mask}


CASES = [
    # the bundled suite's negative cases (cases/group_norm_backward.yaml)
    ("group_not_dividing", tensors(group=4), attrs(group=4), INVALID),
    ("wrong_numel", tensors(), attrs(hxw=5), INVALID),
    ("dtype_mismatch", tensors(gradOut=zeros((2, 6, 4), F16)), attrs(), INVALID),
    # nulls, in the API's order, before anything else (then outputMask)
    ("null_gradOut", tensors(gradOut=None, input=zeros((2, 6, 4), np.float64)), attrs(), NULLPTR),
    ("null_input", tensors(input=None), attrs(), NULLPTR), ("null_mean", tensors(mean=None), attrs(), NULLPTR),
    ("null_rstd", tensors(rstd=None, gamma=zeros(7)), attrs(), NULLPTR),
    ("null_outputMask", tensors(mean=zeros(6, np.float64)), attrs(mask=None), NULLPTR),
    ("ok", tensors(), attrs(), 0), ("ok_null_gamma", tensors(gamma=None), attrs(), 0),
    ("ok_flat", tensors(gradOut=zeros(48), input=zeros(48), gradInput=zeros(48)), attrs(), 0),
    ("ok_fp32_stats", tensors(dtype=F16, stats=F32), attrs(), 0),
    ("ok_mask_nulls", tensors(gradInput=None, gradGammaOut=None), attrs(mask=(False, False, True)), 0),
    # dtype lists, then dims, then the attributes, then the relations
    ("float64", tensors(dtype=np.float64), attrs(), INVALID),
    ("mean_float64", tensors(mean=zeros(6, np.float64)), attrs(), INVALID),
    ("gradInput_float64", tensors(gradInput=zeros((2, 6, 4), np.float64), mean=zeros(5)), attrs(), INVALID),
    ("nine_dims", tensors(gradOut=zeros((1,) * 8 + (48,)), input=zeros((1,) * 8 + (48,))), attrs(), INVALID),
    ("group_0", tensors(), attrs(group=0), INVALID), ("group_negative", tensors(), attrs(group=-3), INVALID),
    ("over_8000_per_group", tensors(), attrs(c=8002, group=1), INVALID),
    ("mask_of_2", tensors(mean=zeros(5)), attrs(mask=(True, True)), INVALID),
    ("mask_beside_null", tensors(gradBetaOut=None), attrs(), INVALID),
    ("gradInput_dtype", tensors(gradInput=zeros((2, 6, 4), F16)), attrs(), INVALID),
    ("mean_neither", tensors(mean=zeros(6, F16)), attrs(), INVALID),
    ("rstd_not_means", tensors(dtype=F16, stats=F32, rstd=zeros(6, F16)), attrs(), INVALID),
    ("gradGamma_not_means", tensors(gradGammaOut=zeros(6, BF16)), attrs(), INVALID),
    ("mean_numel", tensors(mean=zeros(5)), attrs(), INVALID),
    ("gamma_numel", tensors(gamma=zeros(3)), attrs(), INVALID),
    ("gradInput_shape", tensors(gradInput=zeros((2, 24))), attrs(), INVALID),
    ("gradBeta_numel", tensors(gradBetaOut=zeros(7)), attrs(), INVALID),
    ("negative_sizes", {**tensors(gradGammaOut=None, gradBetaOut=None, gamma=None, rstd=zeros(2), mean=zeros(2)),
                        "gradOut": zeros(8), "input": zeros(8), "gradInput": zeros(8)},
     attrs(n=1, c=-4, hxw=-2, group=2, mask=(True, False, False)), 0),
]


@pytest.mark.parametrize("t, a, status", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_statuses_are_the_contracts(stub, soc, t, a, status):
    soc("Ascend950PR_9599")
    assert call(stub, t, a["N"], a["C"], a["HxW"], a["group"], a["outputMask"]) == status, stub.error()
    assert contract("950", t, a) == status  # (the expectation is aclnn-cli's contract too)


@pytest.mark.parametrize("name, product, dtype, status", [
    ("Ascend950PR_9599", "950", BF16, 0), ("Ascend910_9391", "A3", BF16, 0), ("Ascend910B1", "A2", BF16, 0),
    ("Ascend910A", "910", F16, 0), ("Ascend910A", "910", BF16, INVALID),
    ("Ascend310P3", None, F32, INVALID),  # the doc: not on the 310P
])
def test_dtypes_per_product(stub, soc, name, product, dtype, status):
    soc(name)
    t = tensors(dtype=dtype)
    assert call(stub, t, 2, 6, 4, 3) == status, stub.error()
    if product is not None:
        assert contract(product, t, attrs()) == status
