"""aclnnLogSoftmaxBackward: the reference, exact path, IEEE rows and kernel against an oracle of this file's
own, the defects the gate must see, the contract's rules, and the bundled cases through the loop.

Oracle: the doc's out = dy - sum(dy)*exp(y) in mpmath (tests/softmax_oracle.py: the sum exact, exp at a
precision that leaves >= 200 bits after cancellation), rounded by mpmath; the independent float32 kernels
are ATen's CPU order (vectorised 8-lane sum, or a running sum) and a plain loop.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.tensor.status import INVALID, NULLPTR, SUCCESS
from aclnn_cli.golden.rows import certify, exact_block, reference_blocks, round_exact
from aclnn_cli.ops.contract import TensorDesc, check
from aclnn_cli.ops.rows.log_softmax_backward import CONTRACT_NOTES, EXP_ULPS, SPEC, Y_HI, Y_LO

import softmax_oracle as O
from exactq import PackageFraction
from helpers import logical, manifest, run_cli, write_yaml
from rowblocks import bundled_generated

DTYPES = [D.FLOAT32, D.FLOAT16, D.BFLOAT16]
MERE_T = {"float32": 2.0**-13, "float16": 2.0**-10, "bfloat16": 2.0**-7}
DIM = {"dim": -1}


def _mpf(v):
    return mpmath.mpf(v.numerator) / v.denominator if hasattr(v, "denominator") else mpmath.mpf(str(v))


@pytest.fixture(scope="module", params=DTYPES, ids=lambda d: d.name)
def oracle_rows(request):
    """(dtype, [(block, exact mpf)]) on 3000 random rows of that dtype, a third of them cancelling."""
    dtype = request.param
    rng = np.random.default_rng(29 + DTYPES.index(dtype))
    blocks = O.random_rows(rng, dtype, "log_softmax", shapes=O.SMALL_SHAPES, per_block=2048)
    return dtype, [(b, O.log_softmax_exact(b[O.DY], b[O.Y])) for b in blocks]


def test_reference_bound_scale_and_exact_against_the_oracle(oracle_rows):
    dtype, rows = oracle_rows
    assert sum(b[O.DY].shape[0] for b, _ in rows) >= 3000
    cancelling = 0
    for n, (block, exact) in enumerate(rows):
        ref = SPEC.reference({**block, **DIM})
        want = np.array([float(v) for v in exact.reshape(-1)]).reshape(exact.shape)
        with mpmath.workprec(600):
            for i in zip(*np.nonzero(np.abs(ref.value - want) > ref.bound / 2)):  # near the bound: exactly
                assert abs(mpmath.mpf(float(ref.value[i])) - exact[i]) <= mpmath.mpf(float(ref.bound[i])), i
        assert (np.abs(want) <= ref.scale).all()
        cancelling += int((ref.scale > 2.0**8 * np.abs(want)).sum())
        if n < 10:  # the op's own exact path (Decimal): within 2^-140 of the oracle, relatively
            mine = SPEC.exact({**{k: O.fractions(v, PackageFraction) for k, v in block.items()}, **DIM})
            with mpmath.workprec(600):
                for got, ok in zip(mine.reshape(-1), exact.reshape(-1)):
                    assert abs(_mpf(got) - ok) <= abs(ok) * mpmath.mpf(2) ** -140
    assert cancelling > 100


def test_goldens_are_the_oracle_rounded_once(oracle_rows):
    """The pipeline's certify + exact path (golden.rows) gives the oracle's correctly rounded value."""
    dtype, rows = oracle_rows
    fallbacks = 0
    for block, exact in rows:
        typed = {k: v.astype(dtype.np_dtype) for k, v in block.items()}
        r = reference_blocks(SPEC, typed, DIM)["out"]
        got, unsure = certify(r.value, r.bound, dtype)
        got = got.astype(np.float64)
        for b in np.flatnonzero(unsure.reshape(len(got), -1).any(axis=1)):
            q = exact_block(SPEC, {k: v[b:b + 1] for k, v in typed.items()}, DIM)["out"].reshape(-1)
            where = np.flatnonzero(unsure[b].reshape(-1))
            got[b].reshape(-1)[where] = round_exact(q[where], dtype)
            fallbacks += where.size
        want = np.array([O.round_to(q, dtype) for q in exact.reshape(-1)]).reshape(exact.shape)
        np.testing.assert_array_equal(got, want)
    assert fallbacks > 0 or dtype is not D.FLOAT32  # (float32's cancelling rows need the exact path)


def test_numpy_exp_is_within_the_references_budget():
    """The reference's bound takes np.exp (float64) within EXP_ULPS ulps: checked against mpmath on its range."""
    rng = np.random.default_rng(3)
    y = np.concatenate([rng.uniform(Y_LO, Y_HI, 20000), rng.uniform(-1, 1, 5000)]).astype(np.float32)
    got = np.exp(y.astype(np.float64))
    with mpmath.workprec(120):
        worst = max(abs(mpmath.mpf(float(g)) / mpmath.exp(mpmath.mpf(float(v))) - 1) for v, g in zip(y, got))
    assert worst <= EXP_ULPS * 2.0**-52


def _golden(block: dict, dtype: D.DType) -> np.ndarray:
    """The pipeline's golden of one block (reference or IEEE rows, certify, exact fallback)."""
    typed = {k: np.asarray(v).astype(dtype.np_dtype) for k, v in block.items()}
    r = reference_blocks(SPEC, typed, DIM)["out"]
    got, unsure = certify(r.value, r.bound, dtype)
    got = got.astype(np.float64)
    if unsure.any():
        q = exact_block(SPEC, typed, DIM)["out"].reshape(-1)
        where = np.flatnonzero(unsure.reshape(-1))
        got.reshape(-1)[where] = round_exact(q[where], dtype)
    return got


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_ieee_rows_and_clipped_exponents(dtype):
    """Rows holding +-inf/NaN in y with a finite sum keep their finite elements correctly rounded (rounded to odd
    in float64, then once to the dtype); y = -inf gives dy, +inf -inf*sign(s); y past the clip rounds as unclipped."""
    rng = np.random.default_rng(5)
    y = rng.uniform(-6, 0, (40, 6, 1))
    y[:, 0, 0] = -np.inf
    y[::4, 1, 0] = np.inf
    y[1::4, 2, 0] = np.nan
    dy = rng.standard_normal((40, 6, 1))
    dy[::8, 3, 0] = np.inf  # a row whose sum is inf
    block = {O.DY: O._in(dy, dtype), O.Y: O._in(y, dtype)}
    got = _golden(block, dtype)
    s = block[O.DY].sum(axis=1, keepdims=True)
    finite_rows = np.broadcast_to(np.isfinite(s), y.shape)
    finite = finite_rows & np.isfinite(block[O.Y])
    exact = O.log_softmax_exact(np.where(finite_rows, block[O.DY], 0), np.where(finite, block[O.Y], 0))
    want = np.array([O.round_to(q, dtype) for q in exact.reshape(-1)]).reshape(y.shape)
    np.testing.assert_array_equal(got[finite], want[finite])
    assert (got[finite_rows & (block[O.Y] == -np.inf)] == block[O.DY][finite_rows & (block[O.Y] == -np.inf)]).all()
    plus = finite_rows & (block[O.Y] == np.inf)
    assert (got[plus] == -np.inf * np.sign(np.broadcast_to(s, y.shape)[plus])).all()
    assert np.isnan(got[finite_rows & np.isnan(block[O.Y])]).all() and not np.isfinite(got[~finite_rows]).any()
    big = {O.DY: O._in(np.array([[[2.0**-14], [-2.0**-14 + 2.0**-24], [1.0]]]) * [[[1], [1], [0]]], dtype),
           O.Y: O._in(np.array([[[250.0], [-400.0], [-1000.0]]]), dtype)}
    want = [O.round_to(q, dtype) for q in O.log_softmax_exact(big[O.DY], big[O.Y]).reshape(-1)]
    assert _golden(big, dtype).reshape(-1).tolist() == want


@pytest.mark.parametrize("kernel", ["950", "aten", "sequential"])
def test_float32_kernels_are_within_the_gates_premise(oracle_rows, kernel):
    """|kernel - exact| <= c(R) u scale (O.sum_terms), plus a few u of exp's error in the scale."""
    dtype, rows = oracle_rows
    run = {"950": lambda b: SPEC.kernel({**{k: v.astype(np.float32) for k, v in b.items()}, **DIM}),
           "aten": lambda b: O.aten_log_softmax(b[O.DY], b[O.Y]),
           "sequential": lambda b: O.aten_log_softmax(b[O.DY], b[O.Y], sequential=True)}[kernel]
    worst = 0.0
    for block, exact in rows:
        ref = SPEC.reference({**block, **DIM})
        err = O.err_over_scale(run(block), exact, ref.scale) / ((O.sum_terms(kernel, block[O.DY].shape) + 2) * O.U24)
        worst = max(worst, float(err.max()))
    assert worst <= 1.0


BUNDLED_KINDS = {  # blocks shaped as bundled cases, drawn as their fills are
    "short_rows": ((64, 7, 1), lambda rng, s: (rng.standard_normal(s), rng.uniform(-10, 0, s))),
    "long_like_signed": ((1, 16384, 1), lambda rng, s: (rng.uniform(0.5, 1.5, s), rng.uniform(-11, -8, s))),
    "rank3_axes-dim-0": ((1, 6, 200), lambda rng, s: (rng.standard_normal(s), rng.uniform(-10, 0, s))),
}


@pytest.fixture(scope="module")
def bundled_kinds():
    return O.kinds(BUNDLED_KINDS, O.log_softmax_exact)


DEFECTS = sorted(n for n, f in SPEC.variants.items() if f.variant_kind == "defect")
LEGIT = sorted(n for n, f in SPEC.variants.items() if f.variant_kind == "legitimate")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("defect", DEFECTS)
def test_each_defect_is_over_the_gate_somewhere(bundled_kinds, defect, dtype):
    excess = O.defect_excess(SPEC, bundled_kinds, defect, dtype)
    assert excess > MERE_T[dtype.name], (defect, dtype.name, excess)


def test_legitimate_variants_stay_within_the_premise(bundled_kinds):
    for (_, kind), (block, exact, _) in bundled_kinds.items():
        ref = SPEC.reference({**block, **DIM})
        for name in LEGIT:
            got = SPEC.variants[name]({**{k: v.astype(np.float32) for k, v in block.items()}, **DIM})
            terms = O.sum_terms("aten" if "aten" in name else "950", block[O.DY].shape) + 4
            assert O.err_over_scale(got, exact, ref.scale).max() <= terms * O.U24, (name, kind)


def test_kernel_by_hand_and_edges():
    """s = 3, dy - exp(0) * s; exp(89) overflows float32: -inf, accepted by the edge where the exact is finite."""
    t = {O.DY: np.array([[[1.0], [2.0]]], np.float32), O.Y: np.array([[[0.0], [0.0]]], np.float32), **DIM}
    assert SPEC.kernel(t).reshape(-1).tolist() == [-2.0, -1.0]
    t = {O.DY: np.array([[[1e-30], [2e-30]]]), O.Y: np.array([[[89.0], [0.0]]]), **DIM}
    where, device = SPEC.edge(t)
    assert where.reshape(-1).tolist() == [True, False] and device.reshape(-1)[0] == -np.inf
    assert np.isfinite(SPEC.reference(t).value).all()  # (the golden: -3e-30 * e^89, finite)
    where, _ = SPEC.edge({O.DY: np.array([[[1.0], [2.0]]]), O.Y: np.array([[[-100.0], [0.0]]]), **DIM})
    assert where.reshape(-1).tolist() == [True, False]  # (exp(-100) is subnormal in float32)


@pytest.mark.parametrize("descs,attrs,product,status,words", [
    (O.contract_descs(), {"dim": -1}, "A2", SUCCESS, ""),
    (O.contract_descs(shape=()), {"dim": 0}, "A2", SUCCESS, ""),
    (O.contract_descs(**{O.DY: TensorDesc(D.FLOAT32, (3, 4), null=True)}), {"dim": -1}, "A2", NULLPTR, "gradOutput"),
    (O.contract_descs(**{O.Y: TensorDesc(D.FLOAT32, (3, 4), null=True)}), {"dim": -1}, "A2", NULLPTR, "output"),
    (O.contract_descs(out=TensorDesc(D.FLOAT32, (3, 4), null=True)), {"dim": -1}, "A2", NULLPTR, "out"),
    (O.contract_descs(), {"dim": 2}, "A2", INVALID, "dim 2"),  # (the doc says [-n, n]; the source [-n, n - 1])
    (O.contract_descs(), {"dim": -3}, "A2", INVALID, "dim -3"),
    (O.contract_descs(shape=()), {"dim": -2}, "A2", INVALID, "dim -2"),
    (O.contract_descs(**{O.Y: TensorDesc(D.BFLOAT16, (3, 4))}), {"dim": -1}, "A2", INVALID, "output dtype bfloat16"),
    (O.contract_descs(out=TensorDesc(D.BFLOAT16, (3, 4))), {"dim": -1}, "A2", SUCCESS, ""),  # out's dtype: free
    (O.contract_descs(dtype=D.BFLOAT16), {"dim": -1}, "910", INVALID, "bfloat16"),
    (O.contract_descs(dtype=D.BFLOAT16), {"dim": -1}, "A3", SUCCESS, ""),
    (O.contract_descs(**{O.Y: TensorDesc(D.FLOAT32, (4, 4))}), {"dim": -1}, "A2", INVALID, "output shape"),
    (O.contract_descs(out=TensorDesc(D.FLOAT32, (3,))), {"dim": -1}, "A2", INVALID, "out shape"),
    (O.contract_descs(shape=(2,) * 9), {"dim": -1}, "A2", INVALID, "9 dims"),
    # the source checks the shapes before dim: both broken, the shape decides
    (O.contract_descs(out=TensorDesc(D.FLOAT32, (4, 3))), {"dim": 5}, "A2", INVALID, "out shape"),
])
def test_contract_rules(descs, attrs, product, status, words):
    outcome = check(SPEC, product, descs, attrs)
    assert outcome.status == status and words in outcome.rule, outcome


def test_declaration():
    assert SPEC.family.driver == "output"
    assert "bfloat16" not in SPEC.products["310P"] and "161002" in CONTRACT_NOTES
    assert len(DEFECTS) >= 6 and len(LEGIT) >= 2


# ------------------------------------------------------------------ the bundled cases through the loop

@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_gen):
    """The bundled file as gen writes it: its cases from the session's bundled suite (rowblocks.bundled_generated)."""
    return bundled_generated(tmp_path_factory, bundled_gen, SPEC.key)


def test_bundled_goldens_are_the_oracle_rounded_once(suite):
    assert O.check_bundled_goldens(suite, O.log_softmax_exact, logical, manifest,
                                   skip=("special", "exp_overflow", "atk_large")) >= 40


def test_bundled_cases_pass_the_950_kernel(suite, tmp_path):
    code, cases = O.loop(run_cli, suite, tmp_path, None)
    assert code == 0 and all(c["status"] == "PASS" for c in cases.values()) and len(cases) > 100


@pytest.mark.parametrize("defect", DEFECTS)
def test_bundled_cases_fail_each_defect_in_every_dtype(suite, tmp_path, defect):
    code, cases = O.loop(run_cli, suite, tmp_path, defect)
    assert code == 1
    assert {c["dtype"] for c in cases.values() if c["status"] == "FAIL"} == {"float32", "float16", "bfloat16"}


@pytest.mark.parametrize("variant", LEGIT + ["fp64-compute", "round-half-away", "flush-subnormals"])
def test_bundled_cases_pass_the_legitimate_variants(suite, tmp_path, variant):
    code, cases = O.loop(run_cli, suite, tmp_path, variant)
    assert code == 0 and not [(cid, c["reason"]) for cid, c in cases.items() if c["status"] != "PASS"]


def test_an_independent_aten_kernel_passes_every_bundled_case(suite, tmp_path):
    cases = O.independent_run(suite, tmp_path, O.independent("log_softmax"))
    assert len(cases) > 250 and not [(cid, c["reason"]) for cid, c in cases.items() if c["status"] != "PASS"]


ONE_Y = """\
op: aclnnLogSoftmaxBackward
cases:
  - name: one_y
    dtype: float16
    seed: 1902
    shape: [32, 256]
    inputs:
      gradOutput: {constant: 1.0}
      output: {uniform: [-5.5456, -5.5448]}
"""


def test_an_exp_two_ulps_high_passes_rows_of_one_value(tmp_path):
    """float16 holds one y in [-5.5456, -5.5448]: all 8192 elements are 1 - 256 e^y, the same number. An Exp 2
    float32 ulps high (a correct kernel as far as anyone knows) moves that one float16 result by an ulp, 6e-4
    of it but 3e-7 of its term scale: every element off by the same relative error, which an error balance
    relative to |golden| read as bias."""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, ONE_Y), "-o", out).exit_code == 0
    cases = O.independent_run(out, tmp_path, O.independent("log_softmax", exp_ulps=2))
    assert all(c["status"] == "PASS" for c in cases.values()), [c["reason"] for c in cases.values()]


LONG_CANCEL = """\
op: aclnnLogSoftmaxBackward
cases:
  - name: cancelling_long
    dtype: float32
    seed: 1902
    shape: [2, 4096]
    inputs:
      gradOutput: {constant: 1.0}
      output: {uniform: [-8.3180, -8.3174]}
"""


def test_long_cancelling_float32_rows_pass_the_950_kernel(tmp_path):
    """1 - 4096 e^y over 8192 elements: float32 exp's rounding, shared by the elements with one y value and
    amplified ~10^4 times by the cancellation, stays under T element by element; on average it is not under
    T/16 of |golden|, only of the term scale (the bundled cancelling_long has it too)."""
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, LONG_CANCEL), "-o", out).exit_code == 0
    code, cases = O.loop(run_cli, out, tmp_path, None)
    assert code == 0, [c["reason"] for c in cases.values()]
