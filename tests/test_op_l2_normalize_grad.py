"""aclnnL2NormalizeGrad: the reference, exact path and kernel against an mpmath oracle, the rounding to odd of
num / sqrt(q), the defects the gate must see, the contract's rules, the bundled cases through gen, emulate and verify,
and ops-nn's TTK suite.

Oracle: the proto's dx = (dy - y * sum(y dy)) / max(sqrt(sum x^2), eps) with the sums exact (Fractions) and the sqrt
and quotient in mpmath at 240 bits, rounded by softmax_oracle.round_to. The independent float32 kernel is ops-nn's
torch golden's arrangement (tests/assets/golden.py) in float32: numpy's pairwise sums, clamp(sqrt), (dy - y s) / n.
"""

from __future__ import annotations

import math
from exactq import Fraction, PackageFraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.rows.l2_normalize_grad import CONTRACT_NOTES, SPEC, over_sqrt_odd
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS

import softmax_oracle as O
from helpers import read_yaml, run_cli
from rowblocks import bundled_generated

X, Y, DY, DX = "x", "y", "dy", "dx"
DTYPES = [D.FLOAT32, D.FLOAT16]
MERE_T = {"float32": 2.0**-13, "float16": 2.0**-10}
TTK = Path(__file__).parent / "ops_nn_suites" / "ttk_kernel_l2_normalize_grad_st.csv"
EPS = 1e-4
ATTRS = {"dimOptional": (1,), "eps": EPS}
SHAPES = ((1, 1), (2, 1), (7, 1), (33, 1), (129, 1), (700, 1), (5, 3), (40, 3), (16, 9))


def oracle(block: dict, eps: float = EPS) -> np.ndarray:
    """The proto's formula on (k, R, A0) float64 blocks: mpf at 240 bits (exact where the result is rational)."""
    q_x, q_y, q_dy = (O.fractions(block[n]) for n in (X, Y, DY))
    sq = (q_x * q_x).sum(axis=1, keepdims=True)
    num = q_dy - q_y * (q_y * q_dy).sum(axis=1, keepdims=True)
    e = Fraction(float(np.float32(eps)))
    out = np.empty(num.shape, dtype=object)
    with mpmath.workprec(240):
        for i in np.ndindex(num.shape):
            q = sq[i[0], 0, i[2]]
            a = mpmath.mpf(num[i].numerator) / num[i].denominator
            n = max(mpmath.sqrt(mpmath.mpf(q.numerator) / q.denominator), mpmath.mpf(e.numerator) / e.denominator)
            out[i] = a / n
    return out


def _in(a, dtype):
    return O._in(a, dtype)


@pytest.fixture(scope="module", params=DTYPES, ids=lambda d: d.name)
def oracle_rows(request):
    """(dtype, [(block, oracle)]) on 600 rows: random, y normalized, and rows under eps (n = eps)."""
    dtype = request.param
    rng = np.random.default_rng(31 + DTYPES.index(dtype))
    out, left, i = [], 600, 0
    while left > 0:
        r, a0 = SHAPES[i % len(SHAPES)]
        k = max(1, min(left, 60, 700 // (r * a0)))
        shape = (k, r, a0)
        style = i % 3
        x = rng.uniform(-1, 1, shape) * (1e-6 if style == 2 else 1.0)
        y = x / np.sqrt((x * x).sum(axis=1, keepdims=True)) if style == 1 else rng.uniform(-1, 1, shape)
        dy = rng.standard_normal(shape)
        block = {X: _in(x, dtype), Y: _in(y, dtype), DY: _in(dy, dtype)}
        out.append((block, oracle(block)))
        left -= k
        i += 1
    return dtype, out


def test_reference_bound_scale_and_exact_against_the_oracle(oracle_rows):
    dtype, rows = oracle_rows
    assert sum(e.size for _, e in rows) >= 3000
    for j, (block, want_q) in enumerate(rows):
        ref = SPEC.reference({**block, **ATTRS})
        want = np.array([float(v) for v in want_q.reshape(-1)]).reshape(want_q.shape)
        close = np.abs(ref.value - want) > ref.bound / 2  # (float64 differences near the bound: in mpmath)
        with mpmath.workprec(240):
            for i in zip(*np.nonzero(close)):
                assert abs(mpmath.mpf(float(ref.value[i])) - want_q[i]) <= ref.bound[i], (dtype.name, i)
        assert (np.abs(want) <= ref.scale * (1 + 2.0**-40)).all()
        if j % 3:
            continue  # (the exact path on every third block: a Fraction sqrt bracket per element)
        mine = SPEC.exact({**{k: O.fractions(v, PackageFraction) for k, v in block.items()}, **ATTRS})
        for q, w in zip(mine.reshape(-1), want_q.reshape(-1)):
            assert O.round_to(q, D.FLOAT32) == O.round_to(w, D.FLOAT32)
            assert O.round_to(q, D.FLOAT16) == O.round_to(w, D.FLOAT16)


def test_goldens_are_the_oracle_rounded_once(oracle_rows):
    """The pipeline's certify + exact path (golden.rows) gives the oracle's correctly rounded value."""
    dtype, rows = oracle_rows
    elements, fallbacks = O.check_pipeline_goldens(SPEC, rows, ATTRS, DX, dtype)
    assert elements >= 3000


def test_the_kernel_is_within_the_gates_premise(oracle_rows):
    """|kernel - exact| <= (log2 R + 10) u scale for every template's order."""
    dtype, rows = oracle_rows
    for block, want_q in rows:
        ref = SPEC.reference({**block, **ATTRS})
        got = SPEC.kernel({**{k: v.astype(np.float32) for k, v in block.items()}, **ATTRS})
        terms = math.log2(block[X].shape[1]) + 10
        assert O.err_over_scale(got, want_q, ref.scale).max() <= terms * O.U24, dtype.name


def test_over_sqrt_rounds_to_odd_exactly():
    """A perfect square gives the exact quotient; otherwise a float64 with an odd last bit, bracketing the value."""
    assert over_sqrt_odd(Fraction(3), Fraction(4)) == Fraction(3, 2)
    v = over_sqrt_odd(Fraction(1), Fraction(2))  # 1 / sqrt(2)
    f = float(v)
    assert Fraction(f) == v and np.array([f]).view(np.int64)[0] & 1
    assert Fraction(f) ** 2 * 2 != 1 and abs(f - 1 / math.sqrt(2)) <= 2.0**-52
    w = over_sqrt_odd(Fraction(-2), Fraction(9, 4))  # -2 / 1.5, not a float64: rounded to odd
    assert w < 0 and abs(float(w) + 4 / 3) <= 2.0**-52 and np.array([float(w)]).view(np.int64)[0] & 1


def test_kernel_templates_and_ieee():
    """Rows past 6144 are summed by chunks; a middle axis by Kahan columns; n floors at eps; NaN x is NaN."""
    from aclnn_cli.ops.rows.l2_normalize_grad import row_sum
    from aclnn_cli.ops.treesum import kahan_sum

    col = np.array([[[1.0], [2.0**-24], [2.0**-24]]], np.float32).reshape(1, 3, 1)
    wide = np.concatenate([col, col], axis=2)  # A0 = 2: Kahan keeps the 2^-23 the plain order drops
    assert kahan_sum(wide, 1)[0, 0, 0] == np.float32(1 + 2.0**-23) and row_sum(wide)[0, 0, 0] == np.float32(1 + 2.0**-23)
    t = {X: np.full((1, 4, 1), 1e-6, np.float32), Y: np.zeros((1, 4, 1), np.float32),
         DY: np.ones((1, 4, 1), np.float32), **ATTRS}
    assert (SPEC.kernel(t) == np.float32(1) / np.float32(EPS)).all()
    t[X][0, 0, 0] = np.nan
    with np.errstate(all="ignore"):
        assert np.isnan(SPEC.kernel(t)).all()


# ------------------------------------------------------------------ the contract

def _descs(shape=(3, 4), dtype=D.FLOAT32, **changes):
    d = {n: TensorDesc(dtype, tuple(shape)) for n in (X, Y, DY, DX)}
    d.update(changes)
    return d


@pytest.mark.parametrize("descs,dims,status,words", [
    (_descs(), (1,), SUCCESS, ""),
    (_descs(), (-2,), SUCCESS, ""),
    (_descs(), (), SUCCESS, ""),
    (_descs(), None, SUCCESS, ""),
    (_descs(dtype=D.FLOAT16), (0,), SUCCESS, ""),
    (_descs(shape=(0, 4)), (1,), SUCCESS, ""),
    (_descs(**{X: TensorDesc(D.FLOAT32, (3, 4), null=True)}), (1,), NULLPTR, "x"),
    (_descs(**{DX: TensorDesc(D.FLOAT32, (3, 4), null=True)}), (1,), NULLPTR, "dx"),
    (_descs(dtype=D.BFLOAT16), (1,), INVALID, "bfloat16"),
    (_descs(**{DY: TensorDesc(D.FLOAT16, (3, 4))}), (1,), INVALID, ""),
    (_descs(**{Y: TensorDesc(D.FLOAT32, (3, 5))}), (1,), INVALID, "y shape"),
    (_descs(**{DX: TensorDesc(D.FLOAT32, (4, 3))}), (1,), INVALID, "dx shape"),
    (_descs(), (0, 1), INVALID, "single axis"),
    (_descs(), (2,), INVALID, "outside"),
    (_descs(), (-3,), INVALID, "outside"),
    (_descs(shape=()), (0,), INVALID, "outside"),
    (_descs(shape=(5,)), None, INVALID, "outside"),  # (the default dim 1 of a 1-d x)
])
def test_contract_rules(descs, dims, status, words):
    outcome = check(SPEC, "950", descs, {**ATTRS, "dimOptional": dims})
    assert outcome.status == status and words in outcome.rule, outcome


def test_declaration():
    assert SPEC.family.driver == X and list(SPEC.products) == ["950"] and "561002" in CONTRACT_NOTES
    assert SPEC.products["950"] == ("float32", "float16")


# ------------------------------------------------------------------ the bundled cases through the loop

DEFECTS, LEGIT = O.variant_kinds(SPEC)


def _gen(tmp_path_factory, bundled_gen, *names: str):
    """The bundled cases (those whose names start with `names`) as gen writes them: the session's (rowblocks)."""
    return bundled_generated(tmp_path_factory, bundled_gen, SPEC.key, *names)


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_gen):
    return _gen(tmp_path_factory, bundled_gen)


@pytest.fixture(scope="module")
def small_suite(tmp_path_factory, bundled_gen):
    """The cases each defect must fail in every dtype: random rows, rows under eps, long like-signed rows."""
    return _gen(tmp_path_factory, bundled_gen, "random", "eps_floor", "long_like_signed")


def _bundled_exact(ins: dict, attrs: dict) -> np.ndarray:
    shape = ins[X].shape
    d = (attrs["dimOptional"] or [1])[0] % len(shape)
    cut = (math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:]))
    return oracle({n: v.reshape(cut) for n, v in ins.items()}, attrs["eps"])


def test_bundled_goldens_are_the_oracle_rounded_once(suite):
    assert O.check_small_bundled_goldens(suite, X, DX, _bundled_exact, 400) >= 20


def test_bundled_cases_pass_the_kernel_and_its_legitimate_variants(suite, tmp_path):
    assert O.loop_passes(run_cli, suite, tmp_path, [None] + LEGIT) > 60


@pytest.mark.parametrize("defect", DEFECTS)
def test_bundled_cases_fail_each_defect_in_every_dtype(small_suite, tmp_path, defect):
    code, cases = O.loop(run_cli, small_suite, tmp_path, defect)
    assert code == 1
    assert {c["dtype"] for c in cases.values() if c["status"] == "FAIL"} == {"float32", "float16"}


def _torch_order(op, ins, ts, attrs):
    """ops-nn's torch golden's arrangement in float32, rounded once to dx's dtype."""
    x, y, dy = (ins[n].astype(np.float32) for n in (X, Y, DY))
    d = (list(attrs["dimOptional"] or []) or [1])[0] % max(x.ndim, 1)
    eps = np.float32(attrs["eps"])
    with np.errstate(all="ignore"):
        n = np.maximum(np.sqrt(np.sum(x * x, axis=d, keepdims=True, dtype=np.float32)), eps)
        r = (dy - y * np.sum(y * dy, axis=d, keepdims=True, dtype=np.float32)) / n
    return D.round_from_f32(np.asarray(r, np.float32).reshape(-1), D.lookup(ts[DX]["dtype"]), "rint").reshape(x.shape)


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    cases = O.independent_run(suite, tmp_path, _torch_order)
    assert len(cases) > 60 and not [(c, r["reason"]) for c, r in cases.items() if r["status"] != "PASS"]


# ------------------------------------------------------------------ ops-nn's TTK suite

def test_the_ttk_suite_imports_whole(tmp_path):
    """norm/l2_normalize_grad/tests/st/arch35/ttk_kernel_l2_normalize_grad_st.csv: graph op L2NormalizeGrad, its 8
    cases (0 to 524 k elements) import as aclnnL2NormalizeGrad; `make catalogue` runs them (all PASS)."""

    done = run_cli("convert", TTK, "-o", tmp_path / "ttk")
    assert done.exit_code == 0, done.output
    doc = read_yaml(tmp_path / "ttk" / f"{TTK.stem}.yaml")
    assert doc["op"] == SPEC.name and len(doc["cases"]) == 8
    assert {c["product"] for c in doc["cases"]} == {"950"}
    assert sorted({tuple(c["attributes"]["dimOptional"]) for c in doc["cases"]}) == [(-1,), (1,)]
