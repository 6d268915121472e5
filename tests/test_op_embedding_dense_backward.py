"""aclnnEmbeddingDenseBackward: goldens against an oracle that shares nothing with the op or the Scatter family, an
independent float32 kernel (ATen's CPU order) over every bundled case, the 950 kernel's order by hand, and the
defects and legitimate variants through emulate and verify, up to 65,536 rows into 8 weights.

The oracle reads the generated case directories through the manifest's numbers alone (tests/harness.py: shape,
strides, offset), so a row added into the wrong output row, an index read with the wrong stride or a partial
written to the wrong elements shows up as a wrong golden. Its algebra is the doc's: out[w] = sum of grad's rows
with index w (w != paddingIdx, w inside [0, numWeights)), over the count of w with scaleGradByFreq, in Fractions.
"""

from __future__ import annotations

import shutil
from collections import Counter
from exactq import Fraction
from pathlib import Path

import numpy as np
import pytest

import harness
from aclnn_cli.tensor import dtypes as D
from aclnn_cli.ops.scatter.embedding_dense_backward import SPEC
from helpers import run_cli, verify_records, write_yaml
from rowblocks import bundled_emulated, not_passing, write_dump
from test_op_batch_norm_backward import rounded_bits


def logical(case: Path, m: dict, name: str) -> np.ndarray:
    t = harness.tensors(m)[name]
    return harness.view(harness.storage(case, t), t).astype(np.float64)


def oracle(case: Path, m: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """out's exact values in row-major order, as (sums, denominators, specials): the exact value of element i is
    sums[i] / denominators[i] (sums of the finite grad values in units of 1 / unit, divided by the count of the
    weight's rows under scaleGradByFreq), unless specials[i] (the float sum of the non-finite values reaching it)
    is nonzero or NaN. sums: int64 where every one fits, else Python integers (an object array)."""
    attrs = {a["name"]: a["value"] for a in m.get("attributes", [])}
    width, pad, scale = attrs["numWeights"], attrs["paddingIdx"], attrs["scaleGradByFreq"]
    grad = logical(case, m, "grad")
    d = grad.shape[-1] if grad.ndim else 1
    rows = grad.reshape(-1, d) if d else np.zeros((0, 0))
    index = [int(v) for v in logical(case, m, "indices").reshape(-1)]
    counts = Counter(index)
    finite = rows[np.isfinite(rows)]
    unit = max([v.as_integer_ratio()[1] for v in finite.tolist()], default=1)  # (a power of 2: every value's multiple)
    exact, special = _sums(rows, index, width, pad, unit)
    per = [unit * (max(counts[w], 1) if scale else 1) for w in range(width)]  # (a row no index hits: 0)
    sums = np.array([e for er in exact for e in er], dtype=np.int64 if isinstance(exact, np.ndarray) else object)
    dens = np.repeat(np.array(per, dtype=object), d)
    return sums, dens, np.array([v for sr in special for v in sr], np.float64)


def _sums(rows: np.ndarray, index: list, width: int, pad, unit: int):
    """Per weight and column: the exact sum of the finite values in units of 1 / unit, and the float sum of the
    non-finite ones. In int64 where every partial sum fits (|v| unit times the rows under 2^62: each v unit an
    integer, exactly; an int64 array), else in Python's integers, a value at a time (lists)."""
    d = rows.shape[1] if rows.ndim == 2 else 0
    if d == 0:  # (rows of no columns: nothing to sum)
        return np.zeros((width, 0), np.int64), np.zeros((width, 0))
    keep = np.array([0 <= w < width and w != pad for w in index], bool)
    rows, idx = rows[keep], np.asarray(index, np.int64)[keep]
    finite = np.isfinite(rows)
    special = np.zeros((width, d))
    np.add.at(special, idx, np.where(finite, 0.0, rows))
    scaled = np.where(finite, rows, 0.0) * unit  # (a power of 2: exact, and an integer)
    if rows.size == 0 or float(np.max(np.abs(scaled))) * max(len(idx), 1) < 2.0**62:
        exact = np.zeros((width, d), np.int64)
        np.add.at(exact, idx, scaled.astype(np.int64))
        return exact, special
    exact = [[0] * d for _ in range(width)]
    for row, w in zip(scaled.tolist(), idx.tolist()):
        for j, v in enumerate(row):
            exact[w][j] += int(v)
    return exact, special


def _golden_matches(case: Path, m: dict) -> int:
    """Compare every golden element of a case with the oracle: specials as floats, the rest rounded once from the
    exact value. A sum over a power of 2 under 2^53 in magnitude is exact as a float64 quotient, which a cast
    rounds once (numpy's conversion, not the tool's); any other through Fractions (oracle.rounded_bits)."""
    t = harness.tensors(m)["out"]
    dtype = D.lookup(t["dtype"])
    sums, dens, specials = oracle(case, m)
    got = harness.view(harness.storage(case, t, "golden"), t).reshape(-1)
    special = (specials != 0) | np.isnan(specials)
    if special.any():
        g, s = got[special].astype(np.float64), specials[special]
        assert np.array_equal(np.isnan(g), np.isnan(s)) and np.array_equal(g[~np.isnan(g)], s[~np.isnan(s)]), case.name
    uint = dtype.uint_dtype if dtype.name != "float32" else np.uint32
    bits = got[~special].view(uint)
    e, p = sums[~special], dens[~special]
    dyadic = all(int(q) & (int(q) - 1) == 0 for q in set(p.tolist()))
    if sums.dtype == np.int64 and dyadic and (e.size == 0 or np.max(np.abs(e)) < 2**53):
        wide = e.astype(np.float64) / p.astype(np.float64)  # (exact: an integer under 2^53 over a power of 2)
        with np.errstate(over="ignore"):  # (past the dtype's largest finite value's half ulp: infinity)
            want = wide.astype(dtype.np_dtype).view(uint)
    else:
        want = rounded_bits([Fraction(int(a), int(b)) for a, b in zip(e.tolist(), p.tolist())], dtype).astype(uint)
    assert np.array_equal(bits, want), case.name
    return int(sums.size)


@pytest.fixture(scope="module")
def suite(tmp_path_factory, bundled_produced):
    return bundled_emulated(tmp_path_factory, bundled_produced, "embedding_dense_backward")


def positive_cases(root: Path):
    for case in sorted(p.parent for p in root.glob("*/case.json")):
        m = harness.load(case)
        if m["expect_status"] == 0:
            yield case, m


def test_goldens_equal_the_oracle_rounded_once(suite):
    """Every golden of every bundled positive case (dtypes, ranks, paddingIdx, scaleGradByFreq, 65,536 rows into
    8 weights, strided, special values) is the oracle's exact value rounded once, bit for bit."""
    compared = sum(_golden_matches(case, m) for case, m in positive_cases(suite))
    assert compared > 40_000


def aten_float32(grad: np.ndarray, index: np.ndarray, attrs: dict) -> np.ndarray:
    """ATen's CPU embedding_dense_backward (aten/src/ATen/native/Embedding.cpp, embedding_dense_backward_cpu) in
    numpy float32: rows in index order, grad_weight[k].add_(grad[i], scale) with scale = 1 / counts[k] (a double
    narrowed to the float alpha) when scaleGradByFreq; rows of padding_idx skipped."""
    f = np.float32
    width, pad = attrs["numWeights"], attrs["paddingIdx"]
    d = grad.shape[-1]
    rows = grad.reshape(-1, d).astype(f)
    index = index.reshape(-1).astype(np.int64)
    counts = Counter(index.tolist())
    out = np.zeros((width, d), f)
    with np.errstate(all="ignore"):
        for i, k in enumerate(index.tolist()):
            if k != pad and 0 <= k < width:
                alpha = f(1.0 / counts[k]) if attrs["scaleGradByFreq"] else f(1)
                out[k] = out[k] + alpha * rows[i]
    return out


def test_an_independent_float32_implementation_passes_every_bundled_case(suite, tmp_path):
    """ATen's order written as the dumps of every bundled positive case: verify passes them all."""
    work = tmp_path / "aten"
    shutil.copytree(suite, work)
    wrote = 0
    for case, m in positive_cases(work):
        if 0 in harness.tensors(m)["grad"]["shape"]:
            continue
        attrs = {a["name"]: a["value"] for a in m.get("attributes", [])}
        out = aten_float32(logical(case, m, "grad"), logical(case, m, "indices"), attrs)
        write_dump(case, harness.tensors(m)["out"], out)
        wrote += 1
    assert wrote >= 80
    bad = not_passing(work, tmp_path / "aten.json")
    assert not bad, bad


def _block(grad, index, width=4, pad=-1, scale=False):
    grad = np.asarray(grad, np.float32)
    index = np.asarray(index, np.int64)
    counts = Counter(index.tolist())
    return {"grad": grad.reshape(len(index), -1, 1), "indices": index.reshape(-1, 1, 1),
            "indexCount": np.array([counts[int(i)] for i in index], np.int64).reshape(-1, 1, 1),
            "numWeights": width, "paddingIdx": pad, "scaleGradByFreq": scale}


def test_kernel_follows_the_source_order():
    """Eleven rows into index 1 by hand in float32 (ProcessPerGradGroup: groups of 5 summed from 0, each group added
    to the running sum), times fl(1 / 11) with scaleGradByFreq; index 3 is paddingIdx and stays zero."""
    f = np.float32
    v = np.array([1e8, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1], f)
    groups = [f(0), f(0), f(0)]
    for i, x in enumerate(v):
        groups[i // 5] = f(groups[i // 5] + x)
    want = f(f(f(f(0) + groups[0]) + groups[1]) + groups[2])
    assert want == f(100000008) and np.cumsum(v, dtype=f)[-1] == f(1e8)  # (the group order is visible here)
    grad = np.concatenate([v, [5.0, 6.0]]).reshape(-1, 1)
    index = [1] * 11 + [3, 0]
    got = SPEC.kernel(_block(grad, index, pad=3))
    assert got.shape == (4, 1) and got[1, 0] == want and got[3, 0] == 0 and got[0, 0] == 6.0
    scaled = SPEC.kernel(_block(grad, index, pad=3, scale=True))
    assert scaled[1, 0] == want * (f(1) / f(11))


DEFECT_YAML = """\
op: aclnnEmbeddingDenseBackward
defaults: {product: "950", seed: 31, dtype: [float32, float16, bfloat16]}
cases:
  - {name: dup, shape: [4096, 8], attributes: {numWeights: 8, paddingIdx: 3, scaleGradByFreq: [false, true]}}
  - {name: big, shape: [65536, 2], attributes: {numWeights: 8, paddingIdx: 3, scaleGradByFreq: [false, true]}}
"""
LEGITIMATE = ("emb-sequential", "emb-reversed", "emb-pairwise", "emb-core-partials")
DEFECTS = ("emb-last-write-wins", "emb-padding-kept", "emb-scale-missing", "emb-scale-twice", "emb-fp16-accumulation",
           "emb-bf16-accumulation", "emb-off-by-one", "emb-row-stride", "emb-zeros")


@pytest.fixture(scope="module")
def defect_suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("emb_defects")
    out = root / "out"
    assert run_cli("gen", write_yaml(root, DEFECT_YAML, "emb.yaml"), "-o", out).exit_code == 0
    return out


def _verdicts(suite: Path, tmp: Path, variant: str | None) -> dict[str, str]:
    work = tmp / (variant or "correct")
    shutil.copytree(suite, work)
    r = run_cli("emulate", work, "-j", "1", *(("--defect", variant) if variant else ()))
    assert r.exit_code == 0, r.output[-2000:]
    return {cid: c["status"] for cid, c in verify_records(work)[1].items()}


@pytest.mark.parametrize("variant", (None, *LEGITIMATE))
def test_legitimate_orders_pass(defect_suite, tmp_path, variant):
    verdicts = _verdicts(defect_suite, tmp_path, variant)
    assert len(verdicts) == 12 and set(verdicts.values()) == {"PASS"}, verdicts


@pytest.mark.parametrize("variant", DEFECTS)
def test_defects_fail_in_every_dtype(defect_suite, tmp_path, variant):
    """Each defect fails every case it can show in (the scale defects where scaleGradByFreq is on), fp32, fp16
    and bf16, at 4,096 rows into 8 weights and at 65,536."""
    verdicts = _verdicts(defect_suite, tmp_path, variant)
    shows = {c: v for c, v in verdicts.items() if "scale" not in variant or "scaleGradByFreq-true" in c}
    assert len(shows) >= 6 and set(shows.values()) == {"FAIL"}, verdicts
