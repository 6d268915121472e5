"""Flagged elements re-judged in batches across chunks (judge/heldrelief.py) give the metrics of re-judging
them chunk by chunk: counts, maxima, their indices and the worst elements exactly, sums to float64 rounding.
(The two are this tool's own paths: what is proven is that batching changes nothing a verdict reads.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

from aclnn_cli.casedir import manifest as M
from aclnn_cli.judge import comparison as C
from aclnn_cli.judge import heldrelief as H
from aclnn_cli.judge.verify import verify_case

from helpers import emulated_case, run_cli, write_yaml
from test_identical_chunks import SUM_METRICS

SUMS = {k: SUM_METRICS[k] for k in ("mere", "error_balance")}  # (their tolerance: test_identical_chunks.py)


def _case(tmp_path, dtype: str, self_range, shape=(64, 4096)):
    text = (f"op: aclnnSiluBackward\ncases:\n  - {{name: c, dtype: {dtype}, shape: {list(shape)}, seed: 7,\n"
            f"     inputs: {{self: {{uniform: {list(self_range)}}}}}}}\n")
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out, "-j", 1).exit_code == 0
    assert run_cli("emulate", out, "-j", 1).exit_code == 0
    return M.load(out / "silu_backward-c")


def _spoil(m: M.CaseManifest, every: int, factor: float) -> None:
    """Scale every `every`-th element of the dump (a kernel wrong at a few places per chunk)."""
    out = m.output
    a = np.fromfile(out.dump_path, dtype=out.dtype.np_dtype)
    a[::every] = (a[::every].astype(np.float64) * factor).astype(out.dtype.np_dtype)
    a.tofile(out.dump_path)


def _judged(m, monkeypatch, hold: int, limit: int = H.HOLD_LIMIT, chunk: int = 1 << 16):
    with monkeypatch.context() as p:
        p.setattr(H, "HOLD_PER_CHUNK", hold)
        p.setattr(H, "HOLD_LIMIT", limit)
        r = verify_case(m, C.Options(chunk=chunk)).to_json()
    return r


@pytest.mark.parametrize("dtype,self_range,spoil", [
    ("float32", (-1.2785, -1.2784), None),  # (relief at work in every chunk: the result nearly cancels)
    ("float32", (-20, 12), None),
    ("float16", (-1.29, -1.27), None),
    ("bfloat16", (-20, 12), 1013),
    ("float32", (-20, 12), 997),  # (a few elements per chunk still flagged after relief)
    ("float16", (-20, 12), 1009),
])
@pytest.mark.parametrize("limit", [H.HOLD_LIMIT, 3])  # (one batch per range; a batch every few chunks)
def test_batched_relief_gives_the_per_chunk_metrics(tmp_path, monkeypatch, dtype, self_range, spoil, limit):
    m = _case(tmp_path, dtype, self_range)
    if spoil:
        _spoil(m, spoil, 1.05)
    now = _judged(m, monkeypatch, hold=0)
    held = _judged(m, monkeypatch, hold=H.HOLD_PER_CHUNK, limit=limit)
    assert now["metrics"]["relieved"] > 0 or now["metrics"]["violations"] > 0  # (the path under test ran)
    assert held["status"] == now["status"]
    assert held["worst"] == now["worst"]
    for key, value in now["metrics"].items():
        if key in SUMS:
            assert math.isclose(held["metrics"][key], value, rel_tol=SUMS[key], abs_tol=1e-300), key
        else:
            assert held["metrics"][key] == value, key
    if spoil:  # (elements still flagged after relief went through the batch)
        assert now["metrics"]["violations"] > 0


def test_a_chunk_with_many_flagged_elements_is_rejudged_at_once(tmp_path, monkeypatch):
    """A broken kernel flags most of a chunk: nothing is held (one batch per chunk is no worse), and the
    verdict is the per-chunk one."""
    m = _case(tmp_path, "float32", (-20, 12))
    _spoil(m, 2, 1.01)
    taken = []
    real = H.Held.take

    def spy(self, e, base, at=None):
        ok = real(self, e, base, at)
        taken.append(ok)
        return ok

    monkeypatch.setattr(H.Held, "take", spy)
    r = verify_case(m, C.Options()).to_json()
    assert r["status"] == "FAIL" and taken and not any(taken)


def test_a_rows_ops_flagged_elements_are_rejudged_chunk_by_chunk(tmp_path, monkeypatch):
    """A Rows op's relief gathers whole rows: a batch across chunks would hold every row its elements lie in
    (hundreds of MB on a large case), so its flagged elements are re-judged with their chunk, as before."""
    text = ("op: aclnnLayerNormBackward\ncases:\n  - name: c\n    dtype: float32\n    shape: [64, 2048]\n"
            "    attributes: {normalizedShape: [2048], outputMask: [[true, true, true]]}\n")
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out, "-j", 1).exit_code == 0
    assert run_cli("emulate", out, "-j", 1).exit_code == 0
    m = M.load(next(d for d in out.iterdir() if d.is_dir()))
    _spoil(m, 997, 1.05)
    taken = []
    monkeypatch.setattr(H.Held, "take", lambda self, *a: taken.append(a) or False)
    r = verify_case(m, C.Options()).to_json()
    assert r["status"] == "FAIL" and r["metrics"]["violations"] > 0 and not taken


def test_a_long_row_is_evaluated_once_by_relief_not_once_per_chunk(tmp_path, monkeypatch):
    """A Rows op's row longer than a chunk, its dump wrong everywhere: relief's reference runs once per look at
    the row (first look and the relieve-every-element one), not once per chunk (ops-nn's LayerNorm ATK cases
    of one 9.4M-element row took 25 minutes to verify); the verdict is the same as with one chunk."""
    from aclnn_cli.judge import rowrelief

    text = ("op: aclnnSoftmaxBackward\ncases:\n  - {name: c, dtype: float32, shape: [1, 20000], seed: 3,"
            " attributes: {dim: -1}}\n")
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out, "-j", 1).exit_code == 0
    assert run_cli("emulate", out, "-j", 1).exit_code == 0
    m = M.load(out / "softmax_backward-c")
    out_t = m.judged[0]
    a = np.fromfile(out_t.dump_path, dtype=np.float32)
    (a * np.float32(1.1)).tofile(out_t.dump_path)
    calls = []
    real = rowrelief.reference_blocks
    monkeypatch.setattr(rowrelief, "reference_blocks", lambda *args: calls.append(1) or real(*args))
    chunked = verify_case(m, C.Options(chunk=1000)).to_json()
    assert 1 <= len(calls) <= 2
    whole = verify_case(m, C.Options(chunk=1 << 20)).to_json()
    assert chunked["status"] == whole["status"] == "FAIL" and chunked["worst"] == whole["worst"]
    assert chunked["metrics"]["violations"] == whole["metrics"]["violations"] > 0


def test_a_case_judged_again_in_the_process_reuses_its_relief_reference(tmp_path, monkeypatch):
    """The rows relief's reference is kept per process under the manifest's digest (which covers the inputs'
    checksums and the attributes): the same case judged again with other dumps (the defect matrix, a caller trying
    several standards) does not evaluate it again, and the verdict is the same; a case generated from other inputs
    (another seed: another digest) is evaluated afresh; the memo stays within its bytes."""
    from aclnn_cli.judge import rowrelief

    def case(seed: int):
        text = ("op: aclnnSoftmaxBackward\ncases:\n  - {name: c, dtype: float32, shape: [16, 3000], seed: %d,"
                " attributes: {dim: -1}}\n" % seed)
        out = tmp_path / f"out{seed}"
        assert run_cli("gen", write_yaml(tmp_path, text, f"c{seed}.yaml"), "-o", out, "-j", 1).exit_code == 0
        assert run_cli("emulate", out, "-j", 1).exit_code == 0
        m = M.load(out / "softmax_backward-c")
        a = np.fromfile(m.judged[0].dump_path, dtype=np.float32)
        (a * np.float32(1.1)).tofile(m.judged[0].dump_path)
        return m

    calls = []
    real = rowrelief.reference_blocks
    monkeypatch.setattr(rowrelief, "reference_blocks", lambda *args: calls.append(1) or real(*args))
    monkeypatch.setattr(rowrelief, "MEMO", rowrelief.Memo(64 << 20))
    m = case(5)
    first = verify_case(m, C.Options()).to_json()
    assert first["status"] == "FAIL" and calls
    evaluated = len(calls)
    again = verify_case(M.load(m.dir), C.Options(standard="ulp")).to_json()
    same = verify_case(M.load(m.dir), C.Options()).to_json()
    assert len(calls) == evaluated and same == first and again["status"] == "FAIL"
    verify_case(case(6), C.Options())
    assert len(calls) > evaluated
    memo = rowrelief.MEMO
    assert len(memo.entries) == 2
    memo.budget = max(size for _, _, size in memo.entries.values()) * 3 // 2  # (room for one of them)
    verify_case(case(7), C.Options())  # (its own is over a quarter of that: not kept; the oldest leaves)
    assert len(memo.entries) == 1 and 0 < memo.held <= memo.budget
    assert memo.held == sum(size for _, _, size in memo.entries.values())


SINGLE_BLOCK = {
    "matmul": ("op: aclnnMatmul\ncases:\n  - {name: c, dtype: float16, shape: [192, 160], seed: 3,\n"
               "     tensors: {mat2: {shape: [160, 176], layout: transposed}}}\n"),
    "conv": ("op: aclnnConvolutionBackward\ncases:\n  - {name: c, dtype: float16, shape: [4, 8, 20, 20], seed: 5,\n"
             "     tensors: {weight: {shape: [8, 8, 3, 3]}},\n"
             "     attributes: {stride: [1, 1], padding: [1, 1], dilation: [1, 1], outputPadding: [0, 0]}}\n"),
}


@pytest.mark.parametrize("op", sorted(SINGLE_BLOCK))
@pytest.mark.parametrize("factor", [1 + 2.0**-9, 1.05])  # (an element nudged, most of them relieved; one wrong)
def test_a_single_block_contractions_flagged_elements_are_batched_with_the_per_chunk_metrics(tmp_path, monkeypatch,
                                                                                             op, factor):
    """A case that is one block relieved element by element from its own dot products (reference_at: a matmul, a
    convolution) holds its flagged elements for one batch (each chunk's relief gathered the same block again), and
    the verdict and metrics are those of re-judging them chunk by chunk."""
    m = emulated_case(tmp_path, SINGLE_BLOCK[op])
    assert m.op.reference_at is not None and m.geometry.a1 == 1
    _spoil(m, 331, factor)
    taken = []
    real = H.Held.take
    monkeypatch.setattr(H.Held, "take", lambda self, *a: taken.append(real(self, *a)) or taken[-1])
    held = verify_case(m, C.Options(chunk=1024)).to_json()
    assert any(taken)  # (the path under test ran)
    monkeypatch.setattr(H.Held, "take", real)
    with monkeypatch.context() as p:
        p.setattr(H, "HOLD_PER_CHUNK", 0)
        now = verify_case(m, C.Options(chunk=1024)).to_json()
    assert now["metrics"]["relieved"] + now["metrics"]["violations"] > 0
    assert held["status"] == now["status"] and held["worst"] == now["worst"]
    for key, value in now["metrics"].items():
        if key in SUMS:
            assert math.isclose(held["metrics"][key], value, rel_tol=SUMS[key], abs_tol=1e-300), key
        else:
            assert held["metrics"][key] == value, key


def test_few_far_apart_inputs_are_read_element_by_element_with_the_maps_values(tmp_path, monkeypatch):
    """The flagged elements' inputs of a large case, few and far apart, are read with a pread each
    (StorageFile.read_at: no page fault per element); the metrics are bit for bit those of reading them through
    the map (FEW_PER_PAGE past any storage), where relief had work to do."""
    from aclnn_cli.tensor.storage import StorageFile

    m = _case(tmp_path, "float32", (-20, 12), shape=(80, 4096))  # (1.25 MiB inputs: opened as storage, not loaded)
    calls = []
    real = StorageFile.read_at
    monkeypatch.setattr(StorageFile, "read_at", lambda self, at: (calls.append(at.size), real(self, at))[1])
    by_element = verify_case(m, C.Options()).to_json()
    assert calls and by_element["metrics"]["relieved"] > 0
    monkeypatch.setattr(C, "FEW_PER_PAGE", 1 << 62)
    calls.clear()
    mapped = verify_case(m, C.Options()).to_json()
    assert not calls and mapped == by_element


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64"])
def test_read_at_gives_the_storage_elements_at_any_positions(tmp_path, dtype):
    from aclnn_cli.errors import UserError
    from aclnn_cli.tensor import dtypes as D
    from aclnn_cli.tensor.storage import StorageFile

    np_dtype = D.lookup(dtype).np_dtype
    values = (np.arange(5000) * 7 - 900).astype(np_dtype)
    path = tmp_path / "x.bin"
    values.tofile(path)
    positions = np.array([4999, 0, 17, 17, 2500, 1024], dtype=np.int64)  # (any order, repeated, both ends)
    with StorageFile(path, np_dtype, values.size) as f:
        got = f.read_at(positions)
        assert got.dtype == np_dtype and got.tobytes() == values[positions].tobytes()
        assert f.read_at(np.empty(0, dtype=np.int64)).size == 0
    with StorageFile(path, np_dtype, values.size + 10) as f:  # (a file shorter than its view says)
        with pytest.raises(UserError, match="file ended"):
            f.read_at(np.array([values.size + 3]))
