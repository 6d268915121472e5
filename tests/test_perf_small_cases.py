"""Issue 9's fast paths for many small cases give exactly what the general paths give (no timings here:
bench/small_cases.py measures; these pin the results, bit for bit where numbers are involved)."""

from __future__ import annotations

import json
import pickle
import tracemalloc

import numpy as np
import pytest
import yaml

from aclnn_cli.tensor import dtypes as D
from aclnn_cli.casedir import manifest as M
from aclnn_cli.casedir import dirs as casedirs
from aclnn_cli.judge import verify as V
from aclnn_cli.judge.compare import Metrics, element_errors
from aclnn_cli.judge.widening import _ulp_of_wide, ulp_of, widen
from aclnn_cli.errors import UserError
from aclnn_cli.golden.gen import generate_cases
from aclnn_cli.cases.loader import load_cases
from aclnn_cli.device.emulate import emulate_dirs
from aclnn_cli.judge.results import CaseResult, Repro
from aclnn_cli.tensor.storage import StorageFile
from aclnn_cli.tensor.wholefiles import LoadedFile
from aclnn_cli.values.yamlsafe import parse

from helpers import write_yaml

SMALL = """
op: aclnnSiluBackward
defaults: {dtype: float16, shape: [64]}
cases:
  - {name: a, seed: 1}
  - {name: b, seed: 2, dtype: bfloat16}
  - {name: c, seed: 3, dtype: float32, shape: [3, 5]}
  - {name: d, seed: 4, tensors: {self: {layout: transposed}}, shape: [4, 6]}
"""


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16])
def test_widening_and_ulps_from_the_wide_bits_match_the_casts_on_every_16_bit_value(dtype):
    every = np.arange(1 << 16, dtype=np.uint16).view(dtype.np_dtype)
    wide = widen(every, np.dtype(np.float32))
    assert np.array_equal(wide.view(np.uint32), every.astype(np.float32).view(np.uint32))
    ulps = _ulp_of_wide(wide, dtype)
    assert np.array_equal(ulps.view(np.uint32), ulp_of(every, dtype, np.dtype(np.float32)).view(np.uint32))


def _eager_worst(chunks: list[np.ndarray], k: int = 5) -> list[int]:
    """The k largest relative errors (index order among equals as the heap keeps them)."""
    rel = np.concatenate(chunks)
    order = sorted(((float(r), i) for i, r in enumerate(rel) if r > 0), reverse=True)
    return [i for _, i in order[:k]]


def test_worst_elements_picked_late_are_the_ones_picked_at_once():
    rng = np.random.default_rng(7)
    g = rng.standard_normal(3000).astype(np.float32)
    a = (g * (1 + rng.standard_normal(3000).astype(np.float32) * 1e-3)).astype(np.float32)
    chunks, whole = [(0, 1000), (1000, 2500), (2500, 3000)], Metrics()
    parts = []
    for s, e in chunks:
        errs = element_errors(a[s:e], g[s:e], D.FLOAT32.smallest_normal, D.FLOAT32)
        whole.add(errs, s)
        one = Metrics()
        one.add(errs, s)
        parts.append(pickle.loads(pickle.dumps(one)))  # a worker's metrics travel pickled
    merged = parts[0]
    for p in parts[1:]:
        merged.merge(p)
    full = element_errors(a, g, D.FLOAT32.smallest_normal, D.FLOAT32)
    assert whole.worst_indices() == merged.worst_indices() == _eager_worst([full.rel])


def test_a_compact_case_result_reads_back_what_was_put_in():
    metrics = {"elements": 64, "compared": 63, "special_mismatches": 1, "violations": 2, "max_abs_error": 0.5,
               "max_rel_error": 1e-3, "mere": 1e-5, "mare": 1e-3, "rmse": 0.25, "error_balance": -1e-7,
               "max_ulp_error": 3.0, "mean_ulp_error": 0.5, "small_error_rate": 0.0, "zero_golden_share": 0.125,
               "relieved": 4}
    params = {"T": 0.0009765625, "mare": 10.0}
    r = CaseResult("silu-a", "aclnnSiluBackward", "float16", [8, 8], "A2", "PASS", "mere-mare", "fine", params=params,
                   metrics=metrics, path="/out/silu-a", repro=Repro("aclnn-cli gen x.yaml", "/out", " --strict"))
    back = pickle.loads(pickle.dumps(r))
    for c in (r, back):
        assert c.metrics == metrics and type(c.metrics["elements"]) is int and c.params == params
        assert c.path == "/out/silu-a" and c.shape == [8, 8] and c.worst == [] and c.error_rows == []
        assert c.repro == "aclnn-cli gen x.yaml --case silu-a -o /out && aclnn-cli verify /out/silu-a --strict"
    assert back == r
    assert json.dumps(back.to_json()) == json.dumps(r.to_json())
    odd = CaseResult("x", "?", "?", [], "?", "ERROR", "mere-mare", "bad", metrics={"mere": "nan"}, path="x")
    assert odd.metrics == {"mere": "nan"} and odd.path == "x" and odd.params == {}
    assert pickle.loads(pickle.dumps(odd)) == odd


def test_a_pickled_case_result_keeps_its_packed_fields_packed():
    """Workers send each result's own packed fields as plain bytes and tuples (results.CaseResult.__reduce__):
    they must come back as the same packed types, reading the same values."""
    from aclnn_cli.judge import results as R
    rows = [{"output": "y", "metric": "MERE", "value": 1e-5, "limit": 1e-3, "comparison": "<", "within": True,
             "note": ""}]
    metrics = dict(zip(R.METRIC_KEYS, [64, 64, 0, 0] + [0.5] * 10 + [0]))
    r = CaseResult("a", "op", "float16", [64], "A2", "PASS", "mere-mare", "fine", metrics=metrics, benchmark=metrics,
                   path="/out/a", rows=rows)
    back = pickle.loads(pickle.dumps(r))
    for name in ("_metrics", "_benchmark", "_path", "_rows"):
        assert type(getattr(back, name)) is type(getattr(r, name)) is not tuple
    assert back == r and back.rows == rows and back.benchmark == metrics and back.path == "/out/a"


@pytest.mark.parametrize("problem", ["short", "long", "directory", "missing"])
def test_a_small_file_read_whole_fails_as_the_chunked_reader_does(tmp_path, problem):
    path = tmp_path / "x.bin"
    if problem == "directory":
        path.mkdir()
    elif problem != "missing":
        np.zeros(10 if problem == "short" else 14, np.float16).tofile(path)
    messages = []
    for reader in (lambda: LoadedFile(str(path), np.float16, 12, what="dump"),
                   lambda: StorageFile(str(path), np.float16, 12, what="dump", exact_size=True)):
        with pytest.raises(UserError) as exc:
            reader()
        messages.append(str(exc.value))
    assert messages[0] == messages[1]


def test_small_files_read_whole_give_the_chunked_readers_values_and_checksums(tmp_path):
    data = np.random.default_rng(1).standard_normal(40).astype(np.float32)
    data.tofile(tmp_path / "x.bin")
    sha = __import__("hashlib").sha256(data.tobytes()).hexdigest()
    whole = LoadedFile(str(tmp_path / "x.bin"), np.float32, 40, sha256=sha)
    whole.check_sha256()
    with StorageFile(tmp_path / "x.bin", np.float32, 40) as f:
        assert np.array_equal(whole.map, f.read_range(0, 40))
    with pytest.raises(UserError, match="changed since gen"):
        LoadedFile(str(tmp_path / "x.bin"), np.float32, 40, sha256="0" * 64).check_sha256()


def test_manifest_paths_are_text_and_paths_alike(tmp_path):
    out = tmp_path / "out"
    generate_cases(load_cases([write_yaml(tmp_path, SMALL)]), out)
    for d in casedirs.find_cases(out):
        m = M.load(d)
        for t in m.tensors:
            assert t.file == d / t.file.name and str(t.file) == t.file_path
        assert m.output.dump == d / m.output.dump.name and m.output.golden_path == str(d / m.output.golden.name)
    assert [d.name for d in casedirs.find_cases(out)] == sorted(p.name for p in out.iterdir() if not p.name.startswith("."))


def test_verify_results_are_the_same_by_one_process_and_by_workers(tmp_path):
    out = tmp_path / "out"
    generate_cases(load_cases([write_yaml(tmp_path, SMALL)]), out)
    emulate_dirs(casedirs.find_cases(out))
    (out / "silu_backward-b" / "gradInput.dump.bin").write_bytes(b"\0" * 128)  # a failing case
    (out / "silu_backward-c" / "status.txt").unlink()
    runs = [V.verify_dirs(casedirs.find_cases(out), V.Options(), jobs=j) for j in (1, 2)]
    assert [c.to_json() for c in runs[0].cases] == [c.to_json() for c in runs[1].cases]
    assert [c.status for c in runs[0].cases] == ["PASS", "FAIL", "PASS", "PASS"]
    assert runs[0].cases[1].worst and runs[0].cases[1].repro.startswith("aclnn-cli gen ")


YAML_DOCS = [
    """op: x
defaults: &d {dtype: float16, shape: [4]}
cases:
  - {name: a, seed: 1}
  - <<: *d
    name: b
  - &c {name: c, inputs: {self: {uniform: [-1, 1]}}}
  - *c
  - name: d
    nested: [{a: 1}, {b: 2}, [{c: 3}]]
  - [1, 2, {x: y}]
  - {n: null, b: true, f: 1.5e3, h: 0x10, s: '007'}
""",
    "- {a: 1}\n- {b: [{c: 1}]}\n",
    "a: [{x: 1}, {y: &z 2}, {w: *z}]\n",
]


@pytest.mark.parametrize("text", YAML_DOCS)
def test_case_files_constructed_item_by_item_read_as_pyyaml_reads_them(text):
    assert parse("t", text.encode()) == yaml.safe_load(text)


def test_a_large_case_file_is_not_held_as_yaml_nodes():
    text = "op: aclnnSiluBackward\ncases:\n" + "".join(f"  - {{name: c{i:05d}, seed: {i}}}\n" for i in range(10_000))
    tracemalloc.start()
    try:
        doc = parse("t", text.encode())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(doc["cases"]) == 10_000 and doc["cases"][-1] == {"name": "c09999", "seed": 9999}
    assert peak < 12 << 20  # the nodes of all 10,000 cases took over 20 MB


def test_reports_written_case_by_case_are_the_same_bytes(tmp_path):
    from aclnn_cli.report.formats import verify_json, write_json, write_verify_json
    from aclnn_cli.report.junit import junit_xml, write_junit
    from aclnn_cli.judge.results import RunResult
    worst = {"index": 3, "coords": [0, 3], "inputs": {"self": 1.5, "gradOutput": float("nan")}, "expected": 1.0,
             "actual": float("inf"), "abs_error": 0.5, "rel_error": 0.5, "ulp_error": 2.0}
    cases = [
        CaseResult("a<&>\"'\n\tx", "op", "float16", [2, 3], "A2", "PASS", "mere-mare", "fine", params={"T": 0.1}, path="/o/a"),
        CaseResult("b", "op", "float16", [2], "A2", "FAIL", "mere-mare", "MERE 1 >= T & <x>", path="/o/b",
                   worst=[worst, dict(worst, mismatch="expected NaN, got 0")], repro="aclnn-cli gen x --case b",
                   metrics={"mere": float("nan"), "x": [1, 2]}),
        CaseResult("c", "?", "?", [], "?", "ERROR", "mere-mare", "bad \u00e9\u4e2d", path="c"),
        CaseResult("d", "op", "bfloat16", [1], "910", "STATUS", "mere-mare", "phase one", kind="contract", path="/o/d"),
    ]
    for run in (RunResult(cases), RunResult([]), RunResult(cases[:1])):
        write_json(tmp_path / "a.json", verify_json(run, "ulp"))
        write_verify_json(tmp_path / "b.json", run, "ulp")
        write_junit(tmp_path / "b.xml", run)
        assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
        assert (tmp_path / "b.xml").read_text(encoding="utf-8") == junit_xml([c.to_json() for c in run.cases])


@pytest.mark.parametrize("given", ["defaults", "values"])
def test_the_case_results_own_init_stores_what_its_fields_descriptors_would(given):
    """CaseResult.__init__ is written out (a run makes one per case); it must store each field as assigning it
    through its _Compact descriptor does, the dataclass's way."""
    from dataclasses import fields
    from aclnn_cli.judge import results as R
    metrics = dict(zip(R.METRIC_KEYS, [8, 8, 0, 1] + [0.25] * 10 + [2]))
    rows = [{"output": "y", "metric": "MARE", "value": 2.0, "limit": 1.0, "comparison": "<", "within": False,
             "note": "at element 3"}]
    values = {"params": {"T": 1e-3}, "metrics": metrics, "benchmark": metrics, "worst": [{"index": 3}],
              "repro": Repro("aclnn-cli gen s.yaml", "/o", ""), "path": "/o/c", "kind": "contract", "rows": rows,
              "error_rows": [{"index": 3}], "errors": {"ulp_histogram": [1, 2]}}
    head = ("c", "op", "float16", [2, 4], "A2", "FAIL", "mere-mare", "why")
    kw = {} if given == "defaults" else values
    mine = CaseResult(*head, **kw)
    theirs = object.__new__(CaseResult)
    for f, value in zip(fields(CaseResult), head):
        setattr(theirs, f.name, value)
    for f in fields(CaseResult)[len(head):]:
        setattr(theirs, f.name, kw.get(f.name, f.default))
    assert mine == theirs and json.dumps(mine.to_json()) == json.dumps(theirs.to_json())
    for slot in R._SLOTS:
        a, b = getattr(mine, slot), getattr(theirs, slot)
        assert type(a) is type(b) and (a == b or slot == "_errors"), slot  # (errors: spilled, each its own handle)


def test_a_case_is_judged_once_and_its_manifest_carries_nothing_of_it(tmp_path, monkeypatch):
    """How a case is judged is worked out once per case in a batch (judging.case_judging), handed to the small-case
    pass and to verify_case, and kept nowhere on the manifest: a manifest pickles as it was loaded, and the
    judging of a pickled one is the same."""
    from aclnn_cli.casedir import manifest as M
    from aclnn_cli.cases.loader import load_cases
    from aclnn_cli.golden.gen import generate_cases
    from aclnn_cli.judge import judging, verify
    from aclnn_cli.judge.comparison import Options
    (tmp_path / "s.yaml").write_text("op: aclnnSiluBackward\ncases:\n  - {name: a, dtype: float16, shape: [[8], [9]]}\n")
    generate_cases(load_cases([tmp_path / "s.yaml"]), tmp_path / "out")
    manifests = [M.load(d) for d in casedirs.find_cases(tmp_path / "out")]
    before = [set(m.__dict__) for m in manifests]
    calls = []
    real = judging.case_judging
    monkeypatch.setattr(verify, "case_judging", lambda m, o: calls.append(m) or real(m, o))
    opts = Options(standard="allclose")
    results = verify._verify_batch(manifests, opts)
    assert len(results) == 2 and len(calls) == 2 and set(map(id, calls)) == set(map(id, manifests))
    added = set().union(*(set(m.__dict__) - b for m, b in zip(manifests, before)))
    assert not any(k.startswith("_") for k in added), added  # (its own cached attributes only: inputs, judged)
    back = pickle.loads(pickle.dumps(manifests[0]))
    assert real(back, opts)[0].params == real(manifests[0], opts)[0].params