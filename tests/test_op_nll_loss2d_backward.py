"""aclnnNLLLoss2dBackward: the reference and exact path against a 4-D oracle written here, the emulated kernel
against the 950 kernel's own 4-D indexing, an independent float32 implementation (PyTorch's nll_loss2d_backward
algebra, vectorized), the defects the gate must see in every dtype, the contract, the Classes family's cut, and
ops-nn's ATK suite unmodified.

Oracle: the doc's formula (out[n, t, h, w] = -g * w[t], t = target[n, h, w], over totalWeight for mean, 0
elsewhere and at ignored positions) position by position in Python Fractions with plain loops over (n, h, w),
rounded by test_op_nll_loss_backward's `round_to` (integers: ties to even, subnormals, overflow); nothing shared
with aclnn_cli's reference, exact or rounding. Blocks are built as the Classes family hands them
(docs/families.md): samples (k, C, S), target and a per-position gradOutput (k, 1, S), weight and totalWeight
read whole (k, 1, numel).
"""

from __future__ import annotations

import json
import math
from exactq import Fraction
from pathlib import Path

import numpy as np
import pytest

import harness
from aclnn_cli.ops.contract import TensorDesc
from aclnn_cli.ops.families import Classes
from aclnn_cli.ops.classes.nll_loss2d_backward import SPEC, VARIANTS
from aclnn_cli.tensor import dtypes as D
from helpers import run_cli
from rowblocks import (as_fractions, assert_variant_verdicts, atk_small_cases_pass, bundled_emulated,
                       generated_yaml, independent_dumps, not_passing, passing_bundled_records)
from softmax_oracle import variant_kinds
from stub_ctypes import stub  # noqa: F401  (the fixture)
from test_op_nll_loss_backward import DTYPES, MEAN, NONE, SUM, refused_by_gen, round_to, rounded

KEY = SPEC.key
ATK = Path(__file__).parent / "ops_nn_suites" / "atk_aclnnNLLLoss2dBackward.json"
F32 = np.float32


def sample_block(rng, k: int, classes: int, s: int, dtype: D.DType, reduction: int, ignore: int = -100,
                 ignored_share: float = 0.125, weight=None, total=None) -> dict:
    """k samples of C classes at S positions as the Classes family hands them, inputs rounded to dtype (float64)."""
    target = rng.integers(0, classes, size=(k, 1, s))
    target[rng.random((k, 1, s)) < ignored_share] = ignore
    w = rounded(rng.uniform(-2, 2, classes) if weight is None else np.asarray(weight, float), dtype)
    g = rounded(rng.normal(0, 1, (k, 1, s)) if reduction == NONE else np.full((k, classes, s), rng.normal()), dtype)
    tw = rounded(np.array([rng.uniform(1, 100) if total is None else total]), dtype)
    return {"self": np.zeros((k, classes, s)), "target": target, "gradOutput": g,
            "weight": np.broadcast_to(w.reshape(1, 1, classes), (k, 1, classes)).copy(),
            "totalWeight": np.full((k, 1, 1), tw[0]), "reduction": reduction, "ignoreIndex": ignore, "batch": k * s}


def oracle(t: dict) -> np.ndarray:
    """The doc's formula, one Fraction per element of (k, C, S), loops over the positions."""
    k, classes, s = t["self"].shape
    out = np.full((k, classes, s), Fraction(0), dtype=object)
    w = [Fraction(float(v)) for v in t["weight"][0, 0]]
    tw = Fraction(float(t["totalWeight"][0, 0, 0]))
    for n in range(k):
        for p in range(s):
            c = int(t["target"][n, 0, p])
            if c != t["ignoreIndex"]:
                v = -Fraction(float(t["gradOutput"][n, 0, p])) * w[c]
                out[n, c, p] = v / tw if t["reduction"] == MEAN else v
    return out


def blocks(dtype: D.DType) -> list[dict]:
    """Thousands of positions per dtype: C = 1, 2, 7, 33, 1000, every reduction, one spatial position and many,
    ignoreIndex a class, zero weights, totalWeight far from 1."""
    rng = np.random.default_rng(29 + dtype.precision)
    out = []
    for reduction in (NONE, MEAN, SUM):
        for k, classes, s in ((4, 1, 100), (3, 2, 150), (5, 7, 64), (2, 33, 80), (1, 1000, 6), (200, 3, 1)):
            out.append(sample_block(rng, k, classes, s, dtype, reduction))
        out.append(sample_block(rng, 4, 6, 25, dtype, reduction, ignore=0, weight=[0, -1, 2, 0, 3, -0.5]))
        out.append(sample_block(rng, 3, 9, 20, dtype, reduction, ignore=4, total=3.0e-3))
        out.append(sample_block(rng, 3, 9, 20, dtype, reduction, total=6.0e3))
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_reference_and_exact_against_the_oracle(dtype):
    """Reference within its bound of the oracle, scale at least |exact|, exact equal to it, the correctly rounded
    value (what gen writes where the bound cannot settle it) the oracle's rounded once, on every element."""
    positions = 0
    for t in blocks(dtype):
        want = oracle(t)
        ref = SPEC.reference(t)
        for v, b, s, q in zip(ref.value.reshape(-1), ref.bound.reshape(-1), ref.scale.reshape(-1), want.reshape(-1)):
            assert abs(Fraction(float(v)) - q) <= Fraction(float(b)) and abs(q) <= Fraction(float(s))
        got = SPEC.exact(as_fractions(t))
        assert got.shape == want.shape and (got == want).all()
        assert [D.round_fraction(q, dtype) for q in got.reshape(-1)] == [round_to(q, dtype) for q in want.reshape(-1)]
        positions += t["target"].size
    assert positions >= 3000


def source_kernel(t: dict) -> np.ndarray:
    """op_kernel/arch35/nll_loss_grad.h's 4-D SIMT loop, transcribed on flat GM offsets: for i over N H W,
    n = i / HW, rem = i % HW, outputGm_[n C HW + t HW + rem] = -(T)(x * float(weight_[t])), x = yGrad_[i] (none),
    singleGrad_[0] (sum) or tmpOut_[0] = singleGrad_[0] / localTotalWeight_[0] (mean)."""
    k, classes, hw = t["self"].shape
    out = np.zeros(k * classes * hw, F32)
    target, w = t["target"].reshape(-1), t["weight"][0, 0].astype(F32)
    y = t["gradOutput"][:, :1, :].reshape(-1).astype(F32)
    single = F32(t["gradOutput"].reshape(-1)[0])
    tmp = single / F32(t["totalWeight"].reshape(-1)[0])
    for i in range(k * hw):
        c = int(target[i])
        if c == t["ignoreIndex"]:
            continue
        x = y[i] if t["reduction"] == NONE else tmp if t["reduction"] == MEAN else single
        out[(i // hw) * classes * hw + c * hw + i % hw] = -(x * w[c])
    return out.reshape(k, classes, hw)


@pytest.mark.parametrize("reduction", (NONE, MEAN, SUM))
def test_the_emulated_kernel_is_the_sources_bit_for_bit(reduction):
    rng = np.random.default_rng(11 + reduction)
    for k, classes, s in ((3, 5, 12), (1, 40, 30), (6, 1, 7)):
        t = sample_block(rng, k, classes, s, D.FLOAT32, reduction, ignore=2 if classes > 2 else -100)
        t32 = {n: v.astype(F32) if isinstance(v, np.ndarray) and v.dtype == np.float64 else v for n, v in t.items()}
        got = SPEC.kernel(t32)
        assert got.dtype == F32 and np.array_equal(got.view(np.uint32), source_kernel(t32).view(np.uint32))


def aten_nll_loss2d_backward(target: np.ndarray, g: np.ndarray, w: np.ndarray, tw, classes: int, reduction: int,
                             ignore: int) -> np.ndarray:
    """PyTorch's CPU nll_loss2d_backward (aten/src/ATen/native/LossNLL2d.cpp, nll_loss2d_backward_out_frame) in
    float32, vectorized: none: grad_input[b][t][h][w] = -weight[t] * grad_output[b][h][w]; else
    grad = -(mean ? grad_output / total_weight : grad_output), grad_input[b][t][h][w] = weight[t] * grad; a
    scatter along the class axis with np.put_along_axis. target (N, H, W), g (N, H, W) or one value."""
    n, h, wd = target.shape
    out = np.zeros((n, classes, h, wd), F32)
    if not out.size:
        return out
    kept = target != ignore
    safe = np.where(kept, target, 0).astype(np.int64)
    w_t = w.astype(F32)[safe]
    if reduction == NONE:
        vals = -w_t * g.astype(F32).reshape(target.shape)
    else:
        g0 = F32(g.reshape(-1)[0])
        vals = w_t * -(g0 / F32(tw) if reduction == MEAN else g0)
    old = np.take_along_axis(out, safe[:, None], axis=1)
    np.put_along_axis(out, safe[:, None], np.where(kept[:, None], vals[:, None], old), axis=1)
    return out


def independent(case: Path, m: dict) -> np.ndarray:
    """The ATen algebra on a generated case's logical tensors (manifest's shapes, strides, offsets)."""
    ts = harness.tensors(m)
    ins = {n: harness.view(harness.storage(case, ts[n]), ts[n]) for n in ("target", "gradOutput", "weight", "totalWeight")}
    attrs = {a["name"]: a["value"] for a in m["attributes"]}
    classes = ts["self"]["shape"][1]
    with np.errstate(all="ignore"):
        return aten_nll_loss2d_backward(ins["target"].astype(np.int64), ins["gradOutput"], ins["weight"].reshape(-1),
                                        ins["totalWeight"].reshape(-1)[0], classes, attrs["reduction"], attrs["ignoreIndex"])


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced) -> Path:
    """The bundled file generated and emulated: the session's cases (rowblocks.bundled_emulated)."""
    return bundled_emulated(tmp_path_factory, bundled_produced, KEY)


def test_bundled_cases_pass_with_the_950_kernel(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "nll_loss2d_backward")
    contract = sum(c["kind"] == "contract" for c in cases)
    assert len(cases) - contract >= 150 and contract >= 25


def test_bundled_goldens_are_the_oracle_rounded_once(suite):
    """Every positive case with finite inputs and a nonzero totalWeight (every dtype, C from 1 to 1000, views, a
    weight of shape (1, C)): golden = the oracle rounded once, element for element."""
    elements: dict[str, int] = {}
    for case in sorted(p.parent for p in suite.glob("*/case.json")):
        m = harness.load(case)
        ts = harness.tensors(m)
        if m["expect_status"] != 0 or 0 in ts["out"]["shape"]:
            continue
        attrs = {a["name"]: a["value"] for a in m["attributes"]}
        ins = {n: harness.view(harness.storage(case, ts[n]), ts[n]).astype(np.float64 if n != "target" else np.int64)
               for n in ("gradOutput", "weight", "totalWeight", "target")}
        tw = ins["totalWeight"].reshape(-1)[0]
        if not all(np.isfinite(ins[n]).all() for n in ("gradOutput", "weight", "totalWeight")) or \
                (attrs["reduction"] == MEAN and tw == 0):
            continue
        dtype = D.lookup(ts["out"]["dtype"])
        gold = harness.view(harness.storage(case, ts["out"], "golden"), ts["out"]).astype(np.float64)
        want = np.zeros(gold.shape)
        g, w = ins["gradOutput"], ins["weight"].reshape(-1)
        for n, h, x in zip(*np.nonzero(ins["target"] != attrs["ignoreIndex"])):
            c = int(ins["target"][n, h, x])
            q = -Fraction(float(g[n, h, x] if attrs["reduction"] == NONE else g.reshape(-1)[0])) * Fraction(float(w[c]))
            want[n, c, h, x] = round_to(q / Fraction(float(tw)) if attrs["reduction"] == MEAN else q, dtype)
        assert np.array_equal(gold, want), case.name
        elements[dtype.name] = elements.get(dtype.name, 0) + gold.size
    assert min(elements.values()) >= 20_000 and len(elements) == 3, elements


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    wrote = independent_dumps(suite, tmp_path / "aten", independent)
    assert wrote >= 150 and not_passing(tmp_path / "aten", tmp_path / "aten.json") == []


DEFECT_YAML = """\
op: aclnnNLLLoss2dBackward
defaults: {seed: 41, dtype: [float32, float16, bfloat16]}
cases:
  - {name: none, shape: [4, 10, 3, 5], attributes: {reduction: 0, ignoreIndex: 3}}
  - {name: mean, shape: [4, 10, 3, 5], attributes: {reduction: 1, ignoreIndex: 3}, inputs: {totalWeight: {uniform: [3, 9]}}}
  - {name: sum, shape: [4, 10, 3, 5], attributes: {reduction: 2, ignoreIndex: 3}}
"""
DEFECTS, LEGITIMATE = variant_kinds(SPEC)
SHOWS = {**dict.fromkeys(DEFECTS, ("none", "mean", "sum")),
         "nll-mean-no-divide": ("mean",), "nll-mean-batch-divisor": ("mean",)}


@pytest.fixture(scope="module")
def defect_suite(tmp_path_factory) -> Path:
    return generated_yaml(tmp_path_factory, DEFECT_YAML, "nll2d_defects")


@pytest.mark.parametrize("variant", (*LEGITIMATE, *DEFECTS))
def test_variants_pass_or_fail_in_every_dtype(defect_suite, tmp_path, variant):
    """Each legitimate order passes every case; each defect fails every case it shows in, in fp32, fp16 and bf16
    (a mean's divisor only where the reduction is mean)."""
    assert_variant_verdicts(defect_suite, tmp_path, variant, SHOWS, LEGITIMATE, cases=9)


def test_the_variants_are_the_1d_ops_and_one_of_its_own():
    from aclnn_cli.ops.rows.nll_loss_backward import VARIANTS as ROWS

    assert set(VARIANTS) == (set(ROWS) - {"nll-swapped-axes"}) | {"nll2d-channels-last"}
    assert {n: f.variant_kind for n, f in VARIANTS.items() if n in ROWS} == \
        {n: f.variant_kind for n, f in ROWS.items() if n in VARIANTS}


def test_special_values_edges_and_empty_positions():
    rng = np.random.default_rng(3)
    t = sample_block(rng, 2, 3, 2, D.FLOAT32, MEAN, ignored_share=0.0, weight=[2.0, 0.0, -1.0], total=0.0)
    t["target"][:] = [[[0, 1]], [[2, 2]]]
    v = SPEC.reference(t).value
    g = t["gradOutput"][0, 0, 0]
    assert v[0, 0, 0] == -np.sign(g) * np.inf and np.isnan(v[0, 1, 1]) and v[1, 2, 0] == np.sign(g) * np.inf
    assert (v[0, 1:, 0] == 0).all() and (v[1, :2] == 0).all()
    # mean's float32 quotient past float32's range: the exact golden, the kernel's inf accepted at that position only
    t = sample_block(rng, 1, 2, 3, D.FLOAT32, MEAN, ignored_share=0.0, weight=[1e-30, 1.0], total=1e-20)
    t["gradOutput"][:] = 1e30
    t["target"][:] = [[[0, 1, 0]]]
    where, device = SPEC.edge({n: a.astype(F32) if isinstance(a, np.ndarray) and a.dtype == np.float64 else a
                               for n, a in t.items()})
    assert where[0, 0, 0] and where[0, 0, 2] and not where[0, 1, 0] and device[0, 0, 0] == -np.inf
    # a sample of no positions, and no classes: nothing to compute
    for k, classes, s in ((2, 3, 0), (2, 0, 4)):
        empty = sample_block(rng, k, max(classes, 1), s, D.FLOAT32, NONE)
        empty["weight"], empty["self"] = empty["weight"][:, :, :classes], np.zeros((k, classes, s))
        assert SPEC.kernel(empty).shape == (k, classes, s) and SPEC.reference(empty).value.shape == (k, classes, s)


def test_out_of_range_target_is_one_line(tmp_path):
    text = ("op: aclnnNLLLoss2dBackward\ncases:\n  - {name: bad, dtype: float32, shape: [1, 3, 2, 2], "
            "attributes: {reduction: 0},\n     inputs: {target: {values: [0, 1, 3, 2]}}}\n")
    refused_by_gen(tmp_path, text, "key 'inputs.target': aclnnNLLLoss2dBackward: a target is 3, outside [0, 3)")


SHAPES = {"gradOutput": (2, 3, 4), "self": (2, 5, 3, 4), "target": (2, 3, 4), "weight": (5,), "totalWeight": (1,),
          "out": (2, 5, 3, 4)}


@pytest.mark.parametrize("changes, reduction, rule", [
    ({}, 0, None),
    ({"gradOutput": ()}, 1, None),
    ({"gradOutput": (1,)}, 2, None),
    ({"weight": (1, 5)}, 0, None),
    ({"totalWeight": (1, 1, 1)}, 0, None),
    ({"gradOutput": ()}, 0, "is not target's"),
    ({"gradOutput": (24,)}, 0, "is not target's"),
    ({"gradOutput": (2, 3, 4)}, 1, "single element"),
    ({"gradOutput": (1, 1)}, 2, "single element"),
    ({"self": (2, 5, 3), "out": (2, 5, 3), "gradOutput": ()}, 1, "self has 3 dims"),
    ({"target": (2, 3), "gradOutput": ()}, 1, "target has 2 dims"),
    ({"target": (2, 4, 3), "gradOutput": (2, 4, 3)}, 0, "does not match"),
    ({"weight": (4,)}, 0, "weight shape"),
    ({"out": (2, 5, 4, 3)}, 0, "out shape"),
    ({"totalWeight": (2,)}, 0, "totalWeight shape"),
])
def test_shape_rule(changes, reduction, rule):
    descs = {n: TensorDesc(D.FLOAT32, s) for n, s in {**SHAPES, **changes}.items()}
    got = SPEC.contract.shape_rule(descs, {"reduction": reduction, "ignoreIndex": -100})
    assert (got is None) if rule is None else (rule in got), got


def test_the_classes_family_cut():
    """Per-position tensors (N, H, W) cut from their own storage as (1, S) per sample; one element broadcasts;
    weight and totalWeight read whole; a (C,) weight beside W = C is not read along W."""
    fam = SPEC.family
    shapes = {**SHAPES, "weight": (4,), "self": (2, 4, 3, 4), "out": (2, 4, 3, 4)}
    geo = fam.geometry(shapes, {"reduction": 0})
    assert (geo.a1, geo.r, geo.a0) == (2, 4, 12) and fam.own_geometry("target", shapes, {}, geo).block == 12
    assert fam.own_geometry("gradOutput", {**shapes, "gradOutput": ()}, {}, geo) is None
    assert fam.shape_problem(SPEC, shapes, {}) is None and set(fam.whole) == {"weight", "totalWeight"}
    assert "one element" in fam.shape_problem(SPEC, {**shapes, "target": (2, 4, 3)}, {})
    assert fam.default_shapes((2, 4, 3, 5), {"reduction": 0}, tuple(t.name for t in SPEC.tensors)) == \
        {"self": (2, 4, 3, 5), "gradOutput": (2, 3, 5), "target": (2, 3, 5), "weight": (4,), "totalWeight": (1,),
         "out": (2, 4, 3, 5)}
    assert Classes.spatial((7, 3, 2, 5)) == (7, 2, 5)


def test_ops_nn_atk_suite_imports_whole_and_passes(tmp_path):
    """ops-nn's ATK file (tests/ops_nn_suites/, unmodified): all 201 cases import (aclnn_name NLLLoss2dBackward, the
    bare API name; out from self's shape), none skipped, and every one (the largest 9,600 elements) passes with the
    950 kernel and with the independent one."""
    cases, small = atk_small_cases_pass(tmp_path, ATK, KEY, independent, "out")
    assert len(cases) == 201 and len(small) == 201
    assert {c["dtype"] for c in cases} == {"float32", "float16", "bfloat16"}
    assert {c["attributes"]["reduction"] for c in cases} == {0, 1, 2}
    assert math.prod(max((c["shape"] for c in cases), key=math.prod)) < 100_000


# ---------------------------------------------------------------- the stub CANN's kernel (tests/stub_cann/src/ops_nll.cpp)


@pytest.mark.parametrize("reduction", (NONE, MEAN, SUM))
def test_the_stub_writes_the_emulated_kernels_bits(stub, reduction):
    """The stub's phase two on (N, C, H, W) = (3, 5, 4, 2), ignoreIndex a class, against the emulated kernel."""
    rng = np.random.default_rng(reduction)
    t = sample_block(rng, 3, 5, 8, D.FLOAT32, reduction, ignore=2)
    t32 = {n: v.astype(F32) if isinstance(v, np.ndarray) and v.dtype == np.float64 else v for n, v in t.items()}
    g = t32["gradOutput"][:, 0, :].reshape(3, 4, 2) if reduction == NONE else t32["gradOutput"].reshape(-1)[:1]
    args = [stub.tensor(np.ascontiguousarray(g)), stub.tensor(np.zeros((3, 5, 4, 2), F32)),
            stub.tensor(t32["target"].reshape(3, 4, 2)), stub.tensor(t32["weight"][0, 0].copy()), reduction, 2,
            stub.tensor(t32["totalWeight"].reshape(-1)[:1].copy()), stub.tensor(np.full((3, 5, 4, 2), 9, F32))]
    assert stub.call("aclnnNLLLoss2dBackward", *args) == 0
    want = SPEC.kernel(t32).reshape(3, 5, 4, 2)
    assert np.array_equal(stub.view(args[-1]).view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("change, status", [
    ({}, 0),
    ({"target": np.zeros((3, 4, 2, 1), np.int64)}, 161002),  # target 4-D
    ({"weight": np.ones((1, 5), F32)}, 0),  # C elements in another shape: Numel
    ({"weight": np.ones(4, F32)}, 161002),
    ({"out": np.zeros((3, 5, 4, 2), np.float16)}, 161002),  # out must be self's dtype
    ({"gradOutput": np.ones(24, F32)}, 161002),  # none: gradOutput's shape must be target's
    ({"reduction": 3}, 161002),
])
def test_the_stubs_phase_one_is_the_contracts(stub, change, status):
    from aclnn_cli.ops.contract import check

    ins = {"gradOutput": np.ones((3, 4, 2), F32), "self": np.zeros((3, 5, 4, 2), F32),
           "target": np.zeros((3, 4, 2), np.int64), "weight": np.ones(5, F32), "reduction": 0,
           "totalWeight": np.ones(1, F32), "out": np.zeros((3, 5, 4, 2), F32), **change}
    args = [stub.tensor(ins[n]) for n in ("gradOutput", "self", "target", "weight")] + [ins["reduction"], -100] + \
        [stub.tensor(ins[n]) for n in ("totalWeight", "out")]
    assert stub.call("aclnnNLLLoss2dBackward", *args) == status
    descs = {n: TensorDesc(D.lookup(a.dtype.name), a.shape) for n, a in ins.items() if n != "reduction"}
    assert check(SPEC, "950", descs, {"reduction": ins["reduction"], "ignoreIndex": -100}).status == status


def test_the_bundled_cases_through_the_runner_and_the_stub_on_every_product(suite, tmp_path_factory, monkeypatch):
    """`aclnn-cli harness --op aclnnNLLLoss2dBackward` built against the stub toolkit: every bundled case run on each
    product the stub's SoC reports, and every one PASS (the negative cases returning their statuses)."""
    from cann_build import build_runner, tools_missing
    from shared import linked_copy, object_cache, shared_stub_root

    if tools_missing() is not None:
        pytest.skip(f"stub CANN toolkit: {tools_missing()}")
    work = tmp_path_factory.mktemp("nll2d_runner")
    assert run_cli("harness", "-o", work / "h", "--op", SPEC.name).exit_code == 0
    runner = build_runner(work / "h", work / "build", shared_stub_root(tmp_path_factory),
                          cache=object_cache(tmp_path_factory))
    out = linked_copy(suite, work / "out")
    for soc in ("Ascend910B1", "Ascend910_9391", "Ascend950PR_9599", "Ascend910A"):
        monkeypatch.setenv("ACLNN_STUB_SOC", soc)
        r = run_cli("run", out, "--runner", runner)
        assert r.exit_code == 0, r.output[-2000:]
    r = run_cli("verify", out, "--json", work / "v.json")
    cases = json.loads((work / "v.json").read_text())["cases"]
    assert r.exit_code == 0 and {c["status"] for c in cases} == {"PASS"} and len(cases) == len(list(out.glob("*/case.json")))
