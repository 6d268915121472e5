"""ops-nn's TTK suite for embedding_dense_grad (the 950 kernel's, index/embedding_dense_grad/tests/st/arch35) imports
unmodified as aclnnEmbeddingDenseBackward cases: grad and indices by position, num_weights, padding_idx (negative or
past the last row: no padding row) and scale_grad_by_freq as the API's attributes, y as out; gen, emulate and verify
pass every row. The file is found as tests/test_importers_batchnorm.py finds ops-nn's files (skipped without it)."""

from __future__ import annotations

import json

from helpers import run_cli
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
    report = tmp_path / "v.json"
    run_cli("verify", out, "--json", report)
    statuses = [c["status"] for c in json.loads(report.read_text())["cases"]]
    assert statuses == ["PASS"] * 5
