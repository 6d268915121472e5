"""The HTML report's error data, gathered in verify's streaming pass (judge/errorstats.py): a signed log2
ulp histogram, a bounded sample that keeps the flagged elements, an error map of 2+-dim views. Known values
on hand-made arrays; the same numbers whatever the chunking or the split into worker ranges; the skipped
tile of the catalogue's defect in the map block where it lies."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.judge import errorstats as S
from aclnn_cli.judge.compare import element_errors
from aclnn_cli.judge.results import CaseResult, json_safe
from aclnn_cli.judge.spill import Spilled

from helpers import run_cli, write_yaml

F32 = D.FLOAT32


def collect(a, g, shape, chunks=None, violation=None, inputs=None):
    """ErrorStats of actual `a` against golden `g` (float32), fed chunk by chunk like the comparison does."""
    a, g = np.asarray(a, np.float32), np.asarray(g, np.float32)
    inputs = {"self": np.arange(a.size, dtype=np.float64)} if inputs is None else inputs
    stats = S.ErrorStats.for_view(shape, tuple(inputs), {"judged_dtype": "float32"})
    for s, e in chunks or [(0, a.size)]:
        errs = element_errors(a[s:e], g[s:e], F32.smallest_normal, F32)
        errs.violation = None if violation is None else np.asarray(violation)[s:e]
        stats.add(errs, s, lambda flat: {k: v[flat] for k, v in inputs.items()})
    return stats


def test_the_histogram_counts_signed_ulp_errors_in_log2_bins():
    one = np.float32(1.0)
    below = np.nextafter(one, np.float32(0))  # half an ulp of 1.0 under it: toward zero
    ulp = np.float32(2.0**-23)
    g = [1.0] * 8 + [-2.0, float("nan")]
    a = [1.0, 1.0, below, 1 + ulp, 1 + ulp, 1 + 3 * ulp, 1 + 600 * ulp, -1.0, -2.0 + 2 * 2 ** -22, 0.0]
    h = collect(a, g, (10,)).summary(passed=False).json()["ulp_histogram"]
    # 0.5 ulp toward zero (bin -1); 1 ulp away (bin 0) x2; 3 ulp (bin 1); 600 ulp (bin 9); a sign flip of 1.0
    # (2^24 ulp, |a| = |g|: the away side); -2 + 2^-21 is 2 ulp(-2) nearer zero (bin 1); NaN golden: non-finite
    assert h == {"exact": 2, "nonfinite": 1, "toward_zero": [[-1, 1], [1, 1]],
                 "away_from_zero": [[0, 2], [1, 1], [9, 1], [24, 1]]}


def test_a_truncating_kernel_is_one_sided():
    rng = np.random.default_rng(3)
    exact = rng.standard_normal(5000)
    g = D.round_from_f64(exact, D.BFLOAT16)
    truncated = (exact.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    a = truncated.astype(D.BFLOAT16.np_dtype)
    stats = S.ErrorStats.for_view((5000,), (), {})
    e = element_errors(a, g, D.BFLOAT16.smallest_normal, D.BFLOAT16)
    stats.add(e, 0, lambda flat: {})
    h = stats.summary(passed=False).json()["ulp_histogram"]
    # truncated: never above the exact value; under a power of two the golden rounds up to it (half an ulp of it)
    assert h["away_from_zero"] == [] and [k for k, _ in h["toward_zero"]] == [-1, 0]
    assert sum(n for _, n in h["toward_zero"]) == int((a != g).sum())
    assert h["exact"] == int((a == g).sum()) > 1000


def test_spread_points_cover_the_view_one_per_stretch_and_fit_any_size():
    for numel in (1, 255, 256, 257, 4096, 10**9, 2**62):
        p = S.spread_points(numel)
        k = min(numel, S.SPREAD)
        assert p.size == k and (np.diff(p) > 0).all() and p[0] >= 0 and p[-1] < numel
        if numel > S.SPREAD:  # one in each of k equal stretches
            stretch = (np.arange(k, dtype=object) * numel // k)
            assert all(stretch[j] <= int(p[j]) < (stretch[j + 1] if j + 1 < k else numel) for j in range(k))
    assert (S.spread_points(4096) == S.spread_points(4096)).all()


def test_flagged_elements_are_always_in_the_sample():
    n = 5000
    g = np.ones(n, np.float32)
    a = g.copy()
    bad = [7, 1234, 4999]  # not spread points
    assert not set(bad) & set(S.spread_points(n).tolist())
    a[bad] = 3.0
    violation = np.zeros(n, bool)
    violation[bad] = True
    for passed in (False, True):
        sample = collect(a, g, (n,), violation=violation).summary(passed).json()["sample"]
        flagged = [i for i, f in zip(sample["index"], sample["flagged"]) if f]
        assert flagged == bad and sample["flagged_total"] == 3
        row = sample["index"].index(1234)
        assert sample["expected"][row] == 1.0 and sample["actual"][row] == 3.0
        assert sample["ulp_error"][row] == 2 * 2**23 and sample["inputs"]["self"][row] == 1234.0
        assert len(sample["index"]) == (S.PASSING_SPREAD if passed else S.SPREAD) + 3


def test_many_flagged_elements_keep_a_bounded_set_fixed_by_their_indices():
    n = 3000
    g = np.ones(n, np.float32)
    a = np.full(n, 2.0, np.float32)
    violation = np.ones(n, bool)
    whole = collect(a, g, (n,), violation=violation).summary(False).json()["sample"]
    chunked = collect(a, g, (n,), chunks=[(0, 999), (999, 2500), (2500, n)], violation=violation).summary(False).json()
    assert chunked["sample"] == whole and whole["flagged_total"] == n
    keys = S.index_hash(np.arange(n))
    lowest = set(np.argsort(keys)[:S.FLAGGED].tolist())
    assert lowest <= set(whole["index"])  # the FLAGGED of lowest hash, plus the spread points (all flagged)
    assert len(whole["index"]) == len(lowest | set(S.spread_points(n).tolist()))


def test_chunks_and_worker_ranges_give_the_same_data_as_one_pass():
    rng = np.random.default_rng(1)
    shape = (50, 61)
    n = 50 * 61
    g = rng.standard_normal(n).astype(np.float32)
    a = (g * (1 + rng.standard_normal(n) * 1e-6)).astype(np.float32)
    a[[5, 700, 3000]] = [np.nan, 9.0, -g[3000]]
    violation = np.abs(a - g) > 1e-3
    one = collect(a, g, shape, violation=violation).summary(False).json()
    chunked = collect(a, g, shape, chunks=[(0, 77), (77, 1000), (1000, n)], violation=violation).summary(False).json()
    parts = [collect(a, g, shape, chunks=[r], violation=violation) for r in [(0, 1500), (1500, 1501), (1501, n)]]
    parts = [pickle.loads(pickle.dumps(p)) for p in parts]  # (a worker's range travels pickled)
    merged = parts[2]
    merged.merge(parts[0])
    merged.merge(parts[1])
    same = lambda x: json.dumps(json_safe(x))  # (NaN != NaN: compared as JSON text)
    assert same(chunked) == same(one) and same(merged.summary(False).json()) == same(one)
    # a passing case read in one chunk samples only what it keeps: the same as thinning the whole spread
    passing = [collect(a, g, shape, chunks=c, violation=violation).summary(True).json()
               for c in ([(0, n)], [(0, 77), (77, n)])]
    assert same(passing[0]) == same(passing[1]) and len(passing[0]["sample"]["index"]) == S.PASSING_SPREAD + 3


def test_the_map_puts_errors_in_the_blocks_where_they_are():
    shape = (64, 33)  # 2112 elements; the grid is 32 x 17 blocks of 2 x 2
    g = np.ones(2112, np.float32)
    a = g.copy()
    a[2048:] = 5.0  # the last 64 elements, as the unwritten last partial tile of 256
    violation = a != g
    m = collect(a, g, shape, chunks=[(0, 1000), (1000, 2112)], violation=violation).summary(False).json()["map"]
    assert (m["rows"], m["cols"], m["block"]) == (64, 33, [2, 2])
    flagged, ulp = np.array(m["flagged"]), np.array(m["ulp_max"])
    assert flagged.shape == ulp.shape == (32, 17)
    assert flagged[:31].sum() == 0 and ulp[:31].max() == 0  # nothing above the last block row
    # row 62 from column 2 on, all of row 63: 2 + 4 * 15 + 2 per block row
    assert flagged[31].tolist() == [2] + [4] * 15 + [2] and flagged.sum() == 64
    assert ulp[31] == pytest.approx(np.full(17, 4 * 2.0**23), rel=1e-3)  # (4 significant digits in the JSON)
    passed = collect(a, g, shape, violation=violation).summary(True).json()["map"]
    assert passed["block"] == [4, 4] and np.array(passed["flagged"]).sum() == 64


def test_a_wide_row_map_and_a_1d_view_without_one():
    rng = np.random.default_rng(2)
    g = rng.standard_normal(2 * 200_000).astype(np.float32)
    a = g.copy()
    a[123_456] = 7.0  # row 0, column 123,456: block column 123,456 // 6,250 = 19
    chunks = [(0, 65_536), (65_536, 131_072), (131_072, 400_000)]
    m = collect(a, g, (2, 200_000), chunks=chunks).summary(False).json()["map"]
    ulp = np.array(m["ulp_max"])
    assert m["block"] == [1, 6250] and ulp.shape == (2, 32)
    assert np.flatnonzero(ulp[0]).tolist() == [19] and ulp[1].max() == 0
    assert collect(a[:1000], g[:1000], (1000,)).summary(False).json()["map"] is None


def test_the_error_data_of_a_result_is_kept_out_of_memory_and_reads_back(tmp_path):
    data = {"judged_dtype": "float16", "sample": {"index": [1, 2], "expected": [0.5, float("nan")]}, "map": None}
    r = CaseResult("c", "op", "float16", [4], "A2", "PASS", "mere-mare", "", errors=data, path="/o/c")
    assert type(r._errors) is Spilled  # (a handle: the data is in this process's spill file)
    back = pickle.loads(pickle.dumps(r))  # as a worker's result reaches the parent
    assert back.errors["sample"]["index"] == [1, 2] and np.isnan(back.errors["sample"]["expected"][1])
    assert back.to_json()["errors"]["sample"]["expected"] == [0.5, "nan"] and "errors" not in r.to_json(errors=False)


def test_verify_json_carries_the_error_data_of_the_skipped_tile(tmp_path):
    text = "op: aclnnSiluBackward\ncases:\n  - {name: t, dtype: float16, shape: [64, 33], seed: 4}\n"
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out).exit_code == 0
    assert run_cli("emulate", out, "--defect", "partial-tile-unwritten").exit_code == 0
    assert run_cli("verify", out, "--json", tmp_path / "v.json").exit_code == 1
    data = json.loads((tmp_path / "v.json").read_text())
    assert data["schema"] == "aclnn-cli/verify/4"
    errors = data["cases"][0]["errors"]
    assert errors["judged_dtype"] == "float16" and errors["attributes"] == {}
    flagged = np.array(errors["map"]["flagged"])
    assert flagged[:31].sum() == 0 and flagged[31].sum() == 64  # the tile: the last 64 elements
    sample = errors["sample"]
    assert sample["flagged_total"] == 64 and sum(sample["flagged"]) == 64
    assert all(i >= 2048 for i, f in zip(sample["index"], sample["flagged"]) if f)
    assert set(sample["inputs"]) == {"gradOutput", "self"}


def test_large_files_and_worker_ranges_give_the_data_of_one_pass(tmp_path):
    """Inputs over 1 MiB are read chunk by chunk (not whole) and closed when a range is done: the sample's
    inputs are read before that; ranges compared apart (as workers do, pickled) merge to the one-pass data."""
    from aclnn_cli.casedir import manifest as M
    from aclnn_cli.judge.comparison import Options, compare_range
    from aclnn_cli.judge.verify import verify_case

    text = "op: aclnnSiluBackward\ncases:\n  - {name: big, dtype: float32, shape: [600, 500], seed: 6}\n"
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out, "-j", 1).exit_code == 0
    # (300,000 % 256 = 224 elements never written)
    assert run_cli("emulate", out, "--defect", "partial-tile-unwritten", "-j", 1).exit_code == 0
    m = M.load(out / "silu_backward-big")
    opts = Options(error_data=True, chunk=40_000)
    result = verify_case(m, opts)
    assert result.status == "FAIL" and result.errors["sample"]["flagged_total"] == 224
    parts = [pickle.loads(pickle.dumps(compare_range(m, opts, s, e)[0])) for s, e in ((0, 123_457), (123_457, 300_000))]
    parts[0].merge(parts[1])
    same = lambda x: json.dumps(json_safe(x))
    assert same(parts[0].errors.summary(False).json()) == same(result.errors)
    flagged = np.array(result.errors["map"]["flagged"])
    assert flagged.sum() == 224 and flagged[:-1].sum() == 0  # the last 224 elements: the last block row


def test_elements_only_the_relief_accepted_are_sampled_as_forgiven(tmp_path):
    """SiluBackward in float32 at its derivative's zero: a correct kernel is thousands of ulps off there relative
    to the golden, which the default gate's relief forgives; those elements are in the sample (not flagged),
    however few among thousands, so the report can draw them as forgiven."""
    text = ("op: aclnnSiluBackward\ncases:\n  - {name: z, dtype: float32, shape: [64, 64], seed: 3,\n"
            "     inputs: {self: {uniform: [-1.2785, -1.2784]}}}\n")
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out, "-j", 1).exit_code == 0
    assert run_cli("emulate", out, "-j", 1).exit_code == 0
    assert run_cli("verify", out, "--json", tmp_path / "v.json", "-j", 1).exit_code == 0
    case = json.loads((tmp_path / "v.json").read_text())["cases"][0]
    sample, relieved = case["errors"]["sample"], case["metrics"]["relieved"]
    assert case["status"] == "PASS" and relieved > 0 and sample["relieved_total"] == relieved
    kept = min(relieved, S.RELIEVED)
    big = [u for u, f in zip(sample["ulp_error"], sample["flagged"]) if abs(u) > 64 and not f]
    assert len(big) >= kept and sum(sample["flagged"]) == 0


def test_one_process_and_workers_give_the_same_error_data(tmp_path):
    """Results cross from workers to the parent with their error data (kept in each process's spill file)."""
    from aclnn_cli.casedir import dirs as casedirs
    from aclnn_cli.judge.verify import Options, verify_dirs

    text = ("op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: [float16, bfloat16], shape: [[40, 50], [300]], "
            "seed: 8}\n")
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out, "-j", 1).exit_code == 0
    assert run_cli("emulate", out, "--defect", "bf16-truncate", "-j", 1).exit_code == 0
    runs = [verify_dirs(casedirs.find_cases(out), Options(error_data=True), jobs=j) for j in (1, 2)]
    texts = [[json.dumps(c.to_json()) for c in run.cases] for run in runs]
    assert texts[0] == texts[1] and len(texts[0]) == 4 and all('"errors": {' in t for t in texts[0])
    assert {c.status for c in runs[1].cases} == {"PASS", "FAIL"}  # (bf16 truncated: biased toward zero)


def test_the_map_fold_equals_a_brute_force_maximum_per_block_on_any_chunk():
    """fold_max against np.maximum.at over each element's block, on random shapes and chunk bounds, with the
    largest value put on the chunk's last element (the one a reduceat over clipped runs used to drop)."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        rows, cols = int(rng.integers(1, 12)), int(rng.integers(1, 4000))
        g = S.MapGeometry.of((rows, cols))
        total = rows * cols
        start = int(rng.integers(0, total))
        n = int(rng.integers(1, total - start + 1))
        values = rng.random(n).astype(np.float32)
        values[-1] = 9.0
        got = np.zeros(g.grid[0] * g.grid[1], np.float32)
        g.fold_max(got, values, start)
        want = np.zeros_like(got)
        np.maximum.at(want, g.cells(np.arange(start, start + n)), values)
        assert np.array_equal(got, want), (rows, cols, start, n)


def test_json_safe_is_its_definition_on_random_nested_data():
    """results.json_safe copies lists of numbers whose exact sum is finite as they are (no call per number): on random
    nested data (infinities of both signs, NaN, overflowing sums, numpy scalars and arrays, bools, strings, None,
    tuples) it gives what its definition (each float mapped, each container copied element by element) gives."""
    import math
    import random

    from aclnn_cli.judge.results import json_safe

    def definition(value):
        if isinstance(value, float):
            return value if math.isfinite(value) else "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        if isinstance(value, dict):
            return {k: definition(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [definition(v) for v in value]
        return value

    rng = random.Random(5)
    leaves = [1.0, -0.0, math.inf, -math.inf, math.nan, 3, True, None, "s", np.float32(np.inf), np.float64(2.0),
              1e308, -1e308, np.zeros(2)]

    def data(depth=0):
        r = rng.random()
        if depth > 3 or r < 0.3:
            return rng.choice(leaves)
        if r < 0.6:
            return [data(depth + 1) for _ in range(rng.randrange(6))]
        if r < 0.75:
            return tuple(data(depth + 1) for _ in range(rng.randrange(4)))
        return {str(i): data(depth + 1) for i in range(rng.randrange(4))}

    for _ in range(20000):
        value = data()
        assert repr(json_safe(value)) == repr(definition(value)), value
