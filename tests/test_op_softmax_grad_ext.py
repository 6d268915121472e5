"""aclnnSoftmaxGradExt: the reference, exact path and kernel against an oracle of this file's own, the defects the
gate must see, the contract's rules, the bundled cases through gen, emulate and verify, and ops-nn's TTK suite.

Oracle: the proto's y = (grad*x1 - sum(grad*x1)*x1) * x2 in Fractions (tests/softmax_oracle.py's softmax_exact times
x2), rounded to nearest even by integers (softmax_oracle.round_to). The independent float32 kernel is the TensorFlow
golden's arrangement (ops-nn's tests/assets/golden.py): numpy's pairwise float32 sum, then x1*S, grad*x1 - x1*S, * x2.
"""

from __future__ import annotations

import math
from exactq import Fraction, PackageFraction
from pathlib import Path

import numpy as np
import pytest

from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.rows.softmax_grad_ext import CONTRACT_NOTES, SPEC
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS

import softmax_oracle as O
from helpers import read_yaml, run_cli
from rowblocks import bundled_generated

G, X1, X2, Y = "grad", "x1", "x2", "y"
DTYPES = [D.FLOAT32, D.FLOAT16, D.BFLOAT16]
MERE_T = {"float32": 2.0**-13, "float16": 2.0**-10, "bfloat16": 2.0**-7}
TTK = Path(__file__).parent / "ops_nn_suites" / "ttk_kernel_softmax_grad_ext_st.csv"
ATTRS = {"axes": -1, "keepDims": True}
ROW_SHAPES = ((1, 1), (2, 1), (7, 1), (8, 1), (9, 1), (16, 1), (33, 1), (129, 1), (1000, 1))


def exact(block: dict) -> np.ndarray:
    """The proto's formula in Fractions on (k, R, 1) blocks."""
    return O.softmax_exact(block[G], block[X1]) * O.fractions(block[X2])


def _block(dy, y, x2) -> dict:
    return {G: dy, X1: y, X2: x2}


@pytest.fixture(scope="module", params=DTYPES, ids=lambda d: d.name)
def oracle_rows(request):
    """(dtype, [(block, exact)]) on 1000 rows of that dtype (a third cancelling), x2 per element or one value."""
    dtype = request.param
    rng = np.random.default_rng(26 + DTYPES.index(dtype))
    out = []
    for i, b in enumerate(O.random_rows(rng, dtype, "softmax", rows=1000, shapes=ROW_SHAPES, per_block=2048)):
        full = b[O.DY].shape  # (one value: broadcast over the block, as the pipeline gathers it)
        x2 = np.broadcast_to(O._in(rng.uniform(-4, 4, full if i % 2 else (1, 1, 1)), dtype), full).copy()
        block = _block(b[O.DY], b[O.Y], x2)
        out.append((block, exact(block)))
    return dtype, out


def test_reference_bound_scale_and_exact_against_the_oracle(oracle_rows):
    dtype, rows = oracle_rows
    assert sum(b[G].shape[0] for b, _ in rows) >= 1000 and sum(e.size for _, e in rows) >= 3000
    for block, want_q in rows:
        ref = SPEC.reference({**block, **ATTRS})
        want = np.array([float(q) for q in want_q.reshape(-1)]).reshape(want_q.shape)
        close = np.abs(ref.value - want) > ref.bound / 2
        for i in zip(*np.nonzero(close)):
            assert abs(Fraction(float(ref.value[i])) - want_q[i]) <= Fraction(float(ref.bound[i])), (dtype.name, i)
        assert (np.abs(want) <= ref.scale).all()
        mine = SPEC.exact({**{k: O.fractions(v, PackageFraction) for k, v in block.items()}, **ATTRS})
        assert (mine == want_q).all()


def test_goldens_are_the_oracle_rounded_once(oracle_rows):
    """The pipeline's certify + exact path (golden.rows) gives the oracle's correctly rounded value."""
    dtype, rows = oracle_rows
    elements, fallbacks = O.check_pipeline_goldens(SPEC, rows, ATTRS, Y, dtype)
    assert elements >= 3000 and (fallbacks > 0 or dtype is not D.FLOAT32)


def test_the_kernel_is_within_the_gates_premise(oracle_rows):
    """|kernel - exact| <= (log2 R + 9) u scale (the 950 tree's depth, a running sum's R - 1 on short rows)."""
    dtype, rows = oracle_rows
    for block, want_q in rows:
        ref = SPEC.reference({**block, **ATTRS})
        got = SPEC.kernel({**{k: v.astype(np.float32) for k, v in block.items()}, **ATTRS})
        r = block[G].shape[1]
        terms = (r if r <= 8 else math.log2(r)) + 9
        assert O.err_over_scale(got, want_q, ref.scale).max() <= terms * O.U24, (dtype.name, r)


def test_kernel_by_hand_small_r_order_and_ieee():
    """p = x1*grad, S in index order for R <= 8, (p - x1*S) * x2; a row holding inf is inf/NaN throughout."""
    t = {G: np.array([[[1.0], [2.0]]], np.float32), X1: np.array([[[0.5], [0.125]]], np.float32),
         X2: np.array([[[2.0]]], np.float32), **ATTRS}
    assert SPEC.kernel(t).reshape(-1).tolist() == [(0.5 - 0.5 * 0.75) * 2, (0.25 - 0.125 * 0.75) * 2]
    nine = np.array([[[1.0]] + [[2.0**-24]] * 8], np.float32)  # index order drops each 2^-24; the tree adds them
    seq = {G: nine, X1: np.ones_like(nine), X2: np.ones((1, 1, 1), np.float32), **ATTRS}
    assert SPEC.variants["sgext-sequential-short-rows"](seq)[0, 0, 0] != SPEC.kernel(seq)[0, 0, 0]
    ieee = {G: np.array([[[1.0], [1.0]]]), X1: np.array([[[np.inf], [0.5]]]), X2: np.ones((1, 2, 1)), **ATTRS}
    with np.errstate(all="ignore"):
        v = SPEC.kernel(ieee).reshape(-1)
    assert np.isnan(v[0]) and v[1] == -np.inf  # (inf - inf; 0.5 - 0.5 * inf)
    where, device = SPEC.edge({G: np.array([[[1e20], [1.0]]]), X1: np.array([[[1e20], [0.5]]]),
                               X2: np.ones((1, 1, 1)), **ATTRS})
    assert where.all() and not np.isfinite(device).all()


BUNDLED_KINDS = {  # blocks shaped as bundled cases, drawn as their fills are (x2 per element: U(-2, 2))
    "short_rows": ((64, 7, 1), lambda rng, s: (rng.standard_normal(s), rng.uniform(0, 1, s))),
    "random": ((7, 33, 1), lambda rng, s: (rng.standard_normal(s), rng.uniform(0, 1, s))),
    "long_like_signed": ((2, 4096, 1), lambda rng, s: (rng.uniform(0.5, 1.5, s), rng.uniform(0, 0.00025, s))),
}
DEFECTS, LEGIT = O.variant_kinds(SPEC)


@pytest.fixture(scope="module")
def bundled_kinds():
    rng = np.random.default_rng(8)
    out = {}
    for dtype in DTYPES:
        for name, (shape, draw) in BUNDLED_KINDS.items():
            dy, y = draw(rng, shape)
            block = _block(O._in(dy, dtype), O._in(y, dtype), O._in(rng.uniform(-2, 2, shape), dtype))
            q = exact(block)
            out[dtype.name, name] = block, q, np.array([O.round_to(v, dtype) for v in q.reshape(-1)]).reshape(q.shape)
    return out


@pytest.mark.parametrize("defect", DEFECTS)
def test_each_defect_is_over_the_gate_somewhere_in_every_dtype(bundled_kinds, defect):
    for dtype in DTYPES:
        worst = 0.0
        for (name, _), (block, _, want) in bundled_kinds.items():
            if name != dtype.name:
                continue
            ref = SPEC.reference({**block, **ATTRS})
            with np.errstate(all="ignore"):
                got = SPEC.variants[defect]({**{k: v.astype(np.float32) for k, v in block.items()}, **ATTRS})
                got = D.round_from_f32(np.asarray(got, np.float32), dtype, "rint").astype(np.float64)
                worst = max(worst, float(np.nanmax(np.abs(got - want) / np.maximum(np.abs(want), ref.scale))))
        assert worst > MERE_T[dtype.name], (defect, dtype.name, worst)


def test_legitimate_variants_stay_within_the_premise(bundled_kinds):
    for (_, kind), (block, q, _) in bundled_kinds.items():
        ref = SPEC.reference({**block, **ATTRS})
        r = block[G].shape[1]
        for name in LEGIT:
            got = SPEC.variants[name]({**{k: v.astype(np.float32) for k, v in block.items()}, **ATTRS})
            assert O.err_over_scale(got, q, ref.scale).max() <= (min(r, math.log2(r) + 16) + 9) * O.U24, (name, kind)


# ------------------------------------------------------------------ the contract

def _descs(shape=(3, 4), dtype=D.FLOAT32, **changes):
    d = {n: TensorDesc(dtype, tuple(shape)) for n in (G, X1, X2, Y)}
    d.update(changes)
    return d


@pytest.mark.parametrize("descs,attrs,status,words", [
    (_descs(), {"axes": -1}, SUCCESS, ""),
    (_descs(), {"axes": 1}, SUCCESS, ""),
    (_descs(**{X2: TensorDesc(D.FLOAT32, (1,))}), {"axes": -1}, SUCCESS, ""),
    (_descs(**{X2: TensorDesc(D.FLOAT32, ())}), {"axes": -1}, SUCCESS, ""),  # (EnsureNotScalar: (1,))
    (_descs(shape=()), {"axes": 0}, SUCCESS, ""),
    (_descs(shape=(2,) * 6), {"axes": 5}, SUCCESS, ""),
    (_descs(dtype=D.BFLOAT16), {"axes": -1}, SUCCESS, ""),
    (_descs(**{G: TensorDesc(D.FLOAT32, (3, 4), null=True)}), {"axes": -1}, NULLPTR, "grad"),
    (_descs(**{X2: TensorDesc(D.FLOAT32, (3, 4), null=True)}), {"axes": -1}, NULLPTR, "x2"),
    (_descs(**{Y: TensorDesc(D.FLOAT32, (3, 4), null=True)}), {"axes": -1}, NULLPTR, "y"),
    (_descs(**{X2: TensorDesc(D.FLOAT16, (3, 4))}), {"axes": -1}, INVALID, ""),
    (_descs(**{Y: TensorDesc(D.BFLOAT16, (3, 4))}), {"axes": -1}, INVALID, ""),
    (_descs(dtype=D.FLOAT64), {"axes": -1}, INVALID, "float64"),
    (_descs(), {"axes": 0}, INVALID, "axes 0"),
    (_descs(), {"axes": -2}, INVALID, "axes -2"),
    (_descs(**{X1: TensorDesc(D.FLOAT32, (3, 5))}), {"axes": -1}, INVALID, "x1 shape"),
    (_descs(**{Y: TensorDesc(D.FLOAT32, (4, 3))}), {"axes": -1}, INVALID, "y shape"),
    (_descs(**{X2: TensorDesc(D.FLOAT32, (4,))}), {"axes": -1}, INVALID, "x2 shape"),
    (_descs(**{X2: TensorDesc(D.FLOAT32, (1, 1))}), {"axes": -1}, INVALID, "x2 shape"),
    (_descs(shape=(0, 4)), {"axes": -1}, INVALID, "empty"),
    (_descs(shape=(1,) * 6 + (2,)), {"axes": -1}, INVALID, "7"),
])
def test_contract_rules(descs, attrs, status, words):
    outcome = check(SPEC, "950", descs, {**ATTRS, **attrs})
    assert outcome.status == status and words in outcome.rule, outcome


def test_declaration():
    assert SPEC.family.driver == G and list(SPEC.products) == ["950"] and "561002" in CONTRACT_NOTES
    assert len(DEFECTS) >= 7 and len(LEGIT) >= 3 and SPEC.dims == (0, 6)


# ------------------------------------------------------------------ the bundled cases through the loop

def _gen(tmp_path_factory, bundled_gen, *names: str):
    """The bundled cases (those whose names start with `names`) as gen writes them: the session's (rowblocks)."""
    return bundled_generated(tmp_path_factory, bundled_gen, SPEC.key, *names)


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_gen):
    return _gen(tmp_path_factory, bundled_gen)


def _bundled_exact(ins: dict, attrs: dict) -> np.ndarray:
    shape = ins[G].shape or (1,)
    cut = (math.prod(shape[:-1]), shape[-1], 1)
    return exact({G: ins[G].reshape(cut), X1: ins[X1].reshape(cut),
                  X2: ins[X2].reshape(cut if ins[X2].size > 1 else (1, 1, 1))})


def test_bundled_goldens_are_the_oracle_rounded_once(suite):
    assert O.check_small_bundled_goldens(suite, G, Y, _bundled_exact, 700) >= 25


def test_bundled_cases_pass_the_kernel_and_its_legitimate_variants(suite, tmp_path):
    assert O.loop_passes(run_cli, suite, tmp_path, [None] + LEGIT) > 100


@pytest.fixture(scope="module")
def small_suite(tmp_path_factory, bundled_gen):
    """The cases each defect must fail in every dtype: random rows (x2 per element) and long like-signed rows."""
    return _gen(tmp_path_factory, bundled_gen, "random", "long_like_signed")


@pytest.mark.parametrize("defect", DEFECTS)
def test_bundled_cases_fail_each_defect_in_every_dtype(small_suite, tmp_path, defect):
    code, cases = O.loop(run_cli, small_suite, tmp_path, defect)
    assert code == 1 and len(cases) == 9
    assert {c["dtype"] for c in cases.values() if c["status"] == "FAIL"} == {"float32", "float16", "bfloat16"}


def _tf_order(op, ins, ts, attrs):
    """ops-nn's TensorFlow golden in float32 (numpy's pairwise sum), rounded once to y's dtype."""
    g, x1, x2 = (ins[n].astype(np.float32) for n in (G, X1, X2))
    with np.errstate(all="ignore"):
        s = np.sum(g * x1, axis=-1, keepdims=True, dtype=np.float32)
        r = (g * x1 - s * x1) * x2.reshape(x2.shape if x2.size > 1 else ())
    return D.round_from_f32(np.asarray(r, np.float32).reshape(-1), D.lookup(ts[Y]["dtype"]), "rint").reshape(g.shape)


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    cases = O.independent_run(suite, tmp_path, _tf_order)
    assert len(cases) > 100 and not [(c, r["reason"]) for c, r in cases.items() if r["status"] != "PASS"]


# ------------------------------------------------------------------ ops-nn's TTK suite

def test_the_ttk_suite_imports_whole(tmp_path):
    """activation/softmax_grad_ext/tests/st/arch35/ttk_kernel_softmax_grad_ext_st.csv: graph op SoftmaxGradExt, its
    5 cases (271 k to 6.9 M elements) import as aclnnSoftmaxGradExt; `make catalogue` runs them (all PASS)."""

    done = run_cli("convert", TTK, "-o", tmp_path / "ttk")
    assert done.exit_code == 0, done.output
    doc = read_yaml(tmp_path / "ttk" / f"{TTK.stem}.yaml")
    assert doc["op"] == SPEC.name and len(doc["cases"]) == 5
    assert {c["product"] for c in doc["cases"]} == {"950"} and {c["attributes"]["keepDims"] for c in doc["cases"]} == {True}
    scalar = [c for c in doc["cases"] if c["name"].endswith("_scalar")]
    assert len(scalar) == 2 and all(c["tensors"]["x2"]["shape"] == [1] for c in scalar)
