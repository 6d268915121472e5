"""Oracles, inputs and independent kernels for the SoftmaxBackward and LogSoftmaxBackward tests.

Nothing here calls aclnn_cli's formulas: the exact results are the docs' formulas in Fractions (Softmax:
dy*y - sum(dy*y)*y) or on arb balls (LogSoftmax: dy - sum(dy)*exp(y), tests/arbmp.py, as mpf), rounded by
`round_to` (in integers: tests/oracle.py's fraction_bits, ties to even, subnormals and overflow included;
checked against mpmath's rounding on a sample); the float32 kernels follow ATen's CPU code
(aten/src/ATen/native/cpu/SoftMaxKernel.cpp: _vec_host_softmax_backward_lastdim with vec::reduce_all /
map2_reduce_all over Vectorized<float> of 8 lanes for dim = -1; _vec_softmax_backward's column-wise
running sums otherwise), or plain index-order loops.
"""

from __future__ import annotations

import math

import flint
import mpmath
import numpy as np

from aclnn_cli.tensor import dtypes as D

import arbmp
from exactq import RATIONAL, Fraction
from oracle import fraction_bits

F32 = np.float32
U24 = 2.0**-24
DY, Y = "gradOutput", "output"
LANES = 8  # ATen's Vectorized<float> on AVX2


# ------------------------------------------------------------------ exact values and their rounding

def fractions(a: np.ndarray, of=Fraction) -> np.ndarray:
    """An object array of the exact Fractions of a float array (of=PackageFraction: as an op's `exact` receives them)."""
    flat = [of(float(v)) for v in np.asarray(a, dtype=np.float64).reshape(-1)]
    return np.array(flat + [None], dtype=object)[:-1].reshape(np.shape(a))


def softmax_exact(dy: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The doc's out = dy*y - sum(dy*y, axis 1)*y, in Fractions, on (k, R, A0) arrays."""
    q_dy, q_y = fractions(dy), fractions(y)
    prod = q_dy * q_y
    return prod - prod.sum(axis=1, keepdims=True) * q_y


def log_softmax_exact(dy: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The doc's out = dy - sum(dy, axis 1)*exp(y), as mpf: the midpoint of an arb ball whose radius is at most
    2^-210 of it (its precision raised from 300 bits until so: >= 200 bits after the terms cancel; an exact ball is
    the value). The sum is exact (1100 bits hold any sum of float32 values of these rows)."""
    out = np.empty(dy.shape, dtype=object)
    with arbmp.precision(1100):
        sums = [[_exact_sum(dy[k, :, a]) for a in range(dy.shape[2])] for k in range(dy.shape[0])]
    for k, r, a in np.ndindex(dy.shape):
        s, d, yv = sums[k][a], float(dy[k, r, a]), float(y[k, r, a])
        prec = 300
        while True:
            with arbmp.precision(prec):
                v = d - s * flint.arb(yv).exp()
            if v.is_exact() or (not v.contains(0) and v.rad() <= abs(v.mid()) * _REL):
                out[k, r, a] = arbmp.as_mpf(v.mid())
                break
            prec *= 2
    return out


_REL = flint.arb(2) ** -210


def _exact_sum(values: np.ndarray) -> flint.arb:
    total = flint.arb(0)
    for v in values.tolist():
        total += v
    assert total.is_exact()
    return total


def round_to(v, dtype: D.DType) -> float:
    """v (Fraction or mpf) rounded to nearest even in dtype, with its subnormals and overflow to inf (a zero is +0):
    from v's float64 where that is clearly off the rounding boundaries (arbmp.quick_round), else in integers
    (oracle.fraction_bits); exact for both kinds. One call in 61 is checked against round_to_mpmath."""
    name = np.dtype(dtype.np_dtype).name
    try:  # (float(v): v correctly rounded to float64, a Fraction's and an mpf's)
        r = arbmp.quick_round(float(v), name)
    except OverflowError:
        r = None
    if r is None:
        q = v if isinstance(v, RATIONAL) else arbmp.mpf_fraction(mpmath.mpf(v))
        bits = fraction_bits(q, name)
        if name == "float32":
            r = float(np.array(bits, np.uint32).view(np.float32))
        else:
            r = float(np.array(bits, np.uint16).view(dtype.np_dtype).astype(np.float64))
    r = r if r else 0.0
    _CHECKED[0] += 1
    if _CHECKED[0] % 61 == 1:  # (one in 61 against mpmath's rounding, the first of all)
        assert r == round_to_mpmath(v, dtype) and math.copysign(1, r) == math.copysign(1, round_to_mpmath(v, dtype)), v
    return r


_CHECKED = [0]


def round_to_mpmath(v, dtype: D.DType) -> float:
    """round_to in mpmath at 2000 bits (the rounding before tests/arbmp.py; its check)."""
    with mpmath.workprec(2000):
        q = mpmath.mpf(v.numerator) / v.denominator if isinstance(v, RATIONAL) else mpmath.mpf(v)
        if q == 0:
            return 0.0
        e = max(int(mpmath.frexp(q)[1]) - 1, dtype.emin)  # (q = m 2^x, 1/2 <= |m| < 1)
        step = mpmath.mpf(2) ** (e - dtype.precision + 1)
        r = mpmath.nint(q / step) * step
        if abs(r) > dtype.max_finite:
            return float("inf") if r > 0 else float("-inf")
        return float(r)


def as_float(v) -> float:
    return float(v) if isinstance(v, RATIONAL) else float(mpmath.mpf(v))


# ------------------------------------------------------------------ inputs

SHAPES = ((1, 1), (2, 1), (3, 1), (7, 1), (16, 1), (33, 1), (64, 1), (129, 1), (5, 3), (40, 3), (4096, 1))
SMALL_SHAPES = ((1, 1), (2, 1), (3, 1), (7, 1), (16, 1), (5, 3), (33, 1), (512, 1))  # (mpmath's exp is slow)


def random_rows(rng: np.random.Generator, dtype: D.DType, kind: str, rows: int = 3000, shapes=SHAPES,
                per_block: int = 8192) -> list[dict]:
    """Blocks of (k, R, A0) inputs in dtype (as float64) for kind 'softmax' or 'log_softmax': (R, A0) cycling
    through `shapes`, k <= 120 rows of at most per_block elements, every third block of rows that cancel."""
    blocks, left = [], rows
    i = 0
    while left > 0:
        r, a0 = shapes[i % len(shapes)]
        k = max(1, min(left, 120, per_block // (r * a0)))
        shape = (k, r, a0)
        style = i % 3  # 0 random, 1 like-signed, 2 cancelling
        if kind == "softmax":
            y = rng.uniform(0, 2.0 / r, shape) if style else rng.uniform(0, 1, shape)
            dy = rng.standard_normal(shape) if style == 0 else rng.uniform(0.5, 1.5, shape)
            if style == 2:  # y a softmax (sum ~ 1), dy constant (or nearly): y (c - c sum y) ~ 0
                y = y / y.sum(axis=1, keepdims=True)
                dy = np.full(shape, 0.75) + rng.uniform(-2.0**-10, 2.0**-10, shape) * (i % 2)
        else:
            y = rng.uniform(-10, 0, shape)
            dy = rng.standard_normal(shape) if style == 0 else rng.uniform(0.5, 1.5, shape)
            if style == 2:
                dy = np.ones(shape)
                y = -np.log(r) + rng.uniform(-2.0**-12, 2.0**-12, shape)
        blocks.append({DY: _in(dy, dtype), Y: _in(y, dtype)})
        left -= k
        i += 1
    return blocks


def _in(a: np.ndarray, dtype: D.DType) -> np.ndarray:
    """a rounded to dtype (through float32 as gen does), returned as float64."""
    return np.asarray(a, dtype=np.float64).astype(F32).astype(dtype.np_dtype).astype(np.float64)


# ------------------------------------------------------------------ independent float32 kernels (not aclnn_cli's)

def aten_reduce(x: np.ndarray) -> np.ndarray:
    """vec::reduce_all over axis 1 of (k, R, A0) with A0 = 1: lanes accumulated in index order (the tail's lanes
    added into lanes 0..t-1), then the 8 lanes halved pairwise (vec_reduce_all's shuffles). keepdims, float32."""
    k, n, _ = x.shape
    lanes = np.zeros((k, LANES), dtype=F32)
    full = n - n % LANES if n >= LANES else 0
    if n < LANES:  # (reduce_all on a short row: the scalar loop, in order)
        acc = np.zeros(k, dtype=F32)
        for j in range(n):
            acc = (acc + x[:, j, 0]).astype(F32)
        return acc.reshape(k, 1, 1)
    lanes[:] = x[:, :LANES, 0]
    for j in range(LANES, full, LANES):
        lanes = (lanes + x[:, j:j + LANES, 0]).astype(F32)
    tail = n - full
    if tail:
        lanes[:, :tail] = (lanes[:, :tail] + x[:, full:, 0]).astype(F32)
    width = LANES
    while width > 1:
        width //= 2
        lanes = (lanes[:, :width] + lanes[:, width:2 * width]).astype(F32)
    return lanes[:, :1].reshape(k, 1, 1)


def in_order(x: np.ndarray) -> np.ndarray:
    """Sum over axis 1 in index order, float32 (ATen's _vec_softmax_backward running sum per column)."""
    acc = np.zeros((x.shape[0], 1, x.shape[2]), dtype=F32)
    for j in range(x.shape[1]):
        acc = (acc + x[:, j:j + 1]).astype(F32)
    return acc


def aten_softmax(dy: np.ndarray, y: np.ndarray, sequential: bool = False) -> np.ndarray:
    """ATen: sum = map2_reduce_all(dy * y) (last dim) or a running sum per column; (dy - sum) * y."""
    dy, y = dy.astype(F32), y.astype(F32)
    total = in_order(dy * y) if sequential or dy.shape[2] > 1 else aten_reduce(dy * y)
    return (dy - total) * y


def aten_log_softmax(dy: np.ndarray, y: np.ndarray, sequential: bool = False, exp_ulps: int = 0) -> np.ndarray:
    """ATen: sum = reduce_all(dy) (last dim) or in order; dy - exp(y) * sum (exp_ulps: Exp that many ulps high)."""
    dy, y = dy.astype(F32), y.astype(F32)
    total = in_order(dy) if sequential or dy.shape[2] > 1 else aten_reduce(dy)
    e = np.exp(y)
    for _ in range(exp_ulps):
        e = np.nextafter(e, F32(np.inf))
    return dy - e * total


def sum_terms(kernel: str, shape: tuple[int, int, int]) -> float:
    """c(R) of the premise |kernel - exact| <= c(R) u scale: a tree sum's depth log2 R (the 950's) or a running
    sum's R - 1 (Higham, Accuracy and Stability, 4.2), R / 8 + 3 for ATen's 8 lanes, plus 8 for the roundings
    around the sum."""
    r, a0 = shape[1], shape[2]
    if kernel == "950":
        return math.log2(max(r, 1)) + 8
    if kernel == "aten" and a0 == 1:
        return r / LANES + 3 + 8
    return r + 8


def err_over_scale(result: np.ndarray, exact: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """|result - exact| / scale (0 where both are 0: y = 0)."""
    want = np.array([as_float(q) for q in exact.reshape(-1)]).reshape(exact.shape)
    err = np.abs(np.asarray(result, dtype=np.float64) - want)
    return np.divide(err, scale, out=np.where(err == 0, 0.0, np.inf), where=scale > 0)


def kinds(draws: dict, exact_fn, seed: int = 7) -> dict:
    """{(dtype name, kind): (block, exact, exact rounded)} for blocks drawn as bundled cases' fills are:
    draws = {kind: ((k, R, A0), draw(rng, shape) -> (dy, y))}."""
    rng = np.random.default_rng(seed)
    out = {}
    for dtype in (D.FLOAT32, D.FLOAT16, D.BFLOAT16):
        for name, (shape, draw) in draws.items():
            dy, y = draw(rng, shape)
            block = {DY: _in(dy, dtype), Y: _in(y, dtype)}
            exact = exact_fn(block[DY], block[Y])
            rounded = np.array([round_to(q, dtype) for q in exact.reshape(-1)]).reshape(exact.shape)
            out[dtype.name, name] = block, exact, rounded
    return out


def defect_excess(spec, kinds_: dict, defect: str, dtype: D.DType) -> float:
    """The largest |defect rounded - exact rounded| / max(|exact|, scale) over dtype's blocks of `kinds_`."""
    worst = 0.0
    for (name, _), (block, _, want) in kinds_.items():
        if name != dtype.name:
            continue
        ref = spec.reference({**block, "dim": -1})
        f32 = {k: v.astype(F32) for k, v in block.items()}
        with np.errstate(all="ignore"):  # (inf - inf where both overflow: not over)
            got = D.round_from_f32(np.asarray(spec.variants[defect]({**f32, "dim": -1}), dtype=F32), dtype, "rint")
            excess = np.abs(got.astype(np.float64) - want) / np.maximum(np.abs(want), ref.scale)
            worst = max(worst, float(np.nanmax(excess)))
    return worst


def contract_descs(shape=(3, 4), dtype=D.FLOAT32, **changes):
    """{name: TensorDesc} of a valid call, with changes."""
    from aclnn_cli.ops.contract import TensorDesc

    d = {n: TensorDesc(dtype, tuple(shape)) for n in (DY, Y, "out")}
    d.update(changes)
    return d


def independent(kind: str, sequential: bool = False, exp_ulps: int = 0):
    """A tests/harness.py kernel: ATen's order (or a plain running sum) on the case's rows along dim, in float32,
    rounded once to out's dtype half to even. exp_ulps: Exp that many float32 ulps high (LogSoftmax)."""
    def kernel(op, ins, ts, attrs):
        dy, y = ins[DY], ins[Y]
        shape = dy.shape or (1,)
        lo = int(attrs["dim"]) % len(shape)
        cut = (math.prod(shape[:lo]), shape[lo], math.prod(shape[lo + 1:]))
        with np.errstate(all="ignore"):
            if kind == "softmax":
                r = aten_softmax(dy.reshape(cut), y.reshape(cut), sequential)
            else:
                r = aten_log_softmax(dy.reshape(cut), y.reshape(cut), sequential, exp_ulps)
            out = D.lookup(ts["out"]["dtype"])
            return D.round_from_f32(np.asarray(r, dtype=F32).reshape(-1), out, "rint").reshape(dy.shape)
    return kernel


# ------------------------------------------------------------------ the pipeline

def loop(run_cli, suite, tmp_path, defect: str | None) -> tuple[int, dict]:
    """emulate (with a defect) and verify a generated directory: (verify's exit code, {case id: record})."""
    from helpers import verify_records

    emulate = ["emulate", suite, "--jobs", "1"] + (["--defect", defect] if defect else [])
    assert run_cli(*emulate).exit_code == 0
    return verify_records(suite, jobs=1)


def check_bundled_goldens(suite, exact_fn, logical, manifest, skip=("special", "overflow")) -> int:
    """Every small positive case's golden equals exact_fn's value rounded once; returns how many were checked."""
    checked = 0
    for case in sorted(suite.iterdir()):
        m = manifest(case)
        if m["expect_status"] != 0 or any(w in case.name for w in skip):
            continue
        t = {x["name"]: x for x in m["tensors"]}
        dim = next(a["value"] for a in m["attributes"] if a["name"] == "dim")
        dy, y = (logical(case, t[n]).astype(np.float64) for n in (DY, Y))
        if dy.size > 3000 or dy.size == 0:
            continue
        shape = dy.shape or (1,)
        lo = dim % len(shape)
        cut = (math.prod(shape[:lo]), shape[lo], math.prod(shape[lo + 1:]))
        exact = exact_fn(dy.reshape(cut), y.reshape(cut))
        dtype = D.lookup(t["out"]["dtype"])
        want = np.array([round_to(q, dtype) for q in exact.reshape(-1)])
        got = logical(case, t["out"], "golden").astype(np.float64).reshape(-1)
        np.testing.assert_array_equal(got, want, err_msg=case.name)
        checked += 1
    return checked


def independent_run(suite, tmp_path, kernel, only: str | None = None) -> dict:
    """Every positive case of a generated directory (or one case) through tests/harness.py with `kernel` (a copy),
    then verify: {case id: record}."""
    import harness
    from helpers import run_cli, verify_records
    from shared import linked_copy

    work = tmp_path / "indep"
    linked_copy(suite, work, cases=None if only is None else [only])  # (gen's files linked: dumps are written)
    # (the negative cases' statuses as the device returns them, whatever ran on the suite before: `kernel` writes
    # the positive cases' dumps over the emulated ones)
    assert run_cli("emulate", work, "--jobs", "1").exit_code == 0
    for d in sorted(work.iterdir()):
        if d.is_dir():
            harness.run_case(d, kernel)
    return verify_records(work, jobs=1)[1]


def variant_kinds(spec) -> tuple[list[str], list[str]]:
    """(defects, legitimate variants) of an op, by their declared kind (`@defect`, `@legitimate`), sorted."""
    names = sorted(spec.variants)
    return ([n for n in names if spec.variants[n].variant_kind == "defect"],
            [n for n in names if spec.variants[n].variant_kind == "legitimate"])


def gen_cases(run_cli, tmp_path_factory, cases, key: str, *names: str):
    """A bundled case file generated into a fresh directory: every case, or those whose names start with `names`."""
    out = tmp_path_factory.mktemp(key) / "out"
    picks = [a for n in names for a in ("--case", f"{key}-{n}*")]
    done = run_cli("gen", cases, "-o", out, "--jobs", "1", *picks)
    assert done.exit_code == 0, done.output
    return out


def loop_passes(run_cli, suite, tmp_path, variants) -> int:
    """The kernel (None) and each variant through emulate and verify: all PASS; returns the number of cases."""
    for variant in variants:
        code, cases = loop(run_cli, suite, tmp_path, variant)
        assert code == 0 and not [(c, r["reason"]) for c, r in cases.items() if r["status"] != "PASS"], variant
    return len(cases)


def pipeline_golden(spec, typed: dict, attrs: dict, out: str, dtype: D.DType) -> tuple[np.ndarray, int]:
    """gen's golden of one output for blocks of inputs (golden.rows: certify, then the exact path on the rows it
    leaves open), as float64, and how many elements took the exact path."""
    from aclnn_cli.golden.rows import certify, exact_block, reference_blocks, round_exact

    r = reference_blocks(spec, typed, attrs)[out]
    got, unsure = certify(r.value, r.bound, dtype)
    got, fallbacks = got.astype(np.float64), 0
    for b in np.flatnonzero(unsure.reshape(len(got), -1).any(axis=1)):
        q = exact_block(spec, {k: v[b:b + 1] for k, v in typed.items()}, attrs)[out].reshape(-1)
        where = np.flatnonzero(unsure[b].reshape(-1))
        got[b].reshape(-1)[where] = round_exact(q[where], dtype)
        fallbacks += where.size
    return got, fallbacks


def check_pipeline_goldens(spec, rows, attrs: dict, out: str, dtype: D.DType) -> tuple[int, int]:
    """For [(block, exact)]: gen's golden equals the exact value rounded once; (elements, exact-path elements)."""
    elements = fallbacks = 0
    for block, want_q in rows:
        got, exact = pipeline_golden(spec, {k: v.astype(dtype.np_dtype) for k, v in block.items()}, attrs, out, dtype)
        want = np.array([round_to(q, dtype) for q in want_q.reshape(-1)]).reshape(want_q.shape)
        np.testing.assert_array_equal(got, want)
        elements, fallbacks = elements + want.size, fallbacks + exact
    return elements, fallbacks


def check_small_bundled_goldens(suite, driver: str, out: str, oracle_fn, limit: int,
                                skip=("special", "overflow")) -> int:
    """Every positive case of a generated directory whose driver has 1 to `limit` elements: its golden equals
    oracle_fn(inputs as float64 arrays, attributes by name) rounded once to out's dtype. Returns how many."""
    from helpers import logical, manifest

    checked = 0
    for case in sorted(suite.iterdir()):
        m = manifest(case)
        t = {x["name"]: x for x in m["tensors"]}
        if m["expect_status"] != 0 or any(w in case.name for w in skip) or not 0 < math.prod(t[driver]["shape"]) <= limit:
            continue
        ins = {x["name"]: logical(case, x).astype(np.float64) for x in m["tensors"] if x["role"] == "input"}
        exact = oracle_fn(ins, {a["name"]: a["value"] for a in m["attributes"]})
        dtype = D.lookup(t[out]["dtype"])
        want = np.array([round_to(q, dtype) for q in exact.reshape(-1)])
        np.testing.assert_array_equal(logical(case, t[out], "golden").astype(np.float64).reshape(-1), want,
                                      err_msg=case.name)
        checked += 1
    return checked
