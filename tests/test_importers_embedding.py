"""ops-nn's TTK suite for embedding_dense_grad (the 950 kernel's, index/embedding_dense_grad/tests/st/arch35) imports
unmodified as aclnnEmbeddingDenseBackward cases: grad and indices by position, num_weights, padding_idx (negative or
past the last row: no padding row) and scale_grad_by_freq as the API's attributes, y as out; gen, emulate and verify
pass every row. The file is found as tests/test_importers_batchnorm.py finds ops-nn's files (skipped without it)."""

from __future__ import annotations

import json

from helpers import run_cli, verify_records
from test_importers_batchnorm import by_name, expand, imported, suite, tensors

TTK = "index/embedding_dense_grad/tests/st/arch35/ttk_kernel_embedding_dense_grad_st.csv"


def test_ttk_suite_imports_every_row():
    result = imported(suite(TTK), skip=True)
    assert result.skipped == [] and len(by_name(result)) == 5
    cases = expand(result)
    assert {c.op.name for c in cases.values()} == {"aclnnEmbeddingDenseBackward"}
    row = cases["embedding_dense_grad_random_51_float32_int64_false"]
    attrs = dict(row.attributes)
    assert attrs == {"numWeights": 15, "paddingIdx": -28, "scaleGradByFreq": False}
    t = tensors(row)
    assert t["grad"].layout.shape == (8, 10, 30, 15) and t["indices"].layout.shape == (8, 10, 30)
    assert t["indices"].dtype.name == "int64" and t["indices"].fill.describe() == {"randint": [0, 14]}
    assert t["out"].layout.shape == (15, 15) and t["out"].dtype.name == "float32"
    assert dict(cases["embedding_dense_grad_random_143_float16_int32_false"].attributes)["paddingIdx"] == 415


def test_every_row_passes_gen_emulate_verify(tmp_path):
    out = tmp_path / "out"
    for args in (("gen", suite(TTK), "-o", out), ("emulate", out, "-j", "1")):
        r = run_cli(*args)
        assert r.exit_code == 0, r.output[-2000:]
    statuses = [c["status"] for c in verify_records(out)[1].values()]
    assert statuses == ["PASS"] * 5


# ---- the ATK suite of embedding_dense_grad_v2: its executor draws the indices itself -----------------------------

ATK = "index/embedding_dense_grad_v2/tests/st/aclnnEmbeddingDenseBackward/atk_aclnnEmbeddingDenseBackward.json"
SMALL = 200_000  # the cases gen, emulate and verify run here: grad of at most this many elements (the folder's 189
# are run by `make catalogue`)


def test_atk_indices_take_the_ops_domain_whatever_the_files_range(tmp_path):
    """The executor (executor_aclnnEmbeddingDenseBackward.py) replaces indices by randint(0, numWeights) of the
    file's shape: the case keeps the shape and dtype and takes the op's default fill (OpSpec.redrawn)."""
    src = tmp_path / "atk_emb.json"
    src.write_text(json.dumps([{"id": 0, "aclnn_name": "EmbeddingDenseBackward", "inputs": [
        {"name": "grad", "type": "tensor", "dtype": "fp32", "shape": [6, 4], "range_values": [-1, 1]},
        {"name": "indices", "type": "tensor", "dtype": "int64", "shape": [6], "range_values": [-5, 500]},
        {"name": "numWeights", "type": "attr", "dtype": "int", "range_values": 7},
        {"name": "paddingIdx", "type": "attr", "dtype": "int", "range_values": -1},
        {"name": "scaleGradByFreq", "type": "attr", "dtype": "bool", "range_values": False}]}]))
    case = next(iter(expand(imported(src)).values()))
    t = tensors(case)
    assert t["indices"].layout.shape == (6,) and t["indices"].dtype.name == "int64"
    assert t["indices"].fill.describe() == {"randint": [0, 6]}
    assert t["grad"].fill.describe() == {"uniform": [-1.0, 1.0]}


def test_atk_suite_of_the_v2_folder_imports_and_its_small_cases_pass(tmp_path):
    """201 cases: 189 import (12 give scaleGradByFreq as 'nan', 'inf' or '-inf', not a bool: skipped, named), and
    every one of up to SMALL elements passes gen -> emulate -> verify."""
    path = suite(ATK)
    result = imported(path, skip=True)
    assert len(by_name(result)) == 189 and len(result.skipped) == 12
    assert all("scaleGradByFreq" in s.reason for s in result.skipped)
    picks = [a for c in expand(result).values() if tensors(c)["grad"].layout.numel <= SMALL
             for a in ("--case", c.case_id)]
    assert len(picks) // 2 >= 70
    out = tmp_path / "out"
    for args in (("gen", path, "-o", out, "--skip-unsupported", *picks), ("emulate", out)):
        r = run_cli(*args)
        assert r.exit_code == 0, r.output[-2000:]
    statuses = [c["status"] for c in verify_records(out)[1].values()]
    assert len(statuses) == len(picks) // 2 and set(statuses) == {"PASS"}
