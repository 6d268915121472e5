"""aclnnAvgPool2dBackward (the window family): goldens against an oracle of Fractions that shares nothing with the op
or the family, an independent loop-based NumPy float32 kernel (PyTorch CPU's avg_pool2d_backward order: each output
window's g / divisor added into the input positions it covers) over every bundled case, the allowance proven on both
sides (correct float32 orders pass, each defect fails in fp32, fp16 and bf16 where it changes the result), the contract,
and ops-nn's own ATK suite.

The oracle and the independent kernel read the case directories through the manifest's numbers alone
(tests/harness.py) and place the windows with PyTorch's formulas written here: hstart = oh * sH - pH,
hend = min(hstart + kH, H + pH), pool_size = (hend - hstart) (wend - wstart) before the clip to the input.
"""

from __future__ import annotations

import shutil
from exactq import Fraction
from pathlib import Path

import numpy as np
import pytest

import harness
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.window.avg_pool2d_backward import SPEC
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from helpers import run_cli
from rowblocks import (assert_variant_verdicts, atk_small_cases_pass, bundled_emulated, generated_yaml,
                       goldens_against, independent_dumps, not_passing, write_dump, passing_bundled_records)

F = np.float32
SUITES = Path(__file__).parent / "ops_nn_suites"


def _attrs(m) -> dict:
    return {a["name"]: a["value"] for a in m.get("attributes", [])}


def _two(v, fill):
    v = list(v or [])
    return (fill if not v else (v[0], v[0]) if len(v) == 1 else (v[0], v[1]))


def windows(m, h: int, w: int, ho: int, wo: int):
    """Every window: (oh, ow, h0, h1, w0, w1, divisor) as PyTorch CPU's avg_pool2d_backward places and divides it."""
    a = _attrs(m)
    kh, kw = _two(a["kernelSize"], None)
    sh, sw = _two(a.get("stride"), (kh, kw))
    ph, pw = _two(a.get("padding"), (0, 0))
    out = []
    for oh in range(ho):
        for ow in range(wo):
            h0, w0 = oh * sh - ph, ow * sw - pw
            h1, w1 = min(h0 + kh, h + ph), min(w0 + kw, w + pw)
            pool = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            if a.get("divisorOverride"):
                d = a["divisorOverride"]
            else:
                d = pool if a.get("countIncludePad", True) else (h1 - h0) * (w1 - w0)
            out.append((oh, ow, h0, h1, w0, w1, d))
    return out


def _planes(case, m, name) -> np.ndarray:
    t = harness.tensors(m)[name]
    v = harness.view(harness.storage(case, t), t).astype(np.float64)
    return v.reshape(-1, *v.shape[-2:])


def oracle(case, m) -> list:
    """The exact gradient, element by element in logical order: Fractions summed window by window."""
    g = _planes(case, m, "gradOutput")
    h, w = harness.tensors(m)["self"]["shape"][-2:]
    out = np.full((g.shape[0], h, w), Fraction(0), dtype=object)
    fg = np.vectorize(Fraction, otypes=[object])(g)
    for oh, ow, h0, h1, w0, w1, d in windows(m, h, w, *g.shape[-2:]):
        for b in range(g.shape[0]):
            out[b, h0:h1, w0:w1] += fg[b, oh, ow] / d
    return list(out.reshape(-1))


def independent(case, m) -> np.ndarray:
    """PyTorch CPU's loop: each window's float32 g / divisor added into its positions, windows in (oh, ow) order."""
    g = _planes(case, m, "gradOutput").astype(F)
    t = harness.tensors(m)["self"]
    h, w = t["shape"][-2:]
    out = np.zeros((g.shape[0], h, w), F)
    with np.errstate(invalid="ignore"):  # (inf - inf: NaN, as IEEE and the device say)
        for oh, ow, h0, h1, w0, w1, d in windows(m, h, w, *g.shape[-2:]):
            out[:, h0:h1, w0:w1] += (g[:, oh, ow] / F(d))[:, None, None]
    return out.reshape(t["shape"])


ORACLE_YAML = """\
op: aclnnAvgPool2dBackward
defaults: {product: "950", seed: 43, dtype: [float32, float16, bfloat16]}
cases:
  - {name: overlap, shape: [3, 4, 11, 13], attributes: {kernelSize: [3], stride: [1], padding: [1], countIncludePad: false}}
  - {name: s2, shape: [2, 5, 12, 15], attributes: {kernelSize: [3, 4], stride: [2, 3], padding: [1, 2]}}
  - {name: ceil, shape: [2, 4, 10, 11], attributes: {kernelSize: [3], stride: [2], padding: [1], ceilMode: true,
     countIncludePad: false}}
  - {name: ceil_incl, shape: [2, 4, 9, 8], attributes: {kernelSize: [2], stride: [2], padding: [1], ceilMode: true}}
  - {name: override, shape: [2, 3, 9, 9], attributes: {kernelSize: [3], stride: [1], padding: [1], divisorOverride: 7}}
  - {name: cancelling, shape: [2, 4, 12, 12], attributes: {kernelSize: [4], stride: [1], padding: [2]},
     inputs: {gradOutput: {values: [1, -1, 0.5, -0.5, 3]}}}
  - {name: wide, shape: [1, 3, 10, 10], attributes: {kernelSize: [3], stride: [1], padding: [1], countIncludePad: false},
     inputs: {gradOutput: {values: [1.0e-3, -7.5, 250.0, 3.0e-2, -1.0e-5]}}}
  - {name: ncl, shape: [4, 9, 7], attributes: {kernelSize: [3], stride: [2], padding: [1]}}
  - {name: global, shape: [3, 4, 12, 12], attributes: {kernelSize: [12], padding: [0]}}
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generated_yaml(tmp_path_factory, ORACLE_YAML, "avgpool_oracle")


def test_goldens_equal_the_oracle_rounded_once(generated):
    """Every golden (overlapping windows, ceil mode's cut windows, padding counted or not, divisorOverride, sums that
    cancel exactly, values over many binades, NCL, the 950's global path) is the exact sum rounded once to its dtype,
    bit for bit; thousands of elements per dtype, some through the exact path."""
    compared, exact = goldens_against(generated, "gradInput", oracle)
    print("compared", compared, "exact path", exact)
    assert min(compared.values()) > 4000 and sum(exact.values()) > 0


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    return bundled_emulated(tmp_path_factory, bundled_produced, "avg_pool2d_backward")


def test_the_emulated_kernel_passes_every_bundled_case(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "avg_pool2d_backward")
    assert len(cases) == 104


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    wrote = independent_dumps(suite, tmp_path / "loops", independent, "gradInput")
    assert wrote == 76
    bad = not_passing(tmp_path / "loops", tmp_path / "loops.json")
    assert not bad, bad


# ------------------------------------------------------------------ the allowance, both sides

GATE_YAML = """\
op: aclnnAvgPool2dBackward
defaults: {product: "950", seed: 17, dtype: [float32, float16, bfloat16]}
cases:
  - {name: exclude, shape: [2, 3, 11, 13], attributes: {kernelSize: [3], stride: [1], padding: [1], countIncludePad: false}}
  - {name: include, shape: [2, 3, 11, 13], attributes: {kernelSize: [3], stride: [2], padding: [1]}}
  - {name: ceil, shape: [2, 3, 10, 11], attributes: {kernelSize: [3], stride: [2], padding: [1], ceilMode: true}}
  - {name: override, shape: [2, 2, 9, 9], attributes: {kernelSize: [3], stride: [2], padding: [1], divisorOverride: 5}}
  - {name: many, shape: [1, 2, 20, 20], attributes: {kernelSize: [7], stride: [1], padding: [3]},
     inputs: {gradOutput: {uniform: [-1, 1]}}}
  - {name: positive, shape: [2, 4, 28, 28], attributes: {kernelSize: [5], stride: [1], padding: [2], countIncludePad: false},
     inputs: {gradOutput: {uniform: [0, 1]}}}
"""


@pytest.fixture(scope="module")
def gate_suite(tmp_path_factory):
    return generated_yaml(tmp_path_factory, GATE_YAML, "avgpool_gate")


def _reversed(case, m):
    """Each position's windows added last first."""
    g = _planes(case, m, "gradOutput").astype(F)
    t = harness.tensors(m)["self"]
    h, w = t["shape"][-2:]
    out = np.zeros((g.shape[0], h, w), F)
    for oh, ow, h0, h1, w0, w1, d in reversed(windows(m, h, w, *g.shape[-2:])):
        out[:, h0:h1, w0:w1] += (g[:, oh, ow] / F(d))[:, None, None]
    return out.reshape(t["shape"])


def _pairwise(case, m):
    """Each position's terms (float32 g / d, in window order, zeros after its last) summed pairwise."""
    g = _planes(case, m, "gradOutput").astype(F)
    t = harness.tensors(m)["self"]
    h, w = t["shape"][-2:]
    wins = windows(m, h, w, *g.shape[-2:])
    used = np.zeros((h, w), np.int64)
    terms = np.zeros((g.shape[0], h, w, max(1, len(wins))), F)
    for oh, ow, h0, h1, w0, w1, d in wins:
        slot = used[h0:h1, w0:w1]
        hh, ww = np.meshgrid(np.arange(h0, h1), np.arange(w0, w1), indexing="ij")
        terms[:, hh, ww, slot] = (g[:, oh, ow] / F(d))[:, None, None]
        used[h0:h1, w0:w1] += 1
    terms = terms[..., :max(1, int(used.max()))]
    with np.errstate(invalid="ignore"):
        while terms.shape[-1] > 1:
            if terms.shape[-1] % 2:
                terms = np.concatenate([terms, np.zeros((*terms.shape[:-1], 1), F)], axis=-1)
            terms = terms[..., 0::2] + terms[..., 1::2]
    return terms[..., 0].reshape(t["shape"])


ORDERS = {"in-order": independent, "reversed": _reversed, "pairwise": _pairwise}


def test_correct_float32_orders_stay_within_the_allowance_and_pass(gate_suite, tmp_path):
    """Each order's largest |result - exact| / allowance over every element, and verify's verdict on its dumps."""
    exact, allowance = {}, {}
    for case in sorted(p.parent for p in gate_suite.glob("*/case.json")):
        m = harness.load(case)
        g = _planes(case, m, "gradOutput")
        self_shape = harness.tensors(m)["self"]["shape"]
        t = {"gradOutput": g, "self": np.zeros((g.shape[0], *self_shape[-2:])), **_attrs(m)}
        allowance[case.name] = SPEC.reference(t).allowance.reshape(-1)
        exact[case.name] = np.array([float(v) for v in oracle(case, m)])
    margins = {}
    for name, kernel in ORDERS.items():
        work = tmp_path / name
        shutil.copytree(gate_suite, work)
        for case in sorted(p.parent for p in work.glob("*/case.json")):
            m = harness.load(case)
            got = kernel(case, m).astype(np.float64)
            err, allow = np.abs(got.reshape(-1) - exact[case.name]), allowance[case.name]
            assert np.all(err <= allow), (name, case.name)
            margins[(name, case.name)] = float(np.max(np.where(allow > 0, err / np.where(allow > 0, allow, 1), 0)))
            write_dump(case, harness.tensors(m)["gradInput"], got)
        bad = not_passing(work, tmp_path / f"{name}.json")
        assert not bad, (name, bad)
    print("largest error / allowance:", {f"{k[0]} {k[1][-20:]}": f"{v:.3f}" for k, v in margins.items()})
    assert max(margins.values()) <= 0.55  # (one term: a division within u of it, against 2u)


# Which gate cases each defect changes (beyond any rounding): the divisor at the border differs only where a window
# is cut (padding not counted, or ceil mode's last window); overlapping windows exist where kernel > stride.
CHANGES = {
    "avgpool-kernel-size-divisor": ("exclude", "ceil", "positive"),
    "avgpool-include-pad-ignored": ("include", "ceil", "many"),
    "avgpool-include-pad-always": ("exclude", "positive"),
    "avgpool-override-ignored": ("override",),
    "avgpool-last-write-wins": ("exclude", "include", "ceil", "override", "many", "positive"),
    "avgpool-stride-off-by-one": ("exclude", "include", "ceil", "override", "many", "positive"),
    "avgpool-padding-off-by-one": ("exclude", "include", "ceil", "override", "many", "positive"),
}
LEGITIMATE = ("avgpool-reversed", "avgpool-columns", "avgpool-reciprocal")


@pytest.mark.parametrize("variant", sorted(CHANGES) + list(LEGITIMATE))
def test_each_defect_fails_where_it_changes_the_result_and_legitimate_orders_pass(gate_suite, tmp_path, variant):
    assert_variant_verdicts(gate_suite, tmp_path, variant, CHANGES, LEGITIMATE, cases=18)


def _status(g, s, o, attrs, dtype=D.FLOAT32, product="950", s_dtype=None):
    descs = {"gradOutput": TensorDesc(dtype, tuple(g)), "self": TensorDesc(s_dtype or dtype, tuple(s)),
             "gradInput": TensorDesc(dtype, tuple(o))}
    full = {"kernelSize": (3,), "stride": (2,), "padding": (1,), "ceilMode": False, "countIncludePad": True,
            "divisorOverride": 0, "cubeMathType": 0, **attrs}
    return check(SPEC, product, descs, full).status


def test_contract():
    ok = ([2, 3, 4, 4], [2, 3, 8, 8], [2, 3, 8, 8])
    assert _status(*ok, {}) == SUCCESS
    assert _status([3, 4, 4], [3, 8, 8], [3, 8, 8], {}) == SUCCESS  # NCL
    assert _status(*ok, {"stride": None}) == SUCCESS  # a null stride: the kernel's
    assert _status(*ok, {"kernelSize": (0,)}) == INVALID
    assert _status(*ok, {"kernelSize": (2, 2, 2)}) == INVALID
    assert _status(*ok, {"stride": (0,)}) == INVALID
    assert _status(*ok, {"stride": (1, 1, 1)}) == INVALID
    assert _status(*ok, {"padding": (2,)}) == INVALID  # more than half of 3
    assert _status(*ok, {"kernelSize": (4, 2), "padding": (2, 1)}) == SUCCESS  # exactly half
    assert _status(*ok, {"kernelSize": (4, 2), "padding": (2, 2)}) == INVALID
    assert _status(*ok, {"padding": (-1,)}) == INVALID
    assert _status(*ok, {"padding": ()}) == INVALID
    assert _status(*ok, {"cubeMathType": 4}) == INVALID
    assert _status(*ok, {}, dtype=D.BFLOAT16, product="910") == INVALID
    assert _status(*ok, {}, dtype=D.BFLOAT16, product="A2") == SUCCESS
    assert _status(*ok, {}, s_dtype=D.FLOAT16) == INVALID
    assert _status([2, 3, 4, 4], [2, 3, 8, 8], [2, 3, 8, 9], {}) == INVALID  # gradInput not self's
    assert _status([3, 4, 4], [2, 3, 8, 8], [2, 3, 8, 8], {}) == INVALID  # 3-d gradOutput, 4-d gradInput
    assert _status([1, 2, 3, 4, 4], [1, 2, 3, 8, 8], [1, 2, 3, 8, 8], {}) == INVALID  # 5-d
    descs = {"gradOutput": TensorDesc(D.FLOAT32, (2, 3, 4, 4)), "self": TensorDesc(D.FLOAT32, (2, 3, 8, 8)),
             "gradInput": TensorDesc(D.FLOAT32, (2, 3, 8, 8))}
    assert check(SPEC, "950", descs, {"kernelSize": (3,), "padding": None}).status == NULLPTR


def test_a_gradient_of_another_size_is_refused_when_the_case_loads(tmp_path):
    """gradOutput's planes must be the forward's pooled size: the window family refuses another, naming both."""
    text = ("op: aclnnAvgPool2dBackward\ncases:\n  - {name: bad, dtype: float32, shape: [1, 2, 8, 8], "
            "attributes: {kernelSize: [3], stride: [2], padding: [1]}, tensors: {gradOutput: {shape: [1, 2, 5, 4]}}}\n")
    (tmp_path / "c.yaml").write_text(text)
    r = run_cli("gen", tmp_path / "c.yaml", "-o", tmp_path / "out")
    assert r.exit_code == 2 and "pool [8, 8] into [4, 4]" in r.output, r.output


# ------------------------------------------------------------------ ops-nn's own suite

ATK = "atk_aclnnAvgPool2dBackward.json"  # pooling/avg_pool3_d_grad/tests/st/aclnnAvgPool2dBackward/


def test_ops_nn_atk_suite_imports_whole_and_its_small_cases_pass_the_kernel(tmp_path):
    """All 219 cases import (torch's attribute spellings mapped); the 80 of up to 100,000 elements (2.5 M in all) are
    generated, emulated and verified: every one PASSes, and so does the independent loop kernel on each. (All 219,
    327 M elements, pass the emulated kernel too: about a minute of gen.)"""
    cases, small = atk_small_cases_pass(tmp_path, SUITES / ATK, "avg_pool2d_backward", independent, "gradInput")
    assert len(cases) == 219 and len(small) == 80
