"""aclnnSigmoidBackward's complex64 and complex128 (the AI CPU's conj((1 - y) y) dy): goldens against a Fraction
oracle, the emulated kernel against the source's arithmetic by hand, the allowance against correct and broken
kernels, ops-nn's ATK suite, and the refusals.

Oracle (no code shared with aclnn_cli): the expanded components, y = a + bi, dy = c + di,
R = a - a^2 + b^2, J = b (1 - 2a) (conj((1 - y) y) = R - iJ), Re = cR + dJ, Im = dR - cJ, in Fractions, rounded
by mpmath's from_rational at the component's precision (every value here is in the normal range).
"""

from __future__ import annotations

import json
import os
import math
from exactq import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
import yaml
from mpmath.libmp import from_rational, to_float

from aclnn_cli.golden.rounding import golden
from aclnn_cli.judge.complexerr import allowance, complex_errors
from aclnn_cli.ops.complexparts import NoRelativeBound, Parts, formula_gamma
from aclnn_cli.ops.elementwise.sigmoid_backward import SPEC
from aclnn_cli.tensor import dtypes as D

from helpers import logical, manifest, read_storage, read_yaml, run_cli, tensor, write_yaml
REPO = Path(__file__).resolve().parent.parent

BUNDLED = REPO / "aclnn_cli" / "cases" / "bundled" / "sigmoid_backward.yaml"
ATK = REPO / "tests" / "ops_nn_suites" / "atk_aclnnSigmoidBackward.json"
COMPLEX = [D.COMPLEX64, D.COMPLEX128]
VARIANTS = {"conj-missing": False, "real-part-only": False, "complex64-compute": False, "sign-slip": False,
            "conj-each": True}


def oracle(y: complex, dy: complex, bits: int) -> tuple[float, float]:
    """Re and Im of conj((1 - y) y) dy exactly, each rounded to `bits` significant bits (nearest even)."""
    a, b, c, d = (Fraction(v) for v in (y.real, y.imag, dy.real, dy.imag))
    r, j = a - a * a + b * b, b * (1 - 2 * a)
    parts = (c * r + d * j, d * r - c * j)
    return tuple(0.0 if p == 0 else to_float(from_rational(p.numerator, p.denominator, bits, "n")) for p in parts)


@pytest.fixture(scope="module")
def complex_out(tmp_path_factory):
    """The bundled complex cases of SigmoidBackward, generated and emulated."""
    root = tmp_path_factory.mktemp("complex")
    suite = read_yaml(BUNDLED)
    suite["cases"] = [c for c in suite["cases"] if c["name"].startswith("complex")]
    out = root / "out"
    assert run_cli("gen", write_yaml(root, yaml.safe_dump(suite)), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0
    return out


def _case_values(case_dir):
    m = manifest(case_dir)
    got = {n: logical(case_dir, tensor(m, n)).reshape(-1) for n in ("gradOutput", "output")}
    out = tensor(m, "gradInput")
    shape = out["shape"]
    dy, y = (np.broadcast_to(logical(case_dir, tensor(m, n)), shape).reshape(-1) for n in ("gradOutput", "output"))
    return D.lookup(out["dtype"]), dy, y, logical(case_dir, out, "golden").reshape(-1), got


def test_bundled_complex_goldens_are_the_oracle_rounded_once(complex_out):
    """Every finite element of every bundled complex case, both components bit for bit (zero signs aside), and the
    cases hold cancelling components: a part below 2^-20 of |result| while the other is not."""
    checked, cancelling = {}, {}
    for case_dir in sorted(p for p in complex_out.iterdir() if p.is_dir()):
        dtype, dy, y, g, _ = _case_values(case_dir)
        bits = dtype.component.precision
        for k in range(g.size):
            if not (np.isfinite(dy[k]) and np.isfinite(y[k])):
                continue
            re, im = oracle(complex(y[k]), complex(dy[k]), bits)
            assert (re, im) == (float(g[k].real), float(g[k].imag)), (case_dir.name, k)
            checked[dtype.name] = checked.get(dtype.name, 0) + 1
            small, big = sorted((abs(re), abs(im)))
            cancelling[dtype.name] = cancelling.get(dtype.name, 0) + (0 < small < 2.0**-20 * big)
    assert checked["complex64"] > 1500 and checked["complex128"] > 1500
    assert cancelling["complex64"] >= 4 and cancelling["complex128"] >= 8


def test_golden_exact_where_float64_arithmetic_is_not():
    """complex128 needs the exact path: with dy = -J + iR (float64's R and J), Re = cR + dJ cancels to the size of
    their roundings, and the expanded formula in float64 misrounds it; the Dyadic path agrees with the oracle."""
    rng = np.random.default_rng(11)
    a, b = rng.uniform(-2, 2, 64), rng.uniform(-2, 2, 64)
    r, j = a - a * a + b * b, b * (1 - 2 * a)
    y, dy = a + 1j * b, -j + 1j * r
    g, exact = golden(SPEC, {"gradOutput": dy, "output": y}, D.COMPLEX128)
    assert exact.exact == 64
    naive = dy.real * r + dy.imag * j
    assert (naive != g.real).mean() > 0.5
    assert all(oracle(complex(y[k]), complex(dy[k]), 53) == (g[k].real, g[k].imag) for k in range(64))


def _random(dtype: D.DType, n: int = 100_000, lo: float = -3.0, hi: float = 3.0, seed: int = 3):
    rng = np.random.default_rng(seed)
    part = dtype.component.np_dtype
    a, b, c, d = (rng.uniform(lo, hi, n).astype(part) for _ in range(4))
    return (a + 1j * b.astype(np.float64)).astype(dtype.np_dtype), (c + 1j * d.astype(np.float64)).astype(dtype.np_dtype)


@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda d: d.name)
def test_emulated_kernel_is_the_source_expression_by_hand(dtype):
    """std::conj((one - y) * y) * dy with the standard formula, each float operation rounded once in T, written out
    by hand: the emulated kernel's bits (Parts), on every machine (NumPy's complex multiply differs by CPU)."""
    y, dy = _random(dtype)
    t = dtype.component.np_dtype.type
    a, b, c, d = y.real, y.imag, dy.real, dy.imag
    pr, pi = t(1) - a, t(0) - b
    qr, qi = pr * a - pi * b, pr * b + pi * a
    wr, wi = qr * c - (-qi) * d, qr * d + (-qi) * c
    got = SPEC.complex_formula({"gradOutput": Parts.of(dy), "output": Parts.of(y)}).numpy()
    assert got.dtype == dtype.np_dtype
    assert np.array_equal(got.real, wr) and np.array_equal(got.imag, wi)


@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda d: d.name)
def test_allowance_passes_correct_orders_and_fails_the_defects(dtype):
    """|error| / allowance on 100,000 random points: the kernel, NumPy's own complex arithmetic (FMA or not) and
    the conj-each order stay below 1; each complex defect is far above it. A per-component relative error of the
    correct kernel is large where a part cancels (why the judgement is in modulus)."""
    y, dy = _random(dtype)
    g, _ = golden(SPEC, {"gradOutput": dy, "output": y}, dtype)
    g128 = g.astype(np.complex128)
    allow = allowance(g128, dtype, traced_gamma(dtype))

    def ratio(z):
        return float(np.max(np.abs(np.asarray(z).astype(np.complex128) - g128) / allow))

    def run(name=None):
        t = {"gradOutput": Parts.of(dy), "output": Parts.of(y)}
        z = (SPEC.variants[name] if name else SPEC.complex_formula)(t)
        return z.numpy() if isinstance(z, Parts) else z

    assert 0.2 < ratio(run()) < 1.0
    assert ratio(((1 - y) * y).conj() * dy) < 1.0  # (NumPy's complex multiply)
    for name, legit in VARIANTS.items():
        if name == "complex64-compute" and dtype is D.COMPLEX64:
            continue  # (the kernel itself there)
        assert (ratio(run(name)) < 1.0) == legit, name
    assert ratio(run("complex64-compute")) > 1e6 or dtype is D.COMPLEX64
    k = run()
    with np.errstate(all="ignore"):
        per_part = np.maximum(np.abs(k.real - g.real) / np.abs(g.real), np.abs(k.imag - g.imag) / np.abs(g.imag))
    assert np.nanmax(per_part) > 2.0 ** -13 if dtype is D.COMPLEX64 else np.nanmax(per_part) > 2.0 ** -40


def traced_gamma(dtype) -> float:
    """The allowance's gamma for SigmoidBackward's complex_formula, as verify traces it (judging.complex_gamma)."""
    return formula_gamma(SPEC.complex_formula, ("gradOutput", "output"), {}, dtype.component.precision)


@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda d: d.name)
def test_gamma_traced_from_the_formula_bounds_its_product_form_from_above(dtype):
    """conj((1 - y) y) dy traced: one subtraction, two products, gamma = (1 + u)(1 + sqrt(5) u)^2 - 1 at 60 digits,
    against the float64 value the allowance uses: above it, by less than 2^-40 of it (complex128's u is 2^-53:
    1 + u in float64 would drop it)."""
    with mpmath.workdps(60):
        u = mpmath.mpf(2) ** -dtype.component.precision
        exact = (1 + u) * (1 + mpmath.sqrt(5) * u) ** 2 - 1
        got = mpmath.mpf(traced_gamma(dtype))
        assert exact <= got < exact * (1 + mpmath.mpf(2) ** -40)


@pytest.mark.parametrize("formula, sums, products", [
    (lambda t: t["a"] * t["b"] * t["a"], 0, 2),
    (lambda t: (t["a"] - 2.5).conj() * (t["b"] + t["a"]) * 3, 2, 2),  # (times a real: a product, sqrt(5) u)
    (lambda t: t["a"], 0, 0),
])
def test_gamma_counts_each_rounding_of_any_product_chain(formula, sums, products):
    for precision in (24, 53):
        with mpmath.workdps(60):
            u = mpmath.mpf(2) ** -precision
            exact = (1 + u) ** sums * (1 + mpmath.sqrt(5) * u) ** products - 1
            got = mpmath.mpf(formula_gamma(formula, ("a", "b"), {}, precision))
            assert exact <= got <= exact * (1 + mpmath.mpf(2) ** -40) + mpmath.mpf(2) ** -1074


@pytest.mark.parametrize("formula", [lambda t: t["a"] * t["b"] + t["a"], lambda t: 1 - t["a"] * t["a"],
                                     lambda t: (t["a"] - t["b"]) - t["a"]])
def test_a_sum_of_rounded_values_has_no_relative_bound(formula):
    """Cancellation: a sum with a rounded operand can lose every digit, so no gamma follows (register refuses such a
    formula: tests/test_user_ops.py)."""
    with pytest.raises(NoRelativeBound):
        formula_gamma(formula, ("a", "b"), {}, 24)


def test_complex_errors_judge_nan_and_infinities_by_component():
    nan, inf = math.nan, math.inf
    g = np.array([complex(nan, nan), complex(inf, nan), complex(inf, 1.0), complex(-inf, 0.0), 1 + 1j], np.complex64)
    a = np.array([complex(nan, 0.0), complex(nan, nan), complex(inf, 2.0), complex(inf, 0.0), 1 + 1j], np.complex64)
    e = complex_errors(a, g, 2.0**-126, D.COMPLEX64, traced_gamma(D.COMPLEX64))
    assert e.nonfinite.tolist() == [0, 1, 2, 3] and e.special.tolist() == [3]  # (a NaN part: NaN; -inf vs inf)
    assert e.rel[4] == 0 and e.compared == 1


@pytest.mark.slow
def test_ops_nn_atk_suite_imports_every_complex_case_and_passes(tmp_path):
    """ops-nn's sigmoid_grad ATK file as it is: its 66 complex entries import, up to 1.46 M elements, and pass on the
    emulated kernel; a conj-missing kernel fails every one whose output is not all real."""
    entries = json.loads(ATK.read_text())
    complex_entries = [e for e in entries if e["inputs"][0]["dtype"].startswith("complex")]
    assert len(complex_entries) == 66
    converted = run_cli("convert", ATK, "-o", tmp_path / "yaml")  # (the whole file imports as it is: 204 cases)
    assert converted.exit_code == 0 and "skipped" not in converted.output, converted.output
    assert sum(len(read_yaml(p)["cases"]) for p in (tmp_path / "yaml").glob("*.yaml")) == 204
    src = tmp_path / "complex" / ATK.name  # (its complex entries alone run here; all 204: make catalogue)
    src.parent.mkdir()
    src.write_text(json.dumps(complex_entries))
    out = tmp_path / "out"
    assert run_cli("gen", src, "-o", out).exit_code == 0
    ids = [p.name for p in out.iterdir() if p.is_dir()
           if tensor(manifest(p), "gradInput")["dtype"].startswith("complex")]
    assert len(ids) == 66 == len(list(out.glob("*/case.json")))
    assert run_cli("emulate", out).exit_code == 0
    result = run_cli("verify", out, "--json", out / "v.json")
    assert result.exit_code == 0, result.output[-2000:]
    verdicts = {c["case_id"]: c for c in json.loads((out / "v.json").read_text())["cases"]}
    assert all(verdicts[i]["status"] == "PASS" and verdicts[i]["standard"] == "complex" for i in ids)
    assert run_cli("emulate", out, "--defect", "conj-missing").exit_code == 0
    assert run_cli("verify", out, "--json", out / "d.json").exit_code == 1
    failed = {c["case_id"] for c in json.loads((out / "d.json").read_text())["cases"] if c["status"] == "FAIL"}

    def shows_conj(i: str) -> bool:  # (y not real, dy not all NaN: conj changes a value or an infinity's sign)
        m = manifest(out / i)
        y, dy = (read_storage(out / i, tensor(m, n)) for n in ("output", "gradOutput"))  # (contiguous)
        return bool((y.imag != 0).any() and not np.isnan(dy).all())

    assert failed == {i for i in ids if shows_conj(i)} and len(failed) > 50


REFUSALS = [
    ("op: aclnnSigmoidBackward\ncases: [{name: mix, shape: [4], dtype: complex64, tensors: {output: {dtype: float32}}}]",
     "complex call takes every tensor in that one complex dtype"),
    ("op: aclnnSiluBackward\ncases: [{name: c, shape: [4], dtype: complex64}]", "complex64"),
    ("op: aclnnSigmoidBackward\ncases: [{name: s, shape: [4], dtype: complex128, standard: allclose}]",
     "has no complex rule"),
    ("op: aclnnSigmoidBackward\ncases: [{name: t, shape: [4], dtype: complex64, tolerance: {T: 0.01}}]",
     "takes no tolerance"),
    ("op: aclnnSigmoidBackward\ncases: [{name: f, shape: [4], inputs: {output: {complex: [{constant: 1}, "
     "{constant: 2}]}}}]", "'complex' fills a complex tensor"),
    ("op: aclnnSigmoidBackward\ncases: [{name: a, dtype: complex64, inputs: {output: {all_values: true}}}]",
     "does not fill a complex tensor"),
]


@pytest.mark.parametrize("text,needle", REFUSALS, ids=["mixed", "other-op", "standard", "tolerance", "fill-on-real",
                                                        "all-values"])
def test_refusals_are_one_line(tmp_path, text, needle):
    result = run_cli("gen", write_yaml(tmp_path, text), "-o", tmp_path / "out")
    assert result.exit_code == 2 and needle in result.output and "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1, result.output


def test_the_modulus_is_the_same_on_every_cpu_and_within_two_ulps():
    """complexerr.modulus (what the reports' moduli and the allowance read) uses IEEE's basic operations only: the
    same bits with NumPy's dispatch limited to the oldest x86-64 (np.abs of a complex changes there); within 2 ulps
    of the exact |z| (mpmath), at huge and tiny parts too; an infinite part inf, a NaN part NaN."""
    import hashlib
    import subprocess
    import sys

    import mpmath

    from aclnn_cli.judge.complexerr import modulus
    from bundled_digest import limited_to_baseline

    code = ("import numpy as np, hashlib; from aclnn_cli.judge.complexerr import modulus; "
            "r = np.random.default_rng(4); z = np.ldexp(r.normal(size=5000), r.integers(-1000, 1000, 5000)) "
            "+ 1j * np.ldexp(r.normal(size=5000), r.integers(-1000, 1000, 5000)); "
            "print(hashlib.sha256(modulus(z).tobytes()).hexdigest())")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env},
                           check=True).stdout for env in ({}, limited_to_baseline())]
    assert runs[0] == runs[1] and len(runs[0]) == 65
    r = np.random.default_rng(4)
    z = np.ldexp(r.normal(size=400), r.integers(-1000, 1000, 400)) + 1j * np.ldexp(r.normal(size=400),
                                                                                 r.integers(-1000, 1000, 400))
    got = modulus(z)
    mpmath.mp.prec = 120
    for value, m in zip(z.tolist(), got.tolist()):
        exact = mpmath.sqrt(mpmath.mpf(value.real) ** 2 + mpmath.mpf(value.imag) ** 2)
        assert abs(mpmath.mpf(m) - exact) <= 2 * np.spacing(float(exact)), value
    special = modulus(np.array([complex(np.inf, 1), complex(1, -np.inf), complex(np.nan, 1), complex(np.inf, np.nan), 0j]))
    assert special[0] == special[1] == special[3] == np.inf and np.isnan(special[2]) and special[4] == 0


ZERO_HIDES = """
op: aclnnSigmoidBackward
cases:
  - name: zero_hides
    dtype: {dtype}
    shape: [3]
    inputs:
      output: {{complex: [{{values: [0, 0.3, 0.2]}}, {{values: [0, 0.4, -0.7]}}]}}
      gradOutput: {{complex: [{{values: [1, 1, -1]}}, {{values: [1, 2, 0.5]}}]}}
"""


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_an_exact_zero_element_does_not_hide_a_defect(tmp_path, dtype):
    """y = 0 makes an element's golden 0 exactly: its allowance is at least one subnormal step (complex128's half
    step at 0 rounds to 0, and the element's 0 / 0 was NaN, which the metrics' maximum skips: conj-missing passed
    with every other element 1e15 allowances off). The correct kernel passes, conj-missing fails."""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, ZERO_HIDES.format(dtype=dtype)), "-o", out).exit_code == 0
    assert run_cli("emulate", out).exit_code == 0 and run_cli("verify", out).exit_code == 0
    assert run_cli("emulate", out, "--defect", "conj-missing").exit_code == 0
    assert run_cli("verify", out).exit_code == 1
    g = np.array([0j, 0.3 + 0.4j], np.complex128)
    e = complex_errors(g, g, 0.0, D.lookup(dtype), traced_gamma(D.lookup(dtype)))
    assert not np.isnan(e.rel).any() and (e.rel == 0).all()
