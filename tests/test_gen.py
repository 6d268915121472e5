"""gen: byte-exact, reproducible, atomic output that matches its manifest."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from aclnn_cli.golden import gen as G
from aclnn_cli.cases.loader import load_cases
from aclnn_cli.golden.gen import generate_case

from helpers import logical, manifest, read_storage, run_cli, tensor, write_yaml

PINNED = """
op: aclnnSiluBackward
cases:
  - {name: pinned, dtype: bfloat16, shape: [3, 5], seed: 42}
"""
# sha256 of the files for PINNED. These bytes must never change across machines or releases
# without a deliberate change of the generator scheme (and of these pins).
PINNED_SHA = {
    "gradOutput.bin": "1e15b11236f80096a3cb166e9908300874f12d07f318ded0520c90b722bf1e6c",
    "self.bin": "69d80d83852133f8208fa86a0138e86d99da9a821ce0e7a84e73d2cc5c34f6de",
    "gradInput.golden.bin": "cb75a6006872907ae147fd28e9a1c5459e8491822d24b54414e9a3acd3c60626",
}


def _gen(tmp_path, text, *extra):
    out = tmp_path / "out"
    result = run_cli("gen", write_yaml(tmp_path, text), "-o", out, *extra)
    assert result.exit_code == 0, result.output
    return out


def test_same_file_and_seed_give_pinned_bytes(tmp_path):
    out = _gen(tmp_path, PINNED)
    case = out / "silu_backward-pinned"
    got = {name: hashlib.sha256((case / name).read_bytes()).hexdigest() for name in PINNED_SHA}
    assert got == PINNED_SHA
    # The first draws, spelled out, so a changed pin can be told from a changed formula.
    x = read_storage(case, tensor(manifest(case), "self")).astype(float)
    assert x[:5].tolist() == [4.6875, -4.0625, -1.53125, 2.125, 5.0625]


def test_output_is_independent_of_chunk_size(tmp_path, monkeypatch):
    text = "op: aclnnLogSigmoidBackward\ncases:\n  - {name: c, dtype: float16, shape: [3, 70001], seed: 9}\n"
    whole = _gen(tmp_path / "a", text) / "log_sigmoid_backward-c"
    (case,) = load_cases([write_yaml(tmp_path, text, "again.yaml")])
    for chunk in (1000, 65536, 77777):
        generate_case(case, tmp_path / f"chunk{chunk}", chunk=chunk)
        for f in ("gradOutput.bin", "self.bin", "buffer.bin", "gradInput.golden.bin", "case.json"):
            a, b = (whole / f).read_bytes(), (tmp_path / f"chunk{chunk}" / case.case_id / f).read_bytes()
            if f == "case.json":  # same content but for the case file's path (and so the text's seal)
                a, b = ({k: v for k, v in json.loads(x).items() if k not in ("source", "text_sha256")} for x in (a, b))
            assert a == b, (chunk, f)


def test_manifest_describes_every_tensor_and_matches_the_files(tmp_path):
    out = _gen(tmp_path, "op: aclnnHardsigmoidBackward\ncases:\n  - {name: m, dtype: bfloat16, shape: [2, 3, 4], product: A3, seed: 3}\n")
    case = out / "hardsigmoid_backward-m"
    m = manifest(case)
    assert (m["op"], m["product"], m["seed"], m["expect_status"]) == ("aclnnHardsigmoidBackward", "A3", 3, 0)
    assert [t["name"] for t in m["tensors"]] == ["gradOutput", "self", "out"]
    for t in m["tensors"]:
        assert (t["dtype"], t["acl_dtype"], t["format"]) == ("bfloat16", 27, "ND")
        assert (t["shape"], t["strides"], t["offset"], t["storage_shape"]) == ([2, 3, 4], [12, 4, 1], 0, [24])
        assert hashlib.sha256((case / t["file"]).read_bytes()).hexdigest() == t["sha256"]
        assert (case / t["file"]).stat().st_size == 24 * 2
    out_t = tensor(m, "out")
    assert out_t["role"] == "output" and out_t["golden"] == "out.golden.bin" and out_t["dump"] == "out.dump.bin"
    x = logical(case, tensor(m, "self")).astype(np.float64)
    dy = logical(case, tensor(m, "gradOutput")).astype(np.float64)
    golden = logical(case, out_t, "golden").astype(np.float64)
    inside = (x > -3) & (x < 3)
    np.testing.assert_array_equal(golden[~inside], 0.0)
    assert inside.any()
    want = dy[inside] / 6  # inside the window: dy/6 rounded once to bf16, i.e. within half a bf16 ulp
    assert (np.abs(golden[inside] - want) <= 2.0**-8 * np.abs(want)).all()


def test_known_answers(tmp_path):
    text = """
op: aclnnSiluBackward
cases:
  - {name: k, dtype: float32, shape: [3], inputs: {self: {values: [0.0, inf, nan]}, gradOutput: {constant: 3.0}}}
"""
    case = _gen(tmp_path, text) / "silu_backward-k"
    g = read_storage(case, tensor(manifest(case), "gradInput"), "golden")
    assert g[0] == 1.5 and np.isnan(g[1]) and np.isnan(g[2])
    text = """
op: aclnnHardsigmoidBackward
cases:
  - {name: k, dtype: bfloat16, shape: [4], inputs: {self: {values: [0.0, 3.0, -3.0, 2.9]}, gradOutput: {constant: 1.0}}}
"""
    case = _gen(tmp_path / "h", text) / "hardsigmoid_backward-k"
    bits = read_storage(case, tensor(manifest(case), "out"), "golden").view(np.uint16)
    # 1/6 in bf16 is 0x3E2B (0.1669921875); outside the open window +0.
    assert bits.tolist() == [0x3E2B, 0, 0, 0x3E2B]
    text = """
op: aclnnLogSigmoidBackward
cases:
  - {name: k, dtype: float16, shape: [3], inputs: {self: {values: [-inf, inf, 0.0]}, gradOutput: {constant: -2.0}}}
"""
    case = _gen(tmp_path / "l", text) / "log_sigmoid_backward-k"
    g = read_storage(case, tensor(manifest(case), "gradInput"), "golden")
    assert g.tolist() == [-2.0, 0.0, -1.0]


def test_interrupted_gen_leaves_nothing_half_written(tmp_path, monkeypatch):
    text = "op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: float32, shape: [100000]}\n"
    out = _gen(tmp_path, text)
    before = {p.name: p.read_bytes() for p in (out / "silu_backward-a").iterdir()}
    calls = {"n": 0}
    real = G.golden

    def dying(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(G, "golden", dying)
    (case,) = load_cases([write_yaml(tmp_path, text.replace("}", ", seed: 1}"), "b.yaml")])
    with pytest.raises(KeyboardInterrupt):
        generate_case(case, out, chunk=10000)
    assert sorted(p.name for p in out.iterdir()) == ["silu_backward-a"]  # no partial directory
    assert {p.name: p.read_bytes() for p in (out / "silu_backward-a").iterdir()} == before


def test_case_name_cannot_escape_output_dir(tmp_path):
    from aclnn_cli.errors import UserError
    from aclnn_cli.tensor.storage import safe_child

    with pytest.raises(UserError):
        safe_child(tmp_path, "../evil")
    with pytest.raises(UserError):
        safe_child(tmp_path, "a/../../evil")
