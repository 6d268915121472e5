"""Issue 5: chunking, workers and shards change nothing but speed; report merges shard results."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from aclnn_cli.device import emulate as E
from aclnn_cli.golden import gen as G
from aclnn_cli.casedir import manifest as M
from aclnn_cli.casedir import dirs as casedirs
from aclnn_cli.pipeline import stages as pipeline
from aclnn_cli.judge import verify as V
from aclnn_cli.cases.loader import load_cases
from aclnn_cli.cli.main import BUNDLED
from aclnn_cli.casedir.shard import shard_ids

from helpers import run_cli, write_yaml

SUITE = """
op: aclnnSiluBackward
cases:
  - {name: r, dtype: [float32, float16, bfloat16], shape: [70001], seed: 5}
  - {name: s, dtype: bfloat16, shape: [33, 17], seed: 6, tensors: {self: {layout: transposed}, gradInput: {layout: {gap: 3, tail: 2}}}}
  - {name: z, dtype: float16, shape: [4096], inputs: {self: {uniform: [-1.4, -1.15]}}}
"""


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file() and p.suffix != ".json"}


def _verdicts(out: Path, **kw) -> dict:
    run = V.verify_dirs(casedirs.find_cases(out), V.Options(**kw))
    return {c.case_id: (c.status, c.metrics["violations"], c.metrics["special_mismatches"], c.worst[0]["index"] if c.worst else None)
            for c in run.cases}


def test_chunked_and_unchunked_runs_give_identical_files_and_verdicts(tmp_path):
    cases = load_cases([write_yaml(tmp_path, SUITE)])
    runs = {}
    for name, chunk in (("small", 1000), ("odd", 77777), ("whole", 1 << 22)):
        out = tmp_path / name
        for c in cases:
            G.generate_case(c, out, chunk=chunk)
        for d in casedirs.find_cases(out):
            E.emulate_case(M.load(d), chunk=chunk)
        runs[name] = (_files(out), _verdicts(out, chunk=chunk))
    assert runs["small"][0] == runs["whole"][0] == runs["odd"][0]
    assert runs["small"][1] == runs["whole"][1] == runs["odd"][1]
    assert all(v[0] == "PASS" for v in runs["whole"][1].values())


def test_jobs_1_and_4_give_identical_files_even_when_cases_are_split(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "SPLIT", 20_000)  # split the 70,001-element cases into ranges across workers
    monkeypatch.setattr(pipeline, "RANGE", 5_000)
    p = write_yaml(tmp_path, SUITE)
    outs = {}
    for jobs in (1, 4):
        out = tmp_path / f"j{jobs}"
        assert run_cli("gen", p, "-o", out, "--jobs", jobs).exit_code == 0
        assert run_cli("emulate", out, "--jobs", jobs).exit_code == 0
        assert run_cli("verify", out, "--jobs", jobs, "--json", tmp_path / f"v{jobs}.json").exit_code == 0
        outs[jobs] = _files(out)
    assert outs[1] == outs[4]
    v1, v4 = (json.loads((tmp_path / f"v{j}.json").read_text())["cases"] for j in (1, 4))
    strip = lambda cs: [(c["case_id"], c["status"], c["metrics"]["violations"], c["metrics"]["max_rel_error"]) for c in cs]
    assert strip(v1) == strip(v4)


def test_shards_cover_every_case_exactly_once_and_balance_the_work():
    cases = [(c.case_id, c.numel) for c in load_cases([BUNDLED])]
    for n in (1, 2, 3, 7):
        shards = [shard_ids(cases, i, n) for i in range(n)]
        assert sorted(x for s in shards for x in s) == sorted(c for c, _ in cases)
        loads = [sum(max(e, 1) for c, e in cases if c in s) for s in shards]
        if n > 1:
            assert max(loads) <= 1.6 * (sum(loads) / n)
    assert shard_ids(list(reversed(cases)), 1, 3) == shard_ids(cases, 1, 3)  # order does not matter


def test_sharded_ci_and_report_merge(tmp_path):
    p = write_yaml(tmp_path, SUITE)
    out = tmp_path / "out"
    for i in (1, 2, 3):
        assert run_cli("gen", p, "-o", out, "--shard", f"{i}/3").exit_code == 0
    assert len(casedirs.find_cases(out)) == 5
    assert run_cli("emulate", out, "--defect", "bf16-truncate").exit_code == 0
    for i in (1, 2, 3):
        run_cli("verify", out, "--shard", f"{i}/3", "--json", tmp_path / "results" / f"shard{i}.json")
    result = run_cli("report", tmp_path / "results", "--junit", tmp_path / "all.xml", "--json", tmp_path / "all.json")
    assert result.exit_code == 1  # bf16 truncation is caught in the merged result
    merged = json.loads((tmp_path / "all.json").read_text())
    assert merged["summary"]["total"] == 5 and merged["summary"]["FAIL"] >= 1
    root = ET.parse(tmp_path / "all.xml").getroot()
    assert len(root.findall("testcase")) == 5
    dup = run_cli("report", tmp_path / "results", tmp_path / "results" / "shard1.json")
    assert dup.exit_code == 2 and "shards overlap" in dup.output


def test_incremental_gen_skips_unchanged_and_regenerates_damaged(tmp_path):
    p = write_yaml(tmp_path, SUITE)
    out = tmp_path / "out"
    assert "generated 5 cases" in run_cli("gen", p, "-o", out).output
    assert "generated 0 cases" in run_cli("gen", p, "-o", out).output
    victim = out / "silu_backward-r-float16" / "self.bin"
    data = bytearray(victim.read_bytes())
    data[10] ^= 1
    victim.write_bytes(bytes(data))
    again = run_cli("gen", p, "-o", out)
    assert "generated 1 cases" in again.output and victim.read_bytes() != bytes(data)
    assert "generated 5 cases" in run_cli("gen", p, "-o", out, "--force").output


def test_a_huge_case_never_maps_its_whole_storage(tmp_path, monkeypatch):
    """Contiguous tensors go through pread/pwrite of chunk buffers, never a whole-file memory map."""
    import numpy as np

    maps = []
    real = np.memmap.__new__

    def spy(cls, *args, **kwargs):
        maps.append(kwargs.get("shape"))
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(np.memmap, "__new__", spy)
    text = "op: aclnnLogSigmoidBackward\ncases:\n  - {name: h, dtype: float32, shape: [300000]}\n"
    out = tmp_path / "out"
    assert run_cli("gen", write_yaml(tmp_path, text), "-o", out, "--jobs", 1).exit_code == 0
    assert run_cli("emulate", out, "--jobs", 1).exit_code == 0
    assert run_cli("verify", out, "--jobs", 1).exit_code == 0
    assert maps == []
