"""Issue 27's five user declarations (Elu, SmoothL1Loss, BatchNorm of any rank, EmbeddingDense, SwiGlu), each one
module in tests/user_ops/ written from docs/adding-an-op.md and docs/families.md, work as user ops:

- gen -> emulate (the module's own float32 kernel) -> verify passes every case, and the module's defect fails;
- every golden is the exact value rounded once to its dtype, checked against an oracle that shares no code with the
  modules or aclnn-cli: Fractions (mpmath at 200 bits where exp or sqrt enters) on the inputs read back through
  case.json alone (tests/harness.py), rounded here with integer arithmetic (`rounded`);
- SmoothL1Loss's `ties` case (bfloat16, mean over 2432 elements, as ops-nn's ATK case 165), whose goldens sit exactly
  halfway between two bfloat16 values, is proven exact there (ops-nn's ATK file itself runs on the bundled
  aclnnSmoothL1LossBackward since: tests/test_op_smooth_l1_loss_backward.py);
- BatchNorm's (C,) tensors are read along C, never broadcast along a last axis of the same length ([2, 3, 4, 3], a
  5-d [2, 3, 2, 4, 3]);
- the user BatchNorm, EmbeddingDense and SwiGlu give the bundled ops' goldens, bit for bit, on the same inputs.

Every CLI run is a fresh process (as a user's is), which keeps this process's registry to the bundled ops.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from collections import Counter
from exactq import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

import harness
from clifork import cli_process

DATA = Path(__file__).parent / "user_ops"
MODULES = ("my_elu_backward", "my_smooth_l1_loss_backward", "my_batch_norm_backward", "my_embedding_dense_backward",
           "my_swi_glu_grad")
DEFECTS = {"my_elu_backward": "my-elu-scale-dropped", "my_smooth_l1_loss_backward": "my-smooth-l1-mean-forgotten",
           "my_batch_norm_backward": "my-bn-no-projection", "my_embedding_dense_backward": "my-embedding-padding-added",
           "my_swi_glu_grad": "my-swiglu-out-b-without-a"}
CASES = {"my_elu_backward": 46, "my_smooth_l1_loss_backward": 65, "my_batch_norm_backward": 53,
         "my_embedding_dense_backward": 31, "my_swi_glu_grad": 28}  # (precision and contract cases)
PREC = 200
# dtype -> (significand bits, smallest normal exponent, largest finite value)
FORMATS = {"float32": (24, -126, float(np.finfo(np.float32).max)), "float16": (11, -14, 65504.0),
           "bfloat16": (8, -126, 3.3895313892515355e38)}


def cli(module: str, *args, ops: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ACLNN_CLI_OPS"}
    extra = ["--ops", str(DATA / f"{module}.py")] if ops else []
    return cli_process(*extra, *map(str, args), env=env)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """module -> its case file generated into a directory of its own (made on first use)."""
    made: dict[str, Path] = {}

    def get(module: str) -> Path:
        if module not in made:
            out = tmp_path_factory.mktemp(module) / "out"
            r = cli(module, "gen", DATA / f"{module}.yaml", "-o", out)
            assert r.returncode == 0, r.stderr
            made[module] = out
        return made[module]
    return get


# ------------------------------------------------------------------ reading a case, rounding the oracle's values

def positive(out: Path):
    for case in sorted(p.parent for p in out.glob("*/case.json")):
        m = harness.load(case)
        if m["expect_status"] == 0:
            yield case, m


def attrs(m: dict) -> dict:
    return {a["name"]: a["value"] for a in m.get("attributes", [])}


def read(case: Path, m: dict, name: str) -> np.ndarray | None:
    """An input's logical values as float64 (ints as int64), None where the case passes a null pointer."""
    t = harness.tensors(m)[name]
    if t.get("null"):
        return None
    v = harness.view(harness.storage(case, t), t)
    return v.astype(np.int64) if v.dtype.kind in "iu" else v.astype(np.float64)


def as_fraction(v) -> Fraction:
    if isinstance(v, mpmath.mpf):
        sign, man, exp, _ = v._mpf_
        return (-1) ** sign * Fraction(man) * Fraction(2) ** exp
    return Fraction(v)


def exponent(a: Fraction) -> int:
    """floor(log2(a)) of a positive Fraction, exactly."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    return e - 1 if a < Fraction(2) ** e else e


def rounded(v, dtype: str) -> float:
    """v (a Fraction or mpf) rounded once to dtype, half to even, as a float64."""
    precision, emin, top = FORMATS[dtype]
    v = as_fraction(v)
    if v == 0:
        return 0.0
    quantum = Fraction(2) ** (max(exponent(abs(v)), emin) - precision + 1)
    n, rest = divmod(abs(v), quantum)
    if rest * 2 > quantum or (rest * 2 == quantum and n % 2):
        n += 1
    r = float(n * quantum)
    assert r <= top, (v, dtype)
    return math.copysign(r, v)


def half_step(v: Fraction, dtype: str) -> Fraction:
    """Half the spacing of dtype's numbers around a normal v."""
    return Fraction(2) ** (exponent(abs(v)) - FORMATS[dtype][0])


def is_tie(v: Fraction, dtype: str) -> bool:
    """v lies exactly halfway between two neighbours of dtype (a normal number)."""
    if v == 0:
        return False
    q = abs(v) / half_step(v, dtype)
    return q.denominator == 1 and q.numerator % 2 == 1


def check(case: Path, m: dict, name: str, exact) -> int:
    """The golden of output `name` equals each exact value (logical order) rounded once; returns the count."""
    t = harness.tensors(m)[name]
    if t.get("null"):
        return 0
    got = harness.view(harness.storage(case, t, "golden"), t).astype(np.float64).reshape(-1)
    want = np.array([rounded(v, t["dtype"]) for v in np.asarray(exact, dtype=object).reshape(-1)])
    bad = np.flatnonzero(got != want)
    assert not bad.size, (case.name, name, bad.size, got[bad[:3]], want[bad[:3]])
    return got.size


def mp(v) -> mpmath.mpf:
    f = Fraction(v)
    return mpmath.mpf(f.numerator) / f.denominator


# ------------------------------------------------------------------ the loop and the declarations

@pytest.mark.parametrize("module", MODULES)
def test_gen_emulate_verify_passes_and_the_modules_defect_fails(generated, module, tmp_path):
    out = Path(shutil.copytree(generated(module), tmp_path / "out"))
    assert cli(module, "emulate", out).returncode == 0
    r = cli(module, "verify", out, "--json", tmp_path / "v.json")
    cases = json.loads((tmp_path / "v.json").read_text())["cases"]
    assert r.returncode == 0 and {c["status"] for c in cases} == {"PASS"}, r.stdout[-1500:]
    assert len(cases) == CASES[module]
    assert cli(module, "emulate", out, "--defect", DEFECTS[module]).returncode == 0
    r = cli(module, "verify", out, "--json", tmp_path / "d.json")
    failed = [c for c in json.loads((tmp_path / "d.json").read_text())["cases"] if c["status"] == "FAIL"]
    assert r.returncode == 1 and len(failed) >= 3, r.stdout[-1500:]


@pytest.mark.parametrize("module", MODULES)
def test_each_is_one_module_that_imports_no_bundled_op(module):
    """A single file, written from the docs: it imports the declaration API, families and helpers the docs name,
    never a bundled op's module (aclnn_cli.ops.<family package>)."""
    text = (DATA / f"{module}.py").read_text()
    imports = re.findall(r"^(?:from|import) (\S+)", text, re.M)
    assert not [i for i in imports if re.match(r"aclnn_cli\.ops\.(elementwise|rows|channels|split|scatter|groups)\b", i)]
    assert not [i for i in imports if not i.startswith(("aclnn_cli", "numpy", "fractions", "math"))], imports
    r = cli(module, "ops")
    assert r.returncode == 0 and r.stderr == "", r.stderr


# ------------------------------------------------------------------ Elu

def elu_exact(dy: float, x: float, a: dict):
    s, i, alpha = Fraction(a["scale"]), Fraction(a["inputScale"]), Fraction(a["alpha"])
    if x > 0:
        return Fraction(dy) * s
    if a["isResult"]:
        return Fraction(dy) * i * (Fraction(x) + alpha * s)
    with mpmath.workprec(PREC):
        return mp(dy) * mp(i) * mp(alpha) * mp(s) * mpmath.exp(mp(x) * mp(i))


def test_elu_goldens_are_the_exact_values_rounded_once(generated):
    checked = cases = 0
    for case, m in positive(generated("my_elu_backward")):
        a = attrs(m)
        dy, x = read(case, m, "gradOutput"), read(case, m, "selfOrResult")
        checked += check(case, m, "gradInput", [elu_exact(g, v, a) for g, v in zip(dy.reshape(-1), x.reshape(-1))])
        cases += 1
    assert cases == 38 and checked > 10_000


# ------------------------------------------------------------------ SmoothL1Loss

def smooth_l1_exact(case: Path, m: dict) -> list[Fraction]:
    """gradOut * (d / beta inside (-beta, beta), else sign(d)) / N, d = self - target, N = numel(self) for mean."""
    a = attrs(m)
    out = harness.tensors(m)["gradInput"]["shape"]
    x = read(case, m, "self")
    n = x.size if a["reduction"] == 1 else 1
    beta = Fraction(a["beta"])
    dy, x, y = (np.broadcast_to(read(case, m, k), out).reshape(-1) for k in ("gradOut", "self", "target"))
    want = []
    for g, p, q in zip(dy.tolist(), x.tolist(), y.tolist()):
        d = Fraction(p) - Fraction(q)
        want.append(Fraction(g) * (d / beta if abs(d) < beta else (d > 0) - (d < 0)) / n)
    return want


def test_smooth_l1_goldens_are_the_exact_values_rounded_once(generated):
    checked = cases = 0
    for case, m in positive(generated("my_smooth_l1_loss_backward")):
        checked += check(case, m, "gradInput", smooth_l1_exact(case, m))
        cases += 1
    assert cases == 55 and checked > 10_000


def ties_rounded_to_even(case: Path, m: dict, exact: list[Fraction]) -> tuple[int, int]:
    """Every exact value halfway between two bfloat16 values has the even neighbour as its golden: (how many went
    toward zero, how many away). A float64 value a hair off the tie, a float32 golden or rounding half away from
    zero gives the other neighbour for some of them."""
    t = harness.tensors(m)["gradInput"]
    bits = harness.view(harness.storage(case, t, "golden"), t).reshape(-1).view(np.uint16)
    toward = away = 0
    for i, v in enumerate(exact):
        if is_tie(v, "bfloat16"):
            golden = Fraction(float(harness.view(harness.storage(case, t, "golden"), t).reshape(-1)[i]))
            assert bits[i] % 2 == 0 and abs(golden - v) == half_step(v, "bfloat16"), (case.name, i)
            toward, away = toward + (abs(golden) < abs(v)), away + (abs(golden) > abs(v))
    return toward, away


def test_smooth_l1_ties_are_rounded_exactly(generated):
    """The `ties` case (as ops-nn's ATK case 165: a 0-d bfloat16 gradOut, mean over 8 * 19 * 16 = 2432 elements):
    where gradOut holds the factor 19, gradOut * d / 2432 is a dyadic number, for some elements exactly halfway
    between two bfloat16 values: a float64 value with any error bound straddles the boundary there, so only an
    exact path can round it. The module gives no `exact`; its rational reference on Fractions is that path, and the
    manifest says every golden is certified. Ties of both kinds (the even neighbour toward and away from zero)."""
    case = next(p.parent for p in generated("my_smooth_l1_loss_backward").glob("*-ties/case.json"))
    m = harness.load(case)
    assert m["golden"]["method"].endswith("exact through the reference on Fractions")
    assert m["golden"].get("uncertified_elements", 0) == 0
    exact = smooth_l1_exact(case, m)
    assert len(exact) == 2432 and check(case, m, "gradInput", exact) == 2432
    toward, away = ties_rounded_to_even(case, m, exact)
    assert (toward, away) == (1621, 811)  # (2432 elements cycling through 3 pairs: d = 1 + 2^-8 in 2 of them)


# ------------------------------------------------------------------ BatchNorm, any rank

FILLS = {"weight": 1, "runningMean": 0, "runningVar": 1, "saveMean": 0, "saveInvstd": 1}


def bn_exact(case: Path, m: dict) -> dict:
    """Per channel c = index c of axis 1 (np.take), ATen's algebra in Fractions (training) or with invstd in mpmath
    at 200 bits (inference): {output: exact values in logical order}."""
    a = attrs(m)
    dy, x = read(case, m, "gradOut"), read(case, m, "input")
    per = {n: read(case, m, n) for n in FILLS}
    per = {n: [Fraction(FILLS[n])] * x.shape[1] if v is None else [Fraction(float(e)) for e in v] for n, v in per.items()}
    gi = np.empty(x.shape, dtype=object)
    gw, gb = [], []
    for c in range(x.shape[1]):
        d = [Fraction(v) for v in np.take(dy, c, axis=1).reshape(-1).tolist()]
        xs = [Fraction(v) for v in np.take(x, c, axis=1).reshape(-1).tolist()]
        w, n = per["weight"][c], len(d)
        if a["training"]:
            mean, inv = per["saveMean"][c], per["saveInvstd"][c]
        else:
            mean = per["runningMean"][c]
            with mpmath.workprec(PREC):
                inv = as_fraction(1 / mpmath.sqrt(mp(per["runningVar"][c] + Fraction(a["eps"]))))
        s_dy = sum(d)
        dotp = sum(g * (v - mean) for g, v in zip(d, xs))
        if a["training"]:
            k = dotp * inv * inv / n
            dx = [(g - (v - mean) * k - s_dy / n) * inv * w for g, v in zip(d, xs)]
        else:
            dx = [g * inv * w for g in d]
        index = [slice(None)] * x.ndim
        index[1] = c
        gi[tuple(index)] = np.array(dx + [None], dtype=object)[:-1].reshape(np.take(x, c, axis=1).shape)
        gw.append(dotp * inv)
        gb.append(s_dy)
    return {"gradInput": gi, "gradWeight": gw, "gradBias": gb}


def test_batch_norm_goldens_of_every_rank_are_the_exact_values_rounded_once(generated):
    checked, ranks, modes = 0, set(), set()
    for case, m in positive(generated("my_batch_norm_backward")):
        for name, exact in bn_exact(case, m).items():
            checked += check(case, m, name, exact)
        ranks.add(len(harness.tensors(m)["input"]["shape"]))
        modes.add(attrs(m)["training"])
    assert ranks == {2, 3, 4, 5} and modes == {True, False} and checked > 150_000


@pytest.mark.parametrize("shape", ["2x3x4x3", "2x3x2x4x3"])
def test_batch_norm_per_channel_tensors_are_not_broadcast_along_the_last_axis(generated, shape):
    """[2, 3, 4, 3] and [2, 3, 2, 4, 3]: the last axis has C's length, so a (C,) weight or statistic broadcast as
    NumPy would (along the last axis) gives a plausible, wrong gradInput. The goldens are the per-channel answer
    (the test above) and differ from that one in most elements, in training and inference."""
    name = {"2x3x4x3": "w_equals_c", "2x3x2x4x3": "d_equals_c"}[shape]
    seen = 0
    for case, m in positive(generated("my_batch_norm_backward")):
        if f"-{name}-" not in case.name:
            continue
        a = attrs(m)
        dy, x = read(case, m, "gradOut"), read(case, m, "input")
        assert list(x.shape) == [int(v) for v in shape.split("x")] and x.shape[-1] == x.shape[1]
        gi = harness.tensors(m)["gradInput"]
        golden = harness.view(harness.storage(case, gi, "golden"), gi).astype(np.float64)
        exact = np.array([rounded(v, gi["dtype"]) for v in bn_exact(case, m)["gradInput"].reshape(-1)])
        assert np.array_equal(golden.reshape(-1), exact)
        w = read(case, m, "weight")  # (C,): NumPy lines it up with the last axis
        if a["training"]:
            mean, inv = read(case, m, "saveMean"), read(case, m, "saveInvstd")
            axes = tuple(i for i in range(x.ndim) if i != x.ndim - 1)
            h = (x - mean) * inv
            wrong = w * inv * (dy - dy.mean(axis=axes) - h * (dy * h).mean(axis=axes))
        else:
            wrong = dy * w / np.sqrt(read(case, m, "runningVar") + a["eps"])
        assert np.mean(np.abs(wrong - golden) > 0.05 * (np.abs(golden) + 0.05)) > 0.5, case.name
        seen += 1
    assert seen == 6


# ------------------------------------------------------------------ EmbeddingDense

def embedding_exact(case: Path, m: dict) -> list[Fraction]:
    a = attrs(m)
    grad = read(case, m, "grad")
    rows = grad.reshape(-1, grad.shape[-1])
    index = read(case, m, "indices").reshape(-1).tolist()
    counts = Counter(index)
    out = [[Fraction(0)] * rows.shape[1] for _ in range(a["numWeights"])]
    for row, w in zip(rows.tolist(), index):
        if 0 <= w < a["numWeights"] and w != a["paddingIdx"]:
            out[w] = [o + Fraction(v) / (counts[w] if a["scaleGradByFreq"] else 1) for o, v in zip(out[w], row)]
    return [v for r in out for v in r]


def test_embedding_goldens_are_the_exact_sums_rounded_once(generated):
    checked = cases = padded = 0
    for case, m in positive(generated("my_embedding_dense_backward")):
        checked += check(case, m, "out", embedding_exact(case, m))
        cases += 1
        pad = attrs(m)["paddingIdx"]
        if pad >= 0:  # (the padding row's rows exist, and its golden row is zero)
            assert pad in read(case, m, "indices").reshape(-1).tolist()
            out = harness.tensors(m)["out"]
            assert not harness.view(harness.storage(case, out, "golden"), out).astype(np.float64)[pad].any()
            padded += 1
    assert cases == 21 and padded == 6 and checked > 1_000


# ------------------------------------------------------------------ SwiGlu

def swiglu_exact(case: Path, m: dict) -> np.ndarray:
    dim = attrs(m)["dim"]
    x, dy = read(case, m, "x"), read(case, m, "yGrad")
    a, b = np.split(x, 2, axis=dim)
    out_a, out_b = np.empty(a.shape, dtype=object), np.empty(a.shape, dtype=object)
    with mpmath.workprec(PREC):
        for i in np.ndindex(*a.shape):
            s = 1 / (1 + mpmath.exp(-mp(a[i])))
            out_a[i] = mp(dy[i]) * (s + s * (1 - s) * mp(a[i])) * mp(b[i])
            out_b[i] = mp(dy[i]) * s * mp(a[i])
    return np.concatenate([out_a, out_b], axis=dim)


def test_swiglu_goldens_are_the_exact_values_rounded_once(generated):
    checked = cases = ties = 0
    for case, m in positive(generated("my_swi_glu_grad")):
        exact = swiglu_exact(case, m)
        checked += check(case, m, "out", exact)
        ties += sum(is_tie(as_fraction(v), harness.tensors(m)["out"]["dtype"]) for v in exact.reshape(-1))
        cases += 1
    assert cases == 20 and checked > 3_000 and ties >= 4  # (A = 0: yGrad * B / 2 halfway, settled by `exact`)


# ------------------------------------------------------------------ the same goldens as the bundled ops

def _values(v: np.ndarray) -> list:
    return [int(e) for e in v.reshape(-1)] if v.dtype.kind in "iu" else [float(e) for e in v.reshape(-1)]


def _bundled_case(case: Path, m: dict, op: str) -> dict:
    """A case of the bundled `op` giving every input of the user case by value (nulls as nulls), named as it."""
    ts = harness.tensors(m)
    driver = {"aclnnBatchNormBackward": "input", "aclnnEmbeddingDenseBackward": "grad", "aclnnSwiGluGrad": "x"}[op]
    inputs, tensors = {}, {}
    for name, t in ts.items():
        if t.get("null"):
            tensors[name] = {"nullptr": True}
        elif t["role"] == "input":
            inputs[name] = {"values": _values(read(case, m, name))}
            if name != driver:
                tensors[name] = {"shape": t["shape"], "dtype": t["dtype"]}
    return {"name": case.name.replace("-", "_"), "dtype": ts[driver]["dtype"], "shape": ts[driver]["shape"],
            "product": m["product"], "inputs": inputs, "tensors": tensors,
            "attributes": {k: [v] if isinstance(v, list) else v for k, v in attrs(m).items()}}


@pytest.mark.parametrize("module, op, picked", [
    ("my_batch_norm_backward", "aclnnBatchNormBackward", ("w_equals_c", "d_equals_c", "ranks-bfloat16-64x5",
                                                          "null_weight", "input_grad_only", "eps_double")),
    ("my_embedding_dense_backward", "aclnnEmbeddingDenseBackward", ("padding_and_freq", "int32", "rows")),
    ("my_swi_glu_grad", "aclnnSwiGluGrad", ("middle", "first", "ties", "near_root")),
])
def test_the_user_ops_goldens_equal_the_bundled_ops(generated, tmp_path, module, op, picked):
    """Each picked user case given by value to the bundled op (one case file, one gen): the same golden bytes."""
    mine = [(case, m) for case, m in positive(generated(module)) if any(f"-{p}" in case.name for p in picked)]
    cases = tmp_path / "bundled.yaml"
    cases.write_text(json.dumps({"op": op, "cases": [_bundled_case(case, m, op) for case, m in mine]}))
    out = tmp_path / "out"
    r = cli(module, "gen", cases, "-o", out, ops=False)
    assert r.returncode == 0, r.stderr
    compared = 0
    for case, m in mine:
        (bundled,) = [p.parent for p in out.glob(f"*-{case.name.replace('-', '_')}/case.json")]
        mb = harness.load(bundled)
        for t in m["tensors"]:
            if t["role"] != "output" or t.get("null"):
                continue
            tb = harness.tensors(mb)[t["name"]]
            ours = harness.view(harness.storage(case, t, "golden"), t)
            theirs = harness.view(harness.storage(bundled, tb, "golden"), tb)
            assert ours.tobytes() == theirs.tobytes(), (case.name, t["name"])
            compared += ours.size
    assert compared > 500
