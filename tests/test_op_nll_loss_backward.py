"""aclnnNLLLossBackward: the reference and exact path against an oracle written here, the 950 kernel and an
independent float32 implementation against it, the defects the gate must see, and the contract.

Oracle: the doc's formula (out[i, t_i] = -g * w[t_i], over totalWeight for mean, 0 elsewhere and on ignored
rows) element by element in Python Fractions with plain loops, rounded by mpmath at the dtype's precision;
no code shared with aclnn_cli's reference, exact or rounding. Blocks are built as the pipeline hands them
(docs/families.md): self (C) or (N, C) cut into rows of C classes, (k, C, 1) per input, target and a per-row
gradOutput (k, 1, 1).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from exactq import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.ops.rows.nll_loss_backward import SPEC, VARIANTS
from rowblocks import as_fractions, bundled_emulated, passing_bundled_records  # noqa: E402
from clifork import cli_process

U = 2.0**-24
FP32_T = 2.0**-13  # mere-mare's T for float32: a defect must be off by more than this somewhere
DTYPES = [D.FLOAT32, D.FLOAT16, D.BFLOAT16]
NONE, MEAN, SUM = 0, 1, 2


def rounded(x: np.ndarray, dtype: D.DType) -> np.ndarray:
    """Values as the dtype holds them, in float64."""
    with np.errstate(over="ignore"):
        return x.astype(np.float32).astype(dtype.np_dtype).astype(np.float64)


def block(rng, k: int, classes: int, dtype: D.DType, reduction: int, ignore: int = -100,
          ignored_share: float = 0.125, weight=None, total=None, grad=None) -> dict:
    """k rows of an (N, C) case as the pipeline hands them, inputs rounded to dtype (float64 arrays)."""
    target = rng.integers(0, classes, size=k)
    target[rng.random(k) < ignored_share] = ignore
    w = rounded(rng.uniform(-2, 2, classes) if weight is None else np.asarray(weight, float), dtype)
    per_row = reduction == NONE
    g = rounded(rng.normal(0, 1, k if per_row else 1) if grad is None else np.asarray(grad, float), dtype)
    tw = rounded(np.array([rng.uniform(1, 100) if total is None else total]), dtype)
    return {"gradOutput": np.broadcast_to(g.reshape(-1, 1, 1), (k, 1, 1)).copy(),
            "self": np.zeros((k, classes, 1)),
            "target": target.reshape(k, 1, 1).astype(np.int64),
            "weight": np.broadcast_to(w.reshape(1, classes, 1), (k, classes, 1)).copy(),
            "totalWeight": np.broadcast_to(tw.reshape(1, 1, 1), (k, classes, 1)).copy(),
            "reduction": reduction, "ignoreIndex": ignore, "batch": k}


def oracle(t: dict) -> list[list[Fraction]]:
    """The doc's formula, one Fraction per element, loops only."""
    k, classes = t["weight"].shape[:2]
    g = [Fraction(float(v)) for v in t["gradOutput"].reshape(-1)]
    w = [Fraction(float(v)) for v in t["weight"][0, :, 0]]
    tw = Fraction(float(t["totalWeight"].reshape(-1)[0]))
    rows = []
    for i in range(k):
        ti = int(t["target"][i, 0, 0])
        row = [Fraction(0)] * classes
        if ti != t["ignoreIndex"]:
            v = -g[i if len(g) > 1 else 0] * w[ti]
            row[ti] = v / tw if t["reduction"] == MEAN else v
        rows.append(row)
    return rows


def mp_round(q: Fraction, dtype: D.DType) -> float:
    """q rounded to the dtype's precision by mpmath (normal range only, which these inputs stay in)."""
    if q == 0:
        return 0.0
    with mpmath.workprec(dtype.precision):
        return float(mpmath.mpf(q.numerator) / q.denominator)


def aten_float32(t: dict) -> np.ndarray:
    """PyTorch's CPU nll_loss_backward (aten/src/ATen/native/LossNLL.cpp, nll_loss_backward_out_frame) in
    float32, written independently: grad = -(mean ? grad_output / total_weight : grad_output), then
    grad_input[i][t] = weight[t] * grad per row (none: -weight[t] * grad_output[i]), a loop over rows."""
    k, classes = t["weight"].shape[:2]
    f = np.float32
    out = np.zeros((k, classes, 1), dtype=f)
    w = t["weight"][0, :, 0].astype(f)
    g = t["gradOutput"].reshape(-1).astype(f)
    tw = f(t["totalWeight"].reshape(-1)[0])
    for i in range(k):
        ti = int(t["target"][i, 0, 0])
        if ti == t["ignoreIndex"]:
            continue
        if t["reduction"] == NONE:
            out[i, ti, 0] = -w[ti] * g[i]
        else:
            grad = -(g[0] / tw if t["reduction"] == MEAN else g[0])
            out[i, ti, 0] = w[ti] * grad
    return out


def float32_block(t: dict) -> dict:
    return {k: v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype == np.float64 else v
            for k, v in t.items()}


def oracle_rows(dtype: D.DType) -> list[dict]:
    """A few thousand rows per dtype: short rows (C = 1, 2, 7), a long one, every reduction, ignored rows
    (one block all ignored), zero weights and gradients, totalWeight far from 1."""
    rng = np.random.default_rng(19 + dtype.precision)
    blocks = []
    for reduction in (NONE, MEAN, SUM):
        for classes, k in ((1, 300), (2, 300), (7, 400), (33, 200), (4096, 2)):
            blocks.append(block(rng, k, classes, dtype, reduction))
        blocks.append(block(rng, 50, 5, dtype, reduction, ignore=3, ignored_share=1.0))  # every target ignored
        blocks.append(block(rng, 64, 6, dtype, reduction, ignore=0, weight=[0, -1, 2, 0, 3, -0.5],
                            grad=np.where(rng.random(64) < 0.2, 0.0, rng.normal(0, 1, 64))
                            if reduction == NONE else [0.0]))
        blocks.append(block(rng, 100, 9, dtype, reduction, total=3.0e-3))
        blocks.append(block(rng, 100, 9, dtype, reduction, total=6.0e3))
    return blocks


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_reference_and_exact_against_the_oracle(dtype):
    rows = 0
    for t in oracle_rows(dtype):
        want = oracle(t)
        flat = [q for row in want for q in row]
        ref = SPEC.reference(t)
        value, bound, scale = (a.reshape(-1) for a in (ref.value, ref.bound, ref.scale))
        err = np.array([abs(Fraction(float(v)) - q) for v, q in zip(value, flat)], dtype=object)
        assert all(e <= Fraction(float(b)) for e, b in zip(err, bound)), "a reference value outside its bound"
        assert all(abs(q) <= Fraction(float(s)) for q, s in zip(flat, scale))
        assert list(SPEC.exact(as_fractions(t)).reshape(-1)) == flat
        rows += t["weight"].shape[0]
    assert rows >= 3000


def test_mean_bound_is_needed_and_exact_settles_a_tie():
    """Mean's quotient is rounded in float64 (bound > 0); a tie of float16 needs the exact value, not it."""
    t = block(np.random.default_rng(1), 1, 3, D.FLOAT32, MEAN, weight=[1.0, 1.0, 1.0], grad=[1.0], total=3.0)
    t["target"][:] = 1
    ref = SPEC.reference(t)
    err = abs(Fraction(float(ref.value[0, 1, 0])) - Fraction(-1, 3))
    assert 0 < err <= Fraction(float(ref.bound[0, 1, 0]))
    assert SPEC.exact(as_fractions(t))[0, 1, 0] == Fraction(-1, 3)
    # a float16 tie: g * w = 1 + 2^-11 lies halfway between two float16 values; the exact path rounds it to even
    t2 = block(np.random.default_rng(2), 1, 2, D.FLOAT32, SUM, weight=[1.0, 1 + 2.0**-11], grad=[1.0])
    t2["target"][:] = 1
    q = SPEC.exact(as_fractions(t2))[0, 1, 0]
    assert q == -(1 + Fraction(1, 2048)) and D.round_fraction(q, D.FLOAT16) == -1.0  # ties to even


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_kernel_and_aten_within_the_gate_premise(dtype):
    """Both float32 implementations within (log2 C + 8) u scale of the exact value on every element."""
    for t in oracle_rows(dtype):
        want = np.array([[float(q) for q in row] for row in oracle(t)]).reshape(t["weight"].shape)
        exact = np.array([[q for q in row] for row in oracle(t)], dtype=object).reshape(-1)
        scale = SPEC.reference(t).scale.reshape(-1)
        classes = t["weight"].shape[1]
        allowed = (math.log2(max(classes, 2)) + 8) * U * scale
        t32 = float32_block(t)
        for name, got in (("kernel", SPEC.kernel(t32)), ("aten", aten_float32(t32))):
            got = np.asarray(got, dtype=np.float64).reshape(-1)
            off = np.array([abs(Fraction(float(a)) - q) for a, q in zip(got, exact)], dtype=object)
            assert all(o <= Fraction(float(a)) for o, a in zip(off, allowed)), name
            assert np.array_equal(got == 0, want.reshape(-1) == 0), name  # zeros exactly where the formula's are


def test_kernel_rounds_like_the_source():
    """fl32(fl32(g / tw) * w), negated: one case where that differs from the correctly rounded quotient."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        t = float32_block(block(rng, 1, 4, D.FLOAT32, MEAN))
        t["target"][:] = 2
        g, tw, w = (np.float32(t[n].reshape(-1)[i]) for n, i in (("gradOutput", 0), ("totalWeight", 0), ("weight", 2)))
        assert SPEC.kernel(t)[0, 2, 0] == -((g / tw) * w)
        assert SPEC.kernel(t)[0, 2, 0].dtype == np.float32


def defect_blocks() -> list[dict]:
    """Blocks of the bundled cases' kinds: each reduction, 1-D and 2-D self, ignoreIndex a class and not."""
    rng = np.random.default_rng(7)
    blocks = []
    for reduction in (NONE, MEAN, SUM):
        blocks.append(block(rng, 64, 10, D.FLOAT32, reduction, total=7.5))
        blocks.append(block(rng, 64, 10, D.FLOAT32, reduction, ignore=3))
        blocks.append(block(rng, 1, 300, D.FLOAT32, reduction))  # a 1-D self: one row
    return blocks


@pytest.mark.parametrize("name", sorted(n for n, f in VARIANTS.items() if f.variant_kind == "defect"))
def test_each_defect_is_visible_to_the_gate(name):
    fn, seen = VARIANTS[name], False
    for t in defect_blocks():
        exact = np.array([float(q) for row in oracle(t) for q in row])
        scale = SPEC.reference(t).scale.reshape(-1)
        got = np.asarray(fn(float32_block(t)), dtype=np.float64).reshape(-1)
        seen |= bool((np.abs(got - exact) > FP32_T * np.maximum(np.abs(exact), scale) + 1e-300).any())
    assert seen, f"{name} is never off by more than fp32's T"


@pytest.mark.parametrize("name", sorted(n for n, f in VARIANTS.items() if f.variant_kind == "legitimate"))
def test_legitimate_variants_within_the_premise(name):
    for t in defect_blocks() + oracle_rows(D.FLOAT32):
        exact = np.array([float(q) for row in oracle(t) for q in row])
        scale = SPEC.reference(t).scale.reshape(-1)
        got = np.asarray(VARIANTS[name](float32_block(t)), dtype=np.float64).reshape(-1)
        assert (np.abs(got - exact) <= 4 * U * scale).all(), name


def test_special_values_and_traps():
    rng = np.random.default_rng(3)
    # every target ignored: all zeros, whatever totalWeight (0 here)
    t = block(rng, 8, 4, D.FLOAT32, MEAN, ignore=-100, ignored_share=1.0, total=0.0)
    assert (SPEC.reference(t).value == 0).all() and (SPEC.kernel(float32_block(t)) == 0).all()
    # totalWeight 0 with kept targets: -(g / 0) * w, as IEEE (inf, or NaN where w is 0)
    t = block(rng, 3, 3, D.FLOAT32, MEAN, weight=[2.0, 0.0, -1.0], grad=[1.5], total=0.0, ignored_share=0.0)
    t["target"][:, 0, 0] = [0, 1, 2]
    v = SPEC.reference(t).value
    assert v[0, 0, 0] == -np.inf and np.isnan(v[1, 1, 0]) and v[2, 2, 0] == np.inf
    k = SPEC.kernel(float32_block(t))
    assert k[0, 0, 0] == -np.inf and np.isnan(k[1, 1, 0]) and k[2, 2, 0] == np.inf
    assert (v[~np.eye(3, dtype=bool).reshape(3, 3, 1)] == 0).all()
    # a NaN weight of a class no row targets changes nothing; inf gradOutput on an ignored row neither
    t = block(rng, 4, 3, D.FLOAT32, NONE, weight=[1.0, np.nan, 2.0], grad=[np.inf, 1.0, 1.0, 1.0], ignored_share=0.0)
    t["target"][:, 0, 0] = [-100, 0, 2, 2]
    k = SPEC.kernel(float32_block(t))
    assert np.isfinite(k).all() and (k[0] == 0).all() and k[1, 0, 0] == -1.0 and k[2, 2, 0] == -2.0
    # a uint8 target (0..255) never equals a negative ignoreIndex: 156 is a class, not -100
    t = block(rng, 2, 200, D.FLOAT32, SUM, ignore=-100, ignored_share=0.0, grad=[1.0])
    t["target"][:, 0, 0] = [156, 0]
    assert SPEC.kernel(float32_block(t))[0, 156, 0] != 0


def test_edge_quotient_out_of_float32_range():
    """Mean with g / tw past float32's range: the golden is the exact value, the kernel's inf is accepted."""
    t = block(np.random.default_rng(4), 1, 2, D.FLOAT32, MEAN, weight=[1e-30, 1.0], grad=[1e30], total=1e-20,
              ignored_share=0.0)
    t["target"][:] = 0
    t["gradOutput"][:] = np.float32(1e30)
    t["totalWeight"][:] = np.float32(1e-20)
    t["weight"][:, 0] = np.float32(1e-30)
    exact = float(SPEC.exact(as_fractions(t))[0, 0, 0])
    assert math.isfinite(exact) and abs(SPEC.reference(t).value[0, 0, 0] - exact) <= 1e-15 * abs(exact)
    where, device = SPEC.edge(float32_block(t))
    assert where[0, 0, 0] and device[0, 0, 0] == -np.inf and not where[0, 1, 0]
    t["totalWeight"][:] = 2.0  # an ordinary quotient is no edge
    assert not SPEC.edge(float32_block(t))[0].any()


def test_out_of_range_target_is_one_line():
    from aclnn_cli.errors import UserError

    t = block(np.random.default_rng(6), 2, 3, D.FLOAT32, NONE, ignored_share=0.0)
    t["target"][1] = 3
    with pytest.raises(UserError, match=r"a target is 3, outside \[0, 3\) and not ignoreIndex -100"):
        SPEC.reference(t)



def test_out_of_range_target_from_a_case_file_names_the_file_and_case(tmp_path):
    """A refusal of the op's functions on a case's values (here ops-nn's own ATK file draws targets in
    [-100, 100]) is one line naming the case file and the case, exit 2, nothing left behind."""
    text = ("op: aclnnNLLLossBackward\ncases:\n  - {name: bad, dtype: float32, shape: [4, 3], attributes: {reduction: 0},\n"
            "     inputs: {target: {values: [0, 1, -8, 2]}}}\n")
    cases, stderr = refused_by_gen(tmp_path, text, "aclnnNLLLossBackward: a target is -8")
    assert f"{cases}: case 'bad' (nll_loss_backward-bad): key 'inputs.target': aclnnNLLLossBackward" in stderr, stderr
    out = tmp_path / "out"
    assert not [p.name for p in (out.iterdir() if out.exists() else []) if "nll_loss_backward-bad" in p.name]  # (temporaries too)


def refused_by_gen(tmp_path: Path, text: str, want: str) -> tuple[Path, str]:
    """A case file `text` that gen refuses: exit 2, one line holding `want`, no traceback. (its path, gen's stderr)"""
    cases = tmp_path / "nll.yaml"
    cases.write_text(text)
    r = cli("gen", cases, "-o", tmp_path / "out")
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1 and want in r.stderr, r.stderr
    return cases, r.stderr

SHAPES = {"gradOutput": (4,), "self": (4, 5), "target": (4,), "weight": (5,), "totalWeight": (1,), "out": (4, 5)}


def descs(**changes):
    from aclnn_cli.ops.contract import TensorDesc

    shapes = {**SHAPES, **changes}
    return {n: TensorDesc(D.FLOAT32, s) for n, s in shapes.items()}  # (the shape rule reads shapes only)


@pytest.mark.parametrize("changes, attrs, rule", [
    ({}, {"reduction": 0}, None),
    ({"gradOutput": ()}, {"reduction": 1}, None),
    ({"gradOutput": (1,)}, {"reduction": 2}, None),
    ({"self": (5,), "target": (), "gradOutput": (), "out": (5,)}, {"reduction": 0}, None),
    ({"totalWeight": (1, 1, 1)}, {"reduction": 0}, None),
    ({"self": (5,), "target": (1,), "gradOutput": (), "out": (5,)}, {"reduction": 1}, "does not match"),
    ({"self": (1,), "target": (1,), "gradOutput": (), "out": (1,), "weight": (1,)}, {"reduction": 1}, None),
    ({"self": (2, 4, 5), "out": (2, 4, 5)}, {"reduction": 0}, "self has 3 dims"),
    ({"target": (4, 1)}, {"reduction": 0}, "target has 2 dims"),
    ({"target": (3,)}, {"reduction": 0}, "does not match"),
    ({"target": ()}, {"reduction": 1}, "does not match"),
    ({"weight": (4,)}, {"reduction": 0}, "weight shape"),
    ({"weight": (1, 5)}, {"reduction": 0}, "weight shape"),
    ({"totalWeight": (2,)}, {"reduction": 0}, "totalWeight shape"),
    ({"gradOutput": ()}, {"reduction": 0}, "gradOutput shape"),
    ({"gradOutput": (4,)}, {"reduction": 1}, "gradOutput shape"),
    ({"gradOutput": (1, 1)}, {"reduction": 2}, "gradOutput shape"),
    ({"out": (4, 6)}, {"reduction": 0}, "out shape"),
])
def test_shape_rule(changes, attrs, rule):
    got = SPEC.contract.shape_rule(descs(**changes), attrs)
    assert (got is None) if rule is None else (rule in got)


@pytest.mark.parametrize("reduction, ok", [(0, True), (1, True), (2, True), (3, False), (-1, False)])
def test_attribute_rule(reduction, ok):
    assert (SPEC.contract.attribute_rule({"reduction": reduction, "ignoreIndex": -100}) is None) == ok


# (e) the bundled cases through gen -> emulate -> verify, as a user runs them (one CLI process each)

INTEGERS = {"int64": np.int64, "int32": np.int32, "uint8": np.uint8}


def cli(*args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ACLNN_CLI_OPS"}
    return cli_process(*map(str, args), env=env)


def view(case: Path, t: dict, key: str = "file") -> np.ndarray:
    """A tensor's logical values through its manifest's shape, strides and offset."""
    dtype = INTEGERS.get(t["dtype"]) or D.lookup(t["dtype"]).np_dtype
    storage = np.fromfile(case / t[key], dtype=dtype)
    item = storage.itemsize
    return np.lib.stride_tricks.as_strided(storage[t["offset"]:], t["shape"], [s * item for s in t["strides"]]).copy()


def round_to(q: Fraction, dtype: D.DType) -> float:
    """q to nearest, ties to even, subnormals included: a multiple of the quantum of q's binade (or of the
    smallest normal's, below it), overflow to inf."""
    if q == 0:
        return 0.0
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    e -= Fraction(2) ** e > a  # now 2^e <= a < 2^(e + 1)
    quantum = Fraction(2) ** (max(e, dtype.emin) - dtype.precision + 1)
    r = float(round(a / quantum) * quantum)  # Fraction rounds half to even
    return math.copysign(r if r <= dtype.max_finite else math.inf, q)


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced) -> Path:
    return bundled_emulated(tmp_path_factory, bundled_produced, "nll_loss_backward")


def test_bundled_cases_pass_with_the_950_kernel(bundled_produced):
    """Every bundled case PASSes, as the session's bundled suite judged the emulated kernel's dumps (the same dumps
    `suite` copies: rowblocks.bundled_records)."""
    cases = passing_bundled_records(bundled_produced, "nll_loss_backward")
    contract = sum(c["kind"] == "contract" for c in cases)
    assert len(cases) - contract >= 100 and contract >= 15


def test_bundled_goldens_against_the_oracle(suite):
    """Every positive case with finite inputs and a nonzero totalWeight: golden = the oracle rounded once."""
    checked = 0
    for case in sorted(suite.iterdir()):
        m = json.loads((case / "case.json").read_text())
        if m["expect_status"] != 0:
            continue
        ts = {t["name"]: t for t in m["tensors"]}
        attrs = {a["name"]: a["value"] for a in m["attributes"]}
        ins = {n: view(case, ts[n]).astype(np.float64 if n != "target" else np.int64)
               for n in ("gradOutput", "weight", "totalWeight", "target")}
        if not all(np.isfinite(ins[n]).all() for n in ("gradOutput", "weight", "totalWeight")) \
                or (attrs["reduction"] == MEAN and ins["totalWeight"].reshape(-1)[0] == 0):
            continue
        out = ts["out"]
        if 0 in out["shape"]:
            continue
        dtype = D.lookup(out["dtype"])
        gold = view(case, out, "golden").astype(np.float64).reshape(-1, max(out["shape"][-1:] or [1]))
        want = np.zeros(gold.shape)
        g, w, tw = ins["gradOutput"].reshape(-1), ins["weight"].reshape(-1), ins["totalWeight"].reshape(-1)[0]
        for i, ti in enumerate(ins["target"].reshape(-1)):
            if ti != attrs["ignoreIndex"]:
                q = -Fraction(g[i if g.size > 1 else 0]) * Fraction(w[ti])
                want[i, ti] = round_to(q / Fraction(tw) if attrs["reduction"] == MEAN else q, dtype)
        assert np.array_equal(gold, want), case.name
        checked += 1
    assert checked >= 100


# (Each variant through emulate and verify on the bundled cases: tests/test_defects.py's matrix.)
