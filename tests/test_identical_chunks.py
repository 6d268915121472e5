"""Verify's compare at the speed of reading: chunks mostly bit-identical to their golden are judged from the
elements that differ (judge/identical.py), buffers are reused from chunk to chunk (judge/workspace.py), and
every count, maximum and index stays bit for bit what the dense pass gives; sums add the same terms in
another order and agree to their rounding (decision 56)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import strategies as st

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.casedir import manifest as M
from aclnn_cli.judge import comparison as C
from aclnn_cli.judge.compare import Metrics, element_errors
from aclnn_cli.judge.identical import add_differing, differing_errors, exact_never_flagged
from aclnn_cli.standards.rules import STANDARDS
from aclnn_cli.judge.verify import verify_case

from fuzzing import fuzz_target
from helpers import run_cli, write_yaml

DTYPES = ("float16", "bfloat16", "float32")


# Two ways of summing a chunk's relative and ulp errors differ by at most twice sums.magnitude_sum's bound (float32
# pairwise: (log2 n + 27) u of the sum, n <= 65,536); the error balance's is float64 (1e-12); a float32 dot of squares.
MAGNITUDE = 2 * (16 + 27) * 2.0**-24
SUM_FIELDS = {"sum_rel": MAGNITUDE, "sum_signed": 1e-12, "sum_ulp": MAGNITUDE, "sum_sq_abs": 1e-4}
# The verdict's numbers made from those sums (metrics JSON and the standards' rows), and their tolerance.
SUM_METRICS = {"mere": MAGNITUDE, "error_balance": 1e-12, "mean_ulp_error": MAGNITUDE, "rmse": 1e-4,
               "MERE": MAGNITUDE, "|error balance|": 1e-12, "mean ulp error": MAGNITUDE, "RMSE": 1e-4}


def metrics_fields(m: Metrics) -> dict:
    """Every field of the metrics, floats by their bits (repr), the worst elements in order; sums as numbers."""
    fields = {k: (v if k in SUM_FIELDS else repr(v)) for k, v in sorted(m.__dict__.items())
              if k not in ("worst", "errors", "_pending")}
    return {**fields, "worst": [(i, repr(r)) for i, r in m.worst_items()]}


def assert_same(fast, dense, tolerance: dict = SUM_FIELDS, key: str = "") -> None:
    """fast == dense, but for the sums (and what is made of them): equal to their rounding (the sums' bounds:
    SUM_FIELDS)."""
    if isinstance(dense, dict):
        assert isinstance(fast, dict) and fast.keys() == dense.keys(), key
        rel = tolerance.get(dense.get("metric"))  # (a standard's row: its value is the metric's)
        for k in dense:
            if rel is not None and k == "value":
                assert math.isclose(fast[k], dense[k], rel_tol=rel, abs_tol=1e-300), (key, dense)
            else:
                assert_same(fast[k], dense[k], tolerance, k)
    elif isinstance(dense, list):
        assert isinstance(fast, list) and len(fast) == len(dense), key
        for f, d in zip(fast, dense):
            assert_same(f, d, tolerance, key)
    elif key in tolerance and isinstance(dense, float):
        assert math.isclose(fast, dense, rel_tol=tolerance[key], abs_tol=1e-300), (key, fast, dense)
    else:
        assert fast == dense, (key, fast, dense)


def same_result(fast, dense) -> None:
    """Two verify results (to_json): the same, but for sums' rounding."""
    assert_same(json.loads(json.dumps(fast)), json.loads(json.dumps(dense)), SUM_METRICS)


def stream(a: np.ndarray, g: np.ndarray, dtype: D.DType, standard: str, chunk: int, sparse: bool) -> dict:
    """Metrics of a, g compared chunk by chunk (dense, or the differing elements where the chunk allows)."""
    std = STANDARDS[standard]
    rule = std.rule(std.params(dtype))
    floor = dtype.smallest_normal
    sparse = sparse and exact_never_flagged(rule, dtype, floor)
    m = Metrics()
    for s in range(0, a.size, chunk):
        an, gn = a[s:s + chunk], g[s:s + chunk]
        d = differing_errors(an, gn, floor, dtype, flush_ok=std.flush_ok, signed_zeros=False, bufs=None) \
            if sparse else None
        if d is not None:
            d.sub.violation = rule(d.sub)
            add_differing(m, d, s)
        else:
            e = element_errors(an, gn, floor, dtype, flush_ok=std.flush_ok)
            e.violation = rule(e)
            m.add(e, s)
    return metrics_fields(m)


HOSTILE = st.one_of(st.floats(width=32), st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 6e-8,
                                                           1e-40, 65504.0, 3.4e38, -3.4e38, 1.0, -1.0, 2.0**-14]))


@fuzz_target(dtype=st.sampled_from(DTYPES), standard=st.sampled_from(sorted(STANDARDS)),
             golden=st.lists(HOSTILE, min_size=1, max_size=40), n=st.integers(1, 3000), chunk=st.integers(1, 1200),
             changes=st.lists(st.tuples(st.integers(0, 2999), st.one_of(HOSTILE, st.integers(-3, 3))), max_size=60),
             seed=st.integers(0, 2**32 - 1))
def test_fuzz_differing_elements_give_the_dense_metrics(dtype, standard, golden, n, chunk, changes, seed):
    """Near-valid chunks (a golden of hostile values: NaN, Inf, -0, subnormals, the dtype's extremes; a dump equal to
    it but for a few elements: ulps off, hostile values, flushed, sign-flipped): the metrics from the differing
    elements equal the dense pass's, bit for bit, in every standard and however the chunks fall."""
    dt = D.lookup(dtype)
    rng = np.random.default_rng(seed)
    with np.errstate(all="ignore"):
        g = np.resize(np.array(golden, np.float64), n)
        g *= rng.uniform(0.5, 2.0, n)  # (many distinct values around the hostile ones)
        g = g.astype(dt.np_dtype)
        a = g.copy()
        bits = a.view(dt.uint_dtype)
        for at, change in changes:
            at %= n
            if isinstance(change, int):  # a few ulps off (bits: also crosses into Inf/NaN at the top)
                bits[at] = dt.uint_dtype.type((int(bits[at]) + change) % (1 << (8 * dt.itemsize)))
            else:
                a[at] = np.array(change, np.float64).astype(dt.np_dtype)
    assert_same(stream(a, g, dt, standard, chunk, True), stream(a, g, dt, standard, chunk, False))


@pytest.fixture()
def ulps_measured(monkeypatch):
    """Every standard made to read the ulp errors: a dense console-only pass then measures them and the RMSE, as
    the differing elements' pass does (comparison.py leaves them out where no standard or report reads them:
    tests/test_verdict_metrics.py), so the two results compare whole."""
    import dataclasses

    from aclnn_cli.judge import judging

    for name, std in list(STANDARDS.items()):
        monkeypatch.setitem(STANDARDS, name, dataclasses.replace(std, reads_ulps=True))
    monkeypatch.setattr(judging, "_STANDARDS", {})


def _case(tmp_path, dtype: str, defect: str | None, shape=(97, 1001), self_range=(-20, 12)):
    text = (f"op: aclnnSiluBackward\ncases:\n  - {{name: c, dtype: {dtype}, shape: {list(shape)}, seed: 5,\n"
            f"     inputs: {{self: {{uniform: {list(self_range)}}}}}}}\n")
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out, "-j", 1).exit_code == 0
    assert run_cli("emulate", out, *(("--defect", defect) if defect else ()), "-j", 1).exit_code == 0
    return M.load(out / "silu_backward-c")


@pytest.mark.parametrize("dtype,defect,self_range", [
    ("float16", None, (-20, 12)), ("bfloat16", None, (-20, 12)), ("float32", None, (-20, 12)),
    ("float16", None, (-1.29, -1.27)), ("float32", None, (-1.2785, -1.2784)),  # (the relief at work)
    ("float16", "exp-overflow", (-2, 92)), ("bfloat16", "exp-overflow", (-2, 92)),  # (NaN: a few, or all)
    ("float16", "fp16-no-upcast", (-20, 12)), ("bfloat16", "bf16-truncate", (-20, 12)),
    ("float16", "flush-subnormals", (-11, 6)), ("bfloat16", "round-half-away", (-20, 12)),
    ("float16", "partial-tile-unwritten", (-20, 12))])
def test_verify_from_the_differing_elements_is_the_dense_verify(tmp_path, monkeypatch, dtype, defect, self_range,
                                                              ulps_measured):
    """A whole case (relief of the default standard included, on the elements that differ), in every standard
    and with chunks of several sizes: the same result JSON as the dense pass."""
    m = _case(tmp_path, dtype, defect, self_range=self_range)
    for standard in sorted(STANDARDS):
        for chunk in (4096, 1 << 16, 0):  # (0: by the path, SPARSE_CHUNK or CHUNK)
            opts = C.Options(standard=standard, chunk=chunk)
            fast = verify_case(m, opts).to_json()
            with monkeypatch.context() as p:
                p.setattr(C, "exact_never_flagged", lambda *a: False)
                dense = verify_case(m, opts).to_json()
            same_result(fast, dense)


def test_a_mostly_identical_chunk_computes_errors_for_the_differing_elements_only(tmp_path, monkeypatch):
    """A correct float16 kernel matches the golden's bits almost everywhere: errors are computed for the
    elements that differ, not for all 65536 of each chunk (so the compare costs about one pass over the bits)."""
    m = _case(tmp_path, "float16", None, shape=(256, 1024))
    sizes = []
    real = C.element_errors

    def spy(a, g, *args, **kw):
        sizes.append(a.size)
        return real(a, g, *args, **kw)

    monkeypatch.setattr(C, "element_errors", spy)
    import aclnn_cli.judge.identical as I
    monkeypatch.setattr(I, "element_errors", spy)
    assert verify_case(m, C.Options()).status == "PASS"
    assert sizes and max(sizes) < 65536 // 16, sizes[:8]


FAULTS = """
import resource, sys
from pathlib import Path
from aclnn_cli.casedir import manifest as M
from aclnn_cli.judge.comparison import Options, compare_range
m = M.load(Path(sys.argv[1]))
def faults(chunks):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    compare_range(m, Options(), 0, chunks * 65536)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults(4)  # (numpy's and the case's first use)
print(faults(16), faults(64))
"""


def test_the_compare_allocates_no_chunk_sized_arrays_per_chunk(tmp_path):
    """Page faults of a float32 compare (most elements differ: the dense pass) grow by next to nothing per chunk:
    its buffers are made once per range and reused (a fresh 256 KiB array per temporary and chunk faults in
    its pages every time, a third of the compare's CPU time). Counted in a fresh process, whose allocator has
    not yet been taught by other tests' large arrays to keep freed memory."""
    m = _case(tmp_path, "float32", None, shape=(64 * 65536 // 1024, 1024))
    done = subprocess.run([sys.executable, "-c", FAULTS, str(m.dir)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    few, many = map(int, done.stdout.split())
    assert many - few < 48 * 16, (few, many)  # (under 16 pages a chunk; one fresh array alone is 64)


def test_a_small_case_identical_to_its_golden_computes_no_element_errors(tmp_path, monkeypatch, ulps_measured):
    """Thousands of small float16 cases, each one chunk read whole: one whose dump has the golden's bits
    computes no per-element errors at all (a pass over the bits proves them 0), and its result is the
    dense pass's."""
    m = _case(tmp_path, "float16", None, shape=(4, 1024))
    out = m.output
    with open(out.golden_path, "rb") as f:
        golden = f.read()
    with open(out.dump_path, "wb") as f:
        f.write(golden)
    sizes = []
    real = C.element_errors

    def spy(a, g, *args, **kw):
        sizes.append(a.size)
        return real(a, g, *args, **kw)

    monkeypatch.setattr(C, "element_errors", spy)
    import aclnn_cli.judge.identical as I
    monkeypatch.setattr(I, "element_errors", spy)
    fast = verify_case(m, C.Options())
    assert fast.status == "PASS" and fast.to_json()["metrics"]["max_rel_error"] == 0.0
    assert [s for s in sizes if s > 16] == []  # (the rule's one-off probe of exact elements is 9 values)
    monkeypatch.setattr(C, "exact_never_flagged", lambda *a: False)
    same_result(fast.to_json(), verify_case(m, C.Options()).to_json())


def test_ranges_compared_one_after_another_reuse_one_workspace_and_keep_their_worst(tmp_path):
    """A worker compares range after range of a large case: the second reuses the first's buffers (no fresh
    pages per range), and the first's worst elements, picked from those buffers, are settled before that."""
    from aclnn_cli.judge import workspace as W
    m = _case(tmp_path, "float32", "fp16-no-upcast", shape=(64, 4096))
    n = m.output.layout.numel
    alone = C.compare_range(m, C.Options(), 0, n // 2)[0].worst_items()
    first = C.compare_range(m, C.Options(), 0, n // 2)[0]
    spare = dict(W._SPARE)
    second = C.compare_range(m, C.Options(), n // 2, n)[0]
    assert spare and all(W._SPARE[k] is v for k, v in spare.items())  # (the same buffers, given back again)
    assert first.worst_items() == alone and alone and alone[0][1] > 0
    assert all(i >= n // 2 for i in second.worst_indices())


def test_judging_built_again_from_equal_parameters_probes_its_rule_once(monkeypatch):
    """The sparse path's probe (exact_never_flagged, memoised by the rule) runs once for a standard and dtype whose
    parameters a caller builds again for every case (equal values, another dict): judging.standard_rule gives the
    one rule; parameters of other values get their own."""
    from aclnn_cli.judge import identical
    from aclnn_cli.judge.judging import standard_rule

    probes = []
    real = identical.element_errors
    monkeypatch.setattr(identical, "element_errors", lambda *a, **k: probes.append(1) or real(*a, **k))
    monkeypatch.setattr(identical, "_PROBED", {})
    std, dtype = STANDARDS["mere-mare"], D.FLOAT16
    rules = [standard_rule(std, std.params(dtype, {"T": 2.0**-9})) for _ in range(5)]
    assert all(r is rules[0] for r in rules)
    assert all(exact_never_flagged(r, dtype, 1e-3) for r in rules) and len(probes) == 1
    other = standard_rule(std, std.params(dtype, {"T": 2.0**-8}))
    assert other is not rules[0] and exact_never_flagged(other, dtype, 1e-3) and len(probes) == 2
